//! Every destination this sender delivers to, behind the one [`Destination`] the steps
//! use: a batch goes where its subscription's `endpoint` says — the HTTP webhook, an
//! Azure storage queue, a RabbitMQ exchange or a NATS JetStream subject. Each kind lives
//! in a module of its own; this router only picks one, so adding a destination is one
//! more arm here.

use crate::destination::{Destination, RenderedBatch, Sent};
use crate::nats::Nats;
use crate::rabbitmq::RabbitMq;
use crate::storage_queue::StorageQueues;
use crate::webhook::Webhook;
use eg_core::subscription::Endpoint;
use std::time::Duration;

/// The destinations of one sender process, each with its shared client or connections.
pub struct Destinations {
    pub webhook: Webhook,
    pub storage_queues: StorageQueues,
    pub rabbitmq: RabbitMq,
    pub nats: Nats,
}

impl Destination for Destinations {
    async fn send(&self, batch: RenderedBatch<'_>, late_window: Option<Duration>) -> Sent {
        match &batch.subscription.endpoint {
            Endpoint::WebHook => self.webhook.send(batch, late_window).await,
            Endpoint::StorageQueue { .. } => self.storage_queues.send(batch, late_window).await,
            Endpoint::RabbitMq { .. } => self.rabbitmq.send(batch, late_window).await,
            Endpoint::NatsJetStream { .. } => self.nats.send(batch, late_window).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage_queue::tests::{batch, queue_service, queue_subscription, queues_at, subscription_with};
    use eg_core::{AttemptOutcome, OutcomeName};
    use eg_outbound::{Client, OutboundSettings};
    use serde_json::json;

    fn destinations(queue_endpoint: &str) -> Destinations {
        Destinations {
            webhook: Webhook::new(
                Client::new(OutboundSettings::default()).unwrap(),
                Duration::from_secs(5),
                1024,
            ),
            storage_queues: queues_at(queue_endpoint),
            rabbitmq: RabbitMq::new(&Default::default(), Duration::from_secs(5)),
            nats: Nats::new(&Default::default(), Duration::from_secs(5)),
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
        // Each reached its own destination, which has no connection named "main" here.
        for broker in [rabbitmq, nats] {
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
