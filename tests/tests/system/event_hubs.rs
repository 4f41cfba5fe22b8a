//! Event Grid's `EventHub` subscriptions end to end: the subscription JSON Event Grid's
//! own documentation gives, unchanged, delivers to the namespace's Kafka endpoint as eg's
//! configuration describes it (SASL PLAIN over TLS with the namespace's connection
//! string). The endpoint is tansu behind a TLS front and a SASL PLAIN front
//! (`eg_testkit::kafka_sasl_front`), which really checks the user and password.

use eg_system_tests::{DEADLINE, Options, System, assert_subscription_refused, event};
use eg_testkit::Tansu;
use eg_testkit::tls::TestCa;
use serde_json::{Value, json};

/// A namespace connection string as the portal shows one (the key is made up).
const CONNECTION_STRING: &str = "Endpoint=sb://contoso-events.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=c3lzdGVtLXRlc3Qta2V5";

const HUB: &str = "/subscriptions/5f4b2a6e-0000-4000-8000-000000000000/resourceGroups/events-rg/providers/Microsoft.EventHub/namespaces/contoso-events/eventhubs/orders";

/// eg configured with the namespace `contoso-events`, whose Kafka endpoint is `tansu`.
fn options(tansu: &Tansu, ca: &TestCa) -> Options {
    let setting = |key: &str| format!("EG__BROKERS__EVENT_HUBS__CONTOSO_EVENTS__{key}");
    Options::default()
        .env(&setting("CONNECTION_STRING"), CONNECTION_STRING)
        .env(&setting("KAFKA_ENDPOINT"), &tansu.bootstrap_servers())
        .env(&setting("CA_FILE"), &ca.ca.display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_grid_eventhub_subscription_json_delivers_through_the_kafka_endpoint() {
    let certificates = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(certificates.path(), "event-hubs");
    let tansu = Tansu::start_sasl_plain(&ca, "$ConnectionString", CONNECTION_STRING);
    tansu.create_topic("orders", 2);
    let system = System::start(options(&tansu, &ca)).await;
    system.create_topic("shop").await;
    // As Event Grid's documentation writes it, with a partition key from the subject.
    let body = json!({"properties": {
        "destination": {"endpointType": "EventHub", "properties": {
            "resourceId": HUB,
            "deliveryAttributeMappings": [{"name": "PartitionKey", "type": "Dynamic",
                "properties": {"sourceField": "subject"}}]}},
        "eventDeliverySchema": "EventGridSchema"}});
    let created = system.create_subscription("shop", "hub", body).await;
    assert_eq!(
        created["properties"]["destination"]["properties"]["resourceId"], HUB,
        "shown back as written: {created}"
    );

    let events: Vec<Value> = (0..4)
        .map(|n| {
            event(
                &format!("ev-{n}"),
                "Order.Created",
                &format!("/o/{}", n % 2),
                json!({"n": n}),
            )
        })
        .collect();
    system.publish_ok("shop", &Value::Array(events)).await;
    let records = tokio::task::block_in_place(|| tansu.read("orders", 4, DEADLINE));
    assert_eq!(records.len(), 4, "{records:?}");
    for record in &records {
        let event: Value = serde_json::from_slice(&record.value).unwrap();
        assert_eq!(
            record.key_text().as_deref(),
            event["subject"].as_str(),
            "keyed by PartitionKey"
        );
        assert_eq!(record.header("aeg-output-event-id").as_deref(), event["id"].as_str());
        assert_eq!(record.header("aeg-subscription-name").as_deref(), Some("HUB"));
        assert_eq!(record.header("aeg-event-type").as_deref(), Some("Notification"));
    }
    let (signed_in, refused) = tansu.sign_ins();
    assert!(signed_in >= 1 && refused == 0, "({signed_in}, {refused})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eventhub_subscription_to_an_unconfigured_namespace_is_refused_naming_the_setting() {
    let system = System::start(Options::default()).await;
    system.create_topic("shop").await;
    let body = json!({"properties": {"destination": {"endpointType": "EventHub",
        "properties": {"resourceId": HUB}}}});
    let message = assert_subscription_refused(
        &system,
        "shop",
        "hub",
        &body,
        "properties.destination.properties.resourceId",
    )
    .await;
    assert!(
        message.contains("EG__BROKERS__EVENT_HUBS__CONTOSO_EVENTS__CONNECTION_STRING"),
        "{message}"
    );
    let body = json!({"properties": {"destination": {"endpointType": "EventHub",
        "properties": {"resourceId": HUB.replace("/eventhubs/orders", "")}}}});
    assert_subscription_refused(
        &system,
        "shop",
        "hub",
        &body,
        "properties.destination.properties.resourceId",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eventhub_subscription_is_refused_while_an_older_sender_runs() {
    let certificates = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(certificates.path(), "event-hubs");
    let tansu = Tansu::start_sasl_plain(&ca, "$ConnectionString", CONNECTION_STRING);
    let system = System::start(options(&tansu, &ca)).await;
    system.create_topic("shop").await;
    let store = system.store();
    let now = eg_core::UnixMillis(chrono::Utc::now().timestamp_millis());
    let older = eg_store::heartbeat::LiveCopy {
        tier: "eg-sender".into(),
        instance: "sender-old-1".into(),
        version: "0.0.9".into(),
        started_at: now,
        last_seen: now,
        capabilities: Vec::new(),
    };
    store.beat(&older).await.unwrap();
    let body = json!({"properties": {"destination": {"endpointType": "EventHub",
        "properties": {"resourceId": HUB}}}});
    let (status, answer) = system.put_subscription("shop", "hub", &body).await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "eg-sender sender-old-1 (version 0.0.9) cannot do this destination kind (new in this release)"
        ),
        "{message}"
    );
    store.leave("eg-sender", "sender-old-1").await.unwrap();
    let (status, answer) = system.put_subscription("shop", "hub", &body).await;
    assert!(status.is_success(), "{answer}");
}
