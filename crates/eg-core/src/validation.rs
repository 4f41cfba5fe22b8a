//! Endpoint validation (spec §8): a webhook subscription proves its endpoint consents
//! before anything is delivered to it. This module holds the pure parts: the
//! provisioning state a subscription is in and the validation event it is sent.

use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::fmt;

/// Where a subscription stands with its endpoint's consent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Provisioning {
    /// Validated (or validation is off): deliveries flow.
    #[default]
    Succeeded,
    /// The endpoint did not echo the code; it may still consent by a `GET` on the
    /// validation URL (which carries `code`) until `deadline`.
    AwaitingManualAction { code: String, deadline: UnixMillis },
    /// The endpoint refused, or did not consent in time.
    Failed { reason: String },
}

/// The `provisioningState` the management API shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProvisioningState {
    Succeeded,
    AwaitingManualAction,
    Failed,
}

impl ProvisioningState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "Succeeded",
            Self::AwaitingManualAction => "AwaitingManualAction",
            Self::Failed => "Failed",
        }
    }
}

impl fmt::Display for ProvisioningState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Provisioning {
    /// The state at `now`: a manual window that has run out is `Failed` without anyone
    /// having to write that down.
    pub fn state_at(&self, now: UnixMillis) -> ProvisioningState {
        match self {
            Self::Succeeded => ProvisioningState::Succeeded,
            Self::AwaitingManualAction { deadline, .. } if now < *deadline => ProvisioningState::AwaitingManualAction,
            Self::AwaitingManualAction { .. } | Self::Failed { .. } => ProvisioningState::Failed,
        }
    }

    pub fn is_active(&self) -> bool {
        matches!(self, Self::Succeeded)
    }

    /// Whether a manual `GET` presenting `code` at `now` completes the validation.
    pub fn accepts_manual(&self, code: &str, now: UnixMillis) -> bool {
        match self {
            Self::AwaitingManualAction {
                code: expected,
                deadline,
            } => now < *deadline && constant_time_eq(expected.as_bytes(), code.as_bytes()),
            _ => false,
        }
    }

    /// Why the subscription is not active, for the API.
    pub fn message(&self, now: UnixMillis) -> Option<String> {
        match self {
            Self::Succeeded => None,
            Self::AwaitingManualAction { deadline, .. } if now < *deadline => Some(format!(
                "the endpoint did not answer the validation handshake; a GET on the validationUrl it was sent before {} completes it",
                deadline.to_rfc3339()
            )),
            Self::AwaitingManualAction { .. } => Some("the endpoint did not complete validation in time".into()),
            Self::Failed { reason } => Some(reason.clone()),
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The Event Grid schema `SubscriptionValidationEvent`, as the one-element array that is POSTed.
pub fn validation_event(id: &str, topic_id: &str, code: &str, validation_url: &str, now: UnixMillis) -> Value {
    json!([{
        "id": id,
        "topic": topic_id,
        "subject": "",
        "data": {"validationCode": code, "validationUrl": validation_url},
        "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent",
        "eventTime": now.to_rfc3339(),
        "metadataVersion": "1",
        "dataVersion": "1",
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_window_runs_out_into_failed() {
        let p = Provisioning::AwaitingManualAction {
            code: "abc".into(),
            deadline: UnixMillis(1000),
        };
        assert_eq!(p.state_at(UnixMillis(999)), ProvisioningState::AwaitingManualAction);
        assert_eq!(p.state_at(UnixMillis(1000)), ProvisioningState::Failed);
        assert!(p.accepts_manual("abc", UnixMillis(999)));
        assert!(!p.accepts_manual("abd", UnixMillis(999)));
        assert!(!p.accepts_manual("abc", UnixMillis(1000)));
        assert!(!p.is_active());
        assert!(Provisioning::Succeeded.is_active());
    }

    #[test]
    fn validation_event_has_event_grid_shape() {
        let e = validation_event("i", "/topics/t", "c", "https://eg/validate?code=c", UnixMillis(0));
        assert_eq!(e[0]["eventType"], "Microsoft.EventGrid.SubscriptionValidationEvent");
        assert_eq!(e[0]["data"]["validationCode"], "c");
        assert_eq!(e[0]["subject"], "");
        assert_eq!(e[0]["dataVersion"], "1");
    }

    #[test]
    fn stored_form_round_trips() {
        let p = Provisioning::Failed { reason: "no".into() };
        let s = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Provisioning>(&s).unwrap(), p);
    }
}
