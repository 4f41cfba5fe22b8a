//! Publishing (behaviour.md#topics-and-publishing): turning a publish request's body into
//! validated events.
//!
//! `PublishedBatch::parse` is the one entry point: it picks the topic's input schema
//! (`event::eventgrid`, `event::cloudevents` or `event::custom`),
//! checks the content type against it, and yields every event's stored form or the
//! first problem, named by event index and field. A publish request is all-or-nothing.
//!
//! Content types, read case-insensitively and ignoring parameters such as
//! `; charset=utf-8` (Azure's SDKs send `application/json` for Event Grid events and
//! `application/cloudevents-batch+json; charset=utf-8` for CloudEvents):
//! - Event Grid schema and custom topics take a JSON array whatever the content type
//!   says (curl's default form type included), except a CloudEvents one, which is
//!   refused with a message saying what the topic accepts.
//! - CloudEvents topics take `application/cloudevents+json` as exactly one event
//!   object, `application/cloudevents-batch+json` as an array, and anything else
//!   (`application/json`, none) leniently as an array or a single object. Other
//!   `application/cloudevents…` types (binary or non-JSON formats) are refused.
//!
//! Event Grid and CloudEvents bodies are checked whole by `json::validate` (duplicate
//! keys, depth, UTF-8, syntax: the same errors as a parse) and then read borrowed from
//! their text, so no tree is built for an event's `data`, which is stored as sent. A
//! custom-schema body is parsed into values: its mapping reads paths of each object.
//!
//! A namespace publish (`POST /topics/{topic}:publish`, Event Grid's namespace data
//! plane) is stricter, as Event Grid is: [`check_namespace_publish`] wants a
//! CloudEvents topic and one of the two structured content types before the body is
//! read, and [`PublishLimits::for_namespace`] caps a request at Event Grid's namespace
//! limit of 1,000 events. The body is then parsed like any CloudEvents publish.

use crate::api_error::InvalidField;
use crate::event::{AcceptedEvent, InputSchemaMapping, cloudevents, eventgrid, raw};
use crate::json::{self, JsonError};
use crate::schema::InputSchema;
use crate::time::UnixMillis;
use crate::topic::Topic;
use serde_json::value::RawValue;
use std::fmt;

/// Limits on what one publish request may hold.
#[derive(Debug, Clone, Copy)]
pub struct PublishLimits {
    pub max_events: usize,
    pub max_event_bytes: usize,
}

/// Most events in one namespace publish request (Event Grid's namespace limit; its
/// custom topics, and eg's `/api/events` route, allow 5,000).
pub(crate) const NAMESPACE_MAX_EVENTS: usize = 1_000;

impl PublishLimits {
    /// These limits with at most [`NAMESPACE_MAX_EVENTS`] events per request.
    pub fn for_namespace(self) -> Self {
        Self {
            max_events: self.max_events.min(NAMESPACE_MAX_EVENTS),
            ..self
        }
    }
}

impl Default for PublishLimits {
    fn default() -> Self {
        Self {
            max_events: 5_000,
            max_event_bytes: 1024 * 1024,
        }
    }
}

/// Why a publish body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    /// Not UTF-8, malformed or truncated JSON, a duplicate key, too deep a nesting or a
    /// number out of range (see [`crate::json`]), located in the body.
    #[error("{0}")]
    MalformedJson(JsonError),
    #[error("the request body must be a JSON array of events")]
    NotAnArray,
    #[error(
        "with content type application/cloudevents+json the body must be one CloudEvent (a JSON object); \
         send several as a JSON array with content type application/cloudevents-batch+json"
    )]
    NotAnObject,
    #[error("the request holds no events")]
    Empty,
    #[error("the request body is empty: send the events as JSON")]
    EmptyBody,
    #[error("the request holds {count} events; at most {max} are allowed")]
    TooManyEvents { count: usize, max: usize },
    #[error("events[{index}]: the event is {size} bytes; at most {max} are allowed")]
    EventTooLarge { index: usize, size: usize, max: usize },
    #[error("{}", EventProblem::new(.index, .problem))]
    InvalidEvent { index: usize, problem: InvalidField },
    #[error(
        "this topic accepts {accepts} events; content type {content_type:?} is for CloudEvents, \
         which only a CloudEventSchemaV1_0 topic accepts"
    )]
    WrongSchema { accepts: InputSchema, content_type: String },
    #[error(
        "content type {0:?} is not supported: CloudEvents are accepted in structured JSON mode, as \
         application/cloudevents+json (one event) or application/cloudevents-batch+json (an array)"
    )]
    UnsupportedContentType(String),
    #[error(
        "topic {topic:?} takes {accepts} events, and :publish takes CloudEvents only: \
         publish to it with POST /topics/{topic}/api/events"
    )]
    NotCloudEventsTopic { topic: String, accepts: InputSchema },
    #[error(
        "binary content mode is not supported; send application/cloudevents+json (one event) or \
         application/cloudevents-batch+json (an array), with the event's attributes in the body"
    )]
    BinaryModeUnsupported,
    #[error(
        "{}: send application/cloudevents+json (one event) or application/cloudevents-batch+json (an array)",
        match .0 { Some(t) => format!("content type {t:?} is not taken by :publish"), None => "the request has no Content-Type".to_owned() }
    )]
    NotStructuredCloudEvents(Option<String>),
}

