//! `[redis]`: where the deployment's Redis is (one server, a Cluster or Sentinel), how to
//! reach it (TLS, credentials, timeouts) and how the keyspace is laid out, turned into
//! what eg-store is built with ([`RedisSettings`], [`Retention`]).

use super::storage::Secret;
use super::{Settings, SettingsError};
use eg_store::{RedisSettings, Retention};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

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

    pub(super) fn validate(&self) -> Result<(), SettingsError> {
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

impl Settings {
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
