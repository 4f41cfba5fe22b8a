//! Topics (behaviour.md#topics-and-publishing): a named place to publish to, with an input
//! schema, the custom schema's input mapping, and the delivery profile
//! (behaviour.md#namespace-topics) its subscriptions follow.
//!
//! A topic is stored in the catalog with serde; every field added after the first
//! version has a serde default so topics stored before it still load.
//!
//! A namespace topic (the `NamespaceTopic` profile) is written and shown in Event Grid's
//! namespace topic JSON as well; that form lives in [`namespace`]. How a `PUT` body's
//! `properties` are read, and the rules that join them, live in [`written`].

use crate::api_error::InvalidField;
use crate::event::custom::InputSchemaMapping;
use crate::names::TopicName;
use crate::profile::DeliveryProfile;
use crate::schema::InputSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::Duration;

mod archive;
mod duplicates;
mod namespace;
mod written;

pub use archive::{
    ARCHIVE_ROOT, Archive, MAX_ARCHIVE_RETENTION_DAYS, MIN_ARCHIVE_RETENTION_DAYS, expired as archive_expired,
    minute_prefix as archive_minute_prefix, object_minute as archive_object_minute, object_name as archive_object_name,
};
pub use duplicates::{DuplicateWindow, MAX_DUPLICATE_WINDOW, MIN_DUPLICATE_WINDOW, duplicate_identity};

pub(crate) use namespace::MAX_RETENTION_DAYS;
use written::WrittenProperties;

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
    /// `duplicateDetectionHistoryTimeWindow`: when set, an event published again within
    /// it is answered as accepted and not stored twice (deduplication.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_window: Option<DuplicateWindow>,
    /// eg's `properties.archive`: when set, every accepted event is written to an object
    /// store (archive.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<Archive>,
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
        Ok(Self {
            name,
            input_schema,
            input_mapping: props.input_mapping(input_schema)?,
            profile,
            event_retention_days: props.retention_days(profile),
            duplicate_window: props.duplicate_window(),
            archive: props.archive()?,
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
            let mut resource = namespace::resource(self, public_base);
            self.show_duplicate_window(&mut resource);
            self.show_archive(&mut resource);
            return resource;
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
        self.show_duplicate_window(&mut resource);
        self.show_archive(&mut resource);
        resource
    }

    /// Adds eg's `archive` to a shown resource when it is set.
    fn show_archive(&self, resource: &mut Value) {
        if let Some(archive) = &self.archive {
            resource["properties"]["archive"] = archive.to_json();
        }
    }

    /// Adds `duplicateDetectionHistoryTimeWindow` to a shown resource when it is set.
    fn show_duplicate_window(&self, resource: &mut Value) {
        if let Some(window) = self.duplicate_window {
            resource["properties"]["duplicateDetectionHistoryTimeWindow"] = json!(window.to_iso8601());
        }
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
    fn a_duplicate_window_is_read_shown_and_written_back_on_either_profile() {
        for profile in ["CustomTopic", "NamespaceTopic"] {
            let body = json!({"properties": {
                "deliveryProfile": profile,
                "inputSchema": "CloudEventSchemaV1_0",
                "duplicateDetectionHistoryTimeWindow": "PT10M"
            }});
            let t = Topic::from_resource(name(), &body).unwrap();
            let window = t.duplicate_window.unwrap();
            assert_eq!(window.duration(), Duration::from_secs(600), "{profile}");
            let shown = t.to_resource("http://h");
            assert_eq!(shown["properties"]["duplicateDetectionHistoryTimeWindow"], "PT10M");
            assert_eq!(Topic::from_resource(name(), &shown), Ok(t.clone()), "{profile}");
            let stored = serde_json::to_string(&t).unwrap();
            assert_eq!(serde_json::from_str::<Topic>(&stored).unwrap(), t);
        }
        let plain = Topic::from_resource(name(), &json!({})).unwrap();
        assert_eq!(plain.duplicate_window, None);
        assert!(
            plain.to_resource("http://h")["properties"]
                .get("duplicateDetectionHistoryTimeWindow")
                .is_none()
        );
        let err = Topic::from_resource(
            name(),
            &json!({"properties": {"duplicateDetectionHistoryTimeWindow": "PT5S"}}),
        )
        .unwrap_err();
        assert_eq!(err.field, "properties.duplicateDetectionHistoryTimeWindow");
        assert!(err.problem.contains("from PT20S to P1D"), "{err}");
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
