//! The sender's side of `deliveryLimits` (docs/rate-limits.md): before an attempt, ask the
//! subscription's shared gate (`eg_core::throttle`, run in Redis so every sender shares
//! one cap); after it, end the attempt's lease and pass a busy answer on so the whole
//! subscription slows down.
//!
//! Kept cheap where it can be:
//! - A subscription without limits asks the gate at most once a second per sender, only to
//!   learn whether an endpoint asked to slow down (a `Retry-After` recorded by another
//!   sender reaches this one within about a second), and its successes cost nothing.
//! - A rate without a concurrency cap asks for a few requests at once (about 10 ms worth,
//!   within the burst) and spends them here within 500 ms; an unspent one is lost, which
//!   can only under-deliver.
//! - A slowdown seen once is remembered here until it ends.
//! - A delivery over the rate whose turn is at most [`MAX_LOCAL_WAIT`] ahead takes that
//!   turn and waits for it here: no settle, no promotion, no second gate call.
//!
//! If Redis cannot answer, the attempt goes ahead: limits protect an endpoint's quota but
//! must not stop delivery on a hiccup (probation makes the same choice).

use crate::store::DeliveryStore;
use eg_core::subscription::Subscription;
use eg_core::throttle::{BusyPolicy, GateAsk, ThrottleGate, ThrottleId};
use eg_core::{AttemptOutcome, UnixMillis};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often a subscription without limits looks for a slowdown.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// How long a grant of several requests may be spent here. Spending a reserved request
/// late never takes the rate over the cap in the long run; losing it under-delivers.
const GRANT_FOR: Duration = Duration::from_millis(500);
/// How much of the rate one gate call asks for at once: small, so that with several
/// senders each spends its grant before it goes stale.
const GRANT_SPAN_SECS: f64 = 0.01;
/// A lease outlives the attempt timeout by this much, so only a dead sender's expires.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// How far ahead a delivery over the rate takes a turn and waits for it here, holding its
/// slot, instead of going back to the retry set. A handed-back delivery comes back late
/// (promotion, a read), and turns nobody takes meanwhile are lost: the deliveries waiting
/// here keep the rate busy across those gaps. Short, so a slot is not held long.
const MAX_LOCAL_WAIT: Duration = Duration::from_millis(250);

/// What the limits say about an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Attempt at `at` (now, or a turn reserved a moment ahead); end `lease` (if any) with
    /// [`Limits::after`].
    Go { lease: Option<String>, at: UnixMillis },
    /// Do not attempt before `until`: hand the deliveries back unchanged.
    Throttled { until: UnixMillis, reason: &'static str },
}

/// What this sender knows of one subscription's pace.
#[derive(Default)]
struct Local {
    looked_at: Option<Instant>,
    slowed_until: Option<UnixMillis>,
    grant_left: u32,
    grant_until: Option<Instant>,
}

/// Every subscription's pace as this sender knows it.
pub struct Limits {
    local: Mutex<HashMap<ThrottleId, Local>>,
    /// This sender's lease ids: `<random>:<n>`, unique across senders and restarts.
    lease_prefix: String,
    leases: AtomicU64,
    policy: BusyPolicy,
}

impl Default for Limits {
    fn default() -> Self {
        Self::new(BusyPolicy::default().max)
    }
}

impl Limits {
    /// `max_retry_after` caps a slowdown as it caps a delivery's own retry
    /// (`EG__DELIVERY__MAX_RETRY_AFTER`): a `Retry-After: 3600` must not stop a
    /// subscription longer than the deployment lets it delay one delivery.
    pub fn new(max_retry_after: Duration) -> Self {
        Self {
            local: Mutex::default(),
            lease_prefix: format!("{:016x}", rand::random::<u64>()),
            leases: AtomicU64::new(0),
            policy: BusyPolicy { max: max_retry_after },
        }
    }
}

/// A `429`/`503`: the endpoint says it is busy; its `Retry-After`, if any.
pub fn busy(outcome: &AttemptOutcome) -> Option<Option<Duration>> {
    match outcome {
        AttemptOutcome::Status {
            code: 429 | 503,
            retry_after,
        } => Some(*retry_after),
        _ => None,
    }
}

/// A busy answer that said when to come back: the endpoint is pacing eg, not failing, so
/// it is kept out of probation (docs/rate-limits.md#retry-after-and-probation).
pub fn asked_to_wait(outcome: &AttemptOutcome) -> bool {
    matches!(busy(outcome), Some(Some(_)))
}

fn id_of(subscription: &Subscription) -> ThrottleId {
    ThrottleId::of(&subscription.topic.key(), &subscription.name.key())
}

