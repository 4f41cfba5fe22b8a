//! Custom input schema (behaviour.md#topics-and-publishing): a topic that accepts arbitrary
//! JSON objects and a mapping that says where, in each object, Event Grid's own fields are
//! found.
//!
//! Each published object is stored as an Event Grid envelope
//! `{id, topic, subject, eventType, eventTime, dataVersion, metadataVersion: "1", data}`
//! with the object, exactly as published, in `data`. Filters then read `eventType`,
//! `subject` and `data.…` like for any Event Grid event, and every delivery schema is
//! rendered from that one stored form (see `crate::render`).
//!
//! Decisions, where Event Grid's documentation leaves room:
//! - A mapped `sourceField` may be a dotted path (`header.id`) into the object. It must
//!   be present and a string; `null` counts as missing. A problem is reported at the
//!   source field's path, `events[i].header.id: …`, since that is what the publisher sent.
//! - `eventType`, `subject` and `dataVersion` fall back to their `defaultValue` when
//!   their source field is missing (or when only a default is given). A field that is
//!   present but not a string is an error, not a reason to use the default: it is
//!   almost always a publisher bug worth seeing.
//! - Unmapped `id`: a new UUID per event. Unmapped `eventTime`: the publish time.
//!   Unmapped `subject` / `dataVersion` with no default: `""`.
//! - Unmapped `eventType` with no default: every publish to the topic is refused,
//!   because Event Grid cannot route an event without a type. (Topic creation accepts
//!   such a mapping, as Event Grid does; the error at publish time says what to fix.)
//! - `id` and `eventType` must not be empty; `eventTime` must be RFC 3339.
//! - A mapped `topic` field is checked like the others (present, a string), but the
//!   envelope's `topic` is always this topic's id: the service stamps it, as it does for
//!   Event Grid schema events. The publisher's value stays visible in `data`.

use crate::api_error::InvalidField;
use crate::event::accepted::AcceptedEvent;
use crate::event::eventgrid::{Envelope, stored_json};
use crate::event::raw::{self, RawFields, raw_str, raw_type};
use crate::header_value;
use crate::json::json_type;
use crate::time::UnixMillis;
use chrono::DateTime;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// A topic's `inputSchemaMapping` (Event Grid's `JsonInputSchemaMapping`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputSchemaMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) event_time: Option<String>,
    #[serde(default)]
    pub(crate) event_type: MappedField,
    #[serde(default)]
    pub(crate) subject: MappedField,
    #[serde(default)]
    pub(crate) data_version: MappedField,
}

/// A field read from the object, or a default value, or both (the default is used when
/// the source field is missing).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MappedField {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) source_field: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) default_value: Option<String>,
}

impl MappedField {
    fn is_empty(&self) -> bool {
        self.source_field.is_none() && self.default_value.is_none()
    }
}

impl InputSchemaMapping {
    /// Reads Event Grid's shape:
    /// `{"inputSchemaMappingType":"Json","properties":{"id":{"sourceField":"…"}, …}}`.
    /// Field names in errors are relative to the mapping (`properties.eventType.sourceField`).
    pub fn from_resource(v: &Value) -> Result<Self, InvalidField> {
        let Value::Object(map) = v else {
            return Err(InvalidField::new(
                "",
                format!("must be an object, got {}", json_type(v)),
            ));
        };
        if let Some(key) = map
            .keys()
            .find(|k| !matches!(k.as_str(), "inputSchemaMappingType" | "properties"))
        {
            return Err(InvalidField::new(key.clone(), "not a field of an input schema mapping"));
        }
        match map.get("inputSchemaMappingType") {
            Some(Value::String(t)) if t.eq_ignore_ascii_case("Json") => {}
            Some(other) => {
                return Err(InvalidField::new(
                    "inputSchemaMappingType",
                    format!("only \"Json\" is supported, got {other}"),
                ));
            }
            None => return Err(InvalidField::new("inputSchemaMappingType", "is required (\"Json\")")),
        }
        let props = match map.get("properties") {
            Some(Value::Object(p)) => p,
            Some(other) => {
                return Err(InvalidField::new(
                    "properties",
                    format!("must be an object, got {}", json_type(other)),
                ));
            }
            None => return Err(InvalidField::new("properties", "is required")),
        };
        let within = |e: InvalidField| e.within("properties");
        if let Some(key) = props.keys().find(|k| {
            !matches!(
                k.as_str(),
                "id" | "topic" | "eventTime" | "eventType" | "subject" | "dataVersion"
            )
        }) {
            return Err(within(InvalidField::new(
                key.clone(),
                "not a mappable field: id, topic, eventTime, eventType, subject or dataVersion",
            )));
        }
        let mapping = Self {
            id: source_only(props, "id").map_err(within)?,
            topic: source_only(props, "topic").map_err(within)?,
            event_time: source_only(props, "eventTime").map_err(within)?,
            event_type: with_default(props, "eventType").map_err(within)?,
            subject: with_default(props, "subject").map_err(within)?,
            data_version: with_default(props, "dataVersion").map_err(within)?,
        };
        if let Some(default) = &mapping.data_version.default_value {
            header_value::check_field("dataVersion.defaultValue", default, header_value::DATA_VERSION_HEADER)
                .map_err(within)?;
        }
        if mapping.event_type.default_value.as_deref() == Some("") {
            return Err(within(InvalidField::new(
                "eventType.defaultValue",
                "must not be empty: every event needs a type",
            )));
        }
        Ok(mapping)
    }

