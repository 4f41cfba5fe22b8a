//! Delivery properties (behaviour.md#event-subscriptions, Event Grid's
//! `deliveryAttributeMappings`): headers a subscription adds to each delivery, with a
//! static value or one read from the event, and the rules that keep them from replacing
//! what the sender itself must set.

use crate::api_error::InvalidField;
use crate::event::raw;
use crate::header_value::{self, HeaderValueProblem};
use crate::json::json_type;
use crate::shape::{self, List, Object};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

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
    let List(written) = shape::read::<List<Object<WrittenMapping>>>(v).map_err(|e| e.within(field))?;
    if written.len() > MAX_DELIVERY_HEADERS {
        return Err(InvalidField::new(
            field,
            format!("at most {MAX_DELIVERY_HEADERS} headers, got {}", written.len()),
        ));
    }
    let mut headers: Vec<DeliveryHeader> = Vec::with_capacity(written.len());
    for (i, Object(mapping)) in written.into_iter().enumerate() {
        let header = mapping
            .into_header(&headers)
            .map_err(|e| e.within(&format!("[{i}]")).within(field))?;
        headers.push(header);
    }
    Ok(headers)
}

/// One entry of `deliveryAttributeMappings` as a client writes it. Which fields its
/// `properties` have depends on its `type`, so they are read once that is known.
#[derive(Deserialize)]
struct WrittenMapping {
    name: Option<HeaderName>,
    #[serde(rename = "type")]
    kind: Option<MappingKind>,
    properties: Option<Value>,
    #[serde(flatten)]
    unknown: Map<String, Value>,
}

const NOT_A_HEADER_NAME: &str = "must be a valid HTTP header name";
const NOT_A_KIND: &str = "must be \"Static\" or \"Dynamic\"";

impl WrittenMapping {
    /// The header, given `earlier` ones of the same subscription. Field names in errors
    /// start at the mapping.
    fn into_header(self, earlier: &[DeliveryHeader]) -> Result<DeliveryHeader, InvalidField> {
        let Some(HeaderName(name)) = self.name else {
            return Err(InvalidField::new("name", NOT_A_HEADER_NAME));
        };
        shape::refuse_unknown(&self.unknown, "not a field of a delivery attribute mapping")?;
        if earlier.iter().any(|h| h.name.eq_ignore_ascii_case(&name)) {
            return Err(InvalidField::new("name", format!("{name:?} is given twice")));
        }
        let value = match self.kind {
            Some(MappingKind::Static) => read_properties::<StaticProperties>(self.properties.as_ref())?.source()?,
            Some(MappingKind::Dynamic) => read_properties::<DynamicProperties>(self.properties.as_ref())?.source()?,
            None => return Err(InvalidField::new("type", NOT_A_KIND)),
        };
        Ok(DeliveryHeader { name, value })
    }
}

/// A mapping's `properties`, none when left out or `null`.
fn read_properties<T: DeserializeOwned + Default>(props: Option<&Value>) -> Result<T, InvalidField> {
    let within = |e: InvalidField| e.within("properties");
    let Some(props) = props else {
        return Ok(T::default());
    };
    let props = shape::read::<Option<Object<T>>>(props).map_err(within)?;
    Ok(props.map_or_else(T::default, |Object(props)| props))
}

const UNKNOWN_PROPERTY: &str = "not a field of this delivery attribute mapping's properties";

/// A `Static` mapping's `properties`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StaticProperties {
    value: Option<StaticValue>,
    is_secret: Option<Secret>,
    #[serde(flatten)]
    unknown: Map<String, Value>,
}

impl StaticProperties {
    fn source(self) -> Result<HeaderValueSource, InvalidField> {
        shape::refuse_unknown(&self.unknown, UNKNOWN_PROPERTY).map_err(|e| e.within("properties"))?;
        let Some(StaticValue(value)) = self.value else {
            return Err(InvalidField::new("properties.value", "is required"));
        };
        let is_secret = self.is_secret.is_some_and(|Secret(secret)| secret);
        Ok(HeaderValueSource::Static { value, is_secret })
    }
}

