//! The delivery queues against a real Redis: publish, read, settle, retries, dead
//! letters, abandoned deliveries, poison entries and depths.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::{Delivery, UnixMillis};
use eg_store::{PublishOutcome, Retention, Settle, Settlement, codec};
use eg_testkit::eventually;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

fn p0() -> eg_store::Partition {
    eg_store::Keyspace::new("eg", PARTITIONS).partition(0)
}
fn ready_key() -> String {
    p0().ready()
}
fn retry_key() -> String {
    p0().retry()
}
fn dl_delay_key() -> String {
    p0().deadletter_delay()
}
fn dl_key() -> String {
    p0().deadletter()
}

fn event_hash(event_key: &str) -> String {
    p0().event(event_key)
}

// ---- publish -----------------------------------------------------------------------

#[tokio::test]
async fn publish_stores_each_event_once_and_enqueues_one_entry_per_delivery() {
    let h = Harness::start().await;
    let events = [event("e1", 2), event("e2", 1)];
    let outcome = h.store.publish(&h.p0(), 0, &events).await.unwrap();
    assert_eq!(outcome, PublishOutcome::Stored { duplicates: vec![] });

    let mut redis = h.redis();
    // e1's two deliveries share its event hash; e2's only delivery carries its body in
    // its entry, and e2 has no hash (`Carried` layout, tests/carried.rs).
    let key = event_hash("e1");
    assert_eq!(hget(&mut redis, &key, "b"), Some(events[0].body.clone()));
    assert_eq!(hget(&mut redis, &key, "r").as_deref(), Some("2"));
    assert_eq!(query::<u64>(&mut redis, &["HLEN", &key]), 2, "only b and r");
    assert!(!exists(&mut redis, &event_hash("e2")));
    let enqueued: Vec<Delivery> = ready_entries(&mut redis, &ready_key())
        .into_iter()
        .map(|(_, d)| d)
        .collect();
    let expected: Vec<Delivery> = events.iter().flat_map(|e| e.deliveries.clone()).collect();
    assert_eq!(enqueued, expected);
    assert_eq!(
        xlen(
            &mut redis,
            &eg_store::Keyspace::new("eg", PARTITIONS).partition(1).ready()
        ),
        0,
        "other partitions untouched"
    );
}

#[tokio::test]
async fn publish_with_a_stale_catalog_writes_nothing() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    catalog.put_topic(&topic("audit"), keys("a")).await.unwrap();
    let current = catalog.version().await.unwrap();
    let mut redis = h.redis();

    let outcome = h
        .store
        .publish(&h.p0(), current - 1, &[event("e1", 2), event("e2", 1)])
        .await
        .unwrap();
    assert_eq!(outcome, PublishOutcome::StaleCatalog(current));
    assert!(!exists(&mut redis, &event_hash("e1")));
    assert!(!exists(&mut redis, &event_hash("e2")));
    assert_eq!(xlen(&mut redis, &ready_key()), 0);

    // Re-matched at the current version, it goes through.
    let outcome = h
        .store
        .publish(&h.p0(), current, &[event("e1", 2), event("e2", 1)])
        .await
        .unwrap();
    assert_eq!(outcome, PublishOutcome::Stored { duplicates: vec![] });
    assert!(exists(&mut redis, &event_hash("e1")));
    assert_eq!(xlen(&mut redis, &ready_key()), 3);
}

#[tokio::test]
async fn publish_against_a_catalog_redis_has_lost_is_refused_as_stale() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    let cached = catalog.version().await.unwrap();
    let mut redis = h.redis();
    let _: () = query(&mut redis, &["FLUSHALL"]);

    let outcome = h.store.publish(&h.p0(), cached, &[event("e1", 1)]).await.unwrap();
    assert_eq!(outcome, PublishOutcome::StaleCatalog(0));
    assert!(!exists(&mut redis, &event_hash("e1")));
    assert_eq!(query::<u64>(&mut redis, &["EXISTS", &ready_key()]), 0);
}

// ---- read and settle ---------------------------------------------------------------

