//! Rate limits shared by every sender (`deliveryLimits`, docs/rate-limits.md): the policy,
//! pure. A subscription's pace is one record ([`ThrottleRecord`]) that every sender
//! reads and changes through two steps:
//!
//! - [`gate`] before an attempt: go (with how many requests were granted and, with a
//!   concurrency cap, a lease for this attempt), go at a turn taken a moment ahead
//!   (`Reserved`), or do not attempt before a time because the endpoint asked eg to slow
//!   down (`Slowed`), the rate is spent (`Wait`) or every slot is in flight (`Full`).
//!   Waiting is not an attempt: the delivery goes back to the retry set unchanged.
//! - [`slow_down`] / [`release`] after it: a `429`/`503` with `Retry-After` slows the
//!   whole subscription for the time asked (without one, the endpoint's probation is the
//!   backoff: docs/rate-limits.md).
//!
//! The rate is a GCRA (generic cell rate algorithm): one time stamp, the theoretical
//! arrival time `tat`, moves on by one interval per request; a request may go when `tat`
//! is at most `(burst - 1)` intervals ahead of now. Requests that must wait are given
//! turns in a queue (`plan`), one interval apart, so handed-back deliveries come back
//! spread at the cap, not all at once. A handed-back delivery comes back late (the
//! scheduler promotes it, a sender reads it), and a turn nobody is there to take is lost
//! for good; so a request whose turn is a moment ahead (`reserve_within`) takes that turn
//! at once and waits for it in the sender. The reserved turns are a queue in `tat`
//! itself, which keeps the rate busy across the gaps in which handed-back deliveries
//! are still on their way. eg-store runs the same machine in Lua on one
//! hash tag per subscription (`delivery_gate.lua`, `delivery_feedback.lua`); its tests
//! check the scripts against these functions.

use crate::subscription::DeliveryLimits;
use crate::time::UnixMillis;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// A subscription's identity for its limit keys: the first 16 bytes of the SHA-256 of
/// `<topic>/<subscription>` in lower case, in hex, so subscriptions spread over a cluster's
/// slots and any sender computes the same id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThrottleId(String);

impl ThrottleId {
    pub fn of(topic: &str, subscription: &str) -> Self {
        let text = format!("{topic}/{subscription}").to_lowercase();
        Self(crate::probation::hex(&Sha256::digest(text.as_bytes())[..16]))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ThrottleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A subscription's pace as stored (one Redis hash plus a sorted set of leases). No record
/// means nothing sent lately and nothing slowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThrottleRecord {
    /// GCRA theoretical arrival time, µs (0: never).
    pub tat_us: i64,
    /// The next waiting turn handed out, µs (0: none).
    pub plan_us: i64,
    /// No attempt before this (an endpoint's Retry-After), ms (0: not slowed).
    pub slowed_until: i64,
    /// Attempts in flight: lease id → expiry, ms. A sender that dies mid-attempt loses
    /// its lease when it expires.
    pub leases: BTreeMap<String, i64>,
}

/// What a sender may do before an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleGate {
    /// Attempt now; `granted` requests (≥ 1) were taken from the rate (spend the rest
    /// within a moment or lose them).
    Go { granted: u32 },
    /// The rate is spent for now, but the turn at `at` (within the ask's `reserve_within`)
    /// is taken for this one request: attempt then, without asking again.
    Reserved { at: UnixMillis },
    /// The rate is spent: this delivery's turn is at `turn`.
    Wait { turn: UnixMillis },
    /// Every slot is in flight; the first lease expires at `earliest` (most end sooner).
    Full { earliest: UnixMillis },
    /// The endpoint asked eg to slow down: nothing before `until`.
    Slowed { until: UnixMillis },
}

impl ThrottleGate {
    /// The reason label of a throttled gate, as metrics name it.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Self::Go { .. } | Self::Reserved { .. } => None,
            Self::Wait { .. } => Some("rate"),
            Self::Full { .. } => Some("concurrency"),
            Self::Slowed { .. } => Some("slowedDown"),
        }
    }
}

