//! Watching queue-mode subscriptions (pull delivery) as an operator: `GET /admin/status`,
//! `GET /admin/queues`, `egctl status`, `egctl queues` and `egctl subscriptions show`
//! show a queue subscription's available and locked events after consumers received
//! some with a lock, and pausing a queue subscription is refused with the reason. The
//! status page's view of the same is in `status_page`. The helpers here (a namespace
//! topic, a queue subscription, publish, receive with a lock) serve both.

use crate::egctl::Egctl;
use eg_system_tests::{Options, System, json_reply};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A namespace topic (CloudEvents) and its key.
pub(crate) async fn namespace_topic(system: &System, topic: &str) -> String {
    system
        .create_topic_with(
            topic,
            json!({"publisherType": "Custom", "inputSchema": "CloudEventSchemaV1_0", "eventRetentionInDays": 1}),
        )
        .await
}

/// A queue-mode subscription: lock 90 s, at most 4 deliveries, events live 2 hours.
pub(crate) async fn queue_subscription(system: &System, topic: &str, name: &str) {
    let body = json!({"properties": {
        "deliveryConfiguration": {"deliveryMode": "Queue", "queue": {
            "receiveLockDurationInSeconds": 90, "maxDeliveryCount": 4, "eventTimeToLive": "PT2H"}},
        "eventDeliverySchema": "CloudEventSchemaV1_0",
    }});
    let (status, answer) = system.put_subscription(topic, name, &body).await;
    assert!(status.is_success(), "PUT queue subscription {name}: {status} {answer}");
}

/// Publishes `n` CloudEvents to `topic` in one batch.
pub(crate) async fn publish(system: &System, topic: &str, key: &str, n: usize) {
    let events: Vec<Value> = (0..n)
        .map(|i| json!({"specversion": "1.0", "id": format!("q{i}"), "source": "/tests", "type": "order.created", "data": {"n": i}}))
        .collect();
    let response = system
        .http()
        .post(format!(
            "{}/topics/{topic}/api/events?api-version=2018-01-01",
            system.ingress_url()
        ))
        .header("content-type", "application/cloudevents-batch+json; charset=utf-8")
        .header("aeg-sas-key", key)
        .body(Value::Array(events).to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = json_reply(response).await;
    assert_eq!(status, StatusCode::OK, "publish: {body}");
}

/// Receives exactly `n` events of `sub` with a lock (asking again until `n` came);
/// they stay locked, unacknowledged.
pub(crate) async fn receive_locked(system: &System, topic: &str, key: &str, sub: &str, n: usize) {
    let mut received = 0;
    while received < n {
        let response = system
            .http()
            .post(format!(
                "{}/topics/{topic}/eventsubscriptions/{sub}:receive?api-version=2024-06-01&maxEvents={}&maxWaitTime=10",
                system.ingress_url(),
                n - received
            ))
            .header("aeg-sas-key", key)
            .send()
            .await
            .unwrap();
        let (status, answer) = json_reply(response).await;
        assert_eq!(status, StatusCode::OK, "receive: {answer}");
        let got = answer["value"].as_array().map_or(0, Vec::len);
        assert!(got > 0, "nothing to receive, {received} of {n} so far: {answer}");
        received += got;
    }
}

/// A subscription of `status` (`GET /admin/status`).
pub(crate) fn subscription_in<'a>(status: &'a Value, topic: &str, name: &str) -> &'a Value {
    status["topics"]
        .as_array()
        .and_then(|topics| topics.iter().find(|t| t["name"] == topic))
        .and_then(|t| t["subscriptions"].as_array())
        .and_then(|subs| subs.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no subscription {topic}/{name} in {status}"))
}

/// The words of the first line of `text` that starts with `first` and holds `second`.
fn row<'a>(text: &'a str, first: &str, second: &str) -> Vec<&'a str> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&first) && w.get(1) == Some(&second))
        .unwrap_or_else(|| panic!("no row {first} {second} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn egctl_status_shows_a_queue_subscriptions_available_and_locked_counts() {
    let system = System::start(Options::default()).await;
    let key = namespace_topic(&system, "jobs").await;
    queue_subscription(&system, "jobs", "workers").await;
    publish(&system, "jobs", &key, 5).await;
    receive_locked(&system, "jobs", &key, "workers", 2).await;

    // The status model: mode, queue figures, the topic's kind.
    let (status, body) = system.get("/status").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sub = subscription_in(&body, "jobs", "workers");
    assert_eq!(sub["deliveryMode"], "Queue", "{sub}");
    assert_eq!(sub["queue"]["available"], 3, "{sub} problems: {}", body["problems"]);
    assert_eq!(sub["queue"]["locked"], 2, "{sub}");
    assert_eq!(sub["queue"]["delayed"], 0, "{sub}");
    assert!(sub["queue"]["oldestUnacknowledgedSeconds"].is_u64(), "{sub}");
    let topic = body["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "jobs")
        .unwrap();
    assert_eq!(topic["namespaceTopic"], true, "{topic}");

    let ctl = Egctl::for_system(&system);
    let text = ctl.run(&["status"]).await;
    let queue_row = row(text.ok(), "jobs", "workers");
    assert_eq!(
        queue_row[2..5],
        ["3", "2", "0"],
        "AVAILABLE LOCKED DELAYED in\n{}",
        text.stdout
    );
    assert!(text.stdout.contains("QUEUE SUBSCRIPTION"), "{}", text.stdout);
    assert!(text.stdout.contains("jobs (namespace)"), "{}", text.stdout);
    assert!(text.stdout.contains("workers (queue)"), "{}", text.stdout);

    // GET /admin/queues and egctl queues: the same per subscription.
    let queues = ctl.run(&["queues", "--json"]).await.json();
    let listed = &queues["subscriptionQueues"][0];
    assert_eq!(
        (
            &listed["topic"],
            &listed["subscription"],
            &listed["available"],
            &listed["locked"]
        ),
        (&json!("jobs"), &json!("workers"), &json!(3), &json!(2)),
        "{queues}"
    );
    let text = ctl.run(&["queues"]).await;
    assert_eq!(
        row(text.ok(), "jobs", "workers")[2..5],
        ["3", "2", "0"],
        "{}",
        text.stdout
    );

    // A subscription's own view: its settings and its queue now.
    let shown = ctl.run(&["subscriptions", "show", "jobs", "workers"]).await;
    let lines = shown.ok();
    for wanted in [
        ["deliveryMode:", "Queue"],
        ["receiveLockDurationInSeconds:", "90"],
        ["maxDeliveryCount:", "4"],
        ["available:", "3"],
        ["locked:", "2"],
    ] {
        assert!(
            lines
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == wanted),
            "no {wanted:?} in\n{lines}"
        );
    }

    // Pausing holds back pushes; a queue has none: refused, with why, and not paused.
    let paused = ctl.run(&["subscriptions", "pause", "jobs", "workers"]).await;
    assert_ne!(paused.code, 0, "{paused:?}");
    assert!(
        paused
            .stderr
            .contains("is a queue subscription: pause holds back push deliveries only"),
        "{paused:?}"
    );
    let (status, body) = system.post("/topics/jobs/eventSubscriptions/workers/pause", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (_, after) = system.get("/status").await;
    assert_eq!(subscription_in(&after, "jobs", "workers")["paused"], false, "{after}");
}
