//! Idempotent publish (docs/deduplication.md), end to end: a topic with a duplicate
//! detection window stores an event once however many ingress copies it is published
//! through, and answers every repeat `200`; CloudEvents are the same event by `source`
//! and `id`; an event no subscription matched is not remembered. The window's end is
//! tested in eg-store (tests/duplicates.rs), where the clock is the test's.

use crate::egctl::Egctl;
use eg_system_tests::{
    Behaviour, DEADLINE, Receiver, System, duplicates, event, metric, sorted, strings, subscription,
};
use eg_system_tests::{Options, text_reply};
use reqwest::StatusCode;
use serde_json::{Value, json};

const WINDOW: &str = "PT10M";

fn order(id: &str) -> Value {
    event(id, "Order.Created", "/orders", json!({"id": id}))
}

/// Publishes `events` through the ingress at `base` with the topic's key; insists on `200`.
async fn publish_through(system: &System, base: &str, topic: &str, events: &Value) {
    let (http, url, key) = system.publisher(topic);
    let url = url.replacen(system.ingress_url(), base, 1);
    let response = http
        .post(url)
        .header("aeg-sas-key", key)
        .header("content-type", "application/json")
        .body(events.to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = text_reply(response).await;
    assert_eq!(status, StatusCode::OK, "publish through {base}: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deduplication_an_id_published_through_two_ingress_copies_is_delivered_once() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let mut system = System::start(Options::default()).await;
    system
        .create_topic_with(
            "orders",
            json!({"inputSchema": "EventGridSchema", "duplicateDetectionHistoryTimeWindow": WINDOW}),
        )
        .await;
    let (status, shown) = system.get("/topics/orders").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown["properties"]["duplicateDetectionHistoryTimeWindow"], WINDOW);
    system
        .create_subscription("orders", "audit", subscription(receiver.url(), json!({})))
        .await;
    let first = system.ingress_url().to_owned();
    let second = system.start_extra_ingress().await;

    publish_through(&system, &first, "orders", &json!([order("o-1"), order("o-2")])).await;
    // The publisher's retry lands on the other copy: answered 200, not stored again.
    publish_through(&system, &second, "orders", &json!([order("o-1")])).await;
    // A repeat inside one request, beside a new id: the first o-3 is stored.
    publish_through(
        &system,
        &second,
        "orders",
        &json!([order("o-3"), order("o-3"), order("o-2")]),
    )
    .await;

    let received = receiver.wait_for_ids(["o-1", "o-2", "o-3"], DEADLINE).await;
    assert_eq!(sorted(received.clone()), strings(&["o-1", "o-2", "o-3"]));
    assert!(duplicates(&received).is_empty(), "{received:?}");
    // The ingress copies' own count: nothing was stored twice, so nothing can arrive twice.
    let pages = system.all_metrics().await;
    assert_eq!(metric(&pages, "DuplicateEventCount", &[("topic", "orders")]), 3.0);
    assert_eq!(metric(&pages, "MatchedEventCount", &[("topic", "orders")]), 3.0);
    assert_eq!(metric(&pages, "PublishSuccessCount", &[("topic", "orders")]), 6.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deduplication_cloud_events_are_one_event_by_source_and_id_and_unmatched_ones_are_not_remembered() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let system = System::start(Options::default()).await;
    system
        .create_topic_with(
            "telemetry",
            json!({"inputSchema": "CloudEventSchemaV1_0", "duplicateDetectionHistoryTimeWindow": WINDOW}),
        )
        .await;
    let cloud = |source: &str, id: &str| json!({"specversion": "1.0", "id": id, "source": source, "type": "T"});
    // Before any subscription: matched nothing, stored nothing, remembered nothing.
    system.publish_ok("telemetry", &json!([cloud("/a", "c-0")])).await;
    system
        .create_subscription("telemetry", "audit", subscription(receiver.url(), json!({})))
        .await;
    system
        .publish_ok(
            "telemetry",
            &json!([
                cloud("/a", "c-0"),
                cloud("/a", "c-1"),
                cloud("/b", "c-1"),
                cloud("/a", "c-1")
            ]),
        )
        .await;
    // Delivered one CloudEvent per request (structured mode) or in batches: read both.
    let requests = receiver.wait_for(3, DEADLINE).await;
    let got: Vec<String> = requests
        .iter()
        .flat_map(|r| r.body.as_array().cloned().unwrap_or_else(|| vec![r.body.clone()]))
        .map(|e| {
            format!(
                "{} {}",
                e["source"].as_str().unwrap_or("?"),
                e["id"].as_str().unwrap_or("?")
            )
        })
        .collect();
    assert_eq!(
        sorted(got),
        strings(&["/a c-0", "/a c-1", "/b c-1"]),
        "c-1 from /a and from /b"
    );
    let page = system.ingress_metrics().await;
    assert_eq!(metric(&page, "DuplicateEventCount", &[("topic", "telemetry")]), 1.0);
    assert_eq!(metric(&page, "UnmatchedEventCount", &[("topic", "telemetry")]), 1.0);
}

/// The window egctl printed in a topic's field list.
fn window_shown(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|line| line.strip_prefix("duplicateDetectionHistoryTimeWindow:"))
        .map(str::trim)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deduplication_egctl_sets_shows_and_refuses_a_window() {
    let system = System::start(Options::default()).await;
    let ctl = Egctl::for_system(&system);
    let created = ctl
        .run(&["topics", "create", "orders", "--duplicate-window", "10m"])
        .await;
    assert_eq!(window_shown(created.ok()), Some(WINDOW), "{created:?}");
    let shown = ctl.run(&["topics", "show", "orders"]).await;
    assert_eq!(window_shown(shown.ok()), Some(WINDOW), "{shown:?}");
    let (_, topic) = system.get("/topics/orders").await;
    assert_eq!(topic["properties"]["duplicateDetectionHistoryTimeWindow"], WINDOW);

    let refused = ctl
        .run(&["topics", "create", "orders", "--duplicate-window", "5s"])
        .await;
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("properties.duplicateDetectionHistoryTimeWindow"),
        "the API's refusal names the field: {refused:?}"
    );
}
