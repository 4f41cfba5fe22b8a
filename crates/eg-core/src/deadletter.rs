//! Dead-letter records (behaviour.md#dead-lettering) and where they are written.
//!
//! A record is the event with the dead-letter fields beside it, in the form that
//! matches what the subscription was receiving (`DeadLetterFormat`):
//! - Event Grid schema: `deadLetterReason`, `deliveryAttempts`, `lastDeliveryOutcome`,
//!   `lastHttpStatusCode` (when there was one), `publishTime`, `lastDeliveryAttemptTime`
//!   beside the event's fields;
//! - CloudEvents: the same names in lower case beside the CloudEvent's attributes (the
//!   event as the subscription received it, converted if it was stored otherwise);
//! - custom schema: the Event Grid form of the stored envelope, i.e. the envelope's
//!   fields, the dead-letter fields and the object as published in `data`;
//! - namespace-topic profile (behaviour.md#namespace-topics):
//!   `{"deadLetterProperties":{"deadletterreason","deliveryattempts","deliveryresult",
//!   "publishutc","deliveryattemptutc"},"event":{…the CloudEvent…}}`. The reason and
//!   result are the same codes the other forms use (`MaxDeliveryAttemptsExceeded`,
//!   `NotFound`, …) rather than the prose of seed 002, so every form is read the same way.
//!
//! The last attempt time falls back to the dead-lettering time when no attempt was
//! made, and the last outcome to `Canceled`.

use crate::TraceContext;
use crate::delivery::Delivery;
use crate::fate::DeadLetterReason;
use crate::outcome::OutcomeName;
use crate::profile::DeliveryProfile;
use crate::render;
use crate::schema::{DeliverySchema, StoredFormat};
use crate::subscription::{DeadLetterDestination, DeadLetterStore, Subscription};
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

fn outcome_for_every_tier<S: serde::Serializer>(outcome: &Option<OutcomeName>, s: S) -> Result<S::Ok, S::Error> {
    outcome.map(OutcomeName::known_to_every_tier).serialize(s)
}

/// Everything the dead-letter worker needs besides the event itself. It travels
/// through Redis from whichever tier decided to dead-letter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterEntry {
    pub container_name: String,
    /// The store holding the container (the local directory in entries written before
    /// object stores existed).
    #[serde(default, skip_serializing_if = "DeadLetterStore::is_local_directory")]
    pub store: DeadLetterStore,
    /// The subscription's name as the user spelled it.
    pub subscription: String,
    pub topic: String,
    pub delivery_id: String,
    pub reason: DeadLetterReason,
    pub delivery_attempts: u32,
    /// Written as a name every tier reads ([`OutcomeName::known_to_every_tier`]): an
    /// older dead-letter worker would refuse the whole entry otherwise. So a
    /// `TokenUnavailable` attempt is dead-lettered as `GenericError`; its history keeps
    /// the real name.
    #[serde(serialize_with = "outcome_for_every_tier")]
    pub last_outcome: Option<OutcomeName>,
    pub last_http_status_code: Option<u16>,
    pub publish_time: UnixMillis,
    pub last_attempt_time: Option<UnixMillis>,
    pub dead_lettered_at: UnixMillis,
    /// The record's form; absent (Event Grid) in entries written before it existed.
    #[serde(default, skip_serializing_if = "DeadLetterFormat::is_event_grid")]
    pub format: DeadLetterFormat,
    /// How the event beside the entry is stored, so a redrive can queue it again as is.
    #[serde(default, skip_serializing_if = "StoredFormat::is_event_grid")]
    pub stored_format: StoredFormat,
    /// The event's own id (empty in entries written before it existed: read the event).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub event_id: String,
    /// The W3C trace context stored with the delivery, so the dead-letter write continues
    /// the event's trace (traces.md). Absent for untraced events and in entries written
    /// before it existed; an older worker ignores it. Never part of the record written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

/// Where a redriven event goes: its subscription, and the new delivery's identifiers.
#[derive(Debug, Clone, Copy)]
pub struct RedriveTarget<'a> {
    pub topic_key: &'a str,
    pub subscription_key: &'a str,
    pub delivery_id: &'a str,
    pub event_key: &'a str,
}

