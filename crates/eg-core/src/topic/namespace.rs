//! Namespace topics in Event Grid's namespace resource JSON
//! (`Microsoft.EventGrid/namespaces/topics`): `publisherType: Custom`,
//! `inputSchema: CloudEventSchemaV1_0` and `eventRetentionInDays`. eg has no namespace
//! object: a namespace topic is an eg topic with the `NamespaceTopic` profile, so the
//! rest of eg (keys, publish, subscriptions) treats it like any other topic.

use super::Topic;
use crate::json::json_type;
use serde::Deserialize;
use serde_json::{Value, json};

/// `eventRetentionInDays`: 1–7 days, 1 by default (Event Grid's quota page and model).
pub(crate) const MIN_RETENTION_DAYS: u8 = 1;
pub(crate) const MAX_RETENTION_DAYS: u8 = 7;
pub(crate) const DEFAULT_RETENTION_DAYS: u8 = 1;

/// `properties.publisherType` as written: Event Grid knows only `Custom`, and giving it
/// makes a namespace topic.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
pub(super) struct PublisherType;

impl TryFrom<Value> for PublisherType {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        match value {
            Value::String(s) if s.eq_ignore_ascii_case("Custom") => Ok(Self),
            Value::String(s) => Err(format!("must be \"Custom\", got {s:?}")),
            other => Err(format!("must be the string \"Custom\", got {}", json_type(&other))),
        }
    }
}

/// `properties.eventRetentionInDays` as written; giving it makes a namespace topic.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
pub(super) struct RetentionDays(pub(super) u8);

impl TryFrom<Value> for RetentionDays {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        value
            .as_u64()
            .filter(|d| (u64::from(MIN_RETENTION_DAYS)..=u64::from(MAX_RETENTION_DAYS)).contains(d))
            .and_then(|d| u8::try_from(d).ok())
            .map(Self)
            .ok_or_else(|| {
                format!(
                    "must be a whole number of days between {MIN_RETENTION_DAYS} and {MAX_RETENTION_DAYS}, got {value}"
                )
            })
    }
}

