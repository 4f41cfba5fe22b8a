//! Protecting endpoints and the system, through the four binaries: output batching
//! (behaviour.md#output-batching); probation, endpoint validation and the outbound address
//! policy (behaviour.md#protecting-endpoints-and-the-system); late success
//! (behaviour.md#retry-schedule-and-policy) and `Retry-After`
//! (behaviour.md#what-a-failure-leads-to).

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, Recorded, Reply, System, Validation, dead_letter_to, event, eventually,
    ids_of, json_reply, metric, numbered_events, subscription, tally, wait_subscription_successes,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

// ----- helpers -----

/// `count` numbered events `<prefix>-0 …`, each with `pad` bytes of padding in its data.
fn padded_events(prefix: &str, count: usize, pad: usize) -> Vec<Value> {
    let mut events = numbered_events(prefix, 0..count);
    for event in &mut events {
        event["data"]["pad"] = json!("x".repeat(pad));
    }
    events
}

/// A subscription with output batching on (`destination.properties`, as Event Grid has it).
fn batched(endpoint_url: &str, max_events: u32, kilobytes: u32, extra: Value) -> Value {
    let mut body = subscription(endpoint_url, extra);
    let destination = &mut body["properties"]["destination"]["properties"];
    destination["maxEventsPerBatch"] = json!(max_events);
    destination["preferredBatchSizeInKilobytes"] = json!(kilobytes);
    body
}

async fn get_subscription(system: &System, topic: &str, name: &str) -> Value {
    let path = format!("/topics/{topic}/eventSubscriptions/{name}");
    let (status, body) = system.get(&path).await;
    assert_eq!(status, StatusCode::OK, "GET {path}: {body}");
    body
}

fn provisioning_state(resource: &Value) -> &str {
    resource["properties"]["provisioningState"]
        .as_str()
        .unwrap_or_else(|| panic!("no provisioningState in {resource}"))
}

async fn delivery_health(system: &System, topic: &str, name: &str) -> Value {
    let path = format!("/topics/{topic}/eventSubscriptions/{name}/deliveryHealth");
    let (status, body) = system.get(&path).await;
    assert_eq!(status, StatusCode::OK, "GET {path}: {body}");
    body
}

fn delivery_count(request: &Recorded) -> u32 {
    request
        .header("aeg-delivery-count")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric aeg-delivery-count: {:?}", request.headers))
}

/// The requests (in arrival order) that carried event `id`.
fn requests_with<'a>(requests: &'a [Recorded], id: &str) -> Vec<&'a Recorded> {
    requests
        .iter()
        .filter(|r| r.event_ids().iter().any(|e| e == id))
        .collect()
}

// ----- 1. output batching (behaviour.md#output-batching) -----

/// 25 events published in one request to each of three topics: batches of at most 10,
/// batching off, and a batch that fails once. (One topic each, one after another: a sender
/// reads at most as many deliveries at once as it has free slots, 64, and cuts batches
/// from what it read.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_hold_at_most_max_events_and_every_event_arrives_once() {
    let system = System::start(Options::default()).await;
    let batching = Receiver::start(Behaviour::Status(200)).await;
    let single = Receiver::start(Behaviour::Status(200)).await;
    let flaky = Receiver::start(Behaviour::FailFirst {
        failures: 1,
        status: 500,
    })
    .await;
    let published = padded_events("b", 25, 20);
    let all_ids = ids_of(&published);
    for (topic, body) in [
        ("batched", batched(batching.url(), 10, 64, json!({}))),
        ("single", subscription(single.url(), json!({}))),
        ("flaky", batched(flaky.url(), 10, 64, json!({}))),
    ] {
        system.create_topic(topic).await;
        system.create_subscription(topic, "Sub", body).await;
    }
    // One topic at a time: 75 deliveries ready together would be more than one read's 64
    // free slots, and the read that takes the remainder cuts a smaller batch from it.
    for topic in ["batched", "single", "flaky"] {
        system.publish_ok(topic, &Value::Array(published.clone())).await;
        wait_subscription_successes(&system, topic, "sub", 25.0).await;
    }

    // Batched: every request a JSON array of 2..=10 events, every event exactly once.
    let requests = batching.received();
    let sizes: Vec<usize> = requests.iter().map(|r| r.event_ids().len()).collect();
    eprintln!("batching: 25 events arrived in requests of {sizes:?}");
    for request in &requests {
        assert!(request.body.is_array(), "not a JSON array: {}", request.raw_body);
        let n = request.event_ids().len();
        assert!(
            (2..=10).contains(&n),
            "a request with {n} events (maxEventsPerBatch 10; 25 events were ready together): {sizes:?}"
        );
        assert_eq!(request.header("aeg-delivery-count"), Some("0"));
        let content_type = request.header("content-type").unwrap_or_default();
        assert!(content_type.starts_with("application/json"), "{content_type}");
    }
    let ids = batching.event_ids();
    assert_eq!(ids.len(), 25, "duplicates: {:?}", tally(&ids));
    assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), all_ids);

    // Batching off: one event per request, still an array.
    let requests = single.received();
    assert_eq!(requests.len(), 25);
    for request in &requests {
        assert!(request.body.is_array(), "not a JSON array: {}", request.raw_body);
        assert_eq!(request.event_ids().len(), 1, "{}", request.raw_body);
    }
    assert_eq!(single.event_ids().into_iter().collect::<BTreeSet<_>>(), all_ids);

    // The first batch failed (500) as a whole: each of its events was retried, counted
    // as its own second attempt, and every event was accepted exactly once.
    let requests = flaky.received();
    let failed = requests[0].event_ids();
    assert_eq!(requests[0].status, 500);
    assert!(failed.len() > 1, "the failed request was not a batch: {failed:?}");
    let accepted = flaky.delivered_ids();
    assert_eq!(accepted.len(), 25, "accepted more than once: {:?}", tally(&accepted));
    assert_eq!(accepted.into_iter().collect::<BTreeSet<_>>(), all_ids);
    for id in &failed {
        let carrying = requests_with(&requests, id);
        assert_eq!(carrying.len(), 2, "{id} was sent {} times", carrying.len());
        assert_eq!(
            delivery_count(carrying[1]),
            1,
            "{id}'s retry should be its attempt 1: {:?}",
            carrying[1].event_ids()
        );
    }
    for id in all_ids.iter().filter(|id| !failed.contains(id)) {
        assert_eq!(requests_with(&requests, id).len(), 1, "{id} was retried");
    }
    let text = system.sender_metrics().await;
    assert_eq!(
        metric(
            &text,
            "DeliveryAttemptFailCount",
            &[("topic", "flaky"), ("outcome", "GenericError")]
        ),
        failed.len() as f64,
        "a failed batch counts one failed attempt per event"
    );
}

