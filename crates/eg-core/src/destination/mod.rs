//! Where a push subscription delivers, one module per kind: an HTTP webhook (Event
//! Grid's `WebHook`), an Azure Storage queue (`StorageQueue`), a RabbitMQ exchange (eg's
//! `RabbitMQ`), a NATS JetStream subject (eg's `NatsJetStream`), a Kafka topic (eg's
//! `Kafka`), an Amazon SQS queue (eg's `AmazonSQS`) or an Azure event hub (Event Grid's
//! `EventHub`, delivered through its namespace's Kafka endpoint).
//!
//! Each kind's module is the whole of what eg-core knows about it: its typed target,
//! read from `destination.properties` with field-precise errors, shown back, checked
//! against eg's configuration, and its identity (what stands for it in probation,
//! metrics and the status page). [`Target`] is the one registration point: the
//! `targets!` list below. The sender's `destinations` module is the other side.
//!
//! A queue or broker destination names an account or a connection configured in eg,
//! never a host or a password: the people who create subscriptions cannot point eg at
//! arbitrary internal hosts (the reason webhooks have an address policy) nor read a
//! credential back.

mod connections;
mod endpoint_ids;
mod event_hub;
mod kafka;
mod nats;
mod rabbitmq;
mod sqs;
mod storage_queue;
mod webhook;
mod webhook_auth;

pub use endpoint_ids::EndpointIds;
pub use event_hub::{EventHub, PARTITION_KEY_PROPERTY, namespace_connection};
pub use kafka::{BinaryCloudEvent, Kafka, NotBinary, RecordKey, binary_cloud_event};
pub use nats::NatsJetStream;
pub use rabbitmq::{RabbitMq, RoutingKey};
pub use sqs::{AmazonSqs, FifoIds};
pub use storage_queue::StorageQueue;
pub use webhook::WebHook;
pub use webhook_auth::WebhookAuth;

pub use connections::{CertificateFacts, NamedConnections, S3ConnectionFacts};
pub(crate) use connections::{connection_name, optional_string, required_string};
pub(crate) use storage_queue::storage_account;
pub(crate) use webhook::http_url;

use crate::api_error::InvalidField;
use crate::probation::EndpointId;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What one destination kind is to eg-core. `properties` are `destination.properties`
/// of the subscription JSON; errors are named from `properties` down.
pub(crate) trait Kind: Sized {
    /// The `endpointType` it is written with.
    const ENDPOINT_TYPE: &'static str;
    /// Its own keys of `properties`.
    const OWN: &'static [&'static str];
    /// The keys of `properties` that are the subscription's, not the destination's, and
    /// that this kind takes (batching, delivery properties, signing secrets).
    const SHARED: &'static [&'static str];
    /// Reads its own keys (unknown keys were refused already).
    fn read(props: &Map<String, Value>) -> Result<Self, InvalidField>;
    /// Its own keys as `GET` shows them: never a secret.
    fn show(&self) -> Map<String, Value>;
    /// Refuses a target naming an account or connection eg has no configuration for.
    fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField>;
    /// Whether it was added after heartbeats began to carry capabilities: a subscription
    /// to it is refused while a sender of an earlier release runs
    /// (`Capability::NewerDestinationKinds`), since such a sender cannot read it.
    const SINCE_CAPABILITIES: bool = false;
    /// What names it where a webhook's URL would: `storagequeue://<account>/<queue>`,
    /// `rabbitmq://<connection>/<exchange>`, … (no host, no secret, except a webhook's
    /// own URL, which only its hash and its base URL leave eg-core as).
    fn identity(&self) -> String;
}

/// The subscription's properties a broker destination takes in `destination.properties`:
/// batching and delivery properties (brokers carry headers).
const BROKER_SHARED: &[&str] = &[
    "maxEventsPerBatch",
    "preferredBatchSizeInKilobytes",
    "deliveryAttributeMappings",
];

