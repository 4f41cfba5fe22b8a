//! Pull delivery's queues against a real redis-server: publish routes queue-mode
//! deliveries into the subscription's queue (never the ready stream), receive locks each
//! event for one receiver, and the settle script acknowledges, releases (now or after a
//! delay), rejects into the dead-letter path, renews, and refuses stale locks.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::DeadLetterReason;
use eg_core::UnixMillis;
use eg_core::deadletter::DeadLetterEntry;
use eg_store::{LockCheck, QueueEntry, Retention, Settlement, Store};
use std::collections::HashSet;
use std::time::{Duration, Instant};

const SUB: &str = "orders/billing";
const LOCK: Duration = Duration::from_secs(60);

fn queued() -> HashSet<String> {
    HashSet::from([SUB.to_owned()])
}

async fn publish_queued(h: &Harness, events: &[eg_store::queue::EventToStore]) {
    let version = h.catalog().version().await.unwrap();
    let outcome = h
        .store
        .publish_routed(&h.p0(), version, events, &eg_store::Routes::queued(queued()))
        .await
        .unwrap();
    assert_eq!(outcome, eg_store::PublishOutcome::Stored { duplicates: vec![] });
}

async fn settle_one(
    store: &Store,
    entry: &QueueEntry,
    settlement: &Settlement,
    counter: u32,
    check: LockCheck,
) -> bool {
    let p = store.keys().partition(entry.partition);
    let item = entry.settle(settlement.clone());
    store
        .settle_queue(&p, SUB, &[item], &[counter], LOCK, check, &Retention::NONE)
        .await
        .unwrap()[0]
}

#[tokio::test]
async fn queue_deliveries_skip_the_ready_stream_and_each_is_locked_once() {
    let h = Harness::start().await;
    let mut mixed = event("e1", 2);
    mixed.deliveries[1].subscription = "audit".into(); // a push subscription
    publish_queued(&h, &[mixed, event("e2", 1)]).await;
    let mut redis = h.redis();
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 1, "only the push delivery is ready");
    assert_eq!(xlen(&mut redis, &h.p0().queue(SUB)), 2);
    let members: Vec<String> = query(&mut redis, &["SMEMBERS", &h.p0().queues_index()]);
    assert_eq!(members, [SUB]);
    assert_eq!(xlen(&mut redis, &h.p0().queue_signal()), 1);

    let first = h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap();
    let second = h.store.receive_queue(&h.p0(), SUB, LOCK, 10).await.unwrap();
    let third = h.store.receive_queue(&h.p0(), SUB, LOCK, 10).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(second.len(), 1);
    assert!(third.is_empty(), "both are locked");
    assert_ne!(first[0].entry_id, second[0].entry_id);
    assert_eq!(first[0].delivery_count(), 1);
    // A receive on a subscription with no queue finds nothing (and creates nothing).
    assert!(
        h.store
            .receive_queue(&h.p0(), "orders/none", LOCK, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn acknowledge_ends_the_lock_and_frees_the_event() {
    let h = Harness::start().await;
    publish_queued(&h, &[event("e1", 1)]).await;
    let got = h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap();
    let entry = &got[0];
    assert!(
        !settle_one(&h.store, entry, &Settlement::Done, 2, LockCheck::Held).await,
        "wrong counter"
    );
    assert!(settle_one(&h.store, entry, &Settlement::Done, 1, LockCheck::Held).await);
    assert!(
        !settle_one(&h.store, entry, &Settlement::Done, 1, LockCheck::Held).await,
        "already settled"
    );
    let mut redis = h.redis();
    assert_eq!(xlen(&mut redis, &h.p0().queue(SUB)), 0);
    assert!(
        !exists(&mut redis, &h.p0().event("e1")),
        "the body is freed with its last delivery"
    );
}

#[tokio::test]
async fn a_lock_token_given_twice_in_one_call_settles_once() {
    let h = Harness::start().await;
    // The event also has a push delivery, which still needs its body afterwards.
    let mut mixed = event("e1", 2);
    mixed.deliveries[1].subscription = "audit".into();
    publish_queued(&h, &[mixed]).await;
    let got = h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap();
    let entry = &got[0];
    let item = || entry.settle(Settlement::Done);
    let p = h.p0();
    let settled = h
        .store
        .settle_queue(
            &p,
            SUB,
            &[item(), item()],
            &[1, 1],
            LOCK,
            LockCheck::Held,
            &Retention::NONE,
        )
        .await
        .unwrap();
    assert_eq!(settled, [true, false]);
    let mut redis = h.redis();
    assert_eq!(xlen(&mut redis, &p.queue(SUB)), 0);
    let outstanding: Option<i64> = redis::cmd("HGET")
        .arg(p.event("e1"))
        .arg("r")
        .query(&mut redis)
        .unwrap();
    assert_eq!(outstanding, Some(1), "the push delivery's count is left alone");
}

#[tokio::test]
async fn release_now_requeues_with_the_count_carried_and_the_old_lock_lost() {
    let h = Harness::start().await;
    publish_queued(&h, &[event("e1", 1)]).await;
    let entry = h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap().remove(0);
    let mut released = entry.delivery.clone();
    released.attempts = entry.delivery_count();
    let requeue = Settlement::Requeue { delivery: released };
    assert!(settle_one(&h.store, &entry, &requeue, entry.counter, LockCheck::Held).await);
    assert!(!settle_one(&h.store, &entry, &Settlement::Done, entry.counter, LockCheck::Held).await);
    let again = h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].delivery_count(), 2);
    assert_ne!(again[0].entry_id, entry.entry_id);
    let mut redis = h.redis();
    assert_eq!(hget(&mut redis, &h.p0().event("e1"), "r").as_deref(), Some("1"));
}