/// `preferredBatchSizeInKilobytes: 1`: small events share requests of at most 1 KB,
/// ~600-byte events go one per request, a 2 KB event goes alone and is not dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_stay_under_the_preferred_size_and_an_oversize_event_goes_alone() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("sized").await;
    system
        .create_subscription("sized", "Sized", batched(receiver.url(), 10, 1, json!({})))
        .await;

    let mut published = padded_events("small", 6, 150);
    published.extend(padded_events("medium", 3, 450));
    published.insert(4, padded_events("big", 1, 2048).remove(0));
    published.extend(padded_events("tail", 3, 150));
    let all_ids = ids_of(&published);
    let count = published.len();
    system.publish_ok("sized", &Value::Array(published)).await;
    wait_subscription_successes(&system, "sized", "sized", count as f64).await;

    let requests = receiver.received();
    let shape: Vec<(usize, usize)> = requests
        .iter()
        .map(|r| (r.event_ids().len(), r.raw_body.len()))
        .collect();
    eprintln!("batching by size: (events, bytes) per request {shape:?}");
    for request in &requests {
        let ids = request.event_ids();
        assert!(request.body.is_array(), "not a JSON array: {}", request.raw_body);
        if ids.len() > 1 {
            assert!(
                request.raw_body.len() <= 1024,
                "a batch of {} events is {} bytes, over the preferred 1 KB: {ids:?}",
                ids.len(),
                request.raw_body.len()
            );
        }
        let medium = ids.iter().filter(|id| id.starts_with("medium")).count();
        assert!(medium <= 1, "two ~600-byte events in one 1 KB batch: {ids:?}");
        if ids.iter().any(|id| id.starts_with("big")) {
            assert_eq!(ids, ["big-0"], "the oversize event must go alone");
            assert!(request.raw_body.len() > 2048, "{}", request.raw_body.len());
        }
    }
    assert!(
        requests.iter().any(|r| r.event_ids().len() > 1),
        "small events were not batched at all: {shape:?}"
    );
    let ids = receiver.event_ids();
    assert_eq!(ids.len(), count, "duplicates: {:?}", tally(&ids));
    assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), all_ids);
}

/// The preferred size is about what the endpoint receives: a custom-schema topic
/// delivered in the Event Grid schema wraps each small object in an envelope several
/// times its size, and batches must still stay under 1 KB (so they are not cut by the
/// size of the published object).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preferred_batch_size_applies_to_the_delivered_body() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let mapping = json!({
        "inputSchemaMappingType": "Json",
        "properties": {
            "id": {"sourceField": "n"},
            "eventTime": {"sourceField": "at"},
            "eventType": {"defaultValue": "Custom.Small.Thing.Happened"},
            "subject": {"defaultValue": "/custom/objects/from/a/device/somewhere"},
            "dataVersion": {"defaultValue": "1.0"}
        }
    });
    let topic_body = json!({"properties": {"inputSchema": "CustomEventSchema", "inputSchemaMapping": mapping}});
    let (status, topic) = json_reply(system.admin(Method::PUT, "/topics/custom", Some(&topic_body)).await).await;
    assert!(status.is_success(), "{topic}");
    let extra = json!({"eventDeliverySchema": "EventGridSchema"});
    system
        .create_subscription("custom", "Wrapped", batched(receiver.url(), 50, 1, extra))
        .await;
    let (_, keys) = system.post("/topics/custom/listKeys", None).await;
    let objects: Vec<Value> = (0..30)
        .map(|i| json!({"n": format!("c{i}"), "at": "2026-01-02T03:04:05Z"}))
        .collect();
    let response = system
        .publish_raw(
            "custom",
            keys["key1"].as_str(),
            Value::Array(objects).to_string().into_bytes(),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK, "{}", response.text().await.unwrap());
    wait_subscription_successes(&system, "custom", "wrapped", 30.0).await;

    let requests = receiver.received();
    let shape: Vec<(usize, usize)> = requests
        .iter()
        .map(|r| (r.event_ids().len(), r.raw_body.len()))
        .collect();
    eprintln!("batching converted events, 1 KB preferred: (events, bytes) per request {shape:?}");
    assert_eq!(receiver.event_ids().len(), 30);
    for (events, bytes) in &shape {
        assert!(
            *events == 1 || *bytes <= 1024,
            "a batch of {events} events is {bytes} bytes, over the preferred 1 KB: {shape:?}"
        );
    }
}

