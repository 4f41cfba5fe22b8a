//! Strict JSON for everything a client sends (publish bodies, management bodies).
//!
//! `serde_json` alone would accept two things a service should refuse, and word a
//! third poorly:
//! - **Duplicate keys.** `{"id":"a","id":"b"}` is ambiguous (RFC 8259 §4 leaves the
//!   meaning to the reader; parsers differ on which one wins), so a filter and a
//!   subscriber could see different events. Refused, naming the object and the key.
//! - **Deep nesting.** Refused past [`MAX_DEPTH`] levels of arrays and objects with
//!   the path where it happened, well before `serde_json`'s own limit (128), whose
//!   message ("recursion limit exceeded") says neither where nor what the limit is.
//! - **Bytes that are not UTF-8** are named by offset, before any parsing.
//!
//! Everything else (truncated or malformed JSON, numbers out of range such as `1e400`,
//! lone surrogates in `\u` escapes, trailing characters) is `serde_json`'s own check,
//! reported with the path of the value being read when it failed.
//!
//! [`parse`] is one pass building a `serde_json::Value` through a visitor that keeps
//! the current path; keys are moved, not copied, so it costs about what
//! `serde_json::from_slice::<Value>` does. [`validate`] makes the same checks with the
//! same errors but builds nothing, for a caller that then reads the text borrowed (a
//! publish keeps each event's `data` as the bytes it was sent).
//!
//! [`json_type`] is how every refusal of a client's JSON names what it found instead.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

/// The deepest nesting of arrays and objects accepted: a top-level array of events is
/// level 1, each event level 2, so an event's `data` may nest 61 levels deeper.
pub const MAX_DEPTH: usize = 64;

/// Keys longer than this are shortened in error messages.
const MAX_KEY_CHARS_SHOWN: usize = 64;

/// Why a body was refused, and where in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// Where the problem is: `[2].data.items[0]`, `properties.filter`, or `""` for the
    /// whole body.
    pub path: String,
    pub problem: JsonProblem,
    /// 1-based position of the problem in the body (0 when unknown).
    pub(crate) line: usize,
    pub(crate) column: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonProblem {
    /// Not UTF-8: the first invalid byte's offset.
    NotUtf8 { offset: usize },
    /// Malformed JSON, or a number out of range: `serde_json`'s words.
    Syntax(String),
    /// The body ends before its JSON does (`serde_json`'s words kept for the detail); the
    /// path says where the reader was when it ran out.
    Truncated(String),
    /// An object with the same key twice.
    DuplicateKey(String),
    /// Arrays and objects nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl JsonError {
    /// The same problem, located inside `root`: `events` + `[2].data` is
    /// `events[2].data`, `events[0]` + `data` is `events[0].data`.
    pub(crate) fn within(mut self, root: &str) -> Self {
        self.path = if self.path.is_empty() {
            root.to_owned()
        } else if self.path.starts_with('[') || root.is_empty() {
            format!("{root}{}", self.path)
        } else {
            format!("{root}.{}", self.path)
        };
        self
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let subject = if self.path.is_empty() {
            "the request body"
        } else {
            self.path.as_str()
        };
        match &self.problem {
            JsonProblem::NotUtf8 { offset } => {
                return write!(f, "{subject} is not UTF-8: invalid byte sequence at offset {offset}");
            }
            JsonProblem::Syntax(message) => write!(f, "{subject} is not valid JSON: {message}")?,
            JsonProblem::Truncated(message) => write!(f, "{subject} is not valid JSON: it ends too early ({message})")?,
            JsonProblem::DuplicateKey(key) => write!(
                f,
                "{subject} has the key {key:?} twice (a JSON object must not repeat a key)"
            )?,
            JsonProblem::TooDeep => write!(
                f,
                "{subject} is nested too deeply: at most {MAX_DEPTH} levels of arrays and objects are accepted"
            )?,
        }
        if self.line > 0 {
            write!(f, " at line {} column {}", self.line, self.column)?;
        }
        Ok(())
    }
}

impl std::error::Error for JsonError {}

/// How an error names a value's JSON type: `a string`, `an array`, `null`…
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses `bytes` as one JSON value, refusing what the module doc lists. A UTF-8 byte
/// order mark at the start is skipped (RFC 8259 §8.1 allows ignoring it).
pub fn parse(bytes: &[u8]) -> Result<Value, JsonError> {
    read(bytes, |state, deserializer| Strict { state }.deserialize(deserializer)).map(|(value, _)| value)
}