/// Declares [`Target`] from one line per kind: variant, type, and the `kind` tag it is
/// stored under (the catalog's JSON; never change one).
macro_rules! targets {
    ($($variant:ident($kind:ty) stored as $tag:literal,)+) => {
        /// A push subscription's typed target.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        pub enum Target {
            $(#[serde(rename = $tag)] $variant($kind),)+
        }

        /// The `endpointType`s a subscription's destination may have.
        pub(crate) const ENDPOINT_TYPES: &[&str] = &[$(<$kind as Kind>::ENDPOINT_TYPE),+];

        impl Target {
            /// Reads `properties` of a destination of `endpoint_type` (one of
            /// [`ENDPOINT_TYPES`]), refusing keys neither the kind nor its shared
            /// subscription properties know.
            pub(crate) fn read(endpoint_type: &str, props: &Map<String, Value>) -> Result<Self, InvalidField> {
                match endpoint_type {
                    $(<$kind as Kind>::ENDPOINT_TYPE => {
                        only_known(props, <$kind as Kind>::OWN, <$kind as Kind>::SHARED)?;
                        Ok(Self::$variant(<$kind as Kind>::read(props)?))
                    })+
                    other => Err(InvalidField::new(
                        "endpointType",
                        format!("{other:?} is not a destination type: expected one of {}", ENDPOINT_TYPES.join(", ")),
                    )),
                }
            }

            /// The `endpointType` this destination is written with.
            pub fn endpoint_type(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => <$kind as Kind>::ENDPOINT_TYPE,)+
                }
            }

            fn shared(&self) -> &'static [&'static str] {
                match self {
                    $(Self::$variant(_) => <$kind as Kind>::SHARED,)+
                }
            }

            /// Its own `properties` as `GET` shows them (shared ones are the caller's).
            pub(crate) fn show(&self) -> Map<String, Value> {
                match self {
                    $(Self::$variant(target) => target.show(),)+
                }
            }

            /// Refuses a destination naming an account or connection eg has no
            /// configuration for (field names from `properties` down).
            pub(crate) fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
                match self {
                    $(Self::$variant(target) => target.check_configured(configured),)+
                }
            }

            /// Whether senders of earlier releases cannot read it (`Kind::SINCE_CAPABILITIES`).
            pub fn since_capabilities(&self) -> bool {
                match self {
                    $(Self::$variant(_) => <$kind as Kind>::SINCE_CAPABILITIES,)+
                }
            }

            pub(crate) fn identity(&self) -> String {
                match self {
                    $(Self::$variant(target) => target.identity(),)+
                }
            }
        }
    };
}

targets! {
    WebHook(WebHook) stored as "webHook",
    StorageQueue(StorageQueue) stored as "storageQueue",
    RabbitMq(RabbitMq) stored as "rabbitMq",
    NatsJetStream(NatsJetStream) stored as "natsJetStream",
    Kafka(Kafka) stored as "kafka",
    AmazonSqs(AmazonSqs) stored as "amazonSqs",
    EventHub(EventHub) stored as "eventHub",
}

impl Target {
    /// Who this destination is to endpoint probation: the same for every subscription
    /// delivering to it, so one endpoint's failures hold all of them back.
    pub fn endpoint_id(&self) -> EndpointId {
        EndpointId::of(&self.identity())
    }

    /// What names it in the status page and logs: a webhook's base URL (no query: it
    /// may hold a secret), or a queue's or broker's identity (names from eg's
    /// configuration only).
    pub fn display_name(&self) -> String {
        match self {
            Self::WebHook(hook) => hook.base_url(),
            other => other.identity(),
        }
    }

    /// Whether the subscription's batching settings apply to this destination.
    pub(crate) fn takes_batching(&self) -> bool {
        self.shared().contains(&"maxEventsPerBatch")
    }

    /// Whether this destination signs deliveries, and so takes signing secrets.
    pub(crate) fn takes_signing_secrets(&self) -> bool {
        self.shared().contains(&"signingSecrets")
    }
}

/// Refuses keys of `props` neither in `own` nor in `shared` (a misspelt key would
/// otherwise be ignored silently), naming the first one.
fn only_known(props: &Map<String, Value>, own: &[&str], shared: &[&str]) -> Result<(), InvalidField> {
    match props
        .keys()
        .find(|k| !own.contains(&k.as_str()) && !shared.contains(&k.as_str()))
    {
        Some(key) => {
            let known: Vec<&str> = own.iter().chain(shared).copied().collect();
            Err(InvalidField::new(
                format!("properties.{key}"),
                format!("not a known field (expected one of: {})", known.join(", ")),
            ))
        }
        None => Ok(()),
    }
}

/// A broker connection eg has no configuration for, refused naming the setting that
/// would add it (`section` is the settings section, `EG__BROKERS__<SECTION>__…`).
fn unknown_connection(kind: &str, section: &str, connection: &str) -> InvalidField {
    InvalidField::new(
        "properties.connection",
        format!(
            "eg has no {kind} connection named {connection:?}: an operator must configure it (EG__BROKERS__{}__{}__URL) before subscriptions can deliver through it",
            section.to_ascii_uppercase(),
            connection.to_ascii_uppercase()
        ),
    )
}