/// One gate question.
#[derive(Debug, Clone, Copy)]
pub struct GateAsk<'a> {
    pub now: UnixMillis,
    /// Requests wanted at once (1 unless the caller spends a grant locally).
    pub want: u32,
    /// This attempt's lease id (unique per attempt) and how long it may last.
    pub lease: Option<(&'a str, Duration)>,
    /// How far ahead a turn may be taken when the rate is spent now (zero: never; the
    /// delivery waits in the retry set instead).
    pub reserve_within: Duration,
}

/// How far a busy answer may slow a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusyPolicy {
    /// The longest slowdown, whatever `Retry-After` asks.
    pub max: Duration,
}

impl Default for BusyPolicy {
    fn default() -> Self {
        Self {
            max: Duration::from_secs(300),
        }
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn us(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// The gate (`delivery_gate.lua` is the same machine). In order: slowed, then the
/// concurrency cap (expired leases dropped first), then the rate; a lease is taken only
/// when the attempt may go. `limits` `None` checks only the slowdown.
pub fn gate(record: &mut ThrottleRecord, limits: Option<&DeliveryLimits>, ask: GateAsk<'_>) -> ThrottleGate {
    let now = ask.now.0;
    if record.slowed_until > now {
        return ThrottleGate::Slowed {
            until: UnixMillis(record.slowed_until),
        };
    }
    let Some(limits) = limits else {
        return ThrottleGate::Go {
            granted: ask.want.max(1),
        };
    };
    let max = limits.max_concurrent().map(|n| n.get());
    if let Some(max) = max {
        record.leases.retain(|_, expiry| *expiry > now);
        if record.leases.len() >= max as usize {
            let earliest = record.leases.values().min().copied().unwrap_or(now);
            return ThrottleGate::Full {
                earliest: UnixMillis(earliest),
            };
        }
    }
    let pass = match limits.interval() {
        None => ThrottleGate::Go {
            granted: ask.want.max(1),
        },
        Some(interval) => match rate(record, us(interval).max(1), limits.burst(), ask) {
            Some(pass) => pass,
            None => return wait(record, us(interval).max(1), limits.burst(), now),
        },
    };
    // A reserved attempt's lease runs from its turn: it is not in flight before.
    let starts = match pass {
        ThrottleGate::Reserved { at } => at.0,
        _ => now,
    };
    if let (Some(_), Some((id, lasts))) = (max, ask.lease) {
        record.leases.insert(id.to_owned(), starts.saturating_add(ms(lasts)));
    }
    pass
}

/// The GCRA step for a request that may go: now (`Go`, up to `want` at once, within the
/// burst) or at a turn no further ahead than `reserve_within` (`Reserved`, one request).
/// `None` when the next turn is further ahead.
fn rate(record: &mut ThrottleRecord, t: i64, burst: u32, ask: GateAsk<'_>) -> Option<ThrottleGate> {
    let now_us = ask.now.0.saturating_mul(1000);
    let tau = i64::from(burst.saturating_sub(1)).saturating_mul(t);
    let tat = record.tat_us.max(now_us);
    let ahead = tat - now_us;
    if ahead <= tau {
        let room = (tau - ahead) / t + 1;
        let granted = i64::from(ask.want.max(1)).min(room);
        record.tat_us = tat + granted * t;
        return Some(ThrottleGate::Go {
            granted: u32::try_from(granted).unwrap_or(1),
        });
    }
    // The first moment a request conforms again; taking it moves `tat` on as a request
    // arriving then would, so reserved turns never exceed the cap.
    let next = tat - tau;
    if next - now_us > us(ask.reserve_within) {
        return None;
    }
    record.tat_us = tat + t;
    Some(ThrottleGate::Reserved { at: ceil_ms(next) })
}

/// The rate is spent: the next waiting turn, one interval after the last one handed out
/// and never before the rate has room.
fn wait(record: &mut ThrottleRecord, t: i64, burst: u32, now: i64) -> ThrottleGate {
    let tau = i64::from(burst.saturating_sub(1)).saturating_mul(t);
    let tat = record.tat_us.max(now.saturating_mul(1000));
    let turn = record.plan_us.max(tat - tau);
    record.plan_us = turn + t;
    ThrottleGate::Wait { turn: ceil_ms(turn) }
}

fn ceil_ms(at_us: i64) -> UnixMillis {
    UnixMillis(at_us.div_euclid(1000) + i64::from(at_us.rem_euclid(1000) > 0))
}

/// Deliveries waiting for the rate (the status's `backlog`): the turns handed out that are
/// still ahead, one interval apart, whether their delivery waits in the retry set or in a
/// sender (a reserved turn). An estimate: a turn whose delivery was since dead-lettered or
/// deleted counts until it passes. 0 without a rate; deliveries waiting for a concurrency
/// slot are not counted (they look again within a moment).
pub fn backlog(record: &ThrottleRecord, limits: &DeliveryLimits, now: UnixMillis) -> u64 {
    let Some(interval) = limits.interval() else {
        return 0;
    };
    let t = us(interval).max(1);
    let tau = i64::from(limits.burst().saturating_sub(1)).saturating_mul(t);
    // The next turn to hand out; those handed out lie after now, one interval apart, up to
    // one interval before it.
    let next = record.plan_us.max(record.tat_us - tau);
    let ahead = (next - now.0.saturating_mul(1000)).max(0);
    let intervals = ahead / t + i64::from(ahead % t > 0);
    u64::try_from(intervals - 1).unwrap_or(0)
}

/// An attempt's lease ends (`delivery_feedback.lua` without a Retry-After).
pub fn release(record: &mut ThrottleRecord, lease: &str) {
    record.leases.remove(lease);
}

/// A `429`/`503` answer with `Retry-After` (`delivery_feedback.lua` given one): the
/// subscription is slowed for the time asked, at most `policy.max`. Slowdowns only ever
/// lengthen.
pub fn slow_down(record: &mut ThrottleRecord, now: UnixMillis, retry_after: Duration, policy: BusyPolicy) {
    let length = ms(retry_after).min(ms(policy.max));
    record.slowed_until = record.slowed_until.max(now.0.saturating_add(length));
}

/// When a delivery handed back at `until` is due again: a little later (`jitter`, so
/// senders do not all come back at once), never past its time-to-live deadline (then the
/// scheduler promotes it and the TTL check dead-letters it `TimeToLiveExceeded`).
pub fn due_of_handback(until: UnixMillis, jitter: Duration, ttl_deadline: UnixMillis) -> UnixMillis {
    until.plus(jitter).min(ttl_deadline)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn limits(v: serde_json::Value) -> DeliveryLimits {
        DeliveryLimits::parse(&v).unwrap()
    }

    fn ask(now: i64) -> GateAsk<'static> {
        GateAsk {
            now: UnixMillis(now),
            want: 1,
            lease: None,
            reserve_within: Duration::ZERO,
        }
    }

    #[test]
    fn a_rate_lets_a_burst_through_then_one_per_interval() {
        let l = limits(json!({"requestsPerSecond": 10, "burst": 3}));
        let mut r = ThrottleRecord::default();
        for _ in 0..3 {
            assert_eq!(gate(&mut r, Some(&l), ask(1000)), ThrottleGate::Go { granted: 1 });
        }
        assert_eq!(
            gate(&mut r, Some(&l), ask(1000)),
            ThrottleGate::Wait { turn: UnixMillis(1100) }
        );
        // The next waiting delivery gets the turn after.
        assert_eq!(
            gate(&mut r, Some(&l), ask(1000)),
            ThrottleGate::Wait { turn: UnixMillis(1200) }
        );
        assert_eq!(gate(&mut r, Some(&l), ask(1100)), ThrottleGate::Go { granted: 1 });
        assert!(matches!(gate(&mut r, Some(&l), ask(1150)), ThrottleGate::Wait { .. }));
    }

    #[test]
    fn over_a_long_run_the_rate_is_the_cap() {
        let l = limits(json!({"requestsPerSecond": 2.5, "burst": 1}));
        let mut r = ThrottleRecord::default();
        let sent = (0..100_000)
            .filter(|t| gate(&mut r, Some(&l), ask(*t)) == ThrottleGate::Go { granted: 1 })
            .count();
        assert_eq!(sent, 250);
    }

    #[test]
    fn a_grant_takes_at_most_what_the_burst_allows() {
        let l = limits(json!({"requestsPerSecond": 100, "burst": 5}));
        let mut r = ThrottleRecord::default();
        let want = |n| GateAsk {
            now: UnixMillis(0),
            want: n,
            lease: None,
            reserve_within: Duration::ZERO,
        };
        assert_eq!(gate(&mut r, Some(&l), want(3)), ThrottleGate::Go { granted: 3 });
        assert_eq!(gate(&mut r, Some(&l), want(3)), ThrottleGate::Go { granted: 2 });
        assert!(matches!(gate(&mut r, Some(&l), want(3)), ThrottleGate::Wait { .. }));
    }

    fn reserving(now: i64, within: u64) -> GateAsk<'static> {
        GateAsk {
            reserve_within: Duration::from_millis(within),
            ..ask(now)
        }
    }

    #[test]
    fn a_turn_a_moment_ahead_is_reserved_and_counts_against_the_rate() {
        let l = limits(json!({"requestsPerSecond": 10, "burst": 1}));
        let mut r = ThrottleRecord::default();
        assert_eq!(
            gate(&mut r, Some(&l), reserving(0, 150)),
            ThrottleGate::Go { granted: 1 }
        );
        assert_eq!(
            gate(&mut r, Some(&l), reserving(0, 150)),
            ThrottleGate::Reserved { at: UnixMillis(100) }
        );
        // The next turn (200) is further ahead than 150 ms: wait in the retry set for it.
        assert_eq!(
            gate(&mut r, Some(&l), reserving(0, 150)),
            ThrottleGate::Wait { turn: UnixMillis(200) }
        );
        // The reserved turn is taken: a request at 100 gets the one after.
        assert_eq!(
            gate(&mut r, Some(&l), reserving(100, 150)),
            ThrottleGate::Reserved { at: UnixMillis(200) }
        );
        assert!(matches!(gate(&mut r, Some(&l), ask(150)), ThrottleGate::Wait { .. }));
    }

    #[test]
    fn a_reserved_attempts_lease_runs_from_its_turn() {
        let l = limits(json!({"requestsPerSecond": 10, "burst": 1, "maxConcurrentRequests": 5}));
        let mut r = ThrottleRecord::default();
        let leased = |id: &'static str| GateAsk {
            lease: Some((id, Duration::from_secs(10))),
            ..reserving(0, 500)
        };
        assert_eq!(gate(&mut r, Some(&l), leased("a")), ThrottleGate::Go { granted: 1 });
        assert_eq!(
            gate(&mut r, Some(&l), leased("b")),
            ThrottleGate::Reserved { at: UnixMillis(100) }
        );
        assert_eq!(r.leases.get("b"), Some(&10_100));
    }

