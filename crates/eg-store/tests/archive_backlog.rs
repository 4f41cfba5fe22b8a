//! The archive backlog against a real Redis (docs/archive.md): `publish.lua` appends every
//! event of an archived topic to the partition's archive stream in the step that stores
//! it — events with no delivery too, duplicates not — and holds the stream to its bound:
//! `refuse` writes nothing at all, `drop-oldest` trims and says how many.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::UnixMillis;
use eg_store::queue::{ArchiveAppend, DuplicateCheck, EventToStore, Routes, WhenFull};
use eg_store::{Catalog, PublishOutcome};
use std::time::Duration;

fn archive(max_backlog: u64, when_full: WhenFull) -> ArchiveAppend {
    ArchiveAppend {
        topic: "orders".into(),
        max_backlog,
        when_full,
    }
}

/// Publishes `events` to partition 0 with `archive` (and `check`); the outcome and the
/// number of backlog entries dropped.
async fn publish(
    h: &Harness,
    events: &[EventToStore],
    check: Option<&DuplicateCheck>,
    archive: &ArchiveAppend,
) -> (PublishOutcome, u64) {
    let version = Catalog::new(h.store.clone()).version().await.unwrap();
    h.store
        .publish_archived(&h.p0(), version, events, &Routes::default(), check, Some(archive))
        .await
        .unwrap()
}

/// The archive stream's entries: (topic, body), oldest first.
fn backlog(h: &Harness) -> Vec<(String, String)> {
    let entries: Vec<(String, Vec<(String, String)>)> =
        query(&mut h.redis(), &["XRANGE", &h.p0().archive_backlog(), "-", "+"]);
    entries
        .into_iter()
        .map(|(_, fields)| {
            let field = |name: &str| fields.iter().find(|(k, _)| k == name).unwrap().1.clone();
            (field("t"), field("b"))
        })
        .collect()
}

fn ready_count(h: &Harness) -> usize {
    ready_entries(&mut h.redis(), &h.p0().ready()).len()
}

#[tokio::test]
async fn every_event_is_archived_with_its_deliveries_and_one_matching_nothing_alone() {
    let h = Harness::start().await;
    let events = [event("e1", 1), event("e2", 0), event("e3", 2)];
    let (outcome, dropped) = publish(&h, &events, None, &archive(10, WhenFull::Refuse)).await;
    assert_eq!(outcome, PublishOutcome::Stored { duplicates: vec![] });
    assert_eq!(dropped, 0);
    assert_eq!(
        backlog(&h),
        [
            ("orders".to_owned(), body("e1")),
            ("orders".to_owned(), body("e2")),
            ("orders".to_owned(), body("e3")),
        ]
    );
    // e2 matched nothing: archived, but nothing queued and no event hash written for it.
    assert!(!exists(&mut h.redis(), &h.p0().event("e2")));
    assert_eq!(ready_count(&h), 3, "e1's delivery and e3's two, none for e2");
}

#[tokio::test]
async fn a_duplicate_within_the_window_is_not_archived_again() {
    let h = Harness::start().await;
    let check = |ids: &[&str]| DuplicateCheck {
        topic: "orders".into(),
        identities: ids.iter().map(|i| (*i).to_owned()).collect(),
        window: Duration::from_secs(60),
        now: UnixMillis(1_000),
    };
    let a = archive(10, WhenFull::Refuse);
    publish(&h, &[event("e1", 0), event("e2", 1)], Some(&check(&["a", "b"])), &a).await;
    let (outcome, _) = publish(&h, &[event("e3", 0), event("e4", 1)], Some(&check(&["a", "c"])), &a).await;
    assert_eq!(outcome, PublishOutcome::Stored { duplicates: vec![0] });
    let bodies: Vec<String> = backlog(&h).into_iter().map(|(_, b)| b).collect();
    assert_eq!(bodies, [body("e1"), body("e2"), body("e4")]);
}