#[tokio::test]
async fn read_ready_hands_each_delivery_to_one_consumer() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let published = event("e1", 3);
    publish(&h.store, &p0, std::slice::from_ref(&published)).await;

    let a = read(&h.store, &p0, "sender-a", 2).await;
    let b = read(&h.store, &p0, "sender-b", 10).await;
    assert_eq!(a.len(), 2);
    assert_eq!(b.len(), 1);
    let got: Vec<Delivery> = a.iter().chain(&b).map(|r| r.delivery.clone()).collect();
    assert_eq!(got, published.deliveries);
    assert!(a.iter().chain(&b).all(|r| r.partition == 0));
    let ids: BTreeSet<&str> = a.iter().chain(&b).map(|r| r.entry_id.as_str()).collect();
    assert_eq!(ids.len(), 3);

    assert!(
        read(&h.store, &p0, "sender-a", 10).await.is_empty(),
        "nothing new is left"
    );
    assert!(
        read(&h.store, &p0, "sender-c", 10).await.is_empty(),
        "nothing new is left"
    );
    let mut redis = h.redis();
    let mut owners = pending_owners(&mut redis, &ready_key(), "senders");
    owners.sort();
    let mut expected: Vec<(String, String)> = a
        .iter()
        .map(|r| (r.entry_id.clone(), "sender-a".to_owned()))
        .chain(b.iter().map(|r| (r.entry_id.clone(), "sender-b".to_owned())))
        .collect();
    expected.sort();
    assert_eq!(owners, expected);
}

#[tokio::test]
async fn read_ready_with_a_zero_wait_returns_at_once() {
    let h = Harness::start().await;
    let p0 = h.p0();
    // Well inside the 5 s command timeout: `BLOCK 0` would wait for it and fail.
    let no_wait = |consumer: &'static str| {
        let store = h.store.clone();
        let p0 = p0.clone();
        async move {
            tokio::time::timeout(
                Duration::from_secs(4),
                store.read_ready(&p0, consumer, 10, Duration::ZERO),
            )
            .await
        }
    };
    let empty = no_wait("sender").await.expect("a zero wait must not block").unwrap();
    assert!(empty.is_empty());

    publish(&h.store, &p0, &[event("e1", 1)]).await;
    let got = no_wait("sender").await.expect("a zero wait must not block").unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].delivery, event("e1", 1).deliveries[0]);
}

#[tokio::test]
async fn settle_done_acks_deletes_and_frees_the_event_after_its_last_delivery() {
    let h = Harness::start().await;
    let p0 = h.p0();
    publish(&h.store, &p0, &[event("e1", 2)]).await;
    let held = read(&h.store, &p0, "sender", 10).await;
    assert_eq!(held.len(), 2);
    let mut redis = h.redis();

    assert!(settle(&h.store, &p0, &held[0], &Settlement::Done).await);
    assert_eq!(xlen(&mut redis, &ready_key()), 1);
    assert_eq!(pending(&mut redis, &ready_key(), "senders"), 1);
    assert_eq!(hget(&mut redis, &event_hash("e1"), "r").as_deref(), Some("1"));
    assert_eq!(
        hget(&mut redis, &event_hash("e1"), "b"),
        Some(body("e1")),
        "still needed by the other delivery"
    );

    assert!(settle(&h.store, &p0, &held[1], &Settlement::Done).await);
    assert_eq!(xlen(&mut redis, &ready_key()), 0);
    assert_eq!(pending(&mut redis, &ready_key(), "senders"), 0);
    assert!(
        !exists(&mut redis, &event_hash("e1")),
        "the last delivery frees the event"
    );

    assert!(
        !settle(&h.store, &p0, &held[0], &Settlement::Done).await,
        "settled twice"
    );
    assert!(!exists(&mut redis, &event_hash("e1")));
}

// ---- retries -----------------------------------------------------------------------

