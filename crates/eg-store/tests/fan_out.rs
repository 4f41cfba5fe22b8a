//! Fan-out entries (`codec::EntryLayout::FanOut`) against a real Redis: an
//! event published to several push subscriptions is one ready entry listing them, with
//! no event hash. A sender delivers from the entry itself (one delivery per subscription,
//! each holding the entry) and the entry goes with the last of them; deliveries that
//! live on take the body along (beside a retry, or in a hash of their own when parked). A scheduler taking back an entry whose
//! holder died expands it into the event hash and one entry per delivery not yet
//! settled, exactly once.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::Delivery;
use eg_core::UnixMillis;
use eg_core::history::DeliveryState;
use eg_store::codec::{self, EntryLayout};
use eg_store::queue::EventToStore;
use eg_store::queue::ReadyDelivery;
use eg_store::{Retention, Settlement, SharedHold};
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

/// Settles `held` in one call, each with its settlement; whether each took effect.
async fn settle_together(h: &Harness, held: &[(&ReadyDelivery, Settlement)]) -> Vec<bool> {
    let items: Vec<_> = held.iter().map(|(r, s)| r.settle(s.clone(), None)).collect();
    let settled = h.store.settle_many(&h.p0(), &items, &Retention::NONE).await.unwrap();
    settled.iter().map(|s| s.took_effect).collect()
}

fn retry_of(held: &ReadyDelivery) -> Settlement {
    Settlement::Retry {
        delivery: held.delivery.after_attempt(failed_attempt()),
        due: UnixMillis(5_000),
    }
}

#[tokio::test]
async fn an_event_to_several_subscriptions_is_delivered_from_its_one_entry() {
    let h = Harness::start().await;
    let event = fanned_out("k1", &["audit", "billing", "ship"]);
    publish(&h.store, &h.p0(), std::slice::from_ref(&event)).await;
    let mut redis = h.redis();

    let stored = entries(&mut redis, &h.p0().ready());
    assert_eq!(stored.len(), 1, "one entry for three deliveries");
    assert_eq!(stored[0].0.as_deref(), Some(EntryLayout::FanOut.field()));

    // One entry read: its three deliveries, as published, each holding the entry and
    // named as the only delivery of an event of its own (its id).
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    let got: Vec<Delivery> = held.iter().map(|r| r.delivery.clone()).collect();
    let published: Vec<Delivery> = event
        .deliveries
        .iter()
        .map(|d| Delivery {
            event_key: d.id.clone(),
            ..d.clone()
        })
        .collect();
    assert_eq!(got, published, "each delivery as published, ids and all");
    for (i, r) in held.iter().enumerate() {
        assert_eq!(r.shared, Some(SharedHold { index: i, of: 3 }));
        assert_eq!(r.entry_id, held[0].entry_id);
        assert_eq!(r.carried_body.as_deref(), Some(body("k1").as_str()));
    }
    assert!(!exists(&mut redis, &h.p0().event("k1")), "no event hash written");
    assert!(read(&h.store, &h.p0(), "sender", 10).await.is_empty(), "read once");

    let done: Vec<_> = held.iter().map(|r| (r, Settlement::Done)).collect();
    assert_eq!(settle_together(&h, &done).await, [true, true, true]);
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0, "gone with its deliveries");
    assert_eq!(pending(&mut redis, &h.p0().ready(), "senders"), 0);
    assert!(!exists(&mut redis, &h.p0().event("k1")), "still no event hash");
    assert!(!exists(&mut redis, &shared_marks(&h, &held[0].entry_id)));
}

fn shared_marks(h: &Harness, entry_id: &str) -> String {
    format!("{}:shared:{entry_id}", h.p0().ready())
}

/// The bodies the retry set's members carry (carried retries, `record\nbody`).
fn retried_bodies(redis: &mut redis::Connection, h: &Harness) -> Vec<String> {
    let members: Vec<String> = query(redis, &["ZRANGE", &h.p0().retry(), "0", "-1"]);
    members
        .iter()
        .filter_map(|m| codec::split_carried_retry(m).map(|(_, body)| body.to_owned()))
        .collect()
}

