//! Advanced filters (behaviour.md#event-subscriptions): tests on a field of the event, such
//! as `{"operatorType":"NumberLessThan","key":"data.price","value":100}`.
//!
//! A subscription's advanced filters are AND-ed with each other and with its basic filter;
//! the values within one filter are OR-ed. Each operator is one [`Operator`] variant that
//! carries operands of the right type, so a parsed filter can only be valid: the
//! management API's input and the catalog's stored form go through the same
//! [`AdvancedFilter::from_json`], and the value serializes back in Event Grid's layout.
//!
//! How a filter evaluates, following Azure's documented behaviour:
//!
//! - **The key** is a dotted path into the event as stored (`data.a.b`, `subject`, `id`,
//!   a CloudEvents extension attribute). Paths are case-sensitive, like JSON. When the
//!   path finds nothing, `eventType` / `type` (compared case-insensitively) mean the
//!   event's type and `subject` its subject, so one filter works on Event Grid events and
//!   CloudEvents alike. A CloudEvent without a subject has no `subject` key.
//! - **A missing key, or a JSON `null`,** is undefined: only `NumberNotIn`, `StringNotIn`
//!   and `IsNullOrUndefined` match it. `StringNot{BeginsWith,EndsWith,Contains}` do not,
//!   as Azure documents; `NumberNotInRange`, which Azure's list leaves out, follows them.
//! - **Values of another type are ignored**, as Azure documents: a number operator never
//!   matches a string, a string operator never matches a number (no conversion), and
//!   `BoolEquals` needs a JSON boolean. So a `Not*` operator matches a present value of
//!   another type: none of its elements hit an excluded value.
//! - **Arrays**, when the filter sets `enableAdvancedFilteringOnArrays`, are matched element
//!   by element: a positive operator matches when any element matches, a `Not*` operator
//!   when no element hits an excluded value (so an empty array passes every `Not*`).
//!   Otherwise an array is one value of another type: positive operators do not match it,
//!   `Not*` operators and `IsNotNull` do. Nested arrays are never flattened.
//! - **Strings** compare case-insensitively (Unicode lower-casing of both sides).
//! - **Numbers** compare as `f64`, so integers beyond 2^53 compare approximately. The
//!   catalog stores filters as JSON text, and serde_json reads a number of more than 15
//!   significant digits back to within one ulp unless its `float_roundtrip` feature is on.

use crate::api_error::InvalidField;
use crate::json::json_type;
use crate::routing::Routing;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// At most this many advanced filters per subscription.
pub(crate) const MAX_FILTERS: usize = 25;
/// At most this many filter values across all of a subscription's advanced filters
/// (a `[low, high]` range counts as one).
pub(crate) const MAX_VALUES: usize = 25;
/// At most this many characters in one string value.
pub(crate) const MAX_STRING_CHARS: usize = 512;
/// At most this many characters in a key.
pub(crate) const MAX_KEY_CHARS: usize = 256;
/// At most this many dotted segments in a key (`data.a.b` has three).
pub(crate) const MAX_KEY_DEPTH: usize = 10;

/// One advanced filter: where to look in the event, and what to test there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvancedFilter {
    key: String,
    operator: Operator,
}

/// An advanced filter's operator with its operands, one variant per Event Grid
/// `operatorType`. Lists are never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Operator {
    NumberIn(Vec<FilterNumber>),
    NumberNotIn(Vec<FilterNumber>),
    NumberLessThan(FilterNumber),
    NumberGreaterThan(FilterNumber),
    NumberLessThanOrEquals(FilterNumber),
    NumberGreaterThanOrEquals(FilterNumber),
    NumberInRange(Vec<NumberRange>),
    NumberNotInRange(Vec<NumberRange>),
    BoolEquals(bool),
    StringIn(Vec<String>),
    StringNotIn(Vec<String>),
    StringBeginsWith(Vec<String>),
    StringNotBeginsWith(Vec<String>),
    StringEndsWith(Vec<String>),
    StringNotEndsWith(Vec<String>),
    StringContains(Vec<String>),
    StringNotContains(Vec<String>),
    IsNullOrUndefined,
    IsNotNull,
}

/// A number taken from JSON, so never NaN or infinite (which makes it `Eq`).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub(crate) struct FilterNumber(f64);

impl Eq for FilterNumber {}

/// An inclusive range `[low, high]` with `low <= high`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NumberRange {
    low: FilterNumber,
    high: FilterNumber,
}

impl AdvancedFilter {
    /// Reads one element of `advancedFilters`. Errors name the field inside it
    /// (`values[2]`), to be placed with [`InvalidField::within`].
    pub fn from_json(value: &Value) -> Result<Self, InvalidField> {
        let Value::Object(fields) = value else {
            return Err(InvalidField::new(
                "",
                format!("must be an object with operatorType and key, got {}", json_type(value)),
            ));
        };
        if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(InvalidField::new(
                unknown.clone(),
                "not a field of an advanced filter (operatorType, key, value, values)",
            ));
        }
        let (name, parse) = operator_type(fields.get("operatorType"))?;
        let key = parse_key(fields.get("key"))?;
        let operator = parse(&Operands { fields, operator: name })?;
        Ok(Self { key, operator })
    }

    #[cfg(test)]
    fn key(&self) -> &str {
        &self.key
    }

    #[cfg(test)]
    fn operator(&self) -> &Operator {
        &self.operator
    }

    /// Whether the event passes this filter; `on_arrays` is the subscription's
    /// `enableAdvancedFilteringOnArrays`.
    pub fn matches(&self, event: &Routing<'_>, on_arrays: bool) -> bool {
        let Some(value) = resolve(event, &self.key) else {
            return self.operator.matches_undefined();
        };
        let elements = match (value.as_ref(), on_arrays) {
            (Value::Array(items), true) => items.as_slice(),
            (one, _) => std::slice::from_ref(one),
        };
        match &self.operator {
            Operator::IsNullOrUndefined => false,
            Operator::IsNotNull => true,
            op if op.is_exclusion() => !elements.iter().any(|e| op.hits(e)),
            op => elements.iter().any(|e| op.hits(e)),
        }
    }
}

