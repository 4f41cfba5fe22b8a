//! The names of dead-letter objects against a real Redis: a record keeps the name it
//! was first given whatever it is read with, a partial read gets the rest of its
//! object's records from the stream, and finishing (written or dropped) forgets the
//! names with the records.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_store::{DeadLetterItem, NamedObject, Settlement};
use std::time::Duration;

/// `n` dead-letter records in partition 0's stream, read by worker `w1`.
async fn dead_letters(h: &Harness, n: usize) -> Vec<DeadLetterItem> {
    let p0 = h.p0();
    publish(&h.store, &p0, &[event("e1", n)]).await;
    for held in read(&h.store, &p0, "sender", n).await {
        let settlement = Settlement::DeadLetter {
            entry: dead_letter_entry(&held.delivery),
        };
        assert!(settle(&h.store, &p0, &held, &settlement).await);
    }
    assert_eq!(
        h.store.promote_due_dead_letters(&p0, Duration::ZERO, n).await.unwrap(),
        n
    );
    let items = h
        .store
        .read_dead_letters(&p0, "w1", n, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(items.len(), n);
    items
}

fn ids(items: &[&DeadLetterItem]) -> Vec<String> {
    items.iter().map(|i| i.entry_id.clone()).collect()
}

async fn name(h: &Harness, groups: &[(&str, Vec<String>)]) -> Vec<NamedObject> {
    let groups: Vec<(String, Vec<String>)> = groups.iter().map(|(n, ids)| ((*n).to_owned(), ids.clone())).collect();
    h.store.name_dead_letter_objects(&h.p0(), &groups).await.unwrap()
}

/// (name, members, ids of the records read from the stream) of each object answered.
fn shape(objects: &[NamedObject]) -> Vec<(String, Vec<String>, Vec<String>)> {
    objects
        .iter()
        .map(|o| {
            let others = o.others.iter().map(|i| i.entry_id.clone()).collect();
            (o.name.clone(), o.members.clone(), others)
        })
        .collect()
}

fn object_of(h: &Harness, id: &str) -> Option<String> {
    hget(&mut h.redis(), &h.p0().deadletter_object_of(), id)
}

fn members_of(h: &Harness, name: &str) -> Option<String> {
    hget(&mut h.redis(), &h.p0().deadletter_object_members(), name)
}

#[tokio::test]
async fn a_record_keeps_the_name_it_was_first_given() {
    let h = Harness::start().await;
    let items = dead_letters(&h, 3).await;
    let (a, b, c) = (&items[0], &items[1], &items[2]);

    let first = name(&h, &[("one", ids(&[a, b]))]).await;
    assert_eq!(shape(&first), [("one".to_owned(), ids(&[a, b]), vec![])]);

    // Read again with a newer record of the same hour: only the new one takes the new name.
    let again = name(&h, &[("two", ids(&[a, b, c]))]).await;
    assert_eq!(
        shape(&again),
        [
            ("one".to_owned(), ids(&[a, b]), vec![]),
            ("two".to_owned(), ids(&[c]), vec![])
        ]
    );
    assert_eq!(object_of(&h, &a.entry_id).as_deref(), Some("one"));
    assert_eq!(object_of(&h, &c.entry_id).as_deref(), Some("two"));
    assert_eq!(members_of(&h, "one"), Some(format!("{} {}", a.entry_id, b.entry_id)));
    assert_eq!(members_of(&h, "two"), Some(c.entry_id.clone()));
}

#[tokio::test]
async fn a_partial_read_gets_the_rest_of_its_object_from_the_stream() {
    let h = Harness::start().await;
    let items = dead_letters(&h, 3).await;
    let (a, b, c) = (&items[0], &items[1], &items[2]);
    name(&h, &[("one", ids(&[a, b, c]))]).await;

    let objects = name(&h, &[("other", ids(&[b]))]).await;
    assert_eq!(shape(&objects), [("one".to_owned(), ids(&[a, b, c]), ids(&[a, c]))]);
    let others = &objects[0].others;
    assert_eq!((&others[0].entry, &others[0].event_json), (&a.entry, &a.event_json));
    assert_eq!((&others[1].entry, &others[1].event_json), (&c.entry, &c.event_json));
    assert_eq!(others[1].partition, 0);
    assert_eq!(members_of(&h, "other"), None, "a name no record took is not kept");
}

#[tokio::test]
async fn finishing_forgets_the_names_with_the_records() {
    let h = Harness::start().await;
    let items = dead_letters(&h, 3).await;
    let (a, b, c) = (&items[0], &items[1], &items[2]);
    name(&h, &[("one", ids(&[a, b])), ("two", ids(&[c]))]).await;

    assert_eq!(h.store.finish_dead_letters(&h.p0(), &ids(&[a])).await.unwrap(), 1);
    assert_eq!(object_of(&h, &a.entry_id), None);
    assert_eq!(members_of(&h, "one"), Some(b.entry_id.clone()), "b is still to write");
    let objects = name(&h, &[("three", ids(&[b]))]).await;
    assert_eq!(shape(&objects), [("one".to_owned(), ids(&[b]), vec![])]);

    // Finished as written, or dropped after give_up_after: the same step either way.
    assert_eq!(h.store.finish_dead_letters(&h.p0(), &ids(&[b, c])).await.unwrap(), 2);
    let mut redis = h.redis();
    assert!(!exists(&mut redis, &h.p0().deadletter_object_of()));
    assert!(!exists(&mut redis, &h.p0().deadletter_object_members()));
    assert_eq!(xlen(&mut redis, &h.p0().deadletter()), 0);
}

#[tokio::test]
async fn a_record_finished_meanwhile_gets_no_name() {
    let h = Harness::start().await;
    let items = dead_letters(&h, 2).await;
    let (a, b) = (&items[0], &items[1]);
    // Another worker wrote and finished `a` after this one read it.
    h.store.finish_dead_letters(&h.p0(), &ids(&[a])).await.unwrap();

    let objects = name(&h, &[("one", ids(&[a, b]))]).await;
    assert_eq!(shape(&objects), [("one".to_owned(), ids(&[b]), vec![])]);
    assert_eq!(object_of(&h, &a.entry_id), None);
}

#[tokio::test]
async fn a_name_already_taken_is_not_given_to_other_records() {
    let h = Harness::start().await;
    let items = dead_letters(&h, 2).await;
    let (a, b) = (&items[0], &items[1]);
    name(&h, &[("one", ids(&[a]))]).await;

    let objects = name(&h, &[("one", ids(&[b]))]).await;
    assert!(objects.is_empty(), "{objects:?}");
    assert_eq!(object_of(&h, &b.entry_id), None);
    assert_eq!(members_of(&h, "one"), Some(a.entry_id.clone()));
}