#[tokio::test]
async fn settled_apart_a_fan_out_entry_goes_with_its_last_delivery() {
    let h = Harness::start().await;
    publish(&h.store, &h.p0(), &[fanned_out("k1", &["audit", "billing", "ship"])]).await;
    let mut redis = h.redis();
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    let entry = held[0].entry_id.clone();

    assert!(settle(&h.store, &h.p0(), &held[0], &Settlement::Done).await);
    assert!(settle(&h.store, &h.p0(), &held[1], &retry_of(&held[1])).await);
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 1, "held until its last delivery");
    assert_eq!(pending(&mut redis, &h.p0().ready(), "senders"), 1, "and still pending");
    // The retry took the body along, beside it in the retry set: no event hash.
    assert_eq!(retried_bodies(&mut redis, &h), [body("k1")]);
    assert!(!exists(&mut redis, &h.p0().event("k1-1")));
    assert!(!exists(&mut redis, &h.p0().event("k1")));

    // A delivery settled twice (a second holder, say) is settled once.
    assert!(!settle(&h.store, &h.p0(), &held[1], &retry_of(&held[1])).await);
    assert_eq!(zcard(&mut redis, &h.p0().retry()), 1);

    assert!(settle(&h.store, &h.p0(), &held[2], &Settlement::Done).await);
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0);
    assert_eq!(pending(&mut redis, &h.p0().ready(), "senders"), 0);
    assert!(!exists(&mut redis, &shared_marks(&h, &entry)));
    assert_eq!(retried_bodies(&mut redis, &h), [body("k1")], "the retry's body is kept");

    // The retry comes back carrying its body, as the only delivery of its own event.
    assert_eq!(promote_due(&h.store, &h.p0(), 10).await, 1);
    let again = read(&h.store, &h.p0(), "sender", 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].delivery.id, "k1-1");
    assert!(again[0].carries_body && again[0].shared.is_none());
    assert_eq!(again[0].carried_body, Some(body("k1")));
    assert!(settle(&h.store, &h.p0(), &again[0], &Settlement::Done).await);
    assert_eq!(xlen(&mut redis, &h.p0().ready()), 0);
    assert!(!exists(&mut redis, &h.p0().event("k1-1")), "nothing left behind");
}

#[tokio::test]
async fn deliveries_of_a_fan_out_that_live_on_take_the_body_along_alone() {
    let h = Harness::start().await;
    publish(&h.store, &h.p0(), &[fanned_out("k1", &["audit", "billing", "ship"])]).await;
    let mut redis = h.redis();
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    let requeued = held[2].delivery.clone();
    let results = settle_together(
        &h,
        &[
            (&held[0], retry_of(&held[0])),
            (&held[1], Settlement::Done),
            (&held[2], Settlement::Requeue { delivery: requeued }),
        ],
    )
    .await;
    assert_eq!(results, [true, true, true]);
    // The retry's body beside it in the retry set; the requeued one carries it.
    assert_eq!(retried_bodies(&mut redis, &h), [body("k1")]);
    assert!(!exists(&mut redis, &h.p0().event("k1-0")));
    assert!(!exists(&mut redis, &h.p0().event("k1")));
    let stored = entries(&mut redis, &h.p0().ready());
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].0.as_deref(), Some(EntryLayout::Carried.field()));
    let again = read(&h.store, &h.p0(), "sender", 10).await;
    assert_eq!(again[0].delivery.id, "k1-2");
    assert_eq!(again[0].carried_body.as_deref(), Some(body("k1").as_str()));
    assert!(settle(&h.store, &h.p0(), &again[0], &Settlement::Done).await);
    assert_eq!(retried_bodies(&mut redis, &h), [body("k1")], "the retry's own");
}

