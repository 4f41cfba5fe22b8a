//! Rendering a stored event for delivery (the conversion table of
//! behaviour.md#topics-and-publishing, the request of behaviour.md#a-delivery-attempt).
//!
//! An event is stored once, in its topic's form (`StoredFormat`), and rendered per
//! subscription in the subscription's delivery schema:
//!
//! | stored \ delivered | EventGridSchema | CloudEventSchemaV1_0 | CustomInputSchema |
//! |---|---|---|---|
//! | Event Grid event   | as stored | converted | — |
//! | CloudEvent         | — | as stored | — |
//! | custom envelope    | the envelope as stored | converted from the envelope | the envelope's `data` |
//!
//! "As stored" borrows the stored string: nothing is parsed or copied.
//!
//! Event Grid → CloudEvents (also used for custom envelopes):
//! `specversion` "1.0", `id` = id, `source` = topic, `type` = eventType, `subject` =
//! subject (left out when empty: a CloudEvents subject is never empty), `time` =
//! eventTime, `data` = data with `datacontenttype` "application/json" when there is
//! data, and `dataversion` = dataVersion as an extension attribute when it is not
//! empty — the attribute Event Grid's own CloudEvents examples carry. (`dataschema`
//! is not used for it: a data version such as "1.0" is not the absolute URI that
//! attribute must be.) `metadataVersion` has no CloudEvents counterpart and is dropped.

use crate::event::cloudevents::SPEC_VERSION;
use crate::event::raw::{self, RawFields, push_json_str, raw_str};
use crate::header_value;
use crate::schema::{DeliverySchema, StoredFormat};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Content type of Event Grid schema and custom schema deliveries (always an array).
pub const JSON: &str = "application/json; charset=utf-8";
/// Content type of a delivery of exactly one CloudEvent.
pub(crate) const CLOUD_EVENT: &str = "application/cloudevents+json; charset=utf-8";
/// Content type of a delivery of several CloudEvents (an array).
pub(crate) const CLOUD_EVENT_BATCH: &str = "application/cloudevents-batch+json; charset=utf-8";

/// Why a stored event could not be rendered in a delivery schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("an event stored as {from:?} cannot be delivered as {to}")]
    Unsupported { from: StoredFormat, to: DeliverySchema },
    #[error("the stored event is not a JSON object: {0}")]
    Malformed(String),
}

/// One event as it is delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedEvent<'a> {
    json: Cow<'a, str>,
    /// The delivered event, when rendering had to build it anyway.
    value: Option<Value>,
    data_version: Option<String>,
}

impl<'a> RenderedEvent<'a> {
    /// The delivered event's JSON.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The delivered event as a JSON value, parsed only when rendering did not already
    /// build it; `Null` if the stored event was not JSON.
    pub fn into_value(self) -> Value {
        match self.value {
            Some(v) => v,
            None => serde_json::from_str(&self.json).unwrap_or(Value::Null),
        }
    }

    /// The event's `dataVersion` for the `aeg-data-version` header: Event Grid schema
    /// deliveries only.
    pub fn data_version(&self) -> Option<&str> {
        self.data_version.as_deref()
    }
}

/// Renders a stored event (`stored`, written in `format`) in the delivery `schema`.
pub fn render(stored: &str, format: StoredFormat, schema: DeliverySchema) -> Result<RenderedEvent<'_>, RenderError> {
    render_stamped(stored, format, schema, None)
}

/// The same, for an event whose `dataVersion` was stamped in its delivery record
/// (`data_version`): an Event Grid schema delivery then takes it from there and the
/// stored event is not read at all. `None` reads it from the stored event (records
/// written before the stamp).
pub fn render_stamped<'a>(
    stored: &'a str,
    format: StoredFormat,
    schema: DeliverySchema,
    data_version: Option<&str>,
) -> Result<RenderedEvent<'a>, RenderError> {
    use DeliverySchema as D;
    use StoredFormat as S;
    match (format, schema) {
        // An Event Grid event, or a custom event's envelope, delivered as stored.
        (S::EventGrid | S::Custom, D::EventGridSchema) => Ok(RenderedEvent {
            json: Cow::Borrowed(stored),
            value: None,
            data_version: Some(match data_version {
                Some(stamped) => stamped.to_owned(),
                None => data_version_of(stored)?,
            }),
        }),
        (S::CloudEvents, D::CloudEventSchemaV1_0) => Ok(RenderedEvent {
            json: Cow::Borrowed(stored),
            value: None,
            data_version: None,
        }),
        (S::EventGrid | S::Custom, D::CloudEventSchemaV1_0) => Ok(RenderedEvent {
            json: Cow::Owned(cloud_event_json(&fields_of(stored)?)),
            value: None,
            data_version: None,
        }),
        // The published object, as stored: a slice of the envelope.
        (S::Custom, D::CustomInputSchema) => Ok(RenderedEvent {
            json: Cow::Borrowed(fields_of(stored)?.get("data").map_or("null", RawValue::get)),
            value: None,
            data_version: None,
        }),
        (from, to) => Err(RenderError::Unsupported { from, to }),
    }
}

