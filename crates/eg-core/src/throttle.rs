//! Rate limits shared by every sender (`deliveryLimits`, docs/rate-limits.md): the policy,
//! pure. A subscription's pace is one record ([`ThrottleRecord`]) that every sender
//! reads and changes through two steps:
//!
//! - [`gate`] before an attempt: go (with how many requests were granted and, with a
//!   concurrency cap, a lease for this attempt), or do not attempt before a time because
//!   the endpoint asked eg to slow down (`Slowed`), the rate is spent (`Wait`) or every
//!   slot is in flight (`Full`). Waiting is not an attempt: the delivery goes back to the
//!   retry set unchanged.
//! - [`after_busy`] / [`release`] after it: a `429`/`503` slows the whole subscription,
//!   for the time its `Retry-After` asked, or else by a backoff that doubles while the
//!   endpoint stays busy and starts again from the bottom after a quiet spell.
//!
//! The rate is a GCRA (generic cell rate algorithm): one time stamp, the theoretical
//! arrival time `tat`, moves on by one interval per request; a request may go when `tat`
//! is at most `(burst - 1)` intervals ahead of now. Requests that must wait are given
//! turns in a queue (`plan`), one interval apart, so handed-back deliveries come back
//! spread at the cap, not all at once. eg-store runs the same machine in Lua on one
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
        let digest = Sha256::digest(text.as_bytes());
        Self(digest[..16].iter().map(|b| format!("{b:02x}")).collect())
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
    /// No attempt before this (Retry-After or adaptive backoff), ms (0: not slowed).
    pub slowed_until: i64,
    /// Busy answers without Retry-After in a row (each within twice its backoff).
    pub busy_streak: u32,
    /// When the last of them came, ms.
    pub busy_at: i64,
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
    /// The rate is spent: this delivery's turn is at `turn`.
    Wait { turn: UnixMillis },
    /// Every slot is in flight; the first lease expires at `earliest` (most end sooner).
    Full { earliest: UnixMillis },
    /// The endpoint asked eg to slow down (or keeps answering busy): nothing before `until`.
    Slowed { until: UnixMillis },
}

impl ThrottleGate {
    /// The reason label of a throttled gate, as metrics name it.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Self::Go { .. } => None,
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
}

/// How a busy answer without Retry-After slows a subscription, and the cap on any slowdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusyPolicy {
    /// The first backoff; each busy answer within twice the last backoff doubles it.
    pub base: Duration,
    /// The longest slowdown, whatever `Retry-After` asks.
    pub max: Duration,
}

impl Default for BusyPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
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
    let granted = match limits.interval() {
        None => ask.want.max(1),
        Some(interval) => {
            let t = us(interval).max(1);
            let now_us = now.saturating_mul(1000);
            let tau = i64::from(limits.burst().saturating_sub(1)).saturating_mul(t);
            let tat = record.tat_us.max(now_us);
            let ahead = tat - now_us;
            if ahead > tau {
                let turn = record.plan_us.max(tat - tau);
                record.plan_us = turn + t;
                return ThrottleGate::Wait {
                    turn: UnixMillis(turn.div_euclid(1000) + i64::from(turn.rem_euclid(1000) > 0)),
                };
            }
            let room = (tau - ahead) / t + 1;
            let granted = i64::from(ask.want.max(1)).min(room);
            record.tat_us = tat + granted * t;
            u32::try_from(granted).unwrap_or(1)
        }
    };
    if let (Some(_), Some((id, lasts))) = (max, ask.lease) {
        record.leases.insert(id.to_owned(), now.saturating_add(ms(lasts)));
    }
    ThrottleGate::Go { granted }
}

/// An attempt's lease ends (`delivery_feedback.lua` with outcome `done`).
pub fn release(record: &mut ThrottleRecord, lease: &str) {
    record.leases.remove(lease);
}