#[tokio::test]
async fn a_fan_out_taken_back_from_a_dead_holder_expands_only_what_it_did_not_settle() {
    let h = Harness::start().await;
    publish(&h.store, &h.p0(), &[fanned_out("k1", &["audit", "billing", "ship"])]).await;
    let mut redis = h.redis();
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    assert!(settle(&h.store, &h.p0(), &held[0], &Settlement::Done).await);
    assert!(settle(&h.store, &h.p0(), &held[1], &retry_of(&held[1])).await);

    // The holder dies; the scheduler takes the entry back.
    let taken = h
        .store
        .claim_abandoned(&h.p0(), "scheduler", Duration::ZERO, 10)
        .await
        .unwrap();
    assert!(taken.is_empty(), "expanded, not handed back");
    assert!(!exists(&mut redis, &shared_marks(&h, &held[0].entry_id)));
    assert_eq!(
        hget(&mut redis, &h.p0().event("k1"), "r").as_deref(),
        Some("1"),
        "the one not settled"
    );
    assert_eq!(retried_bodies(&mut redis, &h), [body("k1")], "the retry's own");
    let ids: Vec<String> = read(&h.store, &h.p0(), "sender", 10)
        .await
        .into_iter()
        .map(|r| r.delivery.id)
        .collect();
    assert_eq!(ids, ["k1-2"], "only the delivery the dead holder did not settle");
    // The dead holder's late settle changes nothing.
    assert!(!settle(&h.store, &h.p0(), &held[2], &Settlement::Done).await);
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
async fn a_read_of_fan_outs_hands_out_a_delivery_per_subscription_of_each() {
    let h = Harness::start().await;
    let events: Vec<EventToStore> = (0..100).map(|i| fanned_out(&format!("k{i}"), &["a", "b"])).collect();
    publish(&h.store, &h.p0(), &events).await;
    let held = read(&h.store, &h.p0(), "sender", 5).await;
    assert_eq!(held.len(), 10, "five entries, two deliveries each");
}

#[tokio::test]
async fn the_steps_of_a_fan_out_settled_together_are_one_field_of_the_delivered_log() {
    let h = Harness::start().await;
    publish(&h.store, &h.p0(), &[fanned_out("k1", &["audit", "billing", "ship"])]).await;
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    let items: Vec<_> = held
        .iter()
        .map(|r| {
            let step = step(&r.delivery.subscription, 1, DeliveryState::Delivered);
            r.settle(Settlement::Done, Some(step))
        })
        .collect();
    let retention = Retention {
        history_for: Duration::from_secs(3600),
        histories_per_partition: 100,
        steps_per_history: 10,
        archived_per_partition: 0,
    };
    h.store.settle_many(&h.p0(), &items, &retention).await.unwrap();

    let mut redis = h.redis();
    assert_eq!(zcard(&mut redis, &h.p0().history_index()), 0, "no history list");
    // The event id is the body's `id`, which `body` sets to the event key.
    let steps = h
        .store
        .event_history("orders", &held[0].delivery.event_id)
        .await
        .unwrap();
    let mut subscriptions: Vec<String> = steps.into_iter().map(|s| s.subscription).collect();
    subscriptions.sort();
    assert_eq!(subscriptions, ["audit", "billing", "ship"]);
    let recent = h.store.recent_deliveries("orders", "billing", 10).await.unwrap();
    assert_eq!(recent.len(), 1);
}

/// What a scheduler of the release before fan-outs were delivered from their entries did
/// with a fan-out entry it took back: every delivery expanded, the event hash's count set.
const EARLIER_EXPANSION: &str = r#"
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  local body = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])[1][2][4]
  redis.call('XDEL', KEYS[1], ARGV[2])
  redis.call('HSET', KEYS[2], 'b', body, 'r', #ARGV - 2)
  for j = 3, #ARGV do
    redis.call('XADD', KEYS[1], '*', 'd', ARGV[j])
  end
end
"#;

#[tokio::test]
async fn an_earlier_schedulers_expansion_cannot_take_a_retried_deliverys_body() {
    let h = Harness::start().await;
    let event = fanned_out("k1", &["audit", "billing"]);
    publish(&h.store, &h.p0(), std::slice::from_ref(&event)).await;
    let mut redis = h.redis();
    let held = read(&h.store, &h.p0(), "sender", 1).await;
    assert!(settle(&h.store, &h.p0(), &held[0], &retry_of(&held[0])).await);

    // A scheduler not yet upgraded takes the entry back and expands both deliveries.
    let script = redis::Script::new(EARLIER_EXPANSION);
    let mut expansion = script.prepare_invoke();
    expansion
        .key(h.p0().ready())
        .key(h.p0().event("k1"))
        .arg("senders")
        .arg(&held[0].entry_id);
    for delivery in &event.deliveries {
        expansion.arg(codec::encode_delivery(delivery));
    }
    let _: () = expansion.invoke(&mut redis).unwrap();

    // Its two deliveries count down its hash; the retry keeps its own.
    for expanded in read(&h.store, &h.p0(), "sender", 10).await {
        assert!(settle(&h.store, &h.p0(), &expanded, &Settlement::Done).await);
    }
    assert!(!exists(&mut redis, &h.p0().event("k1")));
    assert_eq!(promote_due(&h.store, &h.p0(), 10).await, 1);
    let retried = read(&h.store, &h.p0(), "sender", 10).await;
    assert_eq!(retried.len(), 1);
    assert_eq!(
        retried[0].carried_body,
        Some(body("k1")),
        "the retried delivery still has its body"
    );
}
