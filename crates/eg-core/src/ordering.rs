//! Ordered delivery per key (docs/ordered-delivery.md): which field of an event names
//! its key, how that key is read from an event whatever its schema, and the line id
//! under which storage keeps a key's events in acceptance order.
//!
//! Everything here is pure. The key itself may be personal data (an account id, a
//! customer name), so storage and logs only ever see its [`LineId`], a hash.

use crate::api_error::InvalidField;
use crate::json::json_type;
use crate::routing::Routing;
use crate::schema::InputSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The longest `path` accepted, in bytes; a data path is a handful of field names.
const MAX_PATH_BYTES: usize = 256;

/// Where a subscription's ordering key is read from each event
/// (`properties.orderedDelivery`, eg's own; Event Grid has no ordering).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "key", content = "path")]
pub enum OrderBy {
    /// The event's `subject` (both schemas).
    Subject,
    /// `eventType` (Event Grid) or `type` (CloudEvents).
    EventType,
    /// The CloudEvents `partitionkey` extension attribute.
    PartitionKey,
    /// A dotted path inside the event's `data` (`accountId`, `order.customer`).
    Data(String),
}

/// An event's ordering key as read; events lacking it share the empty key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OrderingKey(pub String);

/// The name storage gives a key's line: the first 16 bytes of the key's SHA-256, in
/// hex, so keys never appear in Redis or logs in clear and every line name has one size.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LineId(pub String);

impl OrderingKey {
    pub fn line_id(&self) -> LineId {
        let digest = Sha256::digest(self.0.as_bytes());
        LineId(digest[..16].iter().map(|b| format!("{b:02x}")).collect())
    }
}

impl OrderBy {
    /// Reads `orderedDelivery` for a subscription of a topic accepting `input`; errors
    /// are named from inside the object (`key`, `path`), the caller adds where it sits.
    pub fn from_json(v: &Value, input: InputSchema) -> Result<Self, InvalidField> {
        let Value::Object(map) = v else {
            return Err(InvalidField::new(
                "",
                format!(
                    "must be an object such as {{\"key\": \"subject\"}}, got {}",
                    json_type(v)
                ),
            ));
        };
        if let Some(other) = map.keys().find(|k| !matches!(k.as_str(), "key" | "path")) {
            return Err(InvalidField::new(
                other.clone(),
                "not a known field (expected one of: key, path)",
            ));
        }
        let key = match map.get("key") {
            Some(Value::String(key)) => key.as_str(),
            None | Some(Value::Null) => {
                return Err(InvalidField::new(
                    "key",
                    "is required: \"subject\", \"eventType\", \"partitionKey\" or \"data\" (with a path)",
                ));
            }
            Some(other) => {
                return Err(InvalidField::new(
                    "key",
                    format!("must be a string, got {}", json_type(other)),
                ));
            }
        };
        let order = match key {
            "subject" => Self::Subject,
            "eventType" => Self::EventType,
            "partitionKey" => Self::PartitionKey,
            "data" => Self::Data(data_path(map)?),
            other => {
                return Err(InvalidField::new(
                    "key",
                    format!("must be \"subject\", \"eventType\", \"partitionKey\" or \"data\", got {other:?}"),
                ));
            }
        };
        if !matches!(order, Self::Data(_)) && map.get("path").is_some_and(|p| !p.is_null()) {
            return Err(InvalidField::new(
                "path",
                format!("is only read when key is \"data\", not {key:?}"),
            ));
        }
        if order == Self::PartitionKey && input != InputSchema::CloudEventSchemaV1_0 {
            // Only a CloudEvent can carry the extension: every event would share one line.
            return Err(InvalidField::new(
                "key",
                "\"partitionKey\" reads the CloudEvents partitionkey extension, and this topic does not \
                 accept CloudEvents; use \"subject\", \"eventType\" or \"data\" with a path",
            ));
        }
        Ok(order)
    }

