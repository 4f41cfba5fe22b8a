//! How deliveries are made and retried: `[delivery]` (the custom-topic profile and what
//! every delivery obeys), `[namespace]` (the namespace-topic profile), `[validation]`
//! (the endpoint handshake) and `[probation]`, and the eg-core policies built from them.

use super::{Settings, SettingsError};
use eg_core::address::AddressPolicy;
use eg_core::outcome::OutcomePolicy;
use eg_core::policy::ProfilePolicies;
use eg_core::probation::ProbationPolicy;
use eg_core::{DeliveryPolicy, RetrySchedule};
use eg_outbound::OutboundSettings;
use serde::{Deserialize, Serialize};
use std::time::Duration;

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
    /// A PEM file of CA certificates webhook and validation requests trust besides the
    /// system's (endpoints with certificates of a private CA).
    pub tls_ca_file: String,
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
            tls_ca_file: String::new(),
        }
    }
}

impl Settings {
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
            extra_roots_pem: self.delivery_extra_roots()?,
        })
    }

    /// The outbound clients with `timeout` for a whole request: the plain one and one
    /// per configured client certificate (settings::certificates).
    pub fn outbound_clients(&self, timeout: Duration) -> Result<eg_outbound::Clients, SettingsError> {
        let certificates = super::certificates::load_all(&self.client_certificates)
            .map_err(SettingsError::Invalid)?
            .into_iter()
            .map(|(name, loaded)| {
                eg_outbound::ClientCertificate::from_pem(&name, &loaded.pem)
                    .map_err(|e| SettingsError::Invalid(format!("client_certificates.{name}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        eg_outbound::Clients::new(self.outbound_settings(timeout)?, &certificates)
            .map_err(|e| SettingsError::Invalid(format!("client_certificates: {e}")))
    }

    /// `delivery.tls_ca_file`'s PEM, read when a tier starts (a missing or unreadable
    /// file stops it, naming the setting).
    fn delivery_extra_roots(&self) -> Result<Option<std::sync::Arc<[u8]>>, SettingsError> {
        let path = self.delivery.tls_ca_file.trim();
        if path.is_empty() {
            return Ok(None);
        }
        let pem = std::fs::read(path)
            .map_err(|e| SettingsError::Invalid(format!("delivery.tls_ca_file: cannot read {path:?}: {e}")))?;
        if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(SettingsError::Invalid(format!(
                "delivery.tls_ca_file: {path:?} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
            )));
        }
        Ok(Some(pem.into()))
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
}
