//! Event subscriptions (behaviour.md#event-subscriptions) as validated types: where a
//! topic's matching events go, which of them, with what headers, and when their delivery
//! stops.
//!
//! A subscription value can only exist valid ("parse, don't validate"): `resource`
//! reads it from Event Grid's resource layout (so existing Event Grid JSON reads
//! naturally), checking every range of behaviour.md#event-subscriptions and naming the
//! field of each refusal, and writes it back; `namespace` does the same for Event Grid's
//! namespace subscription JSON (`deliveryConfiguration`), push or queue. `headers` holds
//! the delivery properties and their rules, `retry_policy` the retry limits.

use crate::api_error::InvalidField;
use crate::destination::Target;
use crate::filter::EventFilter;
use crate::names::{SubscriptionName, TopicName};
use crate::ordering::OrderBy;
use crate::probation::EndpointId;
use crate::profile::DeliveryProfile;
use crate::routing::Routing;
use crate::schema::DeliverySchema;
use crate::signing::SigningSecrets;
use crate::time::UnixMillis;
use crate::topic::Topic;
use crate::validation::Provisioning;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod fields;
mod headers;
mod limits;
mod mode;
mod namespace;
mod resource;
mod retry_policy;
mod stored;

pub use crate::dead_letter_destination::{DeadLetterDestination, DeadLetterStore};
pub use crate::destination::{NamedConnections, S3ConnectionFacts};
pub use headers::{DeliveryHeader, MAX_HEADER_VALUE_BYTES, ResolvedHeaders, resolve_headers};
pub use limits::DeliveryLimits;
pub(crate) use mode::DEFAULT_RECEIVE_LOCK;
pub use mode::{DeliveryMethod, WrittenAs};
pub use retry_policy::{NAMESPACE_DEFAULT_TTL, NAMESPACE_MAX_DELIVERY_COUNT, RetryPolicy};

/// An event subscription as stored in the catalog (serde, in the layout of
/// [`stored::Stored`]) and matched at publish time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "stored::Stored", into = "stored::Stored")]
pub struct Subscription {
    pub name: SubscriptionName,
    pub topic: TopicName,
    pub filter: EventFilter,
    pub retry_policy: RetryPolicy,
    pub dead_letter: Option<DeadLetterDestination>,
    pub batching: BatchSettings,
    pub delivery_headers: Vec<DeliveryHeader>,
    /// Standard Webhooks signing secrets (beyond Event Grid): stored and used to sign, never
    /// returned by the API (only their fingerprints) and never logged.
    pub signing_secrets: SigningSecrets,
    pub expiration_time: Option<UnixMillis>,
    pub delivery_schema: DeliverySchema,
    /// The topic's delivery profile, copied when the subscription is created.
    pub profile: DeliveryProfile,
    /// Whether the endpoint has consented
    /// (behaviour.md#protecting-endpoints-and-the-system); only `Succeeded` subscriptions
    /// match.
    pub provisioning: Provisioning,
    /// Paused by an operator: events still match and accumulate (their time-to-live
    /// still counts), but nothing is attempted until it is resumed.
    pub paused: bool,
    /// Pushed to a destination by the senders, or queued for consumers to pull.
    pub delivery: DeliveryMethod,
    /// `deliveryLimits` (push only): the cap every sender shares; `None` for no limit.
    pub limits: Option<DeliveryLimits>,
    /// Ordered delivery per key (docs/ordered-delivery.md); push mode only.
    pub ordering: Option<OrderBy>,
}

impl Subscription {
    /// Where the senders push this subscription's events; `None` in queue mode.
    pub fn target(&self) -> Option<&Target> {
        match &self.delivery {
            DeliveryMethod::Push { target, .. } => Some(target),
            DeliveryMethod::Queue { .. } => None,
        }
    }

    /// Who its endpoint is to probation; `None` in queue mode (no endpoint).
    pub fn endpoint_id(&self) -> Option<EndpointId> {
        self.target().map(Target::endpoint_id)
    }

    /// The webhook's full URL (its query may hold a secret: shown only by
    /// `getFullUrl`); `None` for any other destination and in queue mode.
    pub fn webhook_url(&self) -> Option<&str> {
        match self.target() {
            Some(Target::WebHook(hook)) => Some(&hook.url),
            _ => None,
        }
    }

    /// Whether the senders deliver it (push), rather than consumers pulling it.
    pub fn is_push(&self) -> bool {
        self.delivery.is_push()
    }