/// A `Dynamic` mapping's `properties`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DynamicProperties {
    source_field: Option<SourceField>,
    #[serde(flatten)]
    unknown: Map<String, Value>,
}

impl DynamicProperties {
    fn source(self) -> Result<HeaderValueSource, InvalidField> {
        shape::refuse_unknown(&self.unknown, UNKNOWN_PROPERTY).map_err(|e| e.within("properties"))?;
        let Some(SourceField(source_field)) = self.source_field else {
            return Err(InvalidField::new("properties.sourceField", NOT_A_SOURCE_FIELD));
        };
        Ok(HeaderValueSource::Dynamic { source_field })
    }
}

/// A mapping's `name`: a header token that eg does not set itself.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
struct HeaderName(String);

impl TryFrom<Value> for HeaderName {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        let name = match value {
            Value::String(name) if is_http_token(&name) => name,
            _ => return Err(NOT_A_HEADER_NAME.to_owned()),
        };
        if name.to_ascii_lowercase().starts_with("aeg-") {
            return Err("must not start with \"aeg-\" (reserved)".to_owned());
        }
        if RESERVED_HEADERS.iter().any(|r| r.eq_ignore_ascii_case(&name)) {
            return Err(format!(
                "{name:?} is set by the sender for every delivery and cannot be a delivery property"
            ));
        }
        Ok(Self(name))
    }
}

#[derive(Deserialize)]
#[serde(try_from = "Value")]
enum MappingKind {
    Static,
    Dynamic,
}

impl TryFrom<Value> for MappingKind {
    type Error = &'static str;

    fn try_from(value: Value) -> Result<Self, &'static str> {
        match value.as_str() {
            Some("Static") => Ok(Self::Static),
            Some("Dynamic") => Ok(Self::Dynamic),
            _ => Err(NOT_A_KIND),
        }
    }
}

/// A static value: sent with every delivery, so a value no header can carry would fail
/// them all.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
struct StaticValue(String);

impl TryFrom<Value> for StaticValue {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        let value = shape::string(value)?;
        header_value::check(&value).map_err(|problem| problem.to_string())?;
        Ok(Self(value))
    }
}

/// `isSecret`: a boolean, so that `"true"` is not read as `false` and shown.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
struct Secret(bool);

impl TryFrom<Value> for Secret {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        match value {
            Value::Bool(b) => Ok(Self(b)),
            other => Err(format!("must be a boolean, got {}", json_type(&other))),
        }
    }
}

const NOT_A_SOURCE_FIELD: &str = "must be a non-empty string";

/// A dynamic value's `sourceField`: the dotted path of an event field.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
struct SourceField(String);

impl TryFrom<Value> for SourceField {
    type Error = &'static str;

