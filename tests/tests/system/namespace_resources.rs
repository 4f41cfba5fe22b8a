//! Namespace topics and namespace subscriptions written in Event Grid's namespace
//! resource JSON: a push subscription delivering with the seed-002 schedule, a queue
//! subscription accepted and shown without a handshake, the older eg spellings still
//! working, every refusal naming its field, and egctl creating and showing both.

use eg_system_tests::{ADMIN_TOKEN, Behaviour, DEADLINE, Options, Receiver, System, assert_refused, json_reply};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const BATCH: &str = "application/cloudevents-batch+json; charset=utf-8";

/// Event Grid's namespace topic example, as written.
fn namespace_topic() -> Value {
    json!({"publisherType": "Custom", "inputSchema": "CloudEventSchemaV1_0", "eventRetentionInDays": 1})
}

/// A namespace push subscription to `url` with `push` settings besides its destination.
fn push_subscription(url: &str, push: Value, filters: Value) -> Value {
    let mut push = push;
    push["destination"] = json!({"endpointType": "WebHook", "properties": {"endpointUrl": url}});
    json!({"properties": {
        "deliveryConfiguration": {"deliveryMode": "Push", "push": push},
        "eventDeliverySchema": "CloudEventSchemaV1_0",
        "filtersConfiguration": filters,
    }})
}

/// The research's queue example (ARM `NamespaceTopicEventSubscriptions_Update.json`).
fn queue_subscription() -> Value {
    json!({"properties": {
        "deliveryConfiguration": {
            "deliveryMode": "Queue",
            "queue": {
                "receiveLockDurationInSeconds": 60,
                "maxDeliveryCount": 4,
                "eventTimeToLive": "P1D",
                "deadLetterDestinationWithResourceIdentity": {
                    "identity": {"type": "SystemAssigned"},
                    "deadLetterDestination": {
                        "endpointType": "StorageBlob",
                        "properties": {"blobContainerName": "data"}
                    }
                }
            }
        },
        "eventDeliverySchema": "CloudEventSchemaV1_0",
        "filtersConfiguration": {"includedEventTypes": ["com.example.order.created"], "filters": []}
    }})
}

/// POSTs a CloudEvents batch to the topic's publish endpoint with its key.
async fn publish_batch(system: &System, topic: &str, key: &str, events: &Value) {
    let response = system
        .http()
        .post(format!(
            "{}/topics/{topic}/api/events?api-version=2018-01-01",
            system.ingress_url()
        ))
        .header("content-type", BATCH)
        .header("aeg-sas-key", key)
        .body(events.to_string())
        .send()
        .await
        .unwrap();
    let (status, answer) = json_reply(response).await;
    assert_eq!(status, StatusCode::OK, "publish to {topic}: {answer}");
}

