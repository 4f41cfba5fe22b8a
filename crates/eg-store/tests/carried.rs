//! Ready entries that carry their event's body (`codec::EntryLayout::Carried`) against
//! a real Redis: an event with one push delivery has no event hash; the body goes
//! wherever the delivery goes (retry, park, requeue, dead-letter: a retry waits beside
//! it in the retry set); and entries of the
//! previous layout, as a Redis upgraded in place still holds them, are delivered as
//! before.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::UnixMillis;
use eg_core::history::{DeliveryState, HistoryEntry};
use eg_store::codec::{self, EntryLayout};
use eg_store::{Retention, Settlement};
use std::time::Duration;

/// Publishes one event with one push delivery and reads it back, held.
async fn publish_one(h: &Harness, key: &str) -> eg_store::ReadyDelivery {
    publish(&h.store, &h.p0(), &[event(key, 1)]).await;
    let mut got = read(&h.store, &h.p0(), "sender", 10).await;
    assert_eq!(got.len(), 1);
    got.remove(0)
}

#[tokio::test]
async fn an_event_with_one_push_delivery_travels_in_its_entry_and_leaves_nothing_behind() {
    let h = Harness::start().await;
    let held = publish_one(&h, "e1").await;
    let mut redis = h.redis();

    assert!(held.carries_body);
    assert_eq!(held.carried_body, Some(body("e1")));
    assert!(!exists(&mut redis, &h.p0().event("e1")), "no event hash");
    assert_eq!(
        entry_field(&mut redis, &h.p0().ready(), &held.entry_id, codec::ENTRY_LAYOUT_FIELD).as_deref(),
        Some(EntryLayout::Carried.field())
    );

    assert!(settle(&h.store, &h.p0(), &held, &Settlement::Done).await);
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0);
    assert!(!exists(&mut redis, &h.p0().event("e1")), "done makes no hash either");
}

/// `delivery` after a failed attempt, and its retry, due at once.
fn retried_now(delivery: &eg_core::Delivery) -> (eg_core::Delivery, Settlement) {
    let retry = delivery.after_attempt(failed_attempt());
    let settlement = Settlement::Retry {
        delivery: retry.clone(),
        due: UnixMillis(0),
    };
    (retry, settlement)
}

const WITH_HISTORY: Retention = Retention {
    history_for: Duration::from_secs(3600),
    histories_per_partition: 100,
    steps_per_history: 10,
    archived_per_partition: 0,
};

/// Settles `held` as `settlement` with its history step kept.
async fn settle_with_step(h: &Harness, held: &eg_store::ReadyDelivery, settlement: Settlement, step: HistoryEntry) {
    let item = held.settle(settlement, Some(step));
    let settled = h.store.settle_many(&h.p0(), &[item], &WITH_HISTORY).await.unwrap();
    assert!(settled[0].took_effect);
}

#[tokio::test]
async fn a_retry_waits_beside_its_body_and_comes_back_carrying_it() {
    let h = Harness::start().await;
    let held = publish_one(&h, "e1").await;
    let (retry, settlement) = retried_now(&held.delivery);
    settle_with_step(&h, &held, settlement, step("billing", 1, DeliveryState::Retrying)).await;
    let mut redis = h.redis();
    assert!(!exists(&mut redis, &h.p0().event("e1")), "no event hash");
    let members: Vec<String> = query(&mut redis, &["ZRANGE", &h.p0().retry(), "0", "-1"]);
    assert_eq!(members, [format!("{}\n{}", codec::encode_delivery(&retry), body("e1"))]);

    // Promoted, it is a `Carried` entry again: no body to fetch.
    assert_eq!(promote_due(&h.store, &h.p0(), 10).await, 1);
    let again = read(&h.store, &h.p0(), "sender", 10).await.remove(0);
    assert!(again.carries_body);
    assert_eq!(again.carried_body, Some(body("e1")));
    assert_eq!(again.delivery, retry);
    settle_with_step(
        &h,
        &again,
        Settlement::Done,
        step("billing", 2, DeliveryState::Delivered),
    )
    .await;
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0);
    assert!(!exists(&mut redis, &h.p0().event("e1")), "done makes no hash either");

    // Both steps are kept: the failure in the event's list, the last in the delivered log.
    let steps = h.store.event_history(&retry.topic, &retry.event_id).await.unwrap();
    let states: Vec<(u32, DeliveryState)> = steps.iter().map(|s| (s.attempt, s.state)).collect();
    assert_eq!(states, [(1, DeliveryState::Retrying), (2, DeliveryState::Delivered)]);
}

#[tokio::test]
async fn a_carried_retry_an_earlier_scheduler_promoted_whole_keeps_its_body() {
    let h = Harness::start().await;
    let held = publish_one(&h, "e1").await;
    let (retry, settlement) = retried_now(&held.delivery);
    assert!(settle(&h.store, &h.p0(), &held, &settlement).await);
    // What promote.lua of an earlier release does: the member, whole, as the record.
    let mut redis = h.redis();
    let members: Vec<String> = query(&mut redis, &["ZRANGE", &h.p0().retry(), "0", "-1"]);
    let _: i64 = query(&mut redis, &["ZREM", &h.p0().retry(), &members[0]]);
    let _: String = query(&mut redis, &["XADD", &h.p0().ready(), "*", "d", &members[0]]);

    let again = read(&h.store, &h.p0(), "sender", 10).await.remove(0);
    assert!(again.carries_body);
    assert_eq!(again.carried_body, Some(body("e1")));
    assert_eq!(again.delivery, retry);

    // Retried once more, the body still goes along (read from the record field).
    let (third, settlement) = retried_now(&retry);
    assert!(settle(&h.store, &h.p0(), &again, &settlement).await);
    assert_eq!(promote_due(&h.store, &h.p0(), 10).await, 1);
    let last = read(&h.store, &h.p0(), "sender", 10).await.remove(0);
    assert_eq!(last.carried_body, Some(body("e1")));
    assert_eq!(last.delivery, third);
    assert!(!exists(&mut redis, &h.p0().event("e1")));
}

