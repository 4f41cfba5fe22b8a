//! One validated event in the form every later step uses, whatever its schema.

use crate::routing::Routing;
use serde_json::{Map, Value};

/// A validated event, whatever its schema: its stored JSON form (serialized once for
/// the size check and reused as the body that is stored) and what filters read.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceptedEvent {
    /// The event as stored: Event Grid schema, a CloudEvent, or a custom event's
    /// Event Grid envelope (the published object in `data`).
    pub json: String,
    pub fields: Map<String, Value>,
    pub event_type: String,
    pub subject: String,
}

impl AcceptedEvent {
    /// Builds the accepted form of a stored JSON object.
    pub fn new(fields: Map<String, Value>, event_type: String, subject: String) -> Self {
        // Serializing a map of `Value`s cannot fail.
        let json = serde_json::to_string(&fields).unwrap_or_default();
        Self {
            json,
            fields,
            event_type,
            subject,
        }
    }

    /// The event's own `id` (every accepted form has one).
    pub fn id(&self) -> &str {
        self.fields.get("id").and_then(Value::as_str).unwrap_or_default()
    }

    pub fn routing(&self) -> Routing<'_> {
        Routing {
            event_type: &self.event_type,
            subject: &self.subject,
            fields: &self.fields,
        }
    }
}
