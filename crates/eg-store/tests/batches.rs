//! Batch entries (`codec::EntryLayout::Batch`) against a real Redis: the events of one
//! publish whose only delivery goes to a subscription that batches are one ready entry,
//! cut as the sender will cut its requests, each event's record and body in fields of
//! their own. A sender delivers from the entry itself (one delivery per event, each
//! holding the entry) and the entry goes with the last of them; deliveries that live on
//! take their own event's body along. A scheduler taking back an entry whose holder died
//! splits it into one `Carried` entry per delivery not yet settled.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::history::DeliveryState;
use eg_core::subscription::BatchSettings;
use eg_core::{Delivery, UnixMillis};
use eg_store::codec::{self, EntryLayout};
use eg_store::queue::{EventToStore, ReadyDelivery, Routes};
use eg_store::{Retention, Settlement, SharedHold};
use std::time::Duration;

/// An event whose one delivery goes to `subscription`, named as the ingress names a lone
/// delivery (its event key).
fn lone(key: &str, subscription: &str) -> EventToStore {
    let mut d = delivery(key, key).for_event(key);
    d.subscription = subscription.into();
    EventToStore {
        event_key: key.into(),
        body: body(key),
        deliveries: vec![d],
    }
}

fn batching(subscription: &str, most: u32) -> Routes {
    let settings: BatchSettings = serde_json::from_value(serde_json::json!({
        "maxEventsPerBatch": most,
        "preferredBatchSizeInKilobytes": 1024,
    }))
    .unwrap();
    Routes {
        batched: [(format!("orders/{subscription}"), settings)].into(),
        ..Routes::default()
    }
}

async fn publish_routed(h: &Harness, events: &[EventToStore], routes: &Routes) {
    let version = h.catalog().version().await.unwrap();
    let outcome = h.store.publish_routed(&h.p0(), version, events, routes).await.unwrap();
    assert_eq!(outcome, eg_store::PublishOutcome::Stored { duplicates: vec![] });
}

/// `n` events `k0`… to `billing`, which batches up to `most`, published together.
async fn publish_batch(h: &Harness, n: usize, most: u32) -> Vec<EventToStore> {
    let events: Vec<EventToStore> = (0..n).map(|i| lone(&format!("k{i}"), "billing")).collect();
    publish_routed(h, &events, &batching("billing", most)).await;
    events
}

/// The layout field of each ready entry, in stream order.
fn layouts(redis: &mut redis::Connection, stream: &str) -> Vec<Option<String>> {
    let reply: redis::streams::StreamRangeReply = redis::Commands::xrange_all(redis, stream).unwrap();
    reply.ids.iter().map(|e| e.get(codec::ENTRY_LAYOUT_FIELD)).collect()
}

async fn settle_together(h: &Harness, held: &[(&ReadyDelivery, Settlement)], retention: &Retention) -> Vec<bool> {
    let items: Vec<_> = held
        .iter()
        .map(|(r, s)| {
            let step = step(&r.delivery.subscription, 1, DeliveryState::Delivered);
            r.settle(s.clone(), Some(step))
        })
        .collect();
    let settled = h.store.settle_many(&h.p0(), &items, retention).await.unwrap();
    settled.iter().map(|s| s.took_effect).collect()
}

fn with_history() -> Retention {
    Retention {
        history_for: Duration::from_secs(3600),
        histories_per_partition: 100,
        steps_per_history: 10,
        archived_per_partition: 0,
    }
}

fn retry_of(held: &ReadyDelivery) -> Settlement {
    Settlement::Retry {
        delivery: held.delivery.after_attempt(failed_attempt()),
        due: UnixMillis(5_000),
    }
}

fn shared_marks(h: &Harness, entry_id: &str) -> String {
    format!("{}:shared:{entry_id}", h.p0().ready())
}