fn cloud_event(id: &str, event_type: &str, amount: u32) -> Value {
    json!({"specversion": "1.0", "id": id, "source": "/contoso/orders", "type": event_type,
           "data": {"amount": amount}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_subscription_in_namespace_json_delivers_with_the_namespace_schedule() {
    let system = System::start(Options::default()).await;
    // Refuses once, then takes it: the first attempt comes at once, the retry 10 s later.
    let receiver = Receiver::start(Behaviour::FailFirst {
        failures: 1,
        status: 503,
    })
    .await;
    // Always refuses: two attempts (its maxDeliveryCount), then dead-lettered.
    let refusing = Receiver::start(Behaviour::Status(503)).await;
    let topic = "ns-push";
    let key = system.create_topic_with(topic, namespace_topic()).await;
    let (status, shown) = system.get(&format!("/topics/{topic}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown["type"], "Microsoft.EventGrid/namespaces/topics", "{shown}");
    let p = &shown["properties"];
    assert_eq!(p["publisherType"], "Custom", "{shown}");
    assert_eq!(p["inputSchema"], "CloudEventSchemaV1_0", "{shown}");
    assert_eq!(p["eventRetentionInDays"], 1, "{shown}");
    assert_eq!(p["provisioningState"], "Succeeded", "{shown}");
    // What eg showed before namespace JSON is still there.
    assert_eq!(p["deliveryProfile"], "NamespaceTopic", "{shown}");
    assert!(
        p["endpoint"]
            .as_str()
            .is_some_and(|e| e.ends_with("/topics/ns-push/api/events")),
        "{shown}"
    );

    let body = push_subscription(
        receiver.url(),
        json!({"maxDeliveryCount": 5, "eventTimeToLive": "PT10M"}),
        json!({"includedEventTypes": ["Contoso.Order.Created"],
               "filters": [{"operatorType": "NumberGreaterThan", "key": "data.amount", "value": 100}]}),
    );
    let (status, created) = system.put_subscription(topic, "orders", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["type"], "Microsoft.EventGrid/namespaces/topics/eventSubscriptions",
        "{created}"
    );
    let (_, shown) = system.get(&format!("/topics/{topic}/eventSubscriptions/orders")).await;
    let p = &shown["properties"];
    assert_eq!(p["provisioningState"], "Succeeded", "{shown}");
    let push = &p["deliveryConfiguration"]["push"];
    assert_eq!(p["deliveryConfiguration"]["deliveryMode"], "Push", "{shown}");
    assert_eq!(push["maxDeliveryCount"], 5, "{shown}");
    assert_eq!(push["eventTimeToLive"], "PT10M", "{shown}");
    assert_eq!(
        push["destination"]["properties"]["endpointBaseUrl"],
        receiver.url(),
        "{shown}"
    );
    assert_eq!(
        p["filtersConfiguration"], body["properties"]["filtersConfiguration"],
        "{shown}"
    );

    publish_batch(
        &system,
        topic,
        &key,
        &json!([
            cloud_event("small", "Contoso.Order.Created", 50),
            cloud_event("other", "Contoso.Order.Shipped", 500),
            cloud_event("big", "Contoso.Order.Created", 150),
        ]),
    )
    .await;

    let attempts = receiver.wait_for(2, DEADLINE).await;
    let statuses: Vec<u16> = attempts.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [503, 200], "{attempts:?}");
    for attempt in &attempts {
        // One structured-mode CloudEvent per request (maxEventsPerBatch 1).
        assert_eq!(
            attempt.body["id"], "big",
            "only the event that passes the filters: {attempt:?}"
        );
        assert_eq!(
            attempt.body["specversion"], "1.0",
            "delivered as a CloudEvent: {attempt:?}"
        );
    }
    // The schedule's first step is 10 s: the retry cannot come sooner.
    let gap = attempts[1].at.duration_since(attempts[0].at);
    assert!(gap >= Duration::from_secs(9), "retried after {gap:?}");

    // maxDeliveryCount and the dead-letter destination, written the namespace way.
    let dead_letter = json!({"deadLetterDestination": {"endpointType": "StorageBlob",
        "properties": {"blobContainerName": "ns-dead"}}});
    let body = push_subscription(
        refusing.url(),
        json!({"maxDeliveryCount": 2, "deadLetterDestinationWithResourceIdentity": dead_letter}),
        json!({"includedEventTypes": ["Contoso.Order.Capped"], "filters": []}),
    );
    let created = system.create_subscription(topic, "capped", body).await;
    assert_eq!(
        created["properties"]["deliveryConfiguration"]["push"]["deadLetterDestinationWithResourceIdentity"],
        dead_letter,
        "{created}"
    );
    publish_batch(
        &system,
        topic,
        &key,
        &json!([cloud_event("capped-1", "Contoso.Order.Capped", 1)]),
    )
    .await;
    let records = system.wait_dead_letters(1, DEADLINE).await;
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert!(record.path.starts_with("ns-dead"), "{record:?}");
    assert_eq!(record.record["event"]["id"], "capped-1", "{record:?}");
    assert_eq!(
        record.record["deadLetterProperties"]["deliveryattempts"], 2,
        "{record:?}"
    );
    assert_eq!(refusing.count(), 2, "{:?}", refusing.received());
    assert_eq!(receiver.count(), 2, "{:?}", receiver.received());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_subscription_is_succeeded_at_once_and_shown_in_namespace_json() {
    let system = System::start(Options::default()).await;
    let topic = "ns-queue";
    system.create_topic_with(topic, namespace_topic()).await;
    let body = queue_subscription();
    let (status, created) = system.put_subscription(topic, "pullers", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["properties"]["provisioningState"], "Succeeded", "{created}");

    let (status, shown) = system.get(&format!("/topics/{topic}/eventSubscriptions/pullers")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        shown["type"], "Microsoft.EventGrid/namespaces/topics/eventSubscriptions",
        "{shown}"
    );
    let p = &shown["properties"];
    assert_eq!(p["provisioningState"], "Succeeded", "{shown}");
    let mut expected = body["properties"]["deliveryConfiguration"].clone();
    // The identity is accepted and not kept (eg has no managed identities).
    expected["queue"]["deadLetterDestinationWithResourceIdentity"]
        .as_object_mut()
        .unwrap()
        .remove("identity");
    assert_eq!(p["deliveryConfiguration"], expected, "{shown}");
    assert_eq!(
        p["filtersConfiguration"], body["properties"]["filtersConfiguration"],
        "{shown}"
    );
    assert_eq!(p["eventDeliverySchema"], "CloudEventSchemaV1_0", "{shown}");

    // What GET shows can be written back as it is.
    let (status, again) = system.put_subscription(topic, "pullers", &shown).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["properties"]["deliveryConfiguration"], expected, "{again}");
    let (_, list) = system.get(&format!("/topics/{topic}/eventSubscriptions")).await;
    assert_eq!(
        list["value"][0]["properties"]["deliveryConfiguration"]["deliveryMode"], "Queue",
        "{list}"
    );

    // A queue has no endpoint: calls about one say so.
    for call in ["getFullUrl", "deliveryHealth"] {
        let path = format!("/topics/{topic}/eventSubscriptions/pullers/{call}");
        let (status, answer) = if call == "getFullUrl" {
            system.post(&path, None).await
        } else {
            system.get(&path).await
        };
        assert_eq!(status, StatusCode::BAD_REQUEST, "{call}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("queue mode"),
            "{call}: {answer}"
        );
    }

    // A queue cannot become a webhook under its events, nor the other way round.
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let push = push_subscription(receiver.url(), json!({}), json!(null));
    let (status, answer) = system.put_subscription(topic, "pullers", &push).await;
    assert_refused(status, &answer, "properties.deliveryConfiguration.deliveryMode");
    system.create_subscription(topic, "pushed", push).await;
    let (status, answer) = system.put_subscription(topic, "pushed", &body).await;
    assert_refused(status, &answer, "properties.deliveryConfiguration.deliveryMode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_resources_are_refused_naming_the_field_and_the_older_spellings_still_work() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;

    for (properties, field) in [
        (
            json!({"publisherType": "Custom", "inputSchema": "EventGridSchema"}),
            "properties.inputSchema",
        ),
        (
            json!({"publisherType": "Custom", "eventRetentionInDays": 8}),
            "properties.eventRetentionInDays",
        ),
        (
            json!({"publisherType": "Custom", "deliveryProfile": "CustomTopic"}),
            "properties.deliveryProfile",
        ),
        (json!({"publisherType": "Partner"}), "properties.publisherType"),
    ] {
        let (status, answer) = system
            .put_topic("ns-refused", &json!({ "properties": properties }))
            .await;
        assert_refused(status, &answer, field);
    }

    let topic = "ns-rules";
    system.create_topic_with(topic, namespace_topic()).await;
    let queue_with = |pointer: &str, value: Value| {
        let mut body = queue_subscription();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        body.pointer_mut(parent).unwrap()[key] = value;
        body
    };
    let message = {
        let body = queue_with(
            "/properties/deliveryConfiguration/queue/receiveLockDurationInSeconds",
            json!(30),
        );
        let (status, answer) = system.put_subscription(topic, "refused", &body).await;
        assert_refused(
            status,
            &answer,
            "properties.deliveryConfiguration.queue.receiveLockDurationInSeconds",
        )
    };
    assert_eq!(
        message,
        "properties.deliveryConfiguration.queue.receiveLockDurationInSeconds: must be between 60 and 300 seconds, got 30"
    );
    let event_hub = {
        let mut body = push_subscription(receiver.url(), json!({}), json!(null));
        // Event Grid's ServiceBusQueue: a destination eg does not deliver to.
        body["properties"]["deliveryConfiguration"]["push"]["destination"]["endpointType"] = json!("ServiceBusQueue");
        body
    };
    for (body, field) in [
        (
            queue_with("/properties/deliveryConfiguration/queue/maxDeliveryCount", json!(11)),
            "properties.deliveryConfiguration.queue.maxDeliveryCount",
        ),
        (
            // Longer than the topic's one-day retention.
            queue_with("/properties/deliveryConfiguration/queue/eventTimeToLive", json!("P2D")),
            "properties.deliveryConfiguration.queue.eventTimeToLive",
        ),
        (
            queue_with("/properties/deliveryConfiguration/deliveryMode", json!("Pull")),
            "properties.deliveryConfiguration.deliveryMode",
        ),
        (
            queue_with("/properties/eventDeliverySchema", json!("EventGridSchema")),
            "properties.eventDeliverySchema",
        ),
        (
            queue_with("/properties/destination", json!({"endpointType": "WebHook"})),
            "properties.destination",
        ),
        (
            event_hub,
            "properties.deliveryConfiguration.push.destination.endpointType",
        ),
    ] {
        let (status, answer) = system.put_subscription(topic, "refused", &body).await;
        let message = assert_refused(status, &answer, field);
        if field.ends_with("endpointType") {
            assert!(
                message.contains("WebHook") && message.contains("EventHub") && message.contains("ServiceBusQueue"),
                "{message}"
            );
        }
    }
    let (status, _) = system.get(&format!("/topics/{topic}/eventSubscriptions/refused")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a refused subscription was stored");

    // The namespace form on a custom topic.
    system
        .create_topic_with("custom-ce", json!({"inputSchema": "CloudEventSchemaV1_0"}))
        .await;
    let (status, answer) = system
        .put_subscription("custom-ce", "queued", &queue_subscription())
        .await;
    let message = assert_refused(status, &answer, "properties.deliveryConfiguration");
    assert!(message.contains("custom topic"), "{message}");

    // The older spellings: deliveryProfile on the topic, destination/retryPolicy on the
    // subscription, shown as they were written.
    let old = "ns-old";
    system
        .create_topic_with(
            old,
            json!({"inputSchema": "CloudEventSchemaV1_0", "deliveryProfile": "NamespaceTopic"}),
        )
        .await;
    let (_, shown) = system.get(&format!("/topics/{old}")).await;
    assert_eq!(shown["properties"]["publisherType"], "Custom", "{shown}");
    assert_eq!(shown["properties"]["deliveryProfile"], "NamespaceTopic", "{shown}");
    let body = json!({"properties": {
        "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": receiver.url()}},
        "retryPolicy": {"maxDeliveryCount": 3, "eventTimeToLive": "PT5M"},
    }});
    let created = system.create_subscription(old, "classic", body).await;
    assert_eq!(
        created["properties"]["retryPolicy"],
        json!({"maxDeliveryCount": 3, "eventTimeToLive": "PT5M"}),
        "{created}"
    );
    assert_eq!(created["type"], "Microsoft.EventGrid/eventSubscriptions", "{created}");
}

/// `target/<profile>/egctl`, built by `cargo build --workspace`.
fn egctl_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().and_then(Path::parent).unwrap().join("egctl");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace` first",
        path.display()
    );
    path
}

/// Runs egctl against `system` with nothing from the developer's environment; insists
/// on exit 0 and returns stdout.
fn egctl(system: &System, args: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(egctl_binary())
        .args(args)
        .env_clear()
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path())
        .env("EGCTL_URL", system.ingress_url())
        .env("EGCTL_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "egctl {args:?}: {stdout}{stderr}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn egctl_creates_and_shows_namespace_topics_and_queue_subscriptions() {
    let system = System::start(Options::default()).await;
    let out = egctl(
        &system,
        &["topics", "create", "ns-cli", "--namespace", "--retention-days", "3"],
    );
    assert!(out.contains("eventRetentionInDays") && out.contains('3'), "{out}");
    let (_, shown) = system.get("/topics/ns-cli").await;
    assert_eq!(shown["properties"]["eventRetentionInDays"], 3, "{shown}");
    assert_eq!(shown["properties"]["publisherType"], "Custom", "{shown}");

    let out = egctl(
        &system,
        &[
            "subscriptions",
            "create",
            "ns-cli",
            "pullers",
            "--queue",
            "--lock-duration",
            "120",
            "--max-delivery-count",
            "4",
            "--ttl",
            "P2D",
        ],
    );
    assert!(out.contains("Queue"), "{out}");
    let (_, sub) = system.get("/topics/ns-cli/eventSubscriptions/pullers").await;
    let queue = &sub["properties"]["deliveryConfiguration"]["queue"];
    assert_eq!(queue["receiveLockDurationInSeconds"], 120, "{sub}");
    assert_eq!(queue["maxDeliveryCount"], 4, "{sub}");
    assert_eq!(queue["eventTimeToLive"], "P2D", "{sub}");
    assert_eq!(sub["properties"]["provisioningState"], "Succeeded", "{sub}");

    let show = egctl(&system, &["subscriptions", "show", "ns-cli", "pullers"]);
    for expected in ["deliveryMode", "Queue", "receiveLockDurationInSeconds", "120", "P2D"] {
        assert!(show.contains(expected), "{expected}: {show}");
    }
    let list = egctl(&system, &["subscriptions", "list", "ns-cli"]);
    assert!(list.contains("MODE") && list.contains("Queue"), "{list}");
}
