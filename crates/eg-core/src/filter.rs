//! The subscription filter (spec §2): which events a subscription receives.
//!
//! Basic filter: `includedEventTypes` (null = all, compared case-insensitively),
//! `subjectBeginsWith` / `subjectEndsWith` (literal, no wildcards) under
//! `isSubjectCaseSensitive`.

use crate::api_error::InvalidField;
use crate::routing::Routing;
use serde::{Deserialize, Serialize};
use serde_json::Value;

const MAX_SUBJECT_FILTER_CHARS: usize = 1024;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_event_types: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject_begins_with: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject_ends_with: String,
    #[serde(default)]
    pub is_subject_case_sensitive: bool,
}

impl EventFilter {
    /// Reads the `filter` object of a subscription resource.
    pub fn from_json(value: &Value) -> Result<Self, InvalidField> {
        let Value::Object(fields) = value else {
            return Err(InvalidField::new("", "must be an object"));
        };
        let mut filter = EventFilter::default();
        for (key, v) in fields {
            match key.as_str() {
                "includedEventTypes" => filter.included_event_types = event_types(v)?,
                "subjectBeginsWith" => filter.subject_begins_with = subject_affix(key, v)?,
                "subjectEndsWith" => filter.subject_ends_with = subject_affix(key, v)?,
                "isSubjectCaseSensitive" => {
                    filter.is_subject_case_sensitive = match v {
                        Value::Null => false,
                        Value::Bool(b) => *b,
                        _ => return Err(InvalidField::new(key.clone(), "must be a boolean")),
                    }
                }
                "advancedFilters" | "enableAdvancedFilteringOnArrays" => {
                    if !is_empty(v) {
                        return Err(InvalidField::new(
                            key.clone(),
                            "advanced filters are not supported by this version of eg",
                        ));
                    }
                }
                other => {
                    return Err(InvalidField::new(other, "not a known filter field"));
                }
            }
        }
        Ok(filter)
    }

    pub fn matches(&self, event: &Routing<'_>) -> bool {
        self.matches_type(&event.event_type) && self.matches_subject(&event.subject)
    }

    fn matches_type(&self, event_type: &str) -> bool {
        match &self.included_event_types {
            None => true,
            Some(types) => types.iter().any(|t| t.eq_ignore_ascii_case(event_type)),
        }
    }

    fn matches_subject(&self, subject: &str) -> bool {
        if self.is_subject_case_sensitive {
            subject.starts_with(&self.subject_begins_with) && subject.ends_with(&self.subject_ends_with)
        } else {
            let subject = subject.to_lowercase();
            subject.starts_with(&self.subject_begins_with.to_lowercase())
                && subject.ends_with(&self.subject_ends_with.to_lowercase())
        }
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

fn event_types(v: &Value) -> Result<Option<Vec<String>>, InvalidField> {
    let field = "includedEventTypes";
    match v {
        Value::Null => Ok(None),
        Value::Array(items) => {
            let types = items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(s) if !s.is_empty() => Ok(s.clone()),
                    _ => Err(InvalidField::new(format!("{field}[{i}]"), "must be a non-empty string")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            if types.is_empty() {
                return Err(InvalidField::new(
                    field,
                    "must be null (all types) or list at least one type",
                ));
            }
            Ok(Some(types))
        }
        _ => Err(InvalidField::new(field, "must be an array of strings or null")),
    }
}

fn subject_affix(field: &str, v: &Value) -> Result<String, InvalidField> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) if s.contains('*') => Err(InvalidField::new(
            field,
            "wildcards are not supported; give a literal prefix or suffix",
        )),
        Value::String(s) if s.chars().count() > MAX_SUBJECT_FILTER_CHARS => Err(InvalidField::new(
            field,
            format!("must be at most {MAX_SUBJECT_FILTER_CHARS} characters"),
        )),
        Value::String(s) => Ok(s.clone()),
        _ => Err(InvalidField::new(field, "must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    static EMPTY: std::sync::LazyLock<serde_json::Map<String, Value>> = std::sync::LazyLock::new(Default::default);

    fn event<'a>(event_type: &'a str, subject: &'a str) -> Routing<'a> {
        Routing {
            event_type,
            subject,
            fields: &EMPTY,
        }
    }

    fn filter(v: Value) -> EventFilter {
        EventFilter::from_json(&v).unwrap()
    }

    #[test]
    fn empty_filter_matches_everything() {
        assert!(filter(json!({})).matches(&event("A", "/x")));
    }

    #[test]
    fn event_types_match_case_insensitively() {
        let f = filter(json!({"includedEventTypes": ["Order.Created"]}));
        assert!(f.matches(&event("order.created", "/x")));
        assert!(!f.matches(&event("Order.Deleted", "/x")));
    }

    #[test]
    fn subject_prefix_and_suffix_honour_case_rule() {
        let f = filter(json!({"subjectBeginsWith": "/Blobs/", "subjectEndsWith": ".JPG"}));
        assert!(f.matches(&event("A", "/blobs/cat.jpg")));
        assert!(!f.matches(&event("A", "/blobs/cat.png")));
        let f = filter(json!({"subjectBeginsWith": "/Blobs/", "isSubjectCaseSensitive": true}));
        assert!(!f.matches(&event("A", "/blobs/cat.jpg")));
        assert!(f.matches(&event("A", "/Blobs/cat.jpg")));
    }

    #[test]
    fn refuses_bad_filters_naming_the_field() {
        let err = EventFilter::from_json(&json!({"includedEventTypes": [1]})).unwrap_err();
        assert_eq!(err.field, "includedEventTypes[0]");
        let err = EventFilter::from_json(&json!({"subjectBeginsWith": "/a/*"})).unwrap_err();
        assert_eq!(err.field, "subjectBeginsWith");
        let err = EventFilter::from_json(&json!({"advancedFilters": [{"operatorType":"BoolEquals"}]})).unwrap_err();
        assert_eq!(err.field, "advancedFilters");
        let err = EventFilter::from_json(&json!({"subjectbegins": "x"})).unwrap_err();
        assert_eq!(err.field, "subjectbegins");
    }
}