    /// The delivery controls it uses that tiers of earlier releases do not honour: what
    /// every running copy must be able to do before it is written (`capability`).
    pub fn capabilities_needed(&self) -> Vec<crate::capability::Capability> {
        use crate::capability::Capability;
        let hook = match self.target() {
            Some(Target::WebHook(hook)) => Some(hook),
            _ => None,
        };
        [
            (self.limits.is_some(), Capability::RateLimits),
            (self.ordering.is_some(), Capability::OrderedDelivery),
            (hook.is_some_and(|h| h.auth.is_some()), Capability::DeliveryTokens),
            (
                hook.is_some_and(|h| h.client_certificate.is_some()),
                Capability::ClientCertificates,
            ),
            (
                self.target().is_some_and(Target::since_capabilities),
                Capability::NewerDestinationKinds,
            ),
        ]
        .into_iter()
        .filter_map(|(used, capability)| used.then_some(capability))
        .collect()
    }

    /// How long a received event stays locked to its receiver; `None` in push mode.
    pub fn receive_lock(&self) -> Option<std::time::Duration> {
        self.delivery.receive_lock()
    }

    /// Whether it is written in Event Grid's namespace subscription JSON
    /// (`deliveryConfiguration`), and so shown in it.
    pub fn namespace_form(&self) -> bool {
        self.delivery.written_as() == WrittenAs::Namespace
    }

    /// Refuses a subscription naming an account or connection eg has no configuration
    /// for (see [`Target::check_configured`], [`DeadLetterDestination::check_configured`]),
    /// the field named as it was written.
    pub fn check_connections(&self, configured: &impl NamedConnections) -> Result<(), crate::api_error::InvalidField> {
        if let Some(target) = self.target() {
            let destination_at = if self.namespace_form() {
                "properties.deliveryConfiguration.push.destination"
            } else {
                "properties.destination"
            };
            target
                .check_configured(configured)
                .map_err(|e| e.within(destination_at))?;
        }
        let Some(dead_letter) = &self.dead_letter else {
            return Ok(());
        };
        dead_letter
            .check_configured(configured)
            .map_err(|e| e.within(&self.dead_letter_field()))
    }

    /// Where the dead-letter destination is written in the form this subscription was
    /// written in, so a refusal names the field the client sent.
    pub(crate) fn dead_letter_field(&self) -> String {
        if !self.namespace_form() {
            "properties.deadLetterDestination".to_owned()
        } else {
            let mode = if self.is_push() { "push" } else { "queue" };
            format!(
                "properties.deliveryConfiguration.{mode}.deadLetterDestinationWithResourceIdentity.deadLetterDestination"
            )
        }
    }

    /// Reads a `PUT …/eventSubscriptions/{name}` body: the custom-topic JSON
    /// (`properties.destination`, see `resource`), or on a namespace topic Event Grid's
    /// namespace subscription JSON (`properties.deliveryConfiguration`, see
    /// `namespace`). The subscription starts `Succeeded`; whoever runs the validation
    /// handshake replaces `provisioning` with its result before storing it.
    pub fn from_resource(
        topic: &Topic,
        name: SubscriptionName,
        body: &Value,
        now: UnixMillis,
    ) -> Result<Self, InvalidField> {
        let props = fields::object_at(body, "properties")?;
        if namespace::written_as_namespace(props) {
            namespace::read(topic, name, props, now)
        } else {
            resource::read(topic, name, props, now)
        }
    }

    /// The resource as `GET` shows it at `now`, in the form it was written in: the
    /// endpoint's base URL only, no secret header values, signing secrets as
    /// fingerprints only, no validation code.
    pub fn to_resource(&self, now: UnixMillis) -> Value {
        match &self.delivery {
            DeliveryMethod::Push {
                target,
                written_as: WrittenAs::CustomTopic,
            } => resource::show(self, target, now),
            _ => namespace::show(self, now),
        }
    }

    /// Whether a published event goes to this subscription.
    pub fn matches(&self, event: &Routing<'_>, now: UnixMillis) -> bool {
        self.provisioning.is_active() && self.wants(event, now)
    }

    /// Whether this subscription would take a published event once its endpoint has
    /// consented: it has not expired and its filter takes the event. One waiting for
    /// validation misses the events it wants.
    pub fn wants(&self, event: &Routing<'_>, now: UnixMillis) -> bool {
        self.expiration_time.is_none_or(|at| now < at) && self.filter.matches(event)
    }
}

/// How many events one delivery may carry, and how large it should grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchSettings {
    pub max_events_per_batch: u32,
    pub(crate) preferred_batch_size_in_kilobytes: u32,
}

impl BatchSettings {
    /// These settings, with at most `events` events per batch.
    pub fn at_most(self, events: u32) -> Self {
        Self {
            max_events_per_batch: self.max_events_per_batch.min(events),
            ..self
        }
    }

    /// Whether deliveries are sent more than one per request.
    pub fn batches(&self) -> bool {
        self.max_events_per_batch > 1
    }
}

impl Default for BatchSettings {
    fn default() -> Self {
        Self {
            max_events_per_batch: 1,
            preferred_batch_size_in_kilobytes: 64,
        }
    }
}
