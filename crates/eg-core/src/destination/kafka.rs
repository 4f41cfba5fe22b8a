//! A Kafka topic (eg's `Kafka`) of a connection configured in eg: one record per event,
//! keyed by a fixed key or one read from each event, so one key's events stay in one
//! partition.
//!
//! Also what a record holds, as pure functions the sender calls: its key
//! ([`RecordKey::of_event`]) and, for CloudEvents deliveries, the event in the binary
//! mode of the CloudEvents Kafka binding ([`binary_cloud_event`]).
//!
//! An attempt carries one event: `maxEventsPerBatch` is refused (as for `StorageQueue`),
//! so each event has its own acknowledgement, retry and dead letter; the client batches
//! records on the wire across concurrent attempts.

use super::{Kind, connection};
use super::{NamedConnections, optional_string, required_string};
use crate::api_error::InvalidField;
use crate::event::raw::{self, RawFields};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// Kafka's longest topic name.
const TOPIC_MAX: usize = 249;

/// A topic to produce to, through a Kafka connection configured in eg.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Kafka {
    pub connection: String,
    pub topic: String,
    pub key: RecordKey,
}

/// A record's key: none (records spread over the partitions), the same for every
/// event, or read from each event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "value")]
pub enum RecordKey {
    None,
    Static(String),
    /// An event field, named as delivery properties name theirs (`subject`, `type`,
    /// `data.region`, …); an event without it gets the empty key.
    FromEvent(String),
    /// The value of the subscription's delivery property of this name (compared
    /// ignoring case), as the sender computed it for the record's headers; none when
    /// the subscription sets no such property or the event lacks its field. An event
    /// hub's key is its `PartitionKey` property (`super::EventHub`); a `Kafka` target
    /// never has this key.
    FromDeliveryProperty(String),
}

impl RecordKey {
    /// The key of the record carrying `event` (its JSON, as rendered): `None` for no
    /// key. An event lacking the field gets the empty key, not none: a null key is
    /// spread at random, and the empty key keeps such events together in one partition,
    /// as an ordered subscription keeps them in one line.
    pub fn of_event(&self, event: &str) -> Option<String> {
        match self {
            Self::None => None,
            Self::Static(key) => Some(key.clone()),
            Self::FromEvent(path) => Some(
                serde_json::from_str::<&RawValue>(event)
                    .ok()
                    .and_then(|event| raw::field_at(event, path))
                    .and_then(raw::scalar_text)
                    .unwrap_or_default(),
            ),
            // Read from the record's headers, which only the sender has.
            Self::FromDeliveryProperty(_) => None,
        }
    }
}

impl Kafka {
    /// The settings section of Kafka connections (`EG__BROKERS__KAFKA__<NAME>__…`).
    pub const CONNECTIONS: &str = "kafka";
}

impl Kind for Kafka {
    const ENDPOINT_TYPE: &'static str = "Kafka";
    const OWN: &'static [&'static str] = &["connection", "topic", "key", "keyFrom"];
    const SHARED: &'static [&'static str] = &["deliveryAttributeMappings"];

    fn read(props: &Map<String, Value>) -> Result<Self, InvalidField> {
        let connection = connection(props)?;
        let topic = required_string(props, "topic")?;
        check_topic(&topic)?;
        let key = match (optional_string(props, "key")?, optional_string(props, "keyFrom")?) {
            (Some(_), Some(_)) => {
                return Err(InvalidField::new(
                    "properties.keyFrom",
                    "give key (the same for every event) or keyFrom (an event field), not both",
                ));
            }
            (Some(key), None) => RecordKey::Static(key),
            (None, Some(field)) if field.is_empty() => {
                return Err(InvalidField::new(
                    "properties.keyFrom",
                    "names no field: give an event field such as \"subject\", \"type\" or \"data.accountId\"",
                ));
            }
            (None, Some(field)) => RecordKey::FromEvent(field),
            (None, None) => RecordKey::None,
        };
        Ok(Self { connection, topic, key })
    }

    fn show(&self) -> Map<String, Value> {
        let mut props = Map::new();
        props.insert("connection".to_owned(), json!(self.connection));
        props.insert("topic".to_owned(), json!(self.topic));
        match &self.key {
            RecordKey::None => {}
            RecordKey::Static(key) => {
                props.insert("key".to_owned(), json!(key));
            }
            RecordKey::FromEvent(field) => {
                props.insert("keyFrom".to_owned(), json!(field));
            }
            RecordKey::FromDeliveryProperty(_) => {}
        }
        props
    }

    fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
        if configured.has_broker_connection(Self::CONNECTIONS, &self.connection) {
            Ok(())
        } else {
            Err(InvalidField::new(
                "properties.connection",
                format!(
                    "eg has no Kafka connection named {:?}: an operator must configure it (EG__BROKERS__KAFKA__{}__BOOTSTRAP_SERVERS) before subscriptions can deliver through it",
                    self.connection,
                    self.connection.to_ascii_uppercase()
                ),
            ))
        }
    }

    fn identity(&self) -> String {
        format!("kafka://{}/{}", self.connection, self.topic)
    }
}

