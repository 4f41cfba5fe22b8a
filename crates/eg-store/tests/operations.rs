//! The operator-facing records against a real Redis: delivery history and the
//! dead-letter archive stay within their bounds, a redrive sends each record back at
//! most once (even two at a time), purge removes records for good, and paused sets are
//! handed back whole on resume or by TTL while paused.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::deadletter::RedriveTarget;
use eg_core::history::{DeliveryState, HistoryEntry};
use eg_core::{Delivery, UnixMillis};
use eg_store::{Partition, ReadyDelivery, Retention, Selection, Settled, Settlement, Store, TimeRange};
use std::time::Duration;

const RETENTION: Retention = Retention {
    history_for: Duration::from_secs(3600),
    histories_per_partition: 3,
    steps_per_history: 2,
    archived_per_partition: 2,
};

/// [`RETENTION`] with room for every history a test keeps.
const GENEROUS: Retention = Retention {
    histories_per_partition: 100,
    ..RETENTION
};

/// One event `key` (its own id too) with one delivery, read and held by a sender.
async fn held(store: &Store, p: &Partition, key: &str) -> ReadyDelivery {
    held_of(store, p, key, 1).await
}

/// Event `key` with `deliveries` deliveries, whose own id is `event_id`.
fn event_with_id(key: &str, deliveries: usize, event_id: &str) -> eg_store::queue::EventToStore {
    let mut e = event(key, deliveries);
    e.deliveries = e.deliveries.into_iter().map(|d| d.for_event(event_id)).collect();
    e
}

/// One event `key` (its own id too) with `deliveries` deliveries, all read and held by
/// a sender: the first is returned.
async fn held_of(store: &Store, p: &Partition, key: &str, deliveries: usize) -> ReadyDelivery {
    publish(store, p, &[event_with_id(key, deliveries, key)]).await;
    let mut got = read(store, p, "sender", deliveries).await;
    assert_eq!(got.len(), deliveries);
    got.remove(0)
}

/// Settles `r` with its history step within `retention`.
async fn settle_within(
    store: &Store,
    p: &Partition,
    r: &ReadyDelivery,
    settlement: &Settlement,
    history: Option<&HistoryEntry>,
    retention: &Retention,
) -> Settled {
    let item = r.settle(settlement.clone(), history.cloned());
    store.settle_many(p, &[item], retention).await.unwrap()[0]
}

async fn settle(store: &Store, p: &Partition, r: &ReadyDelivery, s: &Settlement, history: &HistoryEntry) -> u64 {
    let settled = settle_within(store, p, r, s, Some(history), &RETENTION).await;
    assert!(settled.took_effect);
    settled.archive_evicted
}

async fn dead_letter(store: &Store, p: &Partition, key: &str) -> u64 {
    let r = held(store, p, key).await;
    let entry = dead_letter_entry(&r.delivery);
    settle(
        store,
        p,
        &r,
        &Settlement::DeadLetter { entry },
        &step("billing", 1, DeliveryState::DeadLettered),
    )
    .await
}

/// Dead-letters one delivery of each event in `keys` into an archive with room for 100;
/// returns the record ids.
async fn archive_dead_letters(store: &Store, p: &Partition, keys: &[&str]) -> Vec<String> {
    let retention = Retention {
        archived_per_partition: 100,
        ..RETENTION
    };
    let mut record_ids = Vec::new();
    for key in keys {
        let r = held(store, p, key).await;
        record_ids.push(r.delivery.id.clone());
        let entry = dead_letter_entry(&r.delivery);
        settle_within(store, p, &r, &Settlement::DeadLetter { entry }, None, &retention).await;
    }
    record_ids
}

fn redelivery(record: &eg_store::ArchivedRecord) -> Delivery {
    let id = format!("redriven-{}", record.id);
    let target = RedriveTarget {
        topic_key: "orders",
        subscription_key: "billing",
        delivery_id: &id,
        event_key: &id,
    };
    record
        .entry
        .redelivery(target, record.event_id(), eg_store::Clock::default().now(), 1)
}