#[tokio::test]
async fn settle_retry_schedules_the_record_at_its_due_time() {
    let h = Harness::start().await;
    let p0 = h.p0();
    publish(&h.store, &p0, &[event("e1", 1)]).await;
    let held = read(&h.store, &p0, "sender", 10).await.remove(0);
    let next = held.delivery.after_attempt(failed_attempt());
    let due = UnixMillis(eg_store::Clock::default().now().0 + 60_000);

    let settlement = Settlement::Retry {
        delivery: next.clone(),
        due,
    };
    assert!(settle(&h.store, &p0, &held, &settlement).await);

    let mut redis = h.redis();
    let members: Vec<(String, i64)> = query(&mut redis, &["ZRANGE", &retry_key(), "0", "-1", "WITHSCORES"]);
    assert_eq!(members.len(), 1);
    // The event's only delivery carried its body: the retry waits beside it.
    let (record, body) = codec::split_carried_retry(&members[0].0).unwrap();
    assert_eq!(codec::decode_delivery(record).unwrap(), next);
    assert_eq!(body, common::body("e1"));
    assert_eq!(members[0].1, due.0);
    assert_eq!(xlen(&mut redis, &ready_key()), 0);
    assert_eq!(pending(&mut redis, &ready_key(), "senders"), 0);
    assert!(!exists(&mut redis, &event_hash("e1")), "no event hash to keep");
    assert_eq!(promote_due(&h.store, &p0, 100).await, 0, "not due yet");
    // The scheduler learns when it falls due, by Redis's clock.
    let next_in = h.store.promote_retries(&p0, 100).await.unwrap().next_in.unwrap();
    assert!(
        next_in > Duration::from_secs(55) && next_in <= Duration::from_secs(60),
        "{next_in:?}"
    );
    assert_eq!(
        h.store
            .promote_retries(&h.store.keys().partition(1), 100)
            .await
            .unwrap()
            .next_in,
        None,
        "nothing queued"
    );
}

#[tokio::test]
async fn settle_many_settles_each_item_as_settle_would_in_one_call() {
    let h = Harness::start().await;
    let p0 = h.p0();
    publish(&h.store, &p0, &[event("e1", 2), event("e2", 1), event("e3", 1)]).await;
    let held = read(&h.store, &p0, "sender", 10).await;
    assert_eq!(held.len(), 4);
    // e1's two deliveries: one done, one retried; e2 done; e3 dead-lettered.
    let retried = held[1].delivery.after_attempt(failed_attempt());
    let due = UnixMillis(eg_store::Clock::default().now().0 + 60_000);
    let settlements = [
        Settlement::Done,
        Settlement::Retry {
            delivery: retried.clone(),
            due,
        },
        Settlement::Done,
        Settlement::DeadLetter {
            entry: dead_letter_entry(&held[3].delivery),
        },
    ];
    let items: Vec<Settle> = held
        .iter()
        .zip(&settlements)
        .map(|(d, settlement)| d.settle(settlement.clone(), None))
        .collect();
    let retention = Retention {
        archived_per_partition: 10,
        ..Retention::NONE
    };
    let settled = h.store.settle_many(&p0, &items, &retention).await.unwrap();
    assert!(settled.iter().all(|s| s.took_effect), "{settled:?}");

    let mut redis = h.redis();
    assert_eq!(xlen(&mut redis, &ready_key()), 0);
    assert_eq!(pending(&mut redis, &ready_key(), "senders"), 0);
    assert_eq!(zcard(&mut redis, &retry_key()), 1);
    assert_eq!(zcard(&mut redis, &dl_delay_key()), 1);
    assert_eq!(
        hget(&mut redis, &event_hash("e1"), "r").as_deref(),
        Some("1"),
        "the retry keeps e1"
    );
    assert!(!exists(&mut redis, &event_hash("e2")), "e2 finished");
    assert!(
        !exists(&mut redis, &event_hash("e3")),
        "e3's record carries its own copy"
    );

    // Settled again (a second holder, or a repeat): nothing held, nothing changes.
    let again = h.store.settle_many(&p0, &items, &retention).await.unwrap();
    assert!(again.iter().all(|s| !s.took_effect), "{again:?}");
    assert_eq!(zcard(&mut redis, &retry_key()), 1);
    assert_eq!(zcard(&mut redis, &dl_delay_key()), 1);
    assert_eq!(hget(&mut redis, &event_hash("e1"), "r").as_deref(), Some("1"));
}

