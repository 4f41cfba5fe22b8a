//! Where a push subscription delivers: an HTTP webhook (Event Grid's `WebHook`, the
//! URL in `Subscription::endpoint_url`), an Azure Storage queue (Event Grid's
//! `StorageQueue`), a RabbitMQ exchange (eg's `RabbitMQ`) or a NATS JetStream subject
//! (eg's `NatsJetStream`), read from and shown in the `destination` JSON.
//!
//! A queue or broker destination names an account or a connection configured in eg,
//! never a host or a password: the people who create subscriptions cannot point eg at
//! arbitrary internal hosts (the reason webhooks have an address policy) nor read a
//! credential back. [`Endpoint::identity`] is what stands for the destination where a
//! webhook's URL would (probation, metrics, the status page).

use super::connections::{NamedConnections, connection_name, optional_string, required_string};
use super::dead_letter::storage_account;
use crate::api_error::InvalidField;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The `endpointType`s a subscription's destination may have.
pub(crate) const ENDPOINT_TYPES: [&str; 4] = ["WebHook", "StorageQueue", "RabbitMQ", "NatsJetStream"];

/// A push subscription's destination beyond its webhook URL.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Endpoint {
    /// POSTed to `Subscription::endpoint_url`.
    #[default]
    WebHook,
    /// One message per event in a queue of an Azure storage account configured in eg.
    #[serde(rename_all = "camelCase")]
    StorageQueue {
        account: String,
        /// As written (`/subscriptions/…/storageAccounts/<account>`), shown back.
        resource_id: String,
        queue_name: String,
        /// `queueMessageTimeToLiveInSeconds`: `None` = the queue service's default
        /// (7 days), -1 = never expires.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_ttl_seconds: Option<i64>,
    },
    /// Published to an exchange of a RabbitMQ connection configured in eg (AMQP 0-9-1).
    #[serde(rename_all = "camelCase")]
    RabbitMq {
        connection: String,
        exchange: String,
        routing_key: RoutingKey,
    },
    /// Published to a subject of a NATS connection configured in eg, stored by JetStream.
    #[serde(rename_all = "camelCase")]
    NatsJetStream { connection: String, subject: String },
}

/// A RabbitMQ message's routing key: the same for every event, or read from each event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "value")]
pub enum RoutingKey {
    Static(String),
    /// An event field, named as delivery properties name theirs (`subject`, `type`,
    /// `data.region`, …); an event without it is routed with an empty key.
    FromEvent(String),
}

impl Endpoint {
    pub fn is_webhook(&self) -> bool {
        *self == Self::WebHook
    }

