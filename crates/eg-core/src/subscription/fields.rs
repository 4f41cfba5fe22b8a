//! The readers and writers both subscription JSON forms share (`resource`, the
//! custom-topic form, and `namespace`): the destination with the subscription
//! properties written beside it, the expiration time, `paused`, ranged numbers and
//! the delivery schema. Here so that neither form imports the other.

use super::headers::{self, DeliveryHeader, HeaderValueSource};
use super::{BatchSettings, Subscription};
use crate::api_error::InvalidField;
use crate::destination::{ENDPOINT_TYPES, Target};
use crate::json::json_type;
use crate::ordering::OrderBy;
use crate::profile::DeliveryProfile;
use crate::schema::DeliverySchema;
use crate::signing::{MAX_SECRETS, SigningSecret, SigningSecrets};
use crate::time::UnixMillis;
use crate::topic::Topic;
use chrono::DateTime;
use serde_json::{Map, Value, json};

/// `properties.expirationTimeUtc`: an RFC 3339 time after `now`, or none.
pub(super) fn expiration_time(props: &Map<String, Value>, now: UnixMillis) -> Result<Option<UnixMillis>, InvalidField> {
    let field = "properties.expirationTimeUtc";
    match props.get("expirationTimeUtc") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let at = DateTime::parse_from_rfc3339(s)
                .map_err(|_| InvalidField::new(field, format!("{s:?} is not an RFC 3339 timestamp")))?;
            let at = UnixMillis(at.timestamp_millis());
            if at <= now {
                return Err(InvalidField::new(field, "must be in the future"));
            }
            Ok(Some(at))
        }
        Some(other) => Err(InvalidField::new(
            field,
            format!("must be a string, got {}", json_type(other)),
        )),
    }
}

/// `properties.paused` (eg's own): false when absent.
pub(super) fn paused(props: &Map<String, Value>) -> Result<bool, InvalidField> {
    match props.get("paused") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(InvalidField::new(
            "properties.paused",
            format!("must be true or false, got {}", json_type(other)),
        )),
    }
}

/// `orderedDelivery` of `props` (a custom-topic `properties` or a namespace `push`):
/// `None` when absent; errors named from `orderedDelivery` down.
pub(super) fn ordered_delivery(props: &Map<String, Value>, topic: &Topic) -> Result<Option<OrderBy>, InvalidField> {
    match props.get("orderedDelivery") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => OrderBy::from_json(v, topic.input_schema)
            .map(Some)
            .map_err(|e| e.within("orderedDelivery")),
    }
}

pub(super) fn object_at<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>, InvalidField> {
    match v.get(field) {
        Some(Value::Object(map)) => Ok(map),
        Some(other) => Err(InvalidField::new(
            field,
            format!("must be an object, got {}", json_type(other)),
        )),
        None => Err(InvalidField::new(field, "is required")),
    }
}

/// What `properties.destination` says: the target, and the subscription's properties
/// written beside its own (which of them a kind takes is the kind's:
/// [`crate::destination`]).
pub(super) struct Destination {
    pub(super) target: Target,
    pub(super) batching: BatchSettings,
    pub(super) delivery_headers: Vec<DeliveryHeader>,
    pub(super) signing_secrets: SigningSecrets,
}

