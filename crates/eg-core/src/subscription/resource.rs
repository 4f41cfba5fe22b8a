//! A subscription's resource form (behaviour.md#event-subscriptions): reading a
//! `PUT …/eventSubscriptions/{name}` body into a valid [`Subscription`] and writing one
//! back as `GET` shows it. The whole accepted shape is here: the top-level fields, the properties,
//! and every nested object, each refusal naming its field
//! (`properties.retryPolicy.maxDeliveryAttempts`).

use super::headers::{self, DeliveryHeader, HeaderValueSource};
use super::retry_policy::{
    CUSTOM_MAX_DELIVERY_ATTEMPTS, CUSTOM_MAX_TTL_MINUTES, NAMESPACE_DEFAULT_TTL, NAMESPACE_MAX_DELIVERY_COUNT,
    RetryPolicy,
};
use super::{BatchSettings, DeadLetterDestination, DeliveryMode, ENDPOINT_TYPES, Endpoint, Subscription, base_url};
use crate::api_error::InvalidField;
use crate::filter::EventFilter;
use crate::json::json_type;
use crate::names::SubscriptionName;
use crate::profile::DeliveryProfile;
use crate::schema::DeliverySchema;
use crate::signing::{MAX_SECRETS, SigningSecret, SigningSecrets};
use crate::time::{UnixMillis, iso8601_duration, parse_iso8601_duration};
use crate::topic::Topic;
use crate::validation::Provisioning;
use chrono::DateTime;
use serde_json::{Map, Value, json};

impl Subscription {
    /// The top-level fields of a subscription resource. Besides `properties`, those a
    /// `GET` shows, so a resource read can be written back; all but `properties` are
    /// ignored.
    pub const RESOURCE_FIELDS: [&str; 5] = ["properties", "id", "name", "type", "systemData"];

    /// The fields of `properties`. `topic`, `provisioningState` and
    /// `provisioningMessage` are shown by `GET` and ignored when written.
    pub(crate) const PROPERTIES: [&str; 11] = [
        "destination",
        "paused",
        "filter",
        "eventDeliverySchema",
        "retryPolicy",
        "deadLetterDestination",
        "expirationTimeUtc",
        "labels",
        "topic",
        "provisioningState",
        "provisioningMessage",
    ];

    /// Reads a `PUT …/eventSubscriptions/{name}` body: the custom-topic JSON
    /// (`properties.destination`), or on a namespace topic Event Grid's namespace
    /// subscription JSON (`properties.deliveryConfiguration`, see [`super::namespace`]).
    /// The subscription starts `Succeeded`; whoever runs the validation handshake
    /// replaces `provisioning` with its result before storing it.
    pub fn from_resource(
        topic: &Topic,
        name: SubscriptionName,
        body: &Value,
        now: UnixMillis,
    ) -> Result<Self, InvalidField> {
        let props = object_at(body, "properties")?;
        if super::namespace::written_as_namespace(props) {
            return super::namespace::from_resource(topic, name, props, now);
        }
        let Destination {
            endpoint,
            endpoint_url,
            batching,
            delivery_headers,
            signing_secrets,
        } = destination(props).map_err(|e| e.within("properties"))?;
        let filter = match props.get("filter") {
            None | Some(Value::Null) => EventFilter::default(),
            Some(v) => EventFilter::from_json(v).map_err(|e| e.within("properties.filter"))?,
        };
        let delivery_schema =
            delivery_schema(topic, props.get("eventDeliverySchema")).map_err(|e| e.within("properties"))?;
        let retry_policy = match props.get("retryPolicy") {
            None | Some(Value::Null) => RetryPolicy::default_for(topic.profile),
            Some(v) => retry_policy(v, topic.profile)
                .and_then(|p| p.within_retention(topic.event_retention()))
                .map_err(|e| e.within("properties.retryPolicy"))?,
        };
        let dead_letter = match props.get("deadLetterDestination") {
            None | Some(Value::Null) => None,
            Some(v) => {
                Some(DeadLetterDestination::from_json(v).map_err(|e| e.within("properties.deadLetterDestination"))?)
            }
        };
        let expiration_time = expiration_time(props, now)?;
        let paused = paused(props)?;
        if let Some(key) = props.keys().find(|k| !Self::PROPERTIES.contains(&k.as_str())) {
            return Err(InvalidField::new(
                format!("properties.{key}"),
                "not a known subscription property",
            ));
        }
        Ok(Self {
            name,
            topic: topic.name.clone(),
            endpoint_url,
            filter,
            retry_policy,
            dead_letter,
            batching,
            delivery_headers,
            signing_secrets,
            expiration_time,
            delivery_schema,
            profile: topic.profile,
            provisioning: Provisioning::Succeeded,
            paused,
            delivery_mode: DeliveryMode::Push,
            namespace_form: false,
            endpoint,
        })
    }

