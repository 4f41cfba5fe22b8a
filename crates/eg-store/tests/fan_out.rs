//! Fan-out entries (`codec::EntryLayout::FanOut`) against a real Redis: an
//! event published to several push subscriptions is one ready entry listing them, with
//! no event hash; its first reader expands it into the event hash and one entry per
//! delivery, exactly once, whoever reads it (a sender, or a scheduler taking back what a
//! crashed sender held).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::Delivery;
use eg_store::Settlement;
use eg_store::codec::{self, EntryLayout};
use eg_store::queue::EventToStore;
use std::collections::HashSet;
use std::time::Duration;

/// An event `key` to `subscriptions`, its deliveries named as the ingress names them.
fn fanned_out(key: &str, subscriptions: &[&str]) -> EventToStore {
    EventToStore {
        event_key: key.into(),
        body: body(key),
        deliveries: subscriptions
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut d = delivery(&codec::fan_out_delivery_id(key, i), key);
                d.subscription = (*s).into();
                d
            })
            .collect(),
    }
}

/// The ready stream's entries as (layout field, record field).
fn entries(redis: &mut redis::Connection, stream: &str) -> Vec<(Option<String>, Option<String>)> {
    let reply: redis::streams::StreamRangeReply = redis::Commands::xrange_all(redis, stream).unwrap();
    reply
        .ids
        .iter()
        .map(|e| (e.get(codec::ENTRY_LAYOUT_FIELD), e.get(codec::DELIVERY_FIELD)))
        .collect()
}

#[tokio::test]
async fn an_event_to_several_subscriptions_is_one_entry_until_it_is_read() {
    let h = Harness::start().await;
    let event = fanned_out("k1", &["audit", "billing", "ship"]);
    publish(&h.store, &h.p0(), std::slice::from_ref(&event)).await;
    let mut redis = h.redis();

    let stored = entries(&mut redis, &h.p0().ready());
    assert_eq!(stored.len(), 1, "one entry for three deliveries");
    assert_eq!(stored[0].0.as_deref(), Some(EntryLayout::FanOut.field()));
    assert!(!exists(&mut redis, &h.p0().event("k1")), "no event hash yet");

    // The first read expands it and reads on: the three deliveries, as published.
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    assert_eq!(hget(&mut redis, &h.p0().event("k1"), "b"), Some(body("k1")));
    assert_eq!(hget(&mut redis, &h.p0().event("k1"), "r").as_deref(), Some("3"));
    let got: Vec<Delivery> = held.iter().map(|r| r.delivery.clone()).collect();
    assert_eq!(got, event.deliveries, "each delivery as published, ids and all");
    assert!(held.iter().all(|r| !r.carries_body));
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 3, "the fan-out entry is gone");
    assert!(read(&h.store, &h.p0(), "sender", 10).await.is_empty(), "each read once");

    for r in &held {
        assert!(settle(&h.store, &h.p0(), r, &Settlement::Done).await);
    }
    assert!(!exists(&mut redis, &h.p0().event("k1")), "freed with its last delivery");
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0);
}

#[tokio::test]
async fn a_fan_out_a_crashed_reader_held_is_expanded_once_by_whoever_takes_it_back() {
    let h = Harness::start().await;
    publish(&h.store, &h.p0(), &[fanned_out("k1", &["audit", "billing"])]).await;
    let mut redis = h.redis();
    // A reader that died between reading the entry and expanding it.
    let _: redis::Value = query(
        &mut redis,
        &[
            "XREADGROUP",
            "GROUP",
            "senders",
            "crashed",
            "COUNT",
            "10",
            "STREAMS",
            &h.p0().ready(),
            ">",
        ],
    );

    let taken = h
        .store
        .claim_abandoned(&h.p0(), "scheduler", Duration::ZERO, 10)
        .await
        .unwrap();
    assert!(taken.is_empty(), "expanded, not handed back");
    assert_eq!(hget(&mut redis, &h.p0().event("k1"), "r").as_deref(), Some("2"));
    let again = h
        .store
        .claim_abandoned(&h.p0(), "scheduler", Duration::ZERO, 10)
        .await
        .unwrap();
    assert!(again.is_empty());
    let ids: HashSet<String> = read(&h.store, &h.p0(), "sender", 10)
        .await
        .into_iter()
        .map(|r| r.delivery.id)
        .collect();
    assert_eq!(
        ids,
        HashSet::from(["k1-0".to_owned(), "k1-1".to_owned()]),
        "two, not four"
    );
}

#[tokio::test]
async fn deliveries_of_another_shape_keep_one_entry_each() {
    let h = Harness::start().await;
    // Named otherwise than `<event key>-<index>` (as by an earlier ingress): `EventHash` layout.
    publish(&h.store, &h.p0(), &[event("k1", 2)]).await;
    let mut redis = h.redis();
    let stored = entries(&mut redis, &h.p0().ready());
    assert_eq!(stored.len(), 2);
    assert!(stored.iter().all(|(layout, _)| layout.is_none()));
    assert_eq!(hget(&mut redis, &h.p0().event("k1"), "r").as_deref(), Some("2"));
}

#[tokio::test]
async fn a_backlog_of_fan_outs_is_expanded_a_batch_per_read() {
    let h = Harness::start().await;
    let events: Vec<EventToStore> = (0..100).map(|i| fanned_out(&format!("k{i}"), &["a", "b"])).collect();
    publish(&h.store, &h.p0(), &events).await;
    let mut redis = h.redis();
    // A reader asking for one delivery gets deliveries in the same call, though the first
    // hundred entries are fan-outs: it read on, 64 entries at a time.
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    assert!(!held.is_empty());
    let hashes: u64 = (0..100)
        .filter(|i| exists(&mut redis, &h.p0().event(&format!("k{i}"))))
        .count() as u64;
    assert_eq!(hashes, 100, "every fan-out expanded in this call");
}