/// A batch mixing a retried event with fresh ones fails: each event keeps its own
/// attempt count, so the retried one is dead-lettered and the fresh ones are retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_of_a_failed_batch_keeps_its_own_attempt_count() {
    // One partition, so the retried event and the fresh ones share a ready stream and
    // are read (and batched) together.
    let mut system = System::start(
        Options::default()
            .retry_schedule("3s")
            .env("EG__REDIS__PARTITIONS", "1"),
    )
    .await;
    let receiver = Receiver::start(Behaviour::Status(500)).await;
    system.create_topic("mixed").await;
    let extra = json!({
        "retryPolicy": {"maxDeliveryAttempts": 2, "eventTimeToLiveInMinutes": 1440},
        "deadLetterDestination": dead_letter_to("mixed"),
    });
    system
        .create_subscription("mixed", "Mix", batched(receiver.url(), 10, 64, extra))
        .await;

    // "old" fails once and waits 3 s in the retry set; the sender is stopped meanwhile.
    system
        .publish_ok("mixed", &json!([event("old", "Test.Happened", "/old", json!(1))]))
        .await;
    receiver.wait_for(1, DEADLINE).await;
    eventually(DEADLINE, "the failed event in the retry set", || async {
        (system.redis_cli(&["ZCARD", &system.keyspace().partition(0).retry()]) == "1").then_some(())
    })
    .await;
    system.kill_sender(0);
    system
        .publish_ok(
            "mixed",
            &json!([
                event("new-1", "Test.Happened", "/new/1", json!(2)),
                event("new-2", "Test.Happened", "/new/2", json!(3)),
            ]),
        )
        .await;
    // Two ready entries: the promoted retry, and the fresh events as one batch entry.
    eventually(DEADLINE, "the retry promoted next to the fresh events", || async {
        (system.redis_cli(&["XLEN", &system.keyspace().partition(0).ready()]) == "2").then_some(())
    })
    .await;
    system.start_sender().await;

    let records = system.wait_dead_letters(3, DEADLINE).await;
    let requests = receiver.received();
    let shapes: Vec<(Vec<String>, u32)> = requests.iter().map(|r| (r.event_ids(), delivery_count(r))).collect();
    eprintln!("mixed batch: requests (events, aeg-delivery-count) {shapes:?}");
    assert_eq!(requests[0].event_ids(), ["old"]);
    let mut second = requests[1].event_ids();
    second.sort();
    assert_eq!(second, ["new-1", "new-2", "old"], "the three ready events in one batch");
    // Only the fresh events had an attempt left; their retries are due a jitter apart,
    // so they may or may not share a request.
    let mut rest: Vec<String> = requests[2..].iter().flat_map(Recorded::event_ids).collect();
    rest.sort();
    assert_eq!(rest, ["new-1", "new-2"], "{shapes:?}");
    for request in &requests[2..] {
        assert_eq!(delivery_count(request), 1, "{shapes:?}");
    }

    assert_eq!(records.len(), 3, "{records:?}");
    let by_id: BTreeMap<String, &Value> = records
        .iter()
        .map(|r| (r.record["id"].as_str().unwrap().to_owned(), &r.record))
        .collect();
    for id in ["old", "new-1", "new-2"] {
        let record = by_id[id];
        assert_eq!(record["deadLetterReason"], "MaxDeliveryAttemptsExceeded", "{record}");
        assert_eq!(record["deliveryAttempts"], 2, "{record}");
        assert_eq!(record["lastHttpStatusCode"], 500, "{record}");
        assert_eq!(requests_with(&requests, id).len(), 2, "{id}");
    }
    let (old_last, new_last) = (
        by_id["old"]["lastDeliveryAttemptTime"].as_str().unwrap(),
        by_id["new-1"]["lastDeliveryAttemptTime"].as_str().unwrap(),
    );
    assert!(
        old_last < new_last,
        "old's last attempt ({old_last}) was the shared batch, before new-1's ({new_last})"
    );
}

// ----- 2. probation (behaviour.md#protecting-endpoints-and-the-system) -----

/// Two failures put the endpoint on probation for 8 s: nothing reaches it meanwhile,
/// held-back deliveries are not charged an attempt, the state shows in `deliveryHealth`
/// and the scheduler's gauges, and one successful probe ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_on_probation_gets_nothing_until_one_probe_succeeds() {
    const PROBATION: Duration = Duration::from_secs(8);
    let system = System::start(
        Options::default()
            .senders(2)
            .env("EG__PROBATION__FAILURE_THRESHOLD", "2")
            .env("EG__PROBATION__LENGTHS", "*=8s"),
    )
    .await;
    let receiver = Receiver::start(Behaviour::FailFirst {
        failures: 2,
        status: 500,
    })
    .await;
    system.create_topic("fragile").await;
    let extra = json!({
        "retryPolicy": {"maxDeliveryAttempts": 10, "eventTimeToLiveInMinutes": 1440},
        "deadLetterDestination": dead_letter_to("fragile"),
    });
    system
        .create_subscription("fragile", "Ward", subscription(receiver.url(), extra))
        .await;

    system
        .publish_ok("fragile", &json!([event("first", "Test.Happened", "/1", json!(1))]))
        .await;
    // Attempt 0 and its retry 1 s later both fail: the threshold is reached.
    let failures = receiver.wait_for(2, DEADLINE).await;
    let probation_began = failures[1].at;
    let health = eventually(DEADLINE, "deliveryHealth to show Probation", || async {
        let health = delivery_health(&system, "fragile", "Ward").await;
        (health["state"] == "Probation").then_some(health)
    })
    .await;
    assert!(
        health["probationUntil"].as_str().is_some_and(|t| t.contains('T')),
        "{health}"
    );
    assert_eq!(health["consecutiveFailures"], 2, "{health}");
    assert_eq!(health["lastFailureOutcome"], "GenericError", "{health}");

    // Published during probation: held back, not attempted.
    system
        .publish_ok(
            "fragile",
            &json!([
                event("during-1", "Test.Happened", "/2", json!(2)),
                event("during-2", "Test.Happened", "/3", json!(3)),
            ]),
        )
        .await;
    let labels = [("topic", "fragile"), ("subscription", "ward")];
    eventually(DEADLINE, "EndpointOnProbation 1 on the scheduler", || async {
        let text = system.scheduler_metrics().await;
        (metric(&text, "EndpointOnProbation", &labels) == 1.0).then_some(())
    })
    .await;

    // After probation: the retry of "first" and the two held-back events arrive.
    wait_subscription_successes(&system, "fragile", "ward", 3.0).await;
    let requests = receiver.received();
    let shapes: Vec<(Vec<String>, u32, Duration)> = requests
        .iter()
        .map(|r| (r.event_ids(), delivery_count(r), r.at - probation_began))
        .collect();
    eprintln!("probation: requests (events, aeg-delivery-count, since probation began) {shapes:?}");
    assert_eq!(requests.len(), 5, "{shapes:?}");
    for request in &requests[2..] {
        let waited = request.at - probation_began;
        assert!(
            waited >= PROBATION - Duration::from_millis(300),
            "a request reached the endpoint {waited:?} into an {PROBATION:?} probation: {shapes:?}"
        );
        assert_eq!(request.status, 200);
    }
    // Held back uncharged: "first" had 2 attempts, the others none.
    let first = requests_with(&requests, "first");
    assert_eq!(first.len(), 3, "{shapes:?}");
    assert_eq!(delivery_count(first[2]), 2, "a hold-back was charged as an attempt");
    for id in ["during-1", "during-2"] {
        let carrying = requests_with(&requests, id);
        assert_eq!(carrying.len(), 1, "{shapes:?}");
        assert_eq!(
            delivery_count(carrying[0]),
            0,
            "{id}: a hold-back was charged as an attempt"
        );
    }

    // Healthy again, and new events flow at once.
    eventually(DEADLINE, "deliveryHealth back to Healthy", || async {
        let health = delivery_health(&system, "fragile", "Ward").await;
        (health["state"] == "Healthy").then_some(())
    })
    .await;
    let before = Instant::now();
    system
        .publish_ok("fragile", &json!([event("after", "Test.Happened", "/4", json!(4))]))
        .await;
    let requests = receiver.wait_for(6, DEADLINE).await;
    assert_eq!(requests[5].event_ids(), ["after"]);
    assert_eq!(delivery_count(&requests[5]), 0);
    assert!(
        requests[5].at - before < Duration::from_secs(3),
        "delivered {:?} after publishing to a healthy endpoint",
        requests[5].at - before
    );
    eventually(DEADLINE, "EndpointOnProbation back to 0", || async {
        let text = system.scheduler_metrics().await;
        (text.contains("EndpointOnProbation") && metric(&text, "EndpointOnProbation", &labels) == 0.0).then_some(())
    })
    .await;
    let text = system.sender_metrics().await;
    assert_eq!(
        metric(&text, "EndpointProbationCount", &labels),
        1.0,
        "one probation, started once across both senders"
    );
    assert!(metric(&text, "DeliveryDelayedCount", &labels) >= 3.0, "{text}");
    assert_eq!(
        metric(&text, "DeliveryAttemptFailCount", &labels),
        2.0,
        "hold-backs were counted as failed attempts"
    );
    assert!(system.dead_letter_records().is_empty());
}