impl Limits {
    /// Whether an attempt of `subscription` may go now; `attempt_timeout` bounds its lease.
    pub async fn admit<S: DeliveryStore>(
        &self,
        store: &S,
        subscription: &Subscription,
        now: UnixMillis,
        attempt_timeout: Duration,
    ) -> Admission {
        let id = id_of(subscription);
        let limits = subscription.limits.as_ref();
        let concurrency = limits.and_then(|l| l.max_concurrent()).is_some();
        {
            let mut local = self.lock();
            let mine = local.entry(id.clone()).or_default();
            if let Some(until) = mine.slowed_until.filter(|until| *until > now) {
                return Admission::Throttled {
                    until,
                    reason: "slowedDown",
                };
            }
            let fresh = |at: Option<Instant>, span| at.is_some_and(|at: Instant| at.elapsed() < span);
            if limits.is_none() && fresh(mine.looked_at, LOOK_EVERY) {
                return Admission::Go { lease: None, at: now };
            }
            if !concurrency && mine.grant_left > 0 && fresh(mine.grant_until, GRANT_FOR) {
                mine.grant_left -= 1;
                return Admission::Go { lease: None, at: now };
            }
        }
        let want = match limits.and_then(|l| l.requests_per_second()) {
            Some(rate) if !concurrency => ((rate * GRANT_SPAN_SECS) as u32).clamp(1, limits.map_or(1, |l| l.burst())),
            _ => 1,
        };
        let lease =
            concurrency.then(|| format!("{}:{}", self.lease_prefix, self.leases.fetch_add(1, Ordering::Relaxed)));
        let ask = GateAsk {
            now,
            want,
            lease: lease.as_deref().map(|l| (l, attempt_timeout + LEASE_MARGIN)),
            reserve_within: MAX_LOCAL_WAIT,
        };
        let gate = match store.delivery_gate(&id, limits, ask, self.policy).await {
            Ok(gate) => gate,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the subscription's delivery limits; attempting anyway");
                return Admission::Go { lease: None, at: now };
            }
        };
        let mut local = self.lock();
        let mine = local.entry(id).or_default();
        mine.looked_at = Some(Instant::now());
        let fresh_grant = mine.grant_left > 0 && mine.grant_until.is_some_and(|at| at.elapsed() < GRANT_FOR);
        match gate {
            // Grants add up: concurrent attempts of this sender may each have asked, and
            // none of what was taken from the shared rate is thrown away while fresh.
            ThrottleGate::Go { granted } => {
                let left = if fresh_grant { mine.grant_left } else { 0 };
                mine.grant_left = left.saturating_add(granted.saturating_sub(1));
                mine.grant_until = Some(Instant::now());
                Admission::Go { lease, at: now }
            }
            ThrottleGate::Reserved { at } => Admission::Go { lease, at },
            // Another attempt of this sender was granted meanwhile: spend from that.
            ThrottleGate::Wait { .. } if fresh_grant && !concurrency => {
                mine.grant_left -= 1;
                Admission::Go { lease: None, at: now }
            }
            ThrottleGate::Slowed { until } => {
                mine.slowed_until = Some(until);
                Admission::Throttled {
                    until,
                    reason: "slowedDown",
                }
            }
            ThrottleGate::Wait { turn } => Admission::Throttled {
                until: turn,
                reason: "rate",
            },
            // Most leases end long before the earliest expiry: look again soon.
            ThrottleGate::Full { earliest } => Admission::Throttled {
                until: earliest.min(UnixMillis(now.0 + 50 + (rand::random::<u64>() % 200) as i64)),
                reason: "concurrency",
            },
        }
    }

    /// After an attempt: ends its lease, and on a busy answer with `Retry-After` slows the
    /// subscription for every sender. Nothing to do (no Redis call) for an attempt without a lease that the
    /// endpoint did not answer busy.
    pub async fn after<S: DeliveryStore>(
        &self,
        store: &S,
        subscription: &Subscription,
        lease: Option<String>,
        outcome: &AttemptOutcome,
        now: UnixMillis,
    ) {
        // Only a busy answer that says when to come back slows the whole subscription.
        // Without `Retry-After`, probation is the adaptive backoff (shared by every sender,
        // growing, ended by one success): stopping the subscription as well would stall
        // it for answers that may be one overloaded instance's (docs/rate-limits.md).
        let retry_after = busy(outcome).flatten();
        if lease.is_none() && retry_after.is_none() {
            return;
        }
        let id = id_of(subscription);
        let lease = lease.unwrap_or_default();
        match store
            .delivery_feedback(&id, now, &lease, retry_after, self.policy)
            .await
        {
            Ok(Some(until)) => {
                tracing::info!(until = %until.to_rfc3339(), "endpoint busy; the subscription slows down");
                self.lock().entry(id).or_default().slowed_until = Some(until);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cannot report the attempt to the subscription's delivery limits"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ThrottleId, Local>> {
        self.local.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_busy_answer_with_retry_after_is_kept_out_of_probation() {
        let status = |code, retry_after| AttemptOutcome::Status { code, retry_after };
        assert!(asked_to_wait(&status(429, Some(Duration::from_secs(2)))));
        assert!(asked_to_wait(&status(503, Some(Duration::from_secs(2)))));
        assert!(!asked_to_wait(&status(429, None)));
        assert!(!asked_to_wait(&status(500, Some(Duration::from_secs(2)))));
        assert_eq!(busy(&status(503, None)), Some(None));
        assert_eq!(busy(&status(200, None)), None);
    }
}
