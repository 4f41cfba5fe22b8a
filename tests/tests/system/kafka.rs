//! The Kafka destination end to end: subscriptions created through the management API
//! deliver to a real Kafka-protocol broker (tansu, started per test by eg-testkit), read
//! back with a librdkafka consumer. Records with their key and headers, one key's events
//! in one partition in the order an ordered subscription promises, a broker killed and
//! restarted mid-run with nothing lost, a record too large dead-lettered at once, a
//! missing topic retried then dead-lettered, and the management API's refusals.

use eg_system_tests::{
    DEADLINE, Options, System, assert_subscription_refused, dead_letter_to, event, eventually, metric,
};
use eg_testkit::Tansu;
use eg_testkit::tansu::Record;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

const CONNECTION: &str = "EG__BROKERS__KAFKA__STREAM__BOOTSTRAP_SERVERS";

/// A Kafka subscription body to `topic` with `key` (`{"keyFrom": …}`, `{"key": …}` or
/// `{}`) and a `region` delivery property, `extra` merged into its `properties`.
fn kafka_subscription(topic: &str, key: Value, extra: Value) -> Value {
    let mut destination = json!({"connection": "stream", "topic": topic,
    "deliveryAttributeMappings": [
        {"name": "region", "type": "Dynamic", "properties": {"sourceField": "data.region"}}
    ]});
    merge(&mut destination, key);
    let mut properties = json!({"destination": {"endpointType": "Kafka", "properties": destination}});
    merge(&mut properties, extra);
    json!({ "properties": properties })
}

fn merge(target: &mut Value, extra: Value) {
    if let (Some(target), Value::Object(extra)) = (target.as_object_mut(), extra) {
        target.extend(extra);
    }
}

/// Reads `count` records of `topic` (tansu's reader blocks: off the async workers).
fn read(tansu: &Tansu, topic: &str, count: usize) -> Vec<Record> {
    tokio::task::block_in_place(|| tansu.read(topic, count, DEADLINE))
}