#[tokio::test]
async fn history_is_kept_within_its_bounds() {
    let h = Harness::start().await;
    let p0 = h.p0();
    // One event, three steps: only the latest two are kept.
    let r = held(&h.store, &p0, "e0").await;
    let retry = |n| Settlement::Retry {
        delivery: r.delivery.clone(),
        due: UnixMillis(n),
    };
    settle(
        &h.store,
        &p0,
        &r,
        &retry(1),
        &step("billing", 1, DeliveryState::Retrying),
    )
    .await;
    for attempt in 2..=3 {
        promote_due(&h.store, &p0, 10).await;
        let again = read(&h.store, &p0, "sender", 1).await.remove(0);
        settle(
            &h.store,
            &p0,
            &again,
            &retry(1),
            &step("billing", attempt, DeliveryState::Retrying),
        )
        .await;
    }
    let steps = h.store.event_history("orders", "e0").await.unwrap();
    assert_eq!(steps.iter().map(|s| s.attempt).collect::<Vec<_>>(), [2, 3]);
    let ttl: i64 = redis::cmd("PTTL")
        .arg(p0.history("orders", "e0"))
        .query(&mut h.redis())
        .unwrap();
    assert!(
        ttl > 3_500_000 && ttl <= 3_600_000,
        "history expires with the retention: {ttl}"
    );

    // Four more events in the same partition, each with a list (two deliveries: not
    // delivered by its only one, so not in the delivered log): only three histories are
    // kept, the least recently written went.
    for key in ["e1", "e2", "e3", "e4"] {
        let r = held_of(&h.store, &p0, key, 2).await;
        settle(
            &h.store,
            &p0,
            &r,
            &Settlement::Done,
            &step("billing", 1, DeliveryState::Delivered),
        )
        .await;
    }
    let kept: Vec<bool> = {
        let mut kept = Vec::new();
        for key in ["e0", "e1", "e2", "e3", "e4"] {
            kept.push(!h.store.event_history("orders", key).await.unwrap().is_empty());
        }
        kept
    };
    assert_eq!(kept, [false, false, true, true, true]);
    let index: u64 = redis::cmd("ZCARD")
        .arg(p0.history_index())
        .query(&mut h.redis())
        .unwrap();
    assert_eq!(index, 3);
}

#[tokio::test]
async fn an_event_delivered_by_its_only_delivery_is_logged_within_the_same_bounds() {
    let h = Harness::start().await;
    let p0 = h.p0();
    // Three histories per partition: three log buckets of one event each.
    for key in ["e1", "e2", "e3", "e4"] {
        let r = held(&h.store, &p0, key).await;
        assert!(r.carries_body);
        settle(
            &h.store,
            &p0,
            &r,
            &Settlement::Done,
            &step("billing", 1, DeliveryState::Delivered),
        )
        .await;
    }
    let mut kept = Vec::new();
    for key in ["e1", "e2", "e3", "e4"] {
        let steps = h.store.event_history("orders", key).await.unwrap();
        kept.push(steps.iter().map(|s| s.state).collect::<Vec<_>>());
    }
    let delivered = vec![DeliveryState::Delivered];
    assert_eq!(kept, [vec![], delivered.clone(), delivered.clone(), delivered]);
    let mut redis = h.redis();
    let buckets: Vec<String> = redis::cmd("ZRANGE")
        .arg(p0.delivered_log())
        .arg(0)
        .arg(-1)
        .query(&mut redis)
        .unwrap();
    assert_eq!(buckets.len(), 3);
    let ttl: i64 = redis::cmd("PTTL").arg(&buckets[2]).query(&mut redis).unwrap();
    assert!(
        ttl > 3_500_000 && ttl <= 3_600_000,
        "a bucket expires with the retention: {ttl}"
    );
    // No list, no index entry: the step is one field.
    let lists: u64 = redis::cmd("ZCARD").arg(p0.history_index()).query(&mut redis).unwrap();
    assert_eq!(lists, 0);
    let recent = h.store.recent_deliveries("orders", "billing", 10).await.unwrap();
    assert_eq!(recent.iter().map(|r| r.event_id.as_str()).collect::<Vec<_>>(), ["e4"]);
}

