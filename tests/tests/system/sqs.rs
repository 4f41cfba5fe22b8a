//! The Amazon SQS destination end to end, against moto's server (the one the S3 tests
//! start, with signatures checked): subscriptions created through the management API
//! deliver to standard and FIFO queues, read back with the harness's own SQS client
//! (`eg_testkit::sqs`). Attributes, CloudEvents bodies, FIFO ids (the subject, or the
//! ordering key), FIFO deduplication of an event sent twice, an event over the
//! connection's limit dead-lettered at once, a missing queue retried then dead-lettered,
//! wrong credentials, an unknown connection and `maxEventsPerBatch` refused by the
//! management API, and moto killed and started again.

use eg_system_tests::{
    DEADLINE, Options, System, assert_subscription_refused, dead_letter_to, event, eventually, metric,
    wait_subscription_successes,
};
use eg_testkit::S3Server;
use eg_testkit::sqs::{SqsMessage, create_queue, message_count, peek_messages};
use serde_json::{Value, json};
use std::time::Duration;

/// moto, started off the test's runtime (it takes a few seconds).
async fn moto() -> S3Server {
    tokio::task::spawn_blocking(S3Server::start).await.unwrap()
}

/// eg with the SQS connection `local` on `moto`, signing with `secret`; `extra`
/// settings added.
async fn system_on(moto: &S3Server, secret: &str, extra: &[(&str, &str)]) -> System {
    let credentials = moto.credentials();
    let mut options = Options::default()
        .env("EG__BROKERS__SQS__LOCAL__ENDPOINT_URL", &moto.endpoint())
        .env("EG__BROKERS__SQS__LOCAL__REGION", moto.region())
        .env("EG__BROKERS__SQS__LOCAL__ACCESS_KEY_ID", &credentials.access_key_id)
        .env("EG__BROKERS__SQS__LOCAL__SECRET_ACCESS_KEY", secret)
        .env("EG__PROBATION__FAILURE_THRESHOLD", "1000")
        .retry_schedule("1s");
    for (key, value) in extra {
        options = options.env(key, value);
    }
    System::start(options).await
}

fn sqs_subscription(queue_url: &str, extra: Value) -> Value {
    let mut properties = json!({"destination": {"endpointType": "AmazonSQS", "properties": {
    "connection": "local", "queueUrl": queue_url,
    "deliveryAttributeMappings": [
        {"name": "region", "type": "Dynamic", "properties": {"sourceField": "data.region"}}
    ]}}});
    if let (Some(target), Value::Object(extra)) = (properties.as_object_mut(), extra) {
        target.extend(extra);
    }
    json!({ "properties": properties })
}

/// Waits until the queue holds `count` messages and reads them (left on the queue).
async fn wait_messages(moto: &S3Server, queue_url: &str, count: usize) -> Vec<SqsMessage> {
    eventually(DEADLINE, &format!("{count} message(s) in {queue_url}"), || async {
        match peek_messages(moto, queue_url) {
            Ok(messages) => (messages.len() >= count).then_some(messages),
            Err(e) => {
                eprintln!("reading the queue back: {e}");
                None
            }
        }
    })
    .await
}

