//! Azure Event Hubs namespaces eg delivers to (`[brokers.event_hubs.<name>]`), for Event
//! Grid's `EventHub` subscriptions: the namespace's connection string, and where its
//! Kafka endpoint is when it is not the Azure default. eg produces through the Kafka
//! endpoint as Microsoft documents it for Kafka clients: SASL PLAIN over TLS, the user
//! `$ConnectionString` and the connection string as the password.
//!
//! `<name>` is the namespace's name in lower case with `-` as `_`
//! (`eg_core::destination::namespace_connection`): the namespace `contoso-events` is
//! `EG__BROKERS__EVENT_HUBS__CONTOSO_EVENTS__CONNECTION_STRING`.

use super::KafkaConnectionSettings;
use super::storage::{Secret, connection_string_fields};
use serde::{Deserialize, Serialize};

/// The port of Event Hubs' Kafka endpoint.
pub const EVENT_HUBS_KAFKA_PORT: u16 = 9093;

/// The SASL user Event Hubs' Kafka endpoint takes with a connection string as password.
pub const CONNECTION_STRING_USER: &str = "$ConnectionString";

/// One Event Hubs namespace.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventHubsNamespaceSettings {
    /// `Endpoint=sb://<namespace>.servicebus.windows.net/;SharedAccessKeyName=…;SharedAccessKey=…`
    /// as the portal shows it (namespace level, or an event hub's own with `EntityPath`).
    pub connection_string: Secret,
    /// `host:port` of the Kafka endpoint; empty: the connection string's host, port 9093.
    pub kafka_endpoint: String,
    /// For an endpoint whose certificate a private CA issued: its PEM file.
    pub ca_file: String,
    /// The largest record eg sends, in bytes (Event Hubs takes 1 MB on the Standard tier,
    /// more on Premium and Dedicated); `None`: the client's default, 1000000.
    pub message_max_bytes: Option<u32>,
}

impl EventHubsNamespaceSettings {
    /// Checks the namespace `name`, naming the setting that is wrong (never printing
    /// the key).
    pub(super) fn validate(&self, name: &str) -> Result<(), String> {
        self.bootstrap_server()
            .map_err(|e| format!("brokers.event_hubs.{name}.{e}"))?;
        if self.message_max_bytes == Some(0) {
            return Err(format!(
                "brokers.event_hubs.{name}.message_max_bytes: must be at least 1"
            ));
        }
        Ok(())
    }

    /// The Kafka endpoint: the configured one, else the connection string's host on
    /// port 9093. An error starts with the setting it is about.
    fn bootstrap_server(&self) -> Result<String, String> {
        if self.connection_string.is_empty() {
            return Err(
                "connection_string: is required: the namespace's connection string (the portal's Shared access policies)"
                    .to_owned(),
            );
        }
        let fields =
            connection_string_fields(self.connection_string.expose()).map_err(|e| format!("connection_string: {e}"))?;
        let endpoint = fields.get("endpoint").map(String::as_str).unwrap_or_default();
        let host = endpoint
            .strip_prefix("sb://")
            .map(|rest| rest.trim_end_matches('/'))
            .filter(|host| !host.is_empty() && !host.contains('/'));
        let Some(host) = host else {
            return Err(format!(
                "connection_string: its Endpoint must be sb://<namespace>.servicebus.windows.net/, got {endpoint:?}"
            ));
        };
        let has_key = fields.contains_key("sharedaccesskeyname") && fields.contains_key("sharedaccesskey");
        if !has_key && !fields.contains_key("sharedaccesssignature") {
            return Err(
                "connection_string: give SharedAccessKeyName and SharedAccessKey (or SharedAccessSignature), as the portal's connection string has them"
                    .to_owned(),
            );
        }
        if self.kafka_endpoint.is_empty() {
            return Ok(format!("{host}:{EVENT_HUBS_KAFKA_PORT}"));
        }
        if super::brokers::is_host_and_port(&self.kafka_endpoint) {
            Ok(self.kafka_endpoint.clone())
        } else {
            Err(format!(
                "kafka_endpoint: give host:port, e.g. contoso.servicebus.windows.net:9093, got {:?}",
                self.kafka_endpoint
            ))
        }
    }

