//! Configuration, read with the `config` crate: built-in defaults, then an optional
//! file (`--config <file>`), then environment variables `EG__SECTION__KEY`
//! (e.g. `EG__REDIS__URL`). Every tier reads the same settings and uses its sections.
//! `--print-settings` prints the delivery settings as they apply and exits (`effective`).

pub mod aws_profile;
mod brokers;
pub mod certificates;
mod delivery;
mod effective;
pub mod identities;
mod process;
mod redis;
mod storage;
mod tiers;

pub use brokers::{
    BrokersSection, CONNECTION_STRING_USER, Connections, EventHubsNamespaceSettings, KAFKA_SASL_MECHANISMS,
    KafkaConnectionSettings, NatsConnectionSettings, RabbitMqConnectionSettings, SQS_MAX_MESSAGE_BYTES,
    SqsConnectionSettings,
};
pub use delivery::{DeliverySection, NamespaceSection, ProbationSection, ValidationSection};
pub use effective::schedule_warnings;
pub use process::{ArchiveSection, CatalogSection, HistorySection, LogSection, ShutdownSection};
pub use redis::RedisSection;
pub use storage::{AzureAccount, AzureAccountSettings, S3ConnectionSettings, Secret, StorageSection};
pub use tiers::{AdminSection, DeadLetterSection, IngressSection, SchedulerSection, SenderSection};

use certificates::ClientCertificateSettings;
use identities::IdentitySettings;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every setting, by section: `[redis]` is `EG__REDIS__…`. Each section lives in the
/// module of what it configures; this one reads them all and checks they fit together.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub redis: RedisSection,
    pub ingress: IngressSection,
    pub admin: AdminSection,
    pub delivery: DeliverySection,
    pub namespace: NamespaceSection,
    pub validation: ValidationSection,
    pub probation: ProbationSection,
    pub sender: SenderSection,
    pub scheduler: SchedulerSection,
    pub deadletter: DeadLetterSection,
    pub storage: StorageSection,
    pub brokers: BrokersSection,
    /// Delivery identities by name (`EG__IDENTITIES__<NAME>__…`, identities.rs).
    pub identities: BTreeMap<String, IdentitySettings>,
    /// Client certificates webhooks may present, by name
    /// (`EG__CLIENT_CERTIFICATES__<NAME>__…`, certificates.rs).
    pub client_certificates: BTreeMap<String, ClientCertificateSettings>,
    pub catalog: CatalogSection,
    pub history: HistorySection,
    pub archive: ArchiveSection,
    pub shutdown: ShutdownSection,
    pub log: LogSection,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("configuration: {0}")]
    Config(#[from] config::ConfigError),
    #[error("configuration: {0}")]
    Invalid(String),
    #[error("usage: {0}")]
    Usage(String),
}

