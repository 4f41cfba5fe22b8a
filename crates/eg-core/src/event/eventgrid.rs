//! The Event Grid schema (spec §1): validating one published event and stamping the
//! service's fields (`topic`, `metadataVersion`). Its stored form is also the envelope of
//! a custom-schema event (see `custom`).

use crate::api_error::InvalidField;
use crate::event::accepted::AcceptedEvent;
use crate::json::json_type;
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
