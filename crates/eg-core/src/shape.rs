//! Reading a client's JSON into a typed shape with serde, with refusals as precise as a
//! hand-written walk of the `Value`.
//!
//! A refusal names the JSON path of the value at fault (`serde_path_to_error` keeps it)
//! and says what was wrong in the API's words. serde's own words ("invalid type: integer
//! `5`, expected a string") are not those, so a shape's fields are types that refuse in
//! them: [`Object`] and [`List`] for containers, and for a leaf a newtype with
//! `#[serde(try_from = "Value")]`, whose `TryFrom` error is the problem as a client reads
//! it ([`string`] and [`choice`] word the common ones).
//!
//! Unknown keys are collected rather than denied, because serde's `deny_unknown_fields`
//! words cannot be changed: a shape flattens them into a `Map` and [`refuse_unknown`]
//! names the first. Rules that join two fields are checked after reading, by the module
//! that owns the shape.

use crate::api_error::InvalidField;
use crate::json::json_type;
use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;
use std::marker::PhantomData;

/// Reads `value` as `T`. A refusal's field is the path below `value` (`""` for `value`
/// itself), to be placed with [`InvalidField::within`].
pub(crate) fn read<T: DeserializeOwned>(value: &Value) -> Result<T, InvalidField> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = match e.path().iter().next() {
            None => String::new(),
            Some(_) => e.path().to_string(),
        };
        InvalidField::new(field, e.into_inner().to_string())
    })
}

/// Refuses the first of `unknown` (keys a shape does not know) with `problem`.
pub(crate) fn refuse_unknown(unknown: &Map<String, Value>, problem: &str) -> Result<(), InvalidField> {
    match unknown.keys().next() {
        Some(key) => Err(InvalidField::new(key.as_str(), problem)),
        None => Ok(()),
    }
}

/// `value` as a string, or the problem "must be a string, got a number".
pub(crate) fn string(value: Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(format!("must be a string, got {}", json_type(&other))),
    }
}

/// `value` as one of a closed set of words, read by `parse`; `choices` lists them for
/// the problem (`must be "A" or "B", got "C"`).
pub(crate) fn choice<T>(value: Value, choices: &str, parse: impl FnOnce(&str) -> Option<T>) -> Result<T, String> {
    let s = string(value)?;
    parse(&s).ok_or_else(|| format!("must be {choices}, got {s:?}"))
}

/// A JSON object read as `T`; anything else is refused as "must be an object, got …".
#[derive(Debug)]
pub(crate) struct Object<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(Container::<T>::new(Kind::Object))
            .map(Object)
    }
}

/// A JSON array read as `Vec<T>`; anything else is refused as "must be an array, got …".
#[derive(Debug)]
pub(crate) struct List<T>(pub(crate) Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(Container::<Vec<T>>::new(Kind::Array))
            .map(List)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Object,
    Array,
}

/// Reads the container it expects as `T` through the same `MapAccess`/`SeqAccess`, so
/// the paths of `T`'s own refusals are kept; refuses any other JSON value in the API's
/// words.
struct Container<T> {
    expected: Kind,
    read: PhantomData<T>,
}

impl<T> Container<T> {
    fn new(expected: Kind) -> Self {
        Self {
            expected,
            read: PhantomData,
        }
    }

    fn refuse<E: de::Error>(&self, found: &str) -> E {
        let expected = match self.expected {
            Kind::Object => "an object",
            Kind::Array => "an array",
        };
        E::custom(format_args!("must be {expected}, got {found}"))
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Container<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self.expected {
            Kind::Object => "an object",
            Kind::Array => "an array",
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        match self.expected {
            Kind::Object => T::deserialize(MapAccessDeserializer::new(map)),
            Kind::Array => Err(self.refuse("an object")),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        match self.expected {
            Kind::Array => T::deserialize(SeqAccessDeserializer::new(seq)),
            Kind::Object => Err(self.refuse("an array")),
        }
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Err(self.refuse("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<T, E> {
        Err(self.refuse("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<T, E> {
        Err(self.refuse("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
        Err(self.refuse("a number"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<T, E> {
        Err(self.refuse("a string"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Err(self.refuse("null"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(try_from = "Value")]
    struct Colour(String);

    impl TryFrom<Value> for Colour {
        type Error = String;

        fn try_from(value: Value) -> Result<Self, String> {
            choice(value, "\"red\" or \"blue\"", |s| {
                matches!(s, "red" | "blue").then(|| Colour(s.to_owned()))
            })
        }
    }

    #[derive(Debug, Deserialize)]
    struct Paint {
        colour: Option<Colour>,
        #[serde(default)]
        coats: Option<List<Object<Coat>>>,
        #[serde(flatten)]
        unknown: Map<String, Value>,
    }

    #[derive(Debug, Deserialize)]
    struct Coat {
        colour: Colour,
    }

    fn refusal<T: DeserializeOwned>(value: Value) -> String {
        match read::<T>(&value) {
            Ok(_) => "accepted".to_owned(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_refusal_names_the_path_and_says_what_was_wrong_in_the_apis_words() {
        let paint = |v: Value| refusal::<Object<Paint>>(v);
        assert_eq!(paint(json!({"colour": 5})), "colour: must be a string, got a number");
        assert_eq!(
            paint(json!({"colour": "green"})),
            "colour: must be \"red\" or \"blue\", got \"green\""
        );
        assert_eq!(
            paint(json!({"coats": [{"colour": "red"}, {"colour": true}]})),
            "coats[1].colour: must be a string, got a boolean"
        );
        assert_eq!(
            paint(json!({"coats": [7]})),
            "coats[0]: must be an object, got a number"
        );
        assert_eq!(paint(json!({"coats": {}})), "coats: must be an array, got an object");
        assert_eq!(paint(json!([])), ": must be an object, got an array");
        assert_eq!(paint(json!(null)), ": must be an object, got null");
        assert_eq!(paint(json!("x")), ": must be an object, got a string");
        // serde_json visits each kind of number on its own.
        for number in [json!(7), json!(-7), json!(1.5)] {
            assert_eq!(paint(number), ": must be an object, got a number");
        }
        assert_eq!(paint(json!(true)), ": must be an object, got a boolean");
        assert_eq!(paint(json!({"colour": null, "coats": null})), "accepted");
        let Object(read) = read::<Object<Paint>>(&json!({"colour": "red", "coats": [{"colour": "blue"}]})).unwrap();
        assert_eq!(read.colour.map(|c| c.0).as_deref(), Some("red"));
        let coats = read.coats.map(|List(coats)| coats).unwrap_or_default();
        assert_eq!(coats.len(), 1);
        assert_eq!(coats[0].0.colour.0, "blue");
    }

    #[test]
    fn unknown_keys_are_collected_in_order_and_the_first_refused() {
        let Object(paint) = read::<Object<Paint>>(&json!({"colour": "red", "b": 1, "a": 2})).unwrap();
        assert!(paint.colour.is_some());
        let refused = refuse_unknown(&paint.unknown, "not a field of paint").unwrap_err();
        assert_eq!(refused.field, paint.unknown.keys().next().unwrap().as_str());
        assert_eq!(refused.problem, "not a field of paint");
        let Object(plain) = read::<Object<Paint>>(&json!({})).unwrap();
        assert_eq!(refuse_unknown(&plain.unknown, "unused"), Ok(()));
    }
}
