//! The management API's dead-letter operations — list (with paging), show, redrive by
//! event id and all, purge — checked as one sequence, so the same results are asserted
//! whatever the subscription's destination: the listing comes from eg's archive in Redis,
//! and must not depend on where the records were written.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

use crate::{DEADLINE, Receiver, System, event, eventually};

/// The receiver for [`check_dead_letter_operations`]: refuses the first three deliveries
/// for good (400: dead-lettered at once), then accepts.
pub async fn refusing_three_times() -> Receiver {
    Receiver::start(crate::Behaviour::FailFirst {
        failures: 3,
        status: 400,
    })
    .await
}

/// `Order.Created` events with the given ids.
pub fn order_events(ids: &[&str]) -> Value {
    Value::Array(
        ids.iter()
            .map(|id| event(id, "Order.Created", &format!("/orders/{id}"), json!({"id": id})))
            .collect(),
    )
}

/// Publishes `a`, `b` and `c` to `topic`, which `subscription` (one attempt, a
/// dead-letter destination, delivering to `receiver` from [`refusing_three_times`])
/// dead-letters; then lists, shows, redrives `b`, redrives all, and purges them through
/// the management API, checking each answer and that every event is delivered again
/// once, under its own id, with a fresh attempt count.
pub async fn check_dead_letter_operations(system: &System, receiver: &Receiver, topic: &str, subscription: &str) {
    for (n, id) in ["a", "b", "c"].into_iter().enumerate() {
        system.publish_ok(topic, &order_events(&[id])).await;
        receiver.wait_for(n + 1, DEADLINE).await;
    }

    let base = format!("/topics/{topic}/eventSubscriptions/{subscription}/deadLetters");
    let listed = eventually(DEADLINE, "three dead letters listed", || async {
        let (status, body) = system.get(&base).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let value = body["value"].as_array().cloned().unwrap_or_default();
        (value.len() == 3).then_some(value)
    })
    .await;
    let event_ids: Vec<&str> = listed.iter().filter_map(|r| r["eventId"].as_str()).collect();
    assert_eq!(event_ids, ["a", "b", "c"], "oldest first");
    for r in &listed {
        assert_eq!(r["deadLetterReason"], "NonRetriableFailure", "{r}");
        assert_eq!(r["lastHttpStatusCode"], 400, "{r}");
        assert_eq!(r["eventType"], "Order.Created", "{r}");
        assert!(r["redrivenAt"].is_null(), "{r}");
    }
    // Paging: one at a time, following the cursor.
    let (_, first) = system.get(&format!("{base}?limit=1")).await;
    assert_eq!(first["value"][0]["eventId"], "a");
    let cursor = first["nextCursor"].as_str().expect("a cursor after the first page");
    let (_, second) = system.get(&format!("{base}?limit=1&cursor={cursor}")).await;
    assert_eq!(second["value"][0]["eventId"], "b");

    let id_of = |event_id: &str| {
        listed
            .iter()
            .find(|r| r["eventId"] == event_id)
            .and_then(|r| r["id"].as_str())
            .unwrap_or_else(|| panic!("no record id for {event_id}"))
            .to_owned()
    };
    let (status, shown) = system.get(&format!("{base}/{}", id_of("a"))).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["record"]["id"], "a");
    assert_eq!(shown["record"]["deadLetterReason"], "NonRetriableFailure");

    // Selected by event id: only b goes back.
    let (status, progress) = system
        .post(&format!("{base}/redrive"), Some(&json!({"eventIds": ["b"]})))
        .await;
    assert_eq!(status, StatusCode::OK, "{progress}");
    assert_eq!(progress, json!({"redriven": 1, "remaining": 0}));
    receiver.wait_for(4, DEADLINE).await;

    // All: a and c go back; b is not sent twice.
    let (_, progress) = system
        .post(&format!("{base}/redrive"), Some(&json!({"all": true})))
        .await;
    assert_eq!(progress, json!({"redriven": 2, "remaining": 0}));
    receiver.wait_for(6, DEADLINE).await;
    let (_, again) = system
        .post(&format!("{base}/redrive"), Some(&json!({"all": true})))
        .await;
    assert_eq!(again, json!({"redriven": 0, "remaining": 0}), "a redrive is idempotent");
    // A second delivery of a redriven event would come within this pause.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let redelivered: Vec<_> = receiver.received().into_iter().skip(3).collect();
    let mut ids: Vec<String> = redelivered.iter().flat_map(|r| r.event_ids()).collect();
    ids.sort();
    assert_eq!(
        ids,
        ["a", "b", "c"],
        "each redriven event delivered once, under its own id"
    );
    assert!(
        redelivered.iter().all(|r| r.header("aeg-delivery-count") == Some("0")),
        "fresh attempt counts"
    );

    // The records stay, marked, until purged.
    let (_, listed) = system.get(&base).await;
    let value = listed["value"].as_array().cloned().unwrap_or_default();
    assert_eq!(value.len(), 3, "{listed}");
    assert!(value.iter().all(|r| r["redrivenAt"].is_string()), "{listed}");
    let (_, purged) = system
        .post(&format!("{base}/purge"), Some(&json!({"ids": [id_of("a")]})))
        .await;
    assert_eq!(purged, json!({"purged": 1, "remaining": 0}));
    let (_, purged) = system.post(&format!("{base}/purge"), Some(&json!({"all": true}))).await;
    assert_eq!(purged, json!({"purged": 2, "remaining": 0}));
    let (_, listed) = system.get(&base).await;
    assert_eq!(listed["value"], json!([]));
    assert_eq!(receiver.count(), 6);
}