#[tokio::test]
async fn an_event_id_logged_twice_keeps_both_steps() {
    let h = Harness::start().await;
    let p0 = h.p0();
    // The same event id published twice (two events, one delivery each), delivered in
    // one settle call: the second step cannot take the log field and goes to the list.
    let twice = [event_with_id("k1", 1, "same"), event_with_id("k2", 1, "same")];
    publish(&h.store, &p0, &twice).await;
    let got = read(&h.store, &p0, "sender", 2).await;
    let delivered = step("billing", 1, DeliveryState::Delivered);
    let items: Vec<_> = got
        .iter()
        .map(|r| r.settle(Settlement::Done, Some(delivered.clone())))
        .collect();
    let settled = h.store.settle_many(&p0, &items, &GENEROUS).await.unwrap();
    assert!(settled.iter().all(|s| s.took_effect));
    assert_eq!(h.store.event_history("orders", "same").await.unwrap().len(), 2);
}

/// How many times Redis has run `command` (scripts' calls included) since the last
/// `CONFIG RESETSTAT`.
fn calls_of(redis: &mut redis::Connection, command: &str) -> u64 {
    let stats: String = redis::cmd("INFO").arg("commandstats").query(redis).unwrap();
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

#[tokio::test]
async fn a_delivered_batch_is_acknowledged_and_logged_as_one() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let keys = ["b1", "b2", "b3", "b4", "b5"];
    let events: Vec<_> = keys.iter().map(|key| event_with_id(key, 1, key)).collect();
    publish(&h.store, &p0, &events).await;
    let got = read(&h.store, &p0, "sender", keys.len()).await;
    assert_eq!(got.len(), keys.len());
    // b1 was settled by someone else first (its hold reclaimed, say).
    let delivered = step("billing", 1, DeliveryState::Delivered);
    let taken = settle_within(&h.store, &p0, &got[0], &Settlement::Done, Some(&delivered), &GENEROUS).await;
    assert!(taken.took_effect);

    // The batch, with b5 named twice: one call, one acknowledgement, one step record.
    let mut items: Vec<_> = got
        .iter()
        .map(|r| r.settle(Settlement::Done, Some(delivered.clone())))
        .collect();
    items.push(got[4].settle(Settlement::Done, Some(delivered.clone())));
    let mut redis = h.redis();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut redis).unwrap();
    let settled = h.store.settle_many(&p0, &items, &GENEROUS).await.unwrap();
    let took: Vec<bool> = settled.iter().map(|s| s.took_effect).collect();
    assert_eq!(took, [false, true, true, true, true, false]);
    assert_eq!(calls_of(&mut redis, "xack"), 1);
    assert_eq!(calls_of(&mut redis, "xdel"), 1);
    assert_eq!(calls_of(&mut redis, "hset"), 1);

    let pending: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg(p0.ready())
        .arg(eg_store::keyspace::SENDERS_GROUP)
        .query(&mut redis)
        .unwrap();
    assert_eq!(pending[0], redis::Value::Int(0), "nothing is left held");
    let entries: u64 = redis::cmd("XLEN").arg(p0.ready()).query(&mut redis).unwrap();
    assert_eq!(entries, 0);

    // The four share one record; each event still has its step.
    let buckets: Vec<String> = redis::cmd("ZRANGE")
        .arg(p0.delivered_log())
        .arg(0)
        .arg(-1)
        .query(&mut redis)
        .unwrap();
    let newest: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
        .arg(buckets.last().unwrap())
        .query(&mut redis)
        .unwrap();
    let records: Vec<&String> = newest.keys().filter(|f| f.starts_with('#')).collect();
    assert_eq!(records.len(), 1, "{newest:?}");
    assert_eq!(newest[records[0]], delivered.to_json());
    for key in &keys[1..] {
        assert_eq!(&newest[&format!("orders/{key}")], records[0]);
    }
    for key in keys {
        let steps = h.store.event_history("orders", key).await.unwrap();
        assert_eq!(steps, std::slice::from_ref(&delivered), "{key}");
    }
    let mut recent: Vec<String> = h
        .store
        .recent_deliveries("orders", "billing", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.event_id)
        .collect();
    recent.sort();
    assert_eq!(recent, keys);
}