fn event_id(record: &Record) -> String {
    let event: Value = serde_json::from_slice(&record.value).unwrap();
    event["id"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_delivers_each_event_as_a_keyed_record_and_keeps_a_keys_order() {
    let tansu = Tansu::start();
    tansu.create_topic("orders", 3);
    let system = System::start(Options::default().env(CONNECTION, &tansu.bootstrap_servers())).await;
    system.create_topic("shop").await;
    let ordered = json!({"orderedDelivery": {"key": "subject"}});
    system
        .create_subscription(
            "shop",
            "audit",
            kafka_subscription("orders", json!({"keyFrom": "subject"}), ordered),
        )
        .await;

    // Three keys, interleaved, in one publish request: its array order is each key's order.
    let subjects = ["/o/1", "/o/2", "/o/3"];
    let events: Vec<Value> = (0..12)
        .map(|n| {
            let region = if n % 2 == 0 { "eu" } else { "us" };
            event(
                &format!("ev-{n:02}"),
                "Order.Updated",
                subjects[n % 3],
                json!({"region": region, "n": n}),
            )
        })
        .collect();
    system.publish_ok("shop", &Value::Array(events.clone())).await;
    let records = read(&tansu, "orders", 12);
    assert_eq!(records.len(), 12, "{records:?}");

    let mut by_key: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for record in &records {
        by_key
            .entry(record.key_text().unwrap_or_default())
            .or_default()
            .push(record);
    }
    assert_eq!(by_key.keys().collect::<Vec<_>>(), subjects, "keyed by subject");
    for (n, subject) in subjects.iter().enumerate() {
        let of_key = &by_key[*subject];
        assert!(
            of_key.iter().all(|r| r.partition == of_key[0].partition),
            "one key, one partition: {of_key:?}"
        );
        let ids: Vec<String> = of_key.iter().map(|r| event_id(r)).collect();
        let published: Vec<String> = (n..12).step_by(3).map(|m| format!("ev-{m:02}")).collect();
        assert_eq!(ids, published, "{subject}: in the order published");
    }
    let first = records.iter().find(|r| event_id(r) == "ev-00").unwrap();
    assert_eq!(first.header("aeg-subscription-name").as_deref(), Some("AUDIT"));
    assert_eq!(first.header("aeg-delivery-count").as_deref(), Some("0"));
    assert_eq!(first.header("region").as_deref(), Some("eu"));
    let value: Value = serde_json::from_slice(&first.value).unwrap();
    assert_eq!(value["data"], events[0]["data"], "the event as rendered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_retries_through_a_broker_outage_and_loses_nothing() {
    let mut tansu = Tansu::start();
    tansu.create_topic("orders", 1);
    let system = System::start(Options::default().env(CONNECTION, &tansu.bootstrap_servers())).await;
    system.create_topic("shop").await;
    system
        .create_subscription("shop", "audit", kafka_subscription("orders", json!({}), json!({})))
        .await;
    system
        .publish_ok("shop", &json!([event("ev-0", "Order.Created", "/o/0", json!({}))]))
        .await;
    assert_eq!(read(&tansu, "orders", 1).len(), 1);

    tansu.kill();
    let during: Vec<Value> = (1..=5)
        .map(|n| event(&format!("ev-{n}"), "Order.Created", "/o/1", json!({})))
        .collect();
    system.publish_ok("shop", &Value::Array(during)).await;
    // The broker stays down until attempts failed: the events are stored by retries.
    eventually(DEADLINE, "an attempt failed while the broker was down", || async {
        let failed = metric(
            &system.sender_metrics().await,
            "DeliveryAttemptFailCount",
            &[("subscription", "audit")],
        );
        (failed >= 1.0).then_some(())
    })
    .await;
    // Memory storage: the restarted broker is empty; its topic is made again.
    tansu.start_again();
    tansu.create_topic("orders", 1);
    let ids: BTreeSet<String> = read(&tansu, "orders", 5).iter().map(event_id).collect();
    let expected: BTreeSet<String> = (1..=5).map(|n| format!("ev-{n}")).collect();
    assert_eq!(ids, expected, "every event published during the outage, none lost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_dead_letters_a_record_too_large_at_once_and_a_missing_topic_after_its_attempts() {
    let tansu = Tansu::start();
    tansu.create_topic("orders", 1);
    let system = System::start(
        Options::default()
            .env(CONNECTION, &tansu.bootstrap_servers())
            .env("EG__BROKERS__KAFKA__STREAM__MESSAGE_MAX_BYTES", "4096"),
    )
    .await;
    system.create_topic("shop").await;
    let extra = json!({
        "retryPolicy": {"maxDeliveryAttempts": 3, "eventTimeToLiveInMinutes": 5},
        "deadLetterDestination": dead_letter_to("dead"),
    });
    system
        .create_subscription("shop", "audit", kafka_subscription("orders", json!({}), extra.clone()))
        .await;
    let big = event("ev-big", "Order.Created", "/o/1", json!({"blob": "x".repeat(8192)}));
    let fits = event("ev-fits", "Order.Created", "/o/2", json!({}));
    system.publish_ok("shop", &json!([big, fits])).await;
    let records = system.wait_dead_letters(1, DEADLINE).await;
    let record = &records[0].record;
    assert_eq!(record["id"], "ev-big");
    assert_eq!(record["deadLetterReason"], "NonRetriableFailure", "{record}");
    assert_eq!(record["lastDeliveryOutcome"], "PayloadTooLarge", "{record}");
    assert_eq!(record["deliveryAttempts"], 1, "not retried: {record}");
    let stored: Vec<String> = read(&tansu, "orders", 2).iter().map(event_id).collect();
    assert_eq!(stored, ["ev-fits"]);

    system
        .create_subscription("shop", "nowhere", kafka_subscription("missing", json!({}), extra))
        .await;
    system
        .publish_ok("shop", &json!([event("ev-lost", "Order.Created", "/o/3", json!({}))]))
        .await;
    let records = system.wait_dead_letters(2, DEADLINE).await;
    let lost = records.iter().find(|r| r.record["id"] == "ev-lost").unwrap();
    let record = &lost.record;
    assert_eq!(record["deadLetterReason"], "MaxDeliveryAttemptsExceeded", "{record}");
    assert_eq!(record["lastDeliveryOutcome"], "NotFound", "{record}");
    assert_eq!(record["deliveryAttempts"], 3, "retried: {record}");
    // The history names the topic, in the client's words.
    let (status, history) = system.get("/topics/shop/events/ev-lost/history").await;
    assert_eq!(status, 200, "{history}");
    let said = history["value"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|step| step["error"].as_str())
        .any(|e| e.contains(r#"topic "missing" does not exist"#));
    assert!(said, "{history}");
}

#[tokio::test]
async fn kafka_subscriptions_name_a_configured_connection_and_take_no_batching() {
    let system = System::start(Options::default().env(CONNECTION, "127.0.0.1:9")).await;
    system.create_topic("shop").await;
    let mut body = kafka_subscription("orders", json!({"keyFrom": "subject"}), json!({}));
    system.create_subscription("shop", "audit", body.clone()).await;
    let (status, shown) = system.get("/topics/shop/eventSubscriptions/audit").await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(
        shown["properties"]["destination"]["properties"]["keyFrom"], "subject",
        "{shown}"
    );

    body["properties"]["destination"]["properties"]["connection"] = json!("billing");
    let message = assert_subscription_refused(
        &system,
        "shop",
        "elsewhere",
        &body,
        "properties.destination.properties.connection",
    )
    .await;
    assert!(
        message.contains("EG__BROKERS__KAFKA__BILLING__BOOTSTRAP_SERVERS"),
        "{message}"
    );

    let mut batched = kafka_subscription("orders", json!({}), json!({}));
    batched["properties"]["destination"]["properties"]["maxEventsPerBatch"] = json!(10);
    assert_subscription_refused(
        &system,
        "shop",
        "batched",
        &batched,
        "properties.destination.properties.maxEventsPerBatch",
    )
    .await;
}