/// A failed probe starts a longer probation (growth 2: 3 s, then 6 s); a success resets
/// the ladder, so the next probation is 3 s again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probation_grows_while_probes_fail_and_resets_after_a_success() {
    const REPLIES: &[Reply] = &[
        Reply::status(500),
        Reply::status(500),
        Reply::status(500), // the first probe
        Reply::status(200), // the second probe
        Reply::status(500), // a new event, after recovery
        Reply::status(500),
    ];
    let system = System::start(
        Options::default()
            .env("EG__PROBATION__FAILURE_THRESHOLD", "2")
            .env("EG__PROBATION__LENGTHS", "*=3s")
            .env("EG__PROBATION__GROWTH", "2"),
    )
    .await;
    let receiver = Receiver::start(Behaviour::Script(REPLIES)).await;
    system.create_topic("ladder").await;
    system
        .create_subscription("ladder", "Climb", subscription(receiver.url(), json!({})))
        .await;
    system
        .publish_ok("ladder", &json!([event("one", "Test.Happened", "/1", json!(1))]))
        .await;
    receiver.wait_for(3, DEADLINE).await;
    let health = eventually(DEADLINE, "the second probation", || async {
        let health = delivery_health(&system, "ladder", "Climb").await;
        (health["state"] == "Probation" && health["probationLevel"] == 2).then_some(health)
    })
    .await;
    assert_eq!(health["consecutiveFailures"], 3, "{health}");
    wait_subscription_successes(&system, "ladder", "climb", 1.0).await;
    eventually(DEADLINE, "deliveryHealth back to Healthy", || async {
        let health = delivery_health(&system, "ladder", "Climb").await;
        (health["state"] == "Healthy").then_some(())
    })
    .await;
    system
        .publish_ok("ladder", &json!([event("two", "Test.Happened", "/2", json!(2))]))
        .await;
    wait_subscription_successes(&system, "ladder", "climb", 2.0).await;

    let requests = receiver.received();
    let gaps: Vec<Duration> = requests.windows(2).map(|w| w[1].at - w[0].at).collect();
    eprintln!("probation ladder: gaps between requests {gaps:?}");
    assert_eq!(requests.len(), 7, "{gaps:?}");
    let secs = Duration::from_secs;
    let tolerance = Duration::from_millis(300);
    // Upper bounds: below the next rung of the ladder (a busy machine may be late).
    assert!(
        gaps[1] >= secs(3) - tolerance && gaps[1] < secs(6),
        "first probation: {gaps:?}"
    );
    assert!(
        gaps[2] >= secs(6) - tolerance && gaps[2] < secs(12),
        "second, doubled: {gaps:?}"
    );
    assert!(
        gaps[5] >= secs(3) - tolerance && gaps[5] < secs(6),
        "reset after the success: {gaps:?}"
    );
    let counts: Vec<u32> = requests.iter().map(delivery_count).collect();
    assert_eq!(counts, [0, 1, 2, 3, 0, 1, 2], "held-back deliveries are not charged");
}

/// A dynamic delivery property whose value, read from the event at delivery time, no
/// header can carry: 100 KB, which the receiver (as common servers) answers with `431`,
/// or a NUL. The delivery goes out once without that header, nothing counts against the
/// endpoint (one failure would put it on probation here), and a second subscription of
/// the same URL keeps delivering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_property_no_header_can_carry_is_left_out_and_not_held_against_the_endpoint() {
    let system = System::start(
        Options::default()
            .env("EG__PROBATION__FAILURE_THRESHOLD", "1")
            .env("EG__PROBATION__LENGTHS", "*=1h"),
    )
    .await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("noted").await;
    let mut mapped = subscription(receiver.url(), json!({}));
    mapped["properties"]["destination"]["properties"]["deliveryAttributeMappings"] = json!([
        {"name": "x-note", "type": "Dynamic", "properties": {"sourceField": "data.note"}},
        {"name": "x-team", "type": "Static", "properties": {"value": "billing"}},
    ]);
    system.create_subscription("noted", "Mapped", mapped).await;
    system
        .create_subscription("noted", "Plain", subscription(receiver.url(), json!({})))
        .await;

    let notes = [
        ("huge", json!("n".repeat(100 * 1024))),
        ("nul", json!("a\u{0}b")),
        ("fine", json!("ok")),
    ];
    for (id, note) in &notes {
        system
            .publish_ok(
                "noted",
                &json!([event(id, "Test.Happened", "/1", json!({"note": note}))]),
            )
            .await;
    }
    wait_subscription_successes(&system, "noted", "mapped", 3.0).await;
    wait_subscription_successes(&system, "noted", "plain", 3.0).await;

    let requests = receiver.received();
    // (events, subscription, x-note length, status) of each request.
    type Shape<'a> = (Vec<String>, Option<&'a str>, Option<usize>, u16);
    let shapes: Vec<Shape> = requests
        .iter()
        .map(|r| {
            (
                r.event_ids(),
                r.header("aeg-subscription-name"),
                r.header("x-note").map(str::len),
                r.status,
            )
        })
        .collect();
    eprintln!("requests (events, subscription, x-note length, status): {shapes:?}");
    assert_eq!(requests.len(), 6, "one request per event and subscription: {shapes:?}");
    assert!(requests.iter().all(|r| r.status == 200), "{shapes:?}");
    let of_mapped = |id: &str| {
        let carrying: Vec<&Recorded> = requests_with(&requests, id)
            .into_iter()
            .filter(|r| r.header("aeg-subscription-name") == Some("MAPPED"))
            .collect();
        assert_eq!(carrying.len(), 1, "{id}: {shapes:?}");
        carrying[0]
    };
    for id in ["huge", "nul"] {
        let request = of_mapped(id);
        assert_eq!(request.header("x-note"), None, "{id}: the header was sent");
        assert_eq!(
            request.header("x-team"),
            Some("billing"),
            "{id}: the other properties go"
        );
        assert_eq!(delivery_count(request), 0, "{id}: attempted more than once");
    }
    assert_eq!(of_mapped("fine").header("x-note"), Some("ok"));

    let health = delivery_health(&system, "noted", "Mapped").await;
    assert_eq!(health["state"], "Healthy", "{health}");
    assert_eq!(health["consecutiveFailures"], 0, "{health}");
    assert!(health.get("lastFailureOutcome").is_none(), "{health}");

    // Why the header was left out is logged, naming the property and never its value.
    let logs = system.logs();
    let said: Vec<&str> = logs
        .iter()
        .flat_map(|(_, text)| text.lines())
        .filter(|line| line.contains("delivery property left out"))
        .collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said.iter()
            .all(|line| line.contains("x-note") && !line.contains("nnnnnnnn")),
        "{said:?}"
    );
    assert!(said.iter().any(|line| line.contains("too_long")), "{said:?}");
    assert!(said.iter().any(|line| line.contains("control_character")), "{said:?}");
}

