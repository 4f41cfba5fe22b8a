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

/// Why a step made no attempt and held the delivery back (uncharged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldReason {
    /// The endpoint is on probation after consecutive failures (or a probe of it is in
    /// flight): no attempt before the probation ends.
    #[serde(rename = "p")]
    EndpointProbation,
    /// The endpoint has not answered the validation handshake yet; its consent is looked
    /// at again then.
    #[serde(rename = "v")]
    AwaitingValidation,
    /// Read ahead, but no sender slot was free in time: handed back for any sender.
    #[serde(rename = "s")]
    NoFreeSlot,
}

impl HoldReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EndpointProbation => "EndpointProbation",
            Self::AwaitingValidation => "AwaitingValidation",
            Self::NoFreeSlot => "NoFreeSlot",
        }
    }
}

/// A held-back step's reason and until when that reason holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    #[serde(rename = "r")]
    pub reason: HoldReason,
    /// The end of the probation, or when consent is looked at again.
    #[serde(rename = "u")]
    pub until: UnixMillis,
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
    /// When the delivery is next due (retries, hold-backs). A pause's is its TTL deadline:
    /// it is attempted again only after a resume, and expires then.
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    pub next: Option<UnixMillis>,
    #[serde(rename = "st")]
    pub state: DeliveryState,
    /// Why it was dead-lettered or dropped.
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why a held-back step made no attempt; absent in other steps, and in entries
    /// written before it was recorded.
    #[serde(rename = "h", default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// What the destination said about a failed attempt, when its outcome name alone
    /// does not tell an operator what to fix (`no JetStream stream captures subject
    /// "orders.created"`); absent otherwise, and in entries written before it was
    /// recorded.
    #[serde(rename = "e", default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HistoryEntry {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The entry as the management API shows it. A paused step has no next attempt (it
    /// waits for the resume): its TTL deadline is `expiresAt`. A held-back step says why
    /// (`heldBecause`) and until when that holds (`heldUntil`), when it was recorded. A
    /// failed attempt says what the destination said (`error`), when it said more than
    /// its outcome.
    pub fn to_resource(&self) -> Value {
        let paused = self.state == DeliveryState::Paused;
        let next_attempt = if paused { None } else { self.next };
        let expires = if paused { self.next } else { None };
        json!({
            "subscription": self.subscription,
            "attempt": self.attempt,
            "time": self.at.to_rfc3339(),
            "outcome": self.outcome.map(OutcomeName::as_str),
            "httpStatus": self.http_status,
            "durationMs": self.duration_ms,
            "nextAttemptTime": next_attempt.map(UnixMillis::to_rfc3339),
            "expiresAt": expires.map(UnixMillis::to_rfc3339),
            "state": self.state.as_str(),
            "reason": self.reason,
            "heldBecause": self.hold.map(|h| h.reason.as_str()),
            "heldUntil": self.hold.map(|h| h.until.to_rfc3339()),
            "error": self.error,
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
            hold: None,
            error: Some("no JetStream stream captures subject \"orders\"".into()),
        };
        assert!(e.to_json().contains(r#""e":"no JetStream"#), "{}", e.to_json());
        let back: HistoryEntry = serde_json::from_str(&e.to_json()).unwrap();
        assert_eq!(back, e);
        let r = e.to_resource();
        assert_eq!(r["time"], "1970-01-01T00:00:01.000Z");
        assert_eq!(r["nextAttemptTime"], "1970-01-01T00:01:01.000Z");
        assert_eq!(r["outcome"], "GenericError");
        assert_eq!(r["state"], "Retrying");
        assert!(r["reason"].is_null());
        assert!(r["heldBecause"].is_null() && r["expiresAt"].is_null());
        assert_eq!(r["error"], "no JetStream stream captures subject \"orders\"");
    }

    fn step(state: DeliveryState, next: i64, hold: Option<Hold>) -> HistoryEntry {
        HistoryEntry {
            subscription: "billing".into(),
            attempt: 3,
            at: UnixMillis(1_000),
            outcome: None,
            http_status: None,
            duration_ms: None,
            next: Some(UnixMillis(next)),
            state,
            reason: None,
            hold,
            error: None,
        }
    }

    #[test]
    fn a_held_back_step_says_why_and_until_when() {
        let hold = Hold {
            reason: HoldReason::EndpointProbation,
            until: UnixMillis(60_000),
        };
        let e = step(DeliveryState::HeldBack, 61_000, Some(hold));
        assert!(e.to_json().contains(r#""h":{"r":"p","u":60000}"#), "{}", e.to_json());
        let back: HistoryEntry = serde_json::from_str(&e.to_json()).unwrap();
        assert_eq!(back, e);
        let r = e.to_resource();
        assert_eq!(r["heldBecause"], "EndpointProbation");
        assert_eq!(r["heldUntil"], "1970-01-01T00:01:00.000Z");
        assert_eq!(r["nextAttemptTime"], "1970-01-01T00:01:01.000Z");
    }

    #[test]
    fn entries_written_before_holds_were_recorded_still_read() {
        let old = r#"{"s":"billing","n":3,"t":1000,"x":61000,"st":"HeldBack"}"#;
        let e: HistoryEntry = serde_json::from_str(old).unwrap();
        assert_eq!(e, step(DeliveryState::HeldBack, 61_000, None));
        assert!(e.to_resource()["heldBecause"].is_null());
        assert!(e.to_resource()["error"].is_null());
    }

    #[test]
    fn a_paused_step_has_no_next_attempt_only_an_expiry() {
        let r = step(DeliveryState::Paused, 86_400_000, None).to_resource();
        assert!(r["nextAttemptTime"].is_null(), "{r}");
        assert_eq!(r["expiresAt"], "1970-01-02T00:00:00.000Z");
    }
}
