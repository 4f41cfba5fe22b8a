//! Delivery properties (behaviour.md#event-subscriptions, Event Grid's
//! `deliveryAttributeMappings`): headers a subscription adds to each delivery, with a
//! static value or one read from the event, and the rules that keep them from replacing
//! what the sender itself must set.

use crate::api_error::InvalidField;
use crate::event::raw;
use crate::header_value::{self, HeaderValueProblem};
use crate::json::json_type;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

pub use crate::header_value::MAX_HEADER_VALUE_BYTES;

pub(crate) const MAX_DELIVERY_HEADERS: usize = 10;

/// A header sent with every delivery of the subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryHeader {
    pub name: String,
    pub(crate) value: HeaderValueSource,
}

/// Where a delivery header's value comes from: fixed (a secret one is never shown by
/// the API), or a field of the event (a dotted path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub(crate) enum HeaderValueSource {
    Static { value: String, is_secret: bool },
    Dynamic { source_field: String },
}

/// The delivery properties of one event: the headers to send, and the properties left
/// out because their value cannot be a header value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedHeaders {
    /// Name and value of each header to send, in the subscription's order.
    pub headers: Vec<(String, String)>,
    /// The name of each property left out, and why. Only a dynamic property's value can
    /// be refused here (a static one is checked when the subscription is written), so
    /// a delivery goes on without it: retrying would meet the same value again.
    pub left_out: Vec<(String, HeaderValueProblem)>,
}

/// The delivery properties of `headers` for one event, `event` being its JSON as
/// delivered: static values as set, dynamic ones read from the event's fields as
/// stored, without building its tree (and without reading it at all when every
/// property is static). A dynamic property whose field is missing, or is not a string,
/// number or boolean, sends no header; one whose value breaks the header rule
/// ([`header_value::check`]: too long, or a control character) is left out and named
/// in [`ResolvedHeaders::left_out`].
pub fn resolve_headers(headers: &[DeliveryHeader], event: &str) -> ResolvedHeaders {
    let mut root: Option<Option<&RawValue>> = None;
    let mut resolved = ResolvedHeaders::default();
    for h in headers {
        let value = match &h.value {
            HeaderValueSource::Static { value, .. } => value.clone(),
            HeaderValueSource::Dynamic { source_field } => {
                let Some(event) = *root.get_or_insert_with(|| serde_json::from_str(event).ok()) else {
                    continue;
                };
                match raw::field_at(event, source_field).and_then(raw::scalar_text) {
                    Some(value) => value,
                    None => continue,
                }
            }
        };
        match header_value::check(&value) {
            Ok(()) => resolved.headers.push((h.name.clone(), value)),
            Err(problem) => resolved.left_out.push((h.name.clone(), problem)),
        }
    }
    resolved
}