/// Reads `advancedFilters` (`null` means none) and enforces the per-subscription
/// limits. Errors are located inside the list (`[3].values[2]`).
pub(crate) fn parse_list(value: &Value) -> Result<Vec<AdvancedFilter>, InvalidField> {
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => {
            return Err(InvalidField::new(
                "",
                format!("must be an array of advanced filters, got {}", json_type(other)),
            ));
        }
    };
    if items.len() > MAX_FILTERS {
        return Err(InvalidField::new(
            "",
            format!(
                "at most {MAX_FILTERS} advanced filters per subscription, got {}",
                items.len()
            ),
        ));
    }
    let mut total = 0;
    let mut filters = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("[{i}]");
        let filter = AdvancedFilter::from_json(item).map_err(|e| e.within(&at))?;
        let count = filter.operator.value_count();
        if total + count > MAX_VALUES {
            let field = filter.operator.operand_field(MAX_VALUES - total);
            return Err(InvalidField::new(
                format!("{at}.{field}"),
                format!("too many filter values: at most {MAX_VALUES} in total across all advanced filters"),
            ));
        }
        total += count;
        filters.push(filter);
    }
    Ok(filters)
}

impl Operator {
    /// The Event Grid `operatorType`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::NumberIn(_) => "NumberIn",
            Self::NumberNotIn(_) => "NumberNotIn",
            Self::NumberLessThan(_) => "NumberLessThan",
            Self::NumberGreaterThan(_) => "NumberGreaterThan",
            Self::NumberLessThanOrEquals(_) => "NumberLessThanOrEquals",
            Self::NumberGreaterThanOrEquals(_) => "NumberGreaterThanOrEquals",
            Self::NumberInRange(_) => "NumberInRange",
            Self::NumberNotInRange(_) => "NumberNotInRange",
            Self::BoolEquals(_) => "BoolEquals",
            Self::StringIn(_) => "StringIn",
            Self::StringNotIn(_) => "StringNotIn",
            Self::StringBeginsWith(_) => "StringBeginsWith",
            Self::StringNotBeginsWith(_) => "StringNotBeginsWith",
            Self::StringEndsWith(_) => "StringEndsWith",
            Self::StringNotEndsWith(_) => "StringNotEndsWith",
            Self::StringContains(_) => "StringContains",
            Self::StringNotContains(_) => "StringNotContains",
            Self::IsNullOrUndefined => "IsNullOrUndefined",
            Self::IsNotNull => "IsNotNull",
        }
    }

    /// `Not*` operators pass when no element hits one of their values.
    fn is_exclusion(&self) -> bool {
        matches!(
            self,
            Self::NumberNotIn(_)
                | Self::NumberNotInRange(_)
                | Self::StringNotIn(_)
                | Self::StringNotBeginsWith(_)
                | Self::StringNotEndsWith(_)
                | Self::StringNotContains(_)
        )
    }

    /// A missing or `null` key matches only these (Azure's documented rule).
    fn matches_undefined(&self) -> bool {
        matches!(
            self,
            Self::NumberNotIn(_) | Self::StringNotIn(_) | Self::IsNullOrUndefined
        )
    }

    /// Whether one scalar element hits this operator's values; for a `Not*` operator,
    /// whether it hits an excluded value. Elements of another type never hit.
    fn hits(&self, element: &Value) -> bool {
        match self {
            Self::NumberIn(ns) | Self::NumberNotIn(ns) => number(element).is_some_and(|x| ns.iter().any(|n| n.0 == x)),
            Self::NumberLessThan(n) => number(element).is_some_and(|x| x < n.0),
            Self::NumberGreaterThan(n) => number(element).is_some_and(|x| x > n.0),
            Self::NumberLessThanOrEquals(n) => number(element).is_some_and(|x| x <= n.0),
            Self::NumberGreaterThanOrEquals(n) => number(element).is_some_and(|x| x >= n.0),
            Self::NumberInRange(rs) | Self::NumberNotInRange(rs) => {
                number(element).is_some_and(|x| rs.iter().any(|r| r.contains(x)))
            }
            Self::BoolEquals(b) => element.as_bool() == Some(*b),
            Self::StringIn(ss) | Self::StringNotIn(ss) => text_hits(element, ss, |s, v| s == v),
            Self::StringBeginsWith(ss) | Self::StringNotBeginsWith(ss) => {
                text_hits(element, ss, |s, v| s.starts_with(v))
            }
            Self::StringEndsWith(ss) | Self::StringNotEndsWith(ss) => text_hits(element, ss, |s, v| s.ends_with(v)),
            Self::StringContains(ss) | Self::StringNotContains(ss) => text_hits(element, ss, |s, v| s.contains(v)),
            // Decided on presence alone, in `AdvancedFilter::matches`.
            Self::IsNullOrUndefined | Self::IsNotNull => false,
        }
    }

    /// How many values this operator counts towards [`MAX_VALUES`].
    fn value_count(&self) -> usize {
        match self {
            Self::NumberIn(ns) | Self::NumberNotIn(ns) => ns.len(),
            Self::NumberInRange(rs) | Self::NumberNotInRange(rs) => rs.len(),
            Self::StringIn(ss)
            | Self::StringNotIn(ss)
            | Self::StringBeginsWith(ss)
            | Self::StringNotBeginsWith(ss)
            | Self::StringEndsWith(ss)
            | Self::StringNotEndsWith(ss)
            | Self::StringContains(ss)
            | Self::StringNotContains(ss) => ss.len(),
            Self::NumberLessThan(_)
            | Self::NumberGreaterThan(_)
            | Self::NumberLessThanOrEquals(_)
            | Self::NumberGreaterThanOrEquals(_)
            | Self::BoolEquals(_) => 1,
            Self::IsNullOrUndefined | Self::IsNotNull => 0,
        }
    }

    /// Where the `index`-th value of this operator is written: `values[i]` or `value`.
    fn operand_field(&self, index: usize) -> String {
        if self.takes_list() {
            format!("values[{index}]")
        } else {
            "value".to_owned()
        }
    }

    fn takes_list(&self) -> bool {
        !matches!(
            self,
            Self::NumberLessThan(_)
                | Self::NumberGreaterThan(_)
                | Self::NumberLessThanOrEquals(_)
                | Self::NumberGreaterThanOrEquals(_)
                | Self::BoolEquals(_)
                | Self::IsNullOrUndefined
                | Self::IsNotNull
        )
    }
}

impl NumberRange {
    fn contains(&self, x: f64) -> bool {
        self.low.0 <= x && x <= self.high.0
    }
}

/// The event's value at `key`; `None` when it is missing or `null`.
fn resolve<'a>(event: &Routing<'a>, key: &str) -> Option<Cow<'a, Value>> {
    match event.lookup(key) {
        Some(Value::Null) => None,
        Some(found) => Some(Cow::Borrowed(found)),
        None => envelope_field(event, key).map(|s| Cow::Owned(Value::String(s.to_owned()))),
    }
}

