//! Every destination this sender delivers to, behind the one [`Destination`] the steps
//! use: a batch goes to the kind of its subscription's target — the HTTP webhook, an
//! Azure storage queue, a RabbitMQ exchange, a NATS JetStream subject, a Kafka topic, an
//! Amazon SQS queue or an Azure event hub (through its Kafka endpoint) — and that kind is handed its own typed target (`eg_core::destination`). Each
//! kind is a module of its own, built from the settings; the `destinations!` list below
//! is the one registration.

mod batch_events;
mod broker_message;
mod connections;
mod event_hub;
mod kafka;
mod nats;
mod rabbitmq;
mod sqs;
mod storage_queue;
mod told;
mod webhook;

use crate::destination::{Destination, RenderedBatch, Sent};
use eg_core::destination::Target;
use eg_runtime::settings::Settings;
use std::future::Future;
use std::time::Duration;

/// One destination kind as the sender runs it: its clients, built from the settings
/// (connecting to nothing yet), and how a batch reaches one of its targets.
pub trait Kind: Sized + Send + Sync + 'static {
    /// Its target, as eg-core reads it from a subscription.
    type Target;

    /// Its clients for eg's configuration; an error names the setting that is wrong.
    fn from_settings(settings: &Settings) -> anyhow::Result<Self>;

    /// Sends `batch` to `target` and reports the outcome. With `late_window`, an attempt
    /// that times out goes on being listened to for that long ([`Sent::late`]).
    fn send(
        &self,
        target: &Self::Target,
        batch: RenderedBatch<'_>,
        late_window: Option<Duration>,
    ) -> impl Future<Output = Sent> + Send;
}

/// Declares [`Destinations`] from one line per kind: its [`Target`] variant, the field
/// holding its clients, and its type.
macro_rules! destinations {
    ($($variant:ident => $field:ident: $kind:ty,)+) => {
        /// The destinations of one sender process, each with its shared client or
        /// connections.
        pub struct Destinations {
            $($field: $kind,)+
        }

        impl Destinations {
            /// Every kind's clients for eg's configuration.
            pub fn from_settings(settings: &Settings) -> anyhow::Result<Self> {
                Ok(Self {
                    $($field: <$kind as Kind>::from_settings(settings)?,)+
                })
            }
        }

        $(
            #[cfg(test)]
            impl $kind {
                /// Sends `batch` to its own target, as the router would.
                pub async fn send_own(&self, batch: RenderedBatch<'_>, late_window: Option<Duration>) -> Sent {
                    let Target::$variant(target) = batch.target else {
                        panic!("a batch for another kind of destination");
                    };
                    self.send(target, batch, late_window).await
                }
            }
        )+

        impl Destination for Destinations {
            async fn send(&self, batch: RenderedBatch<'_>, late_window: Option<Duration>) -> Sent {
                match batch.target {
                    $(Target::$variant(target) => self.$field.send(target, batch, late_window).await,)+
                }
            }
        }
    };
}

destinations! {
    WebHook => webhook: webhook::Webhook,
    StorageQueue => storage_queue: storage_queue::StorageQueues,
    RabbitMq => rabbitmq: rabbitmq::RabbitMq,
    NatsJetStream => nats: nats::Nats,
    Kafka => kafka: kafka::KafkaProducers,
    AmazonSqs => sqs: sqs::Sqs,
    EventHub => event_hubs: event_hub::EventHubs,
}

impl Destinations {
    /// The webhooks' token cache's health, for `crate::identities` to report.
    pub fn token_watch(&self) -> eg_runtime::bearer::TokenWatch {
        self.webhook.token_watch()
    }
}

#[cfg(test)]
mod tests {
    use super::nats::Nats;
    use super::rabbitmq::RabbitMq;
    use super::storage_queue::tests::{batch, queue_service, queue_subscription, queues_at, subscription_with};
    use super::webhook::Webhook;
    use super::*;
    use eg_core::{AttemptOutcome, OutcomeName};
    use eg_outbound::OutboundSettings;
    use serde_json::json;

    fn destinations(queue_endpoint: &str) -> Destinations {
        Destinations {
            webhook: Webhook::new(
                eg_outbound::Clients::new(OutboundSettings::default(), &[]).unwrap(),
                Duration::from_secs(5),
                1024,
                eg_runtime::bearer::Bearer::from_settings(&Default::default()).unwrap(),
            ),
            storage_queue: queues_at(queue_endpoint),
            rabbitmq: RabbitMq::new(&Default::default(), Duration::from_secs(5)),
            nats: Nats::new(&Default::default(), Duration::from_secs(5)),
            kafka: super::kafka::KafkaProducers::new(&Default::default(), Duration::from_secs(5)),
            sqs: super::sqs::Sqs::new(&Default::default(), Duration::from_secs(5)).unwrap(),
            event_hubs: super::event_hub::EventHubs::new(&Default::default(), Duration::from_secs(5)),
        }
    }

    #[tokio::test]
    async fn a_batch_goes_where_its_subscription_says() {
        let (endpoint, request) = queue_service("HTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n").await;
        let router = destinations(&endpoint);
        let queue = queue_subscription();
        assert_eq!(router.send(batch(&queue), None).await.outcome, AttemptOutcome::Stored);
        let (head, _) = request.await.unwrap();
        assert!(head.starts_with("POST /devstoreaccount1/orders/messages"), "{head}");

        // The default address policy refuses loopback: the webhook client was asked.
        let webhook = subscription_with(json!({"endpointType": "WebHook",
            "properties": {"endpointUrl": "http://127.0.0.1:9/hook"}}));
        assert_eq!(
            router.send(batch(&webhook), None).await.outcome,
            AttemptOutcome::AddressNotAllowed
        );

        let rabbitmq = subscription_with(json!({"endpointType": "RabbitMQ", "properties": {
            "connection": "main", "exchange": "events", "routingKey": "orders"}}));
        let nats = subscription_with(json!({"endpointType": "NatsJetStream", "properties": {
            "connection": "main", "subject": "events.orders"}}));
        let kafka = subscription_with(json!({"endpointType": "Kafka", "properties": {
            "connection": "main", "topic": "orders"}}));
        let event_hub = subscription_with(json!({"endpointType": "EventHub", "properties": {
            "resourceId": "/subscriptions/0/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/main-ns/eventhubs/orders"}}));
        // Each reached its own destination, which has no connection of that name here.
        for broker in [rabbitmq, nats, kafka, event_hub] {
            assert_eq!(
                router.send(batch(&broker), None).await.outcome,
                AttemptOutcome::Refused {
                    outcome: OutcomeName::NotFound,
                    as_status: 404
                }
            );
        }
    }
}