    /// The mapping in Event Grid's shape, as the management API shows it.
    pub fn to_resource(&self) -> Value {
        let mut props = Map::new();
        for (name, field) in [
            ("id", &self.id),
            ("topic", &self.topic),
            ("eventTime", &self.event_time),
        ] {
            if let Some(f) = field {
                props.insert(name.into(), json!({ "sourceField": f }));
            }
        }
        for (name, field) in [
            ("eventType", &self.event_type),
            ("subject", &self.subject),
            ("dataVersion", &self.data_version),
        ] {
            if !field.is_empty() {
                props.insert(name.into(), serde_json::to_value(field).unwrap_or(Value::Null));
            }
        }
        json!({"inputSchemaMappingType": "Json", "properties": props})
    }

    /// Builds the stored envelope of one published object, read from its text (`item`,
    /// checked as strict JSON by the publish): only the mapped fields are read, and the
    /// object goes into `data` byte for byte as published. `new_id` makes the id of an
    /// object whose topic maps none; field names in errors are the object's paths.
    pub fn apply(
        &self,
        item: &RawValue,
        topic_id: &str,
        now: UnixMillis,
        new_id: &mut dyn FnMut() -> String,
    ) -> Result<AcceptedEvent, InvalidField> {
        let Some(object) = RawFields::of(item) else {
            return Err(InvalidField::new(
                "",
                format!("each event must be a JSON object, got {}", raw_type(item)),
            ));
        };
        let id = match &self.id {
            Some(path) => {
                let id = non_empty(path, required(&object, path, "id")?)?;
                check_mapped(path, "id", &id, header_value::ID_HEADER)?;
                id
            }
            None => new_id(),
        };
        if let Some(path) = &self.topic {
            required(&object, path, "topic")?;
        }
        let event_time = match &self.event_time {
            Some(path) => {
                let t = required(&object, path, "eventTime")?;
                if DateTime::parse_from_rfc3339(&t).is_err() {
                    return Err(InvalidField::new(
                        path.clone(),
                        format!("{t:?} is not an RFC 3339 timestamp (mapped to eventTime)"),
                    ));
                }
                t
            }
            None => now.to_rfc3339(),
        };
        let event_type = match defaulted(&object, &self.event_type, "eventType")? {
            Some(t) => match &self.event_type.source_field {
                Some(path) if lookup(&object, path).is_some() => non_empty(path, t)?,
                _ => t,
            },
            None => {
                return Err(InvalidField::new(
                    "eventType",
                    "this topic's inputSchemaMapping gives no sourceField or defaultValue for eventType, \
                     and every event needs a type",
                ));
            }
        };
        let subject = defaulted(&object, &self.subject, "subject")?.unwrap_or_default();
        let data_version = defaulted(&object, &self.data_version, "dataVersion")?.unwrap_or_default();
        if let Some(path) = &self.data_version.source_field {
            // A default value was checked when the topic was written.
            check_mapped(path, "dataVersion", &data_version, header_value::DATA_VERSION_HEADER)?;
        }
        let envelope = Envelope {
            id: &id,
            subject: &subject,
            event_type: &event_type,
            event_time: &event_time,
            data_version: &data_version,
        };
        let json = stored_json(&envelope, topic_id, Some(item));
        Ok(AcceptedEvent::stored(json, id, event_type, subject, Some(data_version)))
    }
}

