//! Ordering lines against a real Redis (docs/ordered-delivery.md): a key's deliveries
//! wait in one list and only its head is ever ready; terminal settles (done,
//! dead-letter, a late success) move the line on, once; retries and parks keep the
//! head where it is; other keys go on meanwhile. A line whose head Redis lost is swept
//! (its head put back, or the next released when its event is gone too); a live head,
//! wherever it is, never is.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::UnixMillis;
use eg_core::subscription::DeliveryLimits;
use eg_core::throttle::{BusyPolicy, GateAsk, ThrottleGate, ThrottleId};
use eg_store::queue::EventToStore;
use eg_store::{Census, ReadyDelivery, Settlement, SweepAction, SweepBounds, SweptLine};
use serde_json::json;
use std::time::Duration;

const SUBSCRIPTION: &str = "orders/billing";

/// An event whose one delivery is ordered in `line`.
fn ordered(event_key: &str, line: &str) -> EventToStore {
    EventToStore {
        event_key: event_key.into(),
        body: body(event_key),
        deliveries: vec![delivery(&format!("{event_key}-d"), event_key).in_line(Some(line.into()))],
    }
}

fn event_keys(held: &[ReadyDelivery]) -> Vec<String> {
    held.iter().map(|h| h.delivery.event_key.clone()).collect()
}

fn waiting(h: &Harness) -> Option<String> {
    hget(&mut h.redis(), &h.p0().lines_waiting(), SUBSCRIPTION)
}

fn line_ids(h: &Harness, line: &str) -> Vec<String> {
    let members: Vec<String> = query(&mut h.redis(), &["LRANGE", &h.p0().line(SUBSCRIPTION, line), "0", "-1"]);
    members
        .iter()
        .map(|m| m.split('\n').next().unwrap().to_owned())
        .collect()
}

async fn read_all(h: &Harness) -> Vec<ReadyDelivery> {
    read(&h.store, &h.p0(), "sender", 100).await
}

/// Publishes a1, b1, a2, a3 (keys A and B) in one request.
async fn two_keys(h: &Harness) -> Vec<ReadyDelivery> {
    publish(
        &h.store,
        &h.p0(),
        &[
            ordered("a1", "A"),
            ordered("b1", "B"),
            ordered("a2", "A"),
            ordered("a3", "A"),
        ],
    )
    .await;
    read_all(h).await
}

#[tokio::test]
async fn only_each_keys_head_is_ready_and_the_rest_wait_in_request_order() {
    let h = Harness::start().await;
    let held = two_keys(&h).await;
    assert_eq!(event_keys(&held), ["a1", "b1"]);
    assert!(
        !held[0].carries_body,
        "an ordered delivery is read through its event hash"
    );
    assert_eq!(held[0].delivery.line.as_deref(), Some("A"));
    assert_eq!(waiting(&h).as_deref(), Some("2"));
    assert_eq!(line_ids(&h, "A"), ["a1-d", "a2-d", "a3-d"]);
    let per_subscription = h.store.waiting_in_lines().await.unwrap();
    assert_eq!(per_subscription.get(SUBSCRIPTION), Some(&2));
    assert_eq!(per_subscription.len(), 1);

    // Each done releases the next of its key, in order, and nothing else.
    let mut head = held[0].clone();
    for next in ["a2", "a3"] {
        assert!(settle(&h.store, &h.p0(), &head, &Settlement::Done).await);
        let got = read_all(&h).await;
        assert_eq!(event_keys(&got), [next]);
        head = got[0].clone();
    }
    assert_eq!(waiting(&h), None, "the count goes when nothing waits");
    assert!(settle(&h.store, &h.p0(), &head, &Settlement::Done).await);
    assert!(
        !exists(&mut h.redis(), &h.p0().line(SUBSCRIPTION, "A")),
        "an empty line is gone"
    );
    assert!(read_all(&h).await.is_empty());
}