#[tokio::test]
async fn a_batching_subscriptions_events_are_one_entry_read_and_settled_as_one() {
    let h = Harness::start().await;
    let events = publish_batch(&h, 5, 10).await;
    let mut redis = h.redis();
    assert_eq!(
        layouts(&mut redis, &h.p0().ready()),
        [Some(EntryLayout::Batch.field().to_owned())]
    );

    // One entry read: its five deliveries, as published, each holding the entry and
    // carrying its own event's body.
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    let got: Vec<Delivery> = held.iter().map(|r| r.delivery.clone()).collect();
    let published: Vec<Delivery> = events.iter().map(|e| e.deliveries[0].clone()).collect();
    assert_eq!(got, published);
    for (i, r) in held.iter().enumerate() {
        assert_eq!(r.shared, Some(SharedHold { index: i, of: 5 }));
        assert_eq!(r.entry_id, held[0].entry_id);
        assert_eq!(r.carried_body, Some(body(&format!("k{i}"))));
        assert!(!exists(&mut redis, &h.p0().event(&format!("k{i}"))), "no event hash");
    }
    assert!(read(&h.store, &h.p0(), "sender", 10).await.is_empty(), "read once");

    let done: Vec<_> = held.iter().map(|r| (r, Settlement::Done)).collect();
    assert_eq!(settle_together(&h, &done, &with_history()).await, [true; 5]);
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0, "gone with its deliveries");
    assert_eq!(pending(&mut redis, &h.p0().ready(), "senders"), 0);
    assert!(!exists(&mut redis, &shared_marks(&h, &held[0].entry_id)));
    assert_eq!(zcard(&mut redis, &h.p0().history_index()), 0, "no history list");
    for r in &held {
        let steps = h.store.event_history("orders", &r.delivery.event_id).await.unwrap();
        assert_eq!(steps.len(), 1, "{}: its step, from the delivered log", r.delivery.id);
    }
}

#[tokio::test]
async fn a_batch_entry_is_cut_as_its_subscription_cuts_requests() {
    let h = Harness::start().await;
    let mut events: Vec<EventToStore> = (0..7).map(|i| lone(&format!("k{i}"), "billing")).collect();
    // Neither batches: a lone delivery to another subscription, and an event to two.
    events.push(lone("other", "audit"));
    events.push(event("two", 2)); // both to `billing`
    publish_routed(&h, &events, &batching("billing", 3)).await;
    let mut redis = h.redis();
    let field = |layout: EntryLayout| Some(layout.field().to_owned());
    // Entries in the order written: the lone and the two deliveries as each event is
    // met, then the batches; three, three, and one alone (a `Carried` entry).
    assert_eq!(
        layouts(&mut redis, &h.p0().ready()),
        [
            field(EntryLayout::Carried),
            None,
            None,
            field(EntryLayout::Batch),
            field(EntryLayout::Batch),
            field(EntryLayout::Carried),
        ]
    );
    let held = read(&h.store, &h.p0(), "sender", 10).await;
    let batched: Vec<(String, Option<SharedHold>)> = held
        .iter()
        .filter(|r| r.delivery.id.starts_with('k'))
        .map(|r| (r.delivery.id.clone(), r.shared))
        .collect();
    let shared = |index, of| Some(SharedHold { index, of });
    assert_eq!(
        batched,
        [
            ("k0".to_owned(), shared(0, 3)),
            ("k1".to_owned(), shared(1, 3)),
            ("k2".to_owned(), shared(2, 3)),
            ("k3".to_owned(), shared(0, 3)),
            ("k4".to_owned(), shared(1, 3)),
            ("k5".to_owned(), shared(2, 3)),
            ("k6".to_owned(), None),
        ]
    );
}

#[tokio::test]
async fn deliveries_of_a_batch_that_live_on_take_their_own_events_body() {
    let h = Harness::start().await;
    publish_batch(&h, 4, 10).await;
    let mut redis = h.redis();
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    let dead = Settlement::DeadLetter {
        entry: dead_letter_entry(&held[3].delivery),
    };
    let results = settle_together(
        &h,
        &[
            (&held[0], retry_of(&held[0])),
            (&held[1], Settlement::Done),
            (
                &held[2],
                Settlement::Requeue {
                    delivery: held[2].delivery.clone(),
                },
            ),
            (&held[3], dead),
        ],
        &Retention::NONE,
    )
    .await;
    assert_eq!(results, [true; 4]);
    assert_eq!(
        xlen(&mut redis, &h.p0().ready()),
        1,
        "the batch gone, the requeued one added"
    );

    let retried: Vec<String> = query(&mut redis, &["ZRANGE", &h.p0().retry(), "0", "-1"]);
    assert_eq!(retried.len(), 1);
    assert_eq!(codec::split_carried_retry(&retried[0]).unwrap().1, body("k0"));

    let again = read(&h.store, &h.p0(), "sender", 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].delivery.id, "k2");
    assert_eq!(again[0].carried_body, Some(body("k2")));
    assert!(again[0].shared.is_none());

    let dead_lettered: Vec<String> = query(&mut redis, &["ZRANGE", &h.p0().deadletter_delay(), "0", "-1"]);
    assert_eq!(dead_lettered.len(), 1);
    let (entry, event) = codec::decode_dead_letter(&dead_lettered[0]).unwrap();
    assert_eq!(entry.delivery_id, "k3");
    assert_eq!(event, body("k3"));
    for key in ["k0", "k1", "k2", "k3"] {
        assert!(!exists(&mut redis, &h.p0().event(key)), "no event hash for {key}");
    }
}

