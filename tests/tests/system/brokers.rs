//! The message-broker destinations end to end: subscriptions created through the
//! management API deliver to a real RabbitMQ node and a real NATS server with JetStream
//! (started per test by eg-testkit), read back from the broker with the same client
//! libraries the sender uses. Delivery with headers, a broker killed and restarted
//! mid-run, refusals retried and then dead-lettered and redriven, JetStream absorbing
//! duplicates, and the management API refusing a connection eg has no configuration for.

use async_nats::jetstream::{self, stream};
use eg_system_tests::{
    DEADLINE, Options, System, assert_subscription_refused, dead_letter_to, event, eventually, metric,
};
use eg_testkit::{Nats, RabbitMq, RefusingPort};
use lapin::options::{BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use serde_json::{Value, json};
use std::cell::RefCell;
use std::time::Duration;

/// A channel of the test's own on `broker`, with a durable topic exchange `events` and
/// a durable queue `orders` bound to it by `orders.#`.
async fn rabbitmq_queue(broker: &RabbitMq) -> Channel {
    let connection = Connection::connect(&broker.amqp_url(), ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    channel
        .exchange_declare("events".into(), ExchangeKind::Topic, durable, FieldTable::default())
        .await
        .unwrap();
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare("orders".into(), durable, FieldTable::default())
        .await
        .unwrap();
    channel
        .queue_bind(
            "orders".into(),
            "events".into(),
            "orders.#".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    channel
}

/// Waits until the queue `orders` gave `count` messages (taken off it): their message
/// ids, bodies and headers.
async fn rabbitmq_messages(channel: &Channel, count: usize) -> Vec<(String, Value, FieldTable)> {
    let taken = RefCell::new(Vec::new());
    eventually(DEADLINE, &format!("{count} message(s) in the queue"), || async {
        while let Some(message) = channel
            .basic_get("orders".into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            let properties = &message.delivery.properties;
            taken.borrow_mut().push((
                properties
                    .message_id()
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_default(),
                serde_json::from_slice(&message.delivery.data).unwrap(),
                properties.headers().clone().unwrap_or_default(),
            ));
        }
        (taken.borrow().len() >= count).then_some(())
    })
    .await;
    taken.into_inner()
}

fn rabbitmq_subscription(routing: Value, extra: Value) -> Value {
    let mut destination = json!({"connection": "main", "exchange": "events",
    "deliveryAttributeMappings": [
        {"name": "region", "type": "Dynamic", "properties": {"sourceField": "data.region"}}
    ]});
    merge(&mut destination, routing);
    let mut properties = json!({"destination": {"endpointType": "RabbitMQ", "properties": destination}});
    merge(&mut properties, extra);
    json!({ "properties": properties })
}

fn merge(target: &mut Value, extra: Value) {
    if let (Some(target), Value::Object(extra)) = (target.as_object_mut(), extra) {
        target.extend(extra);
    }
}

fn text_header(headers: &FieldTable, name: &str) -> Option<String> {
    match headers.inner().get(name)? {
        AMQPValue::LongString(s) => Some(s.to_string()),
        other => Some(format!("{other:?}")),
    }
}

#[tokio::test]
async fn rabbitmq_delivers_each_event_with_headers_and_again_after_a_broker_restart() {
    let mut broker = RabbitMq::start();
    let channel = rabbitmq_queue(&broker).await;
    let system = System::start(Options::default().env("EG__BROKERS__RABBITMQ__MAIN__URL", &broker.amqp_url())).await;
    system.create_topic("orders").await;
    system
        .create_subscription(
            "orders",
            "audit",
            rabbitmq_subscription(json!({"routingKeyFrom": "subject"}), json!({})),
        )
        .await;

    let events = json!([
        event("ev-1", "Order.Created", "orders.created", json!({"region": "eu"})),
        event("ev-2", "Order.Created", "orders.created", json!({"region": "us"})),
    ]);
    system.publish_ok("orders", &events).await;
    let mut messages = rabbitmq_messages(&channel, 2).await;
    messages.sort_by(|a, b| a.0.cmp(&b.0));
    for ((id, body, headers), region) in messages.iter().zip(["eu", "us"]) {
        assert_eq!(body["id"], *id, "one message per event, its id as message id");
        assert_eq!(text_header(headers, "region").as_deref(), Some(region));
        assert_eq!(text_header(headers, "aeg-subscription-name").as_deref(), Some("AUDIT"));
        assert_eq!(text_header(headers, "aeg-delivery-count").as_deref(), Some("0"));
    }

    broker.kill();
    let events = json!([event(
        "ev-3",
        "Order.Created",
        "orders.created",
        json!({"region": "eu"})
    )]);
    system.publish_ok("orders", &events).await;
    broker.start_again();
    let channel = rabbitmq_queue(&broker).await;
    // A message taken just before the kill may come back: the broker had not yet
    // written its removal (RabbitMQ's own at-least-once). Only ev-3 is new.
    let ev3 = eventually(DEADLINE, "ev-3 in the queue", || async {
        while let Some(message) = channel
            .basic_get("orders".into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            let properties = &message.delivery.properties;
            if properties.message_id().as_ref().is_some_and(|id| id.as_str() == "ev-3") {
                return Some(properties.headers().clone().unwrap_or_default());
            }
        }
        None
    })
    .await;
    assert_ne!(
        text_header(&ev3, "aeg-delivery-count").as_deref(),
        Some("0"),
        "delivered by a retry: an attempt failed while the broker was down"
    );
}

#[tokio::test]
async fn rabbitmq_unroutable_events_are_dead_lettered_as_not_found_and_redriven_once_routable() {
    let broker = RabbitMq::start();
    let channel = rabbitmq_queue(&broker).await;
    let system = System::start(Options::default().env("EG__BROKERS__RABBITMQ__MAIN__URL", &broker.amqp_url())).await;
    system.create_topic("orders").await;
    let extra = json!({
        "retryPolicy": {"maxDeliveryAttempts": 2, "eventTimeToLiveInMinutes": 5},
        "deadLetterDestination": dead_letter_to("dead"),
    });
    system
        .create_subscription(
            "orders",
            "audit",
            rabbitmq_subscription(json!({"routingKey": "invoices.paid"}), extra),
        )
        .await;
    system
        .publish_ok("orders", &json!([event("ev-1", "Order.Created", "/o/1", json!({}))]))
        .await;
    // 404's retry minimum is the 10 s of "any other status".
    let records = system.wait_dead_letters(1, Duration::from_secs(60)).await;
    let record = &records[0].record;
    assert_eq!(record["deadLetterReason"], "MaxDeliveryAttemptsExceeded", "{record}");
    assert_eq!(record["lastDeliveryOutcome"], "NotFound", "{record}");

    channel
        .queue_bind(
            "orders".into(),
            "events".into(),
            "invoices.#".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    redrive_one(&system, "orders", "audit").await;
    let messages = rabbitmq_messages(&channel, 1).await;
    assert_eq!(messages[0].0, "ev-1", "routable now, delivered");
}

/// Redrives the subscription's dead letters until the one there is (the record may be
/// written before it can be redriven).
async fn redrive_one(system: &System, topic: &str, subscription: &str) {
    eventually(DEADLINE, "the dead letter redriven", || async {
        (system.redrive_all(topic, subscription).await["redriven"] == 1).then_some(())
    })
    .await;
}

/// The test's own JetStream context on `server`, with stream `EVENTS` on `events.>`.
async fn nats_stream(server: &Nats) -> stream::Stream {
    nats_stream_named(server, "EVENTS", "events.>").await
}

/// The test's own JetStream context on `server`, with stream `name` on `subjects`.
async fn nats_stream_named(server: &Nats, name: &str, subjects: &str) -> stream::Stream {
    let client = async_nats::connect(server.url()).await.unwrap();
    jetstream::new(client)
        .get_or_create_stream(stream::Config {
            name: name.into(),
            subjects: vec![subjects.into()],
            ..stream::Config::default()
        })
        .await
        .unwrap()
}

async fn nats_stored(stream: &stream::Stream, count: u64) {
    eventually(DEADLINE, &format!("{count} message(s) in the stream"), || async {
        let stored = stream.get_info().await.unwrap().state.messages;
        assert!(stored <= count, "{stored} messages stored, expected {count}");
        (stored == count).then_some(())
    })
    .await;
}

fn nats_subscription(subject: &str, extra: Value) -> Value {
    let mut properties = json!({"destination": {"endpointType": "NatsJetStream",
    "properties": {"connection": "events", "subject": subject,
        "deliveryAttributeMappings": [
            {"name": "region", "type": "Dynamic", "properties": {"sourceField": "data.region"}}
        ]}}});
    merge(&mut properties, extra);
    json!({ "properties": properties })
}

#[tokio::test]
async fn nats_stores_each_event_once_even_when_published_twice_and_dead_letters_a_missing_stream() {
    let server = Nats::start();
    let stream = nats_stream(&server).await;
    let system = System::start(Options::default().env("EG__BROKERS__NATS__EVENTS__URL", &server.url())).await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "audit", nats_subscription("events.orders", json!({})))
        .await;
    let extra = json!({
        "retryPolicy": {"maxDeliveryAttempts": 1, "eventTimeToLiveInMinutes": 5},
        "deadLetterDestination": dead_letter_to("dead"),
    });
    system
        .create_subscription("orders", "nowhere", nats_subscription("unstreamed.orders", extra))
        .await;

    let once = json!([event("ev-1", "Order.Created", "/o/1", json!({"region": "eu"}))]);
    system.publish_ok("orders", &once).await;
    nats_stored(&stream, 1).await;
    let message = stream.get_raw_message(1).await.unwrap();
    let header = |name: &str| message.headers.get(name).map(|v| v.as_str().to_owned());
    assert_eq!(header("Nats-Msg-Id").as_deref(), Some("ev-1"));
    assert_eq!(header("region").as_deref(), Some("eu"));
    assert_eq!(header("aeg-subscription-name").as_deref(), Some("AUDIT"));

    // The same event published again: eg delivers it again, the stream keeps one.
    system.publish_ok("orders", &once).await;
    let twice = json!([event("ev-2", "Order.Created", "/o/2", json!({}))]);
    system.publish_ok("orders", &twice).await;
    nats_stored(&stream, 2).await;
    let second = stream.get_raw_message(2).await.unwrap();
    assert_eq!(
        second
            .headers
            .get("Nats-Msg-Id")
            .map(|v| v.as_str().to_owned())
            .as_deref(),
        Some("ev-2"),
        "the repeat of ev-1 was absorbed"
    );
    let duplicates = eventually(DEADLINE, "the duplicate counted", || async {
        let page = system.sender_metrics().await;
        let counted = eg_system_tests::metric(&page, "DestinationDuplicateCount", &[("destination", "nats")]);
        (counted >= 1.0).then_some(counted)
    })
    .await;
    assert_eq!(duplicates, 1.0);

    let records = system.wait_dead_letters(3, Duration::from_secs(30)).await;
    assert!(
        records.iter().all(|r| r.record["lastDeliveryOutcome"] == "NotFound"),
        "{records:?}"
    );
}

#[tokio::test]
async fn nats_delivers_what_was_published_while_the_server_was_down() {
    let mut server = Nats::start();
    let stream = nats_stream(&server).await;
    let system = System::start(Options::default().env("EG__BROKERS__NATS__EVENTS__URL", &server.url())).await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "audit", nats_subscription("events.orders", json!({})))
        .await;
    system
        .publish_ok("orders", &json!([event("ev-1", "Order.Created", "/o/1", json!({}))]))
        .await;
    nats_stored(&stream, 1).await;

    server.kill();
    system
        .publish_ok("orders", &json!([event("ev-2", "Order.Created", "/o/2", json!({}))]))
        .await;
    // The server stays down until an attempt failed: ev-2 is stored by a retry, not by
    // the client flushing the first attempt's publish after a quick restart.
    let failed = [("subscription", "audit"), ("outcome", "SocketError")];
    eventually(DEADLINE, "an attempt failed as SocketError", || async {
        (metric(&system.sender_metrics().await, "DeliveryAttemptFailCount", &failed) >= 1.0).then_some(())
    })
    .await;
    server.start_again();
    let stream = nats_stream(&server).await;
    nats_stored(&stream, 2).await;
    let stored = stream.get_raw_message(2).await.unwrap();
    assert_eq!(
        stored
            .headers
            .get("Nats-Msg-Id")
            .map(|v| v.as_str().to_owned())
            .as_deref(),
        Some("ev-2")
    );
}

#[tokio::test]
async fn nats_dead_letters_an_event_with_no_stream_and_redrives_it_once_one_takes_the_subject() {
    let server = Nats::start();
    let system = System::start(Options::default().env("EG__BROKERS__NATS__EVENTS__URL", &server.url())).await;
    system.create_topic("orders").await;
    let extra = json!({
        "retryPolicy": {"maxDeliveryAttempts": 1, "eventTimeToLiveInMinutes": 5},
        "deadLetterDestination": dead_letter_to("dead"),
    });
    system
        .create_subscription("orders", "audit", nats_subscription("late.orders", extra))
        .await;
    system
        .publish_ok("orders", &json!([event("ev-1", "Order.Created", "/o/1", json!({}))]))
        .await;
    let records = system.wait_dead_letters(1, DEADLINE).await;
    let record = &records[0].record;
    assert_eq!(record["deadLetterReason"], "MaxDeliveryAttemptsExceeded", "{record}");
    assert_eq!(record["lastDeliveryOutcome"], "NotFound", "{record}");

    // Not only `NotFound`: the attempt's history and the sender's log name the subject.
    let missing = r#"no JetStream stream captures subject "late.orders""#;
    let (status, history) = system.get("/topics/orders/events/ev-1/history").await;
    assert_eq!(status, 200, "{history}");
    let attempt = &history["value"][0];
    assert_eq!(attempt["outcome"], "NotFound", "{history}");
    assert!(
        attempt["error"].as_str().is_some_and(|e| e.starts_with(missing)),
        "{history}"
    );
    let logged = system
        .logs()
        .into_iter()
        .any(|(name, text)| name.contains("sender") && text.contains(missing));
    assert!(logged, "the sender's log does not say {missing}");

    let stream = nats_stream_named(&server, "LATE", "late.>").await;
    redrive_one(&system, "orders", "audit").await;
    nats_stored(&stream, 1).await;
    let message = stream.get_raw_message(1).await.unwrap();
    let header = |name: &str| message.headers.get(name).map(|v| v.as_str().to_owned());
    assert_eq!(header("Nats-Msg-Id").as_deref(), Some("ev-1"), "redriven, delivered");
    assert_eq!(header("aeg-subscription-name").as_deref(), Some("AUDIT"));
}

#[tokio::test]
async fn a_subscription_naming_a_broker_connection_eg_lacks_is_refused() {
    // Configured, but never connected to: the management API checks names only.
    let (rabbitmq, nats) = (RefusingPort::new(), RefusingPort::new());
    let system = System::start(
        Options::default()
            .env(
                "EG__BROKERS__RABBITMQ__MAIN__URL",
                &format!("amqp://guest:guest@127.0.0.1:{}/%2f", rabbitmq.port()),
            )
            .env(
                "EG__BROKERS__NATS__EVENTS__URL",
                &format!("nats://127.0.0.1:{}", nats.port()),
            ),
    )
    .await;
    system.create_topic("orders").await;

    let mut to_rabbitmq = rabbitmq_subscription(json!({"routingKey": "orders.created"}), json!({}));
    system
        .create_subscription("orders", "rabbit", to_rabbitmq.clone())
        .await;
    to_rabbitmq["properties"]["destination"]["properties"]["connection"] = json!("billing");
    let message = assert_subscription_refused(
        &system,
        "orders",
        "rabbit-elsewhere",
        &to_rabbitmq,
        "properties.destination.properties.connection",
    )
    .await;
    assert!(message.contains("EG__BROKERS__RABBITMQ__BILLING__URL"), "{message}");

    let mut to_nats = nats_subscription("events.orders", json!({}));
    system.create_subscription("orders", "nats", to_nats.clone()).await;
    to_nats["properties"]["destination"]["properties"]["connection"] = json!("billing");
    let message = assert_subscription_refused(
        &system,
        "orders",
        "nats-elsewhere",
        &to_nats,
        "properties.destination.properties.connection",
    )
    .await;
    assert!(message.contains("EG__BROKERS__NATS__BILLING__URL"), "{message}");

    let (status, _) = system.get("/topics/orders/eventSubscriptions/rabbit-elsewhere").await;
    assert_eq!(status, 404, "a refused subscription is not created");
}