/// A `429`/`503` answer (`delivery_feedback.lua` with outcome `busy`): with `Retry-After`
/// the subscription is slowed for the time asked (at most `policy.max`); without, by a
/// backoff that doubles while busy answers keep coming within twice the last backoff and
/// starts again from `policy.base` after a quiet spell. Slowdowns only ever lengthen.
pub fn after_busy(record: &mut ThrottleRecord, now: UnixMillis, retry_after: Option<Duration>, policy: BusyPolicy) {
    let now = now.0;
    let length = match retry_after {
        Some(asked) => ms(asked).min(ms(policy.max)),
        None => {
            let recent = record.busy_at > 0 && now - record.busy_at <= 2 * backoff(record.busy_streak, policy);
            record.busy_streak = if recent {
                record.busy_streak.saturating_add(1)
            } else {
                1
            };
            record.busy_at = now;
            backoff(record.busy_streak, policy)
        }
    };
    record.slowed_until = record.slowed_until.max(now.saturating_add(length));
}

/// The backoff after `streak` busy answers in a row, ms: base, 2×base, 4×base … up to max.
pub fn backoff(streak: u32, policy: BusyPolicy) -> i64 {
    let doublings = streak.saturating_sub(1).min(30);
    ms(policy.base).saturating_mul(1 << doublings).min(ms(policy.max))
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
        };
        assert_eq!(gate(&mut r, Some(&l), want(3)), ThrottleGate::Go { granted: 3 });
        assert_eq!(gate(&mut r, Some(&l), want(3)), ThrottleGate::Go { granted: 2 });
        assert!(matches!(gate(&mut r, Some(&l), want(3)), ThrottleGate::Wait { .. }));
    }

    #[test]
    fn the_concurrency_cap_holds_until_a_lease_ends_or_expires() {
        let l = limits(json!({"maxConcurrentRequests": 2}));
        let mut r = ThrottleRecord::default();
        let leased = |id: &'static str, now| GateAsk {
            now: UnixMillis(now),
            want: 1,
            lease: Some((id, Duration::from_secs(10))),
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
        after_busy(
            &mut r,
            UnixMillis(0),
            Some(Duration::from_secs(2)),
            BusyPolicy::default(),
        );
        assert_eq!(
            gate(&mut r, None, ask(1999)),
            ThrottleGate::Slowed {
                until: UnixMillis(2000)
            }
        );
        assert_eq!(gate(&mut r, None, ask(2000)), ThrottleGate::Go { granted: 1 });
        // A shorter Retry-After never shortens a slowdown; the policy caps a long one.
        after_busy(
            &mut r,
            UnixMillis(0),
            Some(Duration::from_secs(1)),
            BusyPolicy::default(),
        );
        assert_eq!(r.slowed_until, 2000);
        after_busy(
            &mut r,
            UnixMillis(0),
            Some(Duration::from_secs(9999)),
            BusyPolicy::default(),
        );
        assert_eq!(r.slowed_until, 300_000);
        assert_eq!(r.busy_streak, 0, "Retry-After is not adaptive backoff");
    }

    #[test]
    fn busy_without_retry_after_doubles_then_recovers_after_a_quiet_spell() {
        let p = BusyPolicy::default();
        let mut r = ThrottleRecord::default();
        after_busy(&mut r, UnixMillis(10_000), None, p);
        assert_eq!(r.slowed_until, 11_000);
        after_busy(&mut r, UnixMillis(11_000), None, p);
        assert_eq!(r.slowed_until, 13_000);
        after_busy(&mut r, UnixMillis(13_000), None, p);
        assert_eq!(r.slowed_until, 17_000);
        // Quiet for more than twice the last backoff (4 s): back to the base.
        after_busy(&mut r, UnixMillis(30_000), None, p);
        assert_eq!((r.busy_streak, r.slowed_until), (1, 31_000));
        assert_eq!(backoff(40, p), 300_000);
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
