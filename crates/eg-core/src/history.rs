//! Delivery history: one entry per step a delivery took (an attempt, a hold-back, a
//! pause), so an operator can ask "what happened to event X?" and get the attempts with
//! their outcome, status, duration and what came next.
//!
//! Entries are written by the sender in the same script that settles the step, so the
//! history never shows a step that did not take effect. They are kept for a limited time
//! and a limited number of events (see `docs/operations.md`); this module only says what
//! an entry holds and how the API shows it.

use crate::outcome::OutcomeName;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Where the delivery stood after the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeliveryState {
    /// The endpoint accepted it; nothing more will happen.
    Delivered,
    /// A retry is scheduled (`next`).
    Retrying,
    /// Handed to the dead-letter destination (`reason` says why).
    DeadLettered,
    /// Ended without reaching anyone and without a dead-letter destination.
    Dropped,
    /// Not attempted: the endpoint is on probation or has not consented yet; no attempt
    /// was charged, it waits until `next`.
    HeldBack,
    /// Not attempted: the subscription is paused; it waits for the resume (or its TTL).
    Paused,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "Delivered",
            Self::Retrying => "Retrying",
            Self::DeadLettered => "DeadLettered",
            Self::Dropped => "Dropped",
            Self::HeldBack => "HeldBack",
            Self::Paused => "Paused",
        }
    }
}

/// One step of one delivery. Short field names: one is written per attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// Subscription key.
    #[serde(rename = "s")]
    pub subscription: String,
    /// Attempts made so far, counting this one if it was an attempt.
    #[serde(rename = "n")]
    pub attempt: u32,
    /// When the step ended.
    #[serde(rename = "t")]
    pub at: UnixMillis,
    /// The attempt's outcome; absent when no attempt was made in this step.
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeName>,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(rename = "d", default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// When the delivery is next due (retries, hold-backs; a pause's is its TTL deadline).
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    pub next: Option<UnixMillis>,
    #[serde(rename = "st")]
    pub state: DeliveryState,
    /// Why it was dead-lettered or dropped.
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl HistoryEntry {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The entry as the management API shows it.
    pub fn to_resource(&self) -> Value {
        json!({
            "subscription": self.subscription,
            "attempt": self.attempt,
            "time": self.at.to_rfc3339(),
            "outcome": self.outcome.map(OutcomeName::as_str),
            "httpStatus": self.http_status,
            "durationMs": self.duration_ms,
            "nextAttemptTime": self.next.map(UnixMillis::to_rfc3339),
            "state": self.state.as_str(),
            "reason": self.reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_show_rfc3339_times() {
        let e = HistoryEntry {
            subscription: "billing".into(),
            attempt: 2,
            at: UnixMillis(1_000),
            outcome: Some(OutcomeName::GenericError),
            http_status: Some(500),
            duration_ms: Some(12),
            next: Some(UnixMillis(61_000)),
            state: DeliveryState::Retrying,
            reason: None,
        };
        let back: HistoryEntry = serde_json::from_str(&e.to_json()).unwrap();
        assert_eq!(back, e);
        let r = e.to_resource();
        assert_eq!(r["time"], "1970-01-01T00:00:01.000Z");
        assert_eq!(r["nextAttemptTime"], "1970-01-01T00:01:01.000Z");
        assert_eq!(r["outcome"], "GenericError");
        assert_eq!(r["state"], "Retrying");
        assert!(r["reason"].is_null());
    }
}
