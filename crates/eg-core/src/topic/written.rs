//! A topic's `properties` as a `PUT /admin/topics/{topic}` body writes them, read with
//! serde into one typed shape; the rules that join its fields are its methods.

use super::archive::Archive;
use super::duplicates::{DuplicateWindow, WrittenWindow};
use super::namespace::{DEFAULT_RETENTION_DAYS, PublisherType, RetentionDays};
use crate::api_error::InvalidField;
use crate::event::custom::InputSchemaMapping;
use crate::profile::DeliveryProfile;
use crate::schema::InputSchema;
use crate::shape::{self, Object};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

/// A topic's `properties` as a client writes them; every field may be left out or
/// `null`. The rules that join fields (the profile decides the schema, the schema
/// decides the mapping) are its methods, each refusal naming the field at fault.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WrittenProperties {
    input_schema: Option<WrittenSchema>,
    /// Read once the schema is known: only a custom schema takes one.
    input_schema_mapping: Option<Value>,
    delivery_profile: Option<WrittenProfile>,
    publisher_type: Option<PublisherType>,
    event_retention_in_days: Option<RetentionDays>,
    duplicate_detection_history_time_window: Option<WrittenWindow>,
    /// eg's own; read with [`Archive::from_json`] so its errors name the field inside.
    archive: Option<Value>,
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
    /// check ([`Topic::RESOURCE_FIELDS`](super::Topic::RESOURCE_FIELDS)).
    pub(super) fn read(body: &Value) -> Result<Self, InvalidField> {
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

    /// The profile given, or the one the namespace fields imply; `deliveryProfile` may
    /// not contradict them.
    pub(super) fn profile(&self) -> Result<DeliveryProfile, InvalidField> {
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
    pub(super) fn input_schema(&self, profile: DeliveryProfile) -> Result<InputSchema, InvalidField> {
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

    /// `eventRetentionInDays` of a namespace topic, its default when left out; custom
    /// topics keep none.
    pub(super) fn retention_days(&self, profile: DeliveryProfile) -> Option<u8> {
        match profile {
            DeliveryProfile::NamespaceTopic => Some(
                self.event_retention_in_days
                    .as_ref()
                    .map_or(DEFAULT_RETENTION_DAYS, |days| days.0),
            ),
            DeliveryProfile::CustomTopic => None,
        }
    }

    /// The duplicate detection window, on any profile; none when left out.
    pub(super) fn duplicate_window(&self) -> Option<DuplicateWindow> {
        self.duplicate_detection_history_time_window.as_ref().map(|w| w.0)
    }

    /// The archive, on any profile; none when left out.
    pub(super) fn archive(&self) -> Result<Option<Archive>, InvalidField> {
        self.archive
            .as_ref()
            .map(|v| Archive::from_json(v).map_err(|e| e.within("properties.archive")))
            .transpose()
    }

    /// The mapping, which a custom schema requires and no other schema takes.
    pub(super) fn input_mapping(&self, input_schema: InputSchema) -> Result<Option<InputSchemaMapping>, InvalidField> {
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
