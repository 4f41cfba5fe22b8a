//! A published event read borrowed from the text it was sent in: each top-level field's
//! value stays the `RawValue` it was written as, so `data` is never built into a tree
//! and can be stored byte for byte.
//!
//! The publish body has passed `json::validate` before anything here reads it, so the
//! text is valid JSON without duplicate keys: a failure here would be a bug, and is
//! reported as the event not being an object rather than trusted.

use crate::json::Key;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// The top-level fields of one event object, in the order they were published.
#[derive(Debug)]
pub struct RawFields<'a> {
    fields: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> RawFields<'a> {
    /// The fields of `event`, or `None` when it is not an object.
    pub fn of(event: &'a RawValue) -> Option<Self> {
        if !event.get().starts_with('{') {
            return None;
        }
        let mut deserializer = serde_json::Deserializer::from_str(event.get());
        (&mut deserializer)
            .deserialize_map(FieldsVisitor)
            .ok()
            .map(|fields| Self { fields })
    }

    pub fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.fields.iter().find(|(key, _)| key == name).map(|(_, value)| *value)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &'a RawValue)> {
        self.fields.iter().map(|(key, value)| (key.as_ref(), *value))
    }
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Vec<(Cow<'de, str>, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(key) = map.next_key_seed(Key)? {
            fields.push((key, map.next_value::<&RawValue>()?));
        }
        Ok(fields)
    }
}

/// One element of a published array, read in one pass: an object's fields, or the
/// JSON type of anything else (for the error that refuses it).
#[derive(Debug)]
pub enum RawEvent<'a> {
    Object(RawFields<'a>),
    Other(&'static str),
}

/// The elements of the JSON array `text`, each split into its fields as the array is
/// read, so an event's `data` is skipped once rather than once per step.
pub(crate) fn events_of(text: &str) -> Result<Vec<RawEvent<'_>>, serde_json::Error> {
    serde_json::from_str(text)
}

impl<'de> Deserialize<'de> for RawEvent<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(EventVisitor)
    }
}

struct EventVisitor;

impl<'de> Visitor<'de> for EventVisitor {
    type Value = RawEvent<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let fields = FieldsVisitor.visit_map(map)?;
        Ok(RawEvent::Object(RawFields { fields }))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(RawEvent::Other("an array"))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(RawEvent::Other("a boolean"))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(RawEvent::Other("a number"))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(RawEvent::Other("a number"))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(RawEvent::Other("a number"))
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(RawEvent::Other("a string"))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(RawEvent::Other("null"))
    }
}

/// The value at dotted `path` (`subject`, `data.region`) inside the object `event`,
/// reading only the objects on the way, each into its fields without building them.
pub fn field_at<'a>(event: &'a RawValue, path: &str) -> Option<&'a RawValue> {
    path.split('.')
        .try_fold(event, |value, key| RawFields::of(value)?.get(key))
}

/// A scalar's text as a header carries it: a string's contents, a number as written,
/// `true` or `false`; `None` for null, objects and arrays.
pub fn scalar_text(value: &RawValue) -> Option<String> {
    match raw_type(value) {
        "a string" => raw_str(value).map(Cow::into_owned),
        "a number" | "a boolean" => Some(value.get().to_owned()),
        _ => None,
    }
}

/// How an error names a raw value's JSON type, as `json::json_type` does for a `Value`.
pub(crate) fn raw_type(value: &RawValue) -> &'static str {
    match value.get().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

pub(crate) fn is_null(value: &RawValue) -> bool {
    value.get() == "null"
}

/// A raw JSON string's text, borrowed when it holds no escapes; `None` when `value` is
/// not a string.
pub fn raw_str(value: &RawValue) -> Option<Cow<'_, str>> {
    let inner = value.get().strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str(value.get()).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner))
    }
}

/// Appends `s` as a JSON string. The common case (nothing to escape) is a copy.
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        // Serializing a `str` cannot fail.
        out.push_str(&serde_json::to_string(s).unwrap_or_default());
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> &RawValue {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn fields_keep_their_text_and_decode_escaped_names() {
        let event = raw(r#"{"\u0069d": "1", "data": { "a" : [1.50, "\u00e9"] }}"#);
        let fields = RawFields::of(event).unwrap();
        assert_eq!(fields.get("id").unwrap().get(), r#""1""#);
        assert_eq!(fields.get("data").unwrap().get(), r#"{ "a" : [1.50, "\u00e9"] }"#);
        assert!(fields.get("other").is_none());
        assert!(RawFields::of(raw("[1]")).is_none());
    }

    #[test]
    fn an_array_is_read_into_events() {
        let events = events_of(r#"[{"id": "1", "data": [1, {"a": null}]}, 5, "s", [1, [2]], null, true]"#).unwrap();
        let RawEvent::Object(first) = &events[0] else {
            panic!("{events:?}");
        };
        assert_eq!(first.get("data").unwrap().get(), r#"[1, {"a": null}]"#);
        let others: Vec<_> = events[1..]
            .iter()
            .map(|e| match e {
                RawEvent::Other(kind) => *kind,
                RawEvent::Object(_) => "an object",
            })
            .collect();
        assert_eq!(others, ["a number", "a string", "an array", "null", "a boolean"]);
    }

    #[test]
    fn types_and_strings() {
        for (text, kind) in [
            ("{}", "an object"),
            ("[]", "an array"),
            ("\"s\"", "a string"),
            ("true", "a boolean"),
        ] {
            assert_eq!(raw_type(raw(text)), kind);
        }
        assert_eq!(raw_type(raw("null")), "null");
        assert_eq!(raw_type(raw("-1.5")), "a number");
        assert!(matches!(raw_str(raw(r#""plain""#)), Some(Cow::Borrowed("plain"))));
        assert_eq!(raw_str(raw(r#""a\"b\u00e9""#)).as_deref(), Some("a\"bé"));
        assert_eq!(raw_str(raw("5")), None);
        let mut out = String::new();
        push_json_str(&mut out, "/topics/a");
        push_json_str(&mut out, "q\"\n");
        assert_eq!(out, r#""/topics/a""q\"\n""#);
    }
}
