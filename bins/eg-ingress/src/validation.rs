//! Endpoint validation (behaviour.md#protecting-endpoints-and-the-system): before a webhook
//! subscription delivers anything its endpoint proves it consents. Event Grid and custom
//! delivery schemas get the `SubscriptionValidationEvent` (answered synchronously with the
//! code, or later by a `GET` on the validation URL); CloudEvents delivery gets the
//! CloudEvents abuse-protection `OPTIONS` handshake. The handshake goes through the same
//! guarded client as deliveries, so it cannot be pointed at internal addresses either.

use crate::errors::Refusal;
use eg_core::destination::Target;
use eg_core::identity::AccessToken;
use eg_core::validation::{Provisioning, Unconsented, awaiting_reason, validation_event};
use eg_core::{AttemptOutcome, DeliverySchema, Subscription, Topic, UnixMillis};
use eg_outbound::{Client, Clients, Handshake, cloudevents_handshake_with_token, event_grid_handshake_with_token};
use eg_runtime::Settings;
use eg_runtime::bearer::Bearer;
use std::time::Duration;

const MAX_RESPONSE_BYTES: usize = 64 * 1024;

pub struct Validator {
    /// The plain client and one per configured client certificate: the handshake
    /// presents the certificate deliveries will.
    clients: Clients,
    enabled: bool,
    /// How long the endpoint has to answer the handshake (named in reasons).
    timeout: Duration,
    manual_window: Duration,
    /// Base of validation URLs.
    public_url: String,
    /// `WebHook-Request-Origin` of the CloudEvents handshake: this deployment's host.
    origin: String,
    /// Tokens for webhooks behind an identity provider: their handshake carries one too.
    bearer: Bearer,
}

impl Validator {
    pub fn new(settings: &Settings, public_url: &str) -> anyhow::Result<Self> {
        let clients = settings.outbound_clients(settings.validation.timeout)?;
        let origin = url::Url::parse(public_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| "eg".to_owned());
        if !settings.validation.enabled {
            tracing::warn!("endpoint validation is off: subscriptions deliver without their endpoint's consent");
        }
        Ok(Self {
            clients,
            enabled: settings.validation.enabled,
            timeout: settings.validation.timeout,
            manual_window: settings.validation.manual_window,
            public_url: public_url.trim_end_matches('/').to_owned(),
            origin,
            bearer: Bearer::from_settings(settings)?,
        })
    }

    /// Its identities and their tokens (the status page counts who uses an identity).
    pub fn bearer(&self) -> &Bearer {
        &self.bearer
    }

    /// The provisioning `subscription` starts with, replacing `previous` (if any): a
    /// validated subscription keeps its consent while its endpoint and delivery schema
    /// stay the same; anything else (new, moved, or still not validated) gets the
    /// handshake again. A refused or unreachable CloudEvents endpoint, or a forbidden
    /// address, refuses the request.
    pub async fn provision(
        &self,
        topic: &Topic,
        subscription: &Subscription,
        previous: Option<&Subscription>,
        now: UnixMillis,
    ) -> Result<Provisioning, Refusal> {
        if let Some(previous) = previous
            && previous.webhook_url() == subscription.webhook_url()
            && previous.delivery_schema == subscription.delivery_schema
            && previous.provisioning.is_active()
        {
            return Ok(Provisioning::Succeeded);
        }
        self.validate(topic, subscription, now).await
    }

    /// Runs the handshake for `subscription` as it stands (with validation off it is
    /// `Succeeded` without one).
    pub async fn validate(
        &self,
        topic: &Topic,
        subscription: &Subscription,
        now: UnixMillis,
    ) -> Result<Provisioning, Refusal> {
        // Only a webhook is asked: a queue or broker connection is the operator's.
        let Some(url) = subscription.webhook_url().filter(|_| self.enabled) else {
            return Ok(Provisioning::Succeeded);
        };
        let token = self.token(subscription).await?;
        let client = self.client_for(subscription)?;
        match subscription.delivery_schema {
            DeliverySchema::CloudEventSchemaV1_0 => {
                match cloudevents_handshake_with_token(client, url, &self.origin, None, token.as_ref()).await {
                    Handshake::Accepted { .. } => Ok(Provisioning::Succeeded),
                    other => Err(failed(other)),
                }
            }
            DeliverySchema::EventGridSchema | DeliverySchema::CustomInputSchema => {
                self.event_grid(client, topic, subscription, url, token.as_ref(), now)
                    .await
            }
        }
    }

    /// The client presenting the subscription's client certificate, if it names one (the
    /// management API checked the name against this ingress's settings already).
    fn client_for(&self, subscription: &Subscription) -> Result<&Client, Refusal> {
        let certificate = match subscription.target() {
            Some(Target::WebHook(hook)) => hook.client_certificate.as_deref(),
            _ => None,
        };
        self.clients.presenting(certificate).ok_or_else(|| {
            Refusal::bad_request(format!(
                "properties.destination.properties.clientCertificate: eg-ingress has no client certificate {:?}",
                certificate.unwrap_or_default()
            ))
        })
    }

