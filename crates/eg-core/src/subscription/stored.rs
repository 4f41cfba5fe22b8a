//! The layout a subscription is stored in (the catalog's JSON), kept exactly as it was
//! before [`DeliveryMethod`] existed, so every stored subscription reads and tiers of
//! either version read each other's: the webhook's URL (or another destination's
//! identity, or `""` in queue mode) in `endpointUrl`, the mode in `deliveryMode`, the
//! form in `namespaceForm`, a non-webhook target in `endpoint`.

use super::{
    BatchSettings, DeadLetterDestination, DeliveryHeader, DeliveryLimits, DeliveryMethod, RetryPolicy, Subscription,
    WrittenAs,
};
use crate::destination::{Target, WebHook};
use crate::filter::EventFilter;
use crate::names::{SubscriptionName, TopicName};
use crate::ordering::OrderBy;
use crate::profile::DeliveryProfile;
use crate::schema::DeliverySchema;
use crate::signing::SigningSecrets;
use crate::time::UnixMillis;
use crate::validation::Provisioning;
use serde::{Deserialize, Serialize};

/// A [`Subscription`] as the catalog holds it.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Stored {
    name: SubscriptionName,
    topic: TopicName,
    /// The webhook's full URL, another destination's identity (`rabbitmq://main/events`),
    /// or `""` in queue mode.
    endpoint_url: String,
    filter: EventFilter,
    retry_policy: RetryPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dead_letter: Option<DeadLetterDestination>,
    batching: BatchSettings,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    delivery_headers: Vec<DeliveryHeader>,
    #[serde(default, skip_serializing_if = "SigningSecrets::is_empty")]
    signing_secrets: SigningSecrets,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expiration_time: Option<UnixMillis>,
    #[serde(default)]
    delivery_schema: DeliverySchema,
    #[serde(default)]
    profile: DeliveryProfile,
    #[serde(default)]
    provisioning: Provisioning,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    paused: bool,
    #[serde(default, skip_serializing_if = "StoredMode::is_push")]
    delivery_mode: StoredMode,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    namespace_form: bool,
    /// Absent for a webhook (every subscription before other destinations existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    endpoint: Option<Target>,
    /// `deliveryLimits`; absent for none (and in every subscription stored before them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delivery_limits: Option<DeliveryLimits>,
    /// Absent for an unordered subscription; older tiers skip it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ordered_delivery: Option<OrderBy>,
}

/// `deliveryMode` as stored: `{"mode":"push"}` or `{"mode":"queue","receiveLockSeconds":60}`.
#[derive(Clone, Copy, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "mode")]
enum StoredMode {
    #[default]
    Push,
    Queue {
        receive_lock_seconds: u32,
    },
}

impl StoredMode {
    fn is_push(&self) -> bool {
        matches!(self, Self::Push)
    }
}

impl From<Stored> for Subscription {
    fn from(s: Stored) -> Self {
        let delivery = match s.delivery_mode {
            StoredMode::Queue { receive_lock_seconds } => DeliveryMethod::Queue { receive_lock_seconds },
            StoredMode::Push => DeliveryMethod::Push {
                target: match s.endpoint {
                    None => Target::WebHook(WebHook {
                        url: s.endpoint_url,
                        ..WebHook::default()
                    }),
                    Some(Target::WebHook(hook)) => Target::WebHook(WebHook {
                        url: s.endpoint_url,
                        ..hook
                    }),
                    Some(other) => other,
                },
                written_as: if s.namespace_form {
                    WrittenAs::Namespace
                } else {
                    WrittenAs::CustomTopic
                },
            },
        };
        Self {
            name: s.name,
            topic: s.topic,
            filter: s.filter,
            retry_policy: s.retry_policy,
            dead_letter: s.dead_letter,
            batching: s.batching,
            delivery_headers: s.delivery_headers,
            signing_secrets: s.signing_secrets,
            expiration_time: s.expiration_time,
            delivery_schema: s.delivery_schema,
            profile: s.profile,
            provisioning: s.provisioning,
            paused: s.paused,
            delivery,
            limits: s.delivery_limits,
            ordering: s.ordered_delivery,
        }
    }
}

