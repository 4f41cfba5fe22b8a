//! The decision after (and before) an attempt: deliver, retry at T, or dead-letter with
//! a reason (behaviour.md#what-a-failure-leads-to, behaviour.md#retry-schedule-and-policy,
//! behaviour.md#dead-lettering), as a [`Decision`] (defined in `fate` with the reasons).
//! Pure: the clock and the jitter draw are arguments.

use crate::delivery::Delivery;
pub use crate::fate::{DeadLetterReason, Decision};
use crate::outcome::{AttemptOutcome, Handling, OutcomePolicy};
use crate::profile::DeliveryProfile;
use crate::retry::RetrySchedule;
use crate::subscription::RetryPolicy;
use crate::time::UnixMillis;
use std::time::Duration;

/// The deployment-wide delivery policy; per-subscription limits come in `RetryPolicy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryPolicy {
    pub schedule: RetrySchedule,
    pub outcomes: OutcomePolicy,
    /// Jitter is at most a tenth of the delay and never more than this.
    pub max_jitter: Duration,
    /// Cap on an endpoint's `Retry-After` (429/503).
    pub max_retry_after: Duration,
}

impl Default for DeliveryPolicy {
    fn default() -> Self {
        Self {
            schedule: RetrySchedule::default(),
            outcomes: OutcomePolicy::default(),
            max_jitter: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(600),
        }
    }
}

impl DeliveryPolicy {
    /// Before attempting: a delivery already out of attempts or time is not attempted.
    pub fn before_attempt(
        &self,
        delivery: &Delivery,
        limits: &RetryPolicy,
        now: UnixMillis,
    ) -> Option<DeadLetterReason> {
        if delivery.attempts >= limits.max_delivery_attempts() {
            Some(DeadLetterReason::MaxDeliveryAttemptsExceeded)
        } else if now >= ttl_deadline(delivery, limits) {
            Some(DeadLetterReason::TimeToLiveExceeded)
        } else {
            None
        }
    }

    /// After an attempt: `attempted` is the delivery with this attempt already counted;
    /// `jitter_draw` is uniform in `[0, 1)`.
    pub fn after_attempt(
        &self,
        attempted: &Delivery,
        limits: &RetryPolicy,
        outcome: &AttemptOutcome,
        now: UnixMillis,
        jitter_draw: f64,
    ) -> Decision {
        let at_least = match self.outcomes.classify(outcome) {
            Handling::Delivered => return Decision::Delivered,
            Handling::NotRetried => {
                return Decision::DeadLetter(DeadLetterReason::NonRetriableFailure);
            }
            Handling::Retry { at_least } => at_least,
        };
        if attempted.attempts >= limits.max_delivery_attempts() {
            return Decision::DeadLetter(DeadLetterReason::MaxDeliveryAttemptsExceeded);
        }
        let deadline = ttl_deadline(attempted, limits);
        if now >= deadline {
            return Decision::DeadLetter(DeadLetterReason::TimeToLiveExceeded);
        }
        let delay = self
            .schedule
            .delay_after(attempted.attempts)
            .max(at_least)
            .max(self.retry_after(outcome));
        let at = now.plus(delay).plus(self.jitter(delay, jitter_draw));
        // Past the TTL there will be no attempt: wake at the deadline to dead-letter then,
        // not at the next scheduled attempt as Event Grid does.
        Decision::RetryAt(at.min(deadline))
    }

    /// When a delivery held back until `until` (endpoint probation) is looked at again:
    /// spread a little so held-back deliveries do not all return at once, and never
    /// later than the end of its time-to-live.
    pub fn held_back_until(
        &self,
        delivery: &Delivery,
        limits: &RetryPolicy,
        until: UnixMillis,
        now: UnixMillis,
        jitter_draw: f64,
    ) -> UnixMillis {
        let wait = until.since(now);
        until
            .plus(self.jitter(wait.max(Duration::from_secs(10)), jitter_draw))
            .min(ttl_deadline(delivery, limits))
    }

    fn retry_after(&self, outcome: &AttemptOutcome) -> Duration {
        match outcome {
            AttemptOutcome::Status {
                code: 429 | 503,
                retry_after: Some(d),
            } => (*d).min(self.max_retry_after),
            _ => Duration::ZERO,
        }
    }

    fn jitter(&self, delay: Duration, draw: f64) -> Duration {
        let bound = (delay / 10).min(self.max_jitter);
        bound.mul_f64(draw.clamp(0.0, 1.0))
    }
}

/// One delivery policy per delivery profile (behaviour.md#retry-schedule-and-policy,
/// behaviour.md#namespace-topics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfilePolicies {
    pub custom_topic: DeliveryPolicy,
    pub namespace_topic: DeliveryPolicy,
}

