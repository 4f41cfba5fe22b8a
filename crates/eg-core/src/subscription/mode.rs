//! How a subscription hands events over (Event Grid namespaces' `deliveryMode`): pushed
//! to its endpoint by the senders, or kept in a queue that consumers pull from with a
//! lock and then acknowledge, release or reject (pull delivery).

use crate::api_error::InvalidField;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Receive lock duration range (Event Grid's `receiveLockDurationInSeconds`: 60–300 s,
/// default 60 s).
pub(crate) const MIN_RECEIVE_LOCK: Duration = Duration::from_secs(60);
pub(crate) const MAX_RECEIVE_LOCK: Duration = Duration::from_secs(300);
pub(crate) const DEFAULT_RECEIVE_LOCK: Duration = MIN_RECEIVE_LOCK;

/// The delivery mode. Push is every subscription written before pull delivery existed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "mode")]
pub enum DeliveryMode {
    /// The senders deliver to the subscription's endpoint (webhook).
    #[default]
    Push,
    /// Events wait in the subscription's queue until a consumer receives them; a received
    /// event is locked to its receiver for `receive_lock_seconds`. Delivery count and
    /// time-to-live are the subscription's `retry_policy`.
    Queue { receive_lock_seconds: u32 },
}

impl DeliveryMode {
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
        matches!(self, Self::Push)
    }

    /// How long a received event stays locked to its receiver; `None` in push mode.
    pub fn receive_lock(self) -> Option<Duration> {
        match self {
            Self::Push => None,
            Self::Queue { receive_lock_seconds } => Some(Duration::from_secs(u64::from(receive_lock_seconds))),
        }
    }

    /// Event Grid's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Push => "Push",
            Self::Queue { .. } => "Queue",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_lock_is_within_event_grids_range() {
        assert_eq!(
            DeliveryMode::queue(60).unwrap().receive_lock(),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            DeliveryMode::queue(300).unwrap().receive_lock(),
            Some(Duration::from_secs(300))
        );
        for bad in [0, 59, 301, u64::MAX] {
            let e = DeliveryMode::queue(bad).unwrap_err();
            assert_eq!(e.field, "receiveLockDurationInSeconds");
            assert!(e.problem.contains("between 60 and 300"), "{}", e.problem);
        }
        assert_eq!(DeliveryMode::Push.receive_lock(), None);
    }

    #[test]
    fn stored_form_defaults_to_push_and_round_trips() {
        let queue = DeliveryMode::queue(90).unwrap();
        let stored = serde_json::to_string(&queue).unwrap();
        assert_eq!(stored, r#"{"mode":"queue","receiveLockSeconds":90}"#);
        assert_eq!(serde_json::from_str::<DeliveryMode>(&stored).unwrap(), queue);
        assert_eq!(
            serde_json::from_str::<DeliveryMode>(r#"{"mode":"push"}"#).unwrap(),
            DeliveryMode::Push
        );
    }
}