/// Reads `deliveryAttributeMappings`: at most [`MAX_DELIVERY_HEADERS`] headers, each a
/// valid header name given once that eg does not set itself, with a static value or a
/// field of the event as its source. Field names in errors start at the mappings.
pub(super) fn from_mappings(v: &Value) -> Result<Vec<DeliveryHeader>, InvalidField> {
    let field = "deliveryAttributeMappings";
    let Value::Array(items) = v else {
        return Err(InvalidField::new(field, "must be an array"));
    };
    if items.len() > MAX_DELIVERY_HEADERS {
        return Err(InvalidField::new(
            field,
            format!("at most {MAX_DELIVERY_HEADERS} headers, got {}", items.len()),
        ));
    }
    let mut seen: Vec<String> = Vec::new();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = |sub: &str| format!("{field}[{i}].{sub}");
            let name = match item.get("name") {
                Some(Value::String(n)) if is_http_token(n) => n.clone(),
                _ => return Err(InvalidField::new(at("name"), "must be a valid HTTP header name")),
            };
            if name.to_ascii_lowercase().starts_with("aeg-") {
                return Err(InvalidField::new(at("name"), "must not start with \"aeg-\" (reserved)"));
            }
            if RESERVED_HEADERS.iter().any(|r| r.eq_ignore_ascii_case(&name)) {
                return Err(InvalidField::new(
                    at("name"),
                    format!("{name:?} is set by the sender for every delivery and cannot be a delivery property"),
                ));
            }
            if let Some(key) = item
                .as_object()
                .and_then(|m| m.keys().find(|k| !matches!(k.as_str(), "name" | "type" | "properties")))
            {
                return Err(InvalidField::new(
                    at(key),
                    "not a field of a delivery attribute mapping",
                ));
            }
            if seen.iter().any(|s| s.eq_ignore_ascii_case(&name)) {
                return Err(InvalidField::new(at("name"), format!("{name:?} is given twice")));
            }
            seen.push(name.clone());
            let props = item.get("properties").cloned().unwrap_or(Value::Null);
            let allowed: &[&str] = match item.get("type").and_then(Value::as_str) {
                Some("Static") => &["value", "isSecret"],
                Some("Dynamic") => &["sourceField"],
                _ => return Err(InvalidField::new(at("type"), "must be \"Static\" or \"Dynamic\"")),
            };
            if let Some(key) = props
                .as_object()
                .and_then(|m| m.keys().find(|k| !allowed.contains(&k.as_str())))
            {
                return Err(InvalidField::new(
                    at(&format!("properties.{key}")),
                    "not a field of this delivery attribute mapping's properties",
                ));
            }
            let value = match item.get("type").and_then(Value::as_str) {
                Some("Static") => {
                    let value = match props.get("value") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => {
                            return Err(InvalidField::new(
                                at("properties.value"),
                                format!("must be a string, got {}", json_type(other)),
                            ));
                        }
                        None => return Err(InvalidField::new(at("properties.value"), "is required")),
                    };
                    // Sent with every delivery: a value no header can carry would fail them all.
                    header_value::check(&value)
                        .map_err(|problem| InvalidField::new(at("properties.value"), problem.to_string()))?;
                    let is_secret = match props.get("isSecret") {
                        None | Some(Value::Null) => false,
                        Some(Value::Bool(b)) => *b,
                        Some(other) => {
                            return Err(InvalidField::new(
                                at("properties.isSecret"),
                                format!("must be a boolean, got {}", json_type(other)),
                            ));
                        }
                    };
                    HeaderValueSource::Static { value, is_secret }
                }
                Some("Dynamic") => match props.get("sourceField") {
                    Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => HeaderValueSource::Dynamic {
                        source_field: s.clone(),
                    },
                    _ => {
                        return Err(InvalidField::new(
                            at("properties.sourceField"),
                            "must be a non-empty string",
                        ));
                    }
                },
                _ => return Err(InvalidField::new(at("type"), "must be \"Static\" or \"Dynamic\"")),
            };
            Ok(DeliveryHeader { name, value })
        })
        .collect()
}

/// Headers that frame or route the request, or that the sender sets itself: a delivery
/// property must not replace them.
const RESERVED_HEADERS: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "content-type",
];

fn is_http_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The headers of a signed delivery: a delivery property must not replace them.
const SIGNING_HEADERS: [&str; 3] = ["webhook-id", "webhook-timestamp", "webhook-signature"];