/// The `id` of a stored event (every stored form has one at the top level).
pub fn stored_event_id(event_json: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct WithId {
        id: String,
    }
    serde_json::from_str::<WithId>(event_json).ok().map(|e| e.id)
}

/// The form of a dead-letter record (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum DeadLetterFormat {
    /// The stored Event Grid event with the camelCase fields beside it.
    #[default]
    EventGrid,
    /// The CloudEvent, rendered from the event stored `from`, with lower-case fields.
    CloudEvents { from: StoredFormat },
    /// The stored custom envelope with the camelCase fields beside it.
    Custom,
    /// `{"deadLetterProperties":{…},"event":<the CloudEvent rendered from the stored event>}`.
    NamespaceTopic { from: StoredFormat },
}

impl DeadLetterFormat {
    /// The form for an event stored as `stored`, delivered in `schema` under `profile`.
    pub(crate) fn choose(stored: StoredFormat, schema: DeliverySchema, profile: DeliveryProfile) -> Self {
        match (profile, schema, stored) {
            (DeliveryProfile::NamespaceTopic, _, from) => Self::NamespaceTopic { from },
            (_, DeliverySchema::CloudEventSchemaV1_0, from) => Self::CloudEvents { from },
            (_, DeliverySchema::CustomInputSchema, _) | (_, _, StoredFormat::Custom) => Self::Custom,
            _ => Self::EventGrid,
        }
    }

    pub(crate) fn is_event_grid(&self) -> bool {
        *self == Self::EventGrid
    }
}

impl DeadLetterEntry {
    /// The entry for `delivery` of `subscription`, dead-lettered into `destination` now.
    pub fn for_delivery(
        delivery: &Delivery,
        subscription: &Subscription,
        destination: &DeadLetterDestination,
        reason: DeadLetterReason,
        now: UnixMillis,
    ) -> Self {
        Self {
            container_name: destination.container_name.clone(),
            store: destination.store.clone(),
            subscription: subscription.name.as_str().to_owned(),
            topic: subscription.topic.as_str().to_owned(),
            delivery_id: delivery.id.clone(),
            reason,
            delivery_attempts: delivery.attempts,
            last_outcome: delivery.last.map(|l| l.outcome),
            last_http_status_code: delivery.last.and_then(|l| l.status),
            publish_time: delivery.published_at,
            last_attempt_time: delivery.last.map(|l| l.at),
            dead_lettered_at: now,
            format: DeadLetterFormat::choose(delivery.format, subscription.delivery_schema, subscription.profile),
            stored_format: delivery.format,
            event_id: delivery.event_id.clone(),
            traceparent: delivery.trace.as_ref().map(TraceContext::traceparent),
            tracestate: delivery.trace.as_ref().and_then(|t| t.tracestate().map(str::to_owned)),
        }
    }

    /// The trace context stored with the dead-lettered delivery, if any (and well formed).
    pub fn trace(&self) -> Option<TraceContext> {
        TraceContext::parse(self.traceparent.as_deref()?, self.tracestate.as_deref())
    }

    /// A fresh delivery of the dead-lettered event (a redrive): a new delivery id and
    /// event key, no attempts yet, its time-to-live counting from `now`; the event itself,
    /// and so its id, are unchanged.
    pub fn redelivery(
        &self,
        target: RedriveTarget<'_>,
        event_id: String,
        now: UnixMillis,
        catalog_version: u64,
    ) -> Delivery {
        Delivery::new(
            target.delivery_id.to_owned(),
            target.event_key.to_owned(),
            target.topic_key.to_owned(),
            target.subscription_key.to_owned(),
            now,
        )
        .with_format(self.stored_format)
        .matched_at(catalog_version)
        .for_event(event_id)
    }

