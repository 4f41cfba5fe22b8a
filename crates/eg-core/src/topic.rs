//! Topics (behaviour.md#topics-and-publishing): a named place to publish to, with an input
//! schema, the custom schema's input mapping, and the delivery profile
//! (behaviour.md#namespace-topics) its subscriptions follow.
//!
//! A topic is stored in the catalog with serde; every field added after the first
//! version has a serde default so topics stored before it still load.
//!
//! A namespace topic (the `NamespaceTopic` profile) is written and shown in Event Grid's
//! namespace topic JSON as well; that form lives in [`namespace`].

use crate::api_error::InvalidField;
use crate::event::custom::InputSchemaMapping;
use crate::names::TopicName;
use crate::profile::DeliveryProfile;
use crate::schema::InputSchema;
use crate::shape::{self, Object};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::time::Duration;

mod namespace;

pub(crate) use namespace::MAX_RETENTION_DAYS;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Topic {
    pub name: TopicName,
    pub input_schema: InputSchema,
    /// Present exactly when `input_schema` is `CustomEventSchema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) input_mapping: Option<InputSchemaMapping>,
    #[serde(default)]
    pub profile: DeliveryProfile,
    /// Namespace topics' `eventRetentionInDays` (1–7); `None` on custom topics and on
    /// namespace topics stored before it existed (see [`Topic::event_retention`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) event_retention_days: Option<u8>,
}

impl Topic {
    /// The top-level fields of a topic resource. Besides `properties`, those a `GET`
    /// shows (so a resource read can be written back) and those ARM templates carry
    /// (`location`, `tags`); all but `properties` are ignored.
    pub const RESOURCE_FIELDS: [&str; 7] = ["properties", "id", "name", "type", "location", "tags", "systemData"];

    /// Reads a `PUT /admin/topics/{topic}` body (which may be empty): Event Grid's
    /// `properties.inputSchema` and `properties.inputSchemaMapping`, and eg's own
    /// `properties.deliveryProfile` (`CustomTopic`, the default, or `NamespaceTopic`).
    ///
    /// Event Grid's namespace topic fields (`publisherType: Custom`,
    /// `eventRetentionInDays`) make a namespace topic, as `deliveryProfile:
    /// NamespaceTopic` does (the older spelling, kept). A namespace topic takes
    /// CloudEvents only: with no `inputSchema` it gets `CloudEventSchemaV1_0`, with
    /// another one it is refused.
    pub fn from_resource(name: TopicName, body: &Value) -> Result<Self, InvalidField> {
        let props = WrittenProperties::read(body)?;
        let profile = props.profile()?;
        let input_schema = props.input_schema(profile)?;
        let input_mapping = props.input_mapping(input_schema)?;
        let event_retention_days = match profile {
            DeliveryProfile::NamespaceTopic => Some(
                props
                    .event_retention_in_days
                    .map_or(namespace::DEFAULT_RETENTION_DAYS, |days| days.0),
            ),
            DeliveryProfile::CustomTopic => None,
        };
        Ok(Self {
            name,
            input_schema,
            input_mapping,
            profile,
            event_retention_days,
        })
    }

    /// How long a namespace topic keeps events, which bounds its subscriptions'
    /// `eventTimeToLive`; `None` for custom topics. Namespace topics stored before
    /// `eventRetentionInDays` existed keep the 7-day bound they were created under.
    pub(crate) fn event_retention(&self) -> Option<Duration> {
        match self.profile {
            DeliveryProfile::CustomTopic => None,
            DeliveryProfile::NamespaceTopic => {
                let days = self.event_retention_days.unwrap_or(MAX_RETENTION_DAYS);
                Some(Duration::from_secs(u64::from(days) * 24 * 3600))
            }
        }
    }

    /// Whether this topic may replace `stored`, the one of the same name written before:
    /// stored events and subscriptions were checked against the schema and profile the
    /// topic was created with (the schema table of behaviour.md#topics-and-publishing,
    /// and behaviour.md#namespace-topics), so those cannot change.
    pub fn may_replace(&self, stored: &Topic) -> Result<(), InvalidField> {
        if stored.input_schema != self.input_schema {
            return Err(InvalidField::new(
                "properties.inputSchema",
                format!(
                    "cannot be changed once the topic exists (it is {}); delete and recreate the topic",
                    stored.input_schema
                ),
            ));
        }
        if stored.profile != self.profile {
            return Err(InvalidField::new(
                "properties.deliveryProfile",
                format!(
                    "cannot be changed once the topic exists (it is {}); delete and recreate the topic",
                    stored.profile.as_str()
                ),
            ));
        }
        Ok(())
    }

