//! Reacting to a dead letter (spec §6): with `EG__DEADLETTER__NOTIFY_TOPIC` set, every
//! dead-letter object eg writes is announced on that topic as a
//! `Microsoft.Storage.BlobCreated` event, which an ordinary subscription receives with
//! its filter and retries; that topic's subscriptions cannot dead-letter, and nobody
//! outside eg publishes to it.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, System, assert_subscription_refused, dead_letter_to, event, eventually,
    subscription, text_reply,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

const NOTIFY_TOPIC: &str = "dead-letter-events";

async fn system_announcing_dead_letters() -> System {
    let system = System::start(Options::default().env("EG__DEADLETTER__NOTIFY_TOPIC", NOTIFY_TOPIC)).await;
    // eg-deadletter creates the topic when it starts.
    eventually(DEADLINE, "the notify topic", || async {
        let (status, _) = system.get(&format!("/topics/{NOTIFY_TOPIC}")).await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    system
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_file_is_announced_to_a_subscriber_of_the_notify_topic_which_gets_retries() {
    let system = system_announcing_dead_letters().await;
    // The dead-lettering side: a 400 is dead-lettered at once, to the local directory.
    let refusing = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("orders").await;
    system
        .create_subscription(
            "orders",
            "Billing",
            subscription(
                refusing.url(),
                json!({"deadLetterDestination": dead_letter_to("failed")}),
            ),
        )
        .await;
    // The reacting side: a filter on the container, and a handler that fails once.
    let handler = Receiver::start(Behaviour::FailFirst {
        failures: 1,
        status: 503,
    })
    .await;
    system
        .create_subscription(
            NOTIFY_TOPIC,
            "on-failed",
            subscription(
                handler.url(),
                json!({"filter": {
                    "subjectBeginsWith": "/blobServices/default/containers/failed/",
                    "includedEventTypes": ["Microsoft.Storage.BlobCreated"],
                }}),
            ),
        )
        .await;

    system
        .publish_ok(
            "orders",
            &json!([event("order-1", "Order.Placed", "/orders/1", json!({"n": 1}))]),
        )
        .await;
    let records = system.wait_dead_letters(1, DEADLINE).await;
    let written = &records[0].path; // failed/BILLING/YYYY/M/D/H/<guid>.json
    let inside_container = written.strip_prefix("failed").unwrap().display().to_string();
    let file = system.dead_letter_dir().join(written);

    let requests = handler.wait_for(2, DEADLINE).await;
    assert_eq!(requests[0].status, 503);
    assert_eq!(requests[1].status, 200);
    assert_eq!(requests[0].header("aeg-delivery-count"), Some("0"));
    assert_eq!(
        requests[1].header("aeg-delivery-count"),
        Some("1"),
        "the failed attempt is retried"
    );
    assert_eq!(
        requests[0].event_ids(),
        requests[1].event_ids(),
        "the same event, retried"
    );
    let body = &requests[1].body;
    assert_eq!(body.as_array().map(Vec::len), Some(1), "{body}");
    let announced = &body[0];
    assert_eq!(announced["eventType"], "Microsoft.Storage.BlobCreated");
    assert_eq!(announced["topic"], "/deadLetterStores/localDirectory");
    assert_eq!(
        announced["subject"],
        format!("/blobServices/default/containers/failed/blobs/{inside_container}")
    );
    let data = &announced["data"];
    assert_eq!(data["api"], "PutBlob");
    assert_eq!(data["blobType"], "BlockBlob");
    assert_eq!(data["contentType"], "application/json");
    assert_eq!(data["url"], format!("file://{}", file.display()));
    assert_eq!(data["contentLength"], std::fs::metadata(&file).unwrap().len());
    assert_eq!(data["egDeadLetter"]["topic"], "orders");
    assert_eq!(data["egDeadLetter"]["subscription"], "Billing");
    assert_eq!(data["egDeadLetter"]["records"], 1);
    // What the handler would fetch is the dead-letter file itself.
    let held: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(held[0]["id"], "order-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notify_topic_takes_no_dead_letter_destination_and_no_outside_publisher() {
    let system = system_announcing_dead_letters().await;
    let handler = Receiver::start(Behaviour::Status(200)).await;
    let body = subscription(handler.url(), json!({"deadLetterDestination": dead_letter_to("loops")}));
    let message = assert_subscription_refused(
        &system,
        NOTIFY_TOPIC,
        "watch",
        &body,
        "properties.deadLetterDestination",
    )
    .await;
    assert!(message.contains("loop"), "{message}");
    // Without one it is an ordinary subscription.
    system
        .create_subscription(NOTIFY_TOPIC, "watch", subscription(handler.url(), json!({})))
        .await;

    let (status, keys) = system.post(&format!("/topics/{NOTIFY_TOPIC}/listKeys"), None).await;
    assert_eq!(status, StatusCode::OK, "{keys}");
    let forged = json!([event(
        "fake",
        "Microsoft.Storage.BlobCreated",
        "/blobServices/default/containers/x/blobs/y",
        json!({})
    )]);
    let (status, answer) = text_reply(
        system
            .publish_raw(NOTIFY_TOPIC, keys["key1"].as_str(), forged.to_string().into_bytes())
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert!(answer.contains("only eg publishes"), "{answer}");
}