/// The namespace topic as `GET` shows it. Besides Event Grid's fields it keeps what eg
/// showed before namespace topics had their own form (`endpoint`, `deliveryProfile`),
/// so clients reading those keep working; a `PUT` of this answer writes the same topic.
pub(super) fn resource(topic: &Topic, public_base: &str) -> Value {
    let retention_days = topic
        .event_retention()
        .map_or(u64::from(DEFAULT_RETENTION_DAYS), |r| r.as_secs() / 86_400);
    json!({
        "id": topic.id(),
        "name": topic.name,
        "type": "Microsoft.EventGrid/namespaces/topics",
        "properties": {
            "publisherType": "Custom",
            "inputSchema": topic.input_schema,
            "eventRetentionInDays": retention_days,
            "provisioningState": "Succeeded",
            "endpoint": topic.endpoint(public_base),
            "deliveryProfile": topic.profile,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_error::InvalidField;
    use crate::names::TopicName;
    use crate::profile::DeliveryProfile;
    use crate::schema::InputSchema;
    use std::time::Duration;

    fn parse(body: Value) -> Result<Topic, InvalidField> {
        Topic::from_resource(TopicName::parse("orders").unwrap(), &body)
    }

    const DAY: Duration = Duration::from_secs(24 * 3600);

    #[test]
    fn event_grids_example_is_accepted_verbatim() {
        let t = parse(json!({"properties": {
            "publisherType": "Custom",
            "inputSchema": "CloudEventSchemaV1_0",
            "eventRetentionInDays": 1
        }}))
        .unwrap();
        assert_eq!(t.profile, DeliveryProfile::NamespaceTopic);
        assert_eq!(t.input_schema, InputSchema::CloudEventSchemaV1_0);
        assert_eq!(t.event_retention(), Some(DAY));
    }

    #[test]
    fn either_namespace_field_alone_makes_a_namespace_topic_with_defaults() {
        let t = parse(json!({"properties": {"publisherType": "custom"}})).unwrap();
        assert_eq!(t.profile, DeliveryProfile::NamespaceTopic);
        assert_eq!(t.input_schema, InputSchema::CloudEventSchemaV1_0);
        assert_eq!(t.event_retention_days, Some(DEFAULT_RETENTION_DAYS));
        let t = parse(json!({"properties": {"eventRetentionInDays": 7}})).unwrap();
        assert_eq!(t.profile, DeliveryProfile::NamespaceTopic);
        assert_eq!(t.event_retention(), Some(7 * DAY));
        // A plain CloudEvents topic stays a custom topic.
        let t = parse(json!({"properties": {"inputSchema": "CloudEventSchemaV1_0"}})).unwrap();
        assert_eq!(t.profile, DeliveryProfile::CustomTopic);
        assert_eq!(t.event_retention(), None);
    }

    #[test]
    fn the_old_spelling_means_the_same() {
        let old = parse(json!({"properties": {"deliveryProfile": "NamespaceTopic"}})).unwrap();
        let new =
            parse(json!({"properties": {"publisherType": "Custom", "inputSchema": "CloudEventSchemaV1_0"}})).unwrap();
        assert_eq!(old, new);
        let both = parse(json!({"properties": {"publisherType": "Custom", "deliveryProfile": "NamespaceTopic"}}));
        assert_eq!(both.unwrap(), new);
    }

    #[test]
    fn every_retention_in_range_is_kept_and_the_rest_refused() {
        for days in MIN_RETENTION_DAYS..=MAX_RETENTION_DAYS {
            let t = parse(json!({"properties": {"eventRetentionInDays": days}})).unwrap();
            assert_eq!(t.event_retention(), Some(u32::from(days) * DAY));
        }
        for bad in [
            json!(0),
            json!(8),
            json!(-1),
            json!(1.5),
            json!("1"),
            json!(true),
            json!(300),
        ] {
            let e = parse(json!({"properties": {"publisherType": "Custom", "eventRetentionInDays": bad}})).unwrap_err();
            assert_eq!(e.field, "properties.eventRetentionInDays", "{bad}");
            assert!(e.problem.contains("between 1 and 7"), "{e}");
        }
    }

    #[test]
    fn mixes_are_refused_naming_the_field() {
        let refused = |props: Value| parse(json!({ "properties": props })).unwrap_err();
        let e = refused(json!({"publisherType": "Custom", "inputSchema": "EventGridSchema"}));
        assert_eq!(e.field, "properties.inputSchema");
        assert!(e.problem.contains("CloudEventSchemaV1_0, not EventGridSchema"), "{e}");
        let e = refused(json!({"eventRetentionInDays": 2, "inputSchema": "CustomEventSchema"}));
        assert_eq!(e.field, "properties.inputSchema");
        let e = refused(json!({"publisherType": "Custom", "deliveryProfile": "CustomTopic"}));
        assert_eq!(e.field, "properties.deliveryProfile");
        assert!(e.problem.contains("namespace topic"), "{e}");
        let e = refused(json!({"publisherType": "Partner"}));
        assert_eq!(e.field, "properties.publisherType");
        assert!(e.problem.contains("\"Custom\""), "{e}");
        let e = refused(json!({"publisherType": 1}));
        assert_eq!(e.field, "properties.publisherType");
        // The old spelling's refusal still names its field.
        let e = refused(json!({"deliveryProfile": "NamespaceTopic", "inputSchema": "EventGridSchema"}));
        assert_eq!(e.field, "properties.deliveryProfile");
    }

    #[test]
    fn get_shows_namespace_json_and_a_put_of_it_writes_the_same_topic() {
        let t = parse(json!({"properties": {"publisherType": "Custom", "eventRetentionInDays": 3}})).unwrap();
        let shown = t.to_resource("http://eg:8080/");
        assert_eq!(
            shown,
            json!({
                "id": "/topics/orders",
                "name": "orders",
                "type": "Microsoft.EventGrid/namespaces/topics",
                "properties": {
                    "publisherType": "Custom",
                    "inputSchema": "CloudEventSchemaV1_0",
                    "eventRetentionInDays": 3,
                    "provisioningState": "Succeeded",
                    "endpoint": "http://eg:8080/topics/orders/api/events",
                    "deliveryProfile": "NamespaceTopic",
                }
            })
        );
        assert_eq!(parse(shown).unwrap(), t);
    }

    #[test]
    fn stored_namespace_topics_without_retention_keep_the_seven_day_bound() {
        let stored: Topic = serde_json::from_str(
            r#"{"name":"orders","inputSchema":"CloudEventSchemaV1_0","profile":"NamespaceTopic"}"#,
        )
        .unwrap();
        assert_eq!(stored.event_retention(), Some(7 * DAY));
        assert_eq!(stored.to_resource("http://h")["properties"]["eventRetentionInDays"], 7);
        let t = parse(json!({"properties": {"eventRetentionInDays": 2}})).unwrap();
        let again: Topic = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(again, t);
        let custom = parse(json!({})).unwrap();
        assert!(!serde_json::to_string(&custom).unwrap().contains("Retention"));
    }
}
