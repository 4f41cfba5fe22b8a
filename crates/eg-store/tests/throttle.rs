//! Shared rate limits against a real Redis: the gate and feedback scripts checked step by
//! step against eg-core's pure machine, one cap shared by several senders, leases of a
//! sender that died, key expiry and the hash tag. Times are passed in, so nothing sleeps.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::UnixMillis;
use eg_core::subscription::DeliveryLimits;
use eg_core::throttle::{self, BusyPolicy, GateAsk, ThrottleGate, ThrottleId, ThrottleRecord};
use eg_store::keyspace::slot;
use eg_store::throttle::LIMIT_KEY_TTL;
use serde_json::json;
use std::time::Duration;

const T0: i64 = 1_700_000_000_000;
const LEASE: Duration = Duration::from_secs(5);

fn limits(v: serde_json::Value) -> DeliveryLimits {
    DeliveryLimits::parse(&v).unwrap()
}

fn ask(now: i64, want: u32, lease: Option<&str>) -> GateAsk<'_> {
    GateAsk {
        now: UnixMillis(now),
        want,
        lease: lease.map(|id| (id, LEASE)),
        reserve_within: Duration::ZERO,
    }
}

async fn record(h: &Harness, id: &ThrottleId) -> ThrottleRecord {
    h.store
        .throttle_records(std::slice::from_ref(id))
        .await
        .unwrap()
        .remove(0)
}

/// A small deterministic generator (no rand dependency in this crate's tests).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// Random gates, lease ends and busy answers on subscriptions with every kind of limit:
/// after each step the scripts' answer and the stored record equal eg-core's machine.
#[tokio::test]
async fn the_scripts_run_the_same_machine_as_eg_core() {
    let h = Harness::start().await;
    let policy = BusyPolicy {
        max: Duration::from_secs(1),
    };
    let subs = [
        Some(limits(json!({"requestsPerSecond": 20, "burst": 4}))),
        Some(limits(json!({"requestsPerSecond": 0.7}))),
        Some(limits(json!({"maxConcurrentRequests": 3}))),
        Some(limits(
            json!({"requestsPerSecond": 50, "burst": 2, "maxConcurrentRequests": 2}),
        )),
        None,
    ];
    let ids: Vec<ThrottleId> = (0..subs.len())
        .map(|i| ThrottleId::of("orders", &format!("s{i}")))
        .collect();
    let mut models = vec![ThrottleRecord::default(); subs.len()];
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut now = T0;
    let mut seen = [0usize; 5];
    for step in 0..4000 {
        now += rng.next(60) as i64;
        let s = rng.next(subs.len() as u64) as usize;
        let lease = format!("sender-{}:{step}", rng.next(4));
        match rng.next(16) {
            0..=11 => {
                let want = 1 + rng.next(3) as u32;
                let a = GateAsk {
                    reserve_within: Duration::from_millis(rng.next(3) * 400),
                    ..ask(now, want, Some(&lease))
                };
                let expected = throttle::gate(&mut models[s], subs[s].as_ref(), a);
                let got = h
                    .store
                    .delivery_gate(&ids[s], subs[s].as_ref(), a, policy)
                    .await
                    .unwrap();
                assert_eq!(got, expected, "step {step}: gate");
                seen[match got {
                    ThrottleGate::Go { .. } => 0,
                    ThrottleGate::Wait { .. } => 1,
                    ThrottleGate::Full { .. } => 2,
                    ThrottleGate::Slowed { .. } => 3,
                    ThrottleGate::Reserved { .. } => 4,
                }] += 1;
            }
            12..=14 => {
                let Some(held) = models[s].leases.keys().next().cloned() else {
                    continue;
                };
                throttle::release(&mut models[s], &held);
                let slowed = h
                    .store
                    .delivery_feedback(&ids[s], UnixMillis(now), &held, None, policy)
                    .await
                    .unwrap();
                assert_eq!(slowed, None, "step {step}: a lease ended");
            }
            _ => {
                let retry_after = Duration::from_millis(rng.next(1500));
                throttle::slow_down(&mut models[s], UnixMillis(now), retry_after, policy);
                let until = h
                    .store
                    .delivery_feedback(&ids[s], UnixMillis(now), "", Some(retry_after), policy)
                    .await
                    .unwrap();
                assert_eq!(until, Some(UnixMillis(models[s].slowed_until)), "step {step}: slowed");
            }
        }
        assert_eq!(record(&h, &ids[s]).await, models[s], "step {step}: stored record");
    }
    assert!(
        seen.iter().all(|n| *n > 50),
        "go, wait, full, slowed, reserved: {seen:?}"
    );
}