#[tokio::test]
async fn release_with_a_delay_comes_back_only_when_promoted() {
    let h = Harness::start().await;
    publish_queued(&h, &[event("e1", 1)]).await;
    let entry = h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap().remove(0);
    let mut released = entry.delivery.clone();
    released.attempts = entry.delivery_count();
    let delay = Settlement::Retry {
        delivery: released,
        due: UnixMillis(1), // already due
    };
    assert!(settle_one(&h.store, &entry, &delay, entry.counter, LockCheck::Held).await);
    let mut redis = h.redis();
    assert_eq!(zcard(&mut redis, &h.p0().queue_delayed(SUB)), 1);
    assert!(h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap().is_empty());
    let signals = xlen(&mut redis, &h.p0().queue_signal());
    let promoted = h.store.promote_queue(&h.p0(), SUB, 100).await.unwrap();
    assert_eq!(promoted.moved, 1);
    assert_eq!(
        xlen(&mut redis, &h.p0().queue_signal()),
        signals + 1,
        "waiting receivers are woken"
    );
    let again = h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap();
    assert_eq!(again[0].delivery_count(), 2);
}

#[tokio::test]
async fn reject_dead_letters_through_the_shared_settle_steps() {
    let h = Harness::start().await;
    publish_queued(&h, &[event("e1", 1)]).await;
    let entry = h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap().remove(0);
    let mut dead: DeadLetterEntry = dead_letter_entry(&entry.delivery);
    dead.reason = DeadLetterReason::Rejected;
    let settlement = Settlement::DeadLetter { entry: dead };
    assert!(settle_one(&h.store, &entry, &settlement, entry.counter, LockCheck::Held).await);
    let mut redis = h.redis();
    assert_eq!(zcard(&mut redis, &h.p0().deadletter_delay()), 1);
    assert_eq!(xlen(&mut redis, &h.p0().queue(SUB)), 0);
    assert!(!exists(&mut redis, &h.p0().event("e1")));
}