fn id_of(message: &SqsMessage) -> String {
    let body: Value = serde_json::from_str(&message.body).unwrap();
    body["id"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_delivers_each_event_with_its_attributes_and_fifo_queues_get_group_and_dedup_ids() {
    let moto = moto().await;
    let standard = create_queue(&moto, "orders");
    let fifo = create_queue(&moto, "orders.fifo");
    let regional = create_queue(&moto, "regional.fifo");
    let cloud = create_queue(&moto, "cloud");
    let system = system_on(&moto, &moto.credentials().secret_access_key, &[]).await;
    system.create_topic("shop").await;
    system
        .create_subscription("shop", "plain", sqs_subscription(&standard, json!({})))
        .await;
    system
        .create_subscription("shop", "ordered", sqs_subscription(&fifo, json!({})))
        .await;
    let by_region = json!({"orderedDelivery": {"key": "data", "path": "region"}});
    system
        .create_subscription("shop", "regional", sqs_subscription(&regional, by_region))
        .await;
    let cloud_events = json!({"eventDeliverySchema": "CloudEventSchemaV1_0"});
    system
        .create_subscription("shop", "cloud", sqs_subscription(&cloud, cloud_events))
        .await;

    let events = json!([
        event("e-1", "Order.Placed", "/orders/1", json!({"region": "eu"})),
        event("e-2", "Order.Placed", "/orders/2", json!({"region": "us"})),
    ]);
    system.publish_ok("shop", &events).await;
    let mut messages = wait_messages(&moto, &standard, 2).await;
    messages.sort_by_key(id_of);
    for (message, (id, region)) in messages.iter().zip([("e-1", "eu"), ("e-2", "us")]) {
        let body: Value = serde_json::from_str(&message.body).unwrap();
        assert_eq!(body["id"], id, "the event as rendered, one message each");
        assert_eq!(body["eventType"], "Order.Placed");
        assert_eq!(message.attribute("region"), Some(region));
        assert_eq!(message.attribute("aeg-subscription-name"), Some("PLAIN"));
        assert_eq!(message.attribute("aeg-delivery-count"), Some("0"));
        assert_eq!(message.group_id, None, "a standard queue");
    }

    let mut fifo_messages = wait_messages(&moto, &fifo, 2).await;
    fifo_messages.sort_by_key(id_of);
    assert_eq!(fifo_messages[0].group_id.as_deref(), Some("/orders/1"), "the subject");
    assert_eq!(
        fifo_messages[0].deduplication_id.as_deref(),
        Some("e-1"),
        "the event id"
    );
    assert_eq!(fifo_messages[1].group_id.as_deref(), Some("/orders/2"));
    let mut regional_messages = wait_messages(&moto, &regional, 2).await;
    regional_messages.sort_by_key(id_of);
    let groups: Vec<Option<&str>> = regional_messages.iter().map(|m| m.group_id.as_deref()).collect();
    assert_eq!(groups, [Some("eu"), Some("us")], "the ordering key is the group");
    let mut cloud_messages = wait_messages(&moto, &cloud, 2).await;
    cloud_messages.sort_by_key(id_of);
    let first: Value = serde_json::from_str(&cloud_messages[0].body).unwrap();
    assert_eq!(first["specversion"], "1.0", "CloudEvents JSON: {first}");
    assert_eq!(first["type"], "Order.Placed");
    assert_eq!(
        cloud_messages[0].attribute("aeg-data-version"),
        None,
        "Event Grid schema only"
    );

    // The same event published again is delivered again, and the FIFO queue keeps one.
    system
        .publish_ok(
            "shop",
            &json!([event("e-1", "Order.Placed", "/orders/1", json!({"region": "eu"}))]),
        )
        .await;
    wait_subscription_successes(&system, "shop", "ordered", 3.0).await;
    wait_subscription_successes(&system, "shop", "plain", 3.0).await;
    assert_eq!(message_count(&moto, &fifo), 2, "deduplicated by the event id");
    assert_eq!(message_count(&moto, &standard), 3, "a standard queue keeps both");
    wait_subscription_successes(&system, "shop", "regional", 3.0).await;
    wait_subscription_successes(&system, "shop", "cloud", 3.0).await;
    let page = system.sender_metrics().await;
    let sqs = [("destination", "sqs")];
    assert_eq!(metric(&page, "DestinationRequestMessageCount", &sqs), 12.0);
    let requests = metric(&page, "DestinationRequestCount", &sqs);
    assert!((1.0..=12.0).contains(&requests), "{requests} requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_an_event_over_the_limit_is_dead_lettered_at_once_and_a_missing_queue_after_its_attempts() {
    let moto = moto().await;
    let orders = create_queue(&moto, "orders");
    let system = system_on(
        &moto,
        &moto.credentials().secret_access_key,
        &[("EG__BROKERS__SQS__LOCAL__MAX_MESSAGE_BYTES", "2048")],
    )
    .await;
    system.create_topic("shop").await;
    let dead = json!({"retryPolicy": {"maxDeliveryAttempts": 2}, "deadLetterDestination": dead_letter_to("dead")});
    system
        .create_subscription("shop", "big", sqs_subscription(&orders, dead.clone()))
        .await;
    let huge = event("e-big", "Order.Huge", "/orders/9", json!({"blob": "x".repeat(4096)}));
    system.publish_ok("shop", &json!([huge])).await;
    let records = system.wait_dead_letters(1, DEADLINE).await;
    let record = &records[0].record;
    assert_eq!(record["id"], "e-big");
    assert_eq!(record["deadLetterReason"], "NonRetriableFailure", "{record}");
    assert_eq!(record["lastDeliveryOutcome"], "PayloadTooLarge", "{record}");
    assert_eq!(record["deliveryAttempts"], 1, "not retried: {record}");
    assert_eq!(message_count(&moto, &orders), 0);

    let missing = orders.replace("/orders", "/nosuchqueue");
    system
        .create_subscription("shop", "lost", sqs_subscription(&missing, dead))
        .await;
    system
        .publish_ok("shop", &json!([event("e-2", "Order.Placed", "/orders/2", json!({}))]))
        .await;
    let records = system.wait_dead_letters(2, Duration::from_secs(60)).await;
    let record = &records.iter().find(|r| r.record["id"] == "e-2").unwrap().record;
    assert_eq!(record["deadLetterReason"], "MaxDeliveryAttemptsExceeded", "{record}");
    assert_eq!(record["lastDeliveryOutcome"], "NotFound", "{record}");
    assert_eq!(record["deliveryAttempts"], 2, "{record}");
    // The history keeps SQS's own words, not only the outcome's name.
    let (status, history) = system.get("/topics/shop/events/e-2/history").await;
    assert_eq!(status, 200, "{history}");
    let steps = history["value"].as_array().cloned().unwrap_or_default();
    let attempt = steps
        .iter()
        .find(|a| a["outcome"] == "NotFound")
        .unwrap_or_else(|| panic!("{history}"));
    assert!(
        attempt["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("SQS: QueueDoesNotExist: ")),
        "{history}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_refused_credentials_are_unauthorized_and_not_retried_and_bad_subscriptions_are_refused() {
    let moto = moto().await;
    let orders = create_queue(&moto, "orders");
    let system = system_on(&moto, "not-the-secret-of-this-key", &[]).await;
    system.create_topic("shop").await;

    // The management API refuses what no attempt could deliver, naming the field.
    let mut elsewhere = sqs_subscription(&orders, json!({}));
    elsewhere["properties"]["destination"]["properties"]["connection"] = json!("other");
    let field = "properties.destination.properties.connection";
    let message = assert_subscription_refused(&system, "shop", "elsewhere", &elsewhere, field).await;
    assert!(message.contains("EG__BROKERS__SQS__OTHER__REGION"), "{message}");
    let mut batched = sqs_subscription(&orders, json!({}));
    batched["properties"]["destination"]["properties"]["maxEventsPerBatch"] = json!(10);
    let field = "properties.destination.properties.maxEventsPerBatch";
    assert_subscription_refused(&system, "shop", "batched", &batched, field).await;
    let dead = json!({"retryPolicy": {"maxDeliveryAttempts": 5}, "deadLetterDestination": dead_letter_to("dead")});
    system
        .create_subscription("shop", "queue", sqs_subscription(&orders, dead))
        .await;
    system
        .publish_ok("shop", &json!([event("e-1", "Order.Placed", "/orders/1", json!({}))]))
        .await;
    let records = system.wait_dead_letters(1, DEADLINE).await;
    let record = &records[0].record;
    assert_eq!(record["deadLetterReason"], "NonRetriableFailure", "{record}");
    assert_eq!(record["lastDeliveryOutcome"], "Unauthorized", "{record}");
    assert_eq!(record["deliveryAttempts"], 1, "not retried: {record}");
    assert_eq!(message_count(&moto, &orders), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_deliveries_during_an_outage_of_the_server_arrive_after_it() {
    let mut moto = moto().await;
    let orders = create_queue(&moto, "orders");
    let system = system_on(&moto, &moto.credentials().secret_access_key, &[]).await;
    system.create_topic("shop").await;
    system
        .create_subscription("shop", "queue", sqs_subscription(&orders, json!({})))
        .await;

    // moto replays what it recorded (the queue) when it starts again.
    tokio::task::block_in_place(|| moto.kill());
    system
        .publish_ok("shop", &json!([event("e-1", "Order.Placed", "/orders/1", json!({}))]))
        .await;
    eventually(DEADLINE, "an attempt failing with SocketError", || async {
        let labels = [("subscription", "queue"), ("outcome", "SocketError")];
        (metric(&system.sender_metrics().await, "DeliveryAttemptFailCount", &labels) >= 1.0).then_some(())
    })
    .await;
    tokio::task::block_in_place(|| moto.start_again());

    let delivered = wait_messages(&moto, &orders, 1).await;
    assert_eq!(delivered.len(), 1);
    assert_eq!(id_of(&delivered[0]), "e-1");
    assert_ne!(
        delivered[0].attribute("aeg-delivery-count"),
        Some("0"),
        "delivered by a retry"
    );
}