/// The CloudEvent of an Event Grid event (or custom envelope); see the module doc.
pub(crate) fn event_grid_to_cloud_event(mut event: Map<String, Value>) -> Map<String, Value> {
    let mut take = |name: &str| match event.remove(name) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    };
    let mut ce = Map::new();
    ce.insert("specversion".into(), SPEC_VERSION.into());
    ce.insert("id".into(), take("id").into());
    ce.insert("source".into(), take("topic").into());
    ce.insert("type".into(), take("eventType").into());
    let subject = take("subject");
    if !subject.is_empty() {
        ce.insert("subject".into(), subject.into());
    }
    ce.insert("time".into(), take("eventTime").into());
    let data_version = take("dataVersion");
    if !data_version.is_empty() {
        ce.insert("dataversion".into(), data_version.into());
    }
    if let Some(data) = event.remove("data").filter(|d| !d.is_null()) {
        ce.insert("datacontenttype".into(), "application/json".into());
        ce.insert("data".into(), data);
    }
    ce
}

/// The CloudEvent of a stored Event Grid event (or custom envelope), written from its
/// fields as stored: as [`event_grid_to_cloud_event`] builds it, with `data` copied byte
/// for byte.
fn cloud_event_json(event: &RawFields<'_>) -> String {
    let text = |name: &str| event.get(name).and_then(raw_str).unwrap_or_default();
    let data = event.get("data").filter(|d| !raw::is_null(d));
    let mut out = String::with_capacity(data.map_or(0, |d| d.get().len()) + 256);
    out.push_str("{\"specversion\":");
    push_json_str(&mut out, SPEC_VERSION);
    let attributes = [
        ("id", text("id")),
        ("source", text("topic")),
        ("type", text("eventType")),
        ("subject", text("subject")),
        ("time", text("eventTime")),
        ("dataversion", text("dataVersion")),
    ];
    for (name, value) in &attributes {
        // A CloudEvents subject is never empty; an empty data version is left out.
        if value.is_empty() && matches!(*name, "subject" | "dataversion") {
            continue;
        }
        out.push_str(",\"");
        out.push_str(name);
        out.push_str("\":");
        push_json_str(&mut out, value);
    }
    if let Some(data) = data {
        out.push_str(",\"datacontenttype\":\"application/json\",\"data\":");
        out.push_str(data.get());
    }
    out.push('}');
    out
}

/// The top-level fields of a stored event, read without building it.
fn fields_of(stored: &str) -> Result<RawFields<'_>, RenderError> {
    let raw: &RawValue = serde_json::from_str(stored).map_err(|e| RenderError::Malformed(e.to_string()))?;
    RawFields::of(raw).ok_or_else(|| RenderError::Malformed("not an object".into()))
}

/// A delivery request's body and headers that depend on the events in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryBody {
    pub body: String,
    pub content_type: &'static str,
    /// `aeg-data-version`: Event Grid schema deliveries only, from the first event. An
    /// Event Grid schema delivery whose data version no header can carry (an event
    /// stored before publishes checked it) has `Some("")`: the header is sent empty, as
    /// for an event without a data version, rather than failing every attempt.
    pub data_version: Option<String>,
}

