//! A subscription's custom-topic form (behaviour.md#event-subscriptions): reading the
//! `properties` of a `PUT …/eventSubscriptions/{name}` body into a valid
//! [`Subscription`] and writing one back as `GET` shows it, each refusal naming its field
//! (`properties.retryPolicy.maxDeliveryAttempts`). What it shares with the namespace
//! form is in `fields`.

use super::fields::{
    Destination, delivery_schema, destination, expiration_time, ordered_delivery, paused, ranged_u32, shown_destination,
};
use super::retry_policy::{
    CUSTOM_MAX_DELIVERY_ATTEMPTS, CUSTOM_MAX_TTL_MINUTES, NAMESPACE_DEFAULT_TTL, NAMESPACE_MAX_DELIVERY_COUNT,
    RetryPolicy,
};
use super::{DeadLetterDestination, DeliveryLimits, DeliveryMethod, Subscription, WrittenAs};
use crate::api_error::InvalidField;
use crate::destination::Target;
use crate::filter::EventFilter;
use crate::json::json_type;
use crate::names::SubscriptionName;
use crate::profile::DeliveryProfile;
use crate::time::{UnixMillis, iso8601_duration, parse_iso8601_duration};
use crate::topic::Topic;
use crate::validation::Provisioning;
use serde_json::{Map, Value, json};

impl Subscription {
    /// The top-level fields of a subscription resource. Besides `properties`, those a
    /// `GET` shows, so a resource read can be written back; all but `properties` are
    /// ignored.
    pub const RESOURCE_FIELDS: [&str; 5] = ["properties", "id", "name", "type", "systemData"];

    /// The fields of `properties`. `topic`, `provisioningState` and
    /// `provisioningMessage` are shown by `GET` and ignored when written.
    pub(crate) const PROPERTIES: [&str; 13] = [
        "destination",
        "paused",
        "filter",
        "eventDeliverySchema",
        "retryPolicy",
        "deadLetterDestination",
        "expirationTimeUtc",
        "labels",
        "orderedDelivery",
        "topic",
        "provisioningState",
        "provisioningMessage",
        "deliveryLimits",
    ];
}

/// Reads the `properties` of a custom-topic subscription of `topic`.
pub(super) fn read(
    topic: &Topic,
    name: SubscriptionName,
    props: &Map<String, Value>,
    now: UnixMillis,
) -> Result<Subscription, InvalidField> {
    if props.get("deliveryWithResourceIdentity").is_some_and(|v| !v.is_null()) {
        return Err(InvalidField::new(
            "properties.deliveryWithResourceIdentity",
            "is not supported: eg has no managed identities; give destination instead (queue and broker \
             destinations sign in with what eg's configuration holds for them)",
        ));
    }
    let Destination {
        target,
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
        Some(v) => Some(DeadLetterDestination::from_json(v).map_err(|e| e.within("properties.deadLetterDestination"))?),
    };
    let expiration_time = expiration_time(props, now)?;
    let paused = paused(props)?;
    let limits = DeliveryLimits::read(props, "properties", true)?;
    let ordering = ordered_delivery(props, topic).map_err(|e| e.within("properties"))?;
    if let Some(key) = props.keys().find(|k| !Subscription::PROPERTIES.contains(&k.as_str())) {
        return Err(InvalidField::new(
            format!("properties.{key}"),
            "not a known subscription property",
        ));
    }
    Ok(Subscription {
        name,
        topic: topic.name.clone(),
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
        delivery: DeliveryMethod::Push {
            target,
            written_as: WrittenAs::CustomTopic,
        },
        limits,
        ordering,
    })
}

