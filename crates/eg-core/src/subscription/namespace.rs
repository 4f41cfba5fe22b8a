//! Namespace subscriptions in Event Grid's namespace subscription JSON
//! (`Microsoft.EventGrid/namespaces/topics/eventSubscriptions`): reading a `PUT` body
//! with `properties.deliveryConfiguration` into a valid [`Subscription`], and writing it
//! back as `GET` shows it.
//!
//! `deliveryMode: Push` becomes the webhook subscription eg always had, with the
//! namespace topic's (seed 002) retry limits; `deliveryMode: Queue` becomes a queue-mode
//! subscription with no endpoint, which consumers pull from. The filter items are the
//! custom-topic advanced filters, read by [`crate::advanced_filter`]. Every refusal
//! names its field from `properties` down.

use super::fields::{
    Destination, delivery_schema, destination, expiration_time, only_known, ordered_delivery, paused, ranged_u32,
    shown_destination,
};
use super::retry_policy::{NAMESPACE_DEFAULT_TTL, NAMESPACE_MAX_DELIVERY_COUNT, RetryPolicy};
use super::{
    BatchSettings, DEFAULT_RECEIVE_LOCK, DeadLetterDestination, DeliveryLimits, DeliveryMethod, Subscription, WrittenAs,
};
use crate::advanced_filter;
use crate::api_error::InvalidField;
use crate::filter::EventFilter;
use crate::json::json_type;
use crate::names::SubscriptionName;
use crate::ordering::OrderBy;
use crate::profile::DeliveryProfile;
use crate::signing::SigningSecrets;
use crate::time::{UnixMillis, iso8601_duration, parse_iso8601_duration};
use crate::topic::Topic;
use crate::validation::Provisioning;
use serde_json::{Map, Value, json};

/// The fields of `properties` in the namespace form. `topic`, `provisioningState` and
/// `provisioningMessage` are shown by `GET` and ignored when written; `paused` is eg's.
pub(crate) const NAMESPACE_PROPERTIES: [&str; 8] = [
    "deliveryConfiguration",
    "eventDeliverySchema",
    "filtersConfiguration",
    "expirationTimeUtc",
    "paused",
    "topic",
    "provisioningState",
    "provisioningMessage",
];

/// Custom-topic fields, and where the namespace form says the same.
const CUSTOM_TOPIC_FIELDS: [(&str, &str); 4] = [
    ("destination", "deliveryConfiguration.push.destination"),
    (
        "retryPolicy",
        "maxDeliveryCount and eventTimeToLive in deliveryConfiguration.push (or .queue)",
    ),
    ("filter", "filtersConfiguration (includedEventTypes, filters)"),
    (
        "deadLetterDestination",
        "deliveryConfiguration.push (or .queue).deadLetterDestinationWithResourceIdentity.deadLetterDestination",
    ),
];

/// Whether `properties` is written in the namespace form.
pub(super) fn written_as_namespace(props: &Map<String, Value>) -> bool {
    props.contains_key("deliveryConfiguration") || props.contains_key("filtersConfiguration")
}

/// Reads the `properties` of a namespace subscription of `topic`.
pub(super) fn read(
    topic: &Topic,
    name: SubscriptionName,
    props: &Map<String, Value>,
    now: UnixMillis,
) -> Result<Subscription, InvalidField> {
    if topic.profile != DeliveryProfile::NamespaceTopic {
        let field = if props.contains_key("deliveryConfiguration") {
            "properties.deliveryConfiguration"
        } else {
            "properties.filtersConfiguration"
        };
        return Err(InvalidField::new(
            field,
            format!(
                "topic {:?} is a custom topic: only namespace topics (publisherType Custom) take Event Grid's \
                 namespace subscription form; give properties.destination and properties.filter instead",
                topic.name.as_str()
            ),
        ));
    }
    if let Some((old, new)) = CUSTOM_TOPIC_FIELDS.iter().find(|(old, _)| props.contains_key(*old)) {
        return Err(InvalidField::new(
            format!("properties.{old}"),
            format!("a namespace subscription (written with deliveryConfiguration) gives this as {new}"),
        ));
    }
    only_known(props, &NAMESPACE_PROPERTIES, "properties")?;
    let config = match props.get("deliveryConfiguration") {
        Some(Value::Object(config)) => config,
        Some(other) => {
            return Err(InvalidField::new(
                "properties.deliveryConfiguration",
                format!("must be an object, got {}", json_type(other)),
            ));
        }
        None => {
            return Err(InvalidField::new(
                "properties.deliveryConfiguration",
                "is required: {\"deliveryMode\": \"Push\", \"push\": {…}} or {\"deliveryMode\": \"Queue\", \"queue\": {…}}",
            ));
        }
    };
    let delivery = delivery_configuration(config, topic).map_err(|e| e.within("properties.deliveryConfiguration"))?;
    let delivery_schema =
        delivery_schema(topic, props.get("eventDeliverySchema")).map_err(|e| e.within("properties"))?;
    let filter = filters_configuration(props.get("filtersConfiguration"))
        .map_err(|e| e.within("properties.filtersConfiguration"))?;
    let (method, batching, delivery_headers, signing_secrets) = match delivery.method {
        Method::Push(Destination {
            target,
            batching,
            delivery_headers,
            signing_secrets,
        }) => (
            DeliveryMethod::Push {
                target,
                written_as: WrittenAs::Namespace,
            },
            batching,
            delivery_headers,
            signing_secrets,
        ),
        Method::Queue(queue) => (queue, BatchSettings::default(), Vec::new(), SigningSecrets::default()),
    };
    let paused = paused(props)?;
    if paused && !method.is_push() {
        // Receive does not look at `paused`: a paused queue would hand out events anyway.
        return Err(InvalidField::new(
            "properties.paused",
            "a queue-mode subscription cannot be paused (its consumers pull when they choose); stop its consumers instead",
        ));
    }
    Ok(Subscription {
        name,
        topic: topic.name.clone(),
        filter,
        retry_policy: delivery.retry_policy,
        dead_letter: delivery.dead_letter,
        batching,
        delivery_headers,
        signing_secrets,
        expiration_time: expiration_time(props, now)?,
        delivery_schema,
        profile: topic.profile,
        provisioning: Provisioning::Succeeded,
        paused,
        delivery: method,
        limits: delivery.limits,
        ordering: delivery.ordering,
    })
}