/// Checks `bytes` as [`parse`] does, with the same errors, without building a value;
/// returns the JSON text (after any byte order mark).
pub fn validate(bytes: &[u8]) -> Result<&str, JsonError> {
    read(bytes, |state, deserializer| Check { state }.deserialize(deserializer)).map(|((), text)| text)
}

type Reader<'de> = serde_json::Deserializer<serde_json::de::StrRead<'de>>;

/// Runs `visit` over the text of `bytes` to its end, locating any error with the path
/// the visitor kept.
fn read<'de, T>(
    bytes: &'de [u8],
    visit: impl FnOnce(&mut State<'de>, &mut Reader<'de>) -> Result<T, serde_json::Error>,
) -> Result<(T, &'de str), JsonError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).map_err(|e| JsonError {
        path: String::new(),
        problem: JsonProblem::NotUtf8 {
            offset: e.valid_up_to(),
        },
        line: 0,
        column: 0,
    })?;
    let mut state = State::default();
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = visit(&mut state, &mut deserializer).and_then(|value| deserializer.end().map(|()| value));
    parsed.map(|value| (value, text)).map_err(|e| {
        let truncated = e.classify() == serde_json::error::Category::Eof;
        let problem = state.problem.take().unwrap_or_else(|| {
            if truncated {
                JsonProblem::Truncated(message_of(&e))
            } else {
                JsonProblem::Syntax(message_of(&e))
            }
        });
        JsonError {
            path: render_path(&state.path),
            problem,
            line: e.line(),
            column: e.column(),
        }
    })
}

/// `serde_json`'s message without its ` at line L column C` suffix (shown separately).
fn message_of(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    full.strip_suffix(&suffix).map(str::to_owned).unwrap_or(full)
}

/// A key is borrowed from the text unless it had escapes to decode.
enum Segment<'de> {
    Index(usize),
    Key(Cow<'de, str>),
}

/// Where the parse is. On an error the path is left as it was at the failing value.
#[derive(Default)]
struct State<'de> {
    path: Vec<Segment<'de>>,
    /// Set by the visitor for the problems it finds itself.
    problem: Option<JsonProblem>,
}

impl<'de> State<'de> {
    fn refuse<E: de::Error>(&mut self, problem: JsonProblem) -> E {
        self.problem = Some(problem);
        E::custom("refused")
    }

    /// The depth of the container being entered: one more than the values around it.
    fn enter<E: de::Error>(&mut self) -> Result<(), E> {
        if self.path.len() + 1 > MAX_DEPTH {
            return Err(self.refuse(JsonProblem::TooDeep));
        }
        Ok(())
    }

    /// Takes back the key pushed before its value was read (it is on top again).
    fn pop_key<E: de::Error>(&mut self) -> Result<Cow<'de, str>, E> {
        match self.path.pop() {
            Some(Segment::Key(key)) => Ok(key),
            _ => Err(self.refuse(JsonProblem::Syntax("unreadable object key".into()))),
        }
    }
}

/// Paths longer than this many segments are shown with their middle elided.
const MAX_SEGMENTS_SHOWN: usize = 12;

/// `[2].data.items[0]`; a very deep path as its first 8 and last 3 segments around `…`.
fn render_path(path: &[Segment<'_>]) -> String {
    if path.len() > MAX_SEGMENTS_SHOWN {
        let (head, tail) = (&path[..8], &path[path.len() - 3..]);
        return format!("{}…{}", render_path(head), render_path(tail));
    }
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
            Segment::Key(key) if is_plain(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Key(key) => out.push_str(&format!("[{:?}]", shortened(key))),
        }
    }
    out
}

/// Keys that read unambiguously after a dot.
fn is_plain(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_KEY_CHARS_SHOWN
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'$' | b'@'))
}

fn shortened(key: &str) -> String {
    if key.chars().count() <= MAX_KEY_CHARS_SHOWN {
        key.to_owned()
    } else {
        let head: String = key.chars().take(MAX_KEY_CHARS_SHOWN).collect();
        format!("{head}…")
    }
}