/// The custom-topic resource as `GET` shows it at `now` (`target`: the subscription's).
pub(super) fn show(sub: &Subscription, target: &Target, now: UnixMillis) -> Value {
    let mut props = json!({
        "topic": format!("/topics/{}", sub.topic),
        "provisioningState": sub.provisioning.state_at(now).as_str(),
        "destination": shown_destination(sub, target),
        "filter": sub.filter,
        "eventDeliverySchema": sub.delivery_schema,
        "retryPolicy": retry_policy_resource(sub.retry_policy, sub.profile),
        "paused": sub.paused,
    });
    if let Some(message) = sub.provisioning.message(now) {
        props["provisioningMessage"] = Value::String(message);
    }
    if let Some(dl) = &sub.dead_letter {
        props["deadLetterDestination"] = dl.to_json();
    }
    if let Some(at) = sub.expiration_time {
        props["expirationTimeUtc"] = Value::String(at.to_rfc3339());
    }
    if let Some(limits) = &sub.limits {
        props["deliveryLimits"] = limits.to_json();
    }
    if let Some(order) = &sub.ordering {
        props["orderedDelivery"] = order.to_json();
    }
    json!({
        "id": format!("/topics/{}/eventSubscriptions/{}", sub.topic, sub.name),
        "name": sub.name,
        "type": "Microsoft.EventGrid/eventSubscriptions",
        "properties": props,
    })
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

/// The policy as the API shows it for `profile`.
fn retry_policy_resource(policy: RetryPolicy, profile: DeliveryProfile) -> Value {
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
    use crate::DeliverySchema;
    use crate::names::TopicName;
    use crate::routing::Routing;
    use crate::signing::SigningSecret;
    use crate::subscription::BatchSettings;
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
    fn delivery_with_resource_identity_is_refused_saying_what_to_give() {
        let body = json!({"deliveryWithResourceIdentity": {"identity": {"type": "SystemAssigned"},
            "destination": {"endpointType": "EventHub", "properties": {"resourceId": "/x"}}}});
        let e = parse(json!({ "properties": body })).unwrap_err();
        assert_eq!(e.field, "properties.deliveryWithResourceIdentity");
        assert!(e.problem.contains("give destination instead"), "{e}");
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
            assert!(s.webhook_url().is_none());
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

    #[test]
    fn delivery_limits_are_optional_shown_back_and_stored() {
        assert_eq!(parse(body()).unwrap().limits, None);
        let mut b = body();
        b["properties"]["deliveryLimits"] = json!({"requestsPerSecond": 50, "burst": 100, "maxConcurrentRequests": 8});
        let s = parse(b).unwrap();
        let shown = s.to_resource(UnixMillis(0));
        assert_eq!(
            shown["properties"]["deliveryLimits"],
            json!({"requestsPerSecond": 50.0, "burst": 100, "maxConcurrentRequests": 8})
        );
        let stored: Subscription = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(stored.limits, s.limits);

        let mut bad = body();
        bad["properties"]["deliveryLimits"] = json!({"requestsPerSecond": -1});
        assert_eq!(
            parse(bad).unwrap_err().field,
            "properties.deliveryLimits.requestsPerSecond"
        );
    }

    #[test]
    fn ordered_delivery_is_read_shown_back_and_stored() {
        let mut b = body();
        b["properties"]["orderedDelivery"] = json!({"key": "data", "path": "accountId"});
        let s = parse(b).unwrap();
        assert_eq!(s.ordering, Some(crate::ordering::OrderBy::Data("accountId".into())));
        assert_eq!(
            s.to_resource(UnixMillis(0))["properties"]["orderedDelivery"],
            json!({"key": "data", "path": "accountId"})
        );
        let stored = serde_json::to_value(&s).unwrap();
        assert_eq!(stored["orderedDelivery"], json!({"key": "data", "path": "accountId"}));
        assert_eq!(serde_json::from_value::<Subscription>(stored).unwrap(), s);
        let unordered = serde_json::to_value(parse(body()).unwrap()).unwrap();
        assert!(
            unordered.get("orderedDelivery").is_none(),
            "older tiers see nothing new"
        );
    }

    #[test]
    fn ordered_delivery_refusals_name_the_field() {
        let mut b = body();
        b["properties"]["orderedDelivery"] = json!({"key": "partitionkey"});
        assert_eq!(parse(b.clone()).unwrap_err().field, "properties.orderedDelivery.key");
        b["properties"]["orderedDelivery"] = json!({"key": "partitionKey"});
        let e = parse(b).unwrap_err();
        assert_eq!(
            e.field, "properties.orderedDelivery.key",
            "an Event Grid topic has no partitionkey"
        );
        let cloud = topic(json!({"inputSchema": "CloudEventSchemaV1_0"}));
        let mut b = body();
        b["properties"]["orderedDelivery"] = json!({"key": "partitionKey"});
        assert!(parse_on(&cloud, b).is_ok());
    }

    #[test]
    fn the_ordering_key_cannot_change_on_update_but_ordering_can_come_and_go() {
        let with_key = |key: Value| {
            let mut b = body();
            b["properties"]["orderedDelivery"] = key;
            parse(b).unwrap()
        };
        let subject = with_key(json!({"key": "subject"}));
        let event_type = with_key(json!({"key": "eventType"}));
        let unordered = parse(body()).unwrap();
        assert!(subject.may_replace(&unordered).is_ok());
        assert!(unordered.may_replace(&subject).is_ok());
        assert!(subject.may_replace(&subject).is_ok());
        let e = event_type.may_replace(&subject).unwrap_err();
        assert_eq!(e.field, "properties.orderedDelivery");
    }
}