/// `events[3].eventTime: …`, or `events[3]: …` when the problem is the whole event.
struct EventProblem<'a>(usize, &'a InvalidField);

impl<'a> EventProblem<'a> {
    fn new(index: &usize, problem: &'a InvalidField) -> Self {
        Self(*index, problem)
    }
}

impl fmt::Display for EventProblem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self(index, problem) = self;
        if problem.field.is_empty() {
            write!(f, "events[{index}]: {}", problem.problem)
        } else {
            write!(f, "events[{index}].{problem}")
        }
    }
}

impl PublishError {
    /// Whether the right status is 413 rather than 400.
    pub fn is_too_large(&self) -> bool {
        matches!(self, PublishError::EventTooLarge { .. })
    }

    /// Whether the right status is 415 rather than 400: the content type asks for a
    /// form the route does not take.
    pub fn is_unsupported_media_type(&self) -> bool {
        matches!(
            self,
            PublishError::BinaryModeUnsupported | PublishError::NotStructuredCloudEvents(_)
        )
    }
}

/// Checks a namespace publish (`POST /topics/{topic}:publish`) before its body is read:
/// the topic takes CloudEvents, and the content type is `application/cloudevents+json`
/// or `application/cloudevents-batch+json` (parameters such as `charset` allowed).
/// `binary_mode` says whether the request carries `ce-*` attribute headers: with another
/// content type it is a binary-mode CloudEvent, which eg does not take.
pub fn check_namespace_publish(
    topic: &Topic,
    content_type: Option<&str>,
    binary_mode: bool,
) -> Result<(), PublishError> {
    if topic.input_schema != InputSchema::CloudEventSchemaV1_0 {
        return Err(PublishError::NotCloudEventsTopic {
            topic: topic.name.as_str().to_owned(),
            accepts: topic.input_schema,
        });
    }
    match BodyType::of(content_type) {
        BodyType::CloudEvent | BodyType::CloudEventBatch => Ok(()),
        _ if binary_mode => Err(PublishError::BinaryModeUnsupported),
        _ => Err(PublishError::NotStructuredCloudEvents(
            content_type.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()),
        )),
    }
}

/// The validated events of one publish request.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedBatch {
    pub events: Vec<AcceptedEvent>,
}

/// How a publish request's content type asks its body to be read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum BodyType {
    /// `application/cloudevents+json`: exactly one CloudEvent.
    CloudEvent,
    /// `application/cloudevents-batch+json`: an array of CloudEvents.
    CloudEventBatch,
    /// Another `application/cloudevents…` type: a mode this service does not speak.
    OtherCloudEvents(String),
    /// Anything else, or no content type: JSON, read by the topic's schema.
    Json,
}

impl BodyType {
    fn of(content_type: Option<&str>) -> Self {
        let media_type = content_type
            .and_then(|ct| ct.split(';').next())
            .map(|t| t.trim().to_ascii_lowercase())
            .unwrap_or_default();
        match media_type.as_str() {
            "application/cloudevents+json" => Self::CloudEvent,
            "application/cloudevents-batch+json" => Self::CloudEventBatch,
            t if t.starts_with("application/cloudevents") => Self::OtherCloudEvents(t.to_owned()),
            _ => Self::Json,
        }
    }

    fn is_cloud_events(&self) -> bool {
        !matches!(self, Self::Json)
    }
}

impl PublishedBatch {
    /// Parses a publish body for `topic`, in the topic's input schema. `now` is the
    /// publish time (the `eventTime` of a custom event whose topic maps none).
    pub fn parse(
        body: &[u8],
        content_type: Option<&str>,
        topic: &Topic,
        now: UnixMillis,
        limits: PublishLimits,
    ) -> Result<Self, PublishError> {
        let body_type = BodyType::of(content_type);
        let topic_id = topic.id();
        match topic.input_schema {
            InputSchema::EventGridSchema | InputSchema::CustomEventSchema if body_type.is_cloud_events() => {
                Err(PublishError::WrongSchema {
                    accepts: topic.input_schema,
                    content_type: content_type.unwrap_or_default().trim().to_owned(),
                })
            }
            InputSchema::EventGridSchema => Self::parse_event_grid(body, &topic_id, limits),
            InputSchema::CustomEventSchema => {
                let items = raw_array(body)?;
                // A custom topic always has a mapping (`Topic::from_resource` sees to it);
                // an empty one still refuses every event, naming eventType.
                let fallback = InputSchemaMapping::default();
                let mapping = topic.input_mapping.as_ref().unwrap_or(&fallback);
                let mut new_id = || uuid::Uuid::new_v4().to_string();
                accept_all(items, limits, |item| mapping.apply(item, &topic_id, now, &mut new_id))
            }
            InputSchema::CloudEventSchemaV1_0 => {
                let items = match body_type {
                    BodyType::OtherCloudEvents(t) => return Err(PublishError::UnsupportedContentType(t)),
                    BodyType::CloudEvent => match raw_value(body)? {
                        item if item.get().starts_with('{') => vec![item],
                        _ => return Err(PublishError::NotAnObject),
                    },
                    BodyType::CloudEventBatch => raw_array(body)?,
                    BodyType::Json => match raw_value(body)? {
                        item if item.get().starts_with('{') => vec![item],
                        items => raw_elements(items)?,
                    },
                };
                accept_all(items, limits, cloudevents::accept_raw)
            }
        }
    }