#[tokio::test]
async fn a_retried_head_blocks_its_key_only_until_it_is_delivered() {
    let h = Harness::start().await;
    let held = two_keys(&h).await;
    let (a1, b1) = (held[0].clone(), held[1].clone());
    let retry = a1.delivery.after_attempt(failed_attempt());
    let retried = Settlement::Retry {
        delivery: retry.clone(),
        due: UnixMillis(0),
    };
    assert!(settle(&h.store, &h.p0(), &a1, &retried).await);
    assert!(read_all(&h).await.is_empty(), "a2 waits behind its retried head");
    assert_eq!(line_ids(&h, "A"), ["a1-d", "a2-d", "a3-d"]);

    // Key B goes on meanwhile.
    assert!(settle(&h.store, &h.p0(), &b1, &Settlement::Done).await);

    assert_eq!(promote_due(&h.store, &h.p0(), 10).await, 1);
    let again = read_all(&h).await;
    assert_eq!(event_keys(&again), ["a1"]);
    assert_eq!(
        again[0].delivery.line.as_deref(),
        Some("A"),
        "the line survives a retry record"
    );
    assert!(settle(&h.store, &h.p0(), &again[0], &Settlement::Done).await);
    assert_eq!(event_keys(&read_all(&h).await), ["a2"]);
}

#[tokio::test]
async fn a_dead_lettered_head_releases_the_next_and_a_parked_one_does_not() {
    let h = Harness::start().await;
    let held = two_keys(&h).await;
    let a1 = held[0].clone();
    let park = Settlement::Park {
        delivery: a1.delivery.clone(),
        until: UnixMillis(i64::MAX / 2),
    };
    assert!(settle(&h.store, &h.p0(), &a1, &park).await);
    assert!(read_all(&h).await.is_empty(), "a paused head keeps its key waiting");

    // Dead-lettering the next head (after resume, say) moves the line on.
    publish(&h.store, &h.p0(), &[ordered("c1", "C"), ordered("c2", "C")]).await;
    let c1 = read_all(&h).await.remove(0);
    let dead = Settlement::DeadLetter {
        entry: dead_letter_entry(&c1.delivery),
    };
    assert!(settle(&h.store, &h.p0(), &c1, &dead).await);
    assert_eq!(event_keys(&read_all(&h).await), ["c2"]);
}

#[tokio::test]
async fn a_settle_of_a_delivery_no_longer_at_the_head_moves_nothing() {
    let h = Harness::start().await;
    let held = two_keys(&h).await;
    let a1 = held[0].clone();
    let retry = a1.delivery.after_attempt(failed_attempt());
    let retried = Settlement::Retry {
        delivery: retry.clone(),
        due: UnixMillis(i64::MAX / 2),
    };
    assert!(settle(&h.store, &h.p0(), &a1, &retried).await);

    // The attempt succeeded after all: cancelling its retry is terminal and advances.
    assert!(h.store.cancel_retry(&h.p0(), &retry, None).await.unwrap());
    assert_eq!(event_keys(&read_all(&h).await), ["a2"]);
    assert_eq!(line_ids(&h, "A"), ["a2-d", "a3-d"]);

    // A second cancel, or a stale settle naming a1 again, changes nothing.
    assert!(!h.store.cancel_retry(&h.p0(), &retry, None).await.unwrap());
    assert!(!settle(&h.store, &h.p0(), &a1, &Settlement::Done).await);
    assert_eq!(line_ids(&h, "A"), ["a2-d", "a3-d"]);
    assert!(read_all(&h).await.is_empty());
}

#[tokio::test]
async fn ordered_and_unordered_deliveries_of_one_event_each_go_their_way() {
    let h = Harness::start().await;
    let mut both = ordered("e1", "A");
    both.deliveries.push(delivery("e1-plain", "e1"));
    publish(&h.store, &h.p0(), &[ordered("e0", "A"), both]).await;
    let got = read_all(&h).await;
    assert_eq!(
        got.iter().map(|d| d.delivery.id.as_str()).collect::<Vec<_>>(),
        ["e0-d", "e1-plain"],
        "the unordered delivery does not wait in A's line"
    );
    assert_eq!(hget(&mut h.redis(), &h.p0().event("e1"), "r").as_deref(), Some("2"));
}