    /// The object `GET` shows, as it was written.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Subject => json!({"key": "subject"}),
            Self::EventType => json!({"key": "eventType"}),
            Self::PartitionKey => json!({"key": "partitionKey"}),
            Self::Data(path) => json!({"key": "data", "path": path}),
        }
    }

    /// The key of an event, whatever its schema: a string as is, a number or boolean as
    /// its JSON text; a missing, null, object or array value is the empty key, so such
    /// events still keep their order among themselves.
    pub fn key_of(&self, event: &Routing<'_>) -> OrderingKey {
        let value = match self {
            Self::Subject => return OrderingKey(event.subject.to_owned()),
            Self::EventType => return OrderingKey(event.event_type.to_owned()),
            Self::PartitionKey => event.fields.field("partitionkey"),
            Self::Data(path) => event
                .fields
                .field("data")
                .and_then(|data| path.split('.').try_fold(data, |v, part| v.get(part))),
        };
        OrderingKey(match value {
            Some(Value::String(s)) => s.clone(),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
            _ => String::new(),
        })
    }
}

/// `path` of a `data` key: dotted field names inside `data`, none empty.
fn data_path(map: &Map<String, Value>) -> Result<String, InvalidField> {
    let path = match map.get("path") {
        Some(Value::String(path)) => path,
        None | Some(Value::Null) => {
            return Err(InvalidField::new(
                "path",
                "is required when key is \"data\": a dotted path inside data such as \"accountId\"",
            ));
        }
        Some(other) => {
            return Err(InvalidField::new(
                "path",
                format!("must be a string, got {}", json_type(other)),
            ));
        }
    };
    if path.is_empty() || path.len() > MAX_PATH_BYTES || path.split('.').any(str::is_empty) {
        return Err(InvalidField::new(
            "path",
            format!(
                "must be dotted field names inside data such as \"order.accountId\" (at most \
                 {MAX_PATH_BYTES} bytes, no empty name), got {path:?}"
            ),
        ));
    }
    Ok(path.clone())
}