#[tokio::test]
async fn settled_in_several_calls_a_batch_goes_with_its_last_delivery_and_keeps_each_step() {
    let h = Harness::start().await;
    publish_batch(&h, 4, 10).await;
    let mut redis = h.redis();
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    let entry = held[0].entry_id.clone();
    let settle_with = |attempt: u32, which: &[usize]| {
        let items: Vec<_> = which
            .iter()
            .map(|&i| {
                let step = step("billing", attempt, DeliveryState::Delivered);
                held[i].settle(Settlement::Done, Some(step))
            })
            .collect();
        let (store, p0) = (h.store.clone(), h.p0());
        async move { store.settle_many(&p0, &items, &with_history()).await.unwrap() }
    };

    // Two calls, each sharing one step among its events (a delivered batch each).
    assert!(settle_with(1, &[0, 1]).await.iter().all(|s| s.took_effect));
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 1, "held until its last delivery");
    assert_eq!(pending(&mut redis, &h.p0().ready(), "senders"), 1);
    // A delivery settled twice (a second holder, say) is settled once.
    assert!(!settle_with(1, &[1]).await[0].took_effect);
    assert!(settle_with(2, &[2, 3]).await.iter().all(|s| s.took_effect));
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0);
    assert_eq!(pending(&mut redis, &h.p0().ready(), "senders"), 0);
    assert!(!exists(&mut redis, &shared_marks(&h, &entry)));

    for (i, attempt) in [(0, 1), (1, 1), (2, 2), (3, 2)] {
        let steps = h
            .store
            .event_history("orders", &held[i].delivery.event_id)
            .await
            .unwrap();
        let attempts: Vec<u32> = steps.iter().map(|s| s.attempt).collect();
        assert_eq!(attempts, [attempt], "event k{i}: its own call's step");
    }
}

#[tokio::test]
async fn a_batch_taken_back_splits_into_carried_entries_of_what_was_not_settled() {
    let h = Harness::start().await;
    publish_batch(&h, 3, 10).await;
    let mut redis = h.redis();
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    assert!(settle(&h.store, &h.p0(), &held[0], &Settlement::Done).await);

    // The holder dies; the scheduler takes the entry back.
    let taken = h
        .store
        .claim_abandoned(&h.p0(), "scheduler", Duration::ZERO, 10)
        .await
        .unwrap();
    assert!(taken.is_empty(), "split, not handed back");
    assert!(!exists(&mut redis, &shared_marks(&h, &held[0].entry_id)));
    let field = Some(EntryLayout::Carried.field().to_owned());
    assert_eq!(layouts(&mut redis, &h.p0().ready()), [field.clone(), field]);
    let again = read(&h.store, &h.p0(), "sender", 10).await;
    let got: Vec<(String, Option<String>, bool)> = again
        .iter()
        .map(|r| (r.delivery.id.clone(), r.carried_body.clone(), r.shared.is_none()))
        .collect();
    assert_eq!(
        got,
        [
            ("k1".to_owned(), Some(body("k1")), true),
            ("k2".to_owned(), Some(body("k2")), true)
        ]
    );
    // The dead holder's late settle changes nothing.
    assert!(!settle(&h.store, &h.p0(), &held[1], &Settlement::Done).await);
}