/// The schema-neutral names for the event type and subject.
fn envelope_field<'a>(event: &Routing<'a>, key: &str) -> Option<&'a str> {
    if key.eq_ignore_ascii_case("eventType") || key.eq_ignore_ascii_case("type") {
        Some(event.event_type)
    } else if key.eq_ignore_ascii_case("subject") && !event.subject.is_empty() {
        Some(event.subject)
    } else {
        None
    }
}

fn number(element: &Value) -> Option<f64> {
    match element {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Whether a string element, compared case-insensitively, hits any of `values`.
fn text_hits(element: &Value, values: &[String], test: impl Fn(&str, &str) -> bool) -> bool {
    let Value::String(s) = element else {
        return false;
    };
    let s = s.to_lowercase();
    values.iter().any(|v| test(&s, &v.to_lowercase()))
}

// ---------------------------------------------------------------------------------------
// Parsing

const FIELDS: [&str; 4] = ["operatorType", "key", "value", "values"];

/// The fields of one filter object, and its operator's name for error messages.
struct Operands<'a> {
    fields: &'a Map<String, Value>,
    operator: &'static str,
}

type ParseOperator = fn(&Operands<'_>) -> Result<Operator, InvalidField>;

/// Every `operatorType` and how to read its operands.
const OPERATORS: [(&str, ParseOperator); 19] = [
    ("NumberIn", |o| o.list(FilterNumber::from_json).map(Operator::NumberIn)),
    ("NumberNotIn", |o| {
        o.list(FilterNumber::from_json).map(Operator::NumberNotIn)
    }),
    ("NumberLessThan", |o| {
        o.single(FilterNumber::from_json).map(Operator::NumberLessThan)
    }),
    ("NumberGreaterThan", |o| {
        o.single(FilterNumber::from_json).map(Operator::NumberGreaterThan)
    }),
    ("NumberLessThanOrEquals", |o| {
        o.single(FilterNumber::from_json).map(Operator::NumberLessThanOrEquals)
    }),
    ("NumberGreaterThanOrEquals", |o| {
        o.single(FilterNumber::from_json)
            .map(Operator::NumberGreaterThanOrEquals)
    }),
    ("NumberInRange", |o| {
        o.list(NumberRange::from_json).map(Operator::NumberInRange)
    }),
    ("NumberNotInRange", |o| {
        o.list(NumberRange::from_json).map(Operator::NumberNotInRange)
    }),
    ("BoolEquals", |o| o.single(boolean).map(Operator::BoolEquals)),
    ("StringIn", |o| o.list(string).map(Operator::StringIn)),
    ("StringNotIn", |o| o.list(string).map(Operator::StringNotIn)),
    ("StringBeginsWith", |o| o.list(string).map(Operator::StringBeginsWith)),
    ("StringNotBeginsWith", |o| {
        o.list(string).map(Operator::StringNotBeginsWith)
    }),
    ("StringEndsWith", |o| o.list(string).map(Operator::StringEndsWith)),
    ("StringNotEndsWith", |o| o.list(string).map(Operator::StringNotEndsWith)),
    ("StringContains", |o| o.list(string).map(Operator::StringContains)),
    ("StringNotContains", |o| o.list(string).map(Operator::StringNotContains)),
    ("IsNullOrUndefined", |o| {
        o.nothing().map(|()| Operator::IsNullOrUndefined)
    }),
    ("IsNotNull", |o| o.nothing().map(|()| Operator::IsNotNull)),
];

fn operator_type(value: Option<&Value>) -> Result<(&'static str, ParseOperator), InvalidField> {
    let field = "operatorType";
    let name = match value {
        Some(Value::String(name)) => name,
        None | Some(Value::Null) => return Err(InvalidField::new(field, format!("required; {}", one_of()))),
        Some(other) => {
            return Err(InvalidField::new(
                field,
                format!("must be a string, got {}", json_type(other)),
            ));
        }
    };
    OPERATORS
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(name))
        .copied()
        .ok_or_else(|| InvalidField::new(field, format!("unknown operator {name:?}; {}", one_of())))
}

fn one_of() -> String {
    let names: Vec<&str> = OPERATORS.iter().map(|(name, _)| *name).collect();
    format!("must be one of {}", names.join(", "))
}

fn parse_key(value: Option<&Value>) -> Result<String, InvalidField> {
    let field = "key";
    let key = match value {
        Some(Value::String(key)) => key,
        None | Some(Value::Null) => {
            return Err(InvalidField::new(
                field,
                "required: the event field to test, such as data.color or subject",
            ));
        }
        Some(other) => {
            return Err(InvalidField::new(
                field,
                format!("must be a string such as data.color, got {}", json_type(other)),
            ));
        }
    };
    let problem = if key.is_empty() {
        "must not be empty".to_owned()
    } else if key.chars().count() > MAX_KEY_CHARS {
        format!("must be at most {MAX_KEY_CHARS} characters")
    } else if key.split('.').any(str::is_empty) {
        format!("{key:?} has an empty segment; write a dotted path such as data.a.b")
    } else if key.split('.').count() > MAX_KEY_DEPTH {
        format!("{key:?} is nested too deeply; at most {MAX_KEY_DEPTH} dotted segments")
    } else {
        return Ok(key.clone());
    };
    Err(InvalidField::new(field, problem))
}

impl Operands<'_> {
    /// The operand of an operator that takes `values`: a non-empty array.
    fn list<T>(&self, parse: fn(&Value) -> Result<T, InvalidField>) -> Result<Vec<T>, InvalidField> {
        self.refuse("value", "takes a list in \"values\", not \"value\"")?;
        let items = match self.fields.get("values") {
            Some(Value::Array(items)) if !items.is_empty() => items,
            Some(Value::Array(_)) => return Err(InvalidField::new("values", "must list at least one value")),
            None | Some(Value::Null) => {
                return Err(InvalidField::new(
                    "values",
                    format!("required: {} takes a list of values", self.operator),
                ));
            }
            Some(other) => {
                return Err(InvalidField::new(
                    "values",
                    format!("must be an array, got {}", json_type(other)),
                ));
            }
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| parse(item).map_err(|e| e.within(&format!("values[{i}]"))))
            .collect()
    }

    /// The operand of an operator that takes one `value`.
    fn single<T>(&self, parse: fn(&Value) -> Result<T, InvalidField>) -> Result<T, InvalidField> {
        self.refuse("values", "takes a single \"value\", not \"values\"")?;
        match self.fields.get("value") {
            None | Some(Value::Null) => Err(InvalidField::new(
                "value",
                format!("required: {} compares with one value", self.operator),
            )),
            Some(value) => parse(value).map_err(|e| e.within("value")),
        }
    }

    /// Operators that test presence take no operand.
    fn nothing(&self) -> Result<(), InvalidField> {
        self.refuse("value", "takes no value")?;
        self.refuse("values", "takes no values")
    }

    /// A `null` for the field an operator does not take is tolerated: clients echo it.
    fn refuse(&self, field: &str, problem: &str) -> Result<(), InvalidField> {
        match self.fields.get(field) {
            None | Some(Value::Null) => Ok(()),
            Some(_) => Err(InvalidField::new(field, format!("{} {problem}", self.operator))),
        }
    }
}