    /// The URL events are published to.
    fn endpoint(&self, public_base: &str) -> String {
        format!("{}/topics/{}/api/events", public_base.trim_end_matches('/'), self.name)
    }

    /// The id stamped into each event's `topic` field.
    pub fn id(&self) -> String {
        format!("/topics/{}", self.name)
    }

    /// The resource as the management API shows it; `public_base` is the ingress's public URL.
    /// A namespace topic is shown in Event Grid's namespace topic JSON, with eg's
    /// `endpoint` and `deliveryProfile` besides.
    pub fn to_resource(&self, public_base: &str) -> Value {
        if self.profile == DeliveryProfile::NamespaceTopic {
            return namespace::resource(self, public_base);
        }
        let mut resource = json!({
            "id": self.id(),
            "name": self.name,
            "type": "Microsoft.EventGrid/topics",
            "properties": {
                "endpoint": self.endpoint(public_base),
                "inputSchema": self.input_schema,
                "deliveryProfile": self.profile,
                "provisioningState": "Succeeded",
            }
        });
        if let Some(mapping) = &self.input_mapping {
            resource["properties"]["inputSchemaMapping"] = mapping.to_resource();
        }
        resource
    }
}

/// A topic's `properties` as a client writes them; every field may be left out or
/// `null`. The rules that join fields (the profile decides the schema, the schema
/// decides the mapping) are its methods, each refusal naming the field at fault.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WrittenProperties {
    input_schema: Option<WrittenSchema>,
    /// Read once the schema is known: only a custom schema takes one.
    input_schema_mapping: Option<Value>,
    delivery_profile: Option<WrittenProfile>,
    publisher_type: Option<namespace::PublisherType>,
    event_retention_in_days: Option<namespace::RetentionDays>,
    /// Shown by `GET` and ignored when written, so a resource read can be written back.
    #[serde(default, rename = "endpoint")]
    _endpoint: IgnoredAny,
    #[serde(default, rename = "provisioningState")]
    _provisioning_state: IgnoredAny,
    #[serde(flatten)]
    unknown: Map<String, Value>,
}

impl WrittenProperties {
    /// `body.properties`. Fields of `body` besides `properties` are the caller's to
    /// check ([`Topic::RESOURCE_FIELDS`]).
    fn read(body: &Value) -> Result<Self, InvalidField> {
        let Some(props) = body.get("properties") else {
            return Ok(Self::default());
        };
        let within = |e: InvalidField| e.within("properties");
        let props = shape::read::<Option<Object<Self>>>(props).map_err(within)?;
        let props = props.map_or_else(Self::default, |Object(props)| props);
        shape::refuse_unknown(&props.unknown, "not a known topic property").map_err(within)?;
        Ok(props)
    }

    /// Whether the namespace topic fields (`publisherType`, `eventRetentionInDays`) are
    /// used.
    fn written_as_namespace(&self) -> bool {
        self.publisher_type.is_some() || self.event_retention_in_days.is_some()
    }

    fn profile(&self) -> Result<DeliveryProfile, InvalidField> {
        let given = self.delivery_profile.as_ref().map(|p| p.0);
        match (self.written_as_namespace(), given) {
            (true, Some(DeliveryProfile::CustomTopic)) => Err(InvalidField::new(
                "properties.deliveryProfile",
                "publisherType and eventRetentionInDays describe a namespace topic; leave deliveryProfile \
                 out or make it NamespaceTopic, not CustomTopic",
            )),
            (true, _) => Ok(DeliveryProfile::NamespaceTopic),
            (false, given) => Ok(given.unwrap_or_default()),
        }
    }

    /// The schema given, or the profile's default; a namespace topic takes CloudEvents
    /// only.
    fn input_schema(&self, profile: DeliveryProfile) -> Result<InputSchema, InvalidField> {
        let input_schema = match (&self.input_schema, profile) {
            (Some(given), _) => given.0,
            (None, DeliveryProfile::NamespaceTopic) => InputSchema::CloudEventSchemaV1_0,
            (None, DeliveryProfile::CustomTopic) => InputSchema::default(),
        };
        if profile == DeliveryProfile::NamespaceTopic && input_schema != InputSchema::CloudEventSchemaV1_0 {
            // Named after what made it a namespace topic.
            let field = if self.written_as_namespace() {
                "properties.inputSchema"
            } else {
                "properties.deliveryProfile"
            };
            return Err(InvalidField::new(
                field,
                format!(
                    "a namespace topic takes CloudEvents only: its inputSchema must be CloudEventSchemaV1_0, not {input_schema}"
                ),
            ));
        }
        Ok(input_schema)
    }