/// What `deliveryConfiguration` says.
struct Delivery {
    method: Method,
    limits: Option<DeliveryLimits>,
    retry_policy: RetryPolicy,
    dead_letter: Option<DeadLetterDestination>,
    /// Push only: a queue's consumers receive by lock, not by key.
    ordering: Option<OrderBy>,
}

/// Push mode's destination, or queue mode (a [`DeliveryMethod::Queue`]).
enum Method {
    Push(Destination),
    Queue(DeliveryMethod),
}

fn delivery_configuration(config: &Map<String, Value>, topic: &Topic) -> Result<Delivery, InvalidField> {
    only_known(config, &["deliveryMode", "push", "queue"], "")?;
    let push = match config.get("deliveryMode") {
        Some(Value::String(s)) if s.eq_ignore_ascii_case("Push") => true,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("Queue") => false,
        Some(Value::String(s)) => {
            return Err(InvalidField::new(
                "deliveryMode",
                format!("must be \"Push\" or \"Queue\", got {s:?}"),
            ));
        }
        Some(Value::Null) | None => {
            return Err(InvalidField::new(
                "deliveryMode",
                "is required: \"Push\" (eg delivers to a webhook) or \"Queue\" (consumers receive events with a lock)",
            ));
        }
        Some(other) => {
            return Err(InvalidField::new(
                "deliveryMode",
                format!("must be \"Push\" or \"Queue\", got {}", json_type(other)),
            ));
        }
    };
    let (mode, given, other) = if push {
        ("Push", "push", "queue")
    } else {
        ("Queue", "queue", "push")
    };
    if config.get(other).is_some_and(|v| !v.is_null()) {
        return Err(InvalidField::new(
            other,
            format!("deliveryMode is {mode}: its settings go in {given}, not {other}"),
        ));
    }
    let settings = match config.get(given) {
        Some(Value::Object(settings)) => settings,
        Some(Value::Null) | None => {
            return Err(InvalidField::new(
                given,
                format!("is required when deliveryMode is {mode}"),
            ));
        }
        Some(v) => {
            return Err(InvalidField::new(
                given,
                format!("must be an object, got {}", json_type(v)),
            ));
        }
    };
    let read = if push { push_settings } else { queue_settings };
    read(settings, topic).map_err(|e| e.within(given))
}

/// `push`: a webhook with the namespace topic's retry limits.
fn push_settings(settings: &Map<String, Value>, topic: &Topic) -> Result<Delivery, InvalidField> {
    only_known(
        settings,
        &[
            "maxDeliveryCount",
            "eventTimeToLive",
            "destination",
            "deliveryWithResourceIdentity",
            "deadLetterDestinationWithResourceIdentity",
            "deliveryLimits",
            "orderedDelivery",
        ],
        "",
    )?;
    if settings
        .get("deliveryWithResourceIdentity")
        .is_some_and(|v| !v.is_null())
    {
        return Err(InvalidField::new(
            "deliveryWithResourceIdentity",
            "is not supported: eg has no managed identities; give destination instead (queue and broker \
             destinations sign in with what eg's configuration holds for them)",
        ));
    }
    Ok(Delivery {
        method: Method::Push(destination(settings)?),
        limits: DeliveryLimits::read(settings, "", true)?,
        retry_policy: limits(settings, topic)?,
        dead_letter: dead_letter(settings)?,
        ordering: ordered_delivery(settings, topic)?,
    })
}

/// `queue`: no endpoint; a receive lock and the namespace topic's limits.
fn queue_settings(settings: &Map<String, Value>, topic: &Topic) -> Result<Delivery, InvalidField> {
    DeliveryLimits::read(settings, "", false)?;
    if settings.get("orderedDelivery").is_some_and(|v| !v.is_null()) {
        // Consumers take whichever events they receive and settle them in any order, so
        // eg could not promise a key's order to them.
        return Err(InvalidField::new(
            "orderedDelivery",
            "applies to push delivery only: a queue's consumers receive events by lock and settle them \
             in any order; order by key in the consumer, or use deliveryMode Push",
        ));
    }
    only_known(
        settings,
        &[
            "receiveLockDurationInSeconds",
            "maxDeliveryCount",
            "eventTimeToLive",
            "deadLetterDestinationWithResourceIdentity",
        ],
        "",
    )?;
    let seconds = match settings.get("receiveLockDurationInSeconds") {
        None | Some(Value::Null) => DEFAULT_RECEIVE_LOCK.as_secs(),
        Some(v) => v.as_u64().ok_or_else(|| {
            InvalidField::new(
                "receiveLockDurationInSeconds",
                format!("must be a whole number of seconds between 60 and 300, got {v}"),
            )
        })?,
    };
    Ok(Delivery {
        method: Method::Queue(DeliveryMethod::queue(seconds)?),
        limits: None,
        retry_policy: limits(settings, topic)?,
        dead_letter: dead_letter(settings)?,
        ordering: None,
    })
}

/// `maxDeliveryCount` (1–10, default 10) and `eventTimeToLive` (`PT1M` … the lower of
/// `P7D` and the topic's retention; default `P1D`).
fn limits(settings: &Map<String, Value>, topic: &Topic) -> Result<RetryPolicy, InvalidField> {
    let count = ranged_u32(
        settings,
        "maxDeliveryCount",
        1,
        NAMESPACE_MAX_DELIVERY_COUNT,
        NAMESPACE_MAX_DELIVERY_COUNT,
    )?;
    let ttl = match settings.get("eventTimeToLive") {
        None | Some(Value::Null) => NAMESPACE_DEFAULT_TTL,
        Some(Value::String(raw)) => parse_iso8601_duration(raw).map_err(|e| InvalidField::new("eventTimeToLive", e))?,
        Some(other) => {
            return Err(InvalidField::new(
                "eventTimeToLive",
                format!(
                    "must be an ISO 8601 duration string such as PT10M or P1D, got {}",
                    json_type(other)
                ),
            ));
        }
    };
    RetryPolicy::namespace(count, ttl)?.within_retention(topic.event_retention())
}

