//! The Event Grid schema (behaviour.md#topics-and-publishing): validating one published
//! event and stamping the service's fields (`topic`, `metadataVersion`). Its stored form is
//! also the envelope of a custom-schema event (see `custom`).
//!
//! A publish reads each event from its text ([`accept_raw`]): the known fields are
//! checked and written again, and `data` is copied as it was sent, never built into a
//! tree. [`EventGridEvent`] is the same event as a value, for events eg writes itself.

use crate::api_error::InvalidField;
use crate::event::accepted::AcceptedEvent;
use crate::event::raw::{self, RawEvent, RawFields, push_json_str, raw_str, raw_type};
use crate::header_value;
use crate::json::json_type;
use chrono::DateTime;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
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
    pub(crate) event_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<Value>,
    pub data_version: String,
    pub(crate) metadata_version: String,
}

impl EventGridEvent {
    /// Validates one published event and stamps the service's fields. Tests use it to
    /// compare with [`accept_raw`], which the publish path takes.
    #[cfg(test)]
    pub(crate) fn from_published(item: Value, topic_id: &str) -> Result<Self, InvalidField> {
        let Value::Object(mut fields) = item else {
            return Err(not_an_object());
        };
        let checked = check(&mut fields, topic_id)?;
        let data = fields.remove("data");
        Ok(Self {
            id: checked.id,
            topic: topic_id.to_owned(),
            subject: checked.subject,
            event_type: checked.event_type,
            event_time: checked.event_time,
            data,
            data_version: checked.data_version,
            metadata_version: "1".to_owned(),
        })
    }

    /// The accepted form: stored once and delivered as is.
    pub(crate) fn accepted(&self) -> AcceptedEvent {
        let fields = match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        AcceptedEvent::new(fields, self.event_type.clone(), self.subject.clone())
    }
}

/// Validates one published event read from its text (the same rules and messages as
/// `EventGridEvent::from_published`) and writes its stored form, with `data` copied
/// as it was published rather than parsed and written again.
pub(crate) fn accept_raw(item: RawEvent<'_>, topic_id: &str) -> Result<AcceptedEvent, InvalidField> {
    let RawEvent::Object(mut fields) = item else {
        return Err(not_an_object());
    };
    let checked = check(&mut fields, topic_id)?;
    let json = stored_json(&checked.envelope(), topic_id, fields.get("data"));
    Ok(AcceptedEvent::stored(
        json,
        checked.id,
        checked.event_type,
        checked.subject,
        Some(checked.data_version),
    ))
}

fn not_an_object() -> InvalidField {
    InvalidField::new("", "each event must be a JSON object")
}

/// The string fields of a stored event (a custom event's envelope too).
pub(crate) struct Envelope<'a> {
    pub id: &'a str,
    pub subject: &'a str,
    pub event_type: &'a str,
    pub(crate) event_time: &'a str,
    pub data_version: &'a str,
}

/// The stored form: the fields `EventGridEvent` serializes to, in the same (sorted)
/// order, with `data` as published. `data: null` is kept, like an absent `data` is.
pub(crate) fn stored_json(checked: &Envelope<'_>, topic_id: &str, data: Option<&RawValue>) -> String {
    let data_len = data.map_or(0, |d| d.get().len());
    let mut out = String::with_capacity(data_len + 256);
    out.push('{');
    if let Some(data) = data {
        out.push_str("\"data\":");
        out.push_str(data.get());
        out.push(',');
    }
    out.push_str("\"dataVersion\":");
    push_json_str(&mut out, checked.data_version);
    for (name, value) in [
        ("eventTime", checked.event_time),
        ("eventType", checked.event_type),
        ("id", checked.id),
        ("metadataVersion", "1"),
        ("subject", checked.subject),
        ("topic", topic_id),
    ] {
        out.push_str(",\"");
        out.push_str(name);
        out.push_str("\":");
        push_json_str(&mut out, value);
    }
    out.push('}');
    out
}