    /// The `endpointType` this destination is written with.
    pub fn endpoint_type(&self) -> &'static str {
        match self {
            Self::WebHook => "WebHook",
            Self::StorageQueue { .. } => "StorageQueue",
            Self::RabbitMq { .. } => "RabbitMQ",
            Self::NatsJetStream { .. } => "NatsJetStream",
        }
    }

    /// What names a non-webhook destination where a webhook's URL would:
    /// `storagequeue://<account>/<queue>`, `rabbitmq://<connection>/<exchange>`,
    /// `nats://<connection>/<subject>` (no host, no secret: names from eg's configuration).
    pub(crate) fn identity(&self) -> Option<String> {
        match self {
            Self::WebHook => None,
            Self::StorageQueue {
                account, queue_name, ..
            } => Some(format!("storagequeue://{account}/{queue_name}")),
            Self::RabbitMq {
                connection, exchange, ..
            } => Some(format!("rabbitmq://{connection}/{exchange}")),
            Self::NatsJetStream { connection, subject } => Some(format!("nats://{connection}/{subject}")),
        }
    }

    /// Reads a non-webhook destination's `properties` (`endpoint_type` is not `WebHook`);
    /// the properties every destination shares (batching, delivery properties) are read by
    /// the caller from the same object, whose keys `shared` lists. Errors are named from
    /// `properties` down.
    pub(super) fn from_properties(
        endpoint_type: &str,
        props: &Map<String, Value>,
        shared: &[&str],
    ) -> Result<Self, InvalidField> {
        let known = |own: &[&'static str]| -> Vec<&str> { own.iter().chain(shared).copied().collect() };
        match endpoint_type {
            "StorageQueue" => {
                only_known(
                    props,
                    &known(&["resourceId", "queueName", "queueMessageTimeToLiveInSeconds"]),
                )?;
                let resource_id = required_string(props, "resourceId")?;
                let account = storage_account(&resource_id)?;
                let queue_name = required_string(props, "queueName")?;
                check_queue_name(&queue_name)?;
                let message_ttl_seconds = match props.get("queueMessageTimeToLiveInSeconds") {
                    None | Some(Value::Null) => None,
                    Some(v) => match v.as_i64() {
                        Some(ttl) if ttl == -1 || ttl > 0 => Some(ttl),
                        _ => {
                            return Err(InvalidField::new(
                                "properties.queueMessageTimeToLiveInSeconds",
                                format!(
                                    "must be a positive number of seconds, or -1 for messages that never expire; got {v}"
                                ),
                            ));
                        }
                    },
                };
                Ok(Self::StorageQueue {
                    account,
                    resource_id,
                    queue_name,
                    message_ttl_seconds,
                })
            }
            "RabbitMQ" => {
                only_known(
                    props,
                    &known(&["connection", "exchange", "routingKey", "routingKeyFrom"]),
                )?;
                let connection = connection(props)?;
                let exchange = match optional_string(props, "exchange")? {
                    Some(e) => e,
                    None => {
                        return Err(InvalidField::new(
                            "properties.exchange",
                            "is required (\"\" is RabbitMQ's default exchange, which routes by queue name)",
                        ));
                    }
                };
                check_exchange_name(&exchange)?;
                let routing_key = match (
                    optional_string(props, "routingKey")?,
                    optional_string(props, "routingKeyFrom")?,
                ) {
                    (Some(_), Some(_)) => {
                        return Err(InvalidField::new(
                            "properties.routingKeyFrom",
                            "give routingKey (the same for every event) or routingKeyFrom (an event field), not both",
                        ));
                    }
                    (Some(key), None) => {
                        check_routing_key(&key)?;
                        RoutingKey::Static(key)
                    }
                    (None, Some(field)) if !field.is_empty() => RoutingKey::FromEvent(field),
                    _ => {
                        return Err(InvalidField::new(
                            "properties.routingKey",
                            "is required: a routing key, or routingKeyFrom naming an event field (e.g. \"subject\")",
                        ));
                    }
                };
                Ok(Self::RabbitMq {
                    connection,
                    exchange,
                    routing_key,
                })
            }
            "NatsJetStream" => {
                only_known(props, &known(&["connection", "subject"]))?;
                let connection = connection(props)?;
                let subject = required_string(props, "subject")?;
                check_nats_subject(&subject)?;
                Ok(Self::NatsJetStream { connection, subject })
            }
            other => Err(InvalidField::new(
                "endpointType",
                format!(
                    "{other:?} is not a destination type: expected one of {}",
                    ENDPOINT_TYPES.join(", ")
                ),
            )),
        }
    }

    /// The destination's own `properties` as shown back (shared ones are added by the caller).
    pub(super) fn properties(&self) -> Map<String, Value> {
        let value = match self {
            Self::WebHook => json!({}),
            Self::StorageQueue {
                resource_id,
                queue_name,
                message_ttl_seconds,
                ..
            } => {
                let mut props = json!({"resourceId": resource_id, "queueName": queue_name});
                if let Some(ttl) = message_ttl_seconds {
                    props["queueMessageTimeToLiveInSeconds"] = json!(ttl);
                }
                props
            }
            Self::RabbitMq {
                connection,
                exchange,
                routing_key,
            } => {
                let mut props = json!({"connection": connection, "exchange": exchange});
                match routing_key {
                    RoutingKey::Static(key) => props["routingKey"] = json!(key),
                    RoutingKey::FromEvent(field) => props["routingKeyFrom"] = json!(field),
                }
                props
            }
            Self::NatsJetStream { connection, subject } => json!({"connection": connection, "subject": subject}),
        };
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    /// Refuses a destination naming an account or connection eg has no configuration
    /// for (field names from `properties` down).
    pub(crate) fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
        match self {
            Self::WebHook => Ok(()),
            Self::StorageQueue { account, .. } if configured.has_azure_account(account) => Ok(()),
            Self::StorageQueue { account, .. } => Err(InvalidField::new(
                "properties.resourceId",
                format!(
                    "eg has no configuration for the storage account {account:?}: an operator must add it (EG__STORAGE__ACCOUNTS__{}__CONNECTION_STRING) before subscriptions can deliver there",
                    account.to_ascii_uppercase()
                ),
            )),
            Self::RabbitMq { connection, .. } if configured.has_rabbitmq_connection(connection) => Ok(()),
            Self::RabbitMq { connection, .. } => Err(unknown_connection("RabbitMQ", "RABBITMQ", connection)),
            Self::NatsJetStream { connection, .. } if configured.has_nats_connection(connection) => Ok(()),
            Self::NatsJetStream { connection, .. } => Err(unknown_connection("NATS", "NATS", connection)),
        }
    }
}

fn unknown_connection(kind: &str, section: &str, connection: &str) -> InvalidField {
    InvalidField::new(
        "properties.connection",
        format!(
            "eg has no {kind} connection named {connection:?}: an operator must configure it (EG__BROKERS__{section}__{}__URL) before subscriptions can deliver through it",
            connection.to_ascii_uppercase()
        ),
    )
}