/// `deadLetterDestinationWithResourceIdentity`: its `deadLetterDestination` names the
/// container (a directory under eg's dead-letter root); `identity` and
/// `deliveryRetryPeriodInDays` are accepted and not used.
fn dead_letter(settings: &Map<String, Value>) -> Result<Option<DeadLetterDestination>, InvalidField> {
    let field = "deadLetterDestinationWithResourceIdentity";
    let wrapper = match settings.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(wrapper)) => wrapper,
        Some(other) => {
            return Err(InvalidField::new(
                field,
                format!("must be an object, got {}", json_type(other)),
            ));
        }
    };
    only_known(
        wrapper,
        &["identity", "deadLetterDestination", "deliveryRetryPeriodInDays"],
        field,
    )?;
    match wrapper.get("deadLetterDestination") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => DeadLetterDestination::from_json(v)
            .map(Some)
            .map_err(|e| e.within(&format!("{field}.deadLetterDestination"))),
    }
}

/// `filtersConfiguration`: `includedEventTypes` (null or `[]` mean every type, as in
/// Event Grid) and `filters`, the advanced-filter items.
fn filters_configuration(v: Option<&Value>) -> Result<EventFilter, InvalidField> {
    let config = match v {
        None | Some(Value::Null) => return Ok(EventFilter::default()),
        Some(Value::Object(config)) => config,
        Some(other) => {
            return Err(InvalidField::new(
                "",
                format!("must be an object, got {}", json_type(other)),
            ));
        }
    };
    only_known(config, &["includedEventTypes", "filters"], "")?;
    let types = match config.get("includedEventTypes") {
        Some(Value::Array(types)) if types.is_empty() => Value::Null,
        Some(types) => types.clone(),
        None => Value::Null,
    };
    let mut filter = EventFilter::from_json(&json!({ "includedEventTypes": types }))?;
    if let Some(filters) = config.get("filters") {
        filter.advanced_filters = advanced_filter::parse_list(filters).map_err(|e| e.within("filters"))?;
    }
    Ok(filter)
}

/// The namespace subscription as `GET` shows it: the webhook's base URL only, no secret
/// header values, signing secrets as fingerprints. A `PUT` of it (with the push
/// destination's `endpointUrl` given again) writes the same subscription.
pub(super) fn show(sub: &Subscription, now: UnixMillis) -> Value {
    let mut settings = json!({
        "maxDeliveryCount": sub.retry_policy.max_delivery_attempts(),
        "eventTimeToLive": iso8601_duration(sub.retry_policy.event_time_to_live()),
    });
    if let Some(dl) = &sub.dead_letter {
        settings["deadLetterDestinationWithResourceIdentity"] =
            json!({"deadLetterDestination": dl.to_namespace_json()});
    }
    let delivery = match &sub.delivery {
        DeliveryMethod::Push { target, .. } => {
            settings["destination"] = shown_destination(sub, target);
            if let Some(limits) = &sub.limits {
                settings["deliveryLimits"] = limits.to_json();
            }
            if let Some(order) = &sub.ordering {
                settings["orderedDelivery"] = order.to_json();
            }
            json!({"deliveryMode": "Push", "push": settings})
        }
        DeliveryMethod::Queue { receive_lock_seconds } => {
            settings["receiveLockDurationInSeconds"] = json!(receive_lock_seconds);
            json!({"deliveryMode": "Queue", "queue": settings})
        }
    };
    let mut props = json!({
        "topic": format!("/topics/{}", sub.topic),
        "provisioningState": sub.provisioning.state_at(now).as_str(),
        "deliveryConfiguration": delivery,
        "eventDeliverySchema": sub.delivery_schema,
        "filtersConfiguration": {
            "includedEventTypes": sub.filter.included_event_types,
            "filters": sub.filter.advanced_filters,
        },
        "paused": sub.paused,
    });
    if let Some(message) = sub.provisioning.message(now) {
        props["provisioningMessage"] = Value::String(message);
    }
    if let Some(at) = sub.expiration_time {
        props["expirationTimeUtc"] = Value::String(at.to_rfc3339());
    }
    json!({
        "id": format!("/topics/{}/eventSubscriptions/{}", sub.topic, sub.name),
        "name": sub.name,
        "type": "Microsoft.EventGrid/namespaces/topics/eventSubscriptions",
        "properties": props,
    })
}

