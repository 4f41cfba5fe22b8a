//! Endpoint validation (spec §8): before a webhook subscription delivers anything its
//! endpoint proves it consents. Event Grid and custom delivery schemas get the
//! `SubscriptionValidationEvent` (answered synchronously with the code, or later by a
//! `GET` on the validation URL); CloudEvents delivery gets the CloudEvents abuse-
//! protection `OPTIONS` handshake. The handshake goes through the same guarded client
//! as deliveries, so it cannot be pointed at internal addresses either.

use crate::errors::Refusal;
use eg_core::validation::{Provisioning, validation_event};
use eg_core::{DeliverySchema, Subscription, Topic, UnixMillis};
use eg_outbound::{Client, Handshake, cloudevents_handshake, event_grid_handshake};
use eg_runtime::Settings;
use std::time::Duration;

const MAX_RESPONSE_BYTES: usize = 64 * 1024;

pub struct Validator {
    client: Client,
    enabled: bool,
    manual_window: Duration,
    /// Base of validation URLs.
    public_url: String,
    /// `WebHook-Request-Origin` of the CloudEvents handshake: this deployment's host.
    origin: String,
}

impl Validator {
    pub fn new(settings: &Settings, public_url: &str) -> anyhow::Result<Self> {
        let client = Client::new(settings.outbound_settings(settings.validation.timeout)?)?;
        let origin = url::Url::parse(public_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| "eg".to_owned());
        if !settings.validation.enabled {
            tracing::warn!("endpoint validation is off: subscriptions deliver without their endpoint's consent");
        }
        Ok(Self {
            client,
            enabled: settings.validation.enabled,
            manual_window: settings.validation.manual_window,
            public_url: public_url.trim_end_matches('/').to_owned(),
            origin,
        })
    }

    /// The provisioning `subscription` starts with, replacing `previous` (if any): the
    /// handshake runs when the endpoint or delivery schema is new. A refused or
    /// unreachable CloudEvents endpoint, or a forbidden address, refuses the request.
    pub async fn provision(
        &self,
        topic: &Topic,
        subscription: &Subscription,
        previous: Option<&Subscription>,
        now: UnixMillis,
    ) -> Result<Provisioning, Refusal> {
        if !self.enabled {
            return Ok(Provisioning::Succeeded);
        }
        if let Some(previous) = previous
            && previous.endpoint_url == subscription.endpoint_url
            && previous.delivery_schema == subscription.delivery_schema
            && (previous.provisioning.is_active()
                || matches!(previous.provisioning, Provisioning::AwaitingManualAction { deadline, .. } if now < deadline))
        {
            return Ok(previous.provisioning.clone());
        }
        let url = &subscription.endpoint_url;
        match subscription.delivery_schema {
            DeliverySchema::CloudEventSchemaV1_0 => {
                match cloudevents_handshake(&self.client, url, &self.origin, None).await {
                    Handshake::Accepted { .. } => Ok(Provisioning::Succeeded),
                    other => Err(failed(other)),
                }
            }
            DeliverySchema::EventGridSchema | DeliverySchema::CustomInputSchema => {
                let code = uuid::Uuid::new_v4().to_string();
                let validation_url = format!(
                    "{}/validation/topics/{}/eventSubscriptions/{}?code={code}",
                    self.public_url, subscription.topic, subscription.name
                );
                let id = uuid::Uuid::new_v4().to_string();
                let body = validation_event(&id, &topic.id(), &code, &validation_url, now).to_string();
                match event_grid_handshake(&self.client, url, body, &code, MAX_RESPONSE_BYTES).await {
                    Handshake::Accepted { .. } => Ok(Provisioning::Succeeded),
                    Handshake::AddressNotAllowed(blocked) => Err(address_refused(&blocked.to_string())),
                    Handshake::Refused { reason } => {
                        tracing::info!(subscription = %subscription.name, %reason, "validation not answered; awaiting a GET on the validation URL");
                        Ok(self.awaiting(code, now))
                    }
                    Handshake::Unreachable(outcome) => {
                        tracing::info!(subscription = %subscription.name, outcome = %outcome.name(), "endpoint unreachable for validation; awaiting a GET on the validation URL");
                        Ok(self.awaiting(code, now))
                    }
                }
            }
        }
    }

    fn awaiting(&self, code: String, now: UnixMillis) -> Provisioning {
        Provisioning::AwaitingManualAction {
            code,
            deadline: now.plus(self.manual_window),
        }
    }
}

fn failed(handshake: Handshake) -> Refusal {
    match handshake {
        Handshake::AddressNotAllowed(blocked) => address_refused(&blocked.to_string()),
        Handshake::Refused { reason } => Refusal::bad_request(format!(
            "properties.destination.properties.endpointUrl: the CloudEvents validation handshake failed: {reason}"
        )),
        Handshake::Unreachable(outcome) => Refusal::bad_request(format!(
            "properties.destination.properties.endpointUrl: the CloudEvents validation handshake failed: the endpoint could not be reached ({})",
            outcome.name()
        )),
        Handshake::Accepted { .. } => Refusal::bad_request("unexpected handshake result"),
    }
}

fn address_refused(why: &str) -> Refusal {
    Refusal::bad_request(format!(
        "properties.destination.properties.endpointUrl: {why}; deliveries to it are refused unless delivery.allowed_networks covers it"
    ))
}
