//! Configuration, read with the `config` crate: built-in defaults, then an optional
//! file (`--config <file>`), then environment variables `EG__SECTION__KEY`
//! (e.g. `EG__REDIS__URL`). Every tier reads the same settings and uses its sections.
//! `--print-settings` prints the delivery settings as they apply and exits (`effective`).

pub mod aws_profile;
mod brokers;
mod effective;
mod storage;

pub use brokers::{BrokersSection, Connections, NatsConnectionSettings, RabbitMqConnectionSettings};
pub use effective::schedule_warnings;
pub use storage::{AzureAccount, AzureAccountSettings, S3ConnectionSettings, Secret, StorageSection};

use eg_core::address::AddressPolicy;
use eg_core::outcome::OutcomePolicy;
use eg_core::policy::ProfilePolicies;
use eg_core::probation::ProbationPolicy;
use eg_core::{DeliveryPolicy, RetrySchedule};
use eg_outbound::OutboundSettings;
use eg_store::{RedisSettings, Retention};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

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
    pub catalog: CatalogSection,
    pub history: HistorySection,
    pub shutdown: ShutdownSection,
    pub log: LogSection,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisSection {
    /// `redis://host:port/db`, `rediss://…`, or `redis+unix:///path/to/socket`.
    pub url: String,
    /// A Redis Cluster instead: comma-separated seed nodes (`redis://host:port,…`; a
    /// few are enough, the rest are discovered). When set, `url` is not used.
    pub cluster_nodes: String,
    /// Prefix of every key, so deployments can share a Redis.
    pub prefix: String,
    /// Partitions of the delivery keyspace (each one hash tag); every tier must agree.
    pub partitions: u16,
    /// Start a new deployment under `prefix` on a Redis that holds other prefixes'
    /// deployments and none of this one's. Without it a tier refuses, taking the prefix
    /// for a typo. Needed once, by the new deployment's first tier.
    pub new_deployment: bool,
    pub pool_size: usize,
    #[serde(with = "humantime_serde")]
    pub command_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Replicas that must confirm a publish (Redis `WAIT`) before the publisher gets 200:
    /// with 1, a primary lost right after answering cannot take the events with it,
    /// because its replica, which takes over, holds them. 0 = the primary alone.
    pub replica_acks: u16,
    /// How long a publish waits for those replicas; after it the publisher gets 503.
    #[serde(with = "humantime_serde")]
    pub replica_ack_timeout: Duration,
    /// The data nodes' ACL user, when not in the URLs (with Sentinel, always here).
    pub username: String,
    /// The data nodes' password (`requirepass` or the ACL user's), when not in the URLs.
    pub password: Secret,
    /// The CA certificate (PEM) that signed the Redis servers' certificates, for
    /// `rediss://`; empty = the system's trust roots.
    pub tls_ca_file: String,
    /// A client certificate (PEM) for servers that ask for one (mutual TLS), with
    /// `tls_key_file`.
    pub tls_cert_file: String,
    /// The client certificate's private key (PEM).
    pub tls_key_file: String,
    /// Redis Sentinel instead of `url`: comma-separated sentinels (`redis://host:26379,…`;
    /// `rediss://` reaches the sentinels and the data nodes over TLS).
    pub sentinel_nodes: String,
    /// The name the sentinels monitor the primary under.
    pub sentinel_master: String,
    /// The sentinels' own ACL user, if any.
    pub sentinel_username: String,
    /// The sentinels' own password (their `requirepass`), if any.
    pub sentinel_password: Secret,
}

impl RedisSection {
    /// The cluster seed nodes, empty when not a cluster.
    pub fn cluster_nodes(&self) -> Vec<String> {
        comma_separated(&self.cluster_nodes)
    }

    /// The sentinels, empty when Sentinel is not used.
    pub fn sentinel_nodes(&self) -> Vec<String> {
        comma_separated(&self.sentinel_nodes)
    }