#[tokio::test]
async fn a_late_success_cancels_a_carried_retry_named_with_its_body() {
    let h = Harness::start().await;
    let held = publish_one(&h, "e1").await;
    let retry = held.delivery.after_attempt(failed_attempt());
    let due = UnixMillis(eg_store::Clock::default().now().0 + 60_000);
    let settlement = Settlement::Retry {
        delivery: retry.clone(),
        due,
    };
    assert!(settle(&h.store, &h.p0(), &held, &settlement).await);
    let mut redis = h.redis();

    assert!(
        !h.store.cancel_retry(&h.p0(), &retry, None).await.unwrap(),
        "the record alone is not the member"
    );
    assert!(h.store.cancel_retry(&h.p0(), &retry, Some(&body("e1"))).await.unwrap());
    assert_eq!(zcard(&mut redis, &h.p0().retry()), 0);
    assert!(!exists(&mut redis, &h.p0().event("e1")), "no count left behind");
    assert!(!h.store.cancel_retry(&h.p0(), &retry, Some(&body("e1"))).await.unwrap());
}

#[tokio::test]
async fn a_parked_delivery_keeps_its_body_in_the_event_hash() {
    let h = Harness::start().await;
    let held = publish_one(&h, "e1").await;
    let settlement = Settlement::Park {
        delivery: held.delivery.clone(),
        until: UnixMillis(i64::MAX / 2),
    };
    assert!(settle(&h.store, &h.p0(), &held, &settlement).await);
    let mut redis = h.redis();
    assert_eq!(zcard(&mut redis, &h.p0().paused("orders/billing")), 1);
    assert_eq!(hget(&mut redis, &h.p0().event("e1"), "b"), Some(body("e1")));
    assert_eq!(hget(&mut redis, &h.p0().event("e1"), "r").as_deref(), Some("1"));
}

#[tokio::test]
async fn a_requeued_delivery_still_carries_its_body() {
    let h = Harness::start().await;
    let held = publish_one(&h, "e1").await;
    let settlement = Settlement::Requeue {
        delivery: held.delivery.clone(),
    };
    assert!(settle(&h.store, &h.p0(), &held, &settlement).await);
    let again = read(&h.store, &h.p0(), "sender", 10).await.remove(0);
    assert_ne!(again.entry_id, held.entry_id);
    assert!(again.carries_body);
    assert_eq!(again.carried_body, Some(body("e1")));
    let mut redis = h.redis();
    assert!(!exists(&mut redis, &h.p0().event("e1")));
}

#[tokio::test]
async fn a_dead_lettered_delivery_takes_its_carried_body_into_the_record() {
    let h = Harness::start().await;
    let held = publish_one(&h, "e1").await;
    let settlement = Settlement::DeadLetter {
        entry: dead_letter_entry(&held.delivery),
    };
    let retention = Retention {
        archived_per_partition: 10,
        ..Retention::NONE
    };
    let item = held.settle(settlement, None);
    let settled = h.store.settle_many(&h.p0(), &[item], &retention).await.unwrap();
    assert!(settled[0].took_effect);

    let moved = h
        .store
        .promote_due_dead_letters(&h.p0(), Duration::ZERO, 10)
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let records = h
        .store
        .read_dead_letters(&h.p0(), "worker", 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].event_json, body("e1"));
    let mut redis = h.redis();
    assert!(!exists(&mut redis, &h.p0().event("e1")), "no hash left behind");
    let archived: Option<String> = query(
        &mut redis,
        &["HGET", &h.p0().archive("orders/billing").records, &held.delivery.id],
    );
    assert!(archived.unwrap().ends_with(&body("e1")), "the archive keeps it too");
}

/// What a Redis upgraded in place holds: entries written by the release before layouts
/// were numbered (the record alone, its event in a hash), read by this one.
#[tokio::test]
async fn entries_of_the_previous_layout_are_delivered_after_an_upgrade() {
    let h = Harness::start().await;
    let mut redis = h.redis();
    let old = event("old", 1);
    let record = codec::encode_delivery(&old.deliveries[0]);
    let hash = h.p0().event("old");
    let _: () = query(&mut redis, &["HSET", &hash, "b", &old.body, "r", "1"]);
    let _: String = query(&mut redis, &["XADD", &h.p0().ready(), "*", "d", &record]);

    let held = read(&h.store, &h.p0(), "sender", 10).await.remove(0);
    assert!(!held.carries_body);
    assert_eq!(held.carried_body, None);
    assert_eq!(held.delivery, old.deliveries[0]);
    assert_eq!(
        h.store.event_bodies(&h.p0(), &["old"]).await.unwrap(),
        [Some(old.body.clone())]
    );
    assert!(settle(&h.store, &h.p0(), &held, &Settlement::Done).await);
    assert!(!exists(&mut redis, &hash), "the old event hash is freed as before");
}

#[tokio::test]
async fn an_entry_of_an_unknown_newer_layout_is_left_for_a_sender_that_reads_it() {
    let h = Harness::start().await;
    let mut redis = h.redis();
    let record = codec::encode_delivery(&delivery("d1", "e1"));
    let _: String = query(&mut redis, &["XADD", &h.p0().ready(), "*", "v", "9", "d", &record]);

    assert!(read(&h.store, &h.p0(), "sender", 10).await.is_empty());
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 1, "not removed as poison");
    assert_eq!(pending(&mut redis, &h.p0().ready(), "senders"), 1);
}
