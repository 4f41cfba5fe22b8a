//! CloudEvents 1.0 in structured JSON mode (behaviour.md#topics-and-publishing): validating
//! one published event.
//!
//! The stored form of a CloudEvent is the event as published, byte for byte (a publish
//! reads it with [`accept_raw`]), so a subscriber receives what the publisher sent. Validation follows the CloudEvents
//! 1.0 core specification and its JSON format:
//! - required: `id`, `source` (a URI-reference), `type` (non-empty strings) and
//!   `specversion` = `"1.0"`;
//! - optional: `data` or `data_base64` (not both; `data_base64` must be base64),
//!   `time` (RFC 3339), `subject`, `datacontenttype` (non-empty strings), `dataschema`
//!   (an absolute URI);
//! - anything else is an extension attribute: its name is 1–20 lower-case letters or
//!   digits, its value a string, number or boolean.
//!
//! A `null` optional core attribute is treated as absent (some serializers write them),
//! and kept as published; a `null` extension value is refused, since an extension
//! attribute has no "absent" form other than leaving it out.

use crate::api_error::InvalidField;
use crate::event::accepted::AcceptedEvent;
use crate::event::raw::{self, RawFields, raw_type};
use crate::header_value;
use crate::json::json_type;
use crate::trace_context::TraceContext;
use base64::Engine;
use chrono::DateTime;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub(crate) const SPEC_VERSION: &str = "1.0";

/// The core attributes of CloudEvents 1.0 and the JSON format's `data` / `data_base64`.
const CORE: [&str; 10] = [
    "id",
    "source",
    "specversion",
    "type",
    "datacontenttype",
    "dataschema",
    "subject",
    "time",
    "data",
    "data_base64",
];

/// The engine for `data_base64`: the standard alphabet, padding optional.
const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// Validates one published CloudEvent and returns its accepted (stored) form.
pub(crate) fn accept(item: Value) -> Result<AcceptedEvent, InvalidField> {
    let Value::Object(fields) = item else {
        return Err(not_an_object(json_type(&item)));
    };
    let has_data = fields.get("data").is_some_and(|v| !v.is_null());
    let (event_type, subject) = validate(&fields, has_data)?;
    let trace = TraceContext::of_attributes(&fields);
    Ok(AcceptedEvent::new(fields, event_type, subject).in_trace(trace))
}

/// Validates one published CloudEvent read from its text, as [`accept`] does; its
/// stored form is that text, byte for byte. Only the attributes are parsed: `data` is
/// seen only as there or not.
pub(crate) fn accept_raw(item: &RawValue) -> Result<AcceptedEvent, InvalidField> {
    let fields = RawFields::of(item).ok_or_else(|| not_an_object(raw_type(item)))?;
    let mut attributes = Map::new();
    let mut has_data = false;
    for (name, value) in fields.iter() {
        if name == "data" {
            has_data = !raw::is_null(value);
            continue;
        }
        let value = serde_json::from_str(value.get())
            .map_err(|e| InvalidField::new(name, format!("is not valid JSON: {e}")))?;
        attributes.insert(name.to_owned(), value);
    }
    let (event_type, subject) = validate(&attributes, has_data)?;
    let id = required_non_empty(&attributes, "id")?.to_owned();
    let source = attributes.get("source").and_then(Value::as_str).map(str::to_owned);
    Ok(
        AcceptedEvent::stored(item.get().to_owned(), id, event_type, subject, None)
            .with_source(source)
            .in_trace(TraceContext::of_attributes(&attributes)),
    )
}

fn not_an_object(found: &str) -> InvalidField {
    InvalidField::new(
        "",
        format!("each event must be a JSON object (a CloudEvent), got {found}"),
    )
}