/// The first of `headers` that a signed delivery sets itself, with its index.
pub(super) fn first_signing_header(headers: &[DeliveryHeader]) -> Option<(usize, &DeliveryHeader)> {
    headers
        .iter()
        .enumerate()
        .find(|(_, h)| SIGNING_HEADERS.iter().any(|r| r.eq_ignore_ascii_case(&h.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_properties_take_scalar_fields_as_written() {
        let dynamic = |field: &str| DeliveryHeader {
            name: field.into(),
            value: HeaderValueSource::Dynamic {
                source_field: field.into(),
            },
        };
        let fixed = DeliveryHeader {
            name: "fixed".into(),
            value: HeaderValueSource::Static {
                value: "v".into(),
                is_secret: true,
            },
        };
        let headers = [
            fixed,
            dynamic("subject"),
            dynamic("data.n"),
            dynamic("data.ok"),
            dynamic("data.escaped"),
            dynamic("data.nested.deep"),
            dynamic("data.object"),
            dynamic("data.missing"),
            dynamic("data.none"),
        ];
        let event = r#"{"data":{"n":1.50,"ok":false,"escaped":"a\"b","nested":{"deep":"x"},"object":{},"none":null},"subject":"s/1"}"#;
        let resolved = resolve_headers(&headers, event);
        let expected = [
            ("fixed", "v"),
            ("subject", "s/1"),
            ("data.n", "1.50"),
            ("data.ok", "false"),
            ("data.escaped", "a\"b"),
            ("data.nested.deep", "x"),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned()));
        assert_eq!(resolved.headers, expected);
        assert!(resolved.left_out.is_empty(), "{:?}", resolved.left_out);
        // Nothing to read when every property is static, even from a body that is not JSON.
        assert_eq!(
            resolve_headers(&headers[..1], "not json").headers,
            [("fixed".to_owned(), "v".to_owned())]
        );
        assert_eq!(resolve_headers(&headers[1..], "not json"), ResolvedHeaders::default());
    }

    #[test]
    fn a_dynamic_value_no_header_can_carry_is_left_out_and_named() {
        let dynamic = |field: &str| DeliveryHeader {
            name: field.into(),
            value: HeaderValueSource::Dynamic {
                source_field: field.into(),
            },
        };
        let headers = [
            dynamic("data.big"),
            dynamic("data.nul"),
            dynamic("data.crlf"),
            dynamic("data.ok"),
        ];
        let event = serde_json::json!({"data": {
            "big": "x".repeat(100 * 1024),
            "nul": "a\u{0}b",
            "crlf": "a\r\nX-Injected: 1",
            "ok": "fine",
        }})
        .to_string();
        let resolved = resolve_headers(&headers, &event);
        assert_eq!(resolved.headers, [("data.ok".to_owned(), "fine".to_owned())]);
        assert_eq!(
            resolved.left_out,
            [
                ("data.big".to_owned(), HeaderValueProblem::TooLong { bytes: 100 * 1024 }),
                (
                    "data.nul".to_owned(),
                    HeaderValueProblem::ControlCharacter { code: 0, at: 1 }
                ),
                (
                    "data.crlf".to_owned(),
                    HeaderValueProblem::ControlCharacter { code: 0x0d, at: 1 }
                ),
            ]
        );
    }

    #[test]
    fn a_static_value_must_be_a_header_value_and_a_name_a_token() {
        let mapping = |name: &str, value: Value| serde_json::json!([{"name": name, "type": "Static", "properties": {"value": value}}]);
        for (value, words) in [
            (Value::from("a\u{0}"), "U+0000"),
            (Value::from("a\u{1}"), "U+0001"),
            (Value::from("a\u{7f}"), "U+007F"),
            (Value::from("a\r\nb"), "U+000D"),
            (Value::from("x".repeat(MAX_HEADER_VALUE_BYTES + 1)), "4097 bytes"),
            (Value::from(5), "must be a string, got a number"),
        ] {
            let err = from_mappings(&mapping("x-ok", value.clone())).unwrap_err();
            assert_eq!(err.field, "deliveryAttributeMappings[0].properties.value", "{value}");
            assert!(err.problem.contains(words), "{value}: {err}");
        }
        let longest = "x".repeat(MAX_HEADER_VALUE_BYTES);
        assert!(from_mappings(&mapping("x-ok", Value::from(longest))).is_ok());
        for name in ["", "has space", "colon:", "new\nline", "nul\u{0}", "é"] {
            let err = from_mappings(&mapping(name, Value::from("v"))).unwrap_err();
            assert_eq!(err.field, "deliveryAttributeMappings[0].name", "{name:?}");
        }
    }
}