/// Kafka's topic names: 1–249 of letters, digits, `.`, `_` and `-`, not `.` or `..`.
/// The broker refuses any other name, so every delivery to it would fail.
fn check_topic(topic: &str) -> Result<(), InvalidField> {
    let field = "properties.topic";
    if topic.is_empty() || topic.len() > TOPIC_MAX {
        return Err(InvalidField::new(
            field,
            format!("is {} bytes; a Kafka topic name is 1-{TOPIC_MAX}", topic.len()),
        ));
    }
    if topic == "." || topic == ".." {
        return Err(InvalidField::new(field, format!("{topic:?} is not a Kafka topic name")));
    }
    match topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        Some(c) => Err(InvalidField::new(
            field,
            format!("holds {c:?}; a Kafka topic name holds only letters, digits, '.', '_' and '-'"),
        )),
        None => Ok(()),
    }
}

/// A CloudEvent in the binary mode of the CloudEvents Kafka binding: its attributes as
/// `ce_` headers, `datacontenttype` as `content-type`, its data as the record's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryCloudEvent {
    /// `ce_<attribute>`, then `content-type`, in the event's order.
    pub headers: Vec<(String, String)>,
    /// The data's bytes: JSON data as written, a string's contents for a non-JSON
    /// content type, `data_base64` decoded; empty without data (never a null value,
    /// which a compacted topic would take as a tombstone for the key).
    pub value: Vec<u8>,
}

/// Why a rendered CloudEvent could not be put in binary mode (only a body the renderer
/// did not write could cause it).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NotBinary {
    #[error("the CloudEvent is not a JSON object")]
    NotAnObject,
    #[error("the CloudEvent's data_base64 is not base64")]
    DataBase64,
}

/// `event` (a CloudEvent in its JSON format, as rendered) in binary mode.
pub fn binary_cloud_event(event: &str) -> Result<BinaryCloudEvent, NotBinary> {
    let event: &RawValue = serde_json::from_str(event).map_err(|_| NotBinary::NotAnObject)?;
    let fields = RawFields::of(event).ok_or(NotBinary::NotAnObject)?;
    let content_type = fields.get("datacontenttype").and_then(raw::scalar_text);
    let mut headers = Vec::new();
    let mut value = Vec::new();
    for (name, field) in fields.iter() {
        match name {
            "data" => value = data_bytes(field, content_type.as_deref()),
            "data_base64" => {
                let text = raw::raw_str(field).unwrap_or_default();
                value = base64::engine::general_purpose::STANDARD
                    .decode(text.as_bytes())
                    .map_err(|_| NotBinary::DataBase64)?;
            }
            "datacontenttype" => {}
            // A null attribute is an absent one.
            _ => {
                if let Some(text) = raw::scalar_text(field) {
                    headers.push((format!("ce_{name}"), text));
                }
            }
        }
    }
    match content_type {
        Some(content_type) => headers.push(("content-type".to_owned(), content_type)),
        // JSON-format data without a content type is JSON (CloudEvents JSON format, 3.1).
        None if fields.get("data").is_some() => {
            headers.push(("content-type".to_owned(), "application/json".to_owned()))
        }
        None => {}
    }
    Ok(BinaryCloudEvent { headers, value })
}

/// `data`'s bytes for the record: as written when the content type is JSON (or
/// absent), else a string's contents (`text/plain`, `application/xml`, … carried as a
/// JSON string in the JSON format).
fn data_bytes(data: &RawValue, content_type: Option<&str>) -> Vec<u8> {
    if content_type.is_none_or(is_json) {
        return data.get().as_bytes().to_vec();
    }
    match raw::raw_str(data) {
        Some(text) => text.into_owned().into_bytes(),
        None => data.get().as_bytes().to_vec(),
    }
}

