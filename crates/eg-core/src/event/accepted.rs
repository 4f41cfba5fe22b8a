//! One validated event in the form every later step uses, whatever its schema.

use crate::routing::{EventFields, Routing};
use crate::trace_context::TraceContext;
use serde_json::{Map, Value};
use std::fmt;
use std::sync::OnceLock;

/// A validated event, whatever its schema: its stored JSON form (written once, measured
/// by the size check and stored as is) and what filters read.
#[derive(Clone)]
pub struct AcceptedEvent {
    /// The event as stored: Event Grid schema, a CloudEvent, or a custom event's
    /// Event Grid envelope (the published object in `data`).
    pub json: String,
    pub event_type: String,
    pub subject: String,
    id: String,
    /// The top-level `source` when a string: a CloudEvent's, which makes its identity
    /// together with `id` (`topic::duplicate_identity` reads it for CloudEvents only).
    source: Option<String>,
    /// `dataVersion` of an Event Grid event or custom envelope; `None` for a CloudEvent.
    data_version: Option<String>,
    /// The trace context the event was published in, if any (see [`TraceContext`]).
    trace: Option<TraceContext>,
    /// The stored event as a tree, built only when a filter reads a field of it
    /// (most filters read the type and subject only).
    fields: OnceLock<Map<String, Value>>,
}

impl AcceptedEvent {
    /// Builds the accepted form of a stored JSON object.
    pub fn new(fields: Map<String, Value>, event_type: String, subject: String) -> Self {
        // Serializing a map of `Value`s cannot fail.
        let json = serde_json::to_string(&fields).unwrap_or_default();
        let id = fields.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
        let data_version = fields.get("dataVersion").and_then(Value::as_str).map(str::to_owned);
        let source = fields.get("source").and_then(Value::as_str).map(str::to_owned);
        Self {
            json,
            event_type,
            subject,
            id,
            source,
            data_version,
            trace: None,
            fields: OnceLock::from(fields),
        }
    }

    /// An event whose stored form is already written: `json` is a JSON object whose
    /// `id` (Event Grid) or `id` attribute (CloudEvents) is `id`, and whose
    /// `dataVersion` is `data_version` (`None` for a CloudEvent).
    pub(crate) fn stored(
        json: String,
        id: String,
        event_type: String,
        subject: String,
        data_version: Option<String>,
    ) -> Self {
        Self {
            json,
            event_type,
            subject,
            id,
            source: None,
            data_version,
            trace: None,
            fields: OnceLock::new(),
        }
    }

    /// The same event, with a CloudEvent's `source` (read from its attributes).
    pub(crate) fn with_source(self, source: Option<String>) -> Self {
        Self { source, ..self }
    }

    /// The event's `dataVersion`, when its form has one (not a CloudEvent).
    pub fn data_version(&self) -> Option<&str> {
        self.data_version.as_deref()
    }

    /// The same event, published in the trace context `trace`.
    pub fn in_trace(self, trace: Option<TraceContext>) -> Self {
        Self { trace, ..self }
    }

    /// The event's trace context, when it has one of its own (a CloudEvent's
    /// distributed-tracing attributes) or was given the publish's.
    pub fn trace(&self) -> Option<&TraceContext> {
        self.trace.as_ref()
    }

    /// Gives the event `trace` unless it has a context of its own: a CloudEvent's
    /// attributes name where that event began, the publish request only where the batch did.
    pub fn inherit_trace(&mut self, trace: &TraceContext) {
        if self.trace.is_none() {
            self.trace = Some(trace.clone());
        }
    }

    /// The event's own `id` (every accepted form has one).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The top-level `source` (a CloudEvent's), when the event has one.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The stored event's top-level fields, parsed on first use.
    pub fn fields(&self) -> &Map<String, Value> {
        // The stored form is a JSON object this service wrote or validated; an empty
        // map could only come from a bug, and then matches no field filter.
        self.fields
            .get_or_init(|| serde_json::from_str(&self.json).unwrap_or_default())
    }

    pub fn routing(&self) -> Routing<'_> {
        Routing {
            event_type: &self.event_type,
            subject: &self.subject,
            fields: self,
        }
    }
}

impl EventFields for AcceptedEvent {
    fn field(&self, name: &str) -> Option<&Value> {
        self.fields().get(name)
    }
}

/// Two accepted events are equal when they store the same thing; whether their fields
/// were parsed yet does not matter.
impl PartialEq for AcceptedEvent {
    fn eq(&self, other: &Self) -> bool {
        self.json == other.json
            && self.event_type == other.event_type
            && self.subject == other.subject
            && self.id == other.id
    }
}

impl fmt::Debug for AcceptedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcceptedEvent")
            .field("json", &self.json)
            .field("event_type", &self.event_type)
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use crate::filter::EventFilter;
    use crate::publish::{PublishLimits, PublishedBatch};
    use serde_json::json;

    fn accepted(data: &str) -> super::AcceptedEvent {
        let body = format!(
            r#"[{{"id":"1","subject":"/orders/1","eventType":"Order.Created","eventTime":"2026-11-21T10:00:00Z","data":{data}}}]"#
        );
        let mut batch =
            PublishedBatch::parse_event_grid(body.as_bytes(), "/topics/orders", PublishLimits::default()).unwrap();
        batch.events.remove(0)
    }

    fn filter(v: serde_json::Value) -> EventFilter {
        EventFilter::from_json(&v).unwrap()
    }

    #[test]
    fn fields_are_parsed_only_when_a_filter_reads_one() {
        let event = accepted(r#"{ "x": "caf\u00e9", "n": 150 }"#);
        let by_subject = filter(json!({"subjectBeginsWith": "/orders/", "includedEventTypes": ["Order.Created"]}));
        assert!(by_subject.matches(&event.routing()));
        assert!(event.fields.get().is_none(), "a subject filter parsed the event");

        let by_data = filter(json!({"advancedFilters": [
            {"operatorType": "StringIn", "key": "data.x", "values": ["café"]},
            {"operatorType": "NumberGreaterThan", "key": "data.n", "value": 100}
        ]}));
        assert!(by_data.matches(&event.routing()));
        assert!(event.fields.get().is_some());
        let other =
            filter(json!({"advancedFilters": [{"operatorType": "StringIn", "key": "data.x", "values": ["tea"]}]}));
        assert!(!other.matches(&event.routing()));
        assert_eq!(event.routing().lookup("topic"), Some(&json!("/topics/orders")));
    }
}