/// The value at a dotted path; `null` counts as missing.
fn lookup<'a>(object: &RawFields<'a>, path: &str) -> Option<&'a RawValue> {
    let found = match path.split_once('.') {
        Some((first, rest)) => raw::field_at(object.get(first)?, rest)?,
        None => object.get(path)?,
    };
    (!raw::is_null(found)).then_some(found)
}

/// A looked-up value as a string, or the JSON type it has instead.
fn string_of(value: &RawValue) -> Result<String, &'static str> {
    raw_str(value).map(|s| s.into_owned()).ok_or_else(|| raw_type(value))
}

fn required(object: &RawFields<'_>, path: &str, target: &str) -> Result<String, InvalidField> {
    match lookup(object, path).map(string_of) {
        Some(Ok(s)) => Ok(s),
        Some(Err(found)) => Err(InvalidField::new(
            path,
            format!("must be a string, got {found} (mapped to {target})"),
        )),
        None => Err(InvalidField::new(
            path,
            format!("is required: this topic maps it to {target}"),
        )),
    }
}

fn defaulted(object: &RawFields<'_>, field: &MappedField, target: &str) -> Result<Option<String>, InvalidField> {
    if let Some(path) = &field.source_field {
        match lookup(object, path).map(string_of) {
            Some(Ok(s)) => return Ok(Some(s)),
            Some(Err(found)) => {
                return Err(InvalidField::new(
                    path.clone(),
                    format!("must be a string, got {found} (mapped to {target})"),
                ));
            }
            None if field.default_value.is_none() => {
                return Err(InvalidField::new(
                    path.clone(),
                    format!("is required: this topic maps it to {target} and gives no defaultValue"),
                ));
            }
            None => {}
        }
    }
    Ok(field.default_value.clone())
}

/// A mapped value that is sent as a header (`sent_as`), refused naming the object's
/// field it came from.
fn check_mapped(path: &str, target: &str, value: &str, sent_as: &str) -> Result<(), InvalidField> {
    header_value::check(value)
        .map_err(|problem| InvalidField::new(path, format!("{problem} (mapped to {target}, sent as {sent_as})")))
}

fn non_empty(path: &str, value: String) -> Result<String, InvalidField> {
    if value.is_empty() {
        Err(InvalidField::new(path, "must not be empty"))
    } else {
        Ok(value)
    }
}

fn source_field(v: &Value, at: &str) -> Result<Option<String>, InvalidField> {
    match v.get("sourceField") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if is_path(s) => Ok(Some(s.clone())),
        Some(other) => Err(InvalidField::new(
            format!("{at}.sourceField"),
            format!("must be a field name or dotted path such as \"header.id\", got {other}"),
        )),
    }
}

fn is_path(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && s.split('.').all(|part| !part.is_empty())
}

fn source_only(props: &Map<String, Value>, name: &str) -> Result<Option<String>, InvalidField> {
    let Some(v) = props.get(name).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Value::Object(map) = v else {
        return Err(InvalidField::new(
            name,
            "must be an object such as {\"sourceField\": \"…\"}",
        ));
    };
    if let Some(key) = map.keys().find(|k| k.as_str() != "sourceField") {
        let problem = if key == "defaultValue" {
            format!("{name} takes a sourceField only, not a defaultValue")
        } else {
            "not a field of a mapped field".to_owned()
        };
        return Err(InvalidField::new(format!("{name}.{key}"), problem));
    }
    match source_field(v, name)? {
        Some(f) => Ok(Some(f)),
        None => Err(InvalidField::new(format!("{name}.sourceField"), "is required")),
    }
}