    /// A simulated minute at a cap of 200/s with a deep backlog (every delivery waiting
    /// from the start): each handed-back delivery comes back 20–420 ms after its turn
    /// (promotion, a read, a busy machine). Returns (requests sent in the measured 60 s,
    /// most sent in any one second).
    fn simulate(reserve_within: u64) -> (usize, usize) {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let l = limits(json!({"requestsPerSecond": 200, "burst": 20}));
        let mut r = ThrottleRecord::default();
        let mut asks: BinaryHeap<Reverse<i64>> = (0..16_000).map(|i| Reverse(i % 100)).collect();
        let mut sent = Vec::new();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut late = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            20 + (seed % 400) as i64
        };
        while let Some(Reverse(now)) = asks.pop() {
            if now > 70_000 {
                break;
            }
            match gate(&mut r, Some(&l), reserving(now, reserve_within)) {
                ThrottleGate::Go { .. } => sent.push(now),
                ThrottleGate::Reserved { at } => sent.push(at.0),
                ThrottleGate::Wait { turn } => asks.push(Reverse(turn.0 + late())),
                other => panic!("{other:?}"),
            }
        }
        sent.sort_unstable();
        let measured = sent.iter().filter(|t| (10_000..70_000).contains(*t)).count();
        let busiest = (0..sent.len())
            .map(|i| sent[i..].iter().take_while(|u| **u < sent[i] + 1000).count())
            .max()
            .unwrap_or(0);
        (measured, busiest)
    }

    #[test]
    fn the_rate_holds_the_cap_while_handed_back_deliveries_come_back_late() {
        for reserve_within in [0, 250] {
            let (measured, busiest) = simulate(reserve_within);
            // The measured minute holds at most one burst on top of the cap.
            assert!((198 * 60..=200 * 60 + 20).contains(&measured), "{measured} in 60 s");
            // Never more than the burst plus one second's worth in any second.
            assert!(busiest <= 220, "{busiest} in one second");
        }
    }

    #[test]
    fn the_backlog_counts_the_turns_handed_out_ahead() {
        let l = limits(json!({"requestsPerSecond": 10, "burst": 2}));
        let mut r = ThrottleRecord::default();
        assert_eq!(backlog(&r, &l, UnixMillis(0)), 0);
        // The burst goes at once: nothing waits.
        gate(&mut r, Some(&l), ask(0));
        gate(&mut r, Some(&l), ask(0));
        assert_eq!(backlog(&r, &l, UnixMillis(0)), 0);
        // One reserved in a sender (turn 100), three handed back (200, 300, 400).
        assert!(matches!(
            gate(&mut r, Some(&l), reserving(0, 150)),
            ThrottleGate::Reserved { .. }
        ));
        for _ in 0..3 {
            assert!(matches!(gate(&mut r, Some(&l), ask(0)), ThrottleGate::Wait { .. }));
        }
        assert_eq!(backlog(&r, &l, UnixMillis(0)), 4);
        // As turns pass, the backlog shrinks; once they all have, nothing waits.
        assert_eq!(backlog(&r, &l, UnixMillis(250)), 2);
        assert_eq!(backlog(&r, &l, UnixMillis(1_000)), 0);
        let concurrency = limits(json!({"maxConcurrentRequests": 1}));
        assert_eq!(backlog(&r, &concurrency, UnixMillis(0)), 0);
    }

    #[test]
    fn the_concurrency_cap_holds_until_a_lease_ends_or_expires() {
        let l = limits(json!({"maxConcurrentRequests": 2}));
        let mut r = ThrottleRecord::default();
        let leased = |id: &'static str, now| GateAsk {
            now: UnixMillis(now),
            want: 1,
            lease: Some((id, Duration::from_secs(10))),
            reserve_within: Duration::ZERO,
        };
        assert_eq!(gate(&mut r, Some(&l), leased("a", 0)), ThrottleGate::Go { granted: 1 });
        assert_eq!(gate(&mut r, Some(&l), leased("b", 5)), ThrottleGate::Go { granted: 1 });
        assert_eq!(
            gate(&mut r, Some(&l), leased("c", 6)),
            ThrottleGate::Full {
                earliest: UnixMillis(10_000)
            }
        );
        release(&mut r, "a");
        assert_eq!(gate(&mut r, Some(&l), leased("c", 7)), ThrottleGate::Go { granted: 1 });
        // b and c never report: their leases run out.
        assert_eq!(
            gate(&mut r, Some(&l), leased("d", 10_010)),
            ThrottleGate::Go { granted: 1 }
        );
    }

    #[test]
    fn retry_after_slows_even_an_unlimited_subscription_for_the_time_asked() {
        let mut r = ThrottleRecord::default();
        slow_down(&mut r, UnixMillis(0), Duration::from_secs(2), BusyPolicy::default());
        assert_eq!(
            gate(&mut r, None, ask(1999)),
            ThrottleGate::Slowed {
                until: UnixMillis(2000)
            }
        );
        assert_eq!(gate(&mut r, None, ask(2000)), ThrottleGate::Go { granted: 1 });
        // A shorter Retry-After never shortens a slowdown; the policy caps a long one.
        slow_down(&mut r, UnixMillis(0), Duration::from_secs(1), BusyPolicy::default());
        assert_eq!(r.slowed_until, 2000);
        slow_down(&mut r, UnixMillis(0), Duration::from_secs(9999), BusyPolicy::default());
        assert_eq!(r.slowed_until, 300_000);
    }

    #[test]
    fn a_handed_back_delivery_is_never_due_after_its_ttl() {
        let due = due_of_handback(UnixMillis(5000), Duration::from_millis(30), UnixMillis(4000));
        assert_eq!(due, UnixMillis(4000));
        let due = due_of_handback(UnixMillis(5000), Duration::from_millis(30), UnixMillis(9000));
        assert_eq!(due, UnixMillis(5030));
    }

    #[test]
    fn ids_ignore_case_and_differ_per_subscription() {
        assert_eq!(ThrottleId::of("Orders", "Billing"), ThrottleId::of("orders", "billing"));
        assert_ne!(ThrottleId::of("orders", "billing"), ThrottleId::of("orders", "billin"));
        assert_eq!(ThrottleId::of("a", "b").as_str().len(), 32);
    }
}