#[tokio::test]
async fn a_late_settle_after_its_head_left_the_line_pops_nobody_else() {
    let h = Harness::start().await;
    let held = two_keys(&h).await;
    // The head left the line some other way (swept as stuck, say) while still held.
    let _: String = query(&mut h.redis(), &["LPOP", &h.p0().line(SUBSCRIPTION, "A")]);
    assert!(settle(&h.store, &h.p0(), &held[0], &Settlement::Done).await);
    assert_eq!(line_ids(&h, "A"), ["a2-d", "a3-d"], "a2 is not popped by a1's settle");
}

/// One whole pass of the stuck-line sweep over partition 0, a few lines per call so the
/// cursor is really followed; what it swept.
async fn sweep(h: &Harness) -> Vec<SweptLine> {
    let bounds = SweepBounds {
        lines: 2,
        ..SweepBounds::default()
    };
    let mut cursor = "0".to_owned();
    let mut swept = Vec::new();
    loop {
        let step = h.store.sweep_lines(&h.p0(), &cursor, bounds).await.unwrap();
        swept.extend(step.swept);
        if step.cursor == "0" {
            return swept;
        }
        cursor = step.cursor;
    }
}

/// Loses a held delivery's ready entry the way a Redis that lost writes would: gone from
/// the stream and from the senders' pending list.
fn lose_entry(h: &Harness, held: &ReadyDelivery) {
    let ready = h.p0().ready();
    let _: u64 = query(&mut h.redis(), &["XACK", &ready, "senders", &held.entry_id]);
    let _: u64 = query(&mut h.redis(), &["XDEL", &ready, &held.entry_id]);
}

fn swept_one(subscription: &str, delivery: &str, action: SweepAction) -> Vec<SweptLine> {
    vec![SweptLine {
        subscription: subscription.into(),
        delivery: delivery.into(),
        action,
    }]
}

#[tokio::test]
async fn a_line_whose_head_and_event_redis_lost_releases_the_next_on_the_second_pass() {
    let h = Harness::start().await;
    let held = two_keys(&h).await;
    lose_entry(&h, &held[0]);
    let _: u64 = query(&mut h.redis(), &["DEL", &h.p0().event("a1")]);

    assert!(sweep(&h).await.is_empty(), "a first pass only notes each line's head");
    assert_eq!(sweep(&h).await, swept_one(SUBSCRIPTION, "a1-d", SweepAction::Dropped));
    assert_eq!(
        event_keys(&read_all(&h).await),
        ["a2"],
        "the next of key A, and only it"
    );
    assert_eq!(line_ids(&h, "A"), ["a2-d", "a3-d"]);
    assert_eq!(waiting(&h).as_deref(), Some("1"));
    assert!(sweep(&h).await.is_empty() && sweep(&h).await.is_empty());
    assert_eq!(line_ids(&h, "B"), ["b1-d"], "key B's held head is left alone");
}

#[tokio::test]
async fn a_lost_head_whose_event_survives_is_put_back_itself() {
    let h = Harness::start().await;
    let held = two_keys(&h).await;
    lose_entry(&h, &held[0]);
    sweep(&h).await;
    assert_eq!(sweep(&h).await, swept_one(SUBSCRIPTION, "a1-d", SweepAction::Requeued));
    assert_eq!(event_keys(&read_all(&h).await), ["a1"], "delivered again, order kept");
    assert_eq!(line_ids(&h, "A"), ["a1-d", "a2-d", "a3-d"]);
    assert!(sweep(&h).await.is_empty() && sweep(&h).await.is_empty());
}