/// Checks every attribute; returns the event's `type` and `subject` (`""` when absent).
/// `has_data` says whether the event carries a `data` that is not `null`.
fn validate(fields: &Map<String, Value>, has_data: bool) -> Result<(String, String), InvalidField> {
    match fields.get("specversion") {
        Some(Value::String(v)) if v == SPEC_VERSION => {}
        Some(Value::String(v)) => {
            return Err(InvalidField::new(
                "specversion",
                format!("must be \"{SPEC_VERSION}\", got {v:?}"),
            ));
        }
        other => return Err(required_problem("specversion", other)),
    }
    let id = required_non_empty(fields, "id")?;
    header_value::check_field("id", id, header_value::ID_HEADER)?;
    let source = required_non_empty(fields, "source")?;
    if !is_uri_reference(source) {
        return Err(InvalidField::new(
            "source",
            format!("{source:?} is not a URI-reference"),
        ));
    }
    let event_type = required_non_empty(fields, "type")?.to_owned();

    let subject = optional_non_empty(fields, "subject")?.unwrap_or_default().to_owned();
    optional_non_empty(fields, "datacontenttype")?;
    if let Some(time) = optional_non_empty(fields, "time")?
        && DateTime::parse_from_rfc3339(time).is_err()
    {
        return Err(InvalidField::new(
            "time",
            format!("{time:?} is not an RFC 3339 timestamp"),
        ));
    }
    if let Some(schema) = optional_non_empty(fields, "dataschema")?
        && url::Url::parse(schema).is_err()
    {
        return Err(InvalidField::new(
            "dataschema",
            format!("{schema:?} is not an absolute URI"),
        ));
    }
    if let Some(encoded) = optional_string(fields, "data_base64")? {
        if has_data {
            return Err(InvalidField::new(
                "data_base64",
                "an event carries data or data_base64, not both",
            ));
        }
        if BASE64.decode(encoded).is_err() {
            return Err(InvalidField::new("data_base64", "is not valid base64"));
        }
    }
    for (name, value) in fields.iter().filter(|(k, _)| !CORE.contains(&k.as_str())) {
        if !is_extension_name(name) {
            return Err(InvalidField::new(
                name.clone(),
                "not a CloudEvents attribute: extension attribute names are 1-20 lower-case letters or digits",
            ));
        }
        if !matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
            return Err(InvalidField::new(
                name.clone(),
                format!(
                    "an extension attribute must be a string, number or boolean, got {}",
                    json_type(value)
                ),
            ));
        }
    }
    Ok((event_type, subject))
}

/// Whether `name` may name an extension attribute: `[a-z0-9]{1,20}`.
pub(crate) fn is_extension_name(name: &str) -> bool {
    (1..=20).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// A URI-reference (RFC 3986 §4.1): absolute (`https://…`, `urn:…`) or relative
/// (`/orders`, `orders`). Whitespace and control characters never belong in one.
fn is_uri_reference(s: &str) -> bool {
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    match url::Url::parse("eg-base:/") {
        Ok(base) => base.join(s).is_ok(),
        Err(_) => false,
    }
}

fn required_problem(name: &str, found: Option<&Value>) -> InvalidField {
    match found {
        None | Some(Value::Null) => InvalidField::new(name, "is required"),
        Some(other) => InvalidField::new(name, format!("must be a string, got {}", json_type(other))),
    }
}

fn required_non_empty<'a>(fields: &'a Map<String, Value>, name: &str) -> Result<&'a str, InvalidField> {
    match fields.get(name) {
        Some(Value::String(s)) if s.is_empty() => Err(InvalidField::new(name, "must not be empty")),
        Some(Value::String(s)) => Ok(s),
        other => Err(required_problem(name, other)),
    }
}

fn optional_string<'a>(fields: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, InvalidField> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(InvalidField::new(
            name,
            format!("must be a string, got {}", json_type(other)),
        )),
    }
}