fn with_default(props: &Map<String, Value>, name: &str) -> Result<MappedField, InvalidField> {
    let Some(v) = props.get(name).filter(|v| !v.is_null()) else {
        return Ok(MappedField::default());
    };
    let Value::Object(map) = v else {
        return Err(InvalidField::new(
            name,
            "must be an object such as {\"sourceField\": \"…\"} or {\"defaultValue\": \"…\"}",
        ));
    };
    if let Some(key) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "sourceField" | "defaultValue"))
    {
        return Err(InvalidField::new(
            format!("{name}.{key}"),
            "not a field of a mapped field",
        ));
    }
    let default_value = match map.get("defaultValue") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(InvalidField::new(
                format!("{name}.defaultValue"),
                format!("must be a string, got {}", json_type(other)),
            ));
        }
    };
    Ok(MappedField {
        source_field: source_field(v, name)?,
        default_value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPIC: &str = "/topics/shop";

    fn mapping() -> InputSchemaMapping {
        InputSchemaMapping::from_resource(&json!({
            "inputSchemaMappingType": "Json",
            "properties": {
                "id": {"sourceField": "header.id"},
                "eventTime": {"sourceField": "when"},
                "eventType": {"sourceField": "kind", "defaultValue": "Shop.Unknown"},
                "subject": {"defaultValue": "/shop"},
                "dataVersion": {"sourceField": "v"}
            }
        }))
        .unwrap()
    }

    fn raw(text: &str) -> Box<RawValue> {
        serde_json::from_str(text).unwrap()
    }

    fn apply(m: &InputSchemaMapping, item: Value) -> Result<AcceptedEvent, InvalidField> {
        m.apply(&raw(&item.to_string()), TOPIC, UnixMillis(0), &mut || {
            "generated".to_owned()
        })
    }

    fn envelope(a: &AcceptedEvent) -> Value {
        serde_json::from_str(&a.json).unwrap()
    }

    #[test]
    fn builds_the_envelope_with_the_object_as_data() {
        let item =
            json!({"header": {"id": "e1"}, "when": "2026-01-02T03:04:05Z", "kind": "Shop.Sold", "v": "2", "n": 5});
        let a = apply(&mapping(), item.clone()).unwrap();
        assert_eq!(
            envelope(&a),
            json!({
                "id": "e1", "topic": TOPIC, "subject": "/shop", "eventType": "Shop.Sold",
                "eventTime": "2026-01-02T03:04:05Z", "dataVersion": "2", "metadataVersion": "1",
                "data": item,
            })
        );
        assert_eq!(a.event_type, "Shop.Sold");
        assert_eq!(a.subject, "/shop");
        assert_eq!(a.routing().lookup("data.n"), Some(&json!(5)));
    }

    #[test]
    fn the_object_is_stored_byte_for_byte_as_published() {
        let text = r#"{ "header": {"id": "e1"}, "when": "2026-01-02T03:04:05Z", "v": "2", "n": 1.50, "z": 1, "a": 2 }"#;
        let a = mapping()
            .apply(&raw(text), TOPIC, UnixMillis(0), &mut || "generated".to_owned())
            .unwrap();
        assert!(a.json.starts_with(&format!("{{\"data\":{text},")), "{}", a.json);
        assert_eq!(a.data_version(), Some("2"));
    }

    #[test]
    fn defaults_apply_only_when_the_field_is_missing() {
        let item = json!({"header": {"id": "e1"}, "when": "2026-01-02T03:04:05Z", "v": "1"});
        assert_eq!(apply(&mapping(), item).unwrap().event_type, "Shop.Unknown");

        let item = json!({"header": {"id": "e1"}, "when": "2026-01-02T03:04:05Z", "v": "1", "kind": 7});
        let err = apply(&mapping(), item).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kind: must be a string, got a number (mapped to eventType)"
        );

        // dataVersion is mapped with no default: missing is an error naming the source field.
        let item = json!({"header": {"id": "e1"}, "when": "2026-01-02T03:04:05Z"});
        let err = apply(&mapping(), item).unwrap_err();
        assert_eq!(err.field, "v");
        assert!(err.problem.contains("dataVersion"), "{err}");
    }

    #[test]
    fn mapped_fields_must_be_present_strings() {
        let err = apply(&mapping(), json!({"when": "2026-01-02T03:04:05Z", "v": "1"})).unwrap_err();
        assert_eq!(err.field, "header.id");
        let err = apply(
            &mapping(),
            json!({"header": {"id": null}, "when": "2026-01-02T03:04:05Z", "v": "1"}),
        )
        .unwrap_err();
        assert_eq!(err.field, "header.id");
        let err = apply(
            &mapping(),
            json!({"header": {"id": ""}, "when": "2026-01-02T03:04:05Z", "v": "1"}),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "header.id: must not be empty");
        let err = apply(
            &mapping(),
            json!({"header": {"id": "e"}, "when": "yesterday", "v": "1"}),
        )
        .unwrap_err();
        assert_eq!(err.field, "when");
        assert!(err.problem.contains("RFC 3339"), "{err}");
        let err = apply(&mapping(), json!([1])).unwrap_err();
        assert_eq!(err.field, "");
        assert!(err.problem.contains("JSON object"), "{err}");
    }

    #[test]
    fn unmapped_fields_are_generated_stamped_or_empty() {
        let m = InputSchemaMapping::from_resource(&json!({
            "inputSchemaMappingType": "Json",
            "properties": {"eventType": {"defaultValue": "T"}}
        }))
        .unwrap();
        let a = m
            .apply(&raw(r#"{"x": 1}"#), TOPIC, UnixMillis(1_000), &mut || {
                "uuid-1".to_owned()
            })
            .unwrap();
        let e = envelope(&a);
        assert_eq!(e["id"], "uuid-1");
        assert_eq!(e["eventTime"], "1970-01-01T00:00:01.000Z");
        assert_eq!(e["subject"], "");
        assert_eq!(e["dataVersion"], "");
        assert_eq!(e["eventType"], "T");
    }

    #[test]
    fn an_unmapped_event_type_without_default_refuses_the_event() {
        let m =
            InputSchemaMapping::from_resource(&json!({"inputSchemaMappingType": "Json", "properties": {}})).unwrap();
        let err = apply(&m, json!({"x": 1})).unwrap_err();
        assert_eq!(err.field, "eventType");
    }

    #[test]
    fn the_mapped_topic_field_is_checked_but_the_topic_id_is_stamped() {
        let m = InputSchemaMapping::from_resource(&json!({
            "inputSchemaMappingType": "Json",
            "properties": {"topic": {"sourceField": "t"}, "eventType": {"defaultValue": "T"}}
        }))
        .unwrap();
        assert_eq!(apply(&m, json!({"x": 1})).unwrap_err().field, "t");
        let a = apply(&m, json!({"t": "elsewhere"})).unwrap();
        assert_eq!(envelope(&a)["topic"], TOPIC);
        assert_eq!(envelope(&a)["data"]["t"], "elsewhere");
    }

    #[test]
    fn mapping_resource_errors_name_the_path() {
        let parse = |v: Value| InputSchemaMapping::from_resource(&v).unwrap_err().field;
        assert_eq!(parse(json!({"properties": {}})), "inputSchemaMappingType");
        assert_eq!(
            parse(json!({"inputSchemaMappingType": "Avro", "properties": {}})),
            "inputSchemaMappingType"
        );
        assert_eq!(parse(json!({"inputSchemaMappingType": "Json"})), "properties");
        assert_eq!(
            parse(json!({"inputSchemaMappingType": "Json", "properties": {"id": {"defaultValue": "x"}}})),
            "properties.id.defaultValue"
        );
        assert_eq!(
            parse(json!({"inputSchemaMappingType": "Json", "properties": {"id": {}}})),
            "properties.id.sourceField"
        );
        assert_eq!(
            parse(json!({"inputSchemaMappingType": "Json", "properties": {"eventType": {"sourceField": "a..b"}}})),
            "properties.eventType.sourceField"
        );
        assert_eq!(
            parse(json!({"inputSchemaMappingType": "Json", "properties": {"subject": {"defaultValue": 5}}})),
            "properties.subject.defaultValue"
        );
        assert_eq!(
            parse(json!({"inputSchemaMappingType": "Json", "properties": {"colour": {}}})),
            "properties.colour"
        );
        assert_eq!(
            parse(json!({"inputSchemaMappingType": "Json", "properties": {"eventType": {"defaultValue": ""}}})),
            "properties.eventType.defaultValue"
        );
        // Sent as the aeg-data-version header of every event that lacks its source field.
        for default in ["1\u{0}", "1\n", &"1".repeat(4097)] {
            assert_eq!(
                parse(
                    json!({"inputSchemaMappingType": "Json", "properties": {"dataVersion": {"defaultValue": default}}})
                ),
                "properties.dataVersion.defaultValue"
            );
        }
    }

    #[test]
    fn mapping_resource_round_trips() {
        let shown = mapping().to_resource();
        assert_eq!(InputSchemaMapping::from_resource(&shown).unwrap(), mapping());
        assert_eq!(shown["properties"]["subject"], json!({"defaultValue": "/shop"}));
        assert_eq!(shown["properties"]["id"], json!({"sourceField": "header.id"}));
        let stored = serde_json::to_string(&mapping()).unwrap();
        assert_eq!(serde_json::from_str::<InputSchemaMapping>(&stored).unwrap(), mapping());
    }
}