impl FilterNumber {
    fn from_json(value: &Value) -> Result<Self, InvalidField> {
        match value {
            Value::Number(n) => n
                .as_f64()
                .filter(|x| x.is_finite())
                .map(Self)
                .ok_or_else(|| InvalidField::new("", format!("{n} is not representable as a number"))),
            other => Err(InvalidField::new(
                "",
                format!("must be a number, got {}", json_type(other)),
            )),
        }
    }
}

impl NumberRange {
    fn from_json(value: &Value) -> Result<Self, InvalidField> {
        let pair = match value {
            Value::Array(pair) if pair.len() == 2 => pair,
            _ => return Err(InvalidField::new("", "must be a range [low, high] of two numbers")),
        };
        let low = FilterNumber::from_json(&pair[0]).map_err(|e| e.within("[0]"))?;
        let high = FilterNumber::from_json(&pair[1]).map_err(|e| e.within("[1]"))?;
        if low > high {
            return Err(InvalidField::new(
                "",
                format!("low end {} is above high end {}", low.0, high.0),
            ));
        }
        Ok(Self { low, high })
    }
}

fn boolean(value: &Value) -> Result<bool, InvalidField> {
    value
        .as_bool()
        .ok_or_else(|| InvalidField::new("", format!("must be a boolean, got {}", json_type(value))))
}

fn string(value: &Value) -> Result<String, InvalidField> {
    match value {
        Value::String(s) if s.chars().count() > MAX_STRING_CHARS => Err(InvalidField::new(
            "",
            format!("must be at most {MAX_STRING_CHARS} characters"),
        )),
        Value::String(s) => Ok(s.clone()),
        other => Err(InvalidField::new(
            "",
            format!("must be a string, got {}", json_type(other)),
        )),
    }
}

// ---------------------------------------------------------------------------------------
// Serde: Event Grid's layout out, and the same validating parser in.

impl Serialize for AdvancedFilter {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let takes_operand = !matches!(self.operator, Operator::IsNullOrUndefined | Operator::IsNotNull);
        let mut map = serializer.serialize_map(Some(if takes_operand { 3 } else { 2 }))?;
        map.serialize_entry("operatorType", self.operator.name())?;
        map.serialize_entry("key", &self.key)?;
        match &self.operator {
            Operator::NumberIn(ns) | Operator::NumberNotIn(ns) => map.serialize_entry("values", ns)?,
            Operator::NumberLessThan(n)
            | Operator::NumberGreaterThan(n)
            | Operator::NumberLessThanOrEquals(n)
            | Operator::NumberGreaterThanOrEquals(n) => map.serialize_entry("value", n)?,
            Operator::NumberInRange(rs) | Operator::NumberNotInRange(rs) => map.serialize_entry("values", rs)?,
            Operator::BoolEquals(b) => map.serialize_entry("value", b)?,
            Operator::StringIn(ss)
            | Operator::StringNotIn(ss)
            | Operator::StringBeginsWith(ss)
            | Operator::StringNotBeginsWith(ss)
            | Operator::StringEndsWith(ss)
            | Operator::StringNotEndsWith(ss)
            | Operator::StringContains(ss)
            | Operator::StringNotContains(ss) => map.serialize_entry("values", ss)?,
            Operator::IsNullOrUndefined | Operator::IsNotNull => {}
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for AdvancedFilter {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_json(&value).map_err(serde::de::Error::custom)
    }
}

/// Largest magnitude below which every integer is exact in an `f64`.
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

impl Serialize for FilterNumber {
    /// Whole numbers are written as integers, so `[1, 2]` reads back as written.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.fract() == 0.0 && self.0.abs() <= EXACT_INTEGER_LIMIT {
            // Whole and within ±2^53, so the cast is exact.
            serializer.serialize_i64(self.0 as i64)
        } else {
            serializer.serialize_f64(self.0)
        }
    }
}

impl Serialize for NumberRange {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        [self.low, self.high].serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A filter on `data.x`: an array operand is `values`, `null` is none, else `value`.
    fn on_x(op: &str, operand: Value) -> Value {
        match operand {
            Value::Null => json!({"operatorType": op, "key": "data.x"}),
            Value::Array(_) => json!({"operatorType": op, "key": "data.x", "values": operand}),
            _ => json!({"operatorType": op, "key": "data.x", "value": operand}),
        }
    }

    fn parse(filter: &Value) -> AdvancedFilter {
        AdvancedFilter::from_json(filter).unwrap()
    }

    /// Evaluates `filter` against an Event Grid event whose `data` is `data`.
    fn eval(filter: &Value, data: Option<Value>, on_arrays: bool) -> bool {
        let mut event = json!({"id": "1", "topic": "/topics/t", "subject": "/orders/1", "eventType": "Order.Created"});
        if let Some(data) = data {
            event["data"] = data;
        }
        let fields = event.as_object().unwrap();
        let routing = Routing {
            event_type: "Order.Created",
            subject: "/orders/1",
            fields,
        };
        parse(filter).matches(&routing, on_arrays)
    }

    /// Whether `op operand` passes an event whose `data.x` is `x` (arrays enabled).
    fn passes(op: &str, operand: Value, x: Value) -> bool {
        eval(&on_x(op, operand), Some(json!({ "x": x })), true)
    }