/// `properties.connection`: a configured connection's name.
fn connection(props: &Map<String, Value>) -> Result<String, InvalidField> {
    let name = required_string(props, "connection")?;
    connection_name(&name, "properties.connection")?;
    Ok(name)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// Configured: the storage account `queues1`, the RabbitMQ connection `main`, the
    /// NATS connection `events`, the Kafka connection `stream`, the Event Hubs namespace
    /// `contoso-events`, the identity `corp` (for
    /// the tenant `corp-tenant`), the client certificates `partner` and `old` (expired).
    pub(crate) struct Configured;

    impl NamedConnections for Configured {
        fn has_azure_account(&self, account: &str) -> bool {
            account == "queues1"
        }
        fn s3_connection(&self, _: &str) -> Option<S3ConnectionFacts<'_>> {
            None
        }
        fn has_broker_connection(&self, section: &str, name: &str) -> bool {
            matches!(
                (section, name),
                ("rabbitmq", "main") | ("nats", "events") | ("kafka", "stream") | ("event_hubs", "contoso_events")
            )
        }
        fn identity(&self, name: &str) -> Option<crate::identity::IdentityFacts> {
            (name == "corp").then_some(crate::identity::IdentityFacts {
                has_default_target: false,
            })
        }
        fn identity_for_tenant(&self, tenant: &str) -> Option<String> {
            (tenant == "corp-tenant").then(|| "corp".to_owned())
        }
        fn client_certificate(&self, name: &str) -> Option<CertificateFacts> {
            let facts = |not_after: &str, expired| CertificateFacts {
                not_after: not_after.to_owned(),
                expired,
            };
            match name {
                "partner" => Some(facts("2030-01-01T00:00:00Z", false)),
                "old" => Some(facts("2020-01-01T00:00:00Z", true)),
                _ => None,
            }
        }
    }

    pub(crate) fn read(endpoint_type: &str, props: Value) -> Result<Target, InvalidField> {
        let Value::Object(props) = props else { panic!() };
        Target::read(endpoint_type, &props)
    }

    /// Reading what `GET` shows gives the same target back.
    pub(crate) fn reads_back(target: &Target) {
        assert_eq!(
            &read(target.endpoint_type(), Value::Object(target.show())).unwrap(),
            target
        );
    }

    #[test]
    fn unknown_kinds_and_keys_are_refused_naming_them() {
        let err = read("ServiceBusQueue", json!({})).unwrap_err();
        assert_eq!(err.field, "endpointType");
        assert!(
            err.problem.contains("WebHook, StorageQueue, RabbitMQ, NatsJetStream"),
            "{err}"
        );
        let err = read(
            "NatsJetStream",
            json!({"connection": "events", "subject": "s", "password": "x"}),
        )
        .unwrap_err();
        assert_eq!(err.field, "properties.password", "no secrets in a subscription");
        assert!(err.problem.contains("connection, subject, maxEventsPerBatch"), "{err}");
    }

    #[test]
    fn stored_targets_keep_their_kind_tags() {
        let nats = read("NatsJetStream", json!({"connection": "events", "subject": "eg.orders"})).unwrap();
        assert_eq!(
            serde_json::to_value(&nats).unwrap(),
            json!({"kind": "natsJetStream", "connection": "events", "subject": "eg.orders"})
        );
        let back: Target = serde_json::from_value(serde_json::to_value(&nats).unwrap()).unwrap();
        assert_eq!(back, nats);
    }

    #[test]
    fn one_endpoint_is_one_probation_identity() {
        let a = read(
            "RabbitMQ",
            json!({"connection": "main", "exchange": "e", "routingKey": "a"}),
        )
        .unwrap();
        let b = read(
            "RabbitMQ",
            json!({"connection": "main", "exchange": "e", "routingKey": "b"}),
        )
        .unwrap();
        assert_eq!(a.endpoint_id(), b.endpoint_id());
        assert_eq!(
            a.endpoint_id(),
            EndpointId::of("rabbitmq://main/e"),
            "the key existing records use"
        );
        let hook = read("WebHook", json!({"endpointUrl": "https://h.example/in?code=s"})).unwrap();
        assert_eq!(hook.endpoint_id(), EndpointId::of("https://h.example/in?code=s"));
        assert_eq!(hook.display_name(), "https://h.example/in");
    }
}