#[tokio::test]
async fn renew_keeps_the_same_lock_and_expired_locks_are_taken_again() {
    let h = Harness::start().await;
    publish_queued(&h, &[event("e1", 1)]).await;
    let short = Duration::from_millis(300);
    let entry = h.store.receive_queue(&h.p0(), SUB, short, 1).await.unwrap().remove(0);
    let p = h.p0();
    let renew = |counter: u32| {
        let store = h.store.clone();
        let p = p.clone();
        let entry = entry.clone();
        async move {
            let item = entry.settle(Settlement::RenewLock);
            store
                .settle_queue(&p, SUB, &[item], &[counter], short, LockCheck::Held, &Retention::NONE)
                .await
                .unwrap()[0]
        }
    };
    assert!(renew(entry.counter).await);
    assert!(renew(entry.counter).await, "the token stays valid after a renewal");
    // Once the lock expires, the next receive takes the entry again, its counter raised,
    // and the old lock can no longer be renewed.
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = loop {
        let got = h.store.receive_queue(&p, SUB, short, 1).await.unwrap();
        if let Some(e) = got.into_iter().next() {
            break e;
        }
        assert!(Instant::now() < deadline, "the expired lock was never taken again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(again.entry_id, entry.entry_id);
    assert_eq!(again.delivery_count(), 2);
    assert!(!renew(entry.counter).await);
}

#[tokio::test]
async fn the_sweep_ends_only_expired_locks() {
    let h = Harness::start().await;
    publish_queued(&h, &[event("e1", 1)]).await;
    let short = Duration::from_millis(200);
    let entry = h.store.receive_queue(&h.p0(), SUB, short, 1).await.unwrap().remove(0);
    let item = entry.settle(Settlement::Done);
    // A lock still held (here: idle far below a minute) is not the sweep's to end.
    let held = h
        .store
        .settle_queue(
            &h.p0(),
            SUB,
            std::slice::from_ref(&item),
            &[1],
            LOCK,
            LockCheck::Expired,
            &Retention::NONE,
        )
        .await
        .unwrap();
    assert_eq!(held, [false]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let expired = loop {
        let found = h.store.expired_locks(&h.p0(), SUB, short, 10).await.unwrap();
        if !found.is_empty() {
            break found;
        }
        assert!(Instant::now() < deadline, "the lock never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(expired, [(entry.entry_id.clone(), 1)]);
    let depth = h.store.queue_depth(&h.p0(), SUB, short).await.unwrap();
    assert_eq!((depth.available, depth.locked), (1, 0));
    assert_eq!(depth.oldest_ms, Some(1_000));
    let ended = h
        .store
        .settle_queue(&h.p0(), SUB, &[item], &[1], short, LockCheck::Expired, &Retention::NONE)
        .await
        .unwrap();
    assert_eq!(ended, [true]);
    assert_eq!(h.store.queue_depth(&h.p0(), SUB, short).await.unwrap().available, 0);
    let elsewhere = h.store.keys().partition(1);
    let none = h.store.queue_depth(&elsewhere, SUB, short).await.unwrap();
    assert_eq!(
        (none.available, none.locked, none.delayed, none.oldest_ms),
        (0, 0, 0, None),
        "a partition the subscription has no queue in reads as empty, not as an error"
    );
}

#[tokio::test]
async fn signals_are_read_from_where_the_reader_left_off() {
    let h = Harness::start().await;
    let (from, named) = h
        .store
        .read_signals(&h.p0(), "$", Duration::from_millis(10))
        .await
        .unwrap();
    assert!(named.is_empty());
    publish_queued(&h, &[event("e1", 1)]).await;
    let (_, named) = h
        .store
        .read_signals(&h.p0(), &from, Duration::from_millis(10))
        .await
        .unwrap();
    assert_eq!(named, [SUB]);
}

#[tokio::test]
async fn the_lock_secret_is_created_once() {
    let h = Harness::start().await;
    let first = h.store.lock_secret(b"first").await.unwrap();
    let second = h.store.lock_secret(b"second").await.unwrap();
    assert_eq!(first, b"first");
    assert_eq!(second, b"first");
}

#[tokio::test]
async fn a_deleted_subscriptions_queue_is_dropped_and_its_events_freed() {
    let h = Harness::start().await;
    publish_queued(&h, &[event("e1", 1), event("e2", 1), event("e3", 1)]).await;
    let locked = h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap().remove(0);
    let mut released = locked.delivery.clone();
    released.attempts = 1;
    let delay = Settlement::Retry {
        delivery: released,
        due: UnixMillis(i64::MAX / 2),
    };
    assert!(settle_one(&h.store, &locked, &delay, 1, LockCheck::Held).await);
    h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap(); // one locked, one never received
    // Up to 1 stream entry and 1 delayed member per call.
    assert_eq!(h.store.drop_queue(&h.p0(), SUB, 1).await.unwrap(), 2);
    let mut redis = h.redis();
    assert!(exists(&mut redis, &h.p0().queue(SUB)), "not empty yet");
    assert_eq!(h.store.drop_queue(&h.p0(), SUB, 1).await.unwrap(), 1);
    assert_eq!(h.store.drop_queue(&h.p0(), SUB, 1).await.unwrap(), 0);
    for e in ["e1", "e2", "e3"] {
        assert!(!exists(&mut redis, &h.p0().event(e)), "{e} freed");
    }
    assert!(!exists(&mut redis, &h.p0().queue(SUB)));
    assert!(!exists(&mut redis, &h.p0().queue_delayed(SUB)));
    let members: Vec<String> = query(&mut redis, &["SMEMBERS", &h.p0().queues_index()]);
    assert!(members.is_empty());
}

#[tokio::test]
async fn the_unread_head_is_what_no_receive_has_locked_yet() {
    let h = Harness::start().await;
    assert!(
        h.store.unread_head(&h.p0(), SUB, 10).await.unwrap().is_empty(),
        "no queue yet"
    );
    publish_queued(&h, &[event("e1", 1), event("e2", 1), event("e3", 1)]).await;
    let first = h.store.receive_queue(&h.p0(), SUB, LOCK, 1).await.unwrap().remove(0);
    let head = h.store.unread_head(&h.p0(), SUB, 10).await.unwrap();
    let events: Vec<&str> = head.iter().map(|(_, d)| d.event_key.as_str()).collect();
    assert_eq!(events, ["e2", "e3"]);
    assert!(head.iter().all(|(id, _)| *id != first.entry_id));
    let locked = h.store.lock_unread(&h.p0(), SUB, 1).await.unwrap();
    assert_eq!(locked.len(), 1);
    assert_eq!(locked[0].delivery.event_key, "e2");
    assert_eq!(locked[0].delivery_count(), 1);
    let head = h.store.unread_head(&h.p0(), SUB, 10).await.unwrap();
    assert_eq!(head.len(), 1);
}
