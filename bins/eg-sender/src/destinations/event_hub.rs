//! Event Grid's `EventHub` destination: an event hub is a Kafka topic of its namespace's
//! Kafka endpoint, so delivery is the Kafka destination's ([`KafkaProducers`]) through a
//! connection made from the namespace's settings (SASL PLAIN over TLS, the user
//! `$ConnectionString`, the connection string as password), one producer per namespace.
//! Every guarantee is the Kafka destination's: `acks=all`, an idempotent producer, one
//! event per attempt. The record's key is the subscription's `PartitionKey` delivery
//! property, when it sets one.

use super::Kind;
use super::kafka::KafkaProducers;
use crate::destination::{RenderedBatch, Sent};
use eg_core::destination::EventHub;
use eg_runtime::settings::{EventHubsNamespaceSettings, KafkaConnectionSettings, Settings};
use std::collections::BTreeMap;
use std::time::Duration;

/// Produces to the Event Hubs namespaces of eg's configuration.
pub struct EventHubs {
    producers: KafkaProducers,
}

impl EventHubs {
    /// Produces to `namespaces` (no producer is made before a delivery needs it); an
    /// attempt is bounded by `timeout`.
    pub fn new(namespaces: &BTreeMap<String, EventHubsNamespaceSettings>, timeout: Duration) -> Self {
        // The settings were validated at start-up, so every namespace has a connection.
        let connections: BTreeMap<String, KafkaConnectionSettings> = namespaces
            .iter()
            .filter_map(|(name, namespace)| Some((name.clone(), namespace.kafka_connection()?)))
            .collect();
        Self {
            producers: KafkaProducers::for_event_hubs(&connections, timeout),
        }
    }
}

impl Kind for EventHubs {
    type Target = EventHub;

    fn from_settings(s: &Settings) -> anyhow::Result<Self> {
        Ok(Self::new(&s.brokers.event_hubs, s.delivery.timeout))
    }