    fn validate(&self) -> Result<(), SettingsError> {
        let not_a_url = |node: &String| !(node.starts_with("redis://") || node.starts_with("rediss://"));
        if let Some(node) = self.cluster_nodes().iter().find(|n| not_a_url(n)) {
            return Err(SettingsError::Invalid(format!(
                "redis.cluster_nodes: {:?} is not a redis:// or rediss:// URL",
                eg_store::redact_url(node)
            )));
        }
        let sentinels = self.sentinel_nodes();
        if let Some(node) = sentinels.iter().find(|n| not_a_url(n)) {
            return Err(SettingsError::Invalid(format!(
                "redis.sentinel_nodes: {:?} is not a redis:// or rediss:// URL (a sentinel, e.g. redis://10.0.0.5:26379)",
                eg_store::redact_url(node)
            )));
        }
        if !sentinels.is_empty() && !self.cluster_nodes().is_empty() {
            return Err(SettingsError::Invalid(
                "redis.sentinel_nodes and redis.cluster_nodes are both set: a deployment uses Sentinel or a Cluster, not both".into(),
            ));
        }
        if !sentinels.is_empty() && self.sentinel_master.trim().is_empty() {
            return Err(SettingsError::Invalid(
                "redis.sentinel_master: name the primary the sentinels monitor (`sentinel monitor <name> …`)".into(),
            ));
        }
        if self.tls_cert_file.is_empty() != self.tls_key_file.is_empty() {
            return Err(SettingsError::Invalid(
                "redis.tls_cert_file and redis.tls_key_file go together: set both or neither".into(),
            ));
        }
        Ok(())
    }
}

fn comma_separated(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_owned())
}

impl Default for RedisSection {
    fn default() -> Self {
        Self {
            url: "redis://127.0.0.1:6379".into(),
            cluster_nodes: String::new(),
            prefix: "eg".into(),
            partitions: 4,
            new_deployment: false,
            pool_size: 32,
            command_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(1),
            replica_acks: 0,
            replica_ack_timeout: Duration::from_secs(1),
            username: String::new(),
            password: Secret::default(),
            tls_ca_file: String::new(),
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            sentinel_nodes: String::new(),
            sentinel_master: String::new(),
            sentinel_username: String::new(),
            sentinel_password: Secret::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngressSection {
    /// Publish API, management API and ops endpoints.
    pub listen: String,
    /// Base URL publishers reach this ingress at (shown as each topic's `endpoint`).
    pub public_url: Option<String>,
    pub max_request_bytes: usize,
    pub max_event_bytes: usize,
    pub max_events_per_request: usize,
    pub max_subscriptions_per_topic: u32,
    /// Longest a publish waits on Redis before answering `503` with `Retry-After`
    /// (nothing was accepted), so publishers never hang during an outage.
    #[serde(with = "humantime_serde")]
    pub storage_timeout: Duration,
    /// Longest the body of a publish or management request may take to arrive, from
    /// its first byte being asked for to its last; a slower client is answered `408`.
    #[serde(with = "humantime_serde")]
    pub body_read_timeout: Duration,
}

impl Default for IngressSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            public_url: None,
            max_request_bytes: 1024 * 1024,
            max_event_bytes: 1024 * 1024,
            max_events_per_request: 5000,
            max_subscriptions_per_topic: 500,
            storage_timeout: Duration::from_secs(1),
            body_read_timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSection {
    /// Bearer token of the management API; without one the API is off.
    pub token: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeliverySection {
    /// Comma-separated delays after each failed attempt, e.g. `10s,30s,1m`; the last repeats.
    pub retry_schedule: Option<String>,
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Statuses that are not retried (dead-lettered at once).
    pub not_retried: String,
    /// Least delay before retrying after a status; `*` is any other failing status.
    pub retry_minimums: String,
    #[serde(with = "humantime_serde")]
    pub max_jitter: Duration,
    #[serde(with = "humantime_serde")]
    pub max_retry_after: Duration,
    /// A delivery held this long without being settled is taken back and requeued.
    /// Must be longer than `timeout`.
    #[serde(with = "humantime_serde")]
    pub visibility_timeout: Duration,
    /// Networks deliveries and validation requests may reach even though they are
    /// loopback, private, link-local …, comma-separated: `127.0.0.1/32,10.1.0.0/16`.
    pub allowed_networks: String,
}

/// The namespace-topic delivery profile (behaviour.md#namespace-topics), for topics that
/// choose it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NamespaceSection {
    /// Delays after each failed attempt; the first attempt is always immediate.
    pub retry_schedule: String,
    /// Statuses and outcomes that are not retried.
    pub not_retried: String,
    /// Least delay before retrying after a status (`*` = any other status).
    pub retry_minimums: String,
}

impl Default for NamespaceSection {
    fn default() -> Self {
        Self {
            retry_schedule: "10s,30s,1m,5m".into(),
            not_retried: "400,401,403,404,414,TimedOut,SocketError,Canceled".into(),
            retry_minimums: String::new(),
        }
    }
}

/// The endpoint validation handshake (behaviour.md#protecting-endpoints-and-the-system).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValidationSection {
    /// Off only for deployments whose endpoints are all trusted.
    pub enabled: bool,
    /// How long the endpoint has to answer the handshake request.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// How long a manual `GET` on the validation URL is accepted.
    #[serde(with = "humantime_serde")]
    pub manual_window: Duration,
}

impl Default for ValidationSection {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout: Duration::from_secs(30),
            manual_window: Duration::from_secs(300),
        }
    }
}

