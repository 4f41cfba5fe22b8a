//! Turns a decision of eg-core into a settlement in Redis, with its metrics and log.

use eg_core::deadletter::DeadLetterEntry;
use eg_core::subscription::Subscription;
use eg_core::{DeadLetterReason, Decision, Delivery, UnixMillis};
use eg_runtime::metrics as m;
use eg_store::Settlement;

/// The settlement for `decision` about `delivery` (already carrying the attempt made).
pub fn settlement(decision: Decision, delivery: &Delivery, subscription: &Subscription, now: UnixMillis) -> Settlement {
    let labels = [
        ("topic", delivery.topic.clone()),
        ("subscription", delivery.subscription.clone()),
    ];
    match decision {
        Decision::Delivered => {
            metrics::counter!(m::DELIVERY_SUCCESS_COUNT, &labels).increment(1);
            Settlement::Done
        }
        Decision::RetryAt(due) => Settlement::Retry {
            delivery: delivery.clone(),
            due,
        },
        Decision::DeadLetter(reason) => match &subscription.dead_letter {
            Some(destination) => {
                metrics::counter!(m::DEAD_LETTERED_COUNT, &with_reason(&labels, reason)).increment(1);
                tracing::info!(topic = %delivery.topic, subscription = %delivery.subscription, delivery = %delivery.id, %reason, "dead-lettered");
                Settlement::DeadLetter {
                    entry: DeadLetterEntry::for_delivery(
                        delivery,
                        subscription,
                        &destination.container_name,
                        reason,
                        now,
                    ),
                }
            }
            None => dropped(delivery, &reason.to_string()),
        },
        Decision::Drop(reason) => dropped(delivery, &reason.to_string()),
    }
}

/// A delivery that ends without reaching anyone: counted and logged with its reason.
pub fn dropped(delivery: &Delivery, reason: &str) -> Settlement {
    metrics::counter!(
        m::DROPPED_EVENT_COUNT,
        "topic" => delivery.topic.clone(),
        "subscription" => delivery.subscription.clone(),
        "reason" => reason.to_owned()
    )
    .increment(1);
    tracing::warn!(topic = %delivery.topic, subscription = %delivery.subscription, delivery = %delivery.id, attempts = delivery.attempts, reason, "dropped");
    Settlement::Done
}

fn with_reason(labels: &[(&'static str, String); 2], reason: DeadLetterReason) -> [(&'static str, String); 3] {
    [labels[0].clone(), labels[1].clone(), ("reason", reason.to_string())]
}