/// Azure's queue naming rules: 3–63 of `[a-z0-9-]`, a letter or digit at both ends, no `--`.
fn check_queue_name(name: &str) -> Result<(), InvalidField> {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let valid = (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && alnum(name.chars().next())
        && alnum(name.chars().last())
        && !name.contains("--");
    if valid {
        Ok(())
    } else {
        Err(InvalidField::new(
            "properties.queueName",
            format!(
                "{name:?} is not a valid queue name: 3-63 lower-case letters, digits or single hyphens, starting and ending with a letter or digit"
            ),
        ))
    }
}

/// AMQP short strings (exchange names, routing keys) are at most 255 bytes.
const AMQP_SHORT_STRING_MAX: usize = 255;

/// AMQP 0-9-1's exchange names: letters, digits, `-`, `_`, `.` and `:`, at most 255
/// bytes; `""` is the default exchange. The broker closes the channel on any other
/// name, so every delivery to it would fail.
fn check_exchange_name(name: &str) -> Result<(), InvalidField> {
    let field = "properties.exchange";
    if name.len() > AMQP_SHORT_STRING_MAX {
        return Err(InvalidField::new(
            field,
            format!("is {} bytes; AMQP allows at most {AMQP_SHORT_STRING_MAX}", name.len()),
        ));
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')))
    {
        Some(c) => Err(InvalidField::new(
            field,
            format!(
                "holds {c:?}; an AMQP exchange name holds only letters, digits, '-', '_', '.' and ':' (\"\" is the default exchange)"
            ),
        )),
        None => Ok(()),
    }
}

/// A static routing key: an AMQP short string, with no control characters (no binding
/// can be written to match one).
fn check_routing_key(key: &str) -> Result<(), InvalidField> {
    let field = "properties.routingKey";
    if key.len() > AMQP_SHORT_STRING_MAX {
        return Err(InvalidField::new(
            field,
            format!("is {} bytes; AMQP allows at most {AMQP_SHORT_STRING_MAX}", key.len()),
        ));
    }
    match key.chars().find(|c| c.is_control()) {
        Some(c) => Err(InvalidField::new(
            field,
            format!(
                "holds the control character U+{:04X}; a routing key holds none",
                u32::from(c)
            ),
        )),
        None => Ok(()),
    }
}

/// A NATS subject to publish to: dot-separated tokens, no wildcards, no spaces.
fn check_nats_subject(subject: &str) -> Result<(), InvalidField> {
    let valid = subject.len() <= 255
        && subject
            .split('.')
            .all(|t| !t.is_empty() && t != "*" && t != ">" && !t.chars().any(|c| c.is_whitespace() || c.is_control()));
    if valid {
        Ok(())
    } else {
        Err(InvalidField::new(
            "properties.subject",
            format!(
                "{subject:?} is not a subject to publish to: dot-separated tokens without spaces or wildcards (* and >)"
            ),
        ))
    }
}

fn connection(props: &Map<String, Value>) -> Result<String, InvalidField> {
    let name = required_string(props, "connection")?;
    connection_name(&name, "properties.connection")?;
    Ok(name)
}

fn only_known(props: &Map<String, Value>, known: &[&str]) -> Result<(), InvalidField> {
    super::resource::only_known(props, known, "properties")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subscription::S3ConnectionFacts;

    struct Configured;

    impl NamedConnections for Configured {
        fn has_azure_account(&self, account: &str) -> bool {
            account == "queues1"
        }
        fn s3_connection(&self, _: &str) -> Option<S3ConnectionFacts<'_>> {
            None
        }
        fn has_rabbitmq_connection(&self, name: &str) -> bool {
            name == "main"
        }
        fn has_nats_connection(&self, name: &str) -> bool {
            name == "events"
        }
    }

    fn read(endpoint_type: &str, props: Value) -> Result<Endpoint, InvalidField> {
        let Value::Object(props) = props else { panic!() };
        Endpoint::from_properties(endpoint_type, &props, &["maxEventsPerBatch"])
    }

    const QUEUE_ACCOUNT: &str =
        "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/queues1";

    #[test]
    fn storage_queue_as_event_grid_writes_it() {
        let e = read(
            "StorageQueue",
            json!({"resourceId": QUEUE_ACCOUNT, "queueName": "orders", "queueMessageTimeToLiveInSeconds": -1}),
        )
        .unwrap();
        assert_eq!(e.identity().as_deref(), Some("storagequeue://queues1/orders"));
        assert!(e.check_configured(&Configured).is_ok());
        assert_eq!(read("StorageQueue", Value::Object(e.properties())).unwrap(), e);
        for ttl in [json!(0), json!(-2), json!("1")] {
            let err = read(
                "StorageQueue",
                json!({"resourceId": QUEUE_ACCOUNT, "queueName": "orders", "queueMessageTimeToLiveInSeconds": ttl}),
            )
            .unwrap_err();
            assert_eq!(err.field, "properties.queueMessageTimeToLiveInSeconds");
        }
        let other = read(
            "StorageQueue",
            json!({"resourceId": QUEUE_ACCOUNT.replace("queues1", "other"), "queueName": "orders"}),
        )
        .unwrap();
        assert_eq!(
            other.check_configured(&Configured).unwrap_err().field,
            "properties.resourceId"
        );
    }

    #[test]
    fn rabbitmq_routes_statically_or_by_an_event_field() {
        let fixed = read(
            "RabbitMQ",
            json!({"connection": "main", "exchange": "events", "routingKey": "orders.created"}),
        )
        .unwrap();
        let by_subject = read(
            "RabbitMQ",
            json!({"connection": "main", "exchange": "events", "routingKeyFrom": "subject"}),
        )
        .unwrap();
        for e in [&fixed, &by_subject] {
            assert_eq!(&read("RabbitMQ", Value::Object(e.properties())).unwrap(), e);
            assert!(e.check_configured(&Configured).is_ok());
        }
        assert_eq!(
            read("RabbitMQ", json!({"connection": "main", "exchange": "events"}))
                .unwrap_err()
                .field,
            "properties.routingKey"
        );
        assert_eq!(
            read(
                "RabbitMQ",
                json!({"connection": "main", "exchange": "e", "routingKey": "a", "routingKeyFrom": "subject"})
            )
            .unwrap_err()
            .field,
            "properties.routingKeyFrom"
        );
        let unknown = read(
            "RabbitMQ",
            json!({"connection": "other", "exchange": "e", "routingKey": "a"}),
        )
        .unwrap();
        let err = unknown.check_configured(&Configured).unwrap_err();
        assert!(
            err.problem.contains("EG__BROKERS__RABBITMQ__OTHER__URL"),
            "{}",
            err.problem
        );
    }

    #[test]
    fn rabbitmq_exchange_names_and_routing_keys_are_what_amqp_takes() {
        let exchange = |name: &str| {
            read(
                "RabbitMQ",
                json!({"connection": "main", "exchange": name, "routingKey": "k"}),
            )
        };
        for fine in ["", "events", "amq.topic", "a-b_c.d:e", &"x".repeat(255)] {
            assert!(exchange(fine).is_ok(), "{fine:?}");
        }
        for bad in ["a\r", "a\nb", "nul\u{0}", "has space", "slash/", "é", &"x".repeat(256)] {
            let err = exchange(bad).unwrap_err();
            assert_eq!(err.field, "properties.exchange", "{bad:?}: {err}");
        }
        let key = |key: &str| {
            read(
                "RabbitMQ",
                json!({"connection": "main", "exchange": "e", "routingKey": key}),
            )
        };
        for fine in ["", "orders.created", "a b/é#*", &"k".repeat(255)] {
            assert!(key(fine).is_ok(), "{fine:?}");
        }
        for bad in ["a\r\nb", "nul\u{0}", "del\u{7f}", &"k".repeat(256)] {
            let err = key(bad).unwrap_err();
            assert_eq!(err.field, "properties.routingKey", "{bad:?}: {err}");
        }
    }

    #[test]
    fn nats_subjects_are_concrete() {
        let e = read(
            "NatsJetStream",
            json!({"connection": "events", "subject": "eg.orders", "maxEventsPerBatch": 10}),
        )
        .unwrap();
        assert_eq!(e.identity().as_deref(), Some("nats://events/eg.orders"));
        for subject in [
            "eg.*",
            "eg.>",
            "eg..x",
            "has space",
            "",
            "a\r\nb",
            "nul\u{0}",
            "tab\t",
            &"s".repeat(256),
        ] {
            let err = read("NatsJetStream", json!({"connection": "events", "subject": subject})).unwrap_err();
            assert_eq!(err.field, "properties.subject", "{subject:?}");
        }
        assert_eq!(
            read(
                "NatsJetStream",
                json!({"connection": "events", "subject": "s", "password": "x"})
            )
            .unwrap_err()
            .field,
            "properties.password",
            "no secrets in a subscription"
        );
    }

    #[test]
    fn stored_subscriptions_without_an_endpoint_kind_are_webhooks() {
        #[derive(Deserialize)]
        struct Stored {
            #[serde(default)]
            endpoint: Endpoint,
        }
        let stored: Stored = serde_json::from_value(json!({})).unwrap();
        assert!(stored.endpoint.is_webhook());
    }
}