    /// The Kafka connection this namespace is (`None` when [`Self::validate`] would
    /// refuse it).
    pub fn kafka_connection(&self) -> Option<KafkaConnectionSettings> {
        Some(KafkaConnectionSettings {
            bootstrap_servers: self.bootstrap_server().ok()?,
            sasl_mechanism: "PLAIN".to_owned(),
            username: CONNECTION_STRING_USER.to_owned(),
            password: self.connection_string.clone(),
            tls: true,
            ca_file: self.ca_file.clone(),
            message_max_bytes: self.message_max_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::settings::Settings;

    const PORTAL: &str = "Endpoint=sb://contoso-events.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=aGlkZGVuLWtleQ==";

    fn load(pairs: &[(&str, &str)]) -> Result<Settings, crate::settings::SettingsError> {
        Settings::load(None, pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
    }

    #[test]
    fn a_namespace_is_a_kafka_connection_with_sasl_plain_over_tls() {
        let settings = load(&[("EG__BROKERS__EVENT_HUBS__CONTOSO_EVENTS__CONNECTION_STRING", PORTAL)]).unwrap();
        let namespace = &settings.brokers.event_hubs["contoso_events"];
        let kafka = namespace.kafka_connection().unwrap();
        assert_eq!(kafka.bootstrap_servers, "contoso-events.servicebus.windows.net:9093");
        assert_eq!(
            (kafka.sasl_mechanism.as_str(), kafka.username.as_str()),
            ("PLAIN", "$ConnectionString")
        );
        assert_eq!(kafka.password.expose(), PORTAL);
        assert!(kafka.tls);
        let connections = settings.connections();
        use eg_core::subscription::NamedConnections;
        assert!(connections.has_broker_connection("event_hubs", "contoso_events"));
        assert!(!connections.has_broker_connection("kafka", "contoso_events"));
        assert!(
            !format!("{connections:?}").contains("aGlkZGVuLWtleQ"),
            "the key is not printed"
        );

        let elsewhere = load(&[
            ("EG__BROKERS__EVENT_HUBS__LOCAL__CONNECTION_STRING", PORTAL),
            ("EG__BROKERS__EVENT_HUBS__LOCAL__KAFKA_ENDPOINT", "127.0.0.1:19093"),
            ("EG__BROKERS__EVENT_HUBS__LOCAL__CA_FILE", "/etc/eg/ca.pem"),
        ])
        .unwrap();
        let kafka = elsewhere.brokers.event_hubs["local"].kafka_connection().unwrap();
        assert_eq!(kafka.bootstrap_servers, "127.0.0.1:19093");
        assert_eq!(kafka.ca_file, "/etc/eg/ca.pem");
    }

    #[test]
    fn mistakes_name_the_setting_and_never_print_the_key() {
        for (pairs, named) in [
            (
                vec![("EG__BROKERS__EVENT_HUBS__N__CA_FILE", "/ca.pem")],
                "brokers.event_hubs.n.connection_string: is required",
            ),
            (
                vec![(
                    "EG__BROKERS__EVENT_HUBS__N__CONNECTION_STRING",
                    "Endpoint=https://n.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0",
                )],
                "its Endpoint must be sb://",
            ),
            (
                vec![(
                    "EG__BROKERS__EVENT_HUBS__N__CONNECTION_STRING",
                    "Endpoint=sb://n.servicebus.windows.net/",
                )],
                "give SharedAccessKeyName and SharedAccessKey",
            ),
            (
                vec![
                    ("EG__BROKERS__EVENT_HUBS__N__CONNECTION_STRING", PORTAL),
                    ("EG__BROKERS__EVENT_HUBS__N__KAFKA_ENDPOINT", "no-port"),
                ],
                "brokers.event_hubs.n.kafka_endpoint",
            ),
            (
                vec![("EG__BROKERS__EVENT_HUBS__N-S__CONNECTION_STRING", PORTAL)],
                "a connection name is lower-case letters, digits and '_'",
            ),
        ] {
            let e = load(&pairs).unwrap_err().to_string();
            assert!(e.contains(named), "{pairs:?}: {e}");
            assert!(!e.contains("c2VjcmV0") && !e.contains("aGlkZGVuLWtleQ"), "{e}");
        }
    }
}
