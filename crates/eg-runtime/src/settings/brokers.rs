//! The message brokers eg may deliver to, by name (`[brokers]`): RabbitMQ connections
//! (`EG__BROKERS__RABBITMQ__<NAME>__URL=amqp://user:password@host:5672/vhost`) and NATS
//! connections (`EG__BROKERS__NATS__<NAME>__URL=nats://host:4222`, with optional user,
//! password, token, credentials file and TLS), Kafka connections
//! (`EG__BROKERS__KAFKA__<NAME>__BOOTSTRAP_SERVERS=host:9092`, with optional SASL and TLS)
//! and Amazon SQS connections (`EG__BROKERS__SQS__<NAME>__REGION=eu-west-1`, with an
//! endpoint URL for SQS-compatible servers, keys or AWS's chain), and Azure Event Hubs
//! namespaces (`EG__BROKERS__EVENT_HUBS__<NAME>__CONNECTION_STRING`, see
//! [`EventHubsNamespaceSettings`]). Subscriptions name a
//! connection; only this configuration holds where it is and how to sign in ([`Secret`]:
//! never printed).

use super::storage::{Secret, StorageSection, connection_string_fields};
use eg_core::destination::{AmazonSqs, EventHub, Kafka, NatsJetStream, RabbitMq};
use eg_core::subscription::{NamedConnections, S3ConnectionFacts};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokersSection {
    pub rabbitmq: BTreeMap<String, RabbitMqConnectionSettings>,
    pub nats: BTreeMap<String, NatsConnectionSettings>,
    pub kafka: BTreeMap<String, KafkaConnectionSettings>,
    pub sqs: BTreeMap<String, SqsConnectionSettings>,
    /// Azure Event Hubs namespaces, reached through their Kafka endpoints.
    pub event_hubs: BTreeMap<String, EventHubsNamespaceSettings>,
}

/// One RabbitMQ broker (AMQP 0-9-1).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RabbitMqConnectionSettings {
    /// `amqp://user:password@host:5672/vhost` or `amqps://…` for TLS (a secret: it may
    /// hold the password).
    pub url: Secret,
    /// For `amqps://` with a private CA: its PEM file.
    pub ca_file: String,
}

/// One NATS server or cluster, with JetStream.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NatsConnectionSettings {
    /// `nats://host:4222` (`tls://…` for TLS); several, comma-separated, for a cluster.
    pub url: String,
    pub user: String,
    pub password: Secret,
    pub token: Secret,
    /// A `.creds` file (JWT + NKey), as `nsc` writes it.
    pub credentials_file: String,
    /// For TLS with a private CA: its PEM file.
    pub ca_file: String,
}