#[tokio::test]
async fn a_late_success_cancels_the_queued_retry_only_while_it_is_queued() {
    let h = Harness::start().await;
    let p0 = h.p0();
    publish(&h.store, &p0, &[event("e1", 2)]).await;
    let mut held = read(&h.store, &p0, "sender", 10).await;
    let due = UnixMillis(eg_store::Clock::default().now().0 + 60_000);
    let mut retries = Vec::new();
    for d in held.drain(..) {
        let next = d.delivery.after_attempt(failed_attempt());
        let settlement = Settlement::Retry {
            delivery: next.clone(),
            due,
        };
        assert!(settle(&h.store, &p0, &d, &settlement).await);
        retries.push(next);
    }
    let mut redis = h.redis();

    assert!(h.store.cancel_retry(&p0, &retries[0], None).await.unwrap());
    assert_eq!(zcard(&mut redis, &retry_key()), 1, "only that retry is gone");
    assert_eq!(hget(&mut redis, &event_hash("e1"), "r").as_deref(), Some("1"));
    assert!(
        !h.store.cancel_retry(&p0, &retries[0], None).await.unwrap(),
        "cancelled once only"
    );

    // A retry that has already gone back to the ready stream cannot be cancelled.
    let _: i64 = query(
        &mut redis,
        &["ZADD", &retry_key(), "0", &codec::encode_delivery(&retries[1])],
    );
    assert_eq!(promote_due(&h.store, &p0, 100).await, 1);
    assert!(!h.store.cancel_retry(&p0, &retries[1], None).await.unwrap());
    assert_eq!(
        hget(&mut redis, &event_hash("e1"), "r").as_deref(),
        Some("1"),
        "the promoted retry still needs the event"
    );

    // Cancelling the last outstanding delivery frees the event.
    let last = read(&h.store, &p0, "sender", 10).await.remove(0);
    let next = last.delivery.after_attempt(failed_attempt());
    let settlement = Settlement::Retry {
        delivery: next.clone(),
        due,
    };
    assert!(settle(&h.store, &p0, &last, &settlement).await);
    assert!(h.store.cancel_retry(&p0, &next, None).await.unwrap());
    assert_eq!(hget(&mut redis, &event_hash("e1"), "r"), None, "event freed");
}

#[tokio::test]
async fn promote_retries_moves_only_due_ones_each_exactly_once_even_concurrently() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let due_count = 6;
    publish(&h.store, &p0, &[event("e1", due_count + 1)]).await;
    let held = read(&h.store, &p0, "sender", 100).await;
    assert_eq!(held.len(), due_count + 1);

    let now = eg_store::Clock::default().now().0;
    let mut due_ids = BTreeSet::new();
    let (future, past) = held.split_first().unwrap();
    let not_due = future.delivery.after_attempt(failed_attempt());
    let settlement = Settlement::Retry {
        delivery: not_due.clone(),
        due: UnixMillis(now + 3_600_000),
    };
    assert!(settle(&h.store, &p0, future, &settlement).await);
    for (i, r) in past.iter().enumerate() {
        let settlement = Settlement::Retry {
            delivery: r.delivery.after_attempt(failed_attempt()),
            due: UnixMillis(now - 1_000 - i as i64),
        };
        assert!(settle(&h.store, &p0, r, &settlement).await);
        due_ids.insert(r.delivery.id.clone());
    }
    let mut redis = h.redis();
    assert_eq!(zcard(&mut redis, &retry_key()), (due_count + 1) as u64);

    let (a, b) = tokio::join!(promote_due(&h.store, &p0, 100), promote_due(&h.store, &p0, 100));
    assert_eq!(a + b, due_count, "each due retry moved exactly once");
    assert_eq!(promote_due(&h.store, &p0, 100).await, 0);

    let moved = ready_entries(&mut redis, &ready_key());
    assert_eq!(moved.len(), due_count);
    let moved_ids: BTreeSet<String> = moved.iter().map(|(_, d)| d.id.clone()).collect();
    assert_eq!(moved_ids, due_ids);
    assert!(
        moved
            .iter()
            .all(|(_, d)| d.attempts == 1 && d.last == Some(failed_attempt()))
    );

    let left: Vec<String> = query(&mut redis, &["ZRANGE", &retry_key(), "0", "-1"]);
    assert_eq!(left.len(), 1);
    assert_eq!(codec::decode_delivery(&left[0]).unwrap(), not_due);

    // The promoted records are ordinary ready deliveries again.
    let again = read(&h.store, &p0, "sender-2", 100).await;
    assert_eq!(again.len(), due_count);
}