impl From<Subscription> for Stored {
    fn from(s: Subscription) -> Self {
        let namespace_form = s.namespace_form();
        let (endpoint_url, endpoint, delivery_mode) = match s.delivery {
            DeliveryMethod::Queue { receive_lock_seconds } => {
                (String::new(), None, StoredMode::Queue { receive_lock_seconds })
            }
            // A webhook with fields of its own (a token to get) stores them in
            // `endpoint`; its URL stays in `endpointUrl`, where older tiers read it.
            DeliveryMethod::Push {
                target: Target::WebHook(hook),
                ..
            } => {
                let fields = (!hook.is_only_a_url()).then(|| Target::WebHook(hook.clone()));
                (hook.url, fields, StoredMode::Push)
            }
            DeliveryMethod::Push { target, .. } => (target.identity(), Some(target), StoredMode::Push),
        };
        Self {
            name: s.name,
            topic: s.topic,
            endpoint_url,
            filter: s.filter,
            retry_policy: s.retry_policy,
            dead_letter: s.dead_letter,
            batching: s.batching,
            delivery_headers: s.delivery_headers,
            signing_secrets: s.signing_secrets,
            expiration_time: s.expiration_time,
            delivery_schema: s.delivery_schema,
            profile: s.profile,
            provisioning: s.provisioning,
            paused: s.paused,
            delivery_mode,
            namespace_form,
            endpoint,
            delivery_limits: s.limits,
            ordered_delivery: s.ordering,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Subscription;
    use crate::names::SubscriptionName;
    use crate::time::UnixMillis;
    use crate::topic::Topic;
    use serde_json::{Value, json};

    fn subscription(topic: Value, props: Value) -> Subscription {
        let topic = Topic::from_resource(
            crate::names::TopicName::parse("orders").unwrap(),
            &json!({"properties": topic}),
        )
        .unwrap();
        Subscription::from_resource(
            &topic,
            SubscriptionName::parse("billing").unwrap(),
            &json!({"properties": props}),
            UnixMillis(0),
        )
        .unwrap()
    }

    /// Stores `sub` and reads it back; returns the stored JSON.
    fn stored(sub: &Subscription) -> Value {
        let stored = serde_json::to_value(sub).unwrap();
        assert_eq!(&serde_json::from_value::<Subscription>(stored.clone()).unwrap(), sub);
        stored
    }

    #[test]
    fn the_stored_layout_is_the_one_every_version_wrote() {
        let hook = stored(&subscription(
            json!({}),
            json!({"destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://h.example/in?code=s"}}}),
        ));
        assert_eq!(hook["endpointUrl"], "https://h.example/in?code=s");
        for absent in ["endpoint", "deliveryMode", "namespaceForm"] {
            assert!(hook.get(absent).is_none(), "{absent}: {hook}");
        }

        let rabbit = stored(&subscription(
            json!({}),
            json!({"destination": {"endpointType": "RabbitMQ", "properties": {
                "connection": "main", "exchange": "events", "routingKey": "k"}}}),
        ));
        assert_eq!(rabbit["endpointUrl"], "rabbitmq://main/events");
        assert_eq!(
            rabbit["endpoint"],
            json!({"kind": "rabbitMq", "connection": "main", "exchange": "events",
                   "routingKey": {"kind": "static", "value": "k"}})
        );

        let namespace = json!({"publisherType": "Custom", "inputSchema": "CloudEventSchemaV1_0"});
        let queue = stored(&subscription(
            namespace.clone(),
            json!({"deliveryConfiguration": {"deliveryMode": "Queue", "queue": {}}}),
        ));
        assert_eq!(queue["endpointUrl"], "");
        assert_eq!(
            queue["deliveryMode"],
            json!({"mode": "queue", "receiveLockSeconds": 60})
        );
        assert_eq!(queue["namespaceForm"], true);
        assert!(queue.get("endpoint").is_none());

        let pushed = stored(&subscription(
            namespace,
            json!({"deliveryConfiguration": {"deliveryMode": "Push", "push": {"destination":
                {"endpointType": "WebHook", "properties": {"endpointUrl": "https://h.example/in"}}}}}),
        ));
        assert_eq!(pushed["namespaceForm"], true);
        assert!(pushed.get("deliveryMode").is_none());
    }

    #[test]
    fn subscriptions_stored_before_other_destinations_read_as_webhooks() {
        let hook = stored(&subscription(
            json!({}),
            json!({"destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://h.example/in"}}}),
        ));
        let mut legacy = hook.clone();
        legacy["endpoint"] = json!({"kind": "webHook"});
        let read: Subscription = serde_json::from_value(legacy).unwrap();
        assert_eq!(read.webhook_url(), Some("https://h.example/in"));
    }

    #[test]
    fn a_webhook_asking_for_a_token_stores_it_beside_the_url_older_tiers_read() {
        let hook = stored(&subscription(
            json!({}),
            json!({"destination": {"endpointType": "WebHook", "properties": {
                "endpointUrl": "https://h.example/in?code=s",
                "azureActiveDirectoryTenantId": "contoso",
                "azureActiveDirectoryApplicationIdOrUri": "api://orders"}}}),
        ));
        assert_eq!(
            hook["endpointUrl"], "https://h.example/in?code=s",
            "where every tier reads it"
        );
        assert_eq!(
            hook["endpoint"],
            json!({"kind": "webHook", "auth": {"via": "entraId", "tenant": "contoso", "application": "api://orders"}})
        );
        assert!(hook["endpoint"].get("url").is_none(), "the URL is stored once");
    }
}