/// Delayed delivery to failing endpoints
/// (behaviour.md#protecting-endpoints-and-the-system).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProbationSection {
    pub enabled: bool,
    /// Consecutive failed attempts to one endpoint before it goes on probation.
    pub failure_threshold: u32,
    /// First probation length per outcome, e.g. `NotFound=5m,Busy=10s,*=10s`; empty
    /// keeps the table of behaviour.md#protecting-endpoints-and-the-system.
    pub lengths: String,
    /// Each further probation is this many times longer (1 = no growth).
    pub growth: u32,
    /// Longest one probation lasts, however long failures continue.
    #[serde(with = "humantime_serde")]
    pub max: Duration,
}

impl Default for ProbationSection {
    fn default() -> Self {
        Self {
            enabled: true,
            failure_threshold: 10,
            lengths: String::new(),
            growth: 2,
            max: Duration::from_secs(3600),
        }
    }
}

impl Default for DeliverySection {
    fn default() -> Self {
        Self {
            retry_schedule: None,
            timeout: Duration::from_secs(30),
            not_retried: "400,401,403,413".into(),
            retry_minimums: "408=2m,503=30s,*=10s".into(),
            max_jitter: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(600),
            visibility_timeout: Duration::from_secs(90),
            allowed_networks: String::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SenderSection {
    /// Ops endpoints (`/healthz`, `/readyz`, `/metrics`).
    pub listen: String,
    /// Attempts in flight at once in this process.
    pub concurrency: usize,
    /// How much of a response body is read (the rest is discarded).
    pub max_response_bytes: usize,
    /// How long an attempt that timed out is still listened to: a late success cancels
    /// its queued retry (behaviour.md#retry-schedule-and-policy). Zero turns this off.
    #[serde(with = "humantime_serde")]
    pub late_success_window: Duration,
    /// Most timed-out attempts listened to at once.
    pub max_late_listeners: usize,
}

impl Default for SenderSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9091".into(),
            concurrency: 64,
            max_response_bytes: 64 * 1024,
            late_success_window: Duration::from_secs(180),
            max_late_listeners: 256,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerSection {
    pub listen: String,
    /// Longest a scheduler sleeps between looks for due retries: it wakes for the earliest
    /// one left, so this bounds only how late it notices a retry written since its last look.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Most retries moved per partition per script call.
    pub batch: usize,
    /// How often abandoned deliveries are looked for.
    #[serde(with = "humantime_serde")]
    pub reclaim_interval: Duration,
}

impl Default for SchedulerSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9092".into(),
            interval: Duration::from_millis(200),
            batch: 500,
            reclaim_interval: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeadLetterSection {
    pub listen: String,
    /// Root of the dead-letter directory destination.
    pub dir: PathBuf,
    /// How long a record waits before it is written (records written together share files).
    #[serde(with = "humantime_serde")]
    pub delay: Duration,
    /// How long to keep trying an unavailable destination before dropping the record.
    #[serde(with = "humantime_serde")]
    pub give_up_after: Duration,
    /// How long before a record whose write failed is tried again.
    #[serde(with = "humantime_serde")]
    pub retry_interval: Duration,
    /// How often to look for records to write.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Most records read at once.
    pub batch: usize,
    /// Most dead-letter records kept in Redis per subscription for listing and redrive
    /// (the oldest go first; the files are not affected). 0 keeps none.
    pub archive_max: u64,
    /// The topic on which eg announces every dead-letter object it writes, as a
    /// `Microsoft.Storage.BlobCreated` event; eg-deadletter creates it (Event Grid
    /// schema) when missing. Empty: no announcements.
    pub notify_topic: String,
}

impl DeadLetterSection {
    /// The notify topic's name, `None` when announcements are off.
    pub fn notify_topic_name(&self) -> Result<Option<eg_core::TopicName>, String> {
        let name = self.notify_topic.trim();
        if name.is_empty() {
            return Ok(None);
        }
        eg_core::TopicName::parse(name)
            .map(Some)
            .map_err(|e| format!("deadletter.notify_topic: {:?} is not a topic name: {}", name, e.problem))
    }
}

impl Default for DeadLetterSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9093".into(),
            dir: PathBuf::from("deadletters"),
            delay: Duration::from_secs(300),
            give_up_after: Duration::from_secs(4 * 3600),
            retry_interval: Duration::from_secs(30),
            interval: Duration::from_secs(1),
            batch: 500,
            archive_max: 100_000,
            notify_topic: String::new(),
        }
    }
}

