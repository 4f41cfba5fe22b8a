//! Turns a decision of eg-core into a settlement in Redis, and counts and logs it once
//! the settlement took effect (a settle that finds the delivery taken back counts nothing).

use eg_core::deadletter::DeadLetterEntry;
use eg_core::subscription::Subscription;
use eg_core::{DeadLetterReason, Decision, Delivery, UnixMillis};
use eg_runtime::metrics as m;
use eg_store::Settlement;

/// A settlement with what it means for the metrics.
pub struct Settled {
    pub settlement: Settlement,
    tally: Tally,
    delivery: Delivery,
}

enum Tally {
    Delivered,
    Retried,
    DeadLettered(DeadLetterReason),
    Dropped(String),
}

/// The settlement for `decision` about `delivery` (already carrying the attempt made).
pub fn settlement(decision: Decision, delivery: &Delivery, subscription: &Subscription, now: UnixMillis) -> Settled {
    let (settlement, tally) = match decision {
        Decision::Delivered => (Settlement::Done, Tally::Delivered),
        Decision::RetryAt(due) => (
            Settlement::Retry {
                delivery: delivery.clone(),
                due,
            },
            Tally::Retried,
        ),
        Decision::DeadLetter(reason) => match &subscription.dead_letter {
            Some(destination) => (
                Settlement::DeadLetter {
                    entry: DeadLetterEntry::for_delivery(
                        delivery,
                        subscription,
                        &destination.container_name,
                        reason,
                        now,
                    ),
                },
                Tally::DeadLettered(reason),
            ),
            None => (Settlement::Done, Tally::Dropped(reason.to_string())),
        },
        Decision::Drop(reason) => (Settlement::Done, Tally::Dropped(reason.to_string())),
    };
    Settled {
        settlement,
        tally,
        delivery: delivery.clone(),
    }
}

/// A delivery held back uncharged (endpoint probation) until `due`.
pub fn held_back(delivery: Delivery, due: UnixMillis) -> Settled {
    Settled {
        settlement: Settlement::Retry {
            delivery: delivery.clone(),
            due,
        },
        tally: Tally::Retried,
        delivery,
    }
}

/// A delivery that ends without reaching anyone, for `reason`.
pub fn dropped(delivery: &Delivery, reason: &str) -> Settled {
    Settled {
        settlement: Settlement::Done,
        tally: Tally::Dropped(reason.to_owned()),
        delivery: delivery.clone(),
    }
}

impl Settled {
    /// Counts and logs the settlement; call once it took effect.
    pub fn record(&self) {
        let d = &self.delivery;
        let (topic, subscription) = (d.topic.clone(), d.subscription.clone());
        match &self.tally {
            Tally::Delivered => {
                metrics::counter!(m::DELIVERY_SUCCESS_COUNT, "topic" => topic, "subscription" => subscription)
                    .increment(1);
            }
            Tally::Retried => {}
            Tally::DeadLettered(reason) => {
                metrics::counter!(m::DEAD_LETTERED_COUNT, "topic" => topic, "subscription" => subscription, "reason" => reason.as_str())
                    .increment(1);
                tracing::info!(topic = %d.topic, subscription = %d.subscription, delivery = %d.id, attempts = d.attempts, %reason, "dead-lettered");
            }
            Tally::Dropped(reason) => {
                metrics::counter!(m::DROPPED_EVENT_COUNT, "topic" => topic, "subscription" => subscription, "reason" => reason.clone())
                    .increment(1);
                tracing::warn!(topic = %d.topic, subscription = %d.subscription, delivery = %d.id, attempts = d.attempts, reason, "dropped");
            }
        }
    }
}