    /// The resource as `GET` shows it at `now`: the endpoint's base URL only, no secret
    /// header values, signing secrets as fingerprints only, no validation code.
    pub fn to_resource(&self, now: UnixMillis) -> Value {
        if self.namespace_form {
            return super::namespace::to_resource(self, now);
        }
        let mut props = json!({
            "topic": format!("/topics/{}", self.topic),
            "provisioningState": self.provisioning.state_at(now).as_str(),
            "destination": {"endpointType": self.endpoint.endpoint_type(), "properties": self.destination_resource()},
            "filter": self.filter,
            "eventDeliverySchema": self.delivery_schema,
            "retryPolicy": retry_policy_resource(self.retry_policy, self.profile),
            "paused": self.paused,
        });
        if let Some(message) = self.provisioning.message(now) {
            props["provisioningMessage"] = Value::String(message);
        }
        if let Some(dl) = &self.dead_letter {
            props["deadLetterDestination"] = dl.to_json();
        }
        if let Some(at) = self.expiration_time {
            props["expirationTimeUtc"] = Value::String(at.to_rfc3339());
        }
        json!({
            "id": format!("/topics/{}/eventSubscriptions/{}", self.topic, self.name),
            "name": self.name,
            "type": "Microsoft.EventGrid/eventSubscriptions",
            "properties": props,
        })
    }

    /// The webhook destination's `properties` as `GET` shows them (both forms).
    pub(super) fn destination_resource(&self) -> Value {
        let headers: Vec<Value> = self
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
        let mut destination_props = match &self.endpoint {
            Endpoint::WebHook => json!({
                "endpointBaseUrl": base_url(&self.endpoint_url),
                "maxEventsPerBatch": self.batching.max_events_per_batch,
                "preferredBatchSizeInKilobytes": self.batching.preferred_batch_size_in_kilobytes,
            }),
            Endpoint::StorageQueue { .. } => Value::Object(self.endpoint.properties()),
            Endpoint::RabbitMq { .. } | Endpoint::NatsJetStream { .. } => {
                let mut props = Value::Object(self.endpoint.properties());
                props["maxEventsPerBatch"] = json!(self.batching.max_events_per_batch);
                props["preferredBatchSizeInKilobytes"] = json!(self.batching.preferred_batch_size_in_kilobytes);
                props
            }
        };
        if !headers.is_empty() {
            destination_props["deliveryAttributeMappings"] = Value::Array(headers);
        }
        if !self.signing_secrets.is_empty() {
            destination_props["signingSecrets"] = self
                .signing_secrets
                .as_slice()
                .iter()
                .map(|s| Value::String(s.fingerprint()))
                .collect();
        }
        destination_props
    }
}

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