// ---- dead letters ------------------------------------------------------------------

#[tokio::test]
async fn dead_letter_goes_through_the_delay_set_to_the_dead_letter_worker() {
    let h = Harness::start().await;
    let p0 = h.p0();
    publish(&h.store, &p0, &[event("e1", 2)]).await;
    let held = read(&h.store, &p0, "sender", 10).await;
    let entry = dead_letter_entry(&held[0].delivery);
    let mut redis = h.redis();

    let settlement = Settlement::DeadLetter { entry: entry.clone() };
    assert!(settle(&h.store, &p0, &held[0], &settlement).await);
    assert_eq!(xlen(&mut redis, &ready_key()), 1, "only the other delivery is left");
    assert_eq!(pending(&mut redis, &ready_key(), "senders"), 1);
    assert_eq!(hget(&mut redis, &event_hash("e1"), "r").as_deref(), Some("1"));
    let delayed: Vec<String> = query(&mut redis, &["ZRANGE", &dl_delay_key(), "0", "-1"]);
    assert_eq!(
        delayed,
        [format!("{}\n{}", serde_json::to_string(&entry).unwrap(), body("e1"))]
    );

    assert_eq!(
        h.store
            .promote_due_dead_letters(&p0, Duration::from_secs(3600), 10)
            .await
            .unwrap(),
        0
    );
    assert_eq!(zcard(&mut redis, &dl_delay_key()), 1);
    assert_eq!(xlen(&mut redis, &dl_key()), 0);
    assert_eq!(
        h.store.promote_due_dead_letters(&p0, Duration::ZERO, 10).await.unwrap(),
        1
    );
    assert_eq!(zcard(&mut redis, &dl_delay_key()), 0);
    assert_eq!(xlen(&mut redis, &dl_key()), 1);

    let items = h
        .store
        .read_dead_letters(&p0, "worker", 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].partition, 0);
    assert_eq!(items[0].entry, entry);
    assert_eq!(items[0].event_json, body("e1"));
    assert_eq!(pending(&mut redis, &dl_key(), "deadletter"), 1);

    assert_eq!(
        h.store
            .finish_dead_letters(&p0, &[items[0].entry_id.clone()])
            .await
            .unwrap(),
        1
    );
    assert_eq!(xlen(&mut redis, &dl_key()), 0);
    assert_eq!(pending(&mut redis, &dl_key(), "deadletter"), 0);
    assert!(
        h.store
            .read_dead_letters(&p0, "worker", 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn dead_lettering_the_last_delivery_frees_the_event_but_keeps_its_body_in_the_record() {
    let h = Harness::start().await;
    let p0 = h.p0();
    publish(&h.store, &p0, &[event("e1", 1)]).await;
    let held = read(&h.store, &p0, "sender", 10).await.remove(0);
    let entry = dead_letter_entry(&held.delivery);
    assert!(settle(&h.store, &p0, &held, &Settlement::DeadLetter { entry: entry.clone() }).await);
    let mut redis = h.redis();
    assert!(!exists(&mut redis, &event_hash("e1")));

    assert_eq!(
        h.store.promote_due_dead_letters(&p0, Duration::ZERO, 10).await.unwrap(),
        1
    );
    let items = h
        .store
        .read_dead_letters(&p0, "worker", 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].entry, entry);
    assert_eq!(items[0].event_json, body("e1"));
}

#[tokio::test]
async fn an_unfinished_dead_letter_is_handed_out_again_only_after_retry_after() {
    let h = Harness::start().await;
    let p0 = h.p0();
    // Long enough that worker-2's first poll, right after worker-1's read, comes well
    // before it even when an fsync or a busy machine stalls the test.
    let retry_after = Duration::from_secs(2);
    publish(&h.store, &p0, &[event("e1", 1)]).await;
    let held = read(&h.store, &p0, "sender", 10).await.remove(0);
    let entry = dead_letter_entry(&held.delivery);
    assert!(settle(&h.store, &p0, &held, &Settlement::DeadLetter { entry: entry.clone() }).await);
    assert_eq!(
        h.store.promote_due_dead_letters(&p0, Duration::ZERO, 10).await.unwrap(),
        1
    );

    let before_first_read = Instant::now();
    let first = h
        .store
        .read_dead_letters(&p0, "worker-1", 10, retry_after)
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    // worker-1 "crashes" here without finishing.

    let store = &h.store;
    let p0_ref = &p0;
    let mut early_polls = 0;
    let again = eventually(
        Duration::from_secs(5),
        "the unfinished dead letter to be handed to worker-2",
        || {
            early_polls += 1;
            async move {
                let items = store
                    .read_dead_letters(p0_ref, "worker-2", 10, retry_after)
                    .await
                    .unwrap();
                if items.is_empty() {
                    return None;
                }
                let waited = before_first_read.elapsed();
                assert!(waited >= retry_after, "handed out again after only {waited:?}");
                Some(items)
            }
        },
    )
    .await;
    assert!(early_polls > 1, "worker-2 must not get the record at once");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].entry_id, first[0].entry_id);
    assert_eq!(again[0].entry, entry);
    assert_eq!(again[0].event_json, body("e1"));

    let mut redis = h.redis();
    assert_eq!(
        pending_owners(&mut redis, &dl_key(), "deadletter"),
        [(first[0].entry_id.clone(), "worker-2".to_owned())]
    );
    assert_eq!(
        h.store
            .finish_dead_letters(&p0, &[again[0].entry_id.clone()])
            .await
            .unwrap(),
        1
    );
    assert_eq!(xlen(&mut redis, &dl_key()), 0);
}