/// The request body for `events`, rendered in `schema` (behaviour.md#a-delivery-attempt):
/// Event Grid and custom schema deliveries are a JSON array, even of one event; CloudEvents
/// are one object when there is one event and an array otherwise.
pub fn delivery_body(schema: DeliverySchema, events: &[RenderedEvent<'_>]) -> DeliveryBody {
    let data_version = match schema {
        DeliverySchema::EventGridSchema => events.first().map(|e| sendable_data_version(e.data_version())),
        _ => None,
    };
    let body = match (schema, events) {
        (DeliverySchema::CloudEventSchemaV1_0, [one]) => one.json().to_owned(),
        _ => {
            let mut body = String::with_capacity(events.iter().map(|e| e.json().len() + 1).sum::<usize>() + 2);
            body.push('[');
            for (i, e) in events.iter().enumerate() {
                if i > 0 {
                    body.push(',');
                }
                body.push_str(e.json());
            }
            body.push(']');
            body
        }
    };
    DeliveryBody {
        body,
        content_type: content_type(schema, events.len()),
        data_version,
    }
}

/// An event's data version as the `aeg-data-version` header sends it: `""` when it has
/// none, or one no header can carry ([`header_value::check`]).
pub fn sendable_data_version(data_version: Option<&str>) -> String {
    match data_version {
        Some(v) if header_value::check(v).is_ok() => v.to_owned(),
        _ => String::new(),
    }
}

/// The `Content-Type` of a delivery of `count` events in `schema`.
pub fn content_type(schema: DeliverySchema, count: usize) -> &'static str {
    match schema {
        DeliverySchema::CloudEventSchemaV1_0 if count == 1 => CLOUD_EVENT,
        DeliverySchema::CloudEventSchemaV1_0 => CLOUD_EVENT_BATCH,
        DeliverySchema::EventGridSchema | DeliverySchema::CustomInputSchema => JSON,
    }
}