// ----- 3. endpoint validation (behaviour.md#protecting-endpoints-and-the-system) -----

/// The Event Grid handshake: a consenting endpoint is `Succeeded` at once; one that
/// ignores it is `AwaitingManualAction` and gets nothing until a GET on its validation URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_ignores_the_handshake_gets_nothing_until_validated_by_get() {
    let system = System::start(Options::default()).await;
    let consenting = Receiver::start(Behaviour::Status(200)).await;
    let silent = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    system.create_topic("guarded").await;

    let created = system
        .create_subscription("guarded", "Willing", subscription(consenting.url(), json!({})))
        .await;
    assert_eq!(provisioning_state(&created), "Succeeded", "{created}");
    let handshakes = consenting.validations();
    assert_eq!(handshakes.len(), 1);
    assert_eq!(handshakes[0].header("aeg-event-type"), Some("SubscriptionValidation"));
    assert_eq!(
        handshakes[0].body[0]["eventType"],
        "Microsoft.EventGrid.SubscriptionValidationEvent"
    );

    let created = system
        .create_subscription("guarded", "Silent", subscription(silent.url(), json!({})))
        .await;
    assert_eq!(provisioning_state(&created), "AwaitingManualAction", "{created}");
    let handshakes = silent.validations();
    assert_eq!(handshakes.len(), 1);
    let data = &handshakes[0].body[0]["data"];
    let validation_url = data["validationUrl"]
        .as_str()
        .unwrap_or_else(|| panic!("no data.validationUrl: {}", handshakes[0].raw_body))
        .to_owned();
    let code = data["validationCode"].as_str().unwrap().to_owned();
    assert!(validation_url.contains(&code), "{validation_url}");

    // Published while awaiting: delivered to the validated subscription only.
    system
        .publish_ok("guarded", &json!([event("early", "Test.Happened", "/1", json!(1))]))
        .await;
    wait_subscription_successes(&system, "guarded", "willing", 1.0).await;
    let ingress = system.ingress_metrics().await;
    assert_eq!(
        metric(&ingress, "MatchedEventCount", &[("topic", "guarded")]),
        1.0,
        "the unvalidated subscription matched: {ingress}"
    );

    // A wrong code is refused; the right one validates.
    let wrong = validation_url.replace(&code, "00000000-0000-0000-0000-000000000000");
    let answer = system.http().get(&wrong).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    let answer = system.http().get(&validation_url).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK, "{}", answer.text().await.unwrap());
    let resource = get_subscription(&system, "guarded", "Silent").await;
    assert_eq!(provisioning_state(&resource), "Succeeded", "{resource}");

    system
        .publish_ok("guarded", &json!([event("late", "Test.Happened", "/2", json!(2))]))
        .await;
    wait_subscription_successes(&system, "guarded", "silent", 1.0).await;
    wait_subscription_successes(&system, "guarded", "willing", 2.0).await;
    assert_eq!(
        silent.event_ids(),
        ["late"],
        "the event published before validation was delivered"
    );
    assert_eq!(silent.validations().len(), 1, "validated by GET, no second handshake");

    // Moved to another endpoint before consenting: the first endpoint's code no longer
    // validates anything, the new endpoint's does.
    let first = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    let second = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    let url_of = |r: &Receiver| {
        r.validations()[0].body[0]["data"]["validationUrl"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    system
        .create_subscription("guarded", "Moving", subscription(first.url(), json!({})))
        .await;
    let moved = system
        .create_subscription("guarded", "Moving", subscription(second.url(), json!({})))
        .await;
    assert_eq!(provisioning_state(&moved), "AwaitingManualAction", "{moved}");
    let answer = system.http().get(url_of(&first)).send().await.unwrap();
    assert_eq!(
        answer.status(),
        StatusCode::NOT_FOUND,
        "the old endpoint's code validated the new endpoint"
    );
    let resource = get_subscription(&system, "guarded", "Moving").await;
    assert_eq!(provisioning_state(&resource), "AwaitingManualAction", "{resource}");
    let answer = system.http().get(url_of(&second)).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let resource = get_subscription(&system, "guarded", "Moving").await;
    assert_eq!(provisioning_state(&resource), "Succeeded", "{resource}");
}

/// Pointing a subscription at a new endpoint restarts validation; deliveries already
/// queued (a retry) must not reach the new endpoint before it consents, or validation
/// could be bypassed by queueing events first and changing the URL afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_deliveries_do_not_reach_a_new_endpoint_before_it_consents() {
    let system = System::start(Options::default().retry_schedule("3s")).await;
    let old = Receiver::start(Behaviour::Status(500)).await;
    let new = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    system.create_topic("moved").await;
    let created = system
        .create_subscription("moved", "Mover", subscription(old.url(), json!({})))
        .await;
    assert_eq!(provisioning_state(&created), "Succeeded");
    system
        .publish_ok("moved", &json!([event("queued", "Test.Happened", "/1", json!(1))]))
        .await;
    let failed = old.wait_for(1, DEADLINE).await;
    // The retry is queued for 3 s later; meanwhile the subscription moves.
    let moved = system
        .create_subscription("moved", "Mover", subscription(new.url(), json!({})))
        .await;
    assert_eq!(provisioning_state(&moved), "AwaitingManualAction", "{moved}");
    assert_eq!(new.validations().len(), 1);

    let watch_until = failed[0].at + Duration::from_secs(7);
    eventually(DEADLINE, "the retry's due time to pass", || async {
        assert_eq!(
            new.count(),
            0,
            "an endpoint that has not consented got {:?}",
            new.event_ids()
        );
        (Instant::now() >= watch_until).then_some(())
    })
    .await;
    let resource = get_subscription(&system, "moved", "Mover").await;
    assert_eq!(provisioning_state(&resource), "AwaitingManualAction", "{resource}");
}

