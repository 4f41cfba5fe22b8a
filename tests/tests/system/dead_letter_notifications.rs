//! Reacting to a dead letter (behaviour.md#dead-lettering): with
//! `EG__DEADLETTER__NOTIFY_TOPIC` set, every dead-letter object eg writes is announced on
//! that topic as a `Microsoft.Storage.BlobCreated` event, which an ordinary subscription
//! receives with its filter and retries; that topic's subscriptions cannot dead-letter, and
//! nobody outside eg publishes to it.

use eg_system_tests::{
    AZURITE_RESOURCE_ID, Behaviour, DEADLINE, Options, Receiver, System, assert_subscription_refused,
    azure_dead_letter_to, azurite_container, create_container, dead_letter_to, event, eventually, s3_bucket,
    s3_dead_letter_to, subscription, text_reply,
};
use eg_testkit::{Azurite, S3Server};
use object_store::ObjectStore;
use object_store::ObjectStoreExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

const NOTIFY_TOPIC: &str = "dead-letter-events";

/// A system with `options` that announces dead-letter objects on [`NOTIFY_TOPIC`].
async fn system_announcing_dead_letters_with(options: Options) -> System {
    let system = System::start(options.env("EG__DEADLETTER__NOTIFY_TOPIC", NOTIFY_TOPIC)).await;
    // eg-deadletter creates the topic when it starts.
    eventually(DEADLINE, "the notify topic", || async {
        let (status, _) = system.get(&format!("/topics/{NOTIFY_TOPIC}")).await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    system
}

async fn system_announcing_dead_letters() -> System {
    system_announcing_dead_letters_with(Options::default()).await
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

/// The `BlobCreated` event among `events` whose subject is in `container` of `store`
/// (`data.egDeadLetter.store`).
fn announced_in<'a>(events: &'a [Value], store: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["data"]["egDeadLetter"]["store"] == store)
        .unwrap_or_else(|| panic!("no announcement for {store}: {events:?}"))
}

/// Checks that `announced` names an object of `container` that exists in `store` at the
/// path its `url` gives after `container_url`, with the announced size, holding `event_id`.
async fn check_announced_object(
    announced: &Value,
    container: &str,
    container_url: &str,
    store: &dyn ObjectStore,
    event_id: &str,
) {
    assert_eq!(announced["eventType"], "Microsoft.Storage.BlobCreated");
    let data = &announced["data"];
    let url = data["url"].as_str().unwrap_or_else(|| panic!("no url: {announced}"));
    let path = url
        .strip_prefix(&format!("{container_url}/"))
        .unwrap_or_else(|| panic!("{url} is not in {container_url}"));
    assert_eq!(
        announced["subject"],
        format!("/blobServices/default/containers/{container}/blobs/{path}")
    );
    let object = store
        .get(&object_store::path::Path::from(path))
        .await
        .unwrap_or_else(|e| panic!("the announced object {path}: {e}"));
    let bytes = object.bytes().await.unwrap_or_else(|e| panic!("read {path}: {e}"));
    assert_eq!(data["contentLength"], bytes.len() as u64, "{announced}");
    let held: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"));
    assert_eq!(held[0]["id"], event_id, "{held}");
    assert_eq!(data["egDeadLetter"]["records"], 1);
    assert!(data["eTag"].is_string(), "the store's eTag: {announced}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_written_to_azurite_and_s3_are_announced_naming_the_store_and_the_object() {
    let azurite = tokio::task::spawn_blocking(Azurite::start);
    let s3 = tokio::task::spawn_blocking(S3Server::start);
    let (azurite, s3) = (azurite.await.unwrap(), s3.await.unwrap());
    create_container(&azurite, "failed");
    s3.create_bucket("failed");
    let system = system_announcing_dead_letters_with(
        Options::default()
            .env("EG__DEADLETTER__DELAY", "0s")
            .azurite(&azurite)
            .s3_server(&s3, "moto"),
    )
    .await;
    let refusing = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("orders").await;
    for (name, destination) in [
        ("ToAzure", azure_dead_letter_to("failed")),
        ("ToS3", s3_dead_letter_to("moto", "failed", "eg/dead")),
    ] {
        let body = subscription(refusing.url(), json!({"deadLetterDestination": destination}));
        system.create_subscription("orders", name, body).await;
    }
    let handler = Receiver::start(Behaviour::Status(200)).await;
    system
        .create_subscription(NOTIFY_TOPIC, "watch", subscription(handler.url(), json!({})))
        .await;

    system
        .publish_ok(
            "orders",
            &json!([event("order-1", "Order.Placed", "/orders/1", json!({"n": 1}))]),
        )
        .await;
    let events: Vec<Value> = eventually(DEADLINE, "two announcements", || async {
        let events: Vec<Value> = handler
            .received()
            .iter()
            .filter_map(|r| r.body.as_array().cloned())
            .flatten()
            .collect();
        (events.len() >= 2).then_some(events)
    })
    .await;
    assert_eq!(events.len(), 2, "one per object: {events:?}");

    let to_azure = announced_in(&events, "azure:devstoreaccount1");
    assert_eq!(
        to_azure["topic"], AZURITE_RESOURCE_ID,
        "the account the subscription named"
    );
    assert_eq!(to_azure["data"]["egDeadLetter"]["subscription"], "ToAzure");
    let container = azurite_container(&azurite, "failed");
    let container_url = format!("{}/failed", azurite.blob_endpoint());
    check_announced_object(to_azure, "failed", &container_url, container.as_ref(), "order-1").await;

    let to_s3 = announced_in(&events, "s3:moto");
    assert_eq!(to_s3["topic"], "/deadLetterStores/s3/moto");
    assert_eq!(to_s3["data"]["egDeadLetter"]["subscription"], "ToS3");
    let subject = to_s3["subject"].as_str().unwrap_or_default();
    assert!(
        subject.starts_with("/blobServices/default/containers/failed/blobs/eg/dead/TOS3/"),
        "the key prefix, then the subscription's folder: {subject}"
    );
    let bucket = s3_bucket(&s3, "failed");
    let bucket_url = format!("{}/failed", s3.endpoint().trim_end_matches('/'));
    check_announced_object(to_s3, "failed", &bucket_url, bucket.as_ref(), "order-1").await;
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