    /// One sample operand for every operator.
    fn every_operator() -> Vec<(&'static str, Value)> {
        vec![
            ("NumberIn", json!([1])),
            ("NumberNotIn", json!([1])),
            ("NumberLessThan", json!(1)),
            ("NumberGreaterThan", json!(1)),
            ("NumberLessThanOrEquals", json!(1)),
            ("NumberGreaterThanOrEquals", json!(1)),
            ("NumberInRange", json!([[1, 2]])),
            ("NumberNotInRange", json!([[1, 2]])),
            ("BoolEquals", json!(true)),
            ("StringIn", json!(["a"])),
            ("StringNotIn", json!(["a"])),
            ("StringBeginsWith", json!(["a"])),
            ("StringNotBeginsWith", json!(["a"])),
            ("StringEndsWith", json!(["a"])),
            ("StringNotEndsWith", json!(["a"])),
            ("StringContains", json!(["a"])),
            ("StringNotContains", json!(["a"])),
            ("IsNullOrUndefined", Value::Null),
            ("IsNotNull", Value::Null),
        ]
    }

    #[test]
    fn every_operator_tests_what_its_name_says() {
        let cases = [
            ("NumberIn", json!([1, 2.5]), json!(1), true),
            ("NumberIn", json!([1, 2.5]), json!(2.5), true),
            ("NumberIn", json!([1, 2.5]), json!(1.0), true),
            ("NumberIn", json!([1, 2.5]), json!(3), false),
            ("NumberNotIn", json!([1, 2]), json!(1), false),
            ("NumberNotIn", json!([1, 2]), json!(3), true),
            ("NumberLessThan", json!(5), json!(4.9), true),
            ("NumberLessThan", json!(5), json!(5), false),
            ("NumberLessThan", json!(5), json!(-7), true),
            ("NumberGreaterThan", json!(5), json!(6), true),
            ("NumberGreaterThan", json!(5), json!(5), false),
            ("NumberLessThanOrEquals", json!(5), json!(5), true),
            ("NumberLessThanOrEquals", json!(5), json!(5.01), false),
            ("NumberGreaterThanOrEquals", json!(5), json!(5), true),
            ("NumberGreaterThanOrEquals", json!(5), json!(4.99), false),
            ("NumberInRange", json!([[1, 5], [10, 20]]), json!(1), true),
            ("NumberInRange", json!([[1, 5], [10, 20]]), json!(20), true),
            ("NumberInRange", json!([[1, 5], [10, 20]]), json!(7), false),
            ("NumberInRange", json!([[1, 5], [10, 20]]), json!(20.5), false),
            ("NumberNotInRange", json!([[1, 5], [10, 20]]), json!(7), true),
            ("NumberNotInRange", json!([[1, 5], [10, 20]]), json!(5), false),
            ("BoolEquals", json!(true), json!(true), true),
            ("BoolEquals", json!(true), json!(false), false),
            ("BoolEquals", json!(false), json!(false), true),
            ("StringIn", json!(["red", "blue"]), json!("blue"), true),
            ("StringIn", json!(["red", "blue"]), json!("reddish"), false),
            ("StringNotIn", json!(["red", "blue"]), json!("blue"), false),
            ("StringNotIn", json!(["red", "blue"]), json!("green"), true),
            ("StringBeginsWith", json!(["event", "grid"]), json!("grid-1"), true),
            ("StringBeginsWith", json!(["event", "grid"]), json!("my grid"), false),
            ("StringNotBeginsWith", json!(["event"]), json!("events"), false),
            ("StringNotBeginsWith", json!(["event"]), json!("an event"), true),
            ("StringEndsWith", json!([".jpg", ".png"]), json!("cat.png"), true),
            ("StringEndsWith", json!([".jpg", ".png"]), json!("cat.gif"), false),
            ("StringNotEndsWith", json!([".jpg"]), json!("cat.jpg"), false),
            ("StringNotEndsWith", json!([".jpg"]), json!("cat.gif"), true),
            ("StringContains", json!(["azure", "grid"]), json!("event grid!"), true),
            ("StringContains", json!(["azure", "grid"]), json!("aws"), false),
            ("StringNotContains", json!(["contoso"]), json!("www.contoso.com"), false),
            ("StringNotContains", json!(["contoso"]), json!("fabrikam"), true),
            ("IsNullOrUndefined", Value::Null, json!(0), false),
            ("IsNotNull", Value::Null, json!(0), true),
            ("IsNotNull", Value::Null, json!(""), true),
            ("IsNotNull", Value::Null, json!({}), true),
        ];
        for (op, operand, x, expected) in cases {
            assert_eq!(
                passes(op, operand.clone(), x.clone()),
                expected,
                "{op} {operand} on {x}"
            );
        }
    }

    #[test]
    fn strings_compare_case_insensitively() {
        assert!(passes("StringIn", json!(["Red"]), json!("rED")));
        assert!(!passes("StringNotIn", json!(["Red"]), json!("RED")));
        assert!(passes("StringBeginsWith", json!(["/Blobs/"]), json!("/blobs/cat")));
        assert!(passes("StringEndsWith", json!([".JPG"]), json!("cat.jpg")));
        assert!(passes("StringContains", json!(["ÉVÉNEMENT"]), json!("un événement")));
        assert!(!passes("StringNotContains", json!(["Grid"]), json!("EVENTGRID")));
    }

    #[test]
    fn a_missing_key_matches_only_not_in_and_is_null_or_undefined() {
        let expected = ["NumberNotIn", "StringNotIn", "IsNullOrUndefined"];
        let events = [
            Some(json!({})),
            Some(json!({"y": 1})),
            Some(json!({"x": null})),
            Some(json!("data is a string")),
            None,
        ];
        for (op, operand) in every_operator() {
            for data in &events {
                for on_arrays in [false, true] {
                    let matched = eval(&on_x(op, operand.clone()), data.clone(), on_arrays);
                    assert_eq!(matched, expected.contains(&op), "{op} on data {data:?}");
                }
            }
        }
    }

    #[test]
    fn values_of_another_type_are_ignored() {
        // Each would hit the sample operand if it were converted or flattened, so positive
        // operators must not match it and Not* operators must.
        let others = |op: &str| match op {
            op if op.starts_with("Number") => vec![json!("1"), json!(true), json!({"x": 1}), json!([[1]])],
            op if op.starts_with("String") => vec![json!(1), json!(true), json!({"a": "a"}), json!([["a"]])],
            "BoolEquals" => vec![json!("true"), json!(1), json!({"b": true}), json!([[true]])],
            _ => vec![],
        };
        for (op, operand) in every_operator() {
            for x in others(op) {
                assert_eq!(
                    passes(op, operand.clone(), x.clone()),
                    op.contains("Not"),
                    "{op} on {x}"
                );
            }
        }
    }