/// Builds a `Value`, checking depth and duplicate keys on the way.
struct Strict<'s, 'de> {
    state: &'s mut State<'de>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_, 'de> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_, 'de> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        // serde_json never yields a non-finite number (`1e400` is its own error);
        // refuse one anyway rather than turn it into something else.
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| self.state.refuse(JsonProblem::Syntax("number out of range".into())))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.state.enter()?;
        let mut items = Vec::new();
        loop {
            self.state.path.push(Segment::Index(items.len()));
            match seq.next_element_seed(Strict { state: self.state })? {
                Some(item) => items.push(item),
                None => break,
            }
            self.state.path.pop();
        }
        self.state.path.pop();
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.state.enter()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key_seed(Key)? {
            self.state.path.push(Segment::Key(key));
            let value = map.next_value_seed(Strict { state: self.state })?;
            match object.entry(self.state.pop_key()?.into_owned()) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(slot) => {
                    let key = shortened(slot.key());
                    return Err(self.state.refuse(JsonProblem::DuplicateKey(key)));
                }
            }
        }
        Ok(Value::Object(object))
    }
}

/// An object key, borrowed from the text when it has no escapes.
pub(crate) struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// Makes [`Strict`]'s checks while keeping nothing but each open object's keys.
struct Check<'s, 'de> {
    state: &'s mut State<'de>,
}

impl<'de> DeserializeSeed<'de> for Check<'_, 'de> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        // As in `Strict`: a non-finite number would have no JSON form.
        if v.is_finite() {
            Ok(())
        } else {
            Err(self.state.refuse(JsonProblem::Syntax("number out of range".into())))
        }
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.state.enter()?;
        let mut index = 0;
        loop {
            self.state.path.push(Segment::Index(index));
            if seq.next_element_seed(Check { state: self.state })?.is_none() {
                break;
            }
            self.state.path.pop();
            index += 1;
        }
        self.state.path.pop();
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.state.enter()?;
        let mut seen = KeySet::default();
        while let Some(key) = map.next_key_seed(Key)? {
            self.state.path.push(Segment::Key(key));
            map.next_value_seed(Check { state: self.state })?;
            let key = self.state.pop_key()?;
            if let Err(key) = seen.insert(key) {
                return Err(self.state.refuse(JsonProblem::DuplicateKey(shortened(&key))));
            }
        }
        Ok(())
    }
}

/// The keys seen so far in one object. Most objects have a handful of keys, which a
/// scan of a vector checks faster than hashing; a large one gets a set.
enum KeySet<'de> {
    Few(Vec<Cow<'de, str>>),
    Many(HashSet<Cow<'de, str>>),
}

/// Past this many keys an object's keys go into a set.
const FEW_KEYS: usize = 16;

impl Default for KeySet<'_> {
    fn default() -> Self {
        Self::Few(Vec::new())
    }
}

