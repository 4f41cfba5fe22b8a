//! The event schemas of behaviour.md#topics-and-publishing: what a topic accepts, what a
//! subscription receives, and which pairs are allowed.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a topic accepts from publishers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum InputSchema {
    #[default]
    EventGridSchema,
    CloudEventSchemaV1_0,
    CustomEventSchema,
}

/// What a subscription's endpoint receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum DeliverySchema {
    #[default]
    EventGridSchema,
    CloudEventSchemaV1_0,
    CustomInputSchema,
}

/// The form an event is stored in, which says how to render it for each delivery schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum StoredFormat {
    /// An Event Grid schema event.
    #[default]
    #[serde(rename = "eg")]
    EventGrid,
    /// A CloudEvent (structured JSON form).
    #[serde(rename = "ce")]
    CloudEvents,
    /// A custom event: an Event Grid envelope built by the topic's mapping, with the
    /// object as published in `data`.
    #[serde(rename = "cu")]
    Custom,
}

impl StoredFormat {
    pub fn is_event_grid(&self) -> bool {
        *self == Self::EventGrid
    }
}

impl InputSchema {
    /// How events accepted under this schema are stored.
    pub fn stored_format(self) -> StoredFormat {
        match self {
            Self::EventGridSchema => StoredFormat::EventGrid,
            Self::CloudEventSchemaV1_0 => StoredFormat::CloudEvents,
            Self::CustomEventSchema => StoredFormat::Custom,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::EventGridSchema => "EventGridSchema",
            Self::CloudEventSchemaV1_0 => "CloudEventSchemaV1_0",
            Self::CustomEventSchema => "CustomEventSchema",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [
            Self::EventGridSchema,
            Self::CloudEventSchemaV1_0,
            Self::CustomEventSchema,
        ]
        .into_iter()
        .find(|s| s.as_str().eq_ignore_ascii_case(raw))
    }

    /// The delivery schema a subscription gets when it names none: the input's own.
    pub(crate) fn default_delivery(self) -> DeliverySchema {
        match self {
            Self::EventGridSchema => DeliverySchema::EventGridSchema,
            Self::CloudEventSchemaV1_0 => DeliverySchema::CloudEventSchemaV1_0,
            Self::CustomEventSchema => DeliverySchema::CustomInputSchema,
        }
    }

    /// The conversion table of behaviour.md#topics-and-publishing.
    pub(crate) fn can_deliver_as(self, delivery: DeliverySchema) -> bool {
        use DeliverySchema as D;
        match self {
            Self::EventGridSchema => matches!(delivery, D::EventGridSchema | D::CloudEventSchemaV1_0),
            Self::CloudEventSchemaV1_0 => delivery == D::CloudEventSchemaV1_0,
            Self::CustomEventSchema => true,
        }
    }
}

impl DeliverySchema {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EventGridSchema => "EventGridSchema",
            Self::CloudEventSchemaV1_0 => "CloudEventSchemaV1_0",
            Self::CustomInputSchema => "CustomInputSchema",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [
            Self::EventGridSchema,
            Self::CloudEventSchemaV1_0,
            Self::CustomInputSchema,
        ]
        .into_iter()
        .find(|s| s.as_str().eq_ignore_ascii_case(raw))
    }
}

impl fmt::Display for InputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for DeliverySchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_table_of_spec_section_1() {
        use DeliverySchema as D;
        use InputSchema as I;
        let allowed = |i: I, d: D| i.can_deliver_as(d);
        assert!(allowed(I::EventGridSchema, D::EventGridSchema));
        assert!(allowed(I::EventGridSchema, D::CloudEventSchemaV1_0));
        assert!(!allowed(I::EventGridSchema, D::CustomInputSchema));
        assert!(!allowed(I::CloudEventSchemaV1_0, D::EventGridSchema));
        assert!(allowed(I::CloudEventSchemaV1_0, D::CloudEventSchemaV1_0));
        assert!(!allowed(I::CloudEventSchemaV1_0, D::CustomInputSchema));
        assert!(allowed(I::CustomEventSchema, D::EventGridSchema));
        assert!(allowed(I::CustomEventSchema, D::CloudEventSchemaV1_0));
        assert!(allowed(I::CustomEventSchema, D::CustomInputSchema));
    }

    #[test]
    fn names_parse_case_insensitively() {
        assert_eq!(
            InputSchema::parse("cloudeventschemav1_0"),
            Some(InputSchema::CloudEventSchemaV1_0)
        );
        assert_eq!(DeliverySchema::parse("Avro"), None);
    }
}
