//! Pull delivery's counts, kept by the ingress (receive, settle) and the scheduler's
//! sweep alike, recorded only for settles that took effect (so a stale token
//! counts nothing): an acknowledgement is a `DeliverySuccessCount`, an event ended by
//! reject, count or time-to-live a `DeadLetteredCount` or, without a dead-letter
//! destination, a `DroppedEventCount`, each with the reason.

use crate::metrics as m;
use eg_core::{DeadLetterReason, Subscription};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    Acknowledged,
    Ended(DeadLetterReason, Destination),
    Nothing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    DeadLettered,
    Dropped,
}

impl Tally {
    /// An event of `sub` ended for `reason`.
    pub fn ended(sub: &Subscription, reason: DeadLetterReason) -> Self {
        let destination = if sub.dead_letter.is_some() {
            Destination::DeadLettered
        } else {
            Destination::Dropped
        };
        Self::Ended(reason, destination)
    }

    /// Counts it for the subscription `key` (`<topic>/<subscription>`).
    pub fn record(self, key: &str) {
        let (topic, subscription) = key.split_once('/').unwrap_or((key, ""));
        let (topic, subscription) = (topic.to_owned(), subscription.to_owned());
        match self {
            Self::Acknowledged => {
                metrics::counter!(m::DELIVERY_SUCCESS_COUNT, "topic" => topic, "subscription" => subscription)
                    .increment(1);
            }
            Self::Ended(reason, Destination::DeadLettered) => {
                metrics::counter!(m::DEAD_LETTERED_COUNT, "topic" => topic, "subscription" => subscription, "reason" => reason.as_str())
                    .increment(1);
            }
            Self::Ended(reason, Destination::Dropped) => {
                metrics::counter!(m::DROPPED_EVENT_COUNT, "topic" => topic, "subscription" => subscription, "reason" => reason.as_str())
                    .increment(1);
            }
            Self::Nothing => {}
        }
    }
}