    #[test]
    fn arrays_match_element_wise_when_enabled() {
        let x = || Some(json!({"x": [1, "Two", 3]}));
        let cases = [
            ("NumberIn", json!([3]), true),
            ("NumberIn", json!([2]), false),
            ("NumberNotIn", json!([3]), false),
            ("NumberNotIn", json!([2]), true),
            ("NumberGreaterThan", json!(2), true),
            ("NumberLessThan", json!(1), false),
            ("NumberInRange", json!([[2, 5]]), true),
            ("NumberNotInRange", json!([[2, 5]]), false),
            ("NumberNotInRange", json!([[4, 5]]), true),
            ("StringIn", json!(["two"]), true),
            ("StringNotIn", json!(["two"]), false),
            ("StringContains", json!(["w"]), true),
            ("StringNotContains", json!(["w"]), false),
            ("StringNotBeginsWith", json!(["x"]), true),
            ("IsNotNull", Value::Null, true),
            ("IsNullOrUndefined", Value::Null, false),
        ];
        for (op, operand, expected) in cases {
            assert_eq!(eval(&on_x(op, operand.clone()), x(), true), expected, "{op} {operand}");
        }
    }

    #[test]
    fn an_empty_array_passes_only_exclusions_and_is_not_null() {
        for (op, operand) in every_operator() {
            let expected = op.contains("Not");
            let matched = eval(&on_x(op, operand), Some(json!({"x": []})), true);
            assert_eq!(matched, expected, "{op}");
        }
    }

    #[test]
    fn arrays_are_opaque_values_when_not_enabled() {
        let data = || Some(json!({"x": [1, "a", true]}));
        for (op, operand) in every_operator() {
            let expected = op.contains("Not");
            assert_eq!(eval(&on_x(op, operand), data(), false), expected, "{op}");
        }
    }

    #[test]
    fn keys_reach_nested_data_and_envelope_fields() {
        let data = Some(json!({"order": {"lines": {"count": 3, "sku": "AB-1"}}}));
        let f = |op: &str, key: &str, values: Value| json!({"operatorType": op, "key": key, "values": values});
        assert!(eval(
            &f("NumberIn", "data.order.lines.count", json!([3])),
            data.clone(),
            false
        ));
        assert!(eval(
            &f("StringBeginsWith", "data.order.lines.sku", json!(["ab-"])),
            data.clone(),
            false
        ));
        assert!(!eval(&f("StringIn", "data.order", json!(["x"])), data.clone(), false));
        assert!(eval(&f("StringIn", "id", json!(["1"])), data.clone(), false));
        assert!(eval(&f("StringIn", "topic", json!(["/TOPICS/T"])), data.clone(), false));
        assert!(eval(
            &f("StringIn", "eventType", json!(["order.created"])),
            data.clone(),
            false
        ));
        assert!(eval(
            &f("StringIn", "type", json!(["order.created"])),
            data.clone(),
            false
        ));
        assert!(eval(
            &f("StringBeginsWith", "Subject", json!(["/orders/"])),
            data.clone(),
            false
        ));
        assert!(!eval(
            &f("StringIn", "Data.order.lines.sku", json!(["ab-1"])),
            data,
            false
        ));
    }

    #[test]
    fn cloud_events_filter_on_type_subject_and_extensions() {
        let event = json!({
            "id": "1", "source": "/shop", "specversion": "1.0", "type": "com.shop.order.created",
            "myext": "Blue", "data": {"total": 12.5}
        });
        let fields = event.as_object().unwrap();
        let routing = Routing {
            event_type: "com.shop.order.created",
            subject: "",
            fields,
        };
        let matches = |filter: Value| parse(&filter).matches(&routing, false);
        assert!(matches(
            json!({"operatorType": "StringIn", "key": "type", "values": ["COM.SHOP.ORDER.CREATED"]})
        ));
        assert!(matches(
            json!({"operatorType": "StringEndsWith", "key": "eventType", "values": [".created"]})
        ));
        assert!(matches(
            json!({"operatorType": "StringIn", "key": "myext", "values": ["blue"]})
        ));
        assert!(matches(
            json!({"operatorType": "NumberGreaterThan", "key": "data.total", "value": 10})
        ));
        assert!(matches(
            json!({"operatorType": "StringIn", "key": "source", "values": ["/shop"]})
        ));
        assert!(matches(json!({"operatorType": "IsNullOrUndefined", "key": "subject"})));
        assert!(!matches(
            json!({"operatorType": "StringNotBeginsWith", "key": "subject", "values": ["/x"]})
        ));
    }

    fn error(filter: Value) -> InvalidField {
        AdvancedFilter::from_json(&filter).unwrap_err()
    }