/// Four senders ask at once, every 10 ms of a simulated 10 s: together they get the burst
/// plus one request per interval, exactly what one sender would.
#[tokio::test]
async fn four_senders_share_one_cap() {
    let h = Harness::start().await;
    let l = limits(json!({"requestsPerSecond": 40, "burst": 5}));
    let id = ThrottleId::of("orders", "partner");
    let mut granted = 0u32;
    for tick in 0..1000 {
        let now = T0 + tick * 10;
        let asks = (0..4).map(|_| {
            h.store
                .delivery_gate(&id, Some(&l), ask(now, 1, None), BusyPolicy::default())
        });
        for gate in futures_util::future::try_join_all(asks).await.unwrap() {
            if let ThrottleGate::Go { granted: n } = gate {
                granted += n;
            }
        }
    }
    // 10 s at 40/s after a burst of 5, the last interval not yet reached.
    assert_eq!(granted, 5 + 399);
}

/// A sender that dies mid-attempt never ends its lease: the slot comes back when the lease
/// expires, not before.
#[tokio::test]
async fn a_dead_senders_lease_expires() {
    let h = Harness::start().await;
    let l = limits(json!({"maxConcurrentRequests": 1}));
    let id = ThrottleId::of("orders", "slow");
    let p = BusyPolicy::default();
    let gate = |now, lease| h.store.delivery_gate(&id, Some(&l), ask(now, 1, Some(lease)), p);
    assert_eq!(gate(T0, "dead:1").await.unwrap(), ThrottleGate::Go { granted: 1 });
    let lease_end = T0 + 5000;
    assert_eq!(
        gate(T0 + 4999, "alive:1").await.unwrap(),
        ThrottleGate::Full {
            earliest: UnixMillis(lease_end)
        }
    );
    assert_eq!(
        gate(lease_end, "alive:1").await.unwrap(),
        ThrottleGate::Go { granted: 1 }
    );
    h.store
        .delivery_feedback(&id, UnixMillis(lease_end + 1), "alive:1", None, p)
        .await
        .unwrap();
    assert_eq!(
        gate(lease_end + 2, "alive:2").await.unwrap(),
        ThrottleGate::Go { granted: 1 }
    );
}

/// A busy answer slows an unlimited subscription too, for every sender that asks.
#[tokio::test]
async fn retry_after_reaches_every_sender_of_an_unlimited_subscription() {
    let h = Harness::start().await;
    let id = ThrottleId::of("orders", "open");
    let p = BusyPolicy::default();
    assert_eq!(
        h.store.delivery_gate(&id, None, ask(T0, 1, None), p).await.unwrap(),
        ThrottleGate::Go { granted: 1 }
    );
    let until = h
        .store
        .delivery_feedback(&id, UnixMillis(T0), "", Some(Duration::from_secs(2)), p)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(until, UnixMillis(T0 + 2000));
    assert_eq!(
        h.store
            .delivery_gate(&id, None, ask(T0 + 1999, 1, None), p)
            .await
            .unwrap(),
        ThrottleGate::Slowed { until }
    );
    assert_eq!(
        h.store
            .delivery_gate(&id, None, ask(T0 + 2000, 1, None), p)
            .await
            .unwrap(),
        ThrottleGate::Go { granted: 1 }
    );
}

/// Both keys share the subscription's own hash tag (one slot, one script on a cluster) and
/// expire after the last write.
#[tokio::test]
async fn limit_keys_share_a_tag_and_expire() {
    let h = Harness::start().await;
    let id = ThrottleId::of("orders", "partner");
    let (limit, leases) = (h.store.keys().limit(&id), h.store.keys().leases(&id));
    assert_eq!(slot(&limit), slot(&leases));
    assert_ne!(
        slot(&limit),
        slot(&h.store.keys().limit(&ThrottleId::of("orders", "other")))
    );
    let l = limits(json!({"requestsPerSecond": 1, "maxConcurrentRequests": 1}));
    h.store
        .delivery_gate(&id, Some(&l), ask(T0, 1, Some("a:1")), BusyPolicy::default())
        .await
        .unwrap();
    let mut redis = h.redis();
    for key in [&limit, &leases] {
        let ttl: i64 = redis::cmd("PTTL").arg(key).query(&mut redis).unwrap();
        assert!(ttl > 0 && ttl <= LIMIT_KEY_TTL.as_millis() as i64, "{key}: {ttl}");
    }
    assert_eq!(h.store.throttle_records(&[]).await.unwrap(), Vec::new());
}