/// With a 2 s manual window, an unanswered handshake turns into `Failed` and the GET
/// on the validation URL is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_validation_window_that_runs_out_fails_the_subscription() {
    let system = System::start(Options::default().env("EG__VALIDATION__MANUAL_WINDOW", "2s")).await;
    let silent = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    system.create_topic("lapsed").await;
    let created = system
        .create_subscription("lapsed", "Silent", subscription(silent.url(), json!({})))
        .await;
    assert_eq!(provisioning_state(&created), "AwaitingManualAction", "{created}");
    let validation_url = silent.validations()[0].body[0]["data"]["validationUrl"]
        .as_str()
        .unwrap()
        .to_owned();

    let resource = eventually(DEADLINE, "provisioningState Failed", || async {
        let resource = get_subscription(&system, "lapsed", "Silent").await;
        (provisioning_state(&resource) == "Failed").then_some(resource)
    })
    .await;
    eprintln!("lapsed subscription: {resource}");
    let answer = system.http().get(&validation_url).send().await.unwrap();
    assert_eq!(
        answer.status(),
        StatusCode::NOT_FOUND,
        "GET after the window: {}",
        answer.text().await.unwrap()
    );
    let resource = get_subscription(&system, "lapsed", "Silent").await;
    assert_eq!(provisioning_state(&resource), "Failed", "{resource}");

    system
        .publish_ok("lapsed", &json!([event("e", "Test.Happened", "/1", json!(1))]))
        .await;
    let ingress = system.ingress_metrics().await;
    assert_eq!(metric(&ingress, "MatchedEventCount", &[("topic", "lapsed")]), 0.0);
    assert_eq!(metric(&ingress, "UnmatchedEventCount", &[("topic", "lapsed")]), 1.0);
    assert_eq!(silent.count(), 0);
}

/// CloudEvents delivery: the OPTIONS abuse-protection handshake with
/// `WebHook-Request-Origin`; `WebHook-Allowed-Origin: *` is consent, no header refuses
/// the subscription.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloudevents_delivery_needs_the_options_handshake() {
    let system = System::start(Options::default()).await;
    let consenting = Receiver::start(Behaviour::Status(200)).await;
    let refusing = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    let topic_body = json!({"properties": {"inputSchema": "CloudEventSchemaV1_0"}});
    let (status, topic) = json_reply(system.admin(Method::PUT, "/topics/clouds", Some(&topic_body)).await).await;
    assert!(status.is_success(), "{topic}");
    let schema = json!({"eventDeliverySchema": "CloudEventSchemaV1_0"});

    let created = system
        .create_subscription("clouds", "Yes", subscription(consenting.url(), schema.clone()))
        .await;
    assert_eq!(provisioning_state(&created), "Succeeded", "{created}");
    let handshakes = consenting.validations();
    assert_eq!(handshakes.len(), 1);
    let origin = handshakes[0].header("webhook-request-origin").unwrap_or_default();
    assert!(
        !origin.is_empty(),
        "no WebHook-Request-Origin: {:?}",
        handshakes[0].headers
    );
    assert!(
        system.ingress_url().contains(origin),
        "origin {origin:?} is not the deployment's host"
    );
    assert_eq!(
        handshakes[0].header("aeg-event-type"),
        None,
        "not an Event Grid handshake"
    );

    let (status, body) = system
        .put_subscription("clouds", "Nope", &subscription(refusing.url(), schema))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("handshake"), "{message}");
    assert_eq!(refusing.validations().len(), 1, "the OPTIONS request was made");
    let (status, _) = system.get("/topics/clouds/eventSubscriptions/Nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a refused subscription was stored");

    // Delivered in CloudEvents: one event per request as an object; a batch as an array.
    let batching = Receiver::start(Behaviour::Status(200)).await;
    let batch_body = batched(
        batching.url(),
        10,
        64,
        json!({"eventDeliverySchema": "CloudEventSchemaV1_0"}),
    );
    system.create_subscription("clouds", "Batch", batch_body).await;
    let (status, keys) = system.post("/topics/clouds/listKeys", None).await;
    assert_eq!(status, StatusCode::OK);
    let ce: Vec<Value> = (1..=3)
        .map(|i| json!({"id": format!("ce-{i}"), "source": "/tests", "specversion": "1.0", "type": "Test.Happened", "data": {"n": i}}))
        .collect();
    let response = system
        .publish_raw(
            "clouds",
            keys["key1"].as_str(),
            Value::Array(ce).to_string().into_bytes(),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK, "{}", response.text().await.unwrap());
    let received = consenting.wait_for(3, DEADLINE).await;
    for request in &received {
        assert!(
            request.body["id"].is_string(),
            "not one CloudEvent: {}",
            request.raw_body
        );
        let content_type = request.header("content-type").unwrap_or_default();
        assert!(
            content_type.starts_with("application/cloudevents+json"),
            "{content_type}"
        );
    }
    // One event in a request is an object, several an array.
    let events_in = |r: &Recorded| r.body.as_array().map_or(1, Vec::len);
    let received = eventually(DEADLINE, "3 CloudEvents at the batching endpoint", || async {
        let received = batching.received();
        (received.iter().map(events_in).sum::<usize>() >= 3).then_some(received)
    })
    .await;
    let sizes: Vec<usize> = received.iter().map(events_in).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 3, "{sizes:?}");
    for request in received
        .iter()
        .filter(|r| r.body.as_array().is_some_and(|a| a.len() > 1))
    {
        let content_type = request.header("content-type").unwrap_or_default();
        assert!(
            content_type.starts_with("application/cloudevents-batch+json"),
            "{content_type}"
        );
    }
    assert_eq!(refusing.count(), 0);
}