/// `application/json`, `text/json` and `…+json`, with or without parameters.
fn is_json(content_type: &str) -> bool {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    media == "application/json" || media == "text/json" || media.ends_with("+json")
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Configured, read, reads_back};
    use super::*;

    #[test]
    fn kafka_keys_are_none_fixed_or_read_from_each_event() {
        for props in [
            json!({"connection": "stream", "topic": "orders"}),
            json!({"connection": "stream", "topic": "orders", "key": "all"}),
            json!({"connection": "stream", "topic": "orders", "keyFrom": "data.accountId"}),
        ] {
            let target = read("Kafka", props).unwrap();
            reads_back(&target);
            assert!(target.check_configured(&Configured).is_ok());
            assert_eq!(target.display_name(), "kafka://stream/orders");
        }
        let err = read(
            "Kafka",
            json!({"connection": "stream", "topic": "t", "key": "a", "keyFrom": "subject"}),
        )
        .unwrap_err();
        assert_eq!(err.field, "properties.keyFrom");
        let err = read("Kafka", json!({"connection": "stream", "topic": "t", "keyFrom": ""})).unwrap_err();
        assert_eq!(err.field, "properties.keyFrom");
        let err = read("Kafka", json!({"connection": "stream"})).unwrap_err();
        assert_eq!(err.field, "properties.topic");

        let unknown = read("Kafka", json!({"connection": "other", "topic": "t"})).unwrap();
        let err = unknown.check_configured(&Configured).unwrap_err();
        assert!(
            err.problem.contains("EG__BROKERS__KAFKA__OTHER__BOOTSTRAP_SERVERS"),
            "{}",
            err.problem
        );
    }

    #[test]
    fn kafka_takes_one_event_per_attempt_so_batching_is_refused() {
        let err = read(
            "Kafka",
            json!({"connection": "stream", "topic": "orders", "maxEventsPerBatch": 10}),
        )
        .unwrap_err();
        assert_eq!(err.field, "properties.maxEventsPerBatch");
        assert!(
            err.problem
                .contains("connection, topic, key, keyFrom, deliveryAttributeMappings"),
            "{err}"
        );
        let target = read(
            "Kafka",
            json!({"connection": "stream", "topic": "orders", "deliveryAttributeMappings": []}),
        )
        .unwrap();
        assert!(!target.takes_batching());
    }

    #[test]
    fn kafka_topic_names_are_what_the_broker_takes() {
        let topic = |name: &str| read("Kafka", json!({"connection": "stream", "topic": name}));
        for fine in ["orders", "a.b_c-D9", &"t".repeat(249)] {
            assert!(topic(fine).is_ok(), "{fine:?}");
        }
        for bad in ["", ".", "..", "has space", "slash/", "é", "a\nb", &"t".repeat(250)] {
            let err = topic(bad).unwrap_err();
            assert_eq!(err.field, "properties.topic", "{bad:?}: {err}");
        }
    }

    #[test]
    fn a_record_key_is_read_from_the_event_and_the_empty_key_stands_for_a_missing_field() {
        let event = r#"{"subject": "/orders/1", "type": "t", "data": {"accountId": 42, "o": {}}}"#;
        let key = |k: RecordKey| k.of_event(event);
        assert_eq!(key(RecordKey::None), None);
        assert_eq!(key(RecordKey::Static("k".into())).as_deref(), Some("k"));
        assert_eq!(
            key(RecordKey::FromEvent("subject".into())).as_deref(),
            Some("/orders/1")
        );
        assert_eq!(
            key(RecordKey::FromEvent("data.accountId".into())).as_deref(),
            Some("42")
        );
        assert_eq!(key(RecordKey::FromEvent("data.o".into())).as_deref(), Some(""));
        assert_eq!(key(RecordKey::FromEvent("missing".into())).as_deref(), Some(""));
    }

    #[test]
    fn a_cloud_event_in_binary_mode_has_ce_headers_and_its_data_as_value() {
        let event = r#"{"specversion":"1.0","id":"e-1","source":"/shop","type":"order.created","time":"2026-11-28T12:00:00Z","subject":null,"tenant":7,"data":{"n": 1}}"#;
        let binary = binary_cloud_event(event).unwrap();
        let headers: Vec<(&str, &str)> = binary.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        assert_eq!(
            headers,
            [
                ("ce_specversion", "1.0"),
                ("ce_id", "e-1"),
                ("ce_source", "/shop"),
                ("ce_type", "order.created"),
                ("ce_time", "2026-11-28T12:00:00Z"),
                ("ce_tenant", "7"),
                ("content-type", "application/json"),
            ]
        );
        assert_eq!(binary.value, br#"{"n": 1}"#, "the data as written");

        let text =
            binary_cloud_event(r#"{"specversion":"1.0","id":"e-2","datacontenttype":"text/plain","data":"a \"b\""}"#)
                .unwrap();
        assert_eq!(text.value, br#"a "b""#);
        assert_eq!(
            text.headers.last(),
            Some(&("content-type".to_owned(), "text/plain".to_owned()))
        );
        let json_string = binary_cloud_event(
            r#"{"specversion":"1.0","id":"e-3","datacontenttype":"application/cloudevents+json","data":"s"}"#,
        )
        .unwrap();
        assert_eq!(json_string.value, br#""s""#, "JSON data stays JSON");

        let bytes = binary_cloud_event(
            r#"{"specversion":"1.0","id":"e-4","datacontenttype":"application/octet-stream","data_base64":"AAEC"}"#,
        )
        .unwrap();
        assert_eq!(bytes.value, [0, 1, 2]);
        let empty = binary_cloud_event(r#"{"specversion":"1.0","id":"e-5"}"#).unwrap();
        assert!(empty.value.is_empty());
        assert!(empty.headers.iter().all(|(n, _)| n != "content-type"));

        assert_eq!(binary_cloud_event("[1]"), Err(NotBinary::NotAnObject));
        assert_eq!(
            binary_cloud_event(r#"{"id":"e","data_base64":"%%"}"#),
            Err(NotBinary::DataBase64)
        );
    }
}