    /// The mapping, which a custom schema requires and no other schema takes.
    fn input_mapping(&self, input_schema: InputSchema) -> Result<Option<InputSchemaMapping>, InvalidField> {
        let field = "properties.inputSchemaMapping";
        match (&self.input_schema_mapping, input_schema) {
            (Some(v), InputSchema::CustomEventSchema) => {
                Ok(Some(InputSchemaMapping::from_resource(v).map_err(|e| e.within(field))?))
            }
            (None, InputSchema::CustomEventSchema) => Err(InvalidField::new(
                field,
                "is required when inputSchema is CustomEventSchema: it says which field of each event \
                 gives id, topic, eventTime, eventType, subject and dataVersion",
            )),
            (Some(_), other) => Err(InvalidField::new(
                field,
                format!("only a CustomEventSchema topic takes an input schema mapping; this one is {other}"),
            )),
            (None, _) => Ok(None),
        }
    }
}

/// `properties.inputSchema` as written.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
struct WrittenSchema(InputSchema);

impl TryFrom<Value> for WrittenSchema {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        let choices = "\"EventGridSchema\", \"CloudEventSchemaV1_0\" or \"CustomEventSchema\"";
        shape::choice(value, choices, InputSchema::parse).map(Self)
    }
}

/// `properties.deliveryProfile` as written.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
struct WrittenProfile(DeliveryProfile);

impl TryFrom<Value> for WrittenProfile {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        shape::choice(value, "\"CustomTopic\" or \"NamespaceTopic\"", DeliveryProfile::parse).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_renders_the_publish_endpoint() {
        let t = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        let r = t.to_resource("http://localhost:8080/");
        assert_eq!(
            r["properties"]["endpoint"],
            "http://localhost:8080/topics/orders/api/events"
        );
        assert_eq!(r["properties"]["inputSchema"], "EventGridSchema");
    }

    fn name() -> TopicName {
        TopicName::parse("orders").unwrap()
    }

    fn mapping() -> Value {
        json!({"inputSchemaMappingType": "Json", "properties": {
            "id": {"sourceField": "orderId"},
            "eventType": {"sourceField": "kind", "defaultValue": "Order"},
            "subject": {"defaultValue": "/orders"}
        }})
    }

    #[test]
    fn only_the_mapping_may_change_under_a_stored_topic() {
        let custom = |m: Value| {
            Topic::from_resource(
                name(),
                &json!({"properties": {"inputSchema": "CustomEventSchema", "inputSchemaMapping": m}}),
            )
            .unwrap()
        };
        let stored = custom(mapping());
        let mut other_mapping = mapping();
        other_mapping["properties"]["id"]["sourceField"] = json!("number");
        assert_eq!(custom(other_mapping).may_replace(&stored), Ok(()));

        let event_grid = Topic::from_resource(name(), &json!({})).unwrap();
        let refused = event_grid.may_replace(&stored).unwrap_err();
        assert_eq!(refused.field, "properties.inputSchema");
        assert!(refused.problem.contains("it is CustomEventSchema"), "{refused}");

        let cloud = |profile: &str| {
            Topic::from_resource(
                name(),
                &json!({"properties": {"inputSchema": "CloudEventSchemaV1_0", "deliveryProfile": profile}}),
            )
            .unwrap()
        };
        let refused = cloud("NamespaceTopic").may_replace(&cloud("CustomTopic")).unwrap_err();
        assert_eq!(refused.field, "properties.deliveryProfile");
        assert!(refused.problem.contains("it is CustomTopic"), "{refused}");
    }

    #[test]
    fn reads_every_input_schema() {
        for (raw, schema) in [
            ("EventGridSchema", InputSchema::EventGridSchema),
            ("CloudEventSchemaV1_0", InputSchema::CloudEventSchemaV1_0),
            ("cloudeventschemav1_0", InputSchema::CloudEventSchemaV1_0),
        ] {
            let t = Topic::from_resource(name(), &json!({"properties": {"inputSchema": raw}})).unwrap();
            assert_eq!(t.input_schema, schema);
            assert_eq!(t.input_mapping, None);
        }
        let t = Topic::from_resource(
            name(),
            &json!({"properties": {"inputSchema": "CustomEventSchema", "inputSchemaMapping": mapping()}}),
        )
        .unwrap();
        assert_eq!(t.input_schema, InputSchema::CustomEventSchema);
        let m = t.input_mapping.as_ref().unwrap();
        assert_eq!(m.id.as_deref(), Some("orderId"));
        assert_eq!(m.subject.default_value.as_deref(), Some("/orders"));
        let shown = t.to_resource("http://h");
        assert_eq!(shown["properties"]["inputSchema"], "CustomEventSchema");
        assert_eq!(shown["properties"]["inputSchemaMapping"], mapping());
        assert_eq!(shown["properties"]["deliveryProfile"], "CustomTopic");
    }