/// `EG__VALIDATION__ENABLED=false`: no handshake request at all; deliveries flow to an
/// endpoint that would not have consented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_validation_off_no_handshake_is_made() {
    let system = System::start(Options::default().env("EG__VALIDATION__ENABLED", "false")).await;
    let silent = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    system.create_topic("trusted").await;
    let created = system
        .create_subscription("trusted", "Inside", subscription(silent.url(), json!({})))
        .await;
    assert_eq!(provisioning_state(&created), "Succeeded", "{created}");
    system
        .publish_ok("trusted", &json!([event("e", "Test.Happened", "/1", json!(1))]))
        .await;
    let got = silent.wait_for_ids(["e"], DEADLINE).await;
    assert_eq!(got, ["e"], "the event delivered once");
    assert!(
        silent.validations().is_empty(),
        "a handshake was made: {:?}",
        silent.validations()
    );
}

// ----- 4. endpoint safety (behaviour.md#protecting-endpoints-and-the-system) -----

/// With an empty allow-list, a loopback endpoint cannot even be subscribed: the
/// validation handshake is refused before any connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_allow_list_a_loopback_endpoint_cannot_be_subscribed() {
    let system = System::start(Options::default().senders(0).env("EG__DELIVERY__ALLOWED_NETWORKS", "")).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("inside").await;
    let by_name = receiver.url().replace("127.0.0.1", "localhost");
    for (name, url) in [("Literal", receiver.url()), ("Named", by_name.as_str())] {
        let (status, body) = system
            .put_subscription("inside", name, &subscription(url, json!({})))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("allowed_networks"), "{message}");
        assert!(!message.contains(&url[7..]), "the URL is echoed: {message}");
    }
    assert!(receiver.validations().is_empty(), "a handshake reached loopback");
    assert_eq!(receiver.count(), 0);
}

/// With an empty allow-list and validation off, deliveries to `127.0.0.1` and to
/// `localhost` never leave the sender: dead-lettered at once as `AddressNotAllowed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_allow_list_loopback_deliveries_are_dead_lettered_unsent() {
    let system = System::start(
        Options::default()
            .env("EG__DELIVERY__ALLOWED_NETWORKS", "")
            .env("EG__VALIDATION__ENABLED", "false"),
    )
    .await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("inside").await;
    let by_name = receiver.url().replace("127.0.0.1", "localhost");
    for (name, url) in [("Literal", receiver.url()), ("Named", by_name.as_str())] {
        let extra = json!({"deadLetterDestination": dead_letter_to("blocked")});
        system
            .create_subscription("inside", name, subscription(url, extra))
            .await;
    }
    let published = Instant::now();
    system
        .publish_ok("inside", &json!([event("probe", "Test.Happened", "/1", json!(1))]))
        .await;
    let records = system.wait_dead_letters(2, DEADLINE).await;
    let took = published.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "dead-lettered after {took:?}: it was retried"
    );
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        let record = &record.record;
        assert_eq!(record["id"], "probe");
        assert_eq!(record["lastDeliveryOutcome"], "AddressNotAllowed", "{record}");
        assert_eq!(record["deadLetterReason"], "NonRetriableFailure", "{record}");
        assert_eq!(record["deliveryAttempts"], 1, "{record}");
        assert!(record.get("lastHttpStatusCode").is_none_or(Value::is_null), "{record}");
    }
    let containers: BTreeSet<String> = records
        .iter()
        .map(|r| r.path.iter().nth(1).unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(containers, BTreeSet::from(["LITERAL".to_owned(), "NAMED".to_owned()]));
    assert_eq!(receiver.count(), 0, "a refused delivery reached the endpoint");
    let text = system.sender_metrics().await;
    assert_eq!(
        metric(
            &text,
            "DeliveryAttemptFailCount",
            &[("topic", "inside"), ("outcome", "AddressNotAllowed")]
        ),
        2.0,
        "{text}"
    );
}

/// A refused address is never contacted, so its refusals say nothing about the
/// endpoint's health: later deliveries to it are still dead-lettered at once, not held
/// back on probation (which would only delay a delivery that can never succeed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_addresses_do_not_put_the_endpoint_on_probation() {
    let system = System::start(
        Options::default()
            .env("EG__DELIVERY__ALLOWED_NETWORKS", "")
            .env("EG__VALIDATION__ENABLED", "false")
            .env("EG__PROBATION__FAILURE_THRESHOLD", "2"),
    )
    .await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("inside").await;
    let extra = json!({"deadLetterDestination": dead_letter_to("blocked")});
    system
        .create_subscription("inside", "Literal", subscription(receiver.url(), extra))
        .await;
    for (i, id) in ["one", "two", "three"].into_iter().enumerate() {
        let published = Instant::now();
        system
            .publish_ok("inside", &json!([event(id, "Test.Happened", "/1", json!(1))]))
            .await;
        let records = system.wait_dead_letters(i + 1, DEADLINE).await;
        let took = published.elapsed();
        eprintln!("refused address: {id} dead-lettered after {took:?}");
        let record = records.iter().find(|r| r.record["id"] == id).unwrap();
        assert_eq!(
            record.record["lastDeliveryOutcome"], "AddressNotAllowed",
            "{}",
            record.record
        );
        assert!(
            took < Duration::from_secs(5),
            "{id} was dead-lettered {took:?} after publishing (the dead-letter delay is 1 s): held back"
        );
    }
    let health = delivery_health(&system, "inside", "Literal").await;
    assert_ne!(health["state"], "Probation", "{health}");
    assert_eq!(receiver.count(), 0);
}

// ----- 5. late success (behaviour.md#retry-schedule-and-policy) -----

/// Timed-out attempts, and requests that carried an event the endpoint had already
/// accepted.
fn late_success_report(what: &str, system_text: &str, receiver: &Receiver) -> (f64, usize) {
    let timed_out = metric(system_text, "DeliveryAttemptFailCount", &[("outcome", "TimedOut")]);
    let ids = receiver.event_ids();
    let duplicates = ids.len() - ids.iter().collect::<BTreeSet<_>>().len();
    eprintln!(
        "late-success ({what}): {timed_out} timed-out attempts, {duplicates} duplicates ({:.0}%)",
        if timed_out > 0.0 {
            100.0 * duplicates as f64 / timed_out
        } else {
            0.0
        }
    );
    (timed_out, duplicates)
}

