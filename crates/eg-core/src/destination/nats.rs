//! A NATS JetStream subject (eg's `NatsJetStream`) of a connection configured in eg:
//! one message per event, stored by the stream that captures the subject.

use super::{Kind, connection, unknown_connection};
use super::{NamedConnections, required_string};
use crate::api_error::InvalidField;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A subject to publish to, through a NATS connection configured in eg.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NatsJetStream {
    pub connection: String,
    pub subject: String,
}

impl NatsJetStream {
    /// The settings section of NATS connections (`EG__BROKERS__NATS__<NAME>__…`).
    pub const CONNECTIONS: &str = "nats";
}

impl Kind for NatsJetStream {
    const ENDPOINT_TYPE: &'static str = "NatsJetStream";
    const OWN: &'static [&'static str] = &["connection", "subject"];
    const SHARED: &'static [&'static str] = super::BROKER_SHARED;

    fn read(props: &Map<String, Value>) -> Result<Self, InvalidField> {
        let connection = connection(props)?;
        let subject = required_string(props, "subject")?;
        check_subject(&subject)?;
        Ok(Self { connection, subject })
    }

    fn show(&self) -> Map<String, Value> {
        let mut props = Map::new();
        props.insert("connection".to_owned(), json!(self.connection));
        props.insert("subject".to_owned(), json!(self.subject));
        props
    }

    fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
        if configured.has_broker_connection(Self::CONNECTIONS, &self.connection) {
            Ok(())
        } else {
            Err(unknown_connection("NATS", Self::CONNECTIONS, &self.connection))
        }
    }

    fn identity(&self) -> String {
        format!("nats://{}/{}", self.connection, self.subject)
    }
}

/// A NATS subject to publish to: dot-separated tokens, no wildcards, no spaces.
fn check_subject(subject: &str) -> Result<(), InvalidField> {
    let valid = subject.len() <= 255
        && subject
            .split('.')
            .all(|t| !t.is_empty() && t != "*" && t != ">" && !t.chars().any(|c| c.is_whitespace() || c.is_control()));
    if valid {
        Ok(())
    } else {
        Err(InvalidField::new(
            "properties.subject",
            format!(
                "{subject:?} is not a subject to publish to: dot-separated tokens without spaces or wildcards (* and >)"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Configured, read, reads_back};
    use serde_json::json;

    #[test]
    fn nats_subjects_are_concrete() {
        let e = read(
            "NatsJetStream",
            json!({"connection": "events", "subject": "eg.orders", "maxEventsPerBatch": 10}),
        )
        .unwrap();
        assert_eq!(e.display_name(), "nats://events/eg.orders");
        assert!(e.check_configured(&Configured).is_ok());
        reads_back(&e);
        for subject in [
            "eg.*",
            "eg.>",
            "eg..x",
            "has space",
            "",
            "a\r\nb",
            "nul\u{0}",
            "tab\t",
            &"s".repeat(256),
        ] {
            let err = read("NatsJetStream", json!({"connection": "events", "subject": subject})).unwrap_err();
            assert_eq!(err.field, "properties.subject", "{subject:?}");
        }
        let unknown = read("NatsJetStream", json!({"connection": "other", "subject": "s"})).unwrap();
        let err = unknown.check_configured(&Configured).unwrap_err();
        assert!(err.problem.contains("EG__BROKERS__NATS__OTHER__URL"), "{}", err.problem);
    }
}