/// Reads only `dataVersion`, without building the event's tree.
fn data_version_of(stored: &str) -> Result<String, RenderError> {
    #[derive(Deserialize)]
    struct Versioned<'a> {
        #[serde(rename = "dataVersion", borrow, default)]
        data_version: Option<Cow<'a, str>>,
    }
    serde_json::from_str::<Versioned<'_>>(stored)
        .map(|v| v.data_version.map(Cow::into_owned).unwrap_or_default())
        .map_err(|e| RenderError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventGridEvent;
    use crate::event::custom::InputSchemaMapping;
    use crate::names::TopicName;
    use crate::publish::{PublishLimits, PublishedBatch};
    use crate::time::UnixMillis;
    use crate::topic::Topic;
    use proptest::prelude::*;
    use serde_json::json;

    const EG: &str = r#"{"id":"1","topic":"/topics/orders","subject":"/a","eventType":"Created","eventTime":"2026-01-02T03:04:05Z","data":{"k":1},"dataVersion":"2.0","metadataVersion":"1"}"#;

    fn parsed(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn event_grid_as_event_grid_is_the_stored_string() {
        let r = render(EG, StoredFormat::EventGrid, DeliverySchema::EventGridSchema).unwrap();
        assert!(matches!(r.json, Cow::Borrowed(s) if std::ptr::eq(s, EG)));
        assert_eq!(r.data_version(), Some("2.0"));
        assert_eq!(r.clone().into_value()["data"]["k"], 1);
        // Stamped in the record: taken from there, the stored event not read.
        let r = render_stamped(
            EG,
            StoredFormat::EventGrid,
            DeliverySchema::EventGridSchema,
            Some("3.0"),
        )
        .unwrap();
        assert_eq!((r.json(), r.data_version()), (EG, Some("3.0")));
    }

    #[test]
    fn event_grid_as_cloud_events_is_converted() {
        let r = render(EG, StoredFormat::EventGrid, DeliverySchema::CloudEventSchemaV1_0).unwrap();
        assert_eq!(
            parsed(r.json()),
            json!({
                "specversion": "1.0", "id": "1", "source": "/topics/orders", "type": "Created",
                "subject": "/a", "time": "2026-01-02T03:04:05Z", "dataversion": "2.0",
                "datacontenttype": "application/json", "data": {"k": 1}
            })
        );
        assert_eq!(r.data_version(), None);
        assert_eq!(r.clone().into_value()["type"], "Created");
    }

    #[test]
    fn conversion_leaves_out_what_is_empty() {
        let e = r#"{"id":"1","topic":"/topics/t","subject":"","eventType":"T","eventTime":"2026-01-02T03:04:05Z","dataVersion":"","metadataVersion":"1"}"#;
        let r = render(e, StoredFormat::EventGrid, DeliverySchema::CloudEventSchemaV1_0).unwrap();
        assert_eq!(
            parsed(r.json()),
            json!({"specversion": "1.0", "id": "1", "source": "/topics/t", "type": "T", "time": "2026-01-02T03:04:05Z"})
        );
    }

    #[test]
    fn cloud_events_as_cloud_events_is_the_stored_string() {
        let ce = r#"{"specversion":"1.0","id":"1","source":"/s","type":"T","data_base64":"aGk="}"#;
        let r = render(ce, StoredFormat::CloudEvents, DeliverySchema::CloudEventSchemaV1_0).unwrap();
        assert_eq!(r.json(), ce);
        assert!(matches!(r.json, Cow::Borrowed(_)));
        assert_eq!(r.data_version(), None);
        for to in [DeliverySchema::EventGridSchema, DeliverySchema::CustomInputSchema] {
            assert_eq!(
                render(ce, StoredFormat::CloudEvents, to).unwrap_err(),
                RenderError::Unsupported {
                    from: StoredFormat::CloudEvents,
                    to
                }
            );
        }
        assert!(render(EG, StoredFormat::EventGrid, DeliverySchema::CustomInputSchema).is_err());
    }

    fn custom_envelope() -> String {
        let mapping = InputSchemaMapping::from_resource(&json!({
            "inputSchemaMappingType": "Json",
            "properties": {"id": {"sourceField": "no"}, "eventType": {"sourceField": "kind"}, "dataVersion": {"defaultValue": "1"}}
        }))
        .unwrap();
        mapping
            .apply(
                &serde_json::from_str::<Box<serde_json::value::RawValue>>(r#"{"no": "7", "kind": "Sold", "price": 3}"#)
                    .unwrap(),
                "/topics/shop",
                UnixMillis(0),
                &mut String::new,
            )
            .unwrap()
            .json
    }

    #[test]
    fn custom_events_in_each_delivery_schema() {
        let stored = custom_envelope();
        let eg = render(&stored, StoredFormat::Custom, DeliverySchema::EventGridSchema).unwrap();
        assert_eq!(eg.json(), stored);
        assert_eq!(eg.data_version(), Some("1"));
        assert_eq!(
            parsed(eg.json())["data"],
            json!({"no": "7", "kind": "Sold", "price": 3})
        );

        let ce = render(&stored, StoredFormat::Custom, DeliverySchema::CloudEventSchemaV1_0).unwrap();
        assert_eq!(
            parsed(ce.json()),
            json!({
                "specversion": "1.0", "id": "7", "source": "/topics/shop", "type": "Sold",
                "time": "1970-01-01T00:00:00.000Z", "dataversion": "1",
                "datacontenttype": "application/json", "data": {"no": "7", "kind": "Sold", "price": 3}
            })
        );

        let custom = render(&stored, StoredFormat::Custom, DeliverySchema::CustomInputSchema).unwrap();
        assert_eq!(parsed(custom.json()), json!({"no": "7", "kind": "Sold", "price": 3}));
        assert_eq!(custom.clone().into_value()["price"], 3);
        assert_eq!(custom.data_version(), None);
    }

    #[test]
    fn malformed_stored_events_are_errors() {
        assert!(matches!(
            render("[1]", StoredFormat::EventGrid, DeliverySchema::CloudEventSchemaV1_0),
            Err(RenderError::Malformed(_))
        ));
        assert!(matches!(
            render("{", StoredFormat::EventGrid, DeliverySchema::EventGridSchema),
            Err(RenderError::Malformed(_))
        ));
    }

    #[test]
    fn a_stored_data_version_no_header_can_carry_is_sent_empty() {
        let long = "1".repeat(70_000);
        for stamped in [long.as_str(), "1\u{0}", "1\r\nX: y"] {
            let event = render_stamped(
                EG,
                StoredFormat::EventGrid,
                DeliverySchema::EventGridSchema,
                Some(stamped),
            )
            .unwrap();
            let b = delivery_body(DeliverySchema::EventGridSchema, std::slice::from_ref(&event));
            assert_eq!(b.data_version.as_deref(), Some(""), "{stamped:?}");
        }
        assert_eq!(sendable_data_version(Some("2.0")), "2.0");
        assert_eq!(sendable_data_version(None), "");
    }

    #[test]
    fn bodies_and_content_types() {
        let one = render(EG, StoredFormat::EventGrid, DeliverySchema::EventGridSchema).unwrap();
        let b = delivery_body(DeliverySchema::EventGridSchema, std::slice::from_ref(&one));
        assert_eq!(b.body, format!("[{EG}]"));
        assert_eq!(b.content_type, "application/json; charset=utf-8");
        assert_eq!(b.data_version.as_deref(), Some("2.0"));

        let ce = render(EG, StoredFormat::EventGrid, DeliverySchema::CloudEventSchemaV1_0).unwrap();
        let b = delivery_body(DeliverySchema::CloudEventSchemaV1_0, std::slice::from_ref(&ce));
        assert_eq!(b.body, ce.json());
        assert_eq!(b.content_type, "application/cloudevents+json; charset=utf-8");
        assert_eq!(b.data_version, None);
        let b = delivery_body(DeliverySchema::CloudEventSchemaV1_0, &[ce.clone(), ce.clone()]);
        assert_eq!(parsed(&b.body), json!([parsed(ce.json()), parsed(ce.json())]));
        assert_eq!(b.content_type, "application/cloudevents-batch+json; charset=utf-8");

        let stored = custom_envelope();
        let custom = render(&stored, StoredFormat::Custom, DeliverySchema::CustomInputSchema).unwrap();
        let b = delivery_body(DeliverySchema::CustomInputSchema, std::slice::from_ref(&custom));
        assert_eq!(parsed(&b.body), json!([{"no": "7", "kind": "Sold", "price": 3}]));
        assert_eq!(b.content_type, "application/json; charset=utf-8");
        assert_eq!(b.data_version, None);
    }

    #[test]
    fn event_grid_round_trip_keeps_the_published_event() {
        let topic = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        let body = br#"[{"id":"1","subject":"/a","eventType":"Created","eventTime":"2026-01-02T03:04:05Z","data":{"k":1},"dataVersion":"2.0"}]"#;
        let batch = PublishedBatch::parse(
            body,
            Some("application/json"),
            &topic,
            UnixMillis(0),
            PublishLimits::default(),
        )
        .unwrap();
        let r = render(
            &batch.events[0].json,
            StoredFormat::EventGrid,
            DeliverySchema::EventGridSchema,
        )
        .unwrap();
        let e: EventGridEvent = serde_json::from_str(r.json()).unwrap();
        assert_eq!(parsed(r.json()), parsed(EG));
        assert_eq!(e.topic, "/topics/orders");
    }

    fn attribute_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            "[ -~]{0,12}".prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
        ]
    }

    fn data() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<i32>().prop_map(|n| Value::from(f64::from(n) / 4.0)),
            "\\PC{0,10}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("\\PC{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    prop_compose! {
        fn cloud_event()(
            id in "[A-Za-z0-9-]{1,20}",
            source in "(https://example\\.com/[a-z]{0,8}|/[a-z]{1,8}|urn:[a-z]{1,8}:[0-9]{1,4})",
            ty in "[A-Za-z.]{1,20}",
            subject in proptest::option::of("[ -~]{1,16}"),
            time in proptest::option::of(Just("2026-11-21T10:00:00.123Z")),
            payload in proptest::option::of(prop_oneof![
                data().prop_map(|d| ("data", d)),
                "[A-Za-z0-9+/]{0,8}".prop_map(|b| ("data_base64", Value::from(
                    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b)
                ))),
            ]),
            extensions in prop::collection::btree_map("[a-z0-9]{1,20}", attribute_value(), 0..4),
        ) -> Value {
            let mut e = Map::new();
            for (k, v) in extensions {
                e.insert(k, v);
            }
            e.insert("specversion".into(), "1.0".into());
            e.insert("id".into(), id.into());
            e.insert("source".into(), source.into());
            e.insert("type".into(), ty.into());
            if let Some(s) = subject { e.insert("subject".into(), s.into()); }
            if let Some(t) = time { e.insert("time".into(), t.into()); }
            if let Some((k, v)) = payload { e.insert(k.into(), v); }
            Value::Object(e)
        }
    }

    proptest! {
        #[test]
        fn any_valid_cloud_event_is_delivered_as_published(events in prop::collection::vec(cloud_event(), 1..4)) {
            let topic = Topic::from_resource(
                TopicName::parse("orders").unwrap(),
                &json!({"properties": {"inputSchema": "CloudEventSchemaV1_0"}}),
            ).unwrap();
            let body = Value::Array(events.clone()).to_string();
            let batch = PublishedBatch::parse(
                body.as_bytes(),
                Some("application/cloudevents-batch+json; charset=utf-8"),
                &topic,
                UnixMillis(0),
                PublishLimits::default(),
            ).unwrap();
            let rendered: Vec<RenderedEvent<'_>> = batch.events.iter()
                .map(|a| render(&a.json, StoredFormat::CloudEvents, DeliverySchema::CloudEventSchemaV1_0).unwrap())
                .collect();
            for (r, e) in rendered.iter().zip(&events) {
                prop_assert_eq!(&parsed(r.json()), e);
            }
            let delivered = delivery_body(DeliverySchema::CloudEventSchemaV1_0, &rendered);
            let expected = if events.len() == 1 { events[0].clone() } else { Value::Array(events.clone()) };
            prop_assert_eq!(parsed(&delivered.body), expected);
        }
    }
}