// ---- abandoned deliveries ----------------------------------------------------------

#[tokio::test]
async fn an_abandoned_delivery_is_claimed_requeued_and_the_late_settle_is_refused() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let min_idle = Duration::from_millis(100);
    publish(&h.store, &p0, &[event("e1", 1)]).await;
    let before_read = Instant::now();
    let held_by_a = read(&h.store, &p0, "sender-a", 10).await.remove(0);

    let store = &h.store;
    let p0_ref = &p0;
    let claimed = eventually(
        Duration::from_secs(5),
        "sender-b to claim the abandoned delivery",
        || async move {
            let claimed = store.claim_abandoned(p0_ref, "sender-b", min_idle, 10).await.unwrap();
            if claimed.is_empty() {
                return None;
            }
            let waited = before_read.elapsed();
            assert!(waited >= min_idle, "claimed after only {waited:?}");
            Some(claimed)
        },
    )
    .await;
    assert_eq!(claimed.len(), 1);
    let held_by_b = &claimed[0];
    assert_eq!(held_by_b.entry_id, held_by_a.entry_id);
    assert_eq!(held_by_b.delivery, held_by_a.delivery);
    let mut redis = h.redis();
    assert_eq!(
        pending_owners(&mut redis, &ready_key(), "senders"),
        [(held_by_a.entry_id.clone(), "sender-b".to_owned())]
    );

    let requeued = held_by_b.delivery.after_attempt(failed_attempt());
    let settlement = Settlement::Requeue {
        delivery: requeued.clone(),
    };
    assert!(settle(&h.store, &p0, held_by_b, &settlement).await);
    let entries = ready_entries(&mut redis, &ready_key());
    assert_eq!(entries.len(), 1);
    assert_ne!(entries[0].0, held_by_a.entry_id, "a new entry");
    assert_eq!(entries[0].1, requeued);
    assert_eq!(entries[0].1.attempts, held_by_a.delivery.attempts + 1);
    // The requeued entry still carries the event's body; no event hash was made.
    let carried = entry_field(&mut redis, &ready_key(), &entries[0].0, codec::ENTRY_BODY_FIELD);
    assert_eq!(carried, Some(body("e1")));
    assert!(!exists(&mut redis, &event_hash("e1")));

    // sender-a comes back late: whatever it says about the old entry changes nothing.
    for late in [
        Settlement::Done,
        Settlement::Retry {
            delivery: requeued.clone(),
            due: UnixMillis(0),
        },
        Settlement::Requeue {
            delivery: requeued.clone(),
        },
        Settlement::DeadLetter {
            entry: dead_letter_entry(&requeued),
        },
    ] {
        assert!(!settle(&h.store, &p0, &held_by_a, &late).await, "{late:?}");
    }
    assert!(
        !exists(&mut redis, &event_hash("e1")),
        "no hash made by a refused settle"
    );
    assert_eq!(ready_entries(&mut redis, &ready_key()), entries);
    assert_eq!(pending(&mut redis, &ready_key(), "senders"), 0);
    assert_eq!(zcard(&mut redis, &retry_key()), 0);
    assert_eq!(zcard(&mut redis, &dl_delay_key()), 0);

    // The requeued delivery is read like any other.
    let next = read(&h.store, &p0, "sender-c", 10).await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].delivery, requeued);
}