    /// The Event Grid handshake: `Succeeded` on consent; otherwise awaiting a `GET` on
    /// the validation URL (or a handshake run again), with what happened in words.
    async fn event_grid(
        &self,
        client: &Client,
        topic: &Topic,
        subscription: &Subscription,
        url: &str,
        token: Option<&AccessToken>,
        now: UnixMillis,
    ) -> Result<Provisioning, Refusal> {
        let code = uuid::Uuid::new_v4().to_string();
        let validation_url = format!(
            "{}/validation/topics/{}/eventSubscriptions/{}?code={code}",
            self.public_url, subscription.topic, subscription.name
        );
        let id = uuid::Uuid::new_v4().to_string();
        let body = validation_event(&id, &topic.id(), &code, &validation_url, now).to_string();
        let handshake = event_grid_handshake_with_token(client, url, body, &code, MAX_RESPONSE_BYTES, token).await;
        let timed_out;
        let why = match &handshake {
            Handshake::Accepted { .. } => return Ok(Provisioning::Succeeded),
            Handshake::AddressNotAllowed(blocked) => return Err(address_refused(&blocked.to_string())),
            Handshake::Refused { reason } => Unconsented::Refused(reason),
            Handshake::Unreachable {
                cause,
                connected: true,
                outcome: AttemptOutcome::TimedOut,
            } => {
                timed_out = format!("{cause} ({} allowed)", seconds(self.timeout));
                Unconsented::NoAnswer(&timed_out)
            }
            Handshake::Unreachable {
                cause, connected: true, ..
            } => Unconsented::NoAnswer(cause),
            Handshake::Unreachable { cause, .. } => Unconsented::NotReached(cause),
        };
        let deadline = now.plus(self.manual_window);
        let reason = awaiting_reason(&subscription.topic, &subscription.name, why, deadline);
        tracing::info!(topic = %subscription.topic, subscription = %subscription.name, %reason, "endpoint not validated; awaiting its consent");
        Ok(Provisioning::AwaitingManualAction { code, deadline, reason })
    }
}

impl Validator {
    /// The bearer token the handshake carries, for a webhook that asks for one. No token
    /// refuses the request: the endpoint would refuse the handshake, and the operator
    /// must fix the identity first.
    async fn token(&self, subscription: &Subscription) -> Result<Option<AccessToken>, Refusal> {
        let Some(Target::WebHook(hook)) = subscription.target() else {
            return Ok(None);
        };
        let Some(auth) = &hook.auth else {
            return Ok(None);
        };
        match self.bearer.grant(auth, self.timeout).await {
            Ok(granted) => Ok(Some(granted.token)),
            Err(e) => Err(Refusal::bad_request(format!(
                "properties.destination.properties.deliveryIdentity: no token for the validation handshake: {e}"
            ))),
        }
    }
}

/// `30 s`, `1.5 s`: a duration as a person reads it.
fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

fn failed(handshake: Handshake) -> Refusal {
    match handshake {
        Handshake::AddressNotAllowed(blocked) => address_refused(&blocked.to_string()),
        Handshake::Refused { reason } => Refusal::bad_request(format!(
            "properties.destination.properties.endpointUrl: the CloudEvents validation handshake failed: {reason}"
        )),
        Handshake::Unreachable { cause, .. } => Refusal::bad_request(format!(
            "properties.destination.properties.endpointUrl: the CloudEvents validation handshake failed: the endpoint could not be reached: {cause}"
        )),
        Handshake::Accepted { .. } => Refusal::bad_request("unexpected handshake result"),
    }
}

fn address_refused(why: &str) -> Refusal {
    Refusal::bad_request(format!(
        "properties.destination.properties.endpointUrl: {why}; deliveries to it are refused unless delivery.allowed_networks covers it"
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use eg_core::{SubscriptionName, TopicName};
    use serde_json::json;

    fn waiting_subscription() -> (Topic, Subscription) {
        let topic = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        // An address nothing may reach: a handshake, were one made, could not succeed.
        let body = json!({"properties": {"destination": {"endpointType": "WebHook",
            "properties": {"endpointUrl": "http://192.0.2.1/hook"}}}});
        let mut sub =
            Subscription::from_resource(&topic, SubscriptionName::parse("audit").unwrap(), &body, UnixMillis(0))
                .unwrap();
        sub.provisioning = Provisioning::AwaitingManualAction {
            code: "c".into(),
            deadline: UnixMillis(1_000),
            reason: "the endpoint answered 200 OK with an empty body".into(),
        };
        (topic, sub)
    }

    /// A trusted setup that turned validation off gets a waiting subscription going by
    /// running validate (no handshake, no request).
    #[tokio::test]
    async fn with_validation_off_validate_makes_a_waiting_subscription_succeeded() {
        let mut settings = Settings::default();
        settings.validation.enabled = false;
        let validator = Validator::new(&settings, "http://eg.example").unwrap();
        let (topic, sub) = waiting_subscription();
        let validated = validator.validate(&topic, &sub, UnixMillis(0)).await;
        assert!(matches!(validated, Ok(Provisioning::Succeeded)));
        let written = validator.provision(&topic, &sub, Some(&sub), UnixMillis(0)).await;
        assert!(matches!(written, Ok(Provisioning::Succeeded)));
    }
}
