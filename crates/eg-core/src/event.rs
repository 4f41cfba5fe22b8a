//! Event Grid schema events (spec §1): parsing a publish body into validated events.
//!
//! A publish request is all-or-nothing, so parsing either yields every event or the
//! first problem, named by event index and field.

use crate::api_error::InvalidField;
use crate::routing::Routing;
use chrono::DateTime;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Event Grid's own fields; anything else in a published event is refused.
const KNOWN_FIELDS: [&str; 8] = [
    "id",
    "topic",
    "subject",
    "eventType",
    "eventTime",
    "data",
    "dataVersion",
    "metadataVersion",
];

/// An event in Event Grid schema, as stored and as delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventGridEvent {
    pub id: String,
    pub topic: String,
    pub subject: String,
    pub event_type: String,
    pub event_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    pub data_version: String,
    pub metadata_version: String,
}

/// Limits on what one publish request may hold.
#[derive(Debug, Clone, Copy)]
pub struct PublishLimits {
    pub max_events: usize,
    pub max_event_bytes: usize,
}

impl Default for PublishLimits {
    fn default() -> Self {
        Self {
            max_events: 5_000,
            max_event_bytes: 1024 * 1024,
        }
    }
}

/// Why a publish body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    #[error("the request body is not valid JSON: {0}")]
    MalformedJson(String),
    #[error("the request body must be a JSON array of events")]
    NotAnArray,
    #[error("the request holds no events")]
    Empty,
    #[error("the request holds {count} events; at most {max} are allowed")]
    TooManyEvents { count: usize, max: usize },
    #[error("events[{index}]: the event is {size} bytes; at most {max} are allowed")]
    EventTooLarge { index: usize, size: usize, max: usize },
    #[error("events[{index}].{}", .problem)]
    InvalidEvent { index: usize, problem: InvalidField },
}

impl PublishError {
    /// Whether the right status is 413 rather than 400.
    pub fn is_too_large(&self) -> bool {
        matches!(self, PublishError::EventTooLarge { .. })
    }
}

/// The validated events of one publish request.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedBatch {
    pub events: Vec<AcceptedEvent>,
}

/// A validated event, whatever its schema: its stored JSON form (serialized once for
/// the size check and reused as the body that is stored) and what filters read.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceptedEvent {
    /// The event as stored: Event Grid schema, a CloudEvent, or a custom event's
    /// Event Grid envelope (the published object in `data`).
    pub json: String,
    pub fields: Map<String, Value>,
    pub event_type: String,
    pub subject: String,
}

impl AcceptedEvent {
    /// Builds the accepted form of a stored JSON object.
    pub fn new(fields: Map<String, Value>, event_type: String, subject: String) -> Self {
        // Serializing a map of `Value`s cannot fail.
        let json = serde_json::to_string(&fields).unwrap_or_default();
        Self {
            json,
            fields,
            event_type,
            subject,
        }
    }

    pub fn routing(&self) -> Routing<'_> {
        Routing {
            event_type: &self.event_type,
            subject: &self.subject,
            fields: &self.fields,
        }
    }
}

impl PublishedBatch {
    /// Parses an Event Grid schema publish body for the topic whose id is `topic_id`.
    pub fn parse_event_grid(body: &[u8], topic_id: &str, limits: PublishLimits) -> Result<Self, PublishError> {
        let value: Value = serde_json::from_slice(body).map_err(|e| PublishError::MalformedJson(e.to_string()))?;
        let Value::Array(items) = value else {
            return Err(PublishError::NotAnArray);
        };
        if items.is_empty() {
            return Err(PublishError::Empty);
        }
        if items.len() > limits.max_events {
            return Err(PublishError::TooManyEvents {
                count: items.len(),
                max: limits.max_events,
            });
        }
        let events = items
            .into_iter()
            .enumerate()
            .map(|(index, item)| {
                let event = EventGridEvent::from_published(item, topic_id)
                    .map_err(|problem| PublishError::InvalidEvent { index, problem })?;
                let accepted = event.accepted();
                if accepted.json.len() > limits.max_event_bytes {
                    return Err(PublishError::EventTooLarge {
                        index,
                        size: accepted.json.len(),
                        max: limits.max_event_bytes,
                    });
                }
                Ok(accepted)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { events })
    }
}

impl EventGridEvent {
    /// Validates one published event and stamps the service's fields.
    pub fn from_published(item: Value, topic_id: &str) -> Result<Self, InvalidField> {
        let Value::Object(mut fields) = item else {
            return Err(InvalidField::new("", "each event must be a JSON object"));
        };
        if let Some(extra) = fields.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
            return Err(InvalidField::new(extra.clone(), "not a field of the Event Grid schema"));
        }
        let id = required_string(&mut fields, "id")?;
        if id.is_empty() {
            return Err(InvalidField::new("id", "must not be empty"));
        }
        let subject = required_string(&mut fields, "subject")?;
        let event_type = required_string(&mut fields, "eventType")?;
        if event_type.is_empty() {
            return Err(InvalidField::new("eventType", "must not be empty"));
        }
        let event_time = required_string(&mut fields, "eventTime")?;
        if DateTime::parse_from_rfc3339(&event_time).is_err() {
            return Err(InvalidField::new(
                "eventTime",
                format!("{event_time:?} is not an RFC 3339 timestamp"),
            ));
        }
        let data_version = optional_string(&mut fields, "dataVersion")?.unwrap_or_default();
        if let Some(v) = optional_string(&mut fields, "metadataVersion")?
            && v != "1"
        {
            return Err(InvalidField::new(
                "metadataVersion",
                format!("must be \"1\" when present, got {v:?}"),
            ));
        }
        if let Some(t) = optional_string(&mut fields, "topic")?
            && !t.eq_ignore_ascii_case(topic_id)
        {
            return Err(InvalidField::new(
                "topic",
                format!("must be this topic's id {topic_id:?} when present, got {t:?}"),
            ));
        }
        let data = fields.remove("data");
        Ok(Self {
            id,
            topic: topic_id.to_owned(),
            subject,
            event_type,
            event_time,
            data,
            data_version,
            metadata_version: "1".to_owned(),
        })
    }