/// One Kafka cluster (or anything speaking its protocol).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaConnectionSettings {
    /// `host:9092`; several, comma-separated: the brokers first asked for the cluster's
    /// metadata.
    pub bootstrap_servers: String,
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`; empty: no SASL.
    pub sasl_mechanism: String,
    pub username: String,
    pub password: Secret,
    /// TLS to the brokers (with the system's trust roots, or `ca_file`).
    pub tls: bool,
    /// For TLS with a private CA: its PEM file.
    pub ca_file: String,
    /// The largest record eg sends, in bytes: the brokers' `message.max.bytes` (a larger
    /// event is `PayloadTooLarge`, not retried). `None`: the client's default, 1000000.
    pub message_max_bytes: Option<u32>,
    /// Bounds one attempt through this connection (producing and every in-sync
    /// replica's acknowledgement) when the cluster needs longer than
    /// `delivery.timeout`; keep it under `delivery.visibility_timeout`. `None`:
    /// `delivery.timeout`.
    #[serde(with = "humantime_serde")]
    pub timeout: Option<std::time::Duration>,
}

/// The SASL mechanisms a Kafka connection may use.
pub const KAFKA_SASL_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

impl KafkaConnectionSettings {
    /// Checks the connection `name`, naming the setting that is wrong.
    fn validate(&self, name: &str) -> Result<(), String> {
        let setting = |key: &str| format!("brokers.kafka.{name}.{key}");
        let servers: Vec<&str> = self.bootstrap_servers.split(',').map(str::trim).collect();
        if servers.iter().any(|s| !is_host_and_port(s)) {
            return Err(format!(
                "{}: give host:port of the brokers, e.g. kafka1:9092 (several comma-separated), got {:?}",
                setting("bootstrap_servers"),
                self.bootstrap_servers
            ));
        }
        if !self.sasl_mechanism.is_empty() && !KAFKA_SASL_MECHANISMS.contains(&self.sasl_mechanism.as_str()) {
            return Err(format!(
                "{}: must be one of {}, got {:?}",
                setting("sasl_mechanism"),
                KAFKA_SASL_MECHANISMS.join(", "),
                self.sasl_mechanism
            ));
        }
        if self.sasl_mechanism.is_empty() && !(self.username.is_empty() && self.password.is_empty()) {
            return Err(format!(
                "{}: a username or password needs a SASL mechanism ({})",
                setting("sasl_mechanism"),
                KAFKA_SASL_MECHANISMS.join(", ")
            ));
        }
        if !self.sasl_mechanism.is_empty() && (self.username.is_empty() || self.password.is_empty()) {
            return Err(format!(
                "brokers.kafka.{name}: SASL {} needs a username and a password",
                self.sasl_mechanism
            ));
        }
        if !self.ca_file.is_empty() && !self.tls {
            return Err(format!("{}: a CA file is for TLS: set tls = true", setting("ca_file")));
        }
        if self.message_max_bytes == Some(0) {
            return Err(format!("{}: must be at least 1", setting("message_max_bytes")));
        }
        if self.timeout.is_some_and(|t| t < std::time::Duration::from_secs(1)) {
            return Err(format!(
                "{}: at least 1s (the client needs half a second to report a record)",
                setting("timeout")
            ));
        }
        Ok(())
    }
}

/// `host:port`, the port a number (`[::1]:9092` for IPv6).
fn is_host_and_port(server: &str) -> bool {
    server
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0))
}

/// One Amazon SQS endpoint (AWS's in a region, or an SQS-compatible server).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SqsConnectionSettings {
    /// The region requests are signed for; empty = the environment's or profile's,
    /// else us-east-1.
    pub region: String,
    /// e.g. `http://127.0.0.1:5000` for an SQS-compatible server; empty =
    /// `https://sqs.<region>.amazonaws.com`.
    pub endpoint_url: String,
    /// Keys of this connection; empty = AWS's chain (environment, profile files, web
    /// identity, container and instance credentials).
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub session_token: Secret,
    /// The largest message sent, in bytes (body and attributes, as SQS counts them);
    /// a larger event is refused before sending, not retried. SQS's limit is 1 MiB;
    /// set the queue's own `MaximumMessageSize` when it is lower (e.g. 262144).
    pub max_message_bytes: usize,
}

/// SQS's largest message since 2025 (it was 256 KiB before).
pub const SQS_MAX_MESSAGE_BYTES: usize = 1024 * 1024;

impl Default for SqsConnectionSettings {
    fn default() -> Self {
        Self {
            region: String::new(),
            endpoint_url: String::new(),
            access_key_id: String::new(),
            secret_access_key: Secret::default(),
            session_token: Secret::default(),
            max_message_bytes: SQS_MAX_MESSAGE_BYTES,
        }
    }
}

/// The port of Event Hubs' Kafka endpoint.
pub const EVENT_HUBS_KAFKA_PORT: u16 = 9093;

/// The SASL user Event Hubs' Kafka endpoint takes with a connection string as password.
pub const CONNECTION_STRING_USER: &str = "$ConnectionString";

/// Azure Event Hubs namespaces eg delivers to (`[brokers.event_hubs.<name>]`), for Event
/// Grid's `EventHub` subscriptions. eg produces through the namespace's Kafka endpoint
/// as Microsoft documents it for Kafka clients: SASL PLAIN over TLS, the user
/// `$ConnectionString` and the connection string as the password. `<name>` is the
/// namespace's name in lower case with `-` as `_`
/// (`eg_core::destination::namespace_connection`).
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
        if is_host_and_port(&self.kafka_endpoint) {
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
            timeout: None,
        })
    }
}