    /// Parses an Event Grid schema publish body for the topic whose id is `topic_id`.
    pub(crate) fn parse_event_grid(body: &[u8], topic_id: &str, limits: PublishLimits) -> Result<Self, PublishError> {
        let text = checked_text(body)?;
        if !text.trim_start().starts_with('[') {
            return Err(PublishError::NotAnArray);
        }
        let items = raw::events_of(text).map_err(unreadable)?;
        accept_all(items, limits, |item| eventgrid::accept_raw(item, topic_id))
    }
}

/// The body checked as strict JSON ([`crate::json`]: duplicate keys, depth; problems
/// located as `events[i]…`), kept as text: events are then read borrowed from it and nothing is built for `data`.
fn raw_value(body: &[u8]) -> Result<&RawValue, PublishError> {
    serde_json::from_str(checked_text(body)?).map_err(unreadable)
}

/// The body's text, once [`json::validate`] found nothing to refuse.
fn checked_text(body: &[u8]) -> Result<&str, PublishError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(PublishError::EmptyBody);
    }
    json::validate(body).map_err(located)
}

/// The elements of a checked body that must be an array.
fn raw_array(body: &[u8]) -> Result<Vec<&RawValue>, PublishError> {
    raw_elements(raw_value(body)?)
}

fn raw_elements(value: &RawValue) -> Result<Vec<&RawValue>, PublishError> {
    if !value.get().starts_with('[') {
        return Err(PublishError::NotAnArray);
    }
    serde_json::from_str(value.get()).map_err(unreadable)
}

/// Text that passed `json::validate` and that serde_json then failed to read: not
/// expected, but refused rather than trusted.
fn unreadable(e: serde_json::Error) -> PublishError {
    PublishError::MalformedJson(JsonError {
        path: String::new(),
        problem: json::JsonProblem::Syntax(e.to_string()),
        line: 0,
        column: 0,
    })
}

/// A problem in the body, named for the publisher: in an array of events from its
/// index, in a single event (a CloudEvent) as `events[0]`.
fn located(mut e: JsonError) -> PublishError {
    // A publish cut short is wrong as a whole, not at the event the reader was in.
    if matches!(e.problem, json::JsonProblem::Truncated(_)) {
        e.path.clear();
    }
    // Only an object has keys: a duplicate at the top is in a single event.
    let e = if e.path.starts_with('[') {
        e.within("events")
    } else if !e.path.is_empty() || matches!(e.problem, json::JsonProblem::DuplicateKey(_)) {
        e.within("events[0]")
    } else {
        e
    };
    PublishError::MalformedJson(e)
}