#[tokio::test]
async fn a_live_head_is_never_swept_wherever_it_is() {
    let h = Harness::start().await;
    let lines = ["R", "H", "L", "T", "P", "Q"];
    let events: Vec<EventToStore> = lines
        .iter()
        .flat_map(|l| [ordered(&format!("{l}1"), l), ordered(&format!("{l}2"), l)])
        .collect();
    publish(&h.store, &h.p0(), &events[2..]).await;
    let held = read_all(&h).await;
    // R's head is published after the read: ready, not yet held by any sender.
    publish(&h.store, &h.p0(), &events[..2]).await;
    let head = |line: &str| held.iter().find(|d| d.delivery.line.as_deref() == Some(line)).unwrap();

    // H is held by a sender (in flight); L too, with a concurrency lease taken for it.
    let limits = DeliveryLimits::parse(&json!({"maxConcurrentRequests": 1})).unwrap();
    let ask = GateAsk {
        now: UnixMillis(1_700_000_000_000),
        want: 1,
        lease: Some((head("L").delivery.id.as_str(), Duration::from_secs(60))),
        reserve_within: Duration::ZERO,
    };
    let gate = h
        .store
        .delivery_gate(
            &ThrottleId::of("orders", "billing"),
            Some(&limits),
            ask,
            BusyPolicy::default(),
        )
        .await
        .unwrap();
    assert!(matches!(gate, ThrottleGate::Go { .. }), "{gate:?}");
    // T was handed back by the sender (requeued), P waits for a retry, Q is parked.
    let requeue = Settlement::Requeue {
        delivery: head("T").delivery.clone(),
    };
    assert!(settle(&h.store, &h.p0(), head("T"), &requeue).await);
    let retry = Settlement::Retry {
        delivery: head("P").delivery.after_attempt(failed_attempt()),
        due: UnixMillis(i64::MAX / 2),
    };
    assert!(settle(&h.store, &h.p0(), head("P"), &retry).await);
    let park = Settlement::Park {
        delivery: head("Q").delivery.clone(),
        until: UnixMillis(i64::MAX / 2),
    };
    assert!(settle(&h.store, &h.p0(), head("Q"), &park).await);

    for pass in 0..3 {
        assert!(sweep(&h).await.is_empty(), "pass {pass}");
    }
    for line in lines {
        assert_eq!(
            line_ids(&h, line),
            [format!("{line}1-d"), format!("{line}2-d")],
            "line {line}"
        );
    }
    assert_eq!(waiting(&h).as_deref(), Some("6"));
}

#[tokio::test]
async fn a_sweep_leaves_suspects_alone_when_the_partition_holds_more_than_a_census_may_read() {
    let h = Harness::start().await;
    let held = two_keys(&h).await;
    lose_entry(&h, &held[0]);
    let small = SweepBounds { lines: 100, census: 0 };
    let first = h.store.sweep_lines(&h.p0(), "0", small).await.unwrap();
    assert_eq!(first.census, Census::None);
    let second = h.store.sweep_lines(&h.p0(), "0", small).await.unwrap();
    assert_eq!((second.census, second.swept.len()), (Census::Busy, 0));
    assert_eq!(line_ids(&h, "A"), ["a1-d", "a2-d", "a3-d"]);
}

#[tokio::test]
async fn an_emptied_line_leaves_the_index_and_a_stale_entry_is_forgotten() {
    let h = Harness::start().await;
    publish(&h.store, &h.p0(), &[ordered("a1", "A")]).await;
    let index = h.p0().line_index();
    let line = h.p0().line(SUBSCRIPTION, "A");
    assert_eq!(hget(&mut h.redis(), &index, &line).as_deref(), Some(""));
    let a1 = read_all(&h).await.remove(0);
    assert!(settle(&h.store, &h.p0(), &a1, &Settlement::Done).await);
    assert_eq!(hget(&mut h.redis(), &index, &line), None);

    // A line emptied by an older sender (which knows no index) is forgotten by the sweep.
    let _: u64 = query(&mut h.redis(), &["HSET", &index, &line, "a0-d"]);
    assert!(sweep(&h).await.is_empty());
    assert!(!exists(&mut h.redis(), &index));
}
