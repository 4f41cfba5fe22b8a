//! What becomes of a queued event (pull delivery), as pure functions of its delivery
//! count, its publish time, the subscription's limits (`maxDeliveryCount` and
//! `eventTimeToLive`, the subscription's `retry_policy`) and the time:
//!
//! - at receive, an event whose count has gone past the maximum (its last lock expired)
//!   or whose time-to-live has ended is not handed out: dead-lettered with
//!   `MaxDeliveryCountExceeded` or `TimeToLiveExceeded`;
//! - a release of the maximum-th delivery dead-letters (`MaxDeliveryCountExceeded`), as
//!   does a release after the time-to-live (`TimeToLiveExceeded`); otherwise the event
//!   comes back now or after the delay;
//! - a reject dead-letters (`Rejected`);
//! - the scheduler's sweep ends events whose last allowed lock expired, or whose
//!   time-to-live ended, even when nobody receives any more.
//!
//! Each dead-letter becomes a drop with the same reason when the subscription has no
//! dead-letter destination (`fate::DeadLetterReason::dead_letter_to`).

use crate::fate::DeadLetterReason;
use crate::subscription::RetryPolicy;
use crate::time::UnixMillis;
use std::time::Duration;

/// At receive (or sweep): hand the event out, or end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueStep {
    Deliver,
    DeadLetter(DeadLetterReason),
}

/// At release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseStep {
    /// Receivable again at once.
    Requeue,
    /// Receivable again at this time.
    DelayUntil(UnixMillis),
    DeadLetter(DeadLetterReason),
}

fn expired(published_at: UnixMillis, policy: &RetryPolicy, now: UnixMillis) -> bool {
    published_at.plus(policy.event_time_to_live()) <= now
}

/// An event about to be handed out for its `delivery_count`-th time (counting from 1).
pub fn on_receive(delivery_count: u32, published_at: UnixMillis, policy: &RetryPolicy, now: UnixMillis) -> QueueStep {
    if delivery_count > policy.max_delivery_attempts() {
        QueueStep::DeadLetter(DeadLetterReason::MaxDeliveryCountExceeded)
    } else if expired(published_at, policy, now) {
        QueueStep::DeadLetter(DeadLetterReason::TimeToLiveExceeded)
    } else {
        QueueStep::Deliver
    }
}

/// A release of the `delivery_count`-th delivery, with `delay`.
pub fn on_release(
    delivery_count: u32,
    published_at: UnixMillis,
    policy: &RetryPolicy,
    delay: Duration,
    now: UnixMillis,
) -> ReleaseStep {
    if delivery_count >= policy.max_delivery_attempts() {
        ReleaseStep::DeadLetter(DeadLetterReason::MaxDeliveryCountExceeded)
    } else if expired(published_at, policy, now) {
        ReleaseStep::DeadLetter(DeadLetterReason::TimeToLiveExceeded)
    } else if delay.is_zero() {
        ReleaseStep::Requeue
    } else {
        ReleaseStep::DelayUntil(now.plus(delay))
    }
}

/// A reject: always the end of the event.
pub fn on_reject() -> DeadLetterReason {
    DeadLetterReason::Rejected
}

/// The scheduler's look at an event whose lock has expired (`lock_expired`) or that
/// waits unreceived: `Some` when it must end now.
pub fn on_sweep(
    delivery_count: u32,
    lock_expired: bool,
    published_at: UnixMillis,
    policy: &RetryPolicy,
    now: UnixMillis,
) -> Option<DeadLetterReason> {
    if lock_expired && delivery_count >= policy.max_delivery_attempts() {
        Some(DeadLetterReason::MaxDeliveryCountExceeded)
    } else if (lock_expired || delivery_count == 0) && expired(published_at, policy, now) {
        // A held lock is left to its holder until it expires: it may still acknowledge.
        Some(DeadLetterReason::TimeToLiveExceeded)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy::namespace(3, Duration::from_secs(60)).unwrap()
    }
    const T0: UnixMillis = UnixMillis(1_000_000);

    #[test]
    fn receive_hands_out_until_the_count_or_the_ttl_ends() {
        assert_eq!(on_receive(1, T0, &policy(), T0), QueueStep::Deliver);
        assert_eq!(on_receive(3, T0, &policy(), T0), QueueStep::Deliver);
        assert_eq!(
            on_receive(4, T0, &policy(), T0),
            QueueStep::DeadLetter(DeadLetterReason::MaxDeliveryCountExceeded)
        );
        assert_eq!(
            on_receive(1, T0, &policy(), T0.plus(Duration::from_secs(59))),
            QueueStep::Deliver
        );
        assert_eq!(
            on_receive(1, T0, &policy(), T0.plus(Duration::from_secs(60))),
            QueueStep::DeadLetter(DeadLetterReason::TimeToLiveExceeded)
        );
    }

    #[test]
    fn release_comes_back_unless_it_was_the_last_delivery() {
        let now = T0.plus(Duration::from_secs(1));
        assert_eq!(on_release(1, T0, &policy(), Duration::ZERO, now), ReleaseStep::Requeue);
        assert_eq!(
            on_release(2, T0, &policy(), Duration::from_secs(10), now),
            ReleaseStep::DelayUntil(now.plus(Duration::from_secs(10)))
        );
        assert_eq!(
            on_release(3, T0, &policy(), Duration::ZERO, now),
            ReleaseStep::DeadLetter(DeadLetterReason::MaxDeliveryCountExceeded)
        );
        assert_eq!(
            on_release(1, T0, &policy(), Duration::ZERO, T0.plus(Duration::from_secs(61))),
            ReleaseStep::DeadLetter(DeadLetterReason::TimeToLiveExceeded)
        );
        assert_eq!(on_reject(), DeadLetterReason::Rejected);
    }

    #[test]
    fn the_sweep_ends_expired_last_locks_and_ttls_but_not_held_locks() {
        let later = T0.plus(Duration::from_secs(120));
        assert_eq!(
            on_sweep(3, true, T0, &policy(), T0),
            Some(DeadLetterReason::MaxDeliveryCountExceeded)
        );
        assert_eq!(on_sweep(3, false, T0, &policy(), T0), None);
        assert_eq!(on_sweep(2, true, T0, &policy(), T0), None);
        assert_eq!(
            on_sweep(0, false, T0, &policy(), later),
            Some(DeadLetterReason::TimeToLiveExceeded)
        );
        assert_eq!(
            on_sweep(1, true, T0, &policy(), later),
            Some(DeadLetterReason::TimeToLiveExceeded)
        );
        assert_eq!(on_sweep(1, false, T0, &policy(), later), None);
    }
}
