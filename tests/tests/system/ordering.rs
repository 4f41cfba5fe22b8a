//! Ordered delivery per key (docs/ordered-delivery.md), end to end: a retried head
//! blocks its key only; a batch holds at most one event per key; pause and resume keep
//! each key's order; a dead-lettered head releases the next, and a redriven event is
//! delivered again; an update may not change the key; a head Redis lost is swept by the
//! scheduler, so its key goes on. Events are keyed by subject.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, Recorded, Reply, System, assert_subscription_refused, dead_letter_to,
    event, eventually,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const BY_SUBJECT: &str = r#"{"key": "subject"}"#;

fn ordered(url: &str, extra: Value) -> Value {
    let mut body = eg_system_tests::subscription(url, extra);
    body["properties"]["orderedDelivery"] = serde_json::from_str(BY_SUBJECT).unwrap();
    body
}

/// `<key>-<n>` with subject `<key>`: the key is readable from the id.
fn keyed(key: &str, n: usize) -> Value {
    event(&format!("{key}-{n}"), "Test.Happened", key, json!({"n": n}))
}

fn key_of(id: &str) -> &str {
    id.rsplit_once('-').map_or(id, |(key, _)| key)
}

/// The ordering oracle: for every key, no event is received before every event of its
/// key published earlier was accepted (answered 2xx) — `published` lists ids in
/// acceptance order. Duplicates of earlier events later are allowed (at least once).
fn assert_each_key_in_order(received: &[Recorded], published: &[&str], dead_lettered: &[&str]) {
    let mut accepted: Vec<String> = dead_lettered.iter().map(|id| (*id).to_owned()).collect();
    for request in received {
        for id in request.event_ids() {
            let earlier = published.iter().take_while(|p| **p != id);
            for before in earlier.filter(|p| key_of(p) == key_of(&id)) {
                assert!(
                    accepted.iter().any(|a| a == before),
                    "{id} was received before {before} (same key, accepted earlier) was delivered"
                );
            }
        }
        if (200..300).contains(&request.status) {
            accepted.extend(request.event_ids());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordering_a_retried_head_blocks_only_its_key() {
    const REPLIES: &[Reply] = &[Reply::status(500)];
    let system = System::start(Options::default().retry_schedule("3s")).await;
    let receiver = Receiver::start(Behaviour::Script(REPLIES)).await;
    system.create_topic("accounts").await;
    system
        .create_subscription("accounts", "Ledger", ordered(receiver.url(), json!({})))
        .await;

    system.publish_ok("accounts", &json!([keyed("a", 1)])).await;
    receiver.wait_for(1, DEADLINE).await;
    system
        .publish_ok(
            "accounts",
            &json!([keyed("b", 1), keyed("a", 2), keyed("b", 2), keyed("a", 3)]),
        )
        .await;
    let published = ["a-1", "b-1", "a-2", "b-2", "a-3"];
    receiver.wait_for_ids(published, DEADLINE).await;
    eventually(DEADLINE, "every event accepted", || async {
        let got = receiver.delivered_ids();
        published.iter().all(|id| got.iter().any(|g| g == id)).then_some(())
    })
    .await;

    let received = receiver.received();
    assert_each_key_in_order(&received, &published, &[]);
    let first_of = |id: &str| {
        received
            .iter()
            .position(|r| r.event_ids().iter().any(|e| e == id))
            .unwrap()
    };
    let a1_again = received.iter().rposition(|r| r.event_ids() == ["a-1"]).unwrap();
    assert!(
        first_of("b-2") < a1_again,
        "key b went on while a-1 waited for its retry (3 s): {:?}",
        received.iter().map(Recorded::event_ids).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordering_a_batch_holds_at_most_one_event_per_key() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("accounts").await;
    let mut body = ordered(receiver.url(), json!({}));
    body["properties"]["destination"]["properties"]["maxEventsPerBatch"] = json!(10);
    system.create_subscription("accounts", "Ledger", body).await;

    let events: Vec<Value> = (1..=10).flat_map(|n| ["a", "b", "c"].map(|k| keyed(k, n))).collect();
    let published: Vec<String> = events.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    system.publish_ok("accounts", &Value::from(events)).await;
    receiver.wait_for_ids(published.clone(), DEADLINE).await;

    let received = receiver.received();
    for request in &received {
        let mut per_key: BTreeMap<String, usize> = BTreeMap::new();
        for id in request.event_ids() {
            *per_key.entry(key_of(&id).to_owned()).or_default() += 1;
        }
        assert!(
            per_key.values().all(|n| *n == 1),
            "a batch with two of one key: {:?}",
            request.event_ids()
        );
    }
    let published: Vec<&str> = published.iter().map(String::as_str).collect();
    assert_each_key_in_order(&received, &published, &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordering_pause_and_resume_keep_each_keys_order() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("accounts").await;
    system
        .create_subscription("accounts", "Ledger", ordered(receiver.url(), json!({"paused": true})))
        .await;
    let events: Vec<Value> = (1..=5).flat_map(|n| ["a", "b"].map(|k| keyed(k, n))).collect();
    let published: Vec<String> = events.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    system.publish_ok("accounts", &Value::from(events)).await;
    eventually(DEADLINE, "the heads set aside and the rest waiting", || async {
        let (_, queues) = system.get("/queues").await;
        let total = &queues["total"];
        let ledger = json!([{"topic": "accounts", "subscription": "Ledger", "waitingInLines": 8}]);
        (total["paused"] == 2 && total["waitingInLines"] == 8 && queues["orderedSubscriptions"] == ledger).then_some(())
    })
    .await;
    assert_eq!(receiver.count(), 0);
    let (status, resumed) = system
        .post("/topics/accounts/eventSubscriptions/Ledger/resume", Some(&json!({})))
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");

    receiver.wait_for_ids(published.clone(), DEADLINE).await;
    let published: Vec<&str> = published.iter().map(String::as_str).collect();
    assert_each_key_in_order(&receiver.received(), &published, &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordering_a_dead_lettered_head_releases_the_next_and_redrive_sends_it_again() {
    const REPLIES: &[Reply] = &[Reply::status(400)];
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Script(REPLIES)).await;
    system.create_topic("accounts").await;
    let extra = json!({
        "retryPolicy": {"maxDeliveryAttempts": 1},
        "deadLetterDestination": dead_letter_to("ledger-dead"),
    });
    system
        .create_subscription("accounts", "Ledger", ordered(receiver.url(), extra))
        .await;
    system
        .publish_ok("accounts", &json!([keyed("a", 1), keyed("a", 2), keyed("a", 3)]))
        .await;
    receiver.wait_for_ids(["a-1", "a-2", "a-3"], DEADLINE).await;
    assert_each_key_in_order(&receiver.received(), &["a-1", "a-2", "a-3"], &["a-1"]);

    // Redriven, a-1 is delivered again (outside its key's order: see the docs page).
    let redriven = system.redrive_all("accounts", "Ledger").await;
    assert_eq!(redriven["redriven"], 1, "{redriven}");
    eventually(DEADLINE, "a-1 delivered after the redrive", || async {
        (receiver.delivered_ids().iter().any(|id| id == "a-1")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordering_the_key_cannot_change_and_queues_cannot_be_ordered() {
    let system = System::start(Options::default()).await;
    system.create_topic("accounts").await;
    let url = "http://127.0.0.1:9/hook";
    system
        .create_subscription("accounts", "Ledger", ordered(url, json!({})))
        .await;
    let mut by_type = ordered(url, json!({}));
    by_type["properties"]["orderedDelivery"] = json!({"key": "eventType"});
    assert_subscription_refused(&system, "accounts", "Ledger", &by_type, "properties.orderedDelivery").await;
    let (_, shown) = system.get("/topics/accounts/eventSubscriptions/Ledger").await;
    assert_eq!(shown["properties"]["orderedDelivery"], json!({"key": "subject"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordering_a_head_redis_lost_is_swept_and_its_key_goes_on_in_order() {
    const REPLIES: &[Reply] = &[Reply::status(500)];
    let system = System::start(
        Options::default()
            .retry_schedule("1h")
            .env("EG__SCHEDULER__LINE_SWEEP_INTERVAL", "300ms"),
    )
    .await;
    let receiver = Receiver::start(Behaviour::Script(REPLIES)).await;
    system.create_topic("accounts").await;
    system
        .create_subscription("accounts", "Ledger", ordered(receiver.url(), json!({})))
        .await;
    system
        .publish_ok("accounts", &json!([keyed("a", 1), keyed("a", 2)]))
        .await;
    let keys = system.keyspace();
    let retry = keys.home_partition("accounts").retry();
    eventually(DEADLINE, "a-1 failed and waits an hour for its retry", || async {
        (system.redis_cli(&["ZCARD", &retry]) == "1").then_some(())
    })
    .await;

    // Redis loses the head's retry: nothing would ever settle a-1, and a-2 waits behind it.
    system.redis_cli(&["DEL", &retry]);
    receiver.wait_for_ids(["a-1", "a-2"], DEADLINE).await;
    eventually(DEADLINE, "a-1 delivered again, then a-2", || async {
        let got = receiver.delivered_ids();
        ["a-1", "a-2"]
            .iter()
            .all(|id| got.iter().any(|g| g == id))
            .then_some(())
    })
    .await;
    assert_each_key_in_order(&receiver.received(), &["a-1", "a-2"], &[]);
}