    /// The record written to the destination for the event stored as `event_json`.
    pub fn record(&self, event_json: &str) -> Value {
        let outcome = self.last_outcome.map_or("Canceled", OutcomeName::as_str);
        let attempt_time = self.last_attempt_time.unwrap_or(self.dead_lettered_at).to_rfc3339();
        match self.format {
            DeadLetterFormat::EventGrid | DeadLetterFormat::Custom => {
                let mut record = stored_object(event_json);
                record.insert("deadLetterReason".into(), self.reason.as_str().into());
                record.insert("deliveryAttempts".into(), self.delivery_attempts.into());
                record.insert("lastDeliveryOutcome".into(), outcome.into());
                if let Some(code) = self.last_http_status_code {
                    record.insert("lastHttpStatusCode".into(), code.into());
                }
                record.insert("publishTime".into(), self.publish_time.to_rfc3339().into());
                record.insert("lastDeliveryAttemptTime".into(), attempt_time.into());
                Value::Object(record)
            }
            DeadLetterFormat::CloudEvents { from } => {
                let mut record = cloud_event(event_json, from);
                record.insert("deadletterreason".into(), self.reason.as_str().into());
                record.insert("deliveryattempts".into(), self.delivery_attempts.into());
                record.insert("lastdeliveryoutcome".into(), outcome.into());
                if let Some(code) = self.last_http_status_code {
                    record.insert("lasthttpstatuscode".into(), code.into());
                }
                record.insert("publishtime".into(), self.publish_time.to_rfc3339().into());
                record.insert("lastdeliveryattempttime".into(), attempt_time.into());
                Value::Object(record)
            }
            DeadLetterFormat::NamespaceTopic { from } => {
                let mut properties = Map::new();
                properties.insert("deadletterreason".into(), self.reason.as_str().into());
                properties.insert("deliveryattempts".into(), self.delivery_attempts.into());
                properties.insert("deliveryresult".into(), outcome.into());
                properties.insert("publishutc".into(), self.publish_time.to_rfc3339().into());
                properties.insert("deliveryattemptutc".into(), attempt_time.into());
                let mut record = Map::new();
                record.insert("deadLetterProperties".into(), Value::Object(properties));
                record.insert("event".into(), Value::Object(cloud_event(event_json, from)));
                Value::Object(record)
            }
        }
    }

    /// The folder, inside the record's container, of a file holding this record:
    /// `<SUBSCRIPTION>/YYYY/M/D/H` (UTC, not zero-padded) — Event Grid's blob layout.
    pub fn folder(&self) -> Vec<String> {
        use chrono::{Datelike, Timelike};
        let at = self.dead_lettered_at.to_datetime();
        vec![
            self.subscription.to_ascii_uppercase(),
            at.year().to_string(),
            at.month().to_string(),
            at.day().to_string(),
            at.hour().to_string(),
        ]
    }
}

/// The stored event as an object. Stored events are always objects; keep whatever it
/// is rather than lose it.
fn stored_object(event_json: &str) -> Map<String, Value> {
    match serde_json::from_str::<Value>(event_json) {
        Ok(Value::Object(map)) => map,
        Ok(other) => Map::from_iter([("data".to_owned(), other)]),
        Err(_) => Map::from_iter([("data".to_owned(), Value::String(event_json.to_owned()))]),
    }
}