    fn try_from(value: Value) -> Result<Self, &'static str> {
        match value {
            Value::String(s) if !s.is_empty() && s.len() <= 256 => Ok(Self(s)),
            _ => Err(NOT_A_SOURCE_FIELD),
        }
    }
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
    fn reads_static_and_dynamic_mappings_in_order() {
        let headers = from_mappings(&serde_json::json!([
            {"name": "X-Team", "type": "Static", "properties": {"value": "billing"}},
            {"name": "X-Key", "type": "Static", "properties": {"value": "k", "isSecret": true}},
            {"name": "X-Open", "type": "Static", "properties": {"value": "o", "isSecret": null}},
            {"name": "X-Order", "type": "Dynamic", "properties": {"sourceField": "data.orderId"}},
        ]))
        .unwrap();
        let fixed = |name: &str, value: &str, is_secret| DeliveryHeader {
            name: name.into(),
            value: HeaderValueSource::Static {
                value: value.into(),
                is_secret,
            },
        };
        let expected = [
            fixed("X-Team", "billing", false),
            fixed("X-Key", "k", true),
            fixed("X-Open", "o", false),
            DeliveryHeader {
                name: "X-Order".into(),
                value: HeaderValueSource::Dynamic {
                    source_field: "data.orderId".into(),
                },
            },
        ];
        assert_eq!(headers, expected);
        assert_eq!(from_mappings(&serde_json::json!([])), Ok(Vec::new()));
    }

    #[test]
    fn every_refusal_names_the_mapping_and_its_field() {
        use serde_json::json;
        let ok = |name: &str| json!({"name": name, "type": "Static", "properties": {"value": "v"}});
        let eleven = Value::Array((0..=MAX_DELIVERY_HEADERS).map(|i| ok(&format!("X-{i}"))).collect());
        let long_field = "x".repeat(257);
        for (mappings, field, words) in [
            (json!({}), "", "must be an array, got an object"),
            (eleven, "", "at most 10 headers, got 11"),
            (json!([5]), "[0]", "must be an object, got a number"),
            (json!([{"type": "Static"}]), "[0].name", "valid HTTP header name"),
            (
                json!([{"name": 5, "type": "Static"}]),
                "[0].name",
                "valid HTTP header name",
            ),
            (
                json!([{"name": "aeg-x", "type": "Static"}]),
                "[0].name",
                "\"aeg-\" (reserved)",
            ),
            (
                json!([{"name": "Host", "type": "Static"}]),
                "[0].name",
                "set by the sender",
            ),
            (
                json!([ok("X-A"), {"name": "x-a", "type": "Static"}]),
                "[1].name",
                "\"x-a\" is given twice",
            ),
            (
                json!([{"name": "X-A", "type": "Static", "colour": 1}]),
                "[0].colour",
                "not a field of a delivery attribute mapping",
            ),
            (
                json!([{"name": "X-A"}]),
                "[0].type",
                "must be \"Static\" or \"Dynamic\"",
            ),
            (
                json!([{"name": "X-A", "type": "static"}]),
                "[0].type",
                "must be \"Static\" or \"Dynamic\"",
            ),
            (
                json!([{"name": "X-A", "type": "Static"}]),
                "[0].properties.value",
                "is required",
            ),
            (
                json!([{"name": "X-A", "type": "Static", "properties": 7}]),
                "[0].properties",
                "must be an object, got a number",
            ),
            (
                json!([{"name": "X-A", "type": "Static", "properties": {"value": 5}}]),
                "[0].properties.value",
                "must be a string, got a number",
            ),
            (
                json!([{"name": "X-A", "type": "Static", "properties": {"value": "v", "isSecret": "true"}}]),
                "[0].properties.isSecret",
                "must be a boolean, got a string",
            ),
            (
                json!([{"name": "X-A", "type": "Static", "properties": {"value": "v", "sourceField": "s"}}]),
                "[0].properties.sourceField",
                "not a field of this delivery attribute mapping's properties",
            ),
            (
                json!([{"name": "X-A", "type": "Dynamic", "properties": {"sourceField": "s", "value": "v"}}]),
                "[0].properties.value",
                "not a field of this delivery attribute mapping's properties",
            ),
            (
                json!([{"name": "X-A", "type": "Dynamic"}]),
                "[0].properties.sourceField",
                "must be a non-empty string",
            ),
            (
                json!([{"name": "X-A", "type": "Dynamic", "properties": {"sourceField": ""}}]),
                "[0].properties.sourceField",
                "must be a non-empty string",
            ),
            (
                json!([{"name": "X-A", "type": "Dynamic", "properties": {"sourceField": long_field}}]),
                "[0].properties.sourceField",
                "must be a non-empty string",
            ),
        ] {
            let err = from_mappings(&mappings).unwrap_err();
            assert_eq!(err.field, format!("deliveryAttributeMappings{field}"), "{mappings}");
            assert!(err.problem.contains(words), "{mappings}: {err}");
        }
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