/// What `properties.destination` says.
pub(super) struct Destination {
    pub(super) endpoint: Endpoint,
    /// The webhook's URL, or the identity of another destination (`Endpoint::identity`).
    pub(super) endpoint_url: String,
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
    if endpoint_type != "WebHook" {
        return other_destination(endpoint_type, dp);
    }
    only_known(
        dp,
        &[
            "endpointUrl",
            "endpointBaseUrl",
            "maxEventsPerBatch",
            "preferredBatchSizeInKilobytes",
            "deliveryAttributeMappings",
            "signingSecrets",
        ],
        "destination.properties",
    )?;
    let field = "destination.properties.endpointUrl";
    let endpoint_url = match dp.get("endpointUrl") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(InvalidField::new(field, "must be a string")),
        None => return Err(InvalidField::new(field, "is required")),
    };
    super::http_url(field, &endpoint_url)?;
    let batching = batching(dp)?;
    let headers = delivery_headers(dp)?;
    // Omitted means unsigned: a PUT replaces the whole subscription, secrets included.
    let signing_secrets = match dp.get("signingSecrets") {
        None | Some(Value::Null) => SigningSecrets::default(),
        Some(v) => signing_secrets(v).map_err(|e| e.within("destination.properties"))?,
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
        endpoint: Endpoint::WebHook,
        endpoint_url,
        batching,
        delivery_headers: headers,
        signing_secrets,
    })
}

/// The properties a queue or broker destination shares with webhooks: batching and
/// delivery properties for the brokers (which carry headers), none for a storage queue
/// (one message per event, no properties: as Event Grid).
const BROKER_SHARED: [&str; 3] = [
    "maxEventsPerBatch",
    "preferredBatchSizeInKilobytes",
    "deliveryAttributeMappings",
];