/// Delivery history (`GET …/events/{id}/history`): bounded by time and by count, so
/// Redis memory stays bounded whatever the traffic.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistorySection {
    /// How long an event's history is kept after its last step; 0s keeps none.
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// Most events whose history is kept (the least recently active go first).
    pub max_events: u64,
    /// Most steps kept per event (the latest).
    pub max_steps_per_event: u32,
}

impl Default for HistorySection {
    fn default() -> Self {
        Self {
            retention: Duration::from_secs(24 * 3600),
            max_events: 100_000,
            max_steps_per_event: 20,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogSection {
    /// How often tiers check the catalog for changes.
    #[serde(with = "humantime_serde")]
    pub refresh_interval: Duration,
}

impl Default for CatalogSection {
    fn default() -> Self {
        Self {
            refresh_interval: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownSection {
    /// After SIGTERM, how long a process may finish the work in hand before it exits
    /// anyway (what it still holds is then reclaimed after the visibility timeout).
    /// Keep it above `delivery.timeout` so senders can settle attempts in flight.
    #[serde(with = "humantime_serde")]
    pub grace: Duration,
}

impl Default for ShutdownSection {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(40),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSection {
    /// `text` or `json`.
    pub format: String,
    /// A `tracing` filter such as `info` or `eg_sender=debug,info`.
    pub level: String,
}

impl Default for LogSection {
    fn default() -> Self {
        Self {
            format: "text".into(),
            level: "info".into(),
        }
    }
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

    /// The policy of each delivery profile.
    pub fn delivery_policies(&self) -> Result<ProfilePolicies, SettingsError> {
        let custom_topic = self.delivery_policy()?;
        let schedule = RetrySchedule::parse(&self.namespace.retry_schedule)
            .map_err(|e| SettingsError::Invalid(format!("namespace.{e}")))?;
        let outcomes = OutcomePolicy::parse(&self.namespace.not_retried, &self.namespace.retry_minimums)
            .map_err(|e| SettingsError::Invalid(format!("namespace.{e}")))?;
        Ok(ProfilePolicies {
            namespace_topic: DeliveryPolicy {
                schedule,
                outcomes,
                ..custom_topic.clone()
            },
            custom_topic,
        })
    }

    /// The probation policy, or `None` when probation is off.
    pub fn probation_policy(&self) -> Result<Option<ProbationPolicy>, SettingsError> {
        let p = &self.probation;
        if !p.enabled {
            return Ok(None);
        }
        ProbationPolicy::parse(p.failure_threshold, &p.lengths, p.growth, p.max)
            .map(Some)
            .map_err(|e| SettingsError::Invalid(format!("probation.{e}")))
    }

    /// The outbound HTTP client's settings with `timeout` for a whole request.
    pub fn outbound_settings(&self, timeout: Duration) -> Result<OutboundSettings, SettingsError> {
        Ok(OutboundSettings {
            timeout,
            connect_timeout: self.delivery.timeout.min(Duration::from_secs(10)),
            policy: self.address_policy()?,
            user_agent: concat!("eg/", env!("CARGO_PKG_VERSION")).to_owned(),
        })
    }

    /// The addresses deliveries may reach despite being internal.
    pub fn address_policy(&self) -> Result<AddressPolicy, SettingsError> {
        let entries: Vec<&str> = self
            .delivery
            .allowed_networks
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        AddressPolicy::parse(&entries).map_err(|e| SettingsError::Invalid(format!("delivery.allowed_networks: {e}")))
    }

    pub fn delivery_policy(&self) -> Result<DeliveryPolicy, SettingsError> {
        let schedule = match &self.delivery.retry_schedule {
            Some(s) if !s.trim().is_empty() => {
                RetrySchedule::parse(s).map_err(|e| SettingsError::Invalid(format!("delivery.{e}")))?
            }
            _ => RetrySchedule::default(),
        };
        let outcomes = OutcomePolicy::parse(&self.delivery.not_retried, &self.delivery.retry_minimums)
            .map_err(|e| SettingsError::Invalid(format!("delivery.{e}")))?;
        Ok(DeliveryPolicy {
            schedule,
            outcomes,
            max_jitter: self.delivery.max_jitter,
            max_retry_after: self.delivery.max_retry_after,
        })
    }

    /// What each partition keeps of history and dead-letter archive: the configured
    /// totals shared evenly by the partitions (rounded up).
    pub fn retention(&self) -> Retention {
        let partitions = u64::from(self.redis.partitions.max(1));
        Retention {
            history_for: self.history.retention,
            histories_per_partition: self.history.max_events.div_ceil(partitions),
            steps_per_history: self.history.max_steps_per_event.max(1),
            archived_per_partition: self.deadletter.archive_max.div_ceil(partitions),
        }
    }

    pub fn redis_settings(&self) -> RedisSettings {
        RedisSettings {
            url: self.redis.url.clone(),
            cluster_nodes: self.redis.cluster_nodes(),
            sentinel: (!self.redis.sentinel_nodes().is_empty()).then(|| eg_store::SentinelSettings {
                nodes: self.redis.sentinel_nodes(),
                master_name: self.redis.sentinel_master.trim().to_owned(),
                credentials: eg_store::Credentials {
                    username: non_empty(&self.redis.sentinel_username),
                    password: non_empty(self.redis.sentinel_password.expose()),
                },
            }),
            credentials: eg_store::Credentials {
                username: non_empty(&self.redis.username),
                password: non_empty(self.redis.password.expose()),
            },
            tls: eg_store::TlsFiles {
                ca_file: non_empty(&self.redis.tls_ca_file).map(PathBuf::from),
                cert_file: non_empty(&self.redis.tls_cert_file).map(PathBuf::from),
                key_file: non_empty(&self.redis.tls_key_file).map(PathBuf::from),
            },
            prefix: self.redis.prefix.clone(),
            partitions: self.redis.partitions,
            pool_size: self.redis.pool_size,
            command_timeout: self.redis.command_timeout,
            connect_timeout: self.redis.connect_timeout,
            replica_acks: self.redis.replica_acks,
            replica_ack_timeout: self.redis.replica_ack_timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