    #[test]
    fn the_mapping_goes_with_the_custom_schema_only() {
        let err =
            Topic::from_resource(name(), &json!({"properties": {"inputSchema": "CustomEventSchema"}})).unwrap_err();
        assert_eq!(err.field, "properties.inputSchemaMapping");
        let err = Topic::from_resource(name(), &json!({"properties": {"inputSchemaMapping": mapping()}})).unwrap_err();
        assert_eq!(err.field, "properties.inputSchemaMapping");
        let mut bad = mapping();
        bad["properties"]["eventTime"] = json!({"defaultValue": "now"});
        let err = Topic::from_resource(
            name(),
            &json!({"properties": {"inputSchema": "CustomEventSchema", "inputSchemaMapping": bad}}),
        )
        .unwrap_err();
        assert_eq!(
            err.field,
            "properties.inputSchemaMapping.properties.eventTime.defaultValue"
        );
    }

    #[test]
    fn namespace_topics_take_cloud_events_only() {
        let t = Topic::from_resource(name(), &json!({"properties": {"deliveryProfile": "NamespaceTopic"}})).unwrap();
        assert_eq!(t.profile, DeliveryProfile::NamespaceTopic);
        assert_eq!(t.input_schema, InputSchema::CloudEventSchemaV1_0);
        assert_eq!(
            t.to_resource("http://h")["properties"]["deliveryProfile"],
            "NamespaceTopic"
        );
        let err = Topic::from_resource(
            name(),
            &json!({"properties": {"deliveryProfile": "NamespaceTopic", "inputSchema": "EventGridSchema"}}),
        )
        .unwrap_err();
        assert_eq!(err.field, "properties.deliveryProfile");
        assert!(err.problem.contains("CloudEventSchemaV1_0"), "{err}");
        let err = Topic::from_resource(name(), &json!({"properties": {"deliveryProfile": "Basic"}})).unwrap_err();
        assert_eq!(err.field, "properties.deliveryProfile");
    }

    #[test]
    fn round_trips_through_the_catalog_and_loads_old_topics() {
        let t = Topic::from_resource(
            name(),
            &json!({"properties": {"inputSchema": "CustomEventSchema", "inputSchemaMapping": mapping()}}),
        )
        .unwrap();
        let stored = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Topic>(&stored).unwrap(), t);
        let old: Topic = serde_json::from_str(r#"{"name":"orders","inputSchema":"EventGridSchema"}"#).unwrap();
        assert_eq!(old, Topic::from_resource(name(), &json!({})).unwrap());
    }

    #[test]
    fn each_property_is_refused_by_name_with_what_was_found() {
        for (props, field, words) in [
            (json!([]), "properties", "must be an object, got an array"),
            (json!(4), "properties", "must be an object, got a number"),
            (
                json!({"inputSchema": 5}),
                "properties.inputSchema",
                "must be a string, got a number",
            ),
            (json!({"inputSchema": "Avro"}), "properties.inputSchema", "got \"Avro\""),
            (
                json!({"deliveryProfile": true}),
                "properties.deliveryProfile",
                "must be a string, got a boolean",
            ),
            (
                json!({"deliveryProfile": "Basic"}),
                "properties.deliveryProfile",
                "must be \"CustomTopic\" or \"NamespaceTopic\", got \"Basic\"",
            ),
            (json!({"colour": 1}), "properties.colour", "not a known topic property"),
        ] {
            let err = Topic::from_resource(name(), &json!({ "properties": props })).unwrap_err();
            assert_eq!(err.field, field, "{props}");
            assert!(err.problem.contains(words), "{props}: {err}");
        }
        // Left out and null mean the same; what GET shows besides may be written back.
        let plain = Topic::from_resource(name(), &json!({})).unwrap();
        for body in [
            json!({"properties": null}),
            json!({"properties": {"inputSchema": null, "deliveryProfile": null, "publisherType": null}}),
            plain.to_resource("http://h"),
        ] {
            assert_eq!(Topic::from_resource(name(), &body), Ok(plain.clone()), "{body}");
        }
    }

    #[test]
    fn refuses_unknown_schemas_and_properties() {
        let name = || TopicName::parse("orders").unwrap();
        let err = Topic::from_resource(name(), &json!({"properties": {"inputSchema": "Avro"}})).unwrap_err();
        assert_eq!(err.field, "properties.inputSchema");
        let err = Topic::from_resource(name(), &json!({"properties": {"colour": 1}})).unwrap_err();
        assert_eq!(err.field, "properties.colour");
    }
}