impl<'de> KeySet<'de> {
    /// Adds `key`, or gives it back when the object already has it.
    fn insert(&mut self, key: Cow<'de, str>) -> Result<(), Cow<'de, str>> {
        match self {
            Self::Few(keys) if keys.contains(&key) => Err(key),
            Self::Few(keys) if keys.len() < FEW_KEYS => {
                keys.push(key);
                Ok(())
            }
            Self::Few(keys) => {
                let mut set: HashSet<_> = keys.drain(..).collect();
                set.insert(key);
                *self = Self::Many(set);
                Ok(())
            }
            Self::Many(set) if set.contains(&key) => Err(key),
            Self::Many(set) => {
                set.insert(key);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(body: &str) -> JsonError {
        parse(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn parses_what_serde_json_parses() {
        let body = r#"[{"a": 1, "b": [true, null, -2, 1.5e3, "x\u00e9"], "c": {}}, 18446744073709551615]"#;
        assert_eq!(
            parse(body.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(body).unwrap()
        );
        assert_eq!(parse(b"\xEF\xBB\xBF{}").unwrap(), json!({}));
        // Integers beyond u64 become floats, as with serde_json.
        assert_eq!(parse(b"18446744073709551616").unwrap(), json!(18446744073709551616.0));
    }

    #[test]
    fn duplicate_keys_are_refused_where_they_are() {
        let e = refused(r#"[{"id": "1"}, {"data": {"a": 1, "b": 2, "a": 3}}]"#);
        assert_eq!(e.problem, JsonProblem::DuplicateKey("a".into()));
        assert_eq!(e.path, "[1].data");
        assert_eq!(
            e.clone().within("events").to_string(),
            "events[1].data has the key \"a\" twice (a JSON object must not repeat a key) at line 1 column 47"
        );
        let e = refused(r#"{"x": 1, "x": 1}"#);
        assert_eq!(e.path, "");
        assert!(
            e.to_string().starts_with("the request body has the key \"x\" twice"),
            "{e}"
        );
    }

    #[test]
    fn nesting_is_limited() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(ok.as_bytes()).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let e = refused(&deep);
        assert_eq!(e.problem, JsonProblem::TooDeep);
        assert_eq!(e.path, format!("{}…{}", "[0]".repeat(8), "[0]".repeat(3)));
        // Far deeper than serde_json's own limit: still our message, no stack trouble.
        let e = refused(&"{\"a\":".repeat(10_000));
        assert_eq!(e.problem, JsonProblem::TooDeep);
        assert!(e.to_string().contains("at most 64 levels"), "{e}");
    }

    #[test]
    fn syntax_errors_keep_serde_json_words_and_our_path() {
        let e = refused(r#"[{"id": "1", "data": {"n": 1e400}}]"#);
        assert_eq!(e.path, "[0].data.n");
        assert_eq!(e.problem, JsonProblem::Syntax("number out of range".into()));
        let e = refused(r#"[{"id": "#);
        assert!(
            matches!(e.problem, JsonProblem::Truncated(ref m) if m.starts_with("EOF")),
            "{e:?}"
        );
        assert_eq!(e.path, "[0].id");
        assert_eq!(
            e.to_string(),
            "[0].id is not valid JSON: it ends too early (EOF while parsing a value) at line 1 column 8"
        );
        assert_eq!(
            refused("").to_string(),
            "the request body is not valid JSON: it ends too early (EOF while parsing a value) at line 1 column 0"
        );
        assert!(matches!(refused("[] []").problem, JsonProblem::Syntax(ref m) if m == "trailing characters"));
        assert!(matches!(refused(r#"["\ud800"]"#).problem, JsonProblem::Syntax(_)));
        assert!(matches!(refused("{\"a\":\"\u{1}\"}").problem, JsonProblem::Syntax(_)));
    }

    #[test]
    fn invalid_utf8_is_named_by_offset() {
        let e = parse(b"[{\"id\": \"\xff\"}]").unwrap_err();
        assert_eq!(e.problem, JsonProblem::NotUtf8 { offset: 9 });
        assert_eq!(
            e.to_string(),
            "the request body is not UTF-8: invalid byte sequence at offset 9"
        );
    }

    #[test]
    fn validate_refuses_what_parse_refuses_in_the_same_words() {
        let many_keys: String = (0..40).map(|i| format!("\"k{i}\": {i},")).collect();
        let bodies = [
            r#"[{"id": "1", "data": {"a": [1, {"b": null}], "c": "x\u00e9"}}]"#.to_owned(),
            r#"[{"id": "1"}, {"data": {"a": 1, "b": 2, "a": 3}}]"#.to_owned(),
            r#"{"a": 1, "\u0061": 2}"#.to_owned(),
            format!("{{{many_keys} \"k7\": 0}}"),
            format!("{{{many_keys} \"last\": 0}}"),
            format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1)),
            "{\"a\":".repeat(10_000),
            r#"[{"id": "1", "data": {"n": 1e400}}]"#.to_owned(),
            r#"[{"id": "#.to_owned(),
            "[] []".to_owned(),
            r#"["\ud800"]"#.to_owned(),
            "{\"a\":\"\u{1}\"}".to_owned(),
            String::new(),
            "\u{feff}{}".to_owned(),
        ];
        for body in &bodies {
            assert_eq!(
                validate(body.as_bytes()).map(|_| ()),
                parse(body.as_bytes()).map(|_| ()),
                "{body:.80}"
            );
        }
        assert_eq!(validate(b"\xEF\xBB\xBF [1] "), Ok(" [1] "));
        assert_eq!(
            validate(b"[{\"id\": \"\xff\"}]").unwrap_err().problem,
            JsonProblem::NotUtf8 { offset: 9 }
        );
    }

    #[test]
    fn odd_and_long_keys_are_quoted_and_shortened() {
        let long = "k".repeat(200);
        let body = format!(r#"{{"a b": {{"{long}": [1e999]}}}}"#);
        let e = refused(&body);
        assert!(e.path.starts_with(r#"["a b"]["kkkk"#), "{}", e.path);
        assert!(e.path.ends_with("…\"][0]"), "{}", e.path);
    }
}
