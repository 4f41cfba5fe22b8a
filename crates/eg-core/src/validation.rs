//! Endpoint validation (behaviour.md#protecting-endpoints-and-the-system): a webhook
//! subscription proves its endpoint consents before anything is delivered to it. This
//! module holds the pure parts: the provisioning state a subscription is in, the validation
//! event it is sent, and the words that tell its owner what the handshake came to and what
//! to do next.

use crate::names::{SubscriptionName, TopicName};
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
    /// validation URL (which carries `code`) until `deadline`, or answer a handshake
    /// run again. `reason` is what the handshake came to and what to do next
    /// ([`awaiting_reason`]); records written before it was kept have none.
    AwaitingManualAction {
        code: String,
        deadline: UnixMillis,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
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
                ..
            } => now < *deadline && constant_time_eq(expected.as_bytes(), code.as_bytes()),
            _ => false,
        }
    }

    /// Why the subscription is not active, for the API (`provisioningMessage`).
    pub fn message(&self, now: UnixMillis) -> Option<String> {
        match self {
            Self::Succeeded => None,
            Self::AwaitingManualAction { deadline, reason, .. } if reason.is_empty() => Some(if now < *deadline {
                format!(
                    "the endpoint did not answer the validation handshake; a GET on the validationUrl of the validation event completes it before {}",
                    deadline.to_rfc3339()
                )
            } else {
                "the endpoint did not complete validation in time".into()
            }),
            Self::AwaitingManualAction { deadline, reason, .. } if now < *deadline => Some(format!(
                "{reason} Until it is validated, events published to the topic are not kept for this subscription."
            )),
            Self::AwaitingManualAction { deadline, reason, .. } => Some(format!(
                "{reason} (The validation window ended at {}.)",
                deadline.to_rfc3339()
            )),
            Self::Failed { reason } => Some(reason.clone()),
        }
    }
}