impl Default for ProfilePolicies {
    fn default() -> Self {
        Self {
            custom_topic: DeliveryPolicy::default(),
            namespace_topic: DeliveryPolicy {
                schedule: RetrySchedule::namespace_topic(),
                outcomes: OutcomePolicy::namespace_topic(),
                ..DeliveryPolicy::default()
            },
        }
    }
}

impl ProfilePolicies {
    pub fn of(&self, profile: DeliveryProfile) -> &DeliveryPolicy {
        match profile {
            DeliveryProfile::CustomTopic => &self.custom_topic,
            DeliveryProfile::NamespaceTopic => &self.namespace_topic,
        }
    }
}

/// The moment the delivery's time-to-live ends.
pub fn ttl_deadline(delivery: &Delivery, limits: &RetryPolicy) -> UnixMillis {
    delivery.published_at.plus(limits.event_time_to_live())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::LastAttempt;
    use crate::outcome::OutcomeName;
    use proptest::prelude::*;

    const MINUTE: i64 = 60_000;

    fn limits(attempts: u32, ttl_minutes: u32) -> RetryPolicy {
        RetryPolicy::new(attempts, ttl_minutes).unwrap()
    }

    fn failed(d: &Delivery, at: UnixMillis) -> Delivery {
        d.after_attempt(LastAttempt {
            outcome: OutcomeName::GenericError,
            status: Some(500),
            at,
        })
    }

    fn status(code: u16) -> AttemptOutcome {
        AttemptOutcome::Status {
            code,
            retry_after: None,
        }
    }

    fn fresh() -> Delivery {
        Delivery::new("d".into(), "e".into(), "t".into(), "s".into(), UnixMillis(0))
    }

    #[test]
    fn spec_example_ttl_30_minutes_and_10_attempts_allows_6_attempts() {
        let policy = DeliveryPolicy::default();
        let limits = limits(10, 30);
        let mut delivery = fresh();
        let mut now = UnixMillis(0);
        let mut attempts = 0;
        loop {
            if policy.before_attempt(&delivery, &limits, now).is_some() {
                break;
            }
            attempts += 1;
            delivery = failed(&delivery, now);
            match policy.after_attempt(&delivery, &limits, &AttemptOutcome::TimedOut, now, 0.0) {
                Decision::RetryAt(at) => now = at,
                Decision::DeadLetter(reason) => {
                    assert_eq!(reason, DeadLetterReason::TimeToLiveExceeded);
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(attempts, 6);
        assert_eq!(
            policy.before_attempt(&delivery, &limits, now),
            Some(DeadLetterReason::TimeToLiveExceeded)
        );
    }

    #[test]
    fn not_retried_statuses_dead_letter_at_once() {
        let policy = DeliveryPolicy::default();
        let d = failed(&fresh(), UnixMillis(0));
        assert_eq!(
            policy.after_attempt(&d, &limits(30, 1440), &status(400), UnixMillis(0), 0.5),
            Decision::DeadLetter(DeadLetterReason::NonRetriableFailure)
        );
    }

    #[test]
    fn last_attempt_dead_letters_with_max_attempts() {
        let policy = DeliveryPolicy::default();
        let mut d = fresh();
        for _ in 0..3 {
            d = failed(&d, UnixMillis(0));
        }
        assert_eq!(
            policy.after_attempt(&d, &limits(3, 1440), &status(500), UnixMillis(0), 0.0),
            Decision::DeadLetter(DeadLetterReason::MaxDeliveryAttemptsExceeded)
        );
    }

    #[test]
    fn status_minimum_and_retry_after_stretch_the_schedule() {
        let policy = DeliveryPolicy {
            schedule: RetrySchedule::parse("1s").unwrap(),
            ..Default::default()
        };
        let d = failed(&fresh(), UnixMillis(0));
        let l = limits(30, 1440);
        assert_eq!(
            policy.after_attempt(&d, &l, &status(503), UnixMillis(0), 0.0),
            Decision::RetryAt(UnixMillis(30_000))
        );
        assert_eq!(
            policy.after_attempt(&d, &l, &status(408), UnixMillis(0), 0.0),
            Decision::RetryAt(UnixMillis(120_000))
        );
        let busy = AttemptOutcome::Status {
            code: 429,
            retry_after: Some(Duration::from_secs(90)),
        };
        assert_eq!(
            policy.after_attempt(&d, &l, &busy, UnixMillis(0), 0.0),
            Decision::RetryAt(UnixMillis(90_000))
        );
        let greedy = AttemptOutcome::Status {
            code: 503,
            retry_after: Some(Duration::from_secs(86_400)),
        };
        assert_eq!(
            policy.after_attempt(&d, &l, &greedy, UnixMillis(0), 0.0),
            Decision::RetryAt(UnixMillis(600_000))
        );
    }

    #[test]
    fn a_retry_past_the_ttl_wakes_at_the_deadline() {
        let policy = DeliveryPolicy::default();
        let mut d = fresh();
        for _ in 0..5 {
            d = failed(&d, UnixMillis(0));
        }
        // Sixth step is 30 min; the TTL ends at minute 20.
        let now = UnixMillis(15 * MINUTE);
        assert_eq!(
            policy.after_attempt(&d, &limits(30, 20), &AttemptOutcome::TimedOut, now, 0.9),
            Decision::RetryAt(UnixMillis(20 * MINUTE))
        );
    }

    fn arb_outcome() -> impl Strategy<Value = AttemptOutcome> {
        prop_oneof![
            (100u16..600, proptest::option::of(0u64..100_000)).prop_map(|(code, ra)| {
                AttemptOutcome::Status {
                    code,
                    retry_after: ra.map(Duration::from_secs),
                }
            }),
            Just(AttemptOutcome::TimedOut),
            Just(AttemptOutcome::SocketError),
            Just(AttemptOutcome::ResolutionError),
            Just(AttemptOutcome::Aborted),
        ]
    }

    proptest! {
        #[test]
        fn next_attempt_is_never_earlier_than_the_status_minimum_unless_the_ttl_ends_first(
            outcome in arb_outcome(), attempts in 1u32..30, elapsed_min in 0i64..1440, draw in 0.0f64..1.0,
        ) {
            let policy = DeliveryPolicy::default();
            let l = limits(30, 1440);
            let mut d = fresh();
            d.attempts = attempts;
            let now = UnixMillis(elapsed_min * MINUTE);
            if let Decision::RetryAt(at) = policy.after_attempt(&d, &l, &outcome, now, draw) {
                let deadline = ttl_deadline(&d, &l);
                prop_assert!(at > now || at == deadline);
                if let Handling::Retry { at_least } = policy.outcomes.classify(&outcome) {
                    prop_assert!(at >= now.plus(at_least) || at == deadline);
                }
                prop_assert!(at >= now.plus(policy.schedule.delay_after(attempts)) || at == deadline);
            }
        }

        #[test]
        fn attempts_never_exceed_the_maximum_and_the_ttl_is_never_overrun(
            max_attempts in 1u32..=30, ttl_min in 1u32..=1440,
            outcomes in proptest::collection::vec(arb_outcome(), 1..40), draw in 0.0f64..1.0,
        ) {
            let policy = DeliveryPolicy::default();
            let l = limits(max_attempts, ttl_min);
            let deadline = UnixMillis(i64::from(ttl_min) * MINUTE);
            let mut d = fresh();
            let mut now = UnixMillis(0);
            for outcome in outcomes.iter().cycle().take(100) {
                if policy.before_attempt(&d, &l, now).is_some() {
                    break;
                }
                prop_assert!(now < deadline);
                d = failed(&d, now);
                prop_assert!(d.attempts <= max_attempts);
                match policy.after_attempt(&d, &l, outcome, now, draw) {
                    Decision::RetryAt(at) => {
                        prop_assert!(at <= deadline, "retry at {at:?} after deadline {deadline:?}");
                        now = at;
                    }
                    _ => break,
                }
            }
            prop_assert!(d.attempts <= max_attempts);
        }

        #[test]
        fn jitter_is_bounded(delay_ms in 0u64..100_000_000, draw in 0.0f64..1.0) {
            let policy = DeliveryPolicy::default();
            let delay = Duration::from_millis(delay_ms);
            prop_assert!(policy.jitter(delay, draw) <= policy.max_jitter);
            prop_assert!(policy.jitter(delay, draw) <= delay / 10);
        }
    }

    #[test]
    fn namespace_profile_retries_on_its_own_schedule_and_table() {
        let policies = ProfilePolicies::default();
        let ns = policies.of(DeliveryProfile::NamespaceTopic);
        let limits = RetryPolicy::namespace(10, Duration::from_secs(86_400)).unwrap();
        let mut d = fresh();
        let mut delays = Vec::new();
        let mut now = UnixMillis(0);
        for _ in 0..6 {
            d = failed(&d, now);
            match ns.after_attempt(&d, &limits, &status(500), now, 0.0) {
                Decision::RetryAt(at) => {
                    delays.push(at.since(now).as_secs());
                    now = at;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(delays, [10, 30, 60, 300, 300, 300]);
        let timed_out = ns.after_attempt(&failed(&fresh(), now), &limits, &AttemptOutcome::TimedOut, now, 0.0);
        assert_eq!(timed_out, Decision::DeadLetter(DeadLetterReason::NonRetriableFailure));
        assert_eq!(
            ns.after_attempt(&failed(&fresh(), now), &limits, &status(404), now, 0.0),
            Decision::DeadLetter(DeadLetterReason::NonRetriableFailure)
        );
        // The custom-topic profile retries a 404.
        let custom = policies.of(DeliveryProfile::CustomTopic);
        assert!(matches!(
            custom.after_attempt(&failed(&fresh(), now), &limits, &status(404), now, 0.0),
            Decision::RetryAt(_)
        ));
    }
}