/// The checked string fields of a published event.
struct Checked {
    id: String,
    subject: String,
    event_type: String,
    event_time: String,
    data_version: String,
}

impl Checked {
    fn envelope(&self) -> Envelope<'_> {
        Envelope {
            id: &self.id,
            subject: &self.subject,
            event_type: &self.event_type,
            event_time: &self.event_time,
            data_version: &self.data_version,
        }
    }
}

/// Where [`check`] reads a published event's fields: its parsed object, or its text.
trait Published {
    /// The first field, in key order, that Event Grid's schema does not have.
    fn first_unknown(&self) -> Option<String>;
    /// A field that must be a string or `null` when present; `None` when absent or null.
    fn string(&mut self, name: &str) -> Result<Option<String>, InvalidField>;
}

impl Published for Map<String, Value> {
    fn first_unknown(&self) -> Option<String> {
        self.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())).cloned()
    }

    fn string(&mut self, name: &str) -> Result<Option<String>, InvalidField> {
        match self.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(not_a_string(name, json_type(&other))),
        }
    }
}

impl Published for RawFields<'_> {
    fn first_unknown(&self) -> Option<String> {
        // The smallest, as a parsed object (sorted by key) would name first.
        self.iter()
            .map(|(name, _)| name)
            .filter(|name| !KNOWN_FIELDS.contains(name))
            .min()
            .map(str::to_owned)
    }

    fn string(&mut self, name: &str) -> Result<Option<String>, InvalidField> {
        match self.get(name) {
            None => Ok(None),
            Some(v) if raw::is_null(v) => Ok(None),
            Some(v) => match raw_str(v) {
                Some(s) => Ok(Some(s.into_owned())),
                None => Err(not_a_string(name, raw_type(v))),
            },
        }
    }
}

fn not_a_string(name: &str, found: &str) -> InvalidField {
    InvalidField::new(name, format!("must be a string, got {found}"))
}

/// Event Grid's rules for a published event, in the order its problems are reported.
fn check(fields: &mut impl Published, topic_id: &str) -> Result<Checked, InvalidField> {
    if let Some(extra) = fields.first_unknown() {
        return Err(InvalidField::new(extra, "not a field of the Event Grid schema"));
    }
    let id = required_string(fields, "id")?;
    if id.is_empty() {
        return Err(InvalidField::new("id", "must not be empty"));
    }
    header_value::check_field("id", &id, header_value::ID_HEADER)?;
    let subject = required_string(fields, "subject")?;
    let event_type = required_string(fields, "eventType")?;
    if event_type.is_empty() {
        return Err(InvalidField::new("eventType", "must not be empty"));
    }
    let event_time = required_string(fields, "eventTime")?;
    if DateTime::parse_from_rfc3339(&event_time).is_err() {
        return Err(InvalidField::new(
            "eventTime",
            format!("{event_time:?} is not an RFC 3339 timestamp"),
        ));
    }
    let data_version = fields.string("dataVersion")?.unwrap_or_default();
    header_value::check_field("dataVersion", &data_version, header_value::DATA_VERSION_HEADER)?;
    if let Some(v) = fields.string("metadataVersion")?
        && v != "1"
    {
        return Err(InvalidField::new(
            "metadataVersion",
            format!("must be \"1\" when present, got {v:?}"),
        ));
    }
    if let Some(t) = fields.string("topic")?
        && !t.eq_ignore_ascii_case(topic_id)
    {
        return Err(InvalidField::new(
            "topic",
            format!("must be this topic's id {topic_id:?} when present, got {t:?}"),
        ));
    }
    Ok(Checked {
        id,
        subject,
        event_type,
        event_time,
        data_version,
    })
}

fn required_string(fields: &mut impl Published, name: &str) -> Result<String, InvalidField> {
    fields
        .string(name)?
        .ok_or_else(|| InvalidField::new(name, "is required"))
}
