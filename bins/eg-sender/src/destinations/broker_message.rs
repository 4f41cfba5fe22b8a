//! A rendered batch as broker messages, for the message-broker destinations (RabbitMQ,
//! NATS JetStream): one message per event. A broker message has a message id of its own
//! (RabbitMQ's `message_id`, JetStream's `Nats-Msg-Id`), a routing key or subject per
//! message and consumers that take one event at a time; a batch body would give up all of
//! that. So the batch's events are each published, and the attempt succeeds only when the
//! broker confirmed every one of them.
//!
//! Each message carries the headers a webhook request carries (the `aeg-*` set, the
//! subscription's delivery properties and the attempt's W3C `traceparent`/`tracestate`),
//! with dynamic delivery properties read from the message's own event rather than the
//! batch's first one.

use super::batch_events::events_of;
use crate::attempt_trace;
use crate::destination::{RenderedBatch, delivery_headers};
use eg_core::event::raw::{self, RawFields, raw_str};
use eg_core::render::{content_type, sendable_data_version};
use serde_json::value::RawValue;

/// One event of a batch, ready to publish.
pub struct EventMessage {
    /// The event's `id`: the message id a consumer (and JetStream's duplicate window)
    /// recognises a redelivery by.
    pub id: String,
    /// The event as rendered in the subscription's delivery schema, byte for byte as a
    /// webhook would receive it inside its batch.
    pub payload: String,
    /// `aeg-*` headers, then the subscription's delivery properties.
    pub headers: Vec<(String, String)>,
}