    #[test]
    fn refuses_malformed_filters_saying_where() {
        let cases = [
            (json!("NumberIn"), "", "must be an object"),
            (
                json!({"key": "data.x", "values": [1]}),
                "operatorType",
                "required; must be one of NumberIn,",
            ),
            (
                json!({"operatorType": 5, "key": "data.x"}),
                "operatorType",
                "must be a string, got a number",
            ),
            (
                on_x("NumberIs", json!([1])),
                "operatorType",
                "unknown operator \"NumberIs\"",
            ),
            (json!({"operatorType": "IsNotNull"}), "key", "required"),
            (
                json!({"operatorType": "IsNotNull", "key": ""}),
                "key",
                "must not be empty",
            ),
            (
                json!({"operatorType": "IsNotNull", "key": 1}),
                "key",
                "must be a string",
            ),
            (
                json!({"operatorType": "IsNotNull", "key": "data..x"}),
                "key",
                "empty segment",
            ),
            (
                json!({"operatorType": "IsNotNull", "key": "data.x."}),
                "key",
                "empty segment",
            ),
            (
                json!({"operatorType": "IsNotNull", "key": "a.b.c.d.e.f.g.h.i.j.k"}),
                "key",
                "at most 10",
            ),
            (
                json!({"operatorType": "IsNotNull", "key": "k".repeat(257)}),
                "key",
                "at most 256",
            ),
            (
                json!({"operatorType": "IsNotNull", "key": "x", "Operator": 1}),
                "Operator",
                "not a field",
            ),
            (
                on_x("NumberIn", json!(1)),
                "value",
                "NumberIn takes a list in \"values\"",
            ),
            (
                on_x("NumberIn", Value::Null),
                "values",
                "required: NumberIn takes a list",
            ),
            (on_x("NumberIn", json!([])), "values", "at least one value"),
            (on_x("StringIn", json!({"a": 1})), "value", "StringIn takes a list"),
            (
                json!({"operatorType": "StringIn", "key": "x", "values": "a"}),
                "values",
                "must be an array",
            ),
            (
                on_x("NumberIn", json!([1, "2"])),
                "values[1]",
                "must be a number, got a string",
            ),
            (on_x("NumberLessThan", json!([1])), "values", "takes a single \"value\""),
            (
                on_x("NumberLessThan", Value::Null),
                "value",
                "required: NumberLessThan compares with one value",
            ),
            (on_x("NumberLessThan", json!("5")), "value", "must be a number"),
            (
                on_x("BoolEquals", json!("true")),
                "value",
                "must be a boolean, got a string",
            ),
            (
                on_x("NumberInRange", json!([[1, 5], [3]])),
                "values[1]",
                "range [low, high]",
            ),
            (on_x("NumberInRange", json!([1, 5])), "values[0]", "range [low, high]"),
            (
                on_x("NumberNotInRange", json!([[1, "x"]])),
                "values[0][1]",
                "must be a number",
            ),
            (
                on_x("NumberInRange", json!([[5, 1]])),
                "values[0]",
                "low end 5 is above high end 1",
            ),
            (
                on_x("StringContains", json!(["a", "b".repeat(513)])),
                "values[1]",
                "at most 512 characters",
            ),
            (
                on_x("StringContains", json!([null])),
                "values[0]",
                "must be a string, got null",
            ),
            (on_x("IsNotNull", json!(1)), "value", "IsNotNull takes no value"),
            (
                on_x("IsNullOrUndefined", json!(["a"])),
                "values",
                "IsNullOrUndefined takes no values",
            ),
        ];
        for (filter, field, problem) in cases {
            let err = error(filter.clone());
            assert_eq!(err.field, field, "{filter}: {err}");
            assert!(err.problem.contains(problem), "{filter}: {err}");
        }
    }

    #[test]
    fn unknown_operator_error_names_every_valid_one() {
        let err = error(on_x("Equals", json!([1])));
        for (name, _) in every_operator() {
            assert!(err.problem.contains(name), "{name} missing from {err}");
        }
    }

    #[test]
    fn accepts_edge_values_and_tolerates_nulls_and_operator_case() {
        assert!(AdvancedFilter::from_json(&on_x("StringIn", json!(["b".repeat(512)]))).is_ok());
        assert!(AdvancedFilter::from_json(&on_x("NumberInRange", json!([[3, 3]]))).is_ok());
        let key = ["k"; MAX_KEY_DEPTH].join(".");
        assert!(AdvancedFilter::from_json(&json!({"operatorType": "IsNotNull", "key": key})).is_ok());
        let f = parse(&json!({"operatorType": "numberlessthan", "key": "data.x", "value": 1, "values": null}));
        assert_eq!(f.operator(), &Operator::NumberLessThan(FilterNumber(1.0)));
        assert_eq!(f.key(), "data.x");
    }

    fn list_error(filters: Value) -> InvalidField {
        parse_list(&filters).unwrap_err()
    }

    #[test]
    fn list_limits_count_filters_and_values_across_filters() {
        let one = || on_x("IsNotNull", Value::Null);
        assert_eq!(parse_list(&Value::Null).unwrap(), vec![]);
        assert_eq!(
            parse_list(&Value::Array(vec![one(); MAX_FILTERS])).unwrap().len(),
            MAX_FILTERS
        );
        let err = list_error(Value::Array(vec![one(); MAX_FILTERS + 1]));
        assert_eq!(
            (err.field.as_str(), err.problem.as_str()),
            ("", "at most 25 advanced filters per subscription, got 26")
        );

        let ten = || on_x("NumberIn", json!((0..10).collect::<Vec<_>>()));
        let five = on_x("StringIn", json!(["a", "b", "c", "d", "e"]));
        assert!(parse_list(&json!([ten(), ten(), five])).is_ok());
        let err = list_error(json!([ten(), ten(), one(), ten()]));
        assert_eq!(err.field, "[3].values[5]");
        assert!(err.problem.contains("at most 25 in total"), "{err}");
        let err = list_error(json!([ten(), ten(), five, on_x("BoolEquals", json!(true))]));
        assert_eq!(err.field, "[3].value");
        let ranges = on_x("NumberInRange", json!(vec![[1, 2]; 25]));
        assert!(
            parse_list(&json!([ranges, one()])).is_ok(),
            "a range counts as one value"
        );

        let err = list_error(json!([one(), on_x("NumberIn", json!(["x"]))]));
        assert_eq!(err.field, "[1].values[0]");
        let err = list_error(json!({"operatorType": "IsNotNull"}));
        assert!(err.problem.contains("must be an array"), "{err}");
    }