/// A `StorageQueue`, `RabbitMQ` or `NatsJetStream` destination.
fn other_destination(endpoint_type: &str, dp: &Map<String, Value>) -> Result<Destination, InvalidField> {
    let shared: &[&str] = if endpoint_type == "StorageQueue" {
        &[]
    } else {
        &BROKER_SHARED
    };
    let endpoint = Endpoint::from_properties(endpoint_type, dp, shared).map_err(|e| e.within("destination"))?;
    Ok(Destination {
        endpoint_url: endpoint.identity().unwrap_or_default(),
        endpoint,
        batching: batching(dp)?,
        delivery_headers: delivery_headers(dp)?,
        signing_secrets: SigningSecrets::default(),
    })
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

fn retry_policy(v: &Value, profile: DeliveryProfile) -> Result<RetryPolicy, InvalidField> {
    let Value::Object(map) = v else {
        return Err(InvalidField::new("", "must be an object"));
    };
    let (known, other): (&[&str], &str) = match profile {
        DeliveryProfile::CustomTopic => (
            &["maxDeliveryAttempts", "eventTimeToLiveInMinutes"],
            "namespace-topic fields (maxDeliveryCount, eventTimeToLive) are for topics with deliveryProfile NamespaceTopic",
        ),
        DeliveryProfile::NamespaceTopic => (
            &["maxDeliveryCount", "eventTimeToLive"],
            "this topic uses the NamespaceTopic profile: give maxDeliveryCount (1-10) and eventTimeToLive (ISO 8601, PT1M-P7D)",
        ),
    };
    if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(InvalidField::new(
            key.clone(),
            format!("not a retry policy field here; {other}"),
        ));
    }
    match profile {
        DeliveryProfile::CustomTopic => {
            let attempts = ranged_u32(
                map,
                "maxDeliveryAttempts",
                1,
                CUSTOM_MAX_DELIVERY_ATTEMPTS,
                CUSTOM_MAX_DELIVERY_ATTEMPTS,
            )?;
            let ttl = ranged_u32(
                map,
                "eventTimeToLiveInMinutes",
                1,
                CUSTOM_MAX_TTL_MINUTES,
                CUSTOM_MAX_TTL_MINUTES,
            )?;
            RetryPolicy::new(attempts, ttl)
        }
        DeliveryProfile::NamespaceTopic => {
            let count = ranged_u32(
                map,
                "maxDeliveryCount",
                1,
                NAMESPACE_MAX_DELIVERY_COUNT,
                NAMESPACE_MAX_DELIVERY_COUNT,
            )?;
            let ttl = match map.get("eventTimeToLive") {
                None | Some(Value::Null) => NAMESPACE_DEFAULT_TTL,
                Some(Value::String(raw)) => {
                    parse_iso8601_duration(raw).map_err(|e| InvalidField::new("eventTimeToLive", e))?
                }
                Some(other) => {
                    return Err(InvalidField::new(
                        "eventTimeToLive",
                        format!("must be an ISO 8601 duration string, got {}", json_type(other)),
                    ));
                }
            };
            RetryPolicy::namespace(count, ttl)
        }
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

/// The policy as the API shows it for `profile`.
pub(super) fn retry_policy_resource(policy: RetryPolicy, profile: DeliveryProfile) -> Value {
    match profile {
        DeliveryProfile::CustomTopic => json!({
            "maxDeliveryAttempts": policy.max_delivery_attempts(),
            "eventTimeToLiveInMinutes": policy.event_time_to_live().as_secs() / 60,
        }),
        DeliveryProfile::NamespaceTopic => json!({
            "maxDeliveryCount": policy.max_delivery_attempts(),
            "eventTimeToLive": iso8601_duration(policy.event_time_to_live()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::TopicName;
    use crate::routing::Routing;
    use std::time::Duration;

    fn parse(body: Value) -> Result<Subscription, InvalidField> {
        Subscription::from_resource(
            &Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap(),
            SubscriptionName::parse("billing").unwrap(),
            &body,
            UnixMillis(0),
        )
    }

    fn body() -> Value {
        json!({"properties": {
            "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://hooks.example/in?code=secret"}},
            "filter": {"includedEventTypes": ["A"]},
            "retryPolicy": {"maxDeliveryAttempts": 5, "eventTimeToLiveInMinutes": 60},
            "deadLetterDestination": {"endpointType": "LocalDirectory", "properties": {"containerName": "dead-letters"}}
        }})
    }

    #[test]
    fn reads_event_grid_resource_json() {
        let s = parse(body()).unwrap();
        assert_eq!(s.retry_policy.max_delivery_attempts(), 5);
        assert_eq!(s.retry_policy.event_time_to_live(), Duration::from_secs(3600));
        assert_eq!(s.dead_letter.unwrap().container_name, "dead-letters");
        assert_eq!(s.batching, BatchSettings::default());
    }

    #[test]
    fn misspelt_destination_fields_are_refused_naming_them() {
        let cases: [(&str, Value, &str); 4] = [
            (
                "/destination/endpointTyp",
                json!("WebHook"),
                "properties.destination.endpointTyp",
            ),
            (
                "/destination/properties/maxEventPerBatch",
                json!(10),
                "properties.destination.properties.maxEventPerBatch",
            ),
            (
                "/deadLetterDestination/properties/container",
                json!("x"),
                "properties.deadLetterDestination.properties.container",
            ),
            (
                "/deadLetterDestination/kind",
                json!("x"),
                "properties.deadLetterDestination.kind",
            ),
        ];
        for (pointer, value, field) in cases {
            let mut b = body();
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            b["properties"].pointer_mut(parent).unwrap()[key] = value;
            let e = parse(b).unwrap_err();
            assert_eq!(e.field, field, "{pointer}: {e:?}");
            assert!(e.problem.contains("not a known field"), "{e:?}");
        }
        let mut b = body();
        b["properties"]["destination"] = json!("https://hooks.example/in");
        let e = parse(b).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.problem.as_str()),
            ("properties.destination", "must be an object, got a string")
        );
    }

    #[test]
    fn a_resource_read_back_can_be_written_again_and_azure_names_work() {
        let shown = parse(body()).unwrap().to_resource(UnixMillis(0));
        let mut again = shown.clone();
        again["properties"]["destination"]["properties"]["endpointUrl"] = json!("https://hooks.example/in");
        assert!(parse(again).is_ok(), "GET → PUT round trip: {shown}");
        let mut b = body();
        b["properties"]["deadLetterDestination"]["properties"] = json!({"blobContainerName": "azure-style"});
        assert_eq!(parse(b).unwrap().dead_letter.unwrap().container_name, "azure-style");
    }

    #[test]
    fn broker_and_queue_destinations_read_back_as_written() {
        let destinations = [
            json!({"endpointType": "RabbitMQ", "properties": {"connection": "main", "exchange": "events",
                "routingKeyFrom": "subject", "maxEventsPerBatch": 10,
                "deliveryAttributeMappings": [{"name": "tenant", "type": "Static", "properties": {"value": "a"}}]}}),
            json!({"endpointType": "NatsJetStream", "properties": {"connection": "events", "subject": "eg.orders"}}),
            json!({"endpointType": "StorageQueue", "properties": {"queueName": "orders",
                "resourceId": "/subscriptions/0/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/queues1"}}),
        ];
        for destination in destinations {
            let mut b = body();
            b["properties"]["destination"] = destination.clone();
            let s = parse(b).unwrap();
            assert!(!s.endpoint.is_webhook());
            assert_eq!(Some(&s.endpoint_url), s.endpoint.identity().as_ref());
            let shown = s.to_resource(UnixMillis(0));
            assert_eq!(
                shown["properties"]["destination"]["endpointType"],
                destination["endpointType"]
            );
            assert_eq!(parse(shown).unwrap(), s, "GET → PUT round trip");
        }
        let mut queue_with_headers = body();
        queue_with_headers["properties"]["destination"] = json!({"endpointType": "StorageQueue", "properties": {
            "queueName": "orders", "deliveryAttributeMappings": [],
            "resourceId": "/subscriptions/0/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/queues1"}});
        assert_eq!(
            parse(queue_with_headers).unwrap_err().field,
            "properties.destination.properties.deliveryAttributeMappings",
            "a storage queue message has no properties to carry them (as in Event Grid)"
        );
    }

    #[test]
    fn get_never_shows_the_full_url_or_secrets() {
        let mut b = body();
        b["properties"]["destination"]["properties"]["deliveryAttributeMappings"] =
            json!([{"name": "X-Key", "type": "Static", "properties": {"value": "hunter2", "isSecret": true}}]);
        let shown = parse(b).unwrap().to_resource(UnixMillis(0)).to_string();
        assert!(!shown.contains("secret"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("https://hooks.example/in"), "{shown}");
    }

    #[test]
    fn ranges_are_enforced_naming_the_field() {
        let mut b = body();
        b["properties"]["retryPolicy"]["maxDeliveryAttempts"] = json!(31);
        assert_eq!(
            parse(b).unwrap_err().field,
            "properties.retryPolicy.maxDeliveryAttempts"
        );
        let mut b = body();
        b["properties"]["retryPolicy"]["eventTimeToLiveInMinutes"] = json!(0);
        assert_eq!(
            parse(b).unwrap_err().field,
            "properties.retryPolicy.eventTimeToLiveInMinutes"
        );
        let mut b = body();
        b["properties"]["destination"]["properties"]["maxEventsPerBatch"] = json!(5001);
        assert_eq!(
            parse(b).unwrap_err().field,
            "properties.destination.properties.maxEventsPerBatch"
        );
        let mut b = body();
        b["properties"]["destination"]["properties"]["endpointUrl"] = json!("ftp://x");
        assert_eq!(
            parse(b).unwrap_err().field,
            "properties.destination.properties.endpointUrl"
        );
        for port_zero in ["http://hooks.example:0/in", "https://127.0.0.1:0", "http://[::1]:0/x"] {
            let mut b = body();
            b["properties"]["destination"]["properties"]["endpointUrl"] = json!(port_zero);
            let err = parse(b).unwrap_err();
            assert_eq!(
                err.field, "properties.destination.properties.endpointUrl",
                "{port_zero}"
            );
            assert!(err.problem.contains("port 0"), "{err}");
        }
        let mut b = body();
        b["properties"]["destination"]["properties"]["endpointUrl"] = json!("http://hooks.example:8080/in");
        assert!(parse(b).is_ok());
        let mut b = body();
        b["properties"]["deadLetterDestination"]["properties"]["containerName"] = json!("../etc");
        assert_eq!(
            parse(b).unwrap_err().field,
            "properties.deadLetterDestination.properties.containerName"
        );
    }

    #[test]
    fn header_rules_are_enforced() {
        let with = |h: Value| {
            let mut b = body();
            b["properties"]["destination"]["properties"]["deliveryAttributeMappings"] = h;
            parse(b)
        };
        let err = with(json!([{"name": "aeg-x", "type": "Static", "properties": {"value": "v"}}])).unwrap_err();
        assert!(err.field.ends_with("[0].name"), "{err}");
        let err = with(json!([{"name": "bad name", "type": "Static", "properties": {"value": "v"}}])).unwrap_err();
        assert!(err.field.ends_with("[0].name"), "{err}");
        let many: Vec<Value> = (0..11)
            .map(|i| json!({"name": format!("h{i}"), "type": "Static", "properties": {"value": "v"}}))
            .collect();
        assert!(with(Value::Array(many)).is_err());
        let long = json!([{"name": "h", "type": "Static", "properties": {"value": "x".repeat(4097)}}]);
        assert!(with(long).is_err());
    }

    const SECRET_A: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    const SECRET_B: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn with_secrets(secrets: Value) -> Result<Subscription, InvalidField> {
        let mut b = body();
        b["properties"]["destination"]["properties"]["signingSecrets"] = secrets;
        parse(b)
    }

    #[test]
    fn signing_secrets_are_kept_but_shown_only_as_fingerprints() {
        let s = with_secrets(json!([SECRET_B, SECRET_A])).unwrap();
        let kept: Vec<String> = s
            .signing_secrets
            .as_slice()
            .iter()
            .map(SigningSecret::fingerprint)
            .collect();
        assert_eq!(kept.len(), 2);
        let shown = s.to_resource(UnixMillis(0));
        assert_eq!(
            shown["properties"]["destination"]["properties"]["signingSecrets"],
            json!(kept),
            "{shown}"
        );
        let text = shown.to_string();
        assert!(
            !text.contains("C2FVsBQIhrsc") && !text.contains("MfKQ9r8GKYq"),
            "{text}"
        );
        assert!(!format!("{s:?}").contains("C2FVsBQIhrsc"));
        // The catalog keeps the secrets themselves, in order.
        let stored: Subscription = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(stored, s);
        // No secrets: nothing shown, nothing stored.
        let plain = parse(body()).unwrap();
        assert!(plain.signing_secrets.is_empty());
        assert!(
            plain.to_resource(UnixMillis(0))["properties"]["destination"]["properties"]
                .get("signingSecrets")
                .is_none()
        );
        assert!(!serde_json::to_string(&plain).unwrap().contains("signingSecrets"));
        assert!(with_secrets(json!([])).unwrap().signing_secrets.is_empty());
    }

    #[test]
    fn signing_secret_refusals_name_the_field_and_never_echo_the_value() {
        let refused = |secrets: Value| with_secrets(secrets).unwrap_err();
        let field = "properties.destination.properties.signingSecrets";
        let err = refused(json!([SECRET_A, "whsec_c2hvcnQ="]));
        assert_eq!(err.field, format!("{field}[1]"));
        assert!(err.problem.contains("24 to 64 bytes"), "{err}");
        let err = refused(json!(["C2FVsBQIhrscChlQIMV+b5sSYspob7oD"]));
        assert_eq!(err.field, format!("{field}[0]"));
        assert!(err.problem.contains("whsec_"), "{err}");
        assert!(!err.to_string().contains("C2FVsBQIhrsc"), "{err}");
        assert_eq!(refused(json!(["whsec_%%%"])).field, format!("{field}[0]"));
        assert_eq!(refused(json!([5])).field, format!("{field}[0]"));
        assert_eq!(refused(json!(SECRET_A)).field, field);
        let err = refused(json!([SECRET_A, SECRET_B, SECRET_A]));
        assert_eq!(err.field, field);
        assert!(err.problem.contains("at most 2"), "{err}");
        let err = refused(json!([SECRET_A, SECRET_A]));
        assert_eq!(err.field, format!("{field}[1]"));
        // What GET shows cannot be written back as if it were a secret.
        let fingerprint = SigningSecret::parse(SECRET_A).unwrap().fingerprint();
        let err = refused(json!([fingerprint]));
        assert!(err.problem.contains("fingerprint"), "{err}");
    }

    #[test]
    fn signed_subscriptions_cannot_set_the_signature_headers() {
        let mut b = body();
        b["properties"]["destination"]["properties"]["signingSecrets"] = json!([SECRET_A]);
        b["properties"]["destination"]["properties"]["deliveryAttributeMappings"] = json!([
            {"name": "X-Ok", "type": "Static", "properties": {"value": "v"}},
            {"name": "Webhook-Signature", "type": "Static", "properties": {"value": "v1,forged"}},
        ]);
        let err = parse(b.clone()).unwrap_err();
        assert_eq!(
            err.field,
            "properties.destination.properties.deliveryAttributeMappings[1].name"
        );
        // Unsigned subscriptions may send such a header themselves.
        b["properties"]["destination"]["properties"]
            .as_object_mut()
            .unwrap()
            .remove("signingSecrets");
        assert!(parse(b).is_ok());
    }

    #[test]
    fn expired_subscriptions_stop_matching() {
        let mut b = body();
        b["properties"]["expirationTimeUtc"] = json!("1970-01-01T00:00:01Z");
        let s = parse(b).unwrap();
        let fields = serde_json::Map::new();
        let e = Routing {
            event_type: "A",
            subject: "s",
            fields: &fields,
        };
        assert!(s.matches(&e, UnixMillis(0)));
        assert!(!s.matches(&e, UnixMillis(1000)));
    }

    fn topic(props: Value) -> Topic {
        let mut t = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        if let Some(schema) = props.get("inputSchema").and_then(Value::as_str) {
            t.input_schema = crate::schema::InputSchema::parse(schema).unwrap();
        }
        if props.get("namespace").is_some() {
            t.profile = DeliveryProfile::NamespaceTopic;
        }
        t
    }

    fn parse_on(topic: &Topic, body: Value) -> Result<Subscription, InvalidField> {
        Subscription::from_resource(topic, SubscriptionName::parse("billing").unwrap(), &body, UnixMillis(0))
    }

    #[test]
    fn delivery_schema_follows_the_conversion_table() {
        let with_schema = |schema: &str| {
            let mut b = body();
            b["properties"]["eventDeliverySchema"] = json!(schema);
            b
        };
        let eg = topic(json!({}));
        assert_eq!(
            parse_on(&eg, body()).unwrap().delivery_schema,
            DeliverySchema::EventGridSchema
        );
        assert_eq!(
            parse_on(&eg, with_schema("CloudEventSchemaV1_0"))
                .unwrap()
                .delivery_schema,
            DeliverySchema::CloudEventSchemaV1_0
        );
        let err = parse_on(&eg, with_schema("CustomInputSchema")).unwrap_err();
        assert_eq!(err.field, "properties.eventDeliverySchema");
        assert!(err.to_string().contains("cannot deliver"), "{err}");
        let ce = topic(json!({"inputSchema": "CloudEventSchemaV1_0"}));
        assert_eq!(
            parse_on(&ce, body()).unwrap().delivery_schema,
            DeliverySchema::CloudEventSchemaV1_0
        );
        assert!(parse_on(&ce, with_schema("EventGridSchema")).is_err());
        let custom = topic(json!({"inputSchema": "CustomEventSchema"}));
        for schema in ["EventGridSchema", "CloudEventSchemaV1_0", "CustomInputSchema"] {
            assert!(parse_on(&custom, with_schema(schema)).is_ok(), "{schema}");
        }
        assert!(parse_on(&eg, with_schema("Avro")).is_err());
    }

    #[test]
    fn namespace_profile_has_its_own_retry_policy() {
        let ns = topic(json!({"inputSchema": "CloudEventSchemaV1_0", "namespace": true}));
        let mut b = body();
        b["properties"]["retryPolicy"] = json!({"maxDeliveryCount": 3, "eventTimeToLive": "PT5M"});
        let s = parse_on(&ns, b).unwrap();
        assert_eq!(s.retry_policy.max_delivery_attempts(), 3);
        assert_eq!(s.retry_policy.event_time_to_live(), Duration::from_secs(300));
        assert_eq!(s.profile, DeliveryProfile::NamespaceTopic);
        let shown = s.to_resource(UnixMillis(0));
        assert_eq!(shown["properties"]["retryPolicy"]["eventTimeToLive"], "PT5M");
        assert_eq!(shown["properties"]["retryPolicy"]["maxDeliveryCount"], 3);

        let refused = |policy: Value| {
            let mut b = body();
            b["properties"]["retryPolicy"] = policy;
            parse_on(&ns, b).unwrap_err().field
        };
        assert_eq!(
            refused(json!({"maxDeliveryCount": 11})),
            "properties.retryPolicy.maxDeliveryCount"
        );
        assert_eq!(
            refused(json!({"eventTimeToLive": "PT30S"})),
            "properties.retryPolicy.eventTimeToLive"
        );
        assert_eq!(
            refused(json!({"eventTimeToLive": "P8D"})),
            "properties.retryPolicy.eventTimeToLive"
        );
        assert_eq!(
            refused(json!({"eventTimeToLive": "P1M"})),
            "properties.retryPolicy.eventTimeToLive"
        );
        assert_eq!(
            refused(json!({"maxDeliveryAttempts": 5})),
            "properties.retryPolicy.maxDeliveryAttempts"
        );
        let default = parse_on(&ns, body_without_retry()).unwrap();
        assert_eq!(default.retry_policy.max_delivery_attempts(), 10);
        let mut b = body();
        b["properties"]["eventDeliverySchema"] = json!("EventGridSchema");
        b["properties"]["retryPolicy"] = json!({});
        assert!(parse_on(&ns, b).is_err());
    }

    fn body_without_retry() -> Value {
        let mut b = body();
        b["properties"].as_object_mut().unwrap().remove("retryPolicy");
        b
    }

    #[test]
    fn only_validated_subscriptions_match() {
        let mut s = parse(body()).unwrap();
        let fields = serde_json::Map::new();
        let e = Routing {
            event_type: "A",
            subject: "s",
            fields: &fields,
        };
        assert!(s.matches(&e, UnixMillis(0)));
        s.provisioning = Provisioning::AwaitingManualAction {
            code: "c".into(),
            deadline: UnixMillis(10),
            reason: String::new(),
        };
        assert!(!s.matches(&e, UnixMillis(0)));
        let shown = s.to_resource(UnixMillis(0));
        assert_eq!(shown["properties"]["provisioningState"], "AwaitingManualAction");
        assert!(!shown.to_string().contains("\"c\""));
        assert_eq!(
            s.to_resource(UnixMillis(10))["properties"]["provisioningState"],
            "Failed"
        );
    }
}