/// Why a validation handshake did not bring the endpoint's consent. Each holds the
/// words of what happened (never the endpoint's URL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unconsented<'a> {
    /// The endpoint answered, but not with consent: what it answered, and what was wrong.
    Refused(&'a str),
    /// The request went out but no complete answer came (it timed out, or the
    /// connection broke): the endpoint may have the validation event, and its
    /// validationUrl.
    NoAnswer(&'a str),
    /// No connection could be made (refused, unresolvable name, failed TLS): nothing,
    /// so no validationUrl either, reached the endpoint.
    NotReached(&'a str),
}

/// The variable that turns validation off, for the one setup where that is right.
const TURN_OFF: &str = "a trusted local setup can instead turn validation off (EG__VALIDATION__ENABLED=false)";

/// What the owner of `topic`/`subscription` is told when its handshake did not bring
/// consent: what happened, whether a validationUrl reached the endpoint, and what to do
/// next. Kept in [`Provisioning::AwaitingManualAction`], so the API shows it later too.
/// `deadline` is when the validationUrl stops being accepted.
pub fn awaiting_reason(
    topic: &TopicName,
    subscription: &SubscriptionName,
    why: Unconsented<'_>,
    deadline: UnixMillis,
) -> String {
    let validate = format!(
        "`egctl subscriptions validate {topic} {subscription}` \
         (POST /admin/topics/{topic}/eventSubscriptions/{subscription}/validate)"
    );
    let until = deadline.to_rfc3339();
    let echo = "answer the validation event with 200 OK and {\"validationResponse\": <its data.validationCode>}";
    match why {
        Unconsented::Refused(what) => format!(
            "The validation handshake failed: {what}. The validation event, with its validationUrl, reached the endpoint. \
             Next: change the receiver to answer so, then run {validate} to run the handshake again; \
             or GET the validationUrl the receiver was sent (before {until}); {TURN_OFF}."
        ),
        Unconsented::NoAnswer(what) => format!(
            "The validation handshake got no answer: {what}. The validation event may have reached the endpoint, with its validationUrl. \
             Next: make the receiver {echo} at once, then run {validate} to run the handshake again; \
             or GET the validationUrl if the receiver has it (before {until}); {TURN_OFF}."
        ),
        Unconsented::NotReached(what) => format!(
            "The validation handshake could not reach the endpoint: {what}. No validation event, so no validationUrl, was delivered to it. \
             Next: start the receiver at that address (it must {echo}), then run {validate} to run the handshake again; \
             {TURN_OFF}."
        ),
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
            reason: String::new(),
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
        let awaiting = Provisioning::AwaitingManualAction {
            code: "c".into(),
            deadline: UnixMillis(5),
            reason: "why".into(),
        };
        for p in [Provisioning::Failed { reason: "no".into() }, awaiting] {
            let s = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<Provisioning>(&s).unwrap(), p);
        }
    }

    #[test]
    fn a_record_written_before_reasons_were_kept_still_reads() {
        let old = r#"{"state":"awaitingManualAction","code":"c","deadline":5}"#;
        let p: Provisioning = serde_json::from_str(old).unwrap();
        assert_eq!(
            p,
            Provisioning::AwaitingManualAction {
                code: "c".into(),
                deadline: UnixMillis(5),
                reason: String::new()
            }
        );
        let message = p.message(UnixMillis(0)).unwrap();
        assert!(message.contains("GET on the validationUrl"), "{message}");
        assert!(!message.contains("was sent"), "it may never have been: {message}");
    }

    fn names() -> (TopicName, SubscriptionName) {
        (
            TopicName::parse("orders").unwrap(),
            SubscriptionName::parse("audit").unwrap(),
        )
    }

    #[test]
    fn a_refused_handshake_says_what_the_endpoint_answered_and_what_to_do() {
        let (topic, sub) = names();
        let reason = awaiting_reason(
            &topic,
            &sub,
            Unconsented::Refused(
                "the endpoint answered 200 OK with an empty body; it must answer 200 OK with {\"validationResponse\": …}",
            ),
            UnixMillis(0),
        );
        assert!(
            reason.contains("GET the validationUrl the receiver was sent (before 1970-01-01T00:00:00.000Z)"),
            "{reason}"
        );
        assert!(reason.contains("answered 200 OK with an empty body"), "{reason}");
        assert!(reason.contains("reached the endpoint"), "{reason}");
        assert!(reason.contains("egctl subscriptions validate orders audit"), "{reason}");
        assert!(reason.contains("validationResponse"), "{reason}");
        assert!(reason.contains("EG__VALIDATION__ENABLED=false"), "{reason}");
    }

    #[test]
    fn an_unreachable_endpoint_was_sent_no_validation_url() {
        let (topic, sub) = names();
        let reason = awaiting_reason(
            &topic,
            &sub,
            Unconsented::NotReached("the connection was refused"),
            UnixMillis(0),
        );
        assert!(reason.contains("the connection was refused"), "{reason}");
        assert!(reason.contains("No validation event, so no validationUrl"), "{reason}");
        assert!(!reason.contains("GET the validationUrl"), "it has none: {reason}");
        assert!(!reason.contains("was sent"), "{reason}");
        assert!(reason.contains("egctl subscriptions validate orders audit"), "{reason}");
        let silent = awaiting_reason(
            &topic,
            &sub,
            Unconsented::NoAnswer("no answer within 30s"),
            UnixMillis(0),
        );
        assert!(silent.contains("may have reached"), "{silent}");
    }

    #[test]
    fn the_message_keeps_the_reason_before_and_after_the_window() {
        let p = Provisioning::AwaitingManualAction {
            code: "c".into(),
            deadline: UnixMillis(1000),
            reason: "The validation handshake failed: x.".into(),
        };
        let open = p.message(UnixMillis(999)).unwrap();
        assert!(open.starts_with("The validation handshake failed: x."), "{open}");
        assert!(open.contains("not kept for this subscription"), "{open}");
        assert!(!open.contains("\"c\""), "the code is never shown: {open}");
        let closed = p.message(UnixMillis(1000)).unwrap();
        assert!(closed.starts_with("The validation handshake failed: x."), "{closed}");
        assert!(closed.contains("window ended at"), "{closed}");
    }
}