fn optional_non_empty<'a>(fields: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, InvalidField> {
    match optional_string(fields, name)? {
        Some("") => Err(InvalidField::new(name, "must not be empty when present")),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event() -> Value {
        json!({"specversion": "1.0", "id": "1", "source": "/orders", "type": "Order.Created"})
    }

    fn with(key: &str, value: Value) -> Value {
        let mut e = event();
        e[key] = value;
        e
    }

    fn without(key: &str) -> Value {
        let mut e = event();
        e.as_object_mut().unwrap().remove(key);
        e
    }

    fn problem(item: Value) -> String {
        accept(item).unwrap_err().to_string()
    }

    #[test]
    fn keeps_the_event_as_published() {
        let e = json!({
            "specversion": "1.0", "id": "1", "source": "https://example.com/orders", "type": "Order.Created",
            "subject": "o/1", "time": "2026-01-02T03:04:05.123456789+01:00", "datacontenttype": "application/json",
            "dataschema": "https://example.com/schema.json", "data": {"k": [1, 2]}, "traceparent": "00-ab-cd-01",
            "partitionkey": 5, "sampled": true
        });
        let a = accept(e.clone()).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&a.json).unwrap(), e);
        assert_eq!(a.event_type, "Order.Created");
        assert_eq!(a.subject, "o/1");
        assert_eq!(accept(event()).unwrap().subject, "");
    }

    #[test]
    fn required_attributes() {
        for name in ["id", "source", "specversion", "type"] {
            assert_eq!(problem(without(name)), format!("{name}: is required"));
            assert_eq!(
                problem(with(name, json!(1))),
                format!("{name}: must be a string, got a number")
            );
        }
        for name in ["id", "source", "type"] {
            assert_eq!(problem(with(name, json!(""))), format!("{name}: must not be empty"));
        }
        assert_eq!(
            problem(with("specversion", json!("0.3"))),
            "specversion: must be \"1.0\", got \"0.3\""
        );
        assert!(problem(with("source", json!("not a uri"))).starts_with("source:"));
        assert!(accept(with("source", json!("urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66"))).is_ok());
        assert!(accept(with("source", json!("orders"))).is_ok());
        assert!(problem(json!([event()])).contains("JSON object"));
    }

    #[test]
    fn optional_attributes() {
        assert!(problem(with("time", json!("yesterday"))).starts_with("time:"));
        assert!(problem(with("time", json!(5))).starts_with("time: must be a string"));
        assert!(problem(with("dataschema", json!("/relative"))).starts_with("dataschema:"));
        assert!(problem(with("subject", json!(""))).starts_with("subject:"));
        assert!(problem(with("datacontenttype", json!(["a"]))).starts_with("datacontenttype:"));
        assert!(accept(with("subject", Value::Null)).is_ok());
        assert!(accept(with("data", Value::Null)).is_ok());
        assert!(accept(with("data", json!("text"))).is_ok());
    }

    #[test]
    fn data_or_data_base64() {
        assert!(accept(with("data_base64", json!("aGVsbG8="))).is_ok());
        assert!(accept(with("data_base64", json!("aGVsbG8"))).is_ok());
        assert_eq!(
            problem(with("data_base64", json!("not base64!"))),
            "data_base64: is not valid base64"
        );
        let mut both = with("data_base64", json!("aGVsbG8="));
        both["data"] = json!({});
        assert!(problem(both).starts_with("data_base64: an event carries data or data_base64"));
    }

    #[test]
    fn extension_attributes() {
        assert!(accept(with("comexampleextension1", json!("v"))).is_ok());
        assert!(accept(with("a1", json!(1.5))).is_ok());
        assert!(problem(with("Upper", json!("v"))).starts_with("Upper: not a CloudEvents attribute"));
        assert!(problem(with("with_underscore", json!("v"))).starts_with("with_underscore:"));
        assert!(problem(with("abcdefghijklmnopqrstu", json!("v"))).starts_with("abcdefghijklmnopqrstu:"));
        assert_eq!(
            problem(with("nested", json!({"a": 1}))),
            "nested: an extension attribute must be a string, number or boolean, got an object"
        );
        assert!(problem(with("list", json!([1]))).contains("got an array"));
        assert!(problem(with("nothing", Value::Null)).contains("got null"));
    }

    /// The text path refuses what the `Value` path refuses, and stores the text as sent.
    #[test]
    fn read_from_text_as_from_a_value() {
        let mut cases = vec![event(), json!(5), json!([event()])];
        for (key, value) in [
            ("id", json!("")),
            ("type", Value::Null),
            ("time", json!("yesterday")),
            ("data", json!({"k": [1, 2]})),
            ("data", Value::Null),
            ("data_base64", json!("aGVsbG8=")),
            ("nested", json!({"a": 1})),
            ("Upper", json!("v")),
        ] {
            cases.push(with(key, value));
        }
        let mut both = with("data_base64", json!("aGVsbG8="));
        both["data"] = json!({});
        cases.push(both);
        for case in cases {
            let text = serde_json::to_string_pretty(&case).unwrap();
            let raw: &RawValue = serde_json::from_str(&text).unwrap();
            let from_text = accept_raw(raw);
            match accept(case.clone()) {
                Ok(a) => {
                    let b = from_text.unwrap();
                    assert_eq!(b.json, text);
                    assert_eq!((b.id(), &b.event_type, &b.subject), (a.id(), &a.event_type, &a.subject));
                }
                Err(e) => assert_eq!(from_text.unwrap_err(), e, "{text}"),
            }
        }
    }

    /// The distributed-tracing extension's attributes give the event its trace context,
    /// on both paths; a malformed one is accepted and simply not kept.
    #[test]
    fn the_tracing_extension_carries_the_events_trace_context() {
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut traced = with("traceparent", json!(traceparent));
        traced["tracestate"] = json!("k=v");
        let text = serde_json::to_string(&traced).unwrap();
        let raw: &RawValue = serde_json::from_str(&text).unwrap();
        for accepted in [accept(traced.clone()).unwrap(), accept_raw(raw).unwrap()] {
            let context = accepted.trace().expect("a context");
            assert_eq!(context.traceparent(), traceparent);
            assert_eq!(context.tracestate(), Some("k=v"));
        }
        let malformed = accept(with("traceparent", json!("00-nonsense-01"))).unwrap();
        assert_eq!(malformed.trace(), None);
        assert_eq!(accept(event()).unwrap().trace(), None);
    }

    #[test]
    fn extension_names() {
        assert!(is_extension_name("a"));
        assert!(is_extension_name("abcdefghij0123456789"));
        assert!(!is_extension_name(""));
        assert!(!is_extension_name("abcdefghij01234567890"));
        assert!(!is_extension_name("a-b"));
    }
}