impl BrokersSection {
    /// Checks every connection, naming the setting that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        for (name, rabbit) in &self.rabbitmq {
            check_name("rabbitmq", name)?;
            let url = rabbit.url.expose();
            if !(url.starts_with("amqp://") || url.starts_with("amqps://")) {
                return Err(format!(
                    "brokers.rabbitmq.{name}.url: must be an amqp:// or amqps:// URL (amqp://user:password@host:5672/vhost)"
                ));
            }
        }
        for (name, nats) in &self.nats {
            check_name("nats", name)?;
            if nats.url.split(',').map(str::trim).any(|u| u.is_empty()) {
                return Err(format!(
                    "brokers.nats.{name}.url: give the server, e.g. nats://127.0.0.1:4222 (several comma-separated)"
                ));
            }
            if !nats.password.is_empty() && nats.user.is_empty() {
                return Err(format!("brokers.nats.{name}: a password needs a user"));
            }
        }
        for (name, kafka) in &self.kafka {
            check_name("kafka", name)?;
            kafka.validate(name)?;
        }
        for (name, sqs) in &self.sqs {
            check_name("sqs", name)?;
            sqs.validate(name)?;
        }
        for (name, namespace) in &self.event_hubs {
            check_name("event_hubs", name)?;
            namespace.validate(name)?;
        }
        Ok(())
    }
}

impl SqsConnectionSettings {
    fn validate(&self, name: &str) -> Result<(), String> {
        let endpoint = &self.endpoint_url;
        if !endpoint.is_empty()
            && !url::Url::parse(endpoint).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
        {
            return Err(format!(
                "brokers.sqs.{name}.endpoint_url: {endpoint:?} is not an http(s) URL (e.g. http://127.0.0.1:5000)"
            ));
        }
        if self.access_key_id.is_empty() != self.secret_access_key.is_empty() {
            return Err(format!(
                "brokers.sqs.{name}: give both access_key_id and secret_access_key, or neither for AWS's chain"
            ));
        }
        if !(1024..=SQS_MAX_MESSAGE_BYTES).contains(&self.max_message_bytes) {
            return Err(format!(
                "brokers.sqs.{name}.max_message_bytes: {} is outside SQS's 1024 to {SQS_MAX_MESSAGE_BYTES} bytes",
                self.max_message_bytes
            ));
        }
        Ok(())
    }

    /// The endpoint requests go to: the configured one, else AWS's for `region`.
    pub fn endpoint(&self, region: &str) -> String {
        if self.endpoint_url.is_empty() {
            format!("https://sqs.{region}.amazonaws.com")
        } else {
            self.endpoint_url.trim_end_matches('/').to_owned()
        }
    }
}

fn check_name(kind: &str, name: &str) -> Result<(), String> {
    if name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        Ok(())
    } else {
        Err(format!(
            "brokers.{kind}.{name}: a connection name is lower-case letters, digits and '_'"
        ))
    }
}

/// Everything a subscription may name, as the management API checks it.
#[derive(Debug, Clone, Default)]
pub struct Connections {
    pub storage: StorageSection,
    pub brokers: BrokersSection,
    pub identities: super::identities::IdentitiesSection,
    pub client_certificates: BTreeMap<String, super::certificates::LoadedCertificate>,
}

impl NamedConnections for Connections {
    fn has_azure_account(&self, account: &str) -> bool {
        self.storage.accounts.contains_key(account)
    }

