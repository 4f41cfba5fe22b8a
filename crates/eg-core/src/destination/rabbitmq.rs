//! A RabbitMQ exchange (eg's `RabbitMQ`, AMQP 0-9-1) of a connection configured in eg:
//! one persistent message per event, routed by a fixed key or one read from each event.

use super::{Kind, connection, unknown_connection};
use super::{NamedConnections, optional_string};
use crate::api_error::InvalidField;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// AMQP short strings (exchange names, routing keys) are at most 255 bytes.
const AMQP_SHORT_STRING_MAX: usize = 255;

/// An exchange to publish to, through a RabbitMQ connection configured in eg.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RabbitMq {
    pub connection: String,
    pub exchange: String,
    pub routing_key: RoutingKey,
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

impl RabbitMq {
    /// The settings section of RabbitMQ connections (`EG__BROKERS__RABBITMQ__<NAME>__…`).
    pub const CONNECTIONS: &str = "rabbitmq";
}

impl Kind for RabbitMq {
    const ENDPOINT_TYPE: &'static str = "RabbitMQ";
    const OWN: &'static [&'static str] = &["connection", "exchange", "routingKey", "routingKeyFrom"];
    const SHARED: &'static [&'static str] = super::BROKER_SHARED;

    fn read(props: &Map<String, Value>) -> Result<Self, InvalidField> {
        let connection = connection(props)?;
        let Some(exchange) = optional_string(props, "exchange")? else {
            return Err(InvalidField::new(
                "properties.exchange",
                "is required (\"\" is RabbitMQ's default exchange, which routes by queue name)",
            ));
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
        Ok(Self {
            connection,
            exchange,
            routing_key,
        })
    }

    fn show(&self) -> Map<String, Value> {
        let mut props = Map::new();
        props.insert("connection".to_owned(), json!(self.connection));
        props.insert("exchange".to_owned(), json!(self.exchange));
        match &self.routing_key {
            RoutingKey::Static(key) => props.insert("routingKey".to_owned(), json!(key)),
            RoutingKey::FromEvent(field) => props.insert("routingKeyFrom".to_owned(), json!(field)),
        };
        props
    }

    fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
        if configured.has_broker_connection(Self::CONNECTIONS, &self.connection) {
            Ok(())
        } else {
            Err(unknown_connection("RabbitMQ", Self::CONNECTIONS, &self.connection))
        }
    }

    fn identity(&self) -> String {
        format!("rabbitmq://{}/{}", self.connection, self.exchange)
    }
}

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

#[cfg(test)]
mod tests {
    use super::super::tests::{Configured, read, reads_back};
    use serde_json::json;

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
            reads_back(e);
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
}