    #[test]
    fn serializes_in_event_grid_layout() {
        let filters = parse_list(&json!([
            {"operatorType": "NumberIn", "key": "data.x", "values": [1, 2]},
            {"operatorType": "NumberLessThan", "key": "data.n", "value": 5},
            {"operatorType": "NumberInRange", "key": "data.n", "values": [[1, 5], [10.5, 20]]},
            {"operatorType": "IsNullOrUndefined", "key": "data.y"},
            {"operatorType": "BoolEquals", "key": "data.b", "value": false},
            {"operatorType": "StringNotContains", "key": "subject", "values": ["Tmp"]},
            {"operatorType": "NumberGreaterThan", "key": "data.z", "value": 1.0},
            {"operatorType": "NumberNotIn", "key": "data.z", "values": [-0.25, 1e20]}
        ]))
        .unwrap();
        assert_eq!(
            serde_json::to_value(&filters).unwrap(),
            json!([
                {"operatorType": "NumberIn", "key": "data.x", "values": [1, 2]},
                {"operatorType": "NumberLessThan", "key": "data.n", "value": 5},
                {"operatorType": "NumberInRange", "key": "data.n", "values": [[1, 5], [10.5, 20]]},
                {"operatorType": "IsNullOrUndefined", "key": "data.y"},
                {"operatorType": "BoolEquals", "key": "data.b", "value": false},
                {"operatorType": "StringNotContains", "key": "subject", "values": ["Tmp"]},
                {"operatorType": "NumberGreaterThan", "key": "data.z", "value": 1},
                {"operatorType": "NumberNotIn", "key": "data.z", "values": [-0.25, 1e20]}
            ])
        );
        let stored = serde_json::to_string(&filters[0]).unwrap();
        assert_eq!(stored, r#"{"operatorType":"NumberIn","key":"data.x","values":[1,2]}"#);
        let back: Vec<AdvancedFilter> = serde_json::from_str(&serde_json::to_string(&filters).unwrap()).unwrap();
        assert_eq!(back, filters);
    }

    #[test]
    fn the_stored_form_is_validated_like_input() {
        let err = serde_json::from_str::<AdvancedFilter>(
            r#"{"operatorType":"NumberInRange","key":"data.n","values":[[5,1]]}"#,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("values[0]: low end 5 is above high end 1"),
            "{err}"
        );
    }

    // --- properties ------------------------------------------------------------------

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-20i64..20).prop_map(Value::from),
            (-20.0f64..20.0).prop_map(Value::from),
            "[a-cA-C]{0,3}".prop_map(Value::from),
        ]
    }

    /// What can sit at `data.x`: nothing, a scalar, or an array of scalars.
    fn event_value() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            Just(None),
            scalar().prop_map(Some),
            proptest::collection::vec(scalar(), 0..4).prop_map(|items| Some(Value::Array(items))),
        ]
    }

    fn data_with(x: &Option<Value>) -> Option<Value> {
        Some(x.as_ref().map_or_else(|| json!({}), |x| json!({ "x": x })))
    }

    proptest! {
        #[test]
        fn number_in_and_not_in_are_complements_on_present_numbers(
            x in prop_oneof![(-20i64..20).prop_map(Value::from), proptest::collection::vec(-20i64..20, 0..4).prop_map(Value::from)],
            values in proptest::collection::vec(-20i64..20, 1..6),
        ) {
            let data = Some(json!({ "x": x }));
            let is_in = eval(&on_x("NumberIn", json!(values)), data.clone(), true);
            let not_in = eval(&on_x("NumberNotIn", json!(values)), data, true);
            prop_assert_ne!(is_in, not_in);
        }

        #[test]
        fn each_exclusion_is_the_complement_of_its_operator_wherever_the_key_is_defined(
            x in event_value(),
            on_arrays in any::<bool>(),
            strings in proptest::collection::vec("[a-cA-C]{0,2}", 1..4),
            (low, high) in (-20.0f64..20.0, 0.0f64..10.0).prop_map(|(low, width)| (low, low + width)),
        ) {
            let pairs = [
                ("NumberIn", "NumberNotIn", json!([low, high])),
                ("NumberInRange", "NumberNotInRange", json!([[low, high]])),
                ("StringIn", "StringNotIn", json!(strings)),
                ("StringBeginsWith", "StringNotBeginsWith", json!(strings)),
                ("StringEndsWith", "StringNotEndsWith", json!(strings)),
                ("StringContains", "StringNotContains", json!(strings)),
                ("IsNotNull", "IsNullOrUndefined", Value::Null),
            ];
            let defined = x.as_ref().is_some_and(|x| !x.is_null());
            for (positive, exclusion, operand) in pairs {
                let p = eval(&on_x(positive, operand.clone()), data_with(&x), on_arrays);
                let n = eval(&on_x(exclusion, operand), data_with(&x), on_arrays);
                if defined || matches!(exclusion, "NumberNotIn" | "StringNotIn" | "IsNullOrUndefined") {
                    prop_assert_ne!(p, n, "{} / {} on {:?}", positive, exclusion, x);
                } else {
                    prop_assert!(!p && !n, "{} / {} on {:?}", positive, exclusion, x);
                }
            }
        }

        #[test]
        fn string_operators_ignore_case(
            x in "[a-zA-Z]{0,4}",
            values in proptest::collection::vec("[a-zA-Z]{0,3}", 1..4),
        ) {
            for op in ["StringIn", "StringNotIn", "StringBeginsWith", "StringEndsWith", "StringContains"] {
                let as_is = passes(op, json!(values), json!(x));
                prop_assert_eq!(as_is, passes(op, json!(values), json!(x.to_uppercase())), "{}", op);
                prop_assert_eq!(as_is, passes(op, json!(values), json!(x.to_lowercase())), "{}", op);
            }
        }

        #[test]
        fn a_range_is_the_two_inclusive_bounds(x in -30.0f64..30.0, low in -20.0f64..20.0, width in 0.0f64..10.0) {
            let high = low + width;
            let in_range = passes("NumberInRange", json!([[low, high]]), json!(x));
            let above = passes("NumberGreaterThanOrEquals", json!(low), json!(x));
            let below = passes("NumberLessThanOrEquals", json!(high), json!(x));
            prop_assert_eq!(in_range, above && below);
        }

        /// Exact through `to_value`; through text (the catalog) only for numbers of at most
        /// 15 significant digits, since serde_json parses longer ones to within one ulp
        /// unless its `float_roundtrip` feature is on.
        #[test]
        fn every_parsed_filter_reads_back_from_what_it_writes(
            index in 0usize..19,
            numbers in proptest::collection::vec((-10i64.pow(12)..10i64.pow(12)).prop_map(|n| n as f64 / 1000.0), 1..4),
            any_numbers in proptest::collection::vec(-1e6f64..1e6, 1..4),
            integers in proptest::collection::vec(any::<i32>(), 1..4),
            strings in proptest::collection::vec("\\PC{0,8}", 1..4),
            flag in any::<bool>(),
        ) {
            let (op, sample) = &every_operator()[index];
            let operand = match sample {
                Value::Array(items) if items.first().is_some_and(Value::is_array) => {
                    json!(numbers.iter().map(|n| [*n, n + 1.0]).collect::<Vec<_>>())
                }
                Value::Array(items) if items.first().is_some_and(Value::is_number) => {
                    json!(numbers.iter().copied().map(Value::from).chain(integers.iter().map(|i| json!(i))).collect::<Vec<_>>())
                }
                Value::Array(_) => json!(strings),
                Value::Bool(_) => json!(flag),
                Value::Number(_) => json!(numbers[0]),
                _ => Value::Null,
            };
            let filter = parse(&on_x(op, operand.clone()));
            let stored: AdvancedFilter = serde_json::from_str(&serde_json::to_string(&filter).unwrap()).unwrap();
            prop_assert_eq!(&stored, &filter);

            let any_operand = if operand.as_array().is_some_and(|items| items.iter().all(Value::is_number)) {
                json!(any_numbers)
            } else {
                operand
            };
            let filter = parse(&on_x(op, any_operand));
            let written = serde_json::to_value(&filter).unwrap();
            prop_assert_eq!(&parse(&written), &filter);
        }
    }
}
