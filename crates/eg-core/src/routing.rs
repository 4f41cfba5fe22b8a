//! What filters see of an event, whatever schema it was published in.
//!
//! Event Grid events, CloudEvents and custom-schema envelopes all reduce to an event
//! type, a subject and the stored JSON object (whose fields and `data.…` paths advanced
//! filters read), so one filter implementation serves every schema.
//!
//! The object's fields are reached through [`EventFields`], so an accepted event can
//! parse its stored form only when a filter actually reads a field of it; a plain
//! `Map` serves where the tree already exists.

use serde_json::{Map, Value};
use std::fmt;

/// The top-level fields of a stored event, as filters read them.
pub trait EventFields: fmt::Debug {
    fn field(&self, name: &str) -> Option<&Value>;
}

impl EventFields for Map<String, Value> {
    fn field(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Routing<'a> {
    /// `eventType` (Event Grid) or `type` (CloudEvents).
    pub event_type: &'a str,
    /// `subject`; empty when a CloudEvent has none.
    pub subject: &'a str,
    /// The event as stored and delivered.
    pub fields: &'a dyn EventFields,
}

impl<'a> Routing<'a> {
    /// The value at a dotted key such as `data.order.id`; `None` when any step is missing.
    pub(crate) fn lookup(&self, key: &str) -> Option<&'a Value> {
        let mut parts = key.split('.');
        let first = self.fields.field(parts.next()?)?;
        parts.try_fold(first, |v, part| v.get(part))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn looks_up_dotted_paths() {
        let v = json!({"subject": "s", "data": {"a": {"b": 5}}});
        let fields = v.as_object().unwrap();
        let r = Routing {
            event_type: "T",
            subject: "s",
            fields,
        };
        assert_eq!(r.lookup("data.a.b"), Some(&json!(5)));
        assert_eq!(r.lookup("subject"), Some(&json!("s")));
        assert_eq!(r.lookup("data.x"), None);
        assert_eq!(r.lookup("data.a.b.c"), None);
    }
}