/// Why a batch could not be split into messages (only a body the renderer did not
/// write could cause it).
#[derive(Debug, thiserror::Error)]
pub enum NotEvents {
    #[error(transparent)]
    Split(#[from] super::batch_events::NotEvents),
    #[error("an event of the rendered batch is not JSON: {0}")]
    Event(#[from] serde_json::Error),
}

/// The content type of one event's message: `application/json`, or
/// `application/cloudevents+json` for CloudEvents deliveries.
pub fn message_content_type(batch: &RenderedBatch<'_>) -> &'static str {
    content_type(batch.subscription.delivery_schema, 1)
}

/// The batch's events as messages, in order.
pub fn messages(batch: &RenderedBatch<'_>) -> Result<Vec<EventMessage>, NotEvents> {
    events_of(&batch.body.body)?
        .into_iter()
        .enumerate()
        .map(|(index, payload)| {
            let event: &RawValue = serde_json::from_str(payload)?;
            let fields = RawFields::of(event);
            let field = |name: &str| fields.as_ref()?.get(name).and_then(raw_str);
            let id = match field("id") {
                Some(id) if !id.is_empty() => id.into_owned(),
                _ => fallback_id(batch, index),
            };
            Ok(EventMessage {
                headers: headers(batch, payload, &id, field("dataVersion").unwrap_or_default().as_ref()),
                id,
                payload: payload.to_owned(),
            })
        })
        .collect()
}

/// The id of an event without one of its own (Event Grid and CloudEvents events both
/// have one; a custom delivery schema may carry none): the batch id and the event's place
/// in the batch, which stay the same across retries of the same batch.
fn fallback_id(batch: &RenderedBatch<'_>, index: usize) -> String {
    format!("{}.{index}", batch.batch_id)
}

/// What a webhook request carries besides its body, for one event (`id`): Event Grid's
/// `aeg-*` headers and the subscription's delivery properties (a dynamic one whose field
/// the event lacks, or whose value no header can carry, is left out).
fn headers(batch: &RenderedBatch<'_>, event: &str, id: &str, data_version: &str) -> Vec<(String, String)> {
    let subscription = batch.subscription;
    let mut headers = vec![
        ("aeg-event-type".to_owned(), "Notification".to_owned()),
        (
            "aeg-subscription-name".to_owned(),
            subscription.name.as_str().to_ascii_uppercase(),
        ),
        ("aeg-delivery-count".to_owned(), batch.delivery_count.to_string()),
        ("aeg-metadata-version".to_owned(), "1".to_owned()),
    ];
    if batch.body.data_version.is_some() {
        // An Event Grid schema delivery: each message has its own event's version.
        headers.push(("aeg-data-version".to_owned(), sendable_data_version(Some(data_version))));
    }
    headers.extend(delivery_headers(subscription, event, id));
    if let Some(job) = &batch.replay_job {
        headers.push((eg_core::replay::REPLAY_HEADER.to_owned(), job.clone()));
    }
    // Every message of the batch is a child of the one attempt that publishes it.
    attempt_trace::add_headers(&mut headers, batch.trace.as_ref());
    headers
}

/// A scalar field of `event` (its JSON) by its dotted path (`subject`, `data.region`),
/// read as dynamic delivery properties read theirs.
pub fn event_field(event: &str, path: &str) -> Option<String> {
    let event: &RawValue = serde_json::from_str(event).ok()?;
    raw::scalar_text(raw::field_at(event, path)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_subscriptions::{batch_of, subscription_with};
    use serde_json::json;

    #[test]
    fn each_event_is_a_message_with_its_own_id_headers_and_bytes() {
        let subscription = subscription_with(json!({
            "endpointType": "RabbitMQ",
            "properties": {"connection": "main", "exchange": "x", "routingKey": "k",
                "deliveryAttributeMappings": [
                    {"name": "region", "type": "Dynamic", "properties": {"sourceField": "data.region"}},
                    {"name": "team", "type": "Static", "properties": {"value": "billing"}}
                ]}
        }));
        let body =
            r#"[{"id":"a","dataVersion":"1","data":{"region":"eu", "z":1}},{"id":"b","dataVersion":"2","data":{}}]"#;
        let batch = batch_of(&subscription, body, Some("1"));
        let messages = messages(&batch).unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].id, "a");
        assert_eq!(
            messages[0].payload,
            r#"{"id":"a","dataVersion":"1","data":{"region":"eu", "z":1}}"#
        );
        let header = |m: &EventMessage, name: &str| m.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        assert_eq!(header(&messages[0], "region").as_deref(), Some("eu"));
        assert_eq!(header(&messages[1], "region"), None, "the second event has no region");
        assert_eq!(header(&messages[1], "team").as_deref(), Some("billing"));
        assert_eq!(header(&messages[1], "aeg-data-version").as_deref(), Some("2"));
        assert_eq!(
            header(&messages[0], "aeg-subscription-name").as_deref(),
            Some("BILLING")
        );
        assert_eq!(header(&messages[0], "aeg-delivery-count").as_deref(), Some("3"));
        assert_eq!(message_content_type(&batch), "application/json; charset=utf-8");
    }

    /// A message carries only what a header can: each event's own dynamic value is
    /// checked, and a data version stored before publishes checked it is sent empty.
    #[test]
    fn a_value_no_header_can_carry_is_left_out_of_that_message_only() {
        let subscription = subscription_with(json!({
            "endpointType": "RabbitMQ",
            "properties": {"connection": "main", "exchange": "x", "routingKey": "k",
                "deliveryAttributeMappings": [
                    {"name": "region", "type": "Dynamic", "properties": {"sourceField": "data.region"}}
                ]}
        }));
        let events = json!([
            {"id": "a", "dataVersion": "1", "data": {"region": "r".repeat(100 * 1024)}},
            {"id": "b", "dataVersion": "1\r\nX: y", "data": {"region": "eu\u{0}"}},
            {"id": "c", "dataVersion": "3", "data": {"region": "us"}},
        ]);
        let batch = batch_of(&subscription, &events.to_string(), Some("1"));
        let messages = messages(&batch).unwrap();
        let header = |m: &EventMessage, name: &str| m.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        let regions: Vec<Option<String>> = messages.iter().map(|m| header(m, "region")).collect();
        assert_eq!(regions, [None, None, Some("us".to_owned())]);
        let versions: Vec<Option<String>> = messages.iter().map(|m| header(m, "aeg-data-version")).collect();
        assert_eq!(
            versions,
            [Some("1".to_owned()), Some(String::new()), Some("3".to_owned())]
        );
    }

    /// Each message of a batch carries the attempt's context, as a webhook request does;
    /// a `traceparent` the subscription sets itself is kept.
    #[test]
    fn every_message_carries_the_attempts_trace_context() {
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01";
        let subscription = subscription_with(json!({
            "endpointType": "NatsJetStream", "properties": {"connection": "main", "subject": "s"}
        }));
        let mut batch = batch_of(&subscription, r#"[{"id":"a"},{"id":"b"}]"#, Some("1"));
        batch.trace = eg_core::TraceContext::parse(traceparent, Some("k=v"));
        let header = |m: &EventMessage, name: &str| m.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        for message in messages(&batch).unwrap() {
            assert_eq!(header(&message, "traceparent").as_deref(), Some(traceparent));
            assert_eq!(header(&message, "tracestate").as_deref(), Some("k=v"));
        }
        batch.trace = None;
        assert!(
            messages(&batch)
                .unwrap()
                .iter()
                .all(|m| header(m, "traceparent").is_none())
        );

        let own = subscription_with(json!({
            "endpointType": "NatsJetStream", "properties": {"connection": "main", "subject": "s",
                "deliveryAttributeMappings": [
                    {"name": "traceparent", "type": "Static", "properties": {"value": "mine"}}
                ]}
        }));
        let mut batch = batch_of(&own, r#"[{"id":"a"}]"#, Some("1"));
        batch.trace = eg_core::TraceContext::parse(traceparent, Some("k=v"));
        let message = &messages(&batch).unwrap()[0];
        assert_eq!(header(message, "traceparent").as_deref(), Some("mine"));
        assert_eq!(header(message, "tracestate"), None);
    }

    #[test]
    fn a_lone_cloud_event_is_one_message_and_an_event_without_id_gets_a_stable_one() {
        let subscription = subscription_with(json!({
            "endpointType": "NatsJetStream", "properties": {"connection": "main", "subject": "s"}
        }));
        let batch = batch_of(&subscription, r#"{"specversion":"1.0","id":"ce-1"}"#, None);
        let messages = messages(&batch).unwrap();
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].id, "ce-1");
        assert!(messages[0].headers.iter().all(|(n, _)| n != "aeg-data-version"));

        let batch = batch_of(&subscription, r#"[{"k":1},{"k":2}]"#, None);
        let ids: Vec<String> = super::messages(&batch).unwrap().into_iter().map(|m| m.id).collect();
        assert_eq!(ids, ["msg_1.0", "msg_1.1"]);
        assert!(super::messages(&batch_of(&subscription, "[{", None)).is_err());
    }

    #[test]
    fn event_fields_are_read_by_dotted_path() {
        let event = r#"{"subject": "/orders/1", "data": {"n": 5, "o": {}}}"#;
        assert_eq!(event_field(event, "subject").as_deref(), Some("/orders/1"));
        assert_eq!(event_field(event, "data.n").as_deref(), Some("5"));
        assert_eq!(event_field(event, "data.o"), None);
        assert_eq!(event_field(event, "missing"), None);
    }
}
