//! The subscription filter (behaviour.md#event-subscriptions): which events a subscription
//! receives.
//!
//! Basic filter: `includedEventTypes` (null = all, compared case-insensitively),
//! `subjectBeginsWith` / `subjectEndsWith` (literal, no wildcards) under
//! `isSubjectCaseSensitive`. An event must also pass every one of the `advancedFilters`
//! (see [`crate::advanced_filter`]), which match arrays element-wise only under
//! `enableAdvancedFilteringOnArrays`.

use crate::advanced_filter::{self, AdvancedFilter};
use crate::api_error::InvalidField;
use crate::routing::Routing;
use serde::{Deserialize, Serialize};
use serde_json::Value;

const MAX_SUBJECT_FILTER_CHARS: usize = 1024;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) included_event_types: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) subject_begins_with: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) subject_ends_with: String,
    #[serde(default)]
    pub(crate) is_subject_case_sensitive: bool,
    /// Absent from the stored and shown form when empty, so filters without them
    /// read and print as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) advanced_filters: Vec<AdvancedFilter>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub(crate) enable_advanced_filtering_on_arrays: bool,
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
                "isSubjectCaseSensitive" => filter.is_subject_case_sensitive = flag(key, v)?,
                "advancedFilters" => {
                    filter.advanced_filters = advanced_filter::parse_list(v).map_err(|e| e.within(key))?;
                }
                "enableAdvancedFilteringOnArrays" => filter.enable_advanced_filtering_on_arrays = flag(key, v)?,
                other => {
                    return Err(InvalidField::new(other, "not a known filter field"));
                }
            }
        }
        Ok(filter)
    }

    pub fn matches(&self, event: &Routing<'_>) -> bool {
        self.matches_type(event.event_type)
            && self.matches_subject(event.subject)
            && self
                .advanced_filters
                .iter()
                .all(|f| f.matches(event, self.enable_advanced_filtering_on_arrays))
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

fn is_false(b: &bool) -> bool {
    !*b
}

/// An optional boolean: `null` means false.
fn flag(field: &str, v: &Value) -> Result<bool, InvalidField> {
    match v {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(*b),
        _ => Err(InvalidField::new(field, "must be a boolean")),
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
            fields: &*EMPTY,
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
        assert_eq!(err.field, "advancedFilters[0].key");
        let err = EventFilter::from_json(&json!({"subjectbegins": "x"})).unwrap_err();
        assert_eq!(err.field, "subjectbegins");
    }

    fn order(data: Value) -> Value {
        json!({"id": "1", "subject": "/orders/1", "eventType": "Order.Created", "data": data})
    }

    fn matches(f: &EventFilter, event: &Value) -> bool {
        f.matches(&Routing {
            event_type: event["eventType"].as_str().unwrap(),
            subject: event["subject"].as_str().unwrap(),
            fields: event.as_object().unwrap(),
        })
    }

    #[test]
    fn advanced_filters_are_and_ed_with_each_other_and_the_basic_filter() {
        let f = filter(json!({
            "includedEventTypes": ["Order.Created"],
            "advancedFilters": [
                {"operatorType": "NumberGreaterThan", "key": "data.total", "value": 100},
                {"operatorType": "StringIn", "key": "data.country", "values": ["NL", "BE"]}
            ]
        }));
        assert!(matches(&f, &order(json!({"total": 150, "country": "nl"}))));
        assert!(!matches(&f, &order(json!({"total": 50, "country": "nl"}))));
        assert!(!matches(&f, &order(json!({"total": 150, "country": "de"}))));
        let mut other_type = order(json!({"total": 150, "country": "nl"}));
        other_type["eventType"] = json!("Order.Deleted");
        assert!(!matches(&f, &other_type));
    }

    #[test]
    fn enable_advanced_filtering_on_arrays_switches_element_wise_matching() {
        let advanced = json!([{"operatorType": "StringIn", "key": "data.tags", "values": ["urgent"]}]);
        let event = order(json!({"tags": ["new", "URGENT"]}));
        assert!(!matches(&filter(json!({"advancedFilters": advanced})), &event));
        let on = filter(json!({"advancedFilters": advanced, "enableAdvancedFilteringOnArrays": true}));
        assert!(on.enable_advanced_filtering_on_arrays);
        assert!(matches(&on, &event));
        assert!(!filter(json!({"enableAdvancedFilteringOnArrays": null})).enable_advanced_filtering_on_arrays);
    }

    #[test]
    fn advanced_filter_errors_name_the_full_path() {
        let mut advanced = vec![json!({"operatorType": "IsNotNull", "key": "id"}); 3];
        advanced.push(json!({"operatorType": "NumberIn", "key": "data.n", "values": [1, 2, "3"]}));
        let err = EventFilter::from_json(&json!({"advancedFilters": advanced})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "advancedFilters[3].values[2]: must be a number, got a string"
        );
        let err = EventFilter::from_json(&json!({"advancedFilters": {"operatorType": "IsNotNull"}})).unwrap_err();
        assert_eq!(err.field, "advancedFilters");
        let err = EventFilter::from_json(&json!({"enableAdvancedFilteringOnArrays": "yes"})).unwrap_err();
        assert_eq!(err.to_string(), "enableAdvancedFilteringOnArrays: must be a boolean");
        let err = EventFilter::from_json(&json!({"isSubjectCaseSensitive": 1})).unwrap_err();
        assert_eq!(err.field, "isSubjectCaseSensitive");
    }

    #[test]
    fn filters_without_advanced_filters_store_and_show_as_before() {
        let stored = r#"{"includedEventTypes":["A"],"subjectBeginsWith":"/a","isSubjectCaseSensitive":false}"#;
        let f: EventFilter = serde_json::from_str(stored).unwrap();
        assert!(f.advanced_filters.is_empty() && !f.enable_advanced_filtering_on_arrays);
        assert_eq!(serde_json::to_string(&f).unwrap(), stored);
        let f = filter(json!({"advancedFilters": [], "enableAdvancedFilteringOnArrays": false}));
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"isSubjectCaseSensitive": false})
        );
    }

    #[test]
    fn advanced_filters_store_and_show_in_event_grid_layout() {
        let input = json!({
            "advancedFilters": [
                {"operatorType": "NumberIn", "key": "data.x", "values": [1, 2]},
                {"operatorType": "NumberLessThan", "key": "data.n", "value": 5},
                {"operatorType": "NumberInRange", "key": "data.n", "values": [[1, 5], [10, 20]]},
                {"operatorType": "IsNullOrUndefined", "key": "data.y"}
            ],
            "enableAdvancedFilteringOnArrays": true,
            "isSubjectCaseSensitive": false
        });
        let f = filter(input.clone());
        assert_eq!(serde_json::to_value(&f).unwrap(), input);
        let stored: EventFilter = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(stored, f);
        assert_eq!(EventFilter::from_json(&serde_json::to_value(&f).unwrap()).unwrap(), f);
    }
}