    fn s3_connection(&self, name: &str) -> Option<S3ConnectionFacts<'_>> {
        self.storage.s3_connection(name)
    }

    fn has_broker_connection(&self, section: &str, name: &str) -> bool {
        match section {
            RabbitMq::CONNECTIONS => self.brokers.rabbitmq.contains_key(name),
            NatsJetStream::CONNECTIONS => self.brokers.nats.contains_key(name),
            Kafka::CONNECTIONS => self.brokers.kafka.contains_key(name),
            AmazonSqs::CONNECTIONS => self.brokers.sqs.contains_key(name),
            EventHub::CONNECTIONS => self.brokers.event_hubs.contains_key(name),
            _ => false,
        }
    }

    fn identity(&self, name: &str) -> Option<eg_core::identity::IdentityFacts> {
        super::identities::facts(&self.identities, name)
    }

    fn identity_for_tenant(&self, tenant: &str) -> Option<String> {
        super::identities::for_tenant(&self.identities, tenant)
    }

    fn client_certificate(&self, name: &str) -> Option<eg_core::destination::CertificateFacts> {
        let now = eg_core::UnixMillis(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        );
        self.client_certificates.get(name).map(|c| c.facts(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_come_from_the_environment_and_are_checked() {
        let env = [
            (
                "EG__BROKERS__RABBITMQ__MAIN__URL",
                "amqp://eg:secret@127.0.0.1:5672/%2f",
            ),
            ("EG__BROKERS__NATS__EVENTS__URL", "nats://127.0.0.1:4222"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let settings = crate::settings::Settings::load(None, env).unwrap();
        let connections = settings.connections();
        assert!(connections.has_broker_connection("rabbitmq", "main"));
        assert!(connections.has_broker_connection("nats", "events"));
        assert!(!connections.has_broker_connection("nats", "main"));
        assert!(
            !format!("{connections:?}").contains("secret"),
            "the URL's password is not printed"
        );

        let wrong = [("EG__BROKERS__RABBITMQ__MAIN__URL", "http://x")].map(|(k, v)| (k.to_owned(), v.to_owned()));
        let e = crate::settings::Settings::load(None, wrong).unwrap_err().to_string();
        assert!(e.contains("brokers.rabbitmq.main.url"), "{e}");
    }

    #[test]
    fn kafka_connections_are_checked_naming_the_setting() {
        let load = |pairs: &[(&str, &str)]| {
            crate::settings::Settings::load(None, pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
        };
        let settings = load(&[
            ("EG__BROKERS__KAFKA__STREAM__BOOTSTRAP_SERVERS", "k1:9092, k2:9093"),
            ("EG__BROKERS__KAFKA__STREAM__SASL_MECHANISM", "SCRAM-SHA-512"),
            ("EG__BROKERS__KAFKA__STREAM__USERNAME", "eg"),
            ("EG__BROKERS__KAFKA__STREAM__PASSWORD", "kafka-secret"),
            ("EG__BROKERS__KAFKA__STREAM__TLS", "true"),
            ("EG__BROKERS__KAFKA__STREAM__CA_FILE", "/etc/eg/ca.pem"),
            ("EG__BROKERS__KAFKA__STREAM__MESSAGE_MAX_BYTES", "2000000"),
            ("EG__BROKERS__KAFKA__STREAM__TIMEOUT", "5s"),
        ])
        .unwrap();
        let stream = &settings.brokers.kafka["stream"];
        assert!(stream.tls);
        assert_eq!(stream.timeout, Some(std::time::Duration::from_secs(5)));
        assert_eq!(stream.message_max_bytes, Some(2_000_000));
        let connections = settings.connections();
        assert!(connections.has_broker_connection("kafka", "stream"));
        assert!(!connections.has_broker_connection("kafka", "main"));
        assert!(
            !format!("{connections:?}").contains("kafka-secret"),
            "the password is not printed"
        );

        for (pairs, named) in [
            (
                vec![("EG__BROKERS__KAFKA__S__BOOTSTRAP_SERVERS", "k1")],
                "brokers.kafka.s.bootstrap_servers",
            ),
            (
                vec![("EG__BROKERS__KAFKA__S__BOOTSTRAP_SERVERS", "")],
                "brokers.kafka.s.bootstrap_servers",
            ),
            (
                vec![
                    ("EG__BROKERS__KAFKA__S__BOOTSTRAP_SERVERS", "k1:9092"),
                    ("EG__BROKERS__KAFKA__S__SASL_MECHANISM", "GSSAPI"),
                ],
                "brokers.kafka.s.sasl_mechanism",
            ),
            (
                vec![
                    ("EG__BROKERS__KAFKA__S__BOOTSTRAP_SERVERS", "k1:9092"),
                    ("EG__BROKERS__KAFKA__S__SASL_MECHANISM", "PLAIN"),
                    ("EG__BROKERS__KAFKA__S__USERNAME", "eg"),
                ],
                "SASL PLAIN needs a username and a password",
            ),
            (
                vec![
                    ("EG__BROKERS__KAFKA__S__BOOTSTRAP_SERVERS", "k1:9092"),
                    ("EG__BROKERS__KAFKA__S__PASSWORD", "p"),
                ],
                "brokers.kafka.s.sasl_mechanism",
            ),
            (
                vec![
                    ("EG__BROKERS__KAFKA__S__BOOTSTRAP_SERVERS", "k1:9092"),
                    ("EG__BROKERS__KAFKA__S__CA_FILE", "/ca.pem"),
                ],
                "brokers.kafka.s.ca_file",
            ),
            (
                vec![
                    ("EG__BROKERS__KAFKA__S__BOOTSTRAP_SERVERS", "k1:9092"),
                    ("EG__BROKERS__KAFKA__S__TIMEOUT", "200ms"),
                ],
                "brokers.kafka.s.timeout",
            ),
        ] {
            let e = load(&pairs).unwrap_err().to_string();
            assert!(e.contains(named), "{pairs:?}: {e}");
        }
    }

    #[test]
    fn sqs_connections_default_to_a_one_mib_limit_and_are_checked() {
        let env = [
            ("EG__BROKERS__SQS__AWS__REGION", "eu-west-1"),
            ("EG__BROKERS__SQS__LOCAL__ENDPOINT_URL", "http://127.0.0.1:5000/"),
            ("EG__BROKERS__SQS__LOCAL__ACCESS_KEY_ID", "test"),
            ("EG__BROKERS__SQS__LOCAL__SECRET_ACCESS_KEY", "hidden-key"),
            ("EG__BROKERS__SQS__LOCAL__MAX_MESSAGE_BYTES", "262144"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let settings = crate::settings::Settings::load(None, env).unwrap();
        let aws = &settings.brokers.sqs["aws"];
        assert_eq!(aws.max_message_bytes, 1024 * 1024);
        assert_eq!(aws.endpoint("eu-west-1"), "https://sqs.eu-west-1.amazonaws.com");
        let local = &settings.brokers.sqs["local"];
        assert_eq!(local.max_message_bytes, 262_144);
        assert_eq!(local.endpoint("us-east-1"), "http://127.0.0.1:5000");
        let connections = settings.connections();
        assert!(connections.has_broker_connection("sqs", "aws"));
        assert!(!format!("{connections:?}").contains("hidden-key"));

        for (key, value, named) in [
            (
                "EG__BROKERS__SQS__X__ENDPOINT_URL",
                "ftp://h",
                "brokers.sqs.x.endpoint_url",
            ),
            ("EG__BROKERS__SQS__X__ACCESS_KEY_ID", "only-half", "brokers.sqs.x"),
            (
                "EG__BROKERS__SQS__X__MAX_MESSAGE_BYTES",
                "2000000",
                "brokers.sqs.x.max_message_bytes",
            ),
        ] {
            let env = [(key.to_owned(), value.to_owned())];
            let e = crate::settings::Settings::load(None, env).unwrap_err().to_string();
            assert!(e.contains(named), "{key}: {e}");
        }
    }

    fn load_pairs(pairs: &[(&str, &str)]) -> Result<crate::settings::Settings, crate::settings::SettingsError> {
        crate::settings::Settings::load(None, pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
    }

    const PORTAL: &str = "Endpoint=sb://contoso-events.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=aGlkZGVuLWtleQ==";

    #[test]
    fn a_namespace_is_a_kafka_connection_with_sasl_plain_over_tls() {
        let settings = load_pairs(&[("EG__BROKERS__EVENT_HUBS__CONTOSO_EVENTS__CONNECTION_STRING", PORTAL)]).unwrap();
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
        assert!(connections.has_broker_connection("event_hubs", "contoso_events"));
        assert!(!connections.has_broker_connection("kafka", "contoso_events"));
        assert!(
            !format!("{connections:?}").contains("aGlkZGVuLWtleQ"),
            "the key is not printed"
        );

        let elsewhere = load_pairs(&[
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
            let e = load_pairs(&pairs).unwrap_err().to_string();
            assert!(e.contains(named), "{pairs:?}: {e}");
            assert!(!e.contains("c2VjcmV0") && !e.contains("aGlkZGVuLWtleQ"), "{e}");
        }
    }
}
