//! A subscription's retry limits (behaviour.md#retry-schedule-and-policy,
//! behaviour.md#namespace-topics): when delivery of one event stops. The
//! ranges depend on the topic's delivery profile; a `RetryPolicy` exists only within them.

use crate::api_error::InvalidField;
use crate::profile::DeliveryProfile;
use crate::time::iso8601_duration;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Custom-topic limits: `maxDeliveryAttempts` 1–30, `eventTimeToLiveInMinutes` 1–1440.
pub(crate) const CUSTOM_MAX_DELIVERY_ATTEMPTS: u32 = 30;
pub(crate) const CUSTOM_MAX_TTL_MINUTES: u32 = 1440;

/// When delivery of one event stops: after `max_delivery_attempts` attempts or once its
/// time-to-live has passed, whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    max_delivery_attempts: u32,
    event_time_to_live_seconds: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_delivery_attempts: CUSTOM_MAX_DELIVERY_ATTEMPTS,
            event_time_to_live_seconds: u64::from(CUSTOM_MAX_TTL_MINUTES) * 60,
        }
    }
}

/// Namespace-topic limits (behaviour.md#namespace-topics): `maxDeliveryCount` 1–10, TTL
/// `PT1M` … `P7D`.
pub const NAMESPACE_MAX_DELIVERY_COUNT: u32 = 10;
pub(crate) const NAMESPACE_MIN_TTL: Duration = Duration::from_secs(60);
pub(crate) const NAMESPACE_MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
pub const NAMESPACE_DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

impl RetryPolicy {
    /// Custom-topic limits: `maxDeliveryAttempts` 1–30, `eventTimeToLiveInMinutes` 1–1440.
    pub fn new(max_delivery_attempts: u32, ttl_minutes: u32) -> Result<Self, InvalidField> {
        if !(1..=CUSTOM_MAX_DELIVERY_ATTEMPTS).contains(&max_delivery_attempts) {
            return Err(InvalidField::new(
                "maxDeliveryAttempts",
                format!("must be between 1 and {CUSTOM_MAX_DELIVERY_ATTEMPTS}, got {max_delivery_attempts}"),
            ));
        }
        if !(1..=CUSTOM_MAX_TTL_MINUTES).contains(&ttl_minutes) {
            return Err(InvalidField::new(
                "eventTimeToLiveInMinutes",
                format!("must be between 1 and {CUSTOM_MAX_TTL_MINUTES}, got {ttl_minutes}"),
            ));
        }
        Ok(Self {
            max_delivery_attempts,
            event_time_to_live_seconds: u64::from(ttl_minutes) * 60,
        })
    }

    /// Namespace-topic limits: `maxDeliveryCount` 1–10, time-to-live `PT1M` … `P7D`.
    pub(crate) fn namespace(max_delivery_count: u32, ttl: Duration) -> Result<Self, InvalidField> {
        if !(1..=NAMESPACE_MAX_DELIVERY_COUNT).contains(&max_delivery_count) {
            return Err(InvalidField::new(
                "maxDeliveryCount",
                format!("must be between 1 and {NAMESPACE_MAX_DELIVERY_COUNT}, got {max_delivery_count}"),
            ));
        }
        if !(NAMESPACE_MIN_TTL..=NAMESPACE_MAX_TTL).contains(&ttl) {
            return Err(InvalidField::new(
                "eventTimeToLive",
                format!("must be between PT1M and P7D, got {}", iso8601_duration(ttl)),
            ));
        }
        Ok(Self {
            max_delivery_attempts: max_delivery_count,
            event_time_to_live_seconds: ttl.as_secs(),
        })
    }

    /// This policy, if its time-to-live fits in the topic's event retention (namespace
    /// topics: `eventTimeToLive` cannot outlast `eventRetentionInDays`).
    pub(crate) fn within_retention(self, retention: Option<Duration>) -> Result<Self, InvalidField> {
        match retention {
            Some(retention) if self.event_time_to_live() > retention => Err(InvalidField::new(
                "eventTimeToLive",
                format!(
                    "must not be longer than the topic's eventRetentionInDays ({}), got {}",
                    iso8601_duration(retention),
                    iso8601_duration(self.event_time_to_live())
                ),
            )),
            _ => Ok(self),
        }
    }

    pub fn max_delivery_attempts(&self) -> u32 {
        self.max_delivery_attempts
    }

    pub fn event_time_to_live(&self) -> Duration {
        Duration::from_secs(self.event_time_to_live_seconds)
    }
}

impl RetryPolicy {
    /// The policy of a subscription whose resource gives none.
    pub(crate) fn default_for(profile: DeliveryProfile) -> Self {
        match profile {
            DeliveryProfile::CustomTopic => Self::default(),
            DeliveryProfile::NamespaceTopic => Self {
                max_delivery_attempts: NAMESPACE_MAX_DELIVERY_COUNT,
                event_time_to_live_seconds: NAMESPACE_DEFAULT_TTL.as_secs(),
            },
        }
    }
}