#[tokio::test]
async fn at_the_bound_refuse_stores_nothing_of_the_publish() {
    let h = Harness::start().await;
    let a = archive(3, WhenFull::Refuse);
    publish(&h, &[event("e1", 1), event("e2", 1)], None, &a).await;
    // Two more would make four: the whole request is refused, deliveries included.
    let (outcome, dropped) = publish(&h, &[event("e3", 1), event("e4", 0)], None, &a).await;
    assert_eq!(outcome, PublishOutcome::ArchiveFull { backlog: 2 });
    assert_eq!(dropped, 0);
    assert_eq!(backlog(&h).len(), 2);
    assert_eq!(ready_count(&h), 2, "nothing of e3 queued");
    // One more still fits.
    let (outcome, _) = publish(&h, &[event("e5", 1)], None, &a).await;
    assert_eq!(outcome, PublishOutcome::Stored { duplicates: vec![] });
    assert_eq!(backlog(&h).len(), 3);
}

#[tokio::test]
async fn at_the_bound_drop_oldest_stores_and_counts_what_it_dropped() {
    let h = Harness::start().await;
    let a = archive(3, WhenFull::DropOldest);
    publish(&h, &[event("e1", 1), event("e2", 1)], None, &a).await;
    let (outcome, dropped) = publish(&h, &[event("e3", 1), event("e4", 0)], None, &a).await;
    assert_eq!(outcome, PublishOutcome::Stored { duplicates: vec![] });
    assert_eq!(dropped, 1);
    let bodies: Vec<String> = backlog(&h).into_iter().map(|(_, b)| b).collect();
    assert_eq!(bodies, [body("e2"), body("e3"), body("e4")], "e1, the oldest, dropped");
    assert_eq!(ready_count(&h), 3, "deliveries are not the archive's to drop");
}

#[tokio::test]
async fn a_topic_without_an_archive_writes_no_backlog() {
    let h = Harness::start().await;
    let version = Catalog::new(h.store.clone()).version().await.unwrap();
    h.store
        .publish_archived(&h.p0(), version, &[event("e1", 1)], &Routes::default(), None, None)
        .await
        .unwrap();
    assert!(!exists(&mut h.redis(), &h.p0().archive_backlog()));
}

/// Reads partition 0's archive backlog as writer `w1`: (id, topic) of each entry.
async fn read_backlog(h: &Harness) -> Vec<(String, Option<String>)> {
    h.store
        .read_archive_backlog(&h.p0(), "w1", 100, Duration::from_secs(60))
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.id, e.topic))
        .collect()
}

#[tokio::test]
async fn an_archive_object_keeps_its_name_when_drop_oldest_trims_its_first_entry() {
    let h = Harness::start().await;
    let a = archive(3, WhenFull::DropOldest);
    publish(&h, &[event("e1", 1), event("e2", 1), event("e3", 1)], None, &a).await;
    let first = read_backlog(&h).await;
    let ids: Vec<String> = first.iter().map(|(id, _)| id.clone()).collect();
    let named = h
        .store
        .name_archive_objects(&h.p0(), &[("obj-of-e1".into(), ids.clone())])
        .await
        .unwrap();
    assert_eq!(named.len(), 1);
    assert_eq!(named[0].name, "obj-of-e1");
    assert_eq!(named[0].members, ids);
    assert!(named[0].others.is_empty(), "every entry was handed in");

    // The write's answer was lost; meanwhile a publish past the bound trims e1.
    let (_, dropped) = publish(&h, &[event("e4", 1)], None, &a).await;
    assert_eq!(dropped, 1);
    let again = read_backlog(&h).await;
    assert_eq!(again[0], (ids[0].clone(), None), "e1 comes back trimmed");
    // The retry proposes a name derived from its own first entry, e2, and reads only e2:
    // e2 keeps the first name, and e3 (named with it, not handed in) comes with it.
    let named = h
        .store
        .name_archive_objects(&h.p0(), &[("obj-of-e2".into(), vec![ids[1].clone()])])
        .await
        .unwrap();
    assert_eq!(named.len(), 1);
    assert_eq!(named[0].name, "obj-of-e1", "the name first given");
    assert_eq!(named[0].members, ids);
    assert_eq!(named[0].others, [(ids[2].clone(), body("e3"))]);

    // Finishing forgets the names with the entries.
    h.store.finish_archived(&h.p0(), &ids).await.unwrap();
    assert!(!exists(&mut h.redis(), &h.p0().archive_object_members()));
    let left: Vec<String> = read_backlog(&h).await.into_iter().map(|(id, _)| id).collect();
    assert_eq!(left.len(), 1, "e4 only, not yet named");
    assert!(!ids.contains(&left[0]));
}