// ---- poison ------------------------------------------------------------------------

#[tokio::test]
async fn a_ready_entry_that_is_not_a_delivery_is_removed_and_does_not_block_the_stream() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let mut redis = h.redis();
    let _: String = query(&mut redis, &["XADD", &ready_key(), "*", "d", "not json"]);
    let _: String = query(&mut redis, &["XADD", &ready_key(), "*", "other", "field"]);
    publish(&h.store, &p0, &[event("e1", 1)]).await;
    assert_eq!(xlen(&mut redis, &ready_key()), 3);

    let first = read(&h.store, &p0, "sender", 2).await;
    assert!(first.is_empty(), "poison is never handed out: {first:?}");
    assert_eq!(xlen(&mut redis, &ready_key()), 1, "both poison entries removed");
    assert_eq!(pending(&mut redis, &ready_key(), "senders"), 0);

    let next = read(&h.store, &p0, "sender", 10).await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].delivery, event("e1", 1).deliveries[0]);
}

// ---- depths ------------------------------------------------------------------------

#[tokio::test]
async fn depths_follow_deliveries_through_every_state() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let shape = |d: eg_store::Depths| (d.ready, d.in_flight, d.retry, d.deadletter_backlog);
    assert_eq!(shape(h.store.depths(&p0).await.unwrap()), (0, 0, 0, 0));

    publish(&h.store, &p0, &[event("e1", 3)]).await;
    assert_eq!(shape(h.store.depths(&p0).await.unwrap()), (3, 0, 0, 0));

    let held = read(&h.store, &p0, "sender", 2).await;
    assert_eq!(shape(h.store.depths(&p0).await.unwrap()), (1, 2, 0, 0));

    let retry = Settlement::Retry {
        delivery: held[0].delivery.after_attempt(failed_attempt()),
        due: UnixMillis(eg_store::Clock::default().now().0 + 3_600_000),
    };
    assert!(settle(&h.store, &p0, &held[0], &retry).await);
    assert_eq!(shape(h.store.depths(&p0).await.unwrap()), (1, 1, 1, 0));

    let dead = Settlement::DeadLetter {
        entry: dead_letter_entry(&held[1].delivery),
    };
    assert!(settle(&h.store, &p0, &held[1], &dead).await);
    assert_eq!(shape(h.store.depths(&p0).await.unwrap()), (1, 0, 1, 1));

    assert_eq!(
        h.store.promote_due_dead_letters(&p0, Duration::ZERO, 10).await.unwrap(),
        1
    );
    assert_eq!(
        shape(h.store.depths(&p0).await.unwrap()),
        (1, 0, 1, 1),
        "still owed to the dead-letter worker"
    );

    let items = h
        .store
        .read_dead_letters(&p0, "worker", 10, Duration::from_secs(60))
        .await
        .unwrap();
    h.store
        .finish_dead_letters(&p0, &[items[0].entry_id.clone()])
        .await
        .unwrap();
    assert_eq!(shape(h.store.depths(&p0).await.unwrap()), (1, 0, 1, 0));

    let last = read(&h.store, &p0, "sender", 10).await;
    assert!(settle(&h.store, &p0, &last[0], &Settlement::Done).await);
    assert_eq!(shape(h.store.depths(&p0).await.unwrap()), (0, 0, 1, 0));

    assert_eq!(
        shape(h.store.depths(&h.store.keys().partition(1)).await.unwrap()),
        (0, 0, 0, 0)
    );
}