#[tokio::test]
async fn a_settle_that_finds_the_delivery_taken_back_records_nothing() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let r = held(&h.store, &p0, "e0").await;
    settle(
        &h.store,
        &p0,
        &r,
        &Settlement::Done,
        &step("billing", 1, DeliveryState::Delivered),
    )
    .await;
    let again = settle_within(
        &h.store,
        &p0,
        &r,
        &Settlement::Done,
        Some(&step("billing", 2, DeliveryState::Delivered)),
        &RETENTION,
    )
    .await;
    assert!(!again.took_effect);
    assert_eq!(h.store.event_history("orders", "e0").await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_archive_keeps_the_newest_records_within_its_bound() {
    let h = Harness::start().await;
    let p0 = h.p0();
    assert_eq!(dead_letter(&h.store, &p0, "e1").await, 0);
    assert_eq!(dead_letter(&h.store, &p0, "e2").await, 0);
    assert_eq!(dead_letter(&h.store, &p0, "e3").await, 1, "the oldest record made room");
    let counts = h.store.dead_letter_counts("orders", "billing").await.unwrap();
    assert_eq!((counts.total, counts.not_redriven), (2, 2));
    let (page, next) = h
        .store
        .dead_letter_page("orders/billing", TimeRange::default(), None, 10)
        .await
        .unwrap();
    assert_eq!(page.iter().map(|r| r.event_id()).collect::<Vec<_>>(), ["e2", "e3"]);
    assert!(next.is_none());
    let fields: u64 = redis::cmd("HLEN")
        .arg(p0.archive("orders/billing").records)
        .query(&mut h.redis())
        .unwrap();
    assert_eq!(fields, 2, "the evicted record's body is gone too");
}

#[tokio::test]
async fn pages_follow_the_cursor_across_partitions_without_gaps_or_repeats() {
    let h = Harness::start().await;
    let mut expected = Vec::new();
    for i in 0..7 {
        let key = format!("e{i}");
        archive_dead_letters(&h.store, &h.store.keys().partition(i % 2), &[&key]).await;
        expected.push(key);
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let (page, next) = h
            .store
            .dead_letter_page("orders/billing", TimeRange::default(), cursor.as_ref(), 3)
            .await
            .unwrap();
        assert!(page.len() <= 3);
        seen.extend(page.iter().map(|r| r.event_id()));
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn a_redrive_sends_each_record_back_once_even_when_two_run_at_once() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let keys: Vec<String> = (0..40).map(|i| format!("e{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    archive_dead_letters(&h.store, &p0, &keys).await;
    let all = Selection::Range(TimeRange::default());
    let (a, b) = tokio::join!(
        h.store.redrive_dead_letters("orders/billing", &all, 1_000, redelivery),
        h.store.redrive_dead_letters("orders/billing", &all, 1_000, redelivery),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.done + b.done, 40, "{a:?} {b:?}");
    assert_eq!((a.remaining, b.remaining), (0, 0));
    let again = h
        .store
        .redrive_dead_letters("orders/billing", &all, 1_000, redelivery)
        .await
        .unwrap();
    assert_eq!((again.done, again.remaining), (0, 0));

    // Forty fresh deliveries, each of its own event again, with no attempts.
    let redriven = read(&h.store, &p0, "sender", 100).await;
    assert_eq!(redriven.len(), 40);
    let mut ids: Vec<String> = redriven.iter().map(|r| r.delivery.event_id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 40);
    assert!(redriven.iter().all(|r| r.delivery.attempts == 0));
    let keys: Vec<&str> = redriven.iter().map(|r| r.delivery.event_key.as_str()).collect();
    let bodies = h.store.event_bodies(&p0, &keys).await.unwrap();
    for (r, body) in redriven.iter().zip(bodies) {
        assert_eq!(
            body.unwrap(),
            common::body(&r.delivery.event_id),
            "the event is sent back as it was"
        );
    }
    // The records stay, marked, until purged.
    let counts = h.store.dead_letter_counts("orders", "billing").await.unwrap();
    assert_eq!((counts.total, counts.not_redriven), (40, 0));
    // The status page's batched read agrees, with zeros for a subscription without any.
    let batched = h
        .store
        .dead_letter_counts_of(&["orders/billing".into(), "orders/none".into()])
        .await
        .unwrap();
    assert_eq!(batched, [counts, Default::default()]);
    let (page, _) = h
        .store
        .dead_letter_page("orders/billing", TimeRange::default(), None, 1)
        .await
        .unwrap();
    assert!(page[0].redriven_at.is_some());
}

#[tokio::test]
async fn redrive_and_purge_take_ids_event_ids_and_time_ranges() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let record_ids = archive_dead_letters(&h.store, &p0, &["a", "b", "c"]).await;
    let sub = "orders/billing";
    let by_event = Selection::EventIds(TimeRange::default(), vec!["b".into(), "nope".into()]);
    let p = h
        .store
        .redrive_dead_letters(sub, &by_event, 10, redelivery)
        .await
        .unwrap();
    assert_eq!((p.done, p.remaining), (1, 0));
    let sent = read(&h.store, &p0, "sender", 10).await;
    assert_eq!(
        sent.iter().map(|r| r.delivery.event_id.as_str()).collect::<Vec<_>>(),
        ["b"]
    );

    let before_all = Selection::Range(TimeRange {
        from: None,
        to: Some(UnixMillis(1)),
    });
    let p = h
        .store
        .redrive_dead_letters(sub, &before_all, 10, redelivery)
        .await
        .unwrap();
    assert_eq!((p.done, p.remaining), (0, 0));

    // A limit of one leaves the rest for the next call.
    let all = Selection::Range(TimeRange::default());
    let p = h.store.redrive_dead_letters(sub, &all, 1, redelivery).await.unwrap();
    assert_eq!((p.done, p.remaining), (1, 1));

    let one = Selection::Ids(vec![record_ids[0].clone()]);
    let p = h.store.purge_dead_letters(sub, &one, 10).await.unwrap();
    assert_eq!((p.done, p.remaining), (1, 0));
    assert!(h.store.dead_letter(sub, &record_ids[0]).await.unwrap().is_none());
    let p = h.store.purge_dead_letters(sub, &all, 10).await.unwrap();
    assert_eq!((p.done, p.remaining), (2, 0));
    let counts = h.store.dead_letter_counts("orders", "billing").await.unwrap();
    assert_eq!((counts.total, counts.not_redriven), (0, 0));
    let left: u64 = redis::cmd("EXISTS")
        .arg(p0.archive(sub).records)
        .arg(p0.archive(sub).all)
        .arg(p0.archive(sub).waiting)
        .query(&mut h.redis())
        .unwrap();
    assert_eq!(left, 0, "nothing of the archive is left behind");
}

#[tokio::test]
async fn paused_deliveries_come_back_by_ttl_while_paused_and_all_on_resume() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let now = eg_store::Clock::default().now().0;
    for (key, until) in [
        ("expired", now - 1),
        ("later", now + 3_600_000),
        ("later2", now + 3_600_000),
    ] {
        let r = held(&h.store, &p0, key).await;
        let park = Settlement::Park {
            delivery: r.delivery.clone(),
            until: UnixMillis(until),
        };
        settle(&h.store, &p0, &r, &park, &step("billing", 0, DeliveryState::Paused)).await;
    }
    assert_eq!(h.store.depths(&p0).await.unwrap().paused, 3);
    assert_eq!(h.store.paused_subscriptions(&p0).await.unwrap(), ["orders/billing"]);

    let moved = h
        .store
        .unpark(&p0, "orders/billing", Some(UnixMillis(now)), 10)
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let back = read(&h.store, &p0, "sender", 10).await;
    assert_eq!(
        back.iter().map(|r| r.delivery.event_id.as_str()).collect::<Vec<_>>(),
        ["expired"]
    );

    let moved = h.store.unpark(&p0, "orders/billing", None, 10).await.unwrap();
    assert_eq!(moved, 2);
    assert_eq!(h.store.depths(&p0).await.unwrap().paused, 0);
    assert!(
        h.store.paused_subscriptions(&p0).await.unwrap().is_empty(),
        "an empty set leaves the index"
    );
    assert_eq!(read(&h.store, &p0, "sender", 10).await.len(), 2);
}

#[tokio::test]
async fn a_record_that_does_not_decode_does_not_stop_a_redrive() {
    let h = Harness::start().await;
    let p0 = h.p0();
    let record_ids = archive_dead_letters(&h.store, &p0, &["a", "b", "c"]).await;
    let _: () = redis::cmd("HSET")
        .arg(p0.archive("orders/billing").records)
        .arg(&record_ids[0])
        .arg("not a record")
        .query(&mut h.redis())
        .unwrap();
    let all = Selection::Range(TimeRange::default());
    let p = h
        .store
        .redrive_dead_letters("orders/billing", &all, 10, redelivery)
        .await
        .unwrap();
    assert_eq!((p.done, p.remaining), (2, 0));
    assert_eq!(read(&h.store, &p0, "sender", 10).await.len(), 2);
    let counts = h.store.dead_letter_counts("orders", "billing").await.unwrap();
    assert_eq!((counts.total, counts.not_redriven), (3, 0), "still listed until purged");
}

fn copy(tier: &str, instance: &str, started: i64, seen: i64) -> eg_store::heartbeat::LiveCopy {
    eg_store::heartbeat::LiveCopy {
        tier: tier.into(),
        instance: instance.into(),
        version: "1.2.3".into(),
        started_at: UnixMillis(started),
        last_seen: UnixMillis(seen),
        capabilities: Vec::new(),
    }
}

#[tokio::test]
async fn heartbeats_list_live_copies_and_forget_gone_ones() {
    use eg_store::heartbeat::{FORGET_AFTER, LIVE_WITHIN};
    let h = Harness::start().await;
    let now = 10_000_000;
    let live = LIVE_WITHIN.as_millis() as i64;
    let forget = FORGET_AFTER.as_millis() as i64;
    let old_sender = copy("eg-sender", "sender-a", 1_000, now - 1_000);
    let new_sender = copy("eg-sender", "sender-b", 2_000, now);
    let ingress = copy("eg-ingress", "ingress-a", 3_000, now - live);
    let silent = copy("eg-scheduler", "scheduler-a", 500, now - live - 1);
    for c in [&new_sender, &old_sender, &ingress, &silent] {
        h.store.beat(c).await.unwrap();
    }
    assert_eq!(
        h.store.live_copies(UnixMillis(now)).await.unwrap(),
        vec![ingress.clone(), old_sender.clone(), new_sender.clone()],
        "by tier, oldest first; a copy silent longer than LIVE_WITHIN is not listed"
    );

    h.store.leave("eg-sender", "sender-a").await.unwrap();
    let listed = h.store.live_copies(UnixMillis(now)).await.unwrap();
    assert_eq!(
        listed,
        vec![ingress.clone(), new_sender.clone()],
        "a copy that left is gone at once"
    );

    // A beat long after the scheduler went silent deletes it from the hash.
    let later = copy("eg-sender", "sender-b", 2_000, now - live + forget);
    h.store.beat(&later).await.unwrap();
    let mut redis = h.redis();
    let fields: Vec<String> = redis::cmd("HKEYS").arg("{eg:heartbeats}").query(&mut redis).unwrap();
    assert!(!fields.iter().any(|f| f.starts_with("eg-scheduler/")), "{fields:?}");
    assert!(fields.contains(&"eg-ingress/ingress-a".to_owned()), "{fields:?}");
}

#[tokio::test]
async fn a_failing_dead_letter_destination_is_recorded_since_its_first_failure_until_a_write_succeeds() {
    use eg_store::{DestinationProblem, FailingDestination};
    let h = Harness::start().await;
    let problem = |at: i64, kind: &str| DestinationProblem {
        store: "azure:deadletters1".into(),
        container: "dead".into(),
        kind: kind.into(),
        message: "the storage account refused the key".into(),
        since: UnixMillis(at),
        last: UnixMillis(at),
    };
    h.store
        .record_dead_letter_problem("Orders", "Billing", problem(1_000, "Unauthenticated"))
        .await
        .unwrap();
    h.store
        .record_dead_letter_problem("orders", "billing", problem(5_000, "ContainerNotFound"))
        .await
        .unwrap();
    let recorded = h.store.dead_letter_problem("ORDERS", "billing").await.unwrap().unwrap();
    assert_eq!(
        (recorded.kind.as_str(), recorded.since, recorded.last),
        ("ContainerNotFound", UnixMillis(1_000), UnixMillis(5_000)),
        "the latest problem, failing since the first"
    );
    assert_eq!(
        h.store.dead_letter_problems().await.unwrap(),
        vec![FailingDestination {
            topic: "orders".into(),
            subscription: "billing".into(),
            problem: recorded,
        }]
    );
    h.store.clear_dead_letter_problem("orders", "Billing").await.unwrap();
    assert_eq!(h.store.dead_letter_problem("orders", "billing").await.unwrap(), None);
    assert!(h.store.dead_letter_problems().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_failing_identity_is_recorded_since_its_first_failure_until_it_gets_a_token_and_goes_stale_unrefreshed() {
    use eg_store::{FailingIdentity, IDENTITY_PROBLEM_TTL, IdentityProblem};
    let h = Harness::start().await;
    let problem = |at: i64, kind: &str| IdentityProblem {
        kind: kind.into(),
        message: "the token endpoint could not be reached".into(),
        since: UnixMillis(at),
        last: UnixMillis(at),
    };
    h.store
        .record_identity_problem("Partner", problem(1_000, "Unreachable"))
        .await
        .unwrap();
    h.store
        .record_identity_problem("partner", problem(5_000, "Refused"))
        .await
        .unwrap();
    let listed = h.store.identity_problems(UnixMillis(6_000)).await.unwrap();
    assert_eq!(
        listed,
        vec![FailingIdentity {
            identity: "partner".into(),
            problem: IdentityProblem {
                kind: "Refused".into(),
                message: "the token endpoint could not be reached".into(),
                since: UnixMillis(1_000),
                last: UnixMillis(5_000),
            },
        }],
        "the latest problem, failing since the first"
    );
    let ttl = i64::try_from(IDENTITY_PROBLEM_TTL.as_millis()).unwrap();
    assert!(
        h.store
            .identity_problems(UnixMillis(5_001 + ttl))
            .await
            .unwrap()
            .is_empty(),
        "an entry no sender refreshes is not shown"
    );
    h.store.clear_identity_problem("PARTNER").await.unwrap();
    assert!(h.store.identity_problems(UnixMillis(6_000)).await.unwrap().is_empty());
}