/// Accepts every item or none: the count limit, each item's validation, then the size
/// of its stored form.
fn accept_all<T>(
    items: Vec<T>,
    limits: PublishLimits,
    mut accept: impl FnMut(T) -> Result<AcceptedEvent, InvalidField>,
) -> Result<PublishedBatch, PublishError> {
    if items.is_empty() {
        return Err(PublishError::Empty);
    }
    if items.len() > limits.max_events {
        return Err(PublishError::TooManyEvents {
            count: items.len(),
            max: limits.max_events,
        });
    }
    let events = items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let accepted = accept(item).map_err(|problem| PublishError::InvalidEvent { index, problem })?;
            if accepted.json.len() > limits.max_event_bytes {
                return Err(PublishError::EventTooLarge {
                    index,
                    size: accepted.json.len(),
                    max: limits.max_event_bytes,
                });
            }
            Ok(accepted)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PublishedBatch { events })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventGridEvent;
    use serde_json::{Value, json};

    const TOPIC: &str = "/topics/orders";

    fn parse(v: Value) -> Result<PublishedBatch, PublishError> {
        PublishedBatch::parse_event_grid(v.to_string().as_bytes(), TOPIC, PublishLimits::default())
    }

    fn event() -> Value {
        json!({"id":"1","subject":"/a","eventType":"Created","eventTime":"2026-11-21T10:00:00Z","data":{"k":1}})
    }

    #[test]
    fn stamps_topic_and_versions() {
        let batch = parse(json!([event()])).unwrap();
        let e: EventGridEvent = serde_json::from_str(&batch.events[0].json).unwrap();
        assert_eq!(batch.events[0].event_type, "Created");
        assert_eq!(batch.events[0].subject, "/a");
        assert_eq!(e.topic, TOPIC);
        assert_eq!(e.metadata_version, "1");
        assert_eq!(e.data_version, "");
        assert_eq!(e.data, Some(json!({"k":1})));
    }

    #[test]
    fn names_index_and_field() {
        let mut bad = event();
        bad["eventTime"] = json!("yesterday");
        let err = parse(json!([event(), bad])).unwrap_err();
        assert!(err.to_string().starts_with("events[1].eventTime:"), "{err}");

        let mut bad = event();
        bad["subject"] = json!(5);
        let err = parse(json!([bad])).unwrap_err();
        assert_eq!(err.to_string(), "events[0].subject: must be a string, got a number");
    }

    #[test]
    fn refuses_missing_extra_and_conflicting_fields() {
        let mut missing = event();
        missing.as_object_mut().unwrap().remove("id");
        assert!(
            parse(json!([missing]))
                .unwrap_err()
                .to_string()
                .contains("events[0].id: is required")
        );

        let mut extra = event();
        extra["colour"] = json!("red");
        assert!(parse(json!([extra])).unwrap_err().to_string().contains("colour"));

        let mut topic = event();
        topic["topic"] = json!("/topics/other");
        assert!(
            parse(json!([topic]))
                .unwrap_err()
                .to_string()
                .contains("events[0].topic")
        );

        let mut mv = event();
        mv["metadataVersion"] = json!("2");
        assert!(parse(json!([mv])).is_err());
    }

    #[test]
    fn refuses_non_arrays_empty_and_too_many() {
        assert_eq!(parse(event()).unwrap_err(), PublishError::NotAnArray);
        assert_eq!(parse(json!([])).unwrap_err(), PublishError::Empty);
        let limits = PublishLimits {
            max_events: 2,
            ..Default::default()
        };
        let body = json!([event(), event(), event()]).to_string();
        assert!(matches!(
            PublishedBatch::parse_event_grid(body.as_bytes(), TOPIC, limits),
            Err(PublishError::TooManyEvents { count: 3, max: 2 })
        ));
        assert!(matches!(
            PublishedBatch::parse_event_grid(b"[{", TOPIC, limits),
            Err(PublishError::MalformedJson(_))
        ));
    }

    #[test]
    fn a_truncated_body_is_named_as_a_whole() {
        let body = json!([event(), event()]).to_string();
        let cut = &body.as_bytes()[..body.len() / 2];
        let Err(PublishError::MalformedJson(e)) =
            PublishedBatch::parse_event_grid(cut, TOPIC, PublishLimits::default())
        else {
            panic!("a truncated body was not refused as malformed JSON");
        };
        let message = e.to_string();
        assert!(
            message.starts_with("the request body is not valid JSON: it ends too early (EOF while parsing"),
            "{message}"
        );
        assert!(message.contains(" at line 1 column "), "{message}");
    }

    #[test]
    fn refuses_oversized_events_with_413() {
        let limits = PublishLimits {
            max_event_bytes: 200,
            ..Default::default()
        };
        let mut big = event();
        big["data"] = json!("x".repeat(300));
        let err = PublishedBatch::parse_event_grid(json!([big]).to_string().as_bytes(), TOPIC, limits).unwrap_err();
        assert!(err.is_too_large());
    }
    fn parse_text(body: &str) -> Result<PublishedBatch, PublishError> {
        PublishedBatch::parse_event_grid(body.as_bytes(), TOPIC, PublishLimits::default())
    }

    const HEAD: &str = r#""id":"1","subject":"/a","eventType":"Created","eventTime":"2026-11-21T10:00:00Z""#;

    #[test]
    fn data_is_checked_as_strictly_as_the_rest() {
        let err = parse_text(&format!(
            r#"[{{{HEAD}}}, {{{HEAD},"data":{{"a":1,"b":{{"c":1,"c":2}}}}}}]"#
        ))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "events[1].data.b has the key \"c\" twice (a JSON object must not repeat a key) at line 1 column 198"
        );
        let deep = format!(r#"[{{{HEAD},"data":{}1{}}}]"#, "[".repeat(63), "]".repeat(63));
        let err = parse_text(&deep).unwrap_err();
        assert!(
            err.to_string().contains("is nested too deeply: at most 64 levels"),
            "{err}"
        );
        assert!(err.to_string().starts_with("events[0].data[0]"), "{err}");
        let ok = format!(r#"[{{{HEAD},"data":{}1{}}}]"#, "[".repeat(62), "]".repeat(62));
        assert!(parse_text(&ok).is_ok());
    }

    #[test]
    fn data_is_stored_as_published() {
        let data = "{\n  \"name\": \"caf\\u00e9 \\\"x\\\"\",\t\"n\": 1.50, \"big\": 18446744073709551616 }";
        let batch = parse_text(&format!("[ {{{HEAD}, \"data\" : {data} }} ]")).unwrap();
        let stored = &batch.events[0].json;
        assert!(stored.contains(&format!("\"data\":{data},")), "{stored}");
        let e: Value = serde_json::from_str(stored).unwrap();
        assert_eq!(e["data"]["name"], "café \"x\"");
        assert_eq!(e["data"]["n"], 1.5);
    }

    #[test]
    fn the_stored_form_has_the_fields_it_always_had() {
        let batch = parse_text(&format!(r#"[{{{HEAD},"data":{{"k":1}}}}]"#)).unwrap();
        assert_eq!(
            batch.events[0].json,
            r#"{"data":{"k":1},"dataVersion":"","eventTime":"2026-11-21T10:00:00Z","eventType":"Created","id":"1","metadataVersion":"1","subject":"/a","topic":"/topics/orders"}"#
        );
        // Published topic (any case) and metadataVersion are replaced by the stamped ones;
        // data null is kept, data absent stays absent.
        let body = format!(
            r#"[{{{HEAD},"topic":"/TOPICS/orders","metadataVersion":null,"dataVersion":"2","data":null}}, {{{HEAD}}}]"#
        );
        let batch = parse_text(&body).unwrap();
        let first: Value = serde_json::from_str(&batch.events[0].json).unwrap();
        assert_eq!(first["topic"], TOPIC);
        assert_eq!(first["metadataVersion"], "1");
        assert_eq!(first["dataVersion"], "2");
        assert_eq!(first.get("data"), Some(&Value::Null));
        let second: Value = serde_json::from_str(&batch.events[1].json).unwrap();
        assert_eq!(second.get("data"), None);
        assert_eq!(batch.events[1].id(), "1");
    }

    /// The text path refuses and stores exactly what the `Value` path does.
    #[test]
    fn read_from_text_as_from_a_value() {
        let mut cases = vec![event(), json!(1), json!([event()]), json!({})];
        for (field, value) in [
            ("id", json!("")),
            ("id", json!(5)),
            ("subject", Value::Null),
            ("eventType", json!("")),
            ("eventTime", json!("yesterday")),
            ("dataVersion", json!({})),
            ("metadataVersion", json!("2")),
            ("topic", json!("/topics/other")),
            ("topic", json!(true)),
            ("zeta", json!(1)),
            ("alpha", json!(1)),
            ("subject", json!("needs \"escapes\"\n")),
        ] {
            let mut e = event();
            e[field] = value;
            cases.push(e);
        }
        // Of several unknown fields, the first in key order is named.
        let mut e = event();
        e["zeta"] = json!(1);
        e["beta"] = json!(2);
        cases.push(e);
        for case in cases {
            let text = format!("[{case}]");
            let item = raw::events_of(&text).unwrap().remove(0);
            assert_eq!(
                eventgrid::accept_raw(item, TOPIC),
                EventGridEvent::from_published(case.clone(), TOPIC).map(|e| e.accepted()),
                "{text}"
            );
        }
    }

    mod dispatch {
        use super::*;
        use crate::names::TopicName;

        fn topic(props: Value) -> Topic {
            Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({ "properties": props })).unwrap()
        }

        fn event_grid_topic() -> Topic {
            topic(json!({}))
        }

        fn cloud_events_topic() -> Topic {
            topic(json!({"inputSchema": "CloudEventSchemaV1_0"}))
        }

        fn custom_topic() -> Topic {
            topic(json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": {
                "inputSchemaMappingType": "Json",
                "properties": {"id": {"sourceField": "orderId"}, "eventType": {"sourceField": "kind", "defaultValue": "Order"}}
            }}))
        }

        fn parse_as(topic: &Topic, content_type: Option<&str>, body: &str) -> Result<PublishedBatch, PublishError> {
            PublishedBatch::parse(
                body.as_bytes(),
                content_type,
                topic,
                UnixMillis(0),
                PublishLimits::default(),
            )
        }

        fn cloud_event() -> Value {
            json!({"specversion": "1.0", "id": "1", "source": "/orders", "type": "Created"})
        }

        /// What azure-eventgrid for Python sends for `EventGridEvent(...)`.
        const PYTHON_EVENT_GRID: &str = r#"[{"id": "e8a4e2b0-0bd1-4d0a-9ac4-6a4b8f3bb9a1", "subject": "Door1", "data": {"itemSku": "Contoso Item SKU #1"}, "eventType": "Contoso.Items.ItemReceived", "eventTime": "2021-02-18T20:18:10.539861Z", "dataVersion": "2.0"}]"#;

        /// What Azure.Messaging.EventGrid for .NET sends for an `EventGridEvent`.
        const DOTNET_EVENT_GRID: &str = r#"[{"subject":"ExampleEventSubject","eventType":"Example.EventType","eventTime":"2021-02-18T20:18:10.5398616+00:00","id":"4f7fd1c4-7d0e-4e73-9e71-3dc5a2d2a8b5","data":{"Property1":"Value1","Property2":"Value2"},"dataVersion":"1.0"}]"#;

        /// What azure-eventgrid for Python sends for `CloudEvent(data=b"...", extension1=...)`.
        const PYTHON_CLOUD_EVENTS: &str = r#"[{"id": "8ef65d7e-2bb6-41f6-b8a8-b4e1fa4c3a2b", "source": "/azure/sdk/eventgrid/samples/sync", "type": "Azure.Sdk.Sample", "specversion": "1.0", "time": "2021-02-18T20:18:10.539861Z", "data_base64": "aGVsbG8gd29ybGQ=", "datacontenttype": "application/octet-stream", "extension1": "value1", "extension2": 2}, {"id": "d5d0c3a5-bc1b-4a5e-a4c6-f03e25f3c6bd", "source": "/azure/sdk/eventgrid/samples/sync", "type": "Azure.Sdk.Sample", "specversion": "1.0", "time": "2021-02-18T20:18:10.539861Z", "data": {"team": "event grid squad"}, "subject": "Door1"}]"#;

        /// What Azure.Messaging.EventGrid for .NET and @azure/eventgrid for JS send.
        const DOTNET_CLOUD_EVENTS: &str = r#"[{"id":"994bc3f8-c90c-6fc3-9e83-6783db2221d5","source":"/contoso/items","type":"Contoso.Items.ItemReceived","data":{"itemSku":"Contoso Item SKU #1"},"time":"2021-02-18T20:18:10.5398616+00:00","specversion":"1.0","datacontenttype":"application/json"}]"#;

        /// `dataVersion` (the `aeg-data-version` header) and `id` (a broker message's id
        /// header) are refused where they are published when no header could carry them.
        #[test]
        fn fields_sent_as_headers_are_bounded_where_published() {
            let refusal = |topic: &Topic, body: Value| match parse_as(topic, None, &body.to_string()) {
                Err(PublishError::InvalidEvent { index, problem }) => {
                    format!("events[{index}].{}: {}", problem.field, problem.problem)
                }
                other => panic!("{body}: {other:?}"),
            };
            let long = "1".repeat(70_000);
            let t = event_grid_topic();
            let mut e = event();
            e["dataVersion"] = json!(long);
            let message = refusal(&t, json!([event(), e]));
            assert!(
                message.starts_with("events[1].dataVersion: is 70000 bytes; a value sent as a header has at most 4096"),
                "{message}"
            );
            assert!(message.contains("aeg-data-version"), "{message}");
            for (field, value, words) in [
                ("dataVersion", "1\u{0}", "U+0000"),
                ("dataVersion", "1\u{1}", "U+0001"),
                ("dataVersion", "1\u{7f}", "U+007F"),
                ("dataVersion", "1\r\n", "U+000D"),
                ("id", "a\nb", "U+000A"),
            ] {
                let mut e = event();
                e[field] = json!(value);
                let message = refusal(&t, json!([e]));
                assert!(message.starts_with(&format!("events[0].{field}: ")), "{message}");
                assert!(message.contains(words), "{message}");
            }
            let mut longest = event();
            longest["dataVersion"] = json!("1".repeat(4096));
            assert!(parse_as(&t, None, &json!([longest]).to_string()).is_ok());

            let mut ce = cloud_event();
            ce["id"] = json!("x".repeat(5000));
            let message = refusal(&cloud_events_topic(), json!([ce]));
            assert!(message.starts_with("events[0].id: is 5000 bytes"), "{message}");

            let custom = topic(json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": {
                "inputSchemaMappingType": "Json",
                "properties": {"id": {"sourceField": "orderId"}, "eventType": {"defaultValue": "Order"},
                               "dataVersion": {"sourceField": "v", "defaultValue": "1"}}
            }}));
            assert!(parse_as(&custom, None, r#"[{"orderId": "1"}, {"orderId": "2", "v": "2"}]"#).is_ok());
            let message = refusal(&custom, json!([{"orderId": "1", "v": long}]));
            assert!(
                message.starts_with("events[0].v: is 70000 bytes") && message.contains("mapped to dataVersion"),
                "{message}"
            );
            let message = refusal(&custom, json!([{"orderId": "1\u{0}"}]));
            assert!(
                message.starts_with("events[0].orderId: holds the control character U+0000")
                    && message.contains("mapped to id"),
                "{message}"
            );
        }

        #[test]
        fn sdk_event_grid_bodies_are_accepted() {
            let t = event_grid_topic();
            for body in [PYTHON_EVENT_GRID, DOTNET_EVENT_GRID] {
                for ct in [Some("application/json"), Some("application/json; charset=utf-8"), None] {
                    let batch = parse_as(&t, ct, body).unwrap();
                    assert_eq!(batch.events.len(), 1);
                    let e: EventGridEvent = serde_json::from_str(&batch.events[0].json).unwrap();
                    assert_eq!(e.topic, "/topics/orders");
                }
            }
            // curl -d sends a form content type; Event Grid's own examples publish that way.
            assert!(parse_as(&t, Some("application/x-www-form-urlencoded"), PYTHON_EVENT_GRID).is_ok());
        }

        #[test]
        fn sdk_cloud_events_bodies_are_accepted_as_published() {
            let t = cloud_events_topic();
            for (body, ct) in [
                (PYTHON_CLOUD_EVENTS, "application/cloudevents-batch+json; charset=utf-8"),
                (DOTNET_CLOUD_EVENTS, "application/cloudevents-batch+json; charset=utf-8"),
                (DOTNET_CLOUD_EVENTS, "Application/CloudEvents-Batch+JSON"),
            ] {
                let batch = parse_as(&t, Some(ct), body).unwrap();
                let published: Vec<Value> = serde_json::from_str(body).unwrap();
                let stored: Vec<Value> = batch
                    .events
                    .iter()
                    .map(|e| serde_json::from_str(&e.json).unwrap())
                    .collect();
                assert_eq!(stored, published);
            }
            let batch = parse_as(&t, Some("application/cloudevents-batch+json"), PYTHON_CLOUD_EVENTS).unwrap();
            assert_eq!(batch.events[0].event_type, "Azure.Sdk.Sample");
            assert_eq!(batch.events[0].subject, "");
            assert_eq!(batch.events[1].subject, "Door1");
        }

        #[test]
        fn cloud_events_content_types() {
            let t = cloud_events_topic();
            let one = cloud_event().to_string();
            let many = json!([cloud_event(), cloud_event()]).to_string();
            assert_eq!(
                parse_as(&t, Some("application/cloudevents+json"), &one)
                    .unwrap()
                    .events
                    .len(),
                1
            );
            assert_eq!(
                parse_as(&t, Some("application/cloudevents+json; charset=utf-8"), &many).unwrap_err(),
                PublishError::NotAnObject
            );
            assert_eq!(
                parse_as(&t, Some("application/cloudevents-batch+json"), &one).unwrap_err(),
                PublishError::NotAnArray
            );
            assert_eq!(
                parse_as(&t, Some("application/cloudevents-batch+json"), &many)
                    .unwrap()
                    .events
                    .len(),
                2
            );
            // application/json or none: an array or a single object.
            for ct in [Some("application/json"), None] {
                assert_eq!(parse_as(&t, ct, &one).unwrap().events.len(), 1);
                assert_eq!(parse_as(&t, ct, &many).unwrap().events.len(), 2);
                assert_eq!(parse_as(&t, ct, "5").unwrap_err(), PublishError::NotAnArray);
            }
            let err = parse_as(&t, Some("application/cloudevents+xml"), &one).unwrap_err();
            assert_eq!(
                err,
                PublishError::UnsupportedContentType("application/cloudevents+xml".into())
            );
            assert!(matches!(
                parse_as(&t, Some("application/cloudevents+json"), "{"),
                Err(PublishError::MalformedJson(_))
            ));
            assert_eq!(
                parse_as(&t, Some("application/cloudevents-batch+json"), "[]").unwrap_err(),
                PublishError::Empty
            );
        }

        #[test]
        fn cloud_events_errors_name_index_and_attribute() {
            let t = cloud_events_topic();
            let mut bad = cloud_event();
            bad["time"] = json!("yesterday");
            let err = parse_as(
                &t,
                Some("application/cloudevents-batch+json"),
                &json!([cloud_event(), bad]).to_string(),
            )
            .unwrap_err();
            assert_eq!(
                err.to_string(),
                "events[1].time: \"yesterday\" is not an RFC 3339 timestamp"
            );
            let mut bad = cloud_event();
            bad["ext"] = json!({"a": 1});
            let err = parse_as(&t, Some("application/cloudevents+json"), &bad.to_string()).unwrap_err();
            assert!(err.to_string().starts_with("events[0].ext: "), "{err}");
            let err = parse_as(&t, None, "[1]").unwrap_err();
            assert_eq!(
                err.to_string(),
                "events[0]: each event must be a JSON object (a CloudEvent), got a number"
            );
        }

        #[test]
        fn cloud_events_content_types_are_refused_by_other_topics() {
            let body = json!([cloud_event()]).to_string();
            for (t, schema) in [
                (event_grid_topic(), "EventGridSchema"),
                (custom_topic(), "CustomEventSchema"),
            ] {
                for ct in [
                    "application/cloudevents-batch+json; charset=utf-8",
                    "application/cloudevents+json",
                ] {
                    let err = parse_as(&t, Some(ct), &body).unwrap_err();
                    assert!(matches!(err, PublishError::WrongSchema { .. }), "{err}");
                    assert!(
                        err.to_string()
                            .starts_with(&format!("this topic accepts {schema} events")),
                        "{err}"
                    );
                }
            }
        }

        #[test]
        fn cloud_events_are_not_event_grid_events() {
            let err = parse_as(
                &event_grid_topic(),
                Some("application/json"),
                &json!([cloud_event()]).to_string(),
            )
            .unwrap_err();
            assert!(err.to_string().starts_with("events[0]."), "{err}");
        }

        #[test]
        fn custom_topics_take_arrays_of_objects() {
            let t = custom_topic();
            let batch = parse_as(
                &t,
                Some("application/json"),
                r#"[{"orderId": "o1", "kind": "Sold", "n": 1}, {"orderId": "o2"}]"#,
            )
            .unwrap();
            assert_eq!(batch.events[0].event_type, "Sold");
            assert_eq!(batch.events[1].event_type, "Order");
            let e: EventGridEvent = serde_json::from_str(&batch.events[0].json).unwrap();
            assert_eq!(e.id, "o1");
            assert_eq!(e.topic, "/topics/orders");
            assert_eq!(e.event_time, "1970-01-01T00:00:00.000Z");
            assert_eq!(e.data, Some(json!({"orderId": "o1", "kind": "Sold", "n": 1})));

            let err = parse_as(&t, None, r#"[{"orderId": "o1"}, {"kind": "Sold"}]"#).unwrap_err();
            assert!(err.to_string().starts_with("events[1].orderId: is required"), "{err}");
            let err = parse_as(&t, None, r#"[{"orderId": "o1"}, "text"]"#).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("events[1]: each event must be a JSON object"),
                "{err}"
            );
            assert_eq!(
                parse_as(&t, None, r#"{"orderId": "o1"}"#).unwrap_err(),
                PublishError::NotAnArray
            );
        }

        #[test]
        fn size_and_count_limits_apply_to_every_schema() {
            let limits = PublishLimits {
                max_events: 1,
                max_event_bytes: 150,
            };
            let big = "x".repeat(200);
            let cases = [
                (
                    event_grid_topic(),
                    json!([{"id": "1", "subject": "", "eventType": "T", "eventTime": "2026-01-01T00:00:00Z", "data": big}]),
                ),
                (
                    cloud_events_topic(),
                    json!([{"specversion": "1.0", "id": "1", "source": "/s", "type": "T", "data": big}]),
                ),
                (custom_topic(), json!([{"orderId": "1", "blob": big}])),
            ];
            for (t, body) in cases {
                let err =
                    PublishedBatch::parse(body.to_string().as_bytes(), None, &t, UnixMillis(0), limits).unwrap_err();
                assert!(err.is_too_large(), "{err}");
                assert!(err.to_string().starts_with("events[0]: the event is"), "{err}");
                let two = json!([body[0], body[0]]).to_string();
                let err = PublishedBatch::parse(two.as_bytes(), None, &t, UnixMillis(0), limits).unwrap_err();
                assert_eq!(err, PublishError::TooManyEvents { count: 2, max: 1 });
            }
        }

        #[test]
        fn a_namespace_publish_wants_a_cloud_events_topic_and_a_structured_content_type() {
            let t = cloud_events_topic();
            for ct in [
                "application/cloudevents+json",
                "application/cloudevents-batch+json; charset=utf-8",
                "Application/CloudEvents+JSON; charset=UTF-8",
            ] {
                assert_eq!(check_namespace_publish(&t, Some(ct), false), Ok(()), "{ct}");
                // Structured mode: stray ce-* headers are not binary mode.
                assert_eq!(check_namespace_publish(&t, Some(ct), true), Ok(()), "{ct}");
            }
            for ct in ["application/json", "text/plain", "application/cloudevents+xml"] {
                let err = check_namespace_publish(&t, Some(ct), false).unwrap_err();
                assert!(err.is_unsupported_media_type(), "{err}");
                assert_eq!(
                    err.to_string(),
                    format!(
                        "content type {ct:?} is not taken by :publish: send application/cloudevents+json \
                         (one event) or application/cloudevents-batch+json (an array)"
                    )
                );
                let err = check_namespace_publish(&t, Some(ct), true).unwrap_err();
                assert_eq!(err, PublishError::BinaryModeUnsupported);
                assert!(
                    err.to_string()
                        .starts_with("binary content mode is not supported; send application/cloudevents+json"),
                    "{err}"
                );
            }
            for none in [None, Some(""), Some(" ")] {
                let err = check_namespace_publish(&t, none, false).unwrap_err();
                assert_eq!(err, PublishError::NotStructuredCloudEvents(None));
                assert!(
                    err.to_string().starts_with("the request has no Content-Type: send"),
                    "{err}"
                );
            }
            assert_eq!(
                check_namespace_publish(&t, None, true),
                Err(PublishError::BinaryModeUnsupported)
            );
            for (topic, schema) in [
                (event_grid_topic(), "EventGridSchema"),
                (custom_topic(), "CustomEventSchema"),
            ] {
                let err = check_namespace_publish(&topic, Some("application/cloudevents+json"), false).unwrap_err();
                assert!(!err.is_unsupported_media_type());
                assert_eq!(
                    err.to_string(),
                    format!(
                        "topic \"orders\" takes {schema} events, and :publish takes CloudEvents only: \
                         publish to it with POST /topics/orders/api/events"
                    )
                );
            }
        }

        #[test]
        fn a_namespace_publish_takes_at_most_a_thousand_events() {
            assert_eq!(PublishLimits::default().for_namespace().max_events, 1_000);
            let fewer = PublishLimits {
                max_events: 10,
                max_event_bytes: 7,
            };
            assert_eq!(fewer.for_namespace().max_events, 10);
            assert_eq!(fewer.for_namespace().max_event_bytes, 7);
            let limits = PublishLimits::default().for_namespace();
            let body = Value::Array(vec![cloud_event(); 1_001]).to_string();
            let err = PublishedBatch::parse(
                body.as_bytes(),
                Some("application/cloudevents-batch+json"),
                &cloud_events_topic(),
                UnixMillis(0),
                limits,
            )
            .unwrap_err();
            assert_eq!(
                err,
                PublishError::TooManyEvents {
                    count: 1_001,
                    max: 1_000
                }
            );
        }

        #[test]
        fn the_stored_form_is_what_the_size_limit_measures() {
            // Event Grid stamps topic and metadataVersion: the stored form is larger than the published one.
            let body = r#"[{"id":"1","subject":"","eventType":"T","eventTime":"2026-01-01T00:00:00Z"}]"#;
            let stored_len = parse_as(&event_grid_topic(), None, body).unwrap().events[0].json.len();
            assert!(stored_len > body.len() - 2);
            let limits = PublishLimits {
                max_events: 10,
                max_event_bytes: stored_len - 1,
            };
            let err =
                PublishedBatch::parse(body.as_bytes(), None, &event_grid_topic(), UnixMillis(0), limits).unwrap_err();
            assert!(err.is_too_large());
        }
    }
}