#[tokio::test]
async fn a_whole_batch_settled_after_some_of_it_settles_only_the_others() {
    let h = Harness::start().await;
    publish_batch(&h, 3, 10).await;
    let mut redis = h.redis();
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    // One settled alone (its mark kept), then all three in one call: joined into one
    // item, which must not log the first one's step again.
    let first = held[0].settle(Settlement::Done, Some(step("billing", 1, DeliveryState::Delivered)));
    h.store.settle_many(&h.p0(), &[first], &with_history()).await.unwrap();
    let done: Vec<_> = held.iter().map(|r| (r, Settlement::Done)).collect();
    assert!(settle_together(&h, &done, &with_history()).await.iter().all(|&t| t));
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0, "gone with its last delivery");
    assert_eq!(pending(&mut redis, &h.p0().ready(), "senders"), 0);
    assert!(!exists(&mut redis, &shared_marks(&h, &held[0].entry_id)));
    for r in &held {
        let steps = h.store.event_history("orders", &r.delivery.event_id).await.unwrap();
        assert_eq!(steps.len(), 1, "{}: one step", r.delivery.id);
    }
}

#[tokio::test]
async fn a_batch_entry_with_a_record_that_does_not_decode_is_split_and_only_that_one_lost() {
    let h = Harness::start().await;
    let good = lone("k0", "billing");
    let record = codec::encode_carried_delivery(&good.deliveries[0]);
    let mut redis = h.redis();
    let _: String = query(
        &mut redis,
        &[
            "XADD",
            &h.p0().ready(),
            "*",
            codec::ENTRY_LAYOUT_FIELD,
            EntryLayout::Batch.field(),
            "d0",
            &record,
            "b0",
            &good.body,
            "d1",
            "not a record",
            "b1",
            "{}",
        ],
    );
    assert!(
        read(&h.store, &h.p0(), "sender", 10).await.is_empty(),
        "split, not handed out"
    );
    let field = Some(EntryLayout::Carried.field().to_owned());
    assert_eq!(layouts(&mut redis, &h.p0().ready()), [field.clone(), field]);
    let again = read(&h.store, &h.p0(), "sender", 10).await;
    assert_eq!(again.len(), 1, "the bad record removed alone");
    assert_eq!(again[0].delivery.id, "k0");
    assert_eq!(again[0].carried_body, Some(good.body.clone()));
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 1, "only the good one left, held");
}

/// A call that failed half way (a script error after the entry was acknowledged) leaves
/// the entry acknowledged but in the stream; its holder settling again finishes it.
#[tokio::test]
async fn a_batch_acknowledged_by_a_call_that_failed_is_finished_by_its_holder_settling_again() {
    let h = Harness::start().await;
    publish_batch(&h, 3, 10).await;
    let mut redis = h.redis();
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    let _: u64 = query(&mut redis, &["XACK", &h.p0().ready(), "senders", &held[0].entry_id]);

    // Settled again one by one (the settle queue's fallback after a failed call).
    for r in &held[..2] {
        assert!(settle(&h.store, &h.p0(), r, &Settlement::Done).await);
        assert_eq!(xlen(&mut redis, &h.p0().ready()), 1, "kept until its last delivery");
    }
    assert!(settle(&h.store, &h.p0(), &held[2], &retry_of(&held[2])).await);
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0, "finished");
    assert!(!exists(&mut redis, &shared_marks(&h, &held[0].entry_id)));
    assert_eq!(zcard(&mut redis, &h.p0().retry()), 1, "the retry keeps its body");
    // Once gone, a late settle changes nothing.
    assert!(!settle(&h.store, &h.p0(), &held[0], &Settlement::Done).await);
}

/// The same, when the settles come back together: joined into one item, they finish it.
#[tokio::test]
async fn a_whole_batch_acknowledged_by_a_call_that_failed_is_finished_when_settled_again() {
    let h = Harness::start().await;
    publish_batch(&h, 3, 10).await;
    let mut redis = h.redis();
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    let _: u64 = query(&mut redis, &["XACK", &h.p0().ready(), "senders", &held[0].entry_id]);
    let done: Vec<_> = held.iter().map(|r| (r, Settlement::Done)).collect();
    assert_eq!(settle_together(&h, &done, &with_history()).await, [true; 3]);
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0, "finished");
    for r in &held {
        let steps = h.store.event_history("orders", &r.delivery.event_id).await.unwrap();
        assert_eq!(steps.len(), 1, "{}: its step", r.delivery.id);
    }
}