    /// The accepted form: stored once and delivered as is.
    pub fn accepted(&self) -> AcceptedEvent {
        let fields = match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        AcceptedEvent::new(fields, self.event_type.clone(), self.subject.clone())
    }

    /// The compact JSON form.
    pub fn to_json(&self) -> String {
        // Serializing a struct of strings and `Value`s cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

fn required_string(fields: &mut Map<String, Value>, name: &str) -> Result<String, InvalidField> {
    optional_string(fields, name)?.ok_or_else(|| InvalidField::new(name, "is required"))
}

fn optional_string(fields: &mut Map<String, Value>, name: &str) -> Result<Option<String>, InvalidField> {
    match fields.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(InvalidField::new(
            name,
            format!("must be a string, got {}", json_type(&other)),
        )),
    }
}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TOPIC: &str = "/topics/orders";

    fn parse(v: Value) -> Result<PublishedBatch, PublishError> {
        PublishedBatch::parse_event_grid(v.to_string().as_bytes(), TOPIC, PublishLimits::default())
    }

    fn event() -> Value {
        json!({"id":"1","subject":"/a","eventType":"Created","eventTime":"2026-11-21T10:00:00Z","data":{"k":1}})
    }

    #[test]
    fn stamps_topic_and_versions() {
        let batch = parse(json!([event()])).unwrap();
        let e: EventGridEvent = serde_json::from_str(&batch.events[0].json).unwrap();
        assert_eq!(batch.events[0].event_type, "Created");
        assert_eq!(batch.events[0].subject, "/a");
        assert_eq!(e.topic, TOPIC);
        assert_eq!(e.metadata_version, "1");
        assert_eq!(e.data_version, "");
        assert_eq!(e.data, Some(json!({"k":1})));
    }

    #[test]
    fn names_index_and_field() {
        let mut bad = event();
        bad["eventTime"] = json!("yesterday");
        let err = parse(json!([event(), bad])).unwrap_err();
        assert!(err.to_string().starts_with("events[1].eventTime:"), "{err}");

        let mut bad = event();
        bad["subject"] = json!(5);
        let err = parse(json!([bad])).unwrap_err();
        assert_eq!(err.to_string(), "events[0].subject: must be a string, got a number");
    }

    #[test]
    fn refuses_missing_extra_and_conflicting_fields() {
        let mut missing = event();
        missing.as_object_mut().unwrap().remove("id");
        assert!(
            parse(json!([missing]))
                .unwrap_err()
                .to_string()
                .contains("events[0].id: is required")
        );

        let mut extra = event();
        extra["colour"] = json!("red");
        assert!(parse(json!([extra])).unwrap_err().to_string().contains("colour"));

        let mut topic = event();
        topic["topic"] = json!("/topics/other");
        assert!(
            parse(json!([topic]))
                .unwrap_err()
                .to_string()
                .contains("events[0].topic")
        );

        let mut mv = event();
        mv["metadataVersion"] = json!("2");
        assert!(parse(json!([mv])).is_err());
    }

    #[test]
    fn refuses_non_arrays_empty_and_too_many() {
        assert_eq!(parse(event()).unwrap_err(), PublishError::NotAnArray);
        assert_eq!(parse(json!([])).unwrap_err(), PublishError::Empty);
        let limits = PublishLimits {
            max_events: 2,
            ..Default::default()
        };
        let body = json!([event(), event(), event()]).to_string();
        assert!(matches!(
            PublishedBatch::parse_event_grid(body.as_bytes(), TOPIC, limits),
            Err(PublishError::TooManyEvents { count: 3, max: 2 })
        ));
        assert!(matches!(
            PublishedBatch::parse_event_grid(b"[{", TOPIC, limits),
            Err(PublishError::MalformedJson(_))
        ));
    }

    #[test]
    fn refuses_oversized_events_with_413() {
        let limits = PublishLimits {
            max_event_bytes: 200,
            ..Default::default()
        };
        let mut big = event();
        big["data"] = json!("x".repeat(300));
        let err = PublishedBatch::parse_event_grid(json!([big]).to_string().as_bytes(), TOPIC, limits).unwrap_err();
        assert!(err.is_too_large());
    }
}