/// The CloudEvent the subscription was sent, or the stored event if it cannot be rendered.
fn cloud_event(event_json: &str, from: StoredFormat) -> Map<String, Value> {
    match render::render(event_json, from, DeliverySchema::CloudEventSchemaV1_0) {
        Ok(rendered) => match rendered.into_value() {
            Value::Object(map) => map,
            _ => stored_object(event_json),
        },
        Err(_) => stored_object(event_json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_entry_names_its_last_outcome_as_every_tier_reads_it() {
        let mut e = entry();
        e.last_outcome = Some(OutcomeName::TokenUnavailable);
        let raw = serde_json::to_value(&e).unwrap();
        assert_eq!(raw["lastOutcome"], "GenericError", "an older worker reads it: {raw}");
    }

    fn entry() -> DeadLetterEntry {
        DeadLetterEntry {
            container_name: "dl".into(),
            store: Default::default(),
            subscription: "Billing".into(),
            topic: "orders".into(),
            delivery_id: "d".into(),
            reason: DeadLetterReason::MaxDeliveryAttemptsExceeded,
            delivery_attempts: 3,
            last_outcome: Some(OutcomeName::GenericError),
            last_http_status_code: Some(500),
            publish_time: UnixMillis(0),
            last_attempt_time: Some(UnixMillis(1_000)),
            // 2026-03-04T05:06:07Z
            dead_lettered_at: UnixMillis(1_772_600_767_000),
            format: DeadLetterFormat::EventGrid,
            stored_format: StoredFormat::EventGrid,
            event_id: "1".into(),
            traceparent: None,
            tracestate: None,
        }
    }

    #[test]
    fn record_puts_dead_letter_fields_beside_the_event() {
        let r = entry().record(r#"{"id":"1","eventType":"A","data":{"k":1}}"#);
        assert_eq!(r["id"], "1");
        assert_eq!(r["data"], json!({"k":1}));
        assert_eq!(r["deadLetterReason"], "MaxDeliveryAttemptsExceeded");
        assert_eq!(r["deliveryAttempts"], 3);
        assert_eq!(r["lastDeliveryOutcome"], "GenericError");
        assert_eq!(r["lastHttpStatusCode"], 500);
        assert_eq!(r["publishTime"], "1970-01-01T00:00:00.000Z");
        assert_eq!(r["lastDeliveryAttemptTime"], "1970-01-01T00:00:01.000Z");
    }

    const CLOUD_EVENT: &str = r#"{"specversion":"1.0","id":"c1","source":"/orders","type":"Created","subject":"o/1","comexampleextension1":"v","data":{"k":1}}"#;
    const EVENT_GRID: &str = r#"{"id":"1","topic":"/topics/orders","subject":"/a","eventType":"Created","eventTime":"2026-01-02T03:04:05Z","data":{"k":1},"dataVersion":"2","metadataVersion":"1"}"#;

    fn keys(v: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        keys
    }

    #[test]
    fn cloud_events_records_use_lower_case_names() {
        let e = DeadLetterEntry {
            format: DeadLetterFormat::CloudEvents {
                from: StoredFormat::CloudEvents,
            },
            ..entry()
        };
        let r = e.record(CLOUD_EVENT);
        assert_eq!(
            r,
            json!({
                "specversion": "1.0", "id": "c1", "source": "/orders", "type": "Created", "subject": "o/1",
                "comexampleextension1": "v", "data": {"k": 1},
                "deadletterreason": "MaxDeliveryAttemptsExceeded",
                "deliveryattempts": 3,
                "lastdeliveryoutcome": "GenericError",
                "lasthttpstatuscode": 500,
                "publishtime": "1970-01-01T00:00:00.000Z",
                "lastdeliveryattempttime": "1970-01-01T00:00:01.000Z",
            })
        );
    }

    #[test]
    fn cloud_events_records_of_event_grid_events_hold_the_converted_event() {
        let e = DeadLetterEntry {
            format: DeadLetterFormat::CloudEvents {
                from: StoredFormat::EventGrid,
            },
            last_http_status_code: None,
            ..entry()
        };
        let r = e.record(EVENT_GRID);
        assert_eq!(r["specversion"], "1.0");
        assert_eq!(r["source"], "/topics/orders");
        assert_eq!(r["type"], "Created");
        assert_eq!(r["dataversion"], "2");
        assert_eq!(r["data"], json!({"k": 1}));
        assert_eq!(r["deadletterreason"], "MaxDeliveryAttemptsExceeded");
        assert!(r.get("lasthttpstatuscode").is_none());
        assert!(r.get("eventType").is_none());
    }

    #[test]
    fn custom_records_are_the_envelope_with_the_fields() {
        let envelope = r#"{"id":"8b","topic":"/topics/shop","subject":"subjectDefault","eventType":"myEventType","eventTime":"2020-08-13T18:11:29.4121391Z","data":{"prop1":"my property","prop2":5},"dataVersion":"1.0","metadataVersion":"1"}"#;
        let e = DeadLetterEntry {
            format: DeadLetterFormat::Custom,
            ..entry()
        };
        let r = e.record(envelope);
        assert_eq!(
            keys(&r),
            [
                "data",
                "dataVersion",
                "deadLetterReason",
                "deliveryAttempts",
                "eventTime",
                "eventType",
                "id",
                "lastDeliveryAttemptTime",
                "lastDeliveryOutcome",
                "lastHttpStatusCode",
                "metadataVersion",
                "publishTime",
                "subject",
                "topic"
            ]
        );
        assert_eq!(r["data"], json!({"prop1": "my property", "prop2": 5}));
    }

    #[test]
    fn namespace_topic_records_wrap_the_cloud_event() {
        let e = DeadLetterEntry {
            format: DeadLetterFormat::NamespaceTopic {
                from: StoredFormat::CloudEvents,
            },
            last_outcome: Some(OutcomeName::NotFound),
            last_http_status_code: Some(404),
            ..entry()
        };
        assert_eq!(
            e.record(CLOUD_EVENT),
            json!({
                "deadLetterProperties": {
                    "deadletterreason": "MaxDeliveryAttemptsExceeded",
                    "deliveryattempts": 3,
                    "deliveryresult": "NotFound",
                    "publishutc": "1970-01-01T00:00:00.000Z",
                    "deliveryattemptutc": "1970-01-01T00:00:01.000Z",
                },
                "event": serde_json::from_str::<Value>(CLOUD_EVENT).unwrap(),
            })
        );
    }

    #[test]
    fn never_attempted_events_fall_back_to_canceled_and_now() {
        let e = DeadLetterEntry {
            last_outcome: None,
            last_http_status_code: None,
            last_attempt_time: None,
            delivery_attempts: 0,
            reason: DeadLetterReason::TimeToLiveExceeded,
            ..entry()
        };
        let r = e.record(EVENT_GRID);
        assert_eq!(r["lastDeliveryOutcome"], "Canceled");
        assert_eq!(r["lastDeliveryAttemptTime"], "2026-03-04T05:06:07.000Z");
        assert_eq!(r["deadLetterReason"], "TimeToLiveExceeded");
        assert!(r.get("lastHttpStatusCode").is_none());
    }

    #[test]
    fn unrenderable_events_are_kept_rather_than_lost() {
        let e = DeadLetterEntry {
            format: DeadLetterFormat::NamespaceTopic {
                from: StoredFormat::EventGrid,
            },
            ..entry()
        };
        assert_eq!(e.record("not json")["event"], json!({"data": "not json"}));
    }

    #[test]
    fn the_format_follows_profile_schema_and_stored_form() {
        use DeliverySchema as D;
        use StoredFormat as S;
        let choose = DeadLetterFormat::choose;
        let custom_topic = DeliveryProfile::CustomTopic;
        assert_eq!(
            choose(S::EventGrid, D::EventGridSchema, custom_topic),
            DeadLetterFormat::EventGrid
        );
        assert_eq!(
            choose(S::EventGrid, D::CloudEventSchemaV1_0, custom_topic),
            DeadLetterFormat::CloudEvents { from: S::EventGrid }
        );
        assert_eq!(
            choose(S::CloudEvents, D::CloudEventSchemaV1_0, custom_topic),
            DeadLetterFormat::CloudEvents { from: S::CloudEvents }
        );
        assert_eq!(
            choose(S::Custom, D::CustomInputSchema, custom_topic),
            DeadLetterFormat::Custom
        );
        assert_eq!(
            choose(S::Custom, D::EventGridSchema, custom_topic),
            DeadLetterFormat::Custom
        );
        assert_eq!(
            choose(S::Custom, D::CloudEventSchemaV1_0, custom_topic),
            DeadLetterFormat::CloudEvents { from: S::Custom }
        );
        assert_eq!(
            choose(S::CloudEvents, D::CloudEventSchemaV1_0, DeliveryProfile::NamespaceTopic),
            DeadLetterFormat::NamespaceTopic { from: S::CloudEvents }
        );
    }

    #[test]
    fn for_delivery_reads_the_subscription() {
        use crate::names::{SubscriptionName, TopicName};
        use crate::topic::Topic;
        let topic = Topic::from_resource(
            TopicName::parse("orders").unwrap(),
            &json!({"properties": {"deliveryProfile": "NamespaceTopic"}}),
        )
        .unwrap();
        let sub = Subscription::from_resource(
            &topic,
            SubscriptionName::parse("Billing").unwrap(),
            &json!({"properties": {"destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://h.example/in"}}}}),
            UnixMillis(0),
        )
        .unwrap();
        assert_eq!(sub.delivery_schema, DeliverySchema::CloudEventSchemaV1_0);
        let d = Delivery::new("d".into(), "e".into(), "orders".into(), "billing".into(), UnixMillis(5))
            .with_format(StoredFormat::CloudEvents);
        let e = DeadLetterEntry::for_delivery(
            &d,
            &sub,
            &DeadLetterDestination::new("dlq").unwrap(),
            DeadLetterReason::NonRetriableFailure,
            UnixMillis(9),
        );
        assert_eq!(
            e.format,
            DeadLetterFormat::NamespaceTopic {
                from: StoredFormat::CloudEvents
            }
        );
        assert_eq!(e.subscription, "Billing");
    }

    /// The dead-letter worker continues the event's trace from its entry; the record
    /// written is unchanged, and an entry without a context stores nothing for it.
    #[test]
    fn an_entry_keeps_its_deliverys_trace_context_out_of_the_record() {
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut d = Delivery::new("d".into(), "e".into(), "orders".into(), "billing".into(), UnixMillis(5));
        d.trace = TraceContext::parse(traceparent, Some("k=v"));
        let topic = crate::topic::Topic::from_resource(crate::TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        let hook = json!({"properties": {"destination": {"endpointType": "WebHook",
            "properties": {"endpointUrl": "https://h.example/in"}}}});
        let sub = Subscription::from_resource(
            &topic,
            crate::SubscriptionName::parse("billing").unwrap(),
            &hook,
            UnixMillis(0),
        )
        .unwrap();
        let dlq = DeadLetterDestination::new("dlq").unwrap();
        let e = DeadLetterEntry::for_delivery(&d, &sub, &dlq, DeadLetterReason::NonRetriableFailure, UnixMillis(9));
        let raw = serde_json::to_string(&e).unwrap();
        let back: DeadLetterEntry = serde_json::from_str(&raw).unwrap();
        assert_eq!(back.trace(), d.trace);
        let record = e.record(r#"{"id":"1","data":{}}"#).to_string();
        assert!(!record.contains(traceparent), "{record}");

        d.trace = None;
        let e = DeadLetterEntry::for_delivery(&d, &sub, &dlq, DeadLetterReason::NonRetriableFailure, UnixMillis(9));
        assert!(!serde_json::to_string(&e).unwrap().contains("trace"));
        assert_eq!(e.trace(), None);
    }

    #[test]
    fn entries_round_trip_and_old_entries_still_decode() {
        let e = DeadLetterEntry {
            format: DeadLetterFormat::CloudEvents {
                from: StoredFormat::Custom,
            },
            ..entry()
        };
        let raw = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<DeadLetterEntry>(&raw).unwrap(), e);
        let old = serde_json::to_string(&entry()).unwrap();
        assert!(!old.contains("format"), "{old}");
        let mut legacy: Value = serde_json::from_str(&old).unwrap();
        legacy.as_object_mut().unwrap().remove("format");
        assert_eq!(serde_json::from_value::<DeadLetterEntry>(legacy).unwrap(), entry());
    }

    #[test]
    fn a_redelivery_starts_afresh_with_the_same_event() {
        let e = DeadLetterEntry {
            stored_format: StoredFormat::CloudEvents,
            ..entry()
        };
        let target = RedriveTarget {
            topic_key: "orders",
            subscription_key: "billing",
            delivery_id: "d2",
            event_key: "k2",
        };
        let d = e.redelivery(target, "1".into(), UnixMillis(9_000), 7);
        assert_eq!((d.attempts, d.published_at, d.last), (0, UnixMillis(9_000), None));
        assert_eq!(
            (d.id.as_str(), d.event_key.as_str(), d.event_id.as_str()),
            ("d2", "k2", "1")
        );
        assert_eq!((d.topic.as_str(), d.subscription.as_str()), ("orders", "billing"));
        assert_eq!((d.format, d.catalog_version), (StoredFormat::CloudEvents, 7));
    }

    #[test]
    fn stored_event_ids_are_read_from_any_stored_form() {
        assert_eq!(stored_event_id(EVENT_GRID).as_deref(), Some("1"));
        assert_eq!(stored_event_id(CLOUD_EVENT).as_deref(), Some("c1"));
        assert_eq!(stored_event_id("not json"), None);
    }

    #[test]
    fn folder_is_laid_out_like_a_blob_container() {
        assert_eq!(entry().folder(), ["BILLING", "2026", "3", "4", "5"]);
    }
}
