//! Event subscriptions (spec §2) as validated types: where a topic's matching events
//! go, which of them, with what headers, and when their delivery stops.
//!
//! A subscription value can only exist valid ("parse, don't validate"): `resource`
//! reads it from Event Grid's resource layout (so existing Event Grid JSON reads
//! naturally), checking every range of §2 and naming the field of each refusal, and
//! writes it back; `namespace` does the same for Event Grid's namespace subscription
//! JSON (`deliveryConfiguration`), push or queue. `headers` holds the delivery properties and their rules,
//! `retry_policy` the retry limits.

use crate::api_error::InvalidField;
use crate::filter::EventFilter;
use crate::names::{SubscriptionName, TopicName};
use crate::profile::DeliveryProfile;
use crate::routing::Routing;
use crate::schema::DeliverySchema;
use crate::signing::SigningSecrets;
use crate::time::UnixMillis;
use crate::validation::Provisioning;
use serde::{Deserialize, Serialize};

mod headers;
mod mode;
mod namespace;
mod resource;
mod retry_policy;

pub use headers::{DeliveryHeader, HeaderValueSource, MAX_DELIVERY_HEADERS, MAX_HEADER_VALUE_BYTES};
pub use mode::{DEFAULT_RECEIVE_LOCK, DeliveryMode, MAX_RECEIVE_LOCK, MIN_RECEIVE_LOCK};
pub use retry_policy::{
    CUSTOM_MAX_DELIVERY_ATTEMPTS, CUSTOM_MAX_TTL_MINUTES, NAMESPACE_DEFAULT_TTL, NAMESPACE_MAX_DELIVERY_COUNT,
    NAMESPACE_MAX_TTL, NAMESPACE_MIN_TTL, RetryPolicy,
};

/// An event subscription as stored in the catalog (serde) and matched at publish time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    pub name: SubscriptionName,
    pub topic: TopicName,
    /// The full webhook URL. Its query may hold a secret: shown only by `getFullUrl`.
    pub endpoint_url: String,
    pub filter: EventFilter,
    pub retry_policy: RetryPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterDestination>,
    pub batching: BatchSettings,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivery_headers: Vec<DeliveryHeader>,
    /// Standard Webhooks signing secrets (beyond Event Grid): stored and used to sign, never
    /// returned by the API (only their fingerprints) and never logged.
    #[serde(default, skip_serializing_if = "SigningSecrets::is_empty")]
    pub signing_secrets: SigningSecrets,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_time: Option<UnixMillis>,
    #[serde(default)]
    pub delivery_schema: DeliverySchema,
    /// The topic's delivery profile, copied when the subscription is created.
    #[serde(default)]
    pub profile: DeliveryProfile,
    /// Whether the endpoint has consented (spec §8); only `Succeeded` subscriptions match.
    #[serde(default)]
    pub provisioning: Provisioning,
    /// Paused by an operator: events still match and accumulate (their time-to-live
    /// still counts), but nothing is attempted until it is resumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Pushed to `endpoint_url` (every subscription before pull delivery), or queued for
    /// consumers to pull (namespace topics' queue mode; `endpoint_url` is then empty).
    #[serde(default, skip_serializing_if = "DeliveryMode::is_push")]
    pub delivery_mode: DeliveryMode,
    /// Written in Event Grid's namespace subscription JSON (`deliveryConfiguration`), and
    /// so shown in it; otherwise in the custom-topic JSON (`destination`). Queue mode
    /// exists only in the namespace form.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub namespace_form: bool,
}

impl Subscription {
    /// Whether a published event goes to this subscription.
    pub fn matches(&self, event: &Routing<'_>, now: UnixMillis) -> bool {
        self.provisioning.is_active() && self.expiration_time.is_none_or(|at| now < at) && self.filter.matches(event)
    }
}

/// A local directory destination laid out like an Event Grid blob container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterDestination {
    pub container_name: String,
    /// Event Grid's storage account id (`resourceId`): kept and shown back, not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
}

impl DeadLetterDestination {
    /// Container names follow Azure's rules (3–63 of `[a-z0-9-]`, starting with a letter
    /// or digit, no `--`), which also keeps them from escaping the dead-letter root.
    pub fn new(container_name: &str) -> Result<Self, InvalidField> {
        let field = "containerName";
        let len = container_name.len();
        let valid_chars = container_name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !(3..=63).contains(&len)
            || !valid_chars
            || container_name.starts_with('-')
            || container_name.ends_with('-')
            || container_name.contains("--")
        {
            return Err(InvalidField::new(
                field,
                format!(
                    "{container_name:?} is not a valid container name: 3-63 lower-case letters, digits or single hyphens, starting and ending with a letter or digit"
                ),
            ));
        }
        Ok(Self {
            container_name: container_name.to_owned(),
            resource_id: None,
        })
    }
}

/// How many events one delivery may carry, and how large it should grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchSettings {
    pub max_events_per_batch: u32,
    pub preferred_batch_size_in_kilobytes: u32,
}

impl Default for BatchSettings {
    fn default() -> Self {
        Self {
            max_events_per_batch: 1,
            preferred_batch_size_in_kilobytes: 64,
        }
    }
}

/// Scheme, host, port and path: the URL without its query or fragment, which may hold secrets.
pub fn base_url(full: &str) -> String {
    match url::Url::parse(full) {
        Ok(mut u) => {
            u.set_query(None);
            u.set_fragment(None);
            let _ = u.set_password(None);
            let _ = u.set_username("");
            u.to_string()
        }
        Err(_) => String::new(),
    }
}