impl Settings {
    /// Reads settings for a process started with `args` (its command-line arguments).
    /// With `--print-settings`, prints the effective delivery settings (and their
    /// warnings) to stdout and ends the process, without connecting to anything.
    pub fn from_args(args: impl IntoIterator<Item = String>) -> Result<Self, SettingsError> {
        let mut file = None;
        let mut print = false;
        let mut args = args.into_iter().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--print-settings" => print = true,
                "--config" => {
                    file = Some(
                        args.next()
                            .ok_or_else(|| SettingsError::Usage("--config needs a file".into()))?,
                    )
                }
                other if other.starts_with("--config=") => file = Some(other["--config=".len()..].to_owned()),
                other => {
                    return Err(SettingsError::Usage(format!(
                        "unknown argument {other:?}; the options are --config <file> and --print-settings (settings also come from EG__SECTION__KEY variables)"
                    )));
                }
            }
        }
        let settings = Self::load(file.as_deref(), std::env::vars())?;
        if print {
            print!("{}", settings.describe_delivery()?);
            std::process::exit(0);
        }
        Ok(settings)
    }

    /// Defaults, then `file`, then the `EG__…` variables among `env`.
    pub fn load(file: Option<&str>, env: impl IntoIterator<Item = (String, String)>) -> Result<Self, SettingsError> {
        let mut builder = config::Config::builder().add_source(config::Config::try_from(&Settings::default())?);
        if let Some(path) = file {
            builder = builder.add_source(config::File::with_name(path).required(true));
        }
        let env: config::Map<String, String> = env.into_iter().filter(|(k, _)| k.starts_with("EG__")).collect();
        builder = builder.add_source(
            config::Environment::with_prefix("EG")
                .prefix_separator("__")
                .separator("__")
                .source(Some(env)),
        );
        let settings: Settings = builder.build()?.try_deserialize()?;
        settings.validate()?;
        Ok(settings)
    }

    /// The accounts and connections subscriptions may name.
    pub fn connections(&self) -> Connections {
        Connections {
            storage: self.storage.clone(),
            brokers: self.brokers.clone(),
            identities: self.identities.clone(),
            // Read again here (validate read them once already, so they read): the
            // management API checks a subscription's certificate name and expiry.
            client_certificates: certificates::load_all(&self.client_certificates).unwrap_or_default(),
        }
    }

    fn validate(&self) -> Result<(), SettingsError> {
        self.delivery_policies()?;
        self.address_policy()?;
        self.probation_policy()?;
        if self.delivery.visibility_timeout <= self.delivery.timeout {
            return Err(SettingsError::Invalid(format!(
                "delivery.visibility_timeout ({}) must be longer than delivery.timeout ({}), or live deliveries would be taken back",
                humantime::format_duration(self.delivery.visibility_timeout),
                humantime::format_duration(self.delivery.timeout)
            )));
        }
        self.redis.validate()?;
        self.storage.validate().map_err(SettingsError::Invalid)?;
        self.brokers.validate().map_err(SettingsError::Invalid)?;
        identities::validate(&self.identities).map_err(SettingsError::Invalid)?;
        certificates::load_all(&self.client_certificates).map_err(SettingsError::Invalid)?;
        self.deadletter.notify_topic_name().map_err(SettingsError::Invalid)?;
        if self.redis.partitions == 0 {
            return Err(SettingsError::Invalid("redis.partitions must be at least 1".into()));
        }
        // Each partition gets its own share of the 16,384 cluster slots (keyspace.rs).
        if self.redis.partitions > 1024 {
            return Err(SettingsError::Invalid(format!(
                "redis.partitions must be at most 1024 (got {})",
                self.redis.partitions
            )));
        }
        if !matches!(self.log.format.as_str(), "text" | "json") {
            return Err(SettingsError::Invalid(format!(
                "log.format must be \"text\" or \"json\", got {:?}",
                self.log.format
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_need_no_configuration() {
        let s = Settings::load(None, env(&[])).unwrap();
        assert_eq!(s.delivery.timeout, Duration::from_secs(30));
        assert_eq!(s.deadletter.delay, Duration::from_secs(300));
        assert!(s.admin.token.is_none());
    }

    #[test]
    fn cluster_nodes_are_a_comma_separated_list_of_redis_urls() {
        let s = Settings::load(
            None,
            env(&[(
                "EG__REDIS__CLUSTER_NODES",
                "redis://10.0.0.1:7000, redis://10.0.0.2:7000,",
            )]),
        )
        .unwrap();
        assert_eq!(
            s.redis_settings().cluster_nodes,
            ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]
        );
        assert!(
            Settings::load(None, env(&[]))
                .unwrap()
                .redis_settings()
                .cluster_nodes
                .is_empty()
        );
        let error = Settings::load(None, env(&[("EG__REDIS__CLUSTER_NODES", "10.0.0.1:7000")])).unwrap_err();
        assert!(error.to_string().contains("redis.cluster_nodes"), "{error}");
        let error = Settings::load(None, env(&[("EG__REDIS__PARTITIONS", "1025")])).unwrap_err();
        assert!(error.to_string().contains("at most 1024"), "{error}");
    }

    #[test]
    fn redis_tls_credentials_and_sentinel_settings_are_read_and_checked() {
        let s = Settings::load(
            None,
            env(&[
                ("EG__REDIS__URL", "rediss://redis.example.net:6380"),
                ("EG__REDIS__USERNAME", "eg"),
                ("EG__REDIS__PASSWORD", "pw-123"),
                ("EG__REDIS__TLS_CA_FILE", "/etc/eg/redis-tls/ca.crt"),
                ("EG__REDIS__TLS_CERT_FILE", "/etc/eg/redis-tls/tls.crt"),
                ("EG__REDIS__TLS_KEY_FILE", "/etc/eg/redis-tls/tls.key"),
            ]),
        )
        .unwrap();
        let redis = s.redis_settings();
        assert_eq!(redis.credentials.username.as_deref(), Some("eg"));
        assert_eq!(redis.credentials.password.as_deref(), Some("pw-123"));
        assert_eq!(redis.tls.ca_file, Some(PathBuf::from("/etc/eg/redis-tls/ca.crt")));
        assert_eq!(redis.tls.key_file, Some(PathBuf::from("/etc/eg/redis-tls/tls.key")));
        assert!(redis.sentinel.is_none());
        // Passwords do not show where settings are printed.
        assert!(!format!("{:?} {:?}", s.redis, redis).contains("pw-123"));
        assert!(
            Settings::load(None, env(&[]))
                .unwrap()
                .redis_settings()
                .tls
                .ca_file
                .is_none()
        );

        let s = Settings::load(
            None,
            env(&[
                (
                    "EG__REDIS__SENTINEL_NODES",
                    "redis://10.0.0.5:26379, redis://10.0.0.6:26379",
                ),
                ("EG__REDIS__SENTINEL_MASTER", "mymaster"),
                ("EG__REDIS__SENTINEL_PASSWORD", "sentinel-pw"),
            ]),
        )
        .unwrap();
        let sentinel = s.redis_settings().sentinel.unwrap();
        assert_eq!(sentinel.nodes, ["redis://10.0.0.5:26379", "redis://10.0.0.6:26379"]);
        assert_eq!(sentinel.master_name, "mymaster");
        assert_eq!(sentinel.credentials.password.as_deref(), Some("sentinel-pw"));

        for (pairs, named) in [
            (
                vec![("EG__REDIS__SENTINEL_NODES", "redis://10.0.0.5:26379")],
                "redis.sentinel_master",
            ),
            (
                vec![("EG__REDIS__SENTINEL_NODES", "10.0.0.5:26379")],
                "redis.sentinel_nodes",
            ),
            (
                vec![
                    ("EG__REDIS__SENTINEL_NODES", "redis://10.0.0.5:26379"),
                    ("EG__REDIS__SENTINEL_MASTER", "m"),
                    ("EG__REDIS__CLUSTER_NODES", "redis://10.0.0.1:7000"),
                ],
                "not both",
            ),
            (vec![("EG__REDIS__TLS_CERT_FILE", "/c.pem")], "redis.tls_key_file"),
            (
                vec![("EG__REDIS__CLUSTER_NODES", "x://u:pw-123@h")],
                "redis.cluster_nodes",
            ),
        ] {
            let error = Settings::load(None, env(&pairs)).unwrap_err().to_string();
            assert!(error.contains(named), "{error}");
            assert!(!error.contains("pw-123"), "{error}");
        }
    }

    #[test]
    fn environment_overrides_with_double_underscores() {
        let s = Settings::load(
            None,
            env(&[
                ("EG__REDIS__URL", "redis://10.0.0.1:6380"),
                ("EG__REDIS__PARTITIONS", "8"),
                ("EG__ADMIN__TOKEN", "t0ken"),
                ("EG__DELIVERY__RETRY_SCHEDULE", "1s,2s,5s"),
                ("EG__DEADLETTER__DELAY", "1s"),
                ("EG__DEADLETTER__DIR", "/tmp/dl"),
                ("EG__INGRESS__LISTEN", "0.0.0.0:9000"),
                ("OTHER", "ignored"),
            ]),
        )
        .unwrap();
        assert_eq!(s.redis.url, "redis://10.0.0.1:6380");
        assert_eq!(s.redis.partitions, 8);
        assert_eq!(s.admin.token.as_deref(), Some("t0ken"));
        assert_eq!(s.deadletter.delay, Duration::from_secs(1));
        assert_eq!(s.deadletter.dir, PathBuf::from("/tmp/dl"));
        assert_eq!(s.ingress.listen, "0.0.0.0:9000");
        assert_eq!(
            s.delivery_policy().unwrap().schedule.delay_after(3),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn the_notify_topic_is_off_unless_named_and_must_be_a_topic_name() {
        let off = Settings::load(None, env(&[])).unwrap();
        assert_eq!(off.deadletter.notify_topic_name(), Ok(None));
        let on = Settings::load(None, env(&[("EG__DEADLETTER__NOTIFY_TOPIC", "dead-letter-events")])).unwrap();
        let name = on.deadletter.notify_topic_name().unwrap().unwrap();
        assert_eq!(name.as_str(), "dead-letter-events");
        let err = Settings::load(None, env(&[("EG__DEADLETTER__NOTIFY_TOPIC", "dead letters")])).unwrap_err();
        assert!(err.to_string().contains("deadletter.notify_topic"), "{err}");
    }

    #[test]
    fn bad_values_are_refused_with_the_setting_named() {
        let err = Settings::load(None, env(&[("EG__DELIVERY__RETRY_SCHEDULE", "1s,soon")])).unwrap_err();
        assert!(err.to_string().contains("retry schedule"), "{err}");
        let err = Settings::load(None, env(&[("EG__DELIVERY__VISIBILITY_TIMEOUT", "10s")])).unwrap_err();
        assert!(err.to_string().contains("visibility_timeout"), "{err}");
        assert!(Settings::load(None, env(&[("EG__DEADLETTER__DELAY", "whenever")])).is_err());
    }

    #[test]
    fn reads_a_config_file() {
        let dir = std::env::temp_dir().join(format!("eg-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("eg.toml");
        std::fs::write(&file, "[sender]\nconcurrency = 7\n").unwrap();
        let s = Settings::load(Some(file.to_str().unwrap()), env(&[])).unwrap();
        assert_eq!(s.sender.concurrency, 7);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn delivery_features_are_configured_and_checked() {
        let s = Settings::load(None, env(&[])).unwrap();
        assert!(s.validation.enabled);
        assert!(s.probation_policy().unwrap().is_some());
        assert!(s.address_policy().unwrap().allow_list().is_empty());
        let ns = s.delivery_policies().unwrap().namespace_topic;
        assert_eq!(ns.schedule.delay_after(1), Duration::from_secs(10));
        assert_eq!(ns.schedule.delay_after(9), Duration::from_secs(300));

        let s = Settings::load(
            None,
            env(&[
                ("EG__DELIVERY__ALLOWED_NETWORKS", "127.0.0.1/32, 10.1.0.0/16"),
                ("EG__PROBATION__ENABLED", "false"),
                ("EG__NAMESPACE__RETRY_SCHEDULE", "1s"),
            ]),
        )
        .unwrap();
        assert_eq!(s.address_policy().unwrap().allow_list().len(), 2);
        assert!(s.probation_policy().unwrap().is_none());

        let err = Settings::load(None, env(&[("EG__DELIVERY__ALLOWED_NETWORKS", "localhost")])).unwrap_err();
        assert!(err.to_string().contains("allowed_networks"), "{err}");
        let err = Settings::load(None, env(&[("EG__PROBATION__FAILURE_THRESHOLD", "0")])).unwrap_err();
        assert!(err.to_string().contains("probation"), "{err}");
        let err = Settings::load(None, env(&[("EG__NAMESPACE__NOT_RETRIED", "Sometimes")])).unwrap_err();
        assert!(err.to_string().contains("namespace"), "{err}");
    }
}
