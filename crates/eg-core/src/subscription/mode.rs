//! How a subscription hands events over (Event Grid namespaces' `deliveryMode`): pushed
//! to its destination by the senders, or kept in a queue that consumers pull from with a
//! lock and then acknowledge, release or reject (pull delivery). One sum type, so a
//! queue with a destination, or a push subscription without one, cannot be written.

use crate::api_error::InvalidField;
use crate::destination::Target;
use std::time::Duration;

/// Receive lock duration range (Event Grid's `receiveLockDurationInSeconds`: 60–300 s,
/// default 60 s).
pub(crate) const MIN_RECEIVE_LOCK: Duration = Duration::from_secs(60);
pub(crate) const MAX_RECEIVE_LOCK: Duration = Duration::from_secs(300);
pub(crate) const DEFAULT_RECEIVE_LOCK: Duration = MIN_RECEIVE_LOCK;

/// How a subscription's events are handed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryMethod {
    /// The senders deliver to `target`. Written in either JSON form (`written_as`),
    /// and shown in the one it was written in.
    Push { target: Target, written_as: WrittenAs },
    /// Events wait in the subscription's queue until a consumer receives them; a
    /// received event is locked to its receiver for `receive_lock_seconds`. Delivery
    /// count and time-to-live are the subscription's `retry_policy`. Only the namespace
    /// form writes it.
    Queue { receive_lock_seconds: u32 },
}

/// Which of Event Grid's two subscription JSON forms a subscription was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrittenAs {
    /// The custom-topic form (`properties.destination`).
    CustomTopic,
    /// The namespace form (`properties.deliveryConfiguration`).
    Namespace,
}

impl DeliveryMethod {
    /// Queue mode with `receiveLockDurationInSeconds` `seconds` (60–300).
    pub(crate) fn queue(seconds: u64) -> Result<Self, InvalidField> {
        let lock = Duration::from_secs(seconds);
        if !(MIN_RECEIVE_LOCK..=MAX_RECEIVE_LOCK).contains(&lock) {
            return Err(InvalidField::new(
                "receiveLockDurationInSeconds",
                format!(
                    "must be between {} and {} seconds, got {seconds}",
                    MIN_RECEIVE_LOCK.as_secs(),
                    MAX_RECEIVE_LOCK.as_secs()
                ),
            ));
        }
        Ok(Self::Queue {
            receive_lock_seconds: u32::try_from(seconds).unwrap_or(u32::MAX),
        })
    }

    pub fn is_push(&self) -> bool {
        matches!(self, Self::Push { .. })
    }

    /// How long a received event stays locked to its receiver; `None` in push mode.
    pub fn receive_lock(&self) -> Option<Duration> {
        match self {
            Self::Push { .. } => None,
            Self::Queue { receive_lock_seconds } => Some(Duration::from_secs(u64::from(*receive_lock_seconds))),
        }
    }

    /// Event Grid's name of the mode.
    pub fn mode_name(&self) -> &'static str {
        match self {
            Self::Push { .. } => "Push",
            Self::Queue { .. } => "Queue",
        }
    }

    /// The JSON form it is shown in: queue mode exists only in the namespace form.
    pub fn written_as(&self) -> WrittenAs {
        match self {
            Self::Push { written_as, .. } => *written_as,
            Self::Queue { .. } => WrittenAs::Namespace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_lock_is_within_event_grids_range() {
        assert_eq!(
            DeliveryMethod::queue(60).unwrap().receive_lock(),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            DeliveryMethod::queue(300).unwrap().receive_lock(),
            Some(Duration::from_secs(300))
        );
        for bad in [0, 59, 301, u64::MAX] {
            let e = DeliveryMethod::queue(bad).unwrap_err();
            assert_eq!(e.field, "receiveLockDurationInSeconds");
            assert!(e.problem.contains("between 60 and 300"), "{}", e.problem);
        }
        let push = DeliveryMethod::Push {
            target: Target::WebHook(Default::default()),
            written_as: WrittenAs::CustomTopic,
        };
        assert_eq!(push.receive_lock(), None);
        assert_eq!(DeliveryMethod::queue(90).unwrap().written_as(), WrittenAs::Namespace);
    }
}