/// Refuses keys of `map` not in `known` (a misspelt key would otherwise be ignored
/// silently), naming the first one under `path`.
pub(super) fn only_known(map: &Map<String, Value>, known: &[&str], path: &str) -> Result<(), InvalidField> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(InvalidField::new(
            if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            },
            format!("not a known field (expected one of: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

/// Reads `destination` of `props` (errors are named from `destination` down).
pub(super) fn destination(props: &Map<String, Value>) -> Result<Destination, InvalidField> {
    let dest_value = props.get("destination");
    let dest = match dest_value {
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(InvalidField::new(
                "destination",
                format!("must be an object, got {}", json_type(other)),
            ));
        }
        None => return Err(InvalidField::new("destination", "is required")),
    };
    only_known(dest, &["endpointType", "properties"], "destination")?;
    let endpoint_type = match dest.get("endpointType") {
        Some(Value::String(t)) if ENDPOINT_TYPES.contains(&t.as_str()) => t.as_str(),
        Some(other) => {
            return Err(InvalidField::new(
                "destination.endpointType",
                format!("must be one of \"{}\", got {other}", ENDPOINT_TYPES.join("\", \"")),
            ));
        }
        None => return Err(InvalidField::new("destination.endpointType", "is required")),
    };
    let dp = object_at(dest_value.unwrap_or(&Value::Null), "properties").map_err(|e| e.within("destination"))?;
    let target = Target::read(endpoint_type, dp).map_err(|e| e.within("destination"))?;
    let batching = batching(dp)?;
    let headers = delivery_headers(dp)?;
    // Omitted means unsigned: a PUT replaces the whole subscription, secrets included.
    let signing_secrets = match dp.get("signingSecrets") {
        Some(v) if !v.is_null() && target.takes_signing_secrets() => {
            signing_secrets(v).map_err(|e| e.within("destination.properties"))?
        }
        _ => SigningSecrets::default(),
    };
    if !signing_secrets.is_empty()
        && let Some((i, h)) = headers::first_signing_header(&headers)
    {
        return Err(InvalidField::new(
            format!("destination.properties.deliveryAttributeMappings[{i}].name"),
            format!(
                "{:?} is set by the sender on signed deliveries (signingSecrets)",
                h.name
            ),
        ));
    }
    Ok(Destination {
        target,
        batching,
        delivery_headers: headers,
        signing_secrets,
    })
}

/// `destination` as `GET` shows it (both forms): the target's own properties and the
/// subscription's it takes; the webhook's base URL only, no secret header values,
/// signing secrets as fingerprints.
pub(super) fn shown_destination(sub: &Subscription, target: &Target) -> Value {
    let mut props = target.show();
    if target.takes_batching() {
        props.insert("maxEventsPerBatch".to_owned(), json!(sub.batching.max_events_per_batch));
        props.insert(
            "preferredBatchSizeInKilobytes".to_owned(),
            json!(sub.batching.preferred_batch_size_in_kilobytes),
        );
    }
    let headers: Vec<Value> = sub
        .delivery_headers
        .iter()
        .map(|h| match &h.value {
            HeaderValueSource::Static { value, is_secret } => json!({
                "name": h.name, "type": "Static",
                "properties": if *is_secret { json!({"isSecret": true}) } else { json!({"value": value, "isSecret": false}) },
            }),
            HeaderValueSource::Dynamic { source_field } => json!({
                "name": h.name, "type": "Dynamic", "properties": {"sourceField": source_field},
            }),
        })
        .collect();
    if !headers.is_empty() {
        props.insert("deliveryAttributeMappings".to_owned(), Value::Array(headers));
    }
    if !sub.signing_secrets.is_empty() {
        props.insert(
            "signingSecrets".to_owned(),
            sub.signing_secrets
                .as_slice()
                .iter()
                .map(|s| Value::String(s.fingerprint()))
                .collect(),
        );
    }
    json!({"endpointType": target.endpoint_type(), "properties": props})
}

fn batching(dp: &Map<String, Value>) -> Result<BatchSettings, InvalidField> {
    Ok(BatchSettings {
        max_events_per_batch: ranged_u32(dp, "maxEventsPerBatch", 1, 5000, 1)
            .map_err(|e| e.within("destination.properties"))?,
        preferred_batch_size_in_kilobytes: ranged_u32(dp, "preferredBatchSizeInKilobytes", 1, 1024, 64)
            .map_err(|e| e.within("destination.properties"))?,
    })
}

fn delivery_headers(dp: &Map<String, Value>) -> Result<Vec<DeliveryHeader>, InvalidField> {
    match dp.get("deliveryAttributeMappings") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => headers::from_mappings(v).map_err(|e| e.within("destination.properties")),
    }
}

/// `signingSecrets`: 0–2 `whsec_…` strings, all different. Refusals never repeat the value.
fn signing_secrets(v: &Value) -> Result<SigningSecrets, InvalidField> {
    let field = "signingSecrets";
    let Value::Array(items) = v else {
        return Err(InvalidField::new(
            field,
            format!("must be an array of \"whsec_…\" strings, got {}", json_type(v)),
        ));
    };
    if items.len() > MAX_SECRETS {
        return Err(InvalidField::new(
            field,
            format!(
                "at most {MAX_SECRETS} secrets (the current one and the next, during a rotation), got {}",
                items.len()
            ),
        ));
    }
    let mut secrets: Vec<SigningSecret> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let Value::String(raw) = item else {
            return Err(InvalidField::new(
                at,
                format!("must be a string, got {}", json_type(item)),
            ));
        };
        let secret = SigningSecret::parse(raw).map_err(|e| InvalidField::new(&at, e.to_string()))?;
        if let Some(j) = secrets.iter().position(|s| *s == secret) {
            return Err(InvalidField::new(at, format!("is the same secret as {field}[{j}]")));
        }
        secrets.push(secret);
    }
    SigningSecrets::new(secrets).map_err(|e| InvalidField::new(field, e.to_string()))
}

pub(super) fn ranged_u32(
    map: &Map<String, Value>,
    field: &str,
    min: u32,
    max: u32,
    default: u32,
) -> Result<u32, InvalidField> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if (u64::from(min)..=u64::from(max)).contains(&n) => Ok(n as u32),
            _ => Err(InvalidField::new(
                field,
                format!("must be an integer between {min} and {max}, got {v}"),
            )),
        },
    }
}

/// The delivery schema asked for, checked against the topic's input schema
/// (behaviour.md#topics-and-publishing) and profile (namespace topics deliver CloudEvents
/// only).
pub(super) fn delivery_schema(topic: &Topic, raw: Option<&Value>) -> Result<DeliverySchema, InvalidField> {
    let field = "eventDeliverySchema";
    let schema = match raw {
        None | Some(Value::Null) => topic.input_schema.default_delivery(),
        Some(Value::String(s)) => DeliverySchema::parse(s).ok_or_else(|| {
            InvalidField::new(
                field,
                format!(
                    "{s:?} is not a delivery schema; use EventGridSchema, CloudEventSchemaV1_0 or CustomInputSchema"
                ),
            )
        })?,
        Some(other) => {
            return Err(InvalidField::new(
                field,
                format!("must be a string, got {}", json_type(other)),
            ));
        }
    };
    if !topic.input_schema.can_deliver_as(schema) {
        return Err(InvalidField::new(
            field,
            format!(
                "a topic with input schema {} cannot deliver {schema}",
                topic.input_schema
            ),
        ));
    }
    if topic.profile == DeliveryProfile::NamespaceTopic && schema != DeliverySchema::CloudEventSchemaV1_0 {
        return Err(InvalidField::new(
            field,
            "topics with the NamespaceTopic profile deliver CloudEventSchemaV1_0 only",
        ));
    }
    Ok(schema)
}