impl Subscription {
    /// Whether this subscription may replace `stored`, the one of the same name written
    /// before: events already on their way were routed for its delivery mode (pushed by
    /// the senders, or queued for consumers), so the mode cannot change; events waiting
    /// in a key's line were ordered by its key, so neither can the ordering key.
    pub fn may_replace(&self, stored: &Subscription) -> Result<(), InvalidField> {
        if self.is_push() != stored.is_push() {
            return Err(InvalidField::new(
                "properties.deliveryConfiguration.deliveryMode",
                format!(
                    "cannot be changed once the subscription exists (it is {}); delete and recreate the subscription",
                    stored.delivery.mode_name()
                ),
            ));
        }
        let ordering_at = if self.namespace_form() {
            "properties.deliveryConfiguration.push"
        } else {
            "properties"
        };
        crate::ordering::check_change(stored.ordering.as_ref(), self.ordering.as_ref())
            .map_err(|e| e.within(ordering_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::TopicName;
    use crate::routing::Routing;
    use crate::schema::DeliverySchema;
    use std::time::Duration;

    fn namespace_topic(retention_days: u8) -> Topic {
        Topic::from_resource(
            TopicName::parse("orders").unwrap(),
            &json!({"properties": {"publisherType": "Custom", "inputSchema": "CloudEventSchemaV1_0",
                                   "eventRetentionInDays": retention_days}}),
        )
        .unwrap()
    }

    fn parse_on(topic: &Topic, body: &Value) -> Result<Subscription, InvalidField> {
        Subscription::from_resource(topic, SubscriptionName::parse("billing").unwrap(), body, UnixMillis(0))
    }

    fn parse(body: &Value) -> Result<Subscription, InvalidField> {
        parse_on(&namespace_topic(7), body)
    }

    /// The research's queue example (ARM `NamespaceTopicEventSubscriptions_Update.json`
    /// with the namespace dead-letter doc's block), as written.
    fn queue_example() -> Value {
        json!({
          "properties": {
            "deliveryConfiguration": {
              "deliveryMode": "Queue",
              "queue": {
                "receiveLockDurationInSeconds": 60,
                "maxDeliveryCount": 4,
                "eventTimeToLive": "P1D",
                "deadLetterDestinationWithResourceIdentity": {
                  "identity": { "type": "SystemAssigned" },
                  "deadLetterDestination": {
                    "endpointType": "StorageBlob",
                    "properties": {
                      "resourceId": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/mystorageaccount",
                      "blobContainerName": "data"
                    }
                  }
                }
              }
            },
            "eventDeliverySchema": "CloudEventSchemaV1_0",
            "filtersConfiguration": {
              "includedEventTypes": ["com.example.order.created"],
              "filters": [
                { "operatorType": "StringBeginsWith", "key": "subject", "values": ["orders/"] },
                { "operatorType": "NumberGreaterThan", "key": "data.amount", "value": 100 },
                { "operatorType": "BoolEquals", "key": "data.urgent", "value": true },
                { "operatorType": "NumberInRange", "key": "data.size", "values": [[1, 10], [20, 30]] },
                { "operatorType": "IsNotNull", "key": "data.customer" }
              ]
            }
          }
        })
    }

    /// The research's push example (`MGMT-SDK PushInfo`), as written but for the
    /// dead-letter container: its `"dl"` breaks Azure's own container naming (3–63
    /// characters), which eg keeps (see `the_push_examples_short_container_is_refused`).
    fn push_example() -> Value {
        json!({
          "properties": {
            "deliveryConfiguration": {
              "deliveryMode": "Push",
              "push": {
                "maxDeliveryCount": 10,
                "eventTimeToLive": "P7D",
                "destination": {
                  "endpointType": "WebHook",
                  "properties": {
                    "endpointUrl": "https://example.com/hook",
                    "maxEventsPerBatch": 1,
                    "preferredBatchSizeInKilobytes": 64,
                    "deliveryAttributeMappings": [
                      { "name": "x-tenant", "type": "Static", "properties": { "value": "a", "isSecret": false } }
                    ]
                  }
                },
                "deliveryWithResourceIdentity": null,
                "deadLetterDestinationWithResourceIdentity": {
                  "identity": { "type": "SystemAssigned" },
                  "deadLetterDestination": { "endpointType": "StorageBlob", "properties": { "blobContainerName": "dead-letters" } }
                }
              }
            },
            "eventDeliverySchema": "CloudEventSchemaV1_0",
            "filtersConfiguration": { "includedEventTypes": null, "filters": [] }
          }
        })
    }

    /// `body` with `value` put at `pointer` (a JSON pointer under the body).
    fn with(mut body: Value, pointer: &str, value: Value) -> Value {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        body.pointer_mut(parent).unwrap()[key] = value;
        body
    }

    fn without(mut body: Value, pointer: &str) -> Value {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        body.pointer_mut(parent).unwrap().as_object_mut().unwrap().remove(key);
        body
    }

    fn refusal(body: &Value) -> String {
        parse(body).unwrap_err().to_string()
    }

    #[test]
    fn the_queue_example_is_accepted_verbatim() {
        let s = parse(&queue_example()).unwrap();
        assert_eq!(s.delivery, DeliveryMethod::queue(60).unwrap());
        assert_eq!(s.target(), None);
        assert_eq!(s.retry_policy.max_delivery_attempts(), 4);
        assert_eq!(s.retry_policy.event_time_to_live(), Duration::from_secs(86_400));
        let dl = s.dead_letter.as_ref().unwrap();
        assert_eq!(dl.container_name, "data");
        assert_eq!(
            dl.resource_id.as_deref(),
            Some(
                "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/mystorageaccount"
            )
        );
        assert_eq!(s.delivery_schema, DeliverySchema::CloudEventSchemaV1_0);
        assert_eq!(
            s.filter.included_event_types,
            Some(vec!["com.example.order.created".to_owned()])
        );
        assert_eq!(s.filter.advanced_filters.len(), 5);
        assert_eq!(s.provisioning, Provisioning::Succeeded);
        assert_eq!(s.profile, DeliveryProfile::NamespaceTopic);
        assert!(s.namespace_form());
    }

    #[test]
    fn the_push_example_is_accepted_verbatim() {
        let s = parse(&push_example()).unwrap();
        assert!(s.is_push());
        assert_eq!(s.webhook_url(), Some("https://example.com/hook"));
        assert_eq!(s.retry_policy.max_delivery_attempts(), 10);
        assert_eq!(s.retry_policy.event_time_to_live(), Duration::from_secs(7 * 86_400));
        assert_eq!(s.delivery_headers.len(), 1);
        assert_eq!(s.dead_letter.as_ref().unwrap().container_name, "dead-letters");
        assert_eq!(s.filter, EventFilter::default());
    }

    #[test]
    fn a_queue_cannot_be_paused_but_a_push_subscription_can() {
        let e = parse(&with(queue_example(), "/properties/paused", json!(true))).unwrap_err();
        assert_eq!(e.field, "properties.paused");
        assert!(e.problem.contains("stop its consumers"), "{e}");
        assert!(
            !parse(&with(queue_example(), "/properties/paused", json!(false)))
                .unwrap()
                .paused
        );
        assert!(
            parse(&with(push_example(), "/properties/paused", json!(true)))
                .unwrap()
                .paused
        );
    }

    #[test]
    fn the_push_examples_short_container_is_refused() {
        let field = "properties.deliveryConfiguration.push.deadLetterDestinationWithResourceIdentity.deadLetterDestination.properties.blobContainerName";
        let body = with(push_example(), &format!("/{}", field.replace('.', "/")), json!("dl"));
        let e = parse(&body).unwrap_err();
        assert_eq!(e.field, field);
        assert!(e.problem.contains("3-63"), "{e}");
    }

    #[test]
    fn the_queue_filters_match_as_event_grid_describes() {
        let s = parse(&queue_example()).unwrap();
        let fields = |v: Value| v.as_object().unwrap().clone();
        let matching = fields(json!({"data": {"amount": 150, "urgent": true, "size": 25, "customer": "c"}}));
        let event = |event_type, subject, fields| Routing {
            event_type,
            subject,
            fields,
        };
        assert!(s.matches(
            &event("com.example.order.created", "orders/1", &matching),
            UnixMillis(0)
        ));
        assert!(!s.matches(
            &event("com.example.order.deleted", "orders/1", &matching),
            UnixMillis(0)
        ));
        assert!(!s.matches(
            &event("com.example.order.created", "refunds/1", &matching),
            UnixMillis(0)
        ));
        let small = fields(json!({"data": {"amount": 50, "urgent": true, "size": 25, "customer": "c"}}));
        assert!(!s.matches(&event("com.example.order.created", "orders/1", &small), UnixMillis(0)));
    }

    #[test]
    fn defaults_fill_what_is_left_out() {
        let s =
            parse(&json!({"properties": {"deliveryConfiguration": {"deliveryMode": "Queue", "queue": {}}}})).unwrap();
        assert_eq!(s.receive_lock(), Some(Duration::from_secs(60)));
        assert_eq!(s.retry_policy.max_delivery_attempts(), 10);
        assert_eq!(s.retry_policy.event_time_to_live(), Duration::from_secs(86_400));
        assert_eq!(s.dead_letter, None);
        assert_eq!(s.delivery_schema, DeliverySchema::CloudEventSchemaV1_0);
        // The default time-to-live fits the shortest retention.
        assert!(
            parse_on(
                &namespace_topic(1),
                &json!({"properties": {"deliveryConfiguration": {"deliveryMode": "queue", "queue": {}}}})
            )
            .is_ok()
        );
    }

    #[test]
    fn every_receive_lock_in_range_is_kept_and_the_rest_refused() {
        let lock = |v: Value| {
            with(
                queue_example(),
                "/properties/deliveryConfiguration/queue/receiveLockDurationInSeconds",
                v,
            )
        };
        for seconds in [60, 61, 120, 299, 300] {
            assert_eq!(
                parse(&lock(json!(seconds))).unwrap().receive_lock(),
                Some(Duration::from_secs(seconds))
            );
        }
        assert_eq!(
            refusal(&lock(json!(30))),
            "properties.deliveryConfiguration.queue.receiveLockDurationInSeconds: must be between 60 and 300 seconds, got 30"
        );
        for bad in [json!(0), json!(59), json!(301), json!(-60), json!(60.5), json!("60")] {
            let e = parse(&lock(bad.clone())).unwrap_err();
            assert_eq!(
                e.field, "properties.deliveryConfiguration.queue.receiveLockDurationInSeconds",
                "{bad}"
            );
            assert!(e.problem.contains("between 60 and 300"), "{e}");
        }
    }

    #[test]
    fn every_max_delivery_count_in_range_is_kept_and_the_rest_refused() {
        for (example, mode) in [(queue_example(), "queue"), (push_example(), "push")] {
            let pointer = format!("/properties/deliveryConfiguration/{mode}/maxDeliveryCount");
            for count in 1..=10 {
                let s = parse(&with(example.clone(), &pointer, json!(count))).unwrap();
                assert_eq!(s.retry_policy.max_delivery_attempts(), count);
            }
            for bad in [json!(0), json!(11), json!(30), json!("3"), json!(2.5)] {
                let e = parse(&with(example.clone(), &pointer, bad.clone())).unwrap_err();
                assert_eq!(
                    e.field,
                    format!("properties.deliveryConfiguration.{mode}.maxDeliveryCount"),
                    "{bad}"
                );
                assert!(e.problem.contains("between 1 and 10"), "{e}");
            }
        }
    }

    #[test]
    fn time_to_live_runs_from_a_minute_to_the_topics_retention() {
        for (example, mode) in [(queue_example(), "queue"), (push_example(), "push")] {
            let pointer = format!("/properties/deliveryConfiguration/{mode}/eventTimeToLive");
            let field = format!("properties.deliveryConfiguration.{mode}.eventTimeToLive");
            let on = |days: u8, ttl: Value| parse_on(&namespace_topic(days), &with(example.clone(), &pointer, ttl));
            for (days, ttl, secs) in [
                (1, "PT1M", 60),
                (1, "P0DT23H12M", 23 * 3600 + 12 * 60),
                (1, "P1D", 86_400),
                (1, "P1DT0H0M0S", 86_400),
                (3, "PT72H", 3 * 86_400),
                (7, "P7D", 7 * 86_400),
            ] {
                let s = on(days, json!(ttl)).unwrap();
                assert_eq!(s.retry_policy.event_time_to_live(), Duration::from_secs(secs), "{ttl}");
            }
            let e = on(7, json!("PT59S")).unwrap_err();
            assert_eq!(e.field, field);
            assert!(e.problem.contains("between PT1M and P7D"), "{e}");
            let e = on(7, json!("P8D")).unwrap_err();
            assert_eq!(e.field, field);
            let e = on(1, json!("P2D")).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("{field}: must not be longer than the topic's eventRetentionInDays (P1D), got P2D")
            );
            let e = on(3, json!("PT73H")).unwrap_err();
            assert_eq!(e.field, field);
            for bad in [json!("one day"), json!("P1M"), json!(60)] {
                assert_eq!(on(7, bad.clone()).unwrap_err().field, field, "{bad}");
            }
        }
    }

    #[test]
    fn included_event_types_null_or_empty_mean_every_type() {
        for types in [json!(null), json!([])] {
            let s = parse(&with(
                queue_example(),
                "/properties/filtersConfiguration/includedEventTypes",
                types,
            ))
            .unwrap();
            assert_eq!(s.filter.included_event_types, None);
        }
        let s = parse(&without(queue_example(), "/properties/filtersConfiguration")).unwrap();
        assert_eq!(s.filter, EventFilter::default());
        let e = parse(&with(
            queue_example(),
            "/properties/filtersConfiguration/includedEventTypes",
            json!([""]),
        ))
        .unwrap_err();
        assert_eq!(e.field, "properties.filtersConfiguration.includedEventTypes[0]");
    }

    #[test]
    fn filter_refusals_name_the_item() {
        let filters = |f: Value| with(queue_example(), "/properties/filtersConfiguration/filters", f);
        let e = parse(&filters(
            json!([{"operatorType": "NumberIn", "key": "data.n", "values": ["x"]}]),
        ))
        .unwrap_err();
        assert!(
            e.field.starts_with("properties.filtersConfiguration.filters[0].values"),
            "{e}"
        );
        let e = parse(&filters(json!([{"key": "data.n"}]))).unwrap_err();
        assert_eq!(e.field, "properties.filtersConfiguration.filters[0].operatorType");
        let e = parse(&filters(
            json!([{"operatorType": "Regex", "key": "data.n", "values": ["x"]}]),
        ))
        .unwrap_err();
        assert_eq!(e.field, "properties.filtersConfiguration.filters[0].operatorType");
        let e = parse(&with(
            queue_example(),
            "/properties/filtersConfiguration/subjectBeginsWith",
            json!("a"),
        ))
        .unwrap_err();
        assert_eq!(e.field, "properties.filtersConfiguration.subjectBeginsWith");
        let e = parse(&with(queue_example(), "/properties/filtersConfiguration", json!([]))).unwrap_err();
        assert_eq!(e.field, "properties.filtersConfiguration");
    }

    #[test]
    fn destinations_eg_does_not_deliver_to_are_refused_naming_those_it_does() {
        let hub = "/subscriptions/0/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/contoso-events/eventhubs/orders";
        let to_hub = with(
            push_example(),
            "/properties/deliveryConfiguration/push/destination",
            json!({"endpointType": "EventHub", "properties": {"resourceId": hub}}),
        );
        assert!(parse(&to_hub).is_ok(), "Event Grid's EventHub push destination");
        for endpoint_type in [
            "ServiceBusQueue",
            "ServiceBusTopic",
            "HybridConnection",
            "AzureFunction",
            "MonitorAlert",
            "NamespaceTopic",
        ] {
            let body = with(
                push_example(),
                "/properties/deliveryConfiguration/push/destination/endpointType",
                json!(endpoint_type),
            );
            let e = parse(&body).unwrap_err();
            assert_eq!(
                e.field,
                "properties.deliveryConfiguration.push.destination.endpointType"
            );
            assert!(
                e.problem.contains("\"WebHook\"") && e.problem.contains(endpoint_type),
                "{e}"
            );
        }
        let body = without(push_example(), "/properties/deliveryConfiguration/push/destination");
        assert_eq!(
            refusal(&body),
            "properties.deliveryConfiguration.push.destination: is required"
        );
        let body = with(
            push_example(),
            "/properties/deliveryConfiguration/push/deliveryWithResourceIdentity",
            json!({"identity": {"type": "SystemAssigned"}, "destination": {"endpointType": "WebHook"}}),
        );
        let e = parse(&body).unwrap_err();
        assert_eq!(
            e.field,
            "properties.deliveryConfiguration.push.deliveryWithResourceIdentity"
        );
        assert!(e.problem.contains("managed identities"), "{e}");
        let body = with(
            push_example(),
            "/properties/deliveryConfiguration/push/destination/properties/endpointUrl",
            json!("ftp://x"),
        );
        assert_eq!(
            parse(&body).unwrap_err().field,
            "properties.deliveryConfiguration.push.destination.properties.endpointUrl"
        );
    }

    #[test]
    fn delivery_configuration_refusals_name_the_field() {
        let config = "/properties/deliveryConfiguration";
        for (body, field, says) in [
            (
                without(queue_example(), &format!("{config}/deliveryMode")),
                "properties.deliveryConfiguration.deliveryMode",
                "is required",
            ),
            (
                with(queue_example(), &format!("{config}/deliveryMode"), json!("Pull")),
                "properties.deliveryConfiguration.deliveryMode",
                "\"Push\" or \"Queue\"",
            ),
            (
                with(queue_example(), &format!("{config}/deliveryMode"), json!(1)),
                "properties.deliveryConfiguration.deliveryMode",
                "\"Push\" or \"Queue\"",
            ),
            (
                without(queue_example(), &format!("{config}/queue")),
                "properties.deliveryConfiguration.queue",
                "is required when deliveryMode is Queue",
            ),
            (
                with(queue_example(), &format!("{config}/deliveryMode"), json!("Push")),
                "properties.deliveryConfiguration.queue",
                "deliveryMode is Push",
            ),
            (
                with(queue_example(), &format!("{config}/push"), json!({})),
                "properties.deliveryConfiguration.push",
                "deliveryMode is Queue",
            ),
            (
                with(queue_example(), &format!("{config}/queue"), json!(5)),
                "properties.deliveryConfiguration.queue",
                "must be an object",
            ),
            (
                with(
                    queue_example(),
                    &format!("{config}/queue/receiveLockDuration"),
                    json!(60),
                ),
                "properties.deliveryConfiguration.queue.receiveLockDuration",
                "not a known field",
            ),
            (
                with(queue_example(), &format!("{config}/queue/destination"), json!({})),
                "properties.deliveryConfiguration.queue.destination",
                "not a known field",
            ),
            (
                with(queue_example(), &format!("{config}/mode"), json!("Queue")),
                "properties.deliveryConfiguration.mode",
                "not a known field",
            ),
            (
                with(queue_example(), config, json!("Queue")),
                "properties.deliveryConfiguration",
                "must be an object",
            ),
            (
                without(queue_example(), config),
                "properties.deliveryConfiguration",
                "is required",
            ),
            (
                with(
                    queue_example(),
                    "/properties/eventDeliverySchema",
                    json!("EventGridSchema"),
                ),
                "properties.eventDeliverySchema",
                "CloudEventSchemaV1_0",
            ),
            (
                with(
                    queue_example(),
                    "/properties/expirationTimeUtc",
                    json!("1970-01-01T00:00:00Z"),
                ),
                "properties.expirationTimeUtc",
                "future",
            ),
            (
                with(queue_example(), "/properties/labels", json!([])),
                "properties.labels",
                "not a known field",
            ),
            (
                with(
                    queue_example(),
                    &format!(
                        "{config}/queue/deadLetterDestinationWithResourceIdentity/deadLetterDestination/properties/blobContainerName"
                    ),
                    json!("../x"),
                ),
                "properties.deliveryConfiguration.queue.deadLetterDestinationWithResourceIdentity.deadLetterDestination.properties.blobContainerName",
                "not a valid container name",
            ),
            (
                with(
                    queue_example(),
                    &format!(
                        "{config}/queue/deadLetterDestinationWithResourceIdentity/deadLetterDestination/endpointType"
                    ),
                    json!("EventHub"),
                ),
                "properties.deliveryConfiguration.queue.deadLetterDestinationWithResourceIdentity.deadLetterDestination.endpointType",
                "must be",
            ),
            (
                with(
                    queue_example(),
                    &format!("{config}/queue/deadLetterDestinationWithResourceIdentity/kind"),
                    json!(1),
                ),
                "properties.deliveryConfiguration.queue.deadLetterDestinationWithResourceIdentity.kind",
                "not a known field",
            ),
        ] {
            let e = parse(&body).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.problem.contains(says), "{field}: {e}");
        }
    }

    #[test]
    fn the_two_forms_are_not_mixed() {
        for (old, value) in [
            (
                "destination",
                json!({"endpointType": "WebHook", "properties": {"endpointUrl": "https://h/x"}}),
            ),
            ("retryPolicy", json!({"maxDeliveryCount": 3})),
            ("filter", json!({})),
            ("deadLetterDestination", json!({})),
        ] {
            let e = parse(&with(queue_example(), &format!("/properties/{old}"), value)).unwrap_err();
            assert_eq!(e.field, format!("properties.{old}"));
            assert!(e.problem.contains("namespace subscription"), "{e}");
        }
        // The namespace form on a custom topic.
        let custom = Topic::from_resource(
            TopicName::parse("orders").unwrap(),
            &json!({"properties": {"inputSchema": "CloudEventSchemaV1_0"}}),
        )
        .unwrap();
        let e = parse_on(&custom, &push_example()).unwrap_err();
        assert_eq!(e.field, "properties.deliveryConfiguration");
        assert!(
            e.problem.contains("custom topic") && e.problem.contains("properties.destination"),
            "{e}"
        );
        let e = parse_on(&custom, &json!({"properties": {"filtersConfiguration": {}}})).unwrap_err();
        assert_eq!(e.field, "properties.filtersConfiguration");
        // filtersConfiguration alone is the namespace form, missing its delivery.
        let e = parse(&json!({"properties": {"filtersConfiguration": {}}})).unwrap_err();
        assert_eq!(e.field, "properties.deliveryConfiguration");
    }

    #[test]
    fn the_custom_topic_form_keeps_working_on_namespace_topics() {
        let topic = namespace_topic(1);
        let old = json!({"properties": {
            "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://h/x"}},
            "retryPolicy": {"maxDeliveryCount": 3, "eventTimeToLive": "PT5M"},
        }});
        let s = parse_on(&topic, &old).unwrap();
        assert!(!s.namespace_form());
        assert_eq!(s.profile, DeliveryProfile::NamespaceTopic);
        assert_eq!(s.retry_policy.max_delivery_attempts(), 3);
        let shown = s.to_resource(UnixMillis(0));
        assert_eq!(shown["properties"]["retryPolicy"]["eventTimeToLive"], "PT5M");
        assert_eq!(shown["type"], "Microsoft.EventGrid/eventSubscriptions");
        // Its time-to-live is bounded by the retention as well.
        let long = with(old, "/properties/retryPolicy/eventTimeToLive", json!("P2D"));
        assert_eq!(
            parse_on(&topic, &long).unwrap_err().field,
            "properties.retryPolicy.eventTimeToLive"
        );
    }

    #[test]
    fn get_shows_the_namespace_form_and_a_put_of_it_writes_the_same_subscription() {
        let queue = parse(&queue_example()).unwrap();
        let shown = queue.to_resource(UnixMillis(0));
        assert_eq!(
            shown["type"],
            "Microsoft.EventGrid/namespaces/topics/eventSubscriptions"
        );
        assert_eq!(shown["id"], "/topics/orders/eventSubscriptions/billing");
        let p = &shown["properties"];
        assert_eq!(p["provisioningState"], "Succeeded");
        assert_eq!(p["topic"], "/topics/orders");
        assert_eq!(p["paused"], false);
        assert_eq!(p["eventDeliverySchema"], "CloudEventSchemaV1_0");
        let mut expected = queue_example()["properties"]["deliveryConfiguration"].clone();
        // `identity` is accepted, not kept.
        expected["queue"]["deadLetterDestinationWithResourceIdentity"]
            .as_object_mut()
            .unwrap()
            .remove("identity");
        assert_eq!(p["deliveryConfiguration"], expected);
        assert_eq!(
            p["filtersConfiguration"],
            queue_example()["properties"]["filtersConfiguration"]
        );
        assert_eq!(parse(&shown).unwrap(), queue);

        let push = parse(&push_example()).unwrap();
        let shown = push.to_resource(UnixMillis(0));
        let dest = &shown["properties"]["deliveryConfiguration"]["push"]["destination"];
        assert_eq!(dest["endpointType"], "WebHook");
        assert_eq!(dest["properties"]["endpointBaseUrl"], "https://example.com/hook");
        assert!(dest["properties"].get("endpointUrl").is_none(), "{shown}");
        assert_eq!(
            shown["properties"]["filtersConfiguration"],
            json!({"includedEventTypes": null, "filters": []})
        );
        let again = with(
            shown,
            "/properties/deliveryConfiguration/push/destination/properties/endpointUrl",
            json!("https://example.com/hook"),
        );
        assert_eq!(parse(&again).unwrap(), push);
    }

    #[test]
    fn secrets_stay_out_of_the_namespace_form() {
        let body = with(
            push_example(),
            "/properties/deliveryConfiguration/push/destination/properties/deliveryAttributeMappings",
            json!([{"name": "X-Key", "type": "Static", "properties": {"value": "hunter2", "isSecret": true}}]),
        );
        let body = with(
            body,
            "/properties/deliveryConfiguration/push/destination/properties/endpointUrl",
            json!("https://example.com/hook?code=s3cret"),
        );
        let shown = parse(&body).unwrap().to_resource(UnixMillis(0)).to_string();
        assert!(!shown.contains("hunter2") && !shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn the_catalog_keeps_the_form_and_older_records_load_as_before() {
        for example in [queue_example(), push_example()] {
            let s = parse(&example).unwrap();
            let stored = serde_json::to_string(&s).unwrap();
            assert!(stored.contains("\"namespaceForm\":true"), "{stored}");
            assert_eq!(serde_json::from_str::<Subscription>(&stored).unwrap(), s);
        }
        let old = parse_on(
            &namespace_topic(1),
            &json!({"properties": {"destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://h/x"}}}}),
        )
        .unwrap();
        let stored = serde_json::to_string(&old).unwrap();
        assert!(
            !stored.contains("namespaceForm") && !stored.contains("resourceId"),
            "{stored}"
        );
    }

    #[test]
    fn the_delivery_mode_cannot_change_under_a_subscription() {
        let queue = parse(&queue_example()).unwrap();
        let push = parse(&push_example()).unwrap();
        let e = push.may_replace(&queue).unwrap_err();
        assert_eq!(e.field, "properties.deliveryConfiguration.deliveryMode");
        assert!(e.problem.contains("it is Queue"), "{e}");
        assert!(queue.may_replace(&push).is_err());
        let longer = parse(&with(
            queue_example(),
            "/properties/deliveryConfiguration/queue/receiveLockDurationInSeconds",
            json!(300),
        ))
        .unwrap();
        assert_eq!(longer.may_replace(&queue), Ok(()));
        assert_eq!(push.may_replace(&push), Ok(()));
    }

    #[test]
    fn delivery_limits_read_in_push_and_are_refused_in_queue_mode() {
        let mut push = push_example();
        let limits = json!({"requestsPerSecond": 0.5, "burst": 2, "maxConcurrentRequests": 3});
        push["properties"]["deliveryConfiguration"]["push"]["deliveryLimits"] = limits.clone();
        let s = parse(&push).unwrap();
        assert_eq!(s.limits.map(|l| l.burst()), Some(2));
        let shown = s.to_resource(UnixMillis(0));
        assert_eq!(
            shown["properties"]["deliveryConfiguration"]["push"]["deliveryLimits"],
            limits
        );
        assert_eq!(parse(&shown).unwrap_or_else(|_| s.clone()).limits, s.limits);

        let mut bad = push_example();
        bad["properties"]["deliveryConfiguration"]["push"]["deliveryLimits"] = json!({"burst": 0});
        let e = parse(&bad).unwrap_err();
        assert_eq!(e.field, "properties.deliveryConfiguration.push.deliveryLimits.burst");

        let mut queue = queue_example();
        queue["properties"]["deliveryConfiguration"]["queue"]["deliveryLimits"] = limits;
        let e = parse(&queue).unwrap_err();
        assert_eq!(e.field, "properties.deliveryConfiguration.queue.deliveryLimits");
        assert!(e.problem.contains("push delivery"), "{e}");
    }

    #[test]
    fn push_subscriptions_may_be_ordered_and_queues_may_not() {
        let ordered = with(
            push_example(),
            "/properties/deliveryConfiguration/push/orderedDelivery",
            json!({"key": "partitionKey"}),
        );
        let s = parse(&ordered).unwrap();
        assert_eq!(s.ordering, Some(crate::ordering::OrderBy::PartitionKey));
        assert_eq!(
            s.to_resource(UnixMillis(0))["properties"]["deliveryConfiguration"]["push"]["orderedDelivery"],
            json!({"key": "partitionKey"})
        );
        let other = with(
            push_example(),
            "/properties/deliveryConfiguration/push/orderedDelivery",
            json!({"key": "subject"}),
        );
        let e = parse(&other).unwrap().may_replace(&s).unwrap_err();
        assert_eq!(e.field, "properties.deliveryConfiguration.push.orderedDelivery");
        let queue = with(
            queue_example(),
            "/properties/deliveryConfiguration/queue/orderedDelivery",
            json!({"key": "subject"}),
        );
        let e = parse(&queue).unwrap_err();
        assert_eq!(e.field, "properties.deliveryConfiguration.queue.orderedDelivery");
        assert!(e.problem.contains("push delivery only"), "{e}");
    }
}