/// Whether an update may go from `old` to `new`. Adding or removing ordering is allowed
/// (only events accepted after the change follow the new setting; lines already
/// waiting drain in order); changing the key is refused, because events already
/// waiting in one key's line would be ordered against a different key's.
pub fn check_change(old: Option<&OrderBy>, new: Option<&OrderBy>) -> Result<(), InvalidField> {
    match (old, new) {
        (Some(old), Some(new)) if old != new => Err(InvalidField::new(
            "orderedDelivery",
            format!(
                "the ordering key cannot change (stored: {}); delete the subscription and create it again \
                 to order by another key",
                old.to_json()
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(v: Value) -> Result<OrderBy, InvalidField> {
        OrderBy::from_json(&v, InputSchema::CloudEventSchemaV1_0)
    }

    fn refusal(v: Value, input: InputSchema) -> (String, String) {
        let e = OrderBy::from_json(&v, input).unwrap_err();
        (e.field, e.problem)
    }

    #[test]
    fn every_key_reads_and_shows_back_as_written() {
        for v in [
            json!({"key": "subject"}),
            json!({"key": "eventType"}),
            json!({"key": "partitionKey"}),
            json!({"key": "data", "path": "order.accountId"}),
        ] {
            assert_eq!(read(v.clone()).unwrap().to_json(), v);
        }
    }

    #[test]
    fn the_stored_form_round_trips() {
        for order in [OrderBy::Subject, OrderBy::PartitionKey, OrderBy::Data("a.b".into())] {
            let stored = serde_json::to_string(&order).unwrap();
            assert_eq!(serde_json::from_str::<OrderBy>(&stored).unwrap(), order);
        }
        assert_eq!(
            serde_json::to_value(OrderBy::Data("a".into())).unwrap(),
            json!({"key": "data", "path": "a"})
        );
    }

    #[test]
    fn refusals_name_the_field_and_what_was_wrong() {
        let ce = InputSchema::CloudEventSchemaV1_0;
        let cases = [
            (json!("subject"), "", "must be an object"),
            (json!({}), "key", "is required"),
            (json!({"key": 3}), "key", "must be a string, got a number"),
            (json!({"key": "type"}), "key", "got \"type\""),
            (json!({"key": "data"}), "path", "is required when key is \"data\""),
            (json!({"key": "data", "path": "a..b"}), "path", "no empty name"),
            (json!({"key": "data", "path": ""}), "path", "no empty name"),
            (json!({"key": "data", "path": 5}), "path", "must be a string"),
            (
                json!({"key": "subject", "path": "a"}),
                "path",
                "only read when key is \"data\"",
            ),
            (json!({"key": "subject", "paht": "a"}), "paht", "not a known field"),
        ];
        for (v, field, problem) in cases {
            let (f, p) = refusal(v.clone(), ce);
            assert_eq!(f, field, "{v}");
            assert!(p.contains(problem), "{v}: {p}");
        }
    }

    #[test]
    fn partition_key_is_refused_where_no_event_can_carry_it() {
        for input in [InputSchema::EventGridSchema, InputSchema::CustomEventSchema] {
            let (field, problem) = refusal(json!({"key": "partitionKey"}), input);
            assert_eq!(field, "key");
            assert!(problem.contains("does not accept CloudEvents"), "{problem}");
        }
    }

    fn routing_of(fields: &Map<String, Value>) -> Routing<'_> {
        Routing {
            event_type: fields
                .get("type")
                .or(fields.get("eventType"))
                .and_then(Value::as_str)
                .unwrap_or(""),
            subject: fields.get("subject").and_then(Value::as_str).unwrap_or(""),
            fields,
        }
    }

    #[test]
    fn keys_are_read_per_schema() {
        let cloud = json!({"specversion": "1.0", "type": "T", "subject": "s", "partitionkey": "p",
                           "data": {"order": {"accountId": "a-1"}}});
        let grid = json!({"eventType": "E", "subject": "g", "data": {"n": 42, "flag": true}});
        let (cloud, grid) = (cloud.as_object().unwrap(), grid.as_object().unwrap());
        let key = |order: OrderBy, f| order.key_of(&routing_of(f)).0;
        assert_eq!(key(OrderBy::Subject, cloud), "s");
        assert_eq!(key(OrderBy::EventType, cloud), "T");
        assert_eq!(key(OrderBy::EventType, grid), "E");
        assert_eq!(key(OrderBy::PartitionKey, cloud), "p");
        assert_eq!(key(OrderBy::Data("order.accountId".into()), cloud), "a-1");
        assert_eq!(key(OrderBy::Data("n".into()), grid), "42");
        assert_eq!(key(OrderBy::Data("flag".into()), grid), "true");
    }

    #[test]
    fn events_lacking_the_key_share_the_empty_key() {
        let e = json!({"eventType": "E", "data": {"order": {"id": 1}, "none": null}});
        let e = e.as_object().unwrap();
        for order in [
            OrderBy::Subject,
            OrderBy::PartitionKey,
            OrderBy::Data("missing".into()),
            OrderBy::Data("order".into()),
            OrderBy::Data("none".into()),
            OrderBy::Data("order.id.deeper".into()),
        ] {
            assert_eq!(order.key_of(&routing_of(e)), OrderingKey(String::new()), "{order:?}");
        }
    }

    #[test]
    fn line_ids_are_fixed_size_hashes_that_differ_per_key() {
        let a = OrderingKey("account-1".into()).line_id();
        let b = OrderingKey("account-2".into()).line_id();
        assert_eq!(a.0.len(), 32);
        assert_ne!(a, b);
        assert!(!a.0.contains("account"));
        assert_eq!(a, OrderingKey("account-1".into()).line_id());
    }

    #[test]
    fn only_a_changed_key_is_refused_on_update() {
        let data = OrderBy::Data("a".into());
        assert!(check_change(None, Some(&OrderBy::Subject)).is_ok());
        assert!(check_change(Some(&OrderBy::Subject), None).is_ok());
        assert!(check_change(Some(&data), Some(&data)).is_ok());
        let e = check_change(Some(&OrderBy::Subject), Some(&data)).unwrap_err();
        assert_eq!(e.field, "orderedDelivery");
        assert!(e.problem.contains("delete the subscription"));
    }
}