    async fn send(&self, target: &EventHub, batch: RenderedBatch<'_>, late_window: Option<Duration>) -> Sent {
        self.producers.send(&target.as_kafka(), batch, late_window).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_subscriptions::{batch_of, subscription_with};
    use eg_core::subscription::Subscription;
    use eg_core::{AttemptOutcome, OutcomeName};
    use eg_runtime::settings::{CONNECTION_STRING_USER, Secret};
    use eg_testkit::tansu::Tansu;
    use eg_testkit::tls::TestCa;
    use serde_json::{Value, json};

    /// A namespace connection string as the portal shows one (the key is made up).
    const CONNECTION_STRING: &str = "Endpoint=sb://contoso-events.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=bm90LWEtcmVhbC1rZXk=";

    const HUB: &str =
        "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/contoso-events/eventhubs/orders";

    /// Event hubs of the namespace `contoso-events`, whose Kafka endpoint is `tansu`'s
    /// TLS port, signing in with `connection_string`.
    fn event_hubs(tansu: &Tansu, ca: &TestCa, connection_string: &str) -> EventHubs {
        let namespace = EventHubsNamespaceSettings {
            connection_string: Secret::new(connection_string),
            kafka_endpoint: tansu.bootstrap_servers(),
            ca_file: ca.ca.display().to_string(),
            message_max_bytes: None,
        };
        EventHubs::new(
            &BTreeMap::from([("contoso_events".to_owned(), namespace)]),
            Duration::from_secs(5),
        )
    }

    /// Event Grid's own `EventHub` subscription JSON, keyed by the event's subject.
    fn to_hub(resource_id: &str) -> Subscription {
        subscription_with(json!({"endpointType": "EventHub", "properties": {
        "resourceId": resource_id,
        "deliveryAttributeMappings": [
            {"name": "PartitionKey", "type": "Dynamic", "properties": {"sourceField": "subject"}},
            {"name": "region", "type": "Static", "properties": {"value": "eu", "isSecret": false}}
        ]}}))
    }

    async fn send(hubs: &EventHubs, subscription: &Subscription, id: &str, subject: &str) -> Sent {
        let body = json!([{"id": id, "subject": subject, "eventType": "order.created", "dataVersion": "1",
            "data": {"n": 1}}])
        .to_string();
        hubs.send_own(batch_of(subscription, &body, Some("1")), None).await
    }

    #[tokio::test]
    async fn an_event_hub_gets_records_through_sasl_plain_over_tls_with_the_connection_string() {
        let certificates = tempfile::tempdir().unwrap();
        let ca = TestCa::generate(certificates.path(), "event-hubs");
        let tansu = Tansu::start_sasl_plain(&ca, CONNECTION_STRING_USER, CONNECTION_STRING);
        tansu.create_topic("orders", 3);
        let hubs = event_hubs(&tansu, &ca, CONNECTION_STRING);
        let subscription = to_hub(HUB);
        for (n, subject) in ["/a", "/b", "/a"].into_iter().enumerate() {
            let sent = send(&hubs, &subscription, &format!("e-{n}"), subject).await;
            assert_eq!(sent.outcome, AttemptOutcome::Stored, "{:?}", sent.error);
        }
        assert!(tansu.sign_ins().0 >= 1, "eg signed in: {:?}", tansu.sign_ins());
        assert_eq!(tansu.sign_ins().1, 0);

        let records = tansu.read("orders", 3, Duration::from_secs(20));
        assert_eq!(records.len(), 3, "{records:?}");
        for record in &records {
            let event: Value = serde_json::from_slice(&record.value).unwrap();
            assert_eq!(
                record.key_text().as_deref(),
                event["subject"].as_str(),
                "the PartitionKey delivery property is the key"
            );
            assert_eq!(record.header("region").as_deref(), Some("eu"));
            assert_eq!(record.header("aeg-subscription-name").as_deref(), Some("BILLING"));
            assert_eq!(record.header("aeg-output-event-id").as_deref(), event["id"].as_str());
        }
        let a: Vec<i32> = records
            .iter()
            .filter(|r| r.key_text().as_deref() == Some("/a"))
            .map(|r| r.partition)
            .collect();
        assert!(a.len() == 2 && a[0] == a[1], "one key, one partition: {a:?}");

        // No PartitionKey property: no key, records spread as Event Grid spreads them.
        let unkeyed = subscription_with(json!({"endpointType": "EventHub", "properties": {"resourceId": HUB}}));
        let sent = send(&hubs, &unkeyed, "e-9", "/c").await;
        assert_eq!(sent.outcome, AttemptOutcome::Stored, "{:?}", sent.error);
        let records = tansu.read("orders", 4, Duration::from_secs(20));
        let nine = records.iter().find(|r| r.value_text().contains("\"e-9\"")).unwrap();
        assert_eq!(nine.key, None);
    }

    #[tokio::test]
    async fn a_refused_connection_string_is_unauthorized_and_a_missing_hub_not_found() {
        let certificates = tempfile::tempdir().unwrap();
        let ca = TestCa::generate(certificates.path(), "event-hubs");
        let tansu = Tansu::start_sasl_plain(&ca, CONNECTION_STRING_USER, CONNECTION_STRING);
        tansu.create_topic("orders", 1);

        let rotated = CONNECTION_STRING.replace("bm90LWEtcmVhbC1rZXk=", "YW4tb2xkLWtleQ==");
        let sent = send(&event_hubs(&tansu, &ca, &rotated), &to_hub(HUB), "e-1", "/a").await;
        assert_eq!(
            sent.outcome,
            AttemptOutcome::Refused {
                outcome: OutcomeName::Unauthorized,
                as_status: 401
            },
            "{:?}",
            sent.error
        );
        let error = sent.error.unwrap_or_default();
        assert!(
            error.contains("Authentication failed"),
            "the broker's own words: {error}"
        );
        assert!(
            !error.contains("YW4tb2xkLWtleQ"),
            "the key is not in the history: {error}"
        );
        assert!(tansu.sign_ins().1 >= 1);

        let hubs = event_hubs(&tansu, &ca, CONNECTION_STRING);
        let missing = send(&hubs, &to_hub(&HUB.replace("/orders", "/invoices")), "e-2", "/a").await;
        assert_eq!(
            missing.outcome,
            AttemptOutcome::Refused {
                outcome: OutcomeName::NotFound,
                as_status: 404
            },
            "{:?}",
            missing.error
        );
        // A namespace eg has no configuration for names the setting that adds it.
        let elsewhere = HUB.replace("contoso-events", "fabrikam-hubs");
        let unknown = send(&hubs, &to_hub(&elsewhere), "e-3", "/a").await;
        let error = unknown.error.unwrap_or_default();
        assert!(
            error.contains("EG__BROKERS__EVENT_HUBS__FABRIKAM_HUBS__CONNECTION_STRING"),
            "{error}"
        );
    }
}