/// Every first attempt times out after 1 s and is answered 200 after 3 s; the retry is
/// queued for 6 s later. The late 200s cancel the retries: no event arrives twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_success_cancels_the_queued_retry() {
    const EVENTS: usize = 10;
    const LATE: &[Reply] = &[Reply::status(200).after(Duration::from_secs(3)); EVENTS];
    let system = System::start(Options::default().delivery_timeouts("1s", "4s").retry_schedule("6s")).await;
    let receiver = Receiver::start(Behaviour::Script(LATE)).await;
    system.create_topic("slow").await;
    system
        .create_subscription("slow", "Sluggish", subscription(receiver.url(), json!({})))
        .await;
    let published = padded_events("late", EVENTS, 10);
    system.publish_ok("slow", &Value::Array(published)).await;

    let labels = [("topic", "slow"), ("subscription", "sluggish")];
    eventually(DEADLINE, "every late success to cancel its retry", || async {
        let text = system.sender_metrics().await;
        let cancelled = metric(
            &text,
            "LateSuccessCount",
            &[labels[0], labels[1], ("result", "retry_cancelled")],
        );
        (cancelled >= EVENTS as f64).then_some(())
    })
    .await;
    // Watch past the moment the retries were due (1 s timeout + 6 s + margin).
    let first = receiver.received()[0].at;
    let watch_until = first + Duration::from_secs(10);
    eventually(DEADLINE, "the retry window to pass", || async {
        assert!(
            receiver.count() <= EVENTS,
            "a cancelled retry was sent: {:?}",
            tally(&receiver.event_ids())
        );
        (Instant::now() >= watch_until).then_some(())
    })
    .await;

    let text = system.sender_metrics().await;
    let (timed_out, duplicates) = late_success_report("retry 6 s, answer after 3 s", &text, &receiver);
    assert_eq!(timed_out, EVENTS as f64, "every first attempt timed out");
    assert_eq!(duplicates, 0, "{:?}", tally(&receiver.event_ids()));
    assert_eq!(receiver.count(), EVENTS);
    let late = |result| metric(&text, "LateSuccessCount", &[labels[0], labels[1], ("result", result)]);
    assert_eq!(late("retry_cancelled"), EVENTS as f64);
    assert_eq!(late("too_late"), 0.0);
    assert_eq!(metric(&text, "DeliverySuccessCount", &labels), EVENTS as f64);
    // Nothing left behind: no queued retry, and the cancelled retries released the
    // stored events.
    for partition in system.keyspace().all_partitions() {
        assert_eq!(system.redis_cli(&["ZCARD", &partition.retry()]), "0");
    }
    assert!(system.redis_keys("*:event:*").is_empty(), "event bodies leaked");
}

/// The retry (due ~2 s after the request) goes out before the late answer (8 s) comes:
/// it cannot be cancelled; the endpoint sees the event twice and the late success is
/// counted `too_late`. (8 s leaves a busy machine seconds to send the retry first.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_success_after_the_retry_was_sent_is_a_counted_duplicate() {
    const EVENTS: usize = 5;
    const LATE: &[Reply] = &[Reply::status(200).after(Duration::from_secs(8)); EVENTS];
    let system = System::start(Options::default().delivery_timeouts("1s", "4s").retry_schedule("1s")).await;
    let receiver = Receiver::start(Behaviour::Script(LATE)).await;
    system.create_topic("slow").await;
    system
        .create_subscription("slow", "Sluggish", subscription(receiver.url(), json!({})))
        .await;
    system
        .publish_ok("slow", &Value::Array(padded_events("dup", EVENTS, 10)))
        .await;

    let labels = [("topic", "slow"), ("subscription", "sluggish")];
    let text = eventually(DEADLINE, "every late success counted too_late", || async {
        let text = system.sender_metrics().await;
        let too_late = metric(
            &text,
            "LateSuccessCount",
            &[labels[0], labels[1], ("result", "too_late")],
        );
        (too_late >= EVENTS as f64).then_some(text)
    })
    .await;
    let (timed_out, duplicates) = late_success_report("retry 1 s, answer after 4 s", &text, &receiver);
    assert_eq!(timed_out, EVENTS as f64);
    assert_eq!(duplicates, EVENTS, "{:?}", tally(&receiver.event_ids()));
    assert_eq!(receiver.count(), 2 * EVENTS);
    for request in &receiver.received()[EVENTS..] {
        assert_eq!(delivery_count(request), 1, "the retry is attempt 1");
    }
    assert_eq!(
        metric(
            &text,
            "LateSuccessCount",
            &[labels[0], labels[1], ("result", "retry_cancelled")]
        ),
        0.0
    );
    assert_eq!(metric(&text, "DeliverySuccessCount", &labels), EVENTS as f64);
}

// ----- 6. Retry-After (behaviour.md#what-a-failure-leads-to) -----

/// `503` with `Retry-After: 3` delays the next attempt at least 3 s (the schedule says
/// 1 s); `429` with `Retry-After: 3600` is capped by `EG__DELIVERY__MAX_RETRY_AFTER` (4 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_a_lower_bound_capped_by_the_maximum() {
    const BUSY: &[Reply] = &[Reply::status(503).retry_after("3")];
    const THROTTLED: &[Reply] = &[Reply::status(429).retry_after("3600")];
    let system = System::start(Options::default().env("EG__DELIVERY__MAX_RETRY_AFTER", "4s")).await;
    let busy = Receiver::start(Behaviour::Script(BUSY)).await;
    let throttled = Receiver::start(Behaviour::Script(THROTTLED)).await;
    system.create_topic("polite").await;
    system
        .create_subscription("polite", "Busy", subscription(busy.url(), json!({})))
        .await;
    system
        .create_subscription("polite", "Throttled", subscription(throttled.url(), json!({})))
        .await;
    system
        .publish_ok("polite", &json!([event("e", "Test.Happened", "/1", json!(1))]))
        .await;

    for (receiver, least, most) in [(&busy, 3, 6), (&throttled, 4, 8)] {
        let requests = receiver.wait_for(2, DEADLINE).await;
        let gap = requests[1].at - requests[0].at;
        eprintln!("retry-after: {} then the retry {gap:?} later", requests[0].status);
        assert!(
            gap >= Duration::from_secs(least) - Duration::from_millis(100),
            "retried {gap:?} after a {} with Retry-After; at least {least} s expected",
            requests[0].status
        );
        assert!(
            gap <= Duration::from_secs(most),
            "retried only {gap:?} after a {}; the cap is 4 s",
            requests[0].status
        );
        assert_eq!(requests[1].status, 200);
        assert_eq!(delivery_count(&requests[1]), 1);
    }
    wait_subscription_successes(&system, "polite", "busy", 1.0).await;
    wait_subscription_successes(&system, "polite", "throttled", 1.0).await;
}
