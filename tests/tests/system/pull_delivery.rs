//! Pull delivery end to end (Event Grid namespaces' queue mode): queue-mode subscriptions
//! of a namespace topic, events published to it, and consumers that receive them with a
//! lock and acknowledge, release (now or after a delay), reject or renew, through
//! `POST /topics/{t}/eventsubscriptions/{s}:{action}` on one or several ingress copies,
//! each call a span of its events' trace.

use eg_system_tests::{DEADLINE, Options, System, eventually, json_reply, metric};
use eg_testkit::OtlpReceiver;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const BATCH: &str = "application/cloudevents-batch+json; charset=utf-8";
const API: &str = "api-version=2024-06-01";

// ----- helpers -----

/// A namespace topic (CloudEvents) and its key.
async fn namespace_topic(system: &System, topic: &str) -> String {
    system
        .create_topic_with(
            topic,
            json!({"publisherType": "Custom", "inputSchema": "CloudEventSchemaV1_0", "eventRetentionInDays": 1}),
        )
        .await
}

/// A queue-mode subscription with `queue` settings (merged over lock 60 s, count 10).
async fn queue_subscription(system: &System, topic: &str, name: &str, queue: Value) {
    let mut settings = json!({"receiveLockDurationInSeconds": 60, "maxDeliveryCount": 10, "eventTimeToLive": "P1D"});
    for (k, v) in queue.as_object().unwrap() {
        settings[k] = v.clone();
    }
    let body = json!({"properties": {
        "deliveryConfiguration": {"deliveryMode": "Queue", "queue": settings},
        "eventDeliverySchema": "CloudEventSchemaV1_0",
        "filtersConfiguration": {"includedEventTypes": null, "filters": []}
    }});
    let (status, answer) = system.put_subscription(topic, name, &body).await;
    assert!(status.is_success(), "PUT queue subscription {name}: {status} {answer}");
}

fn dead_letter(container: &str) -> Value {
    json!({"deadLetterDestinationWithResourceIdentity": {"deadLetterDestination": {
        "endpointType": "StorageBlob", "properties": {"blobContainerName": container}}}})
}

fn cloud_event(id: &str) -> Value {
    json!({"specversion": "1.0", "id": id, "source": "/tests", "type": "order.created", "data": {"n": id}})
}

async fn publish(system: &System, topic: &str, key: &str, ids: &[&str]) {
    publish_events(system, topic, key, ids.iter().map(|id| cloud_event(id)).collect()).await;
}

async fn publish_events(system: &System, topic: &str, key: &str, events: Vec<Value>) {
    let response = system
        .http()
        .post(format!(
            "{}/topics/{topic}/api/events?api-version=2018-01-01",
            system.ingress_url()
        ))
        .header("content-type", BATCH)
        .header("aeg-sas-key", key)
        .body(Value::Array(events).to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = json_reply(response).await;
    assert_eq!(status, StatusCode::OK, "publish: {body}");
}

/// A pull operation against `base` (an ingress URL); the status and the answer.
async fn pull(
    system: &System,
    base: &str,
    topic: &str,
    key: &str,
    segment: &str,
    query: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = system
        .http()
        .post(format!("{base}/topics/{topic}/eventsubscriptions/{segment}?{query}"))
        .header("aeg-sas-key", key)
        .timeout(Duration::from_secs(150));
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    json_reply(request.send().await.unwrap()).await
}

/// Receives from `sub` with `maxEvents`/`maxWaitTime`; the `value` items.
async fn receive(system: &System, topic: &str, key: &str, sub: &str, max_events: u32, wait: u32) -> Vec<Value> {
    receive_at(system, system.ingress_url(), topic, key, sub, max_events, wait).await
}

async fn receive_at(
    system: &System,
    base: &str,
    topic: &str,
    key: &str,
    sub: &str,
    max_events: u32,
    wait: u32,
) -> Vec<Value> {
    let query = format!("{API}&maxEvents={max_events}&maxWaitTime={wait}");
    let (status, answer) = pull(system, base, topic, key, &format!("{sub}:receive"), &query, None).await;
    assert_eq!(status, StatusCode::OK, "receive: {answer}");
    answer["value"]
        .as_array()
        .unwrap_or_else(|| panic!("value is always present: {answer}"))
        .clone()
}

/// An acknowledge, release, reject or renewLock of `tokens`; the answer (always 200).
async fn lock_op(
    system: &System,
    topic: &str,
    key: &str,
    sub: &str,
    action: &str,
    query: &str,
    tokens: &[&str],
) -> Value {
    let (status, answer) = pull(
        system,
        system.ingress_url(),
        topic,
        key,
        &format!("{sub}:{action}"),
        &format!("{API}{query}"),
        Some(json!({"lockTokens": tokens})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{action}: {answer}");
    answer
}

fn token(item: &Value) -> &str {
    item["brokerProperties"]["lockToken"].as_str().unwrap()
}

fn count(item: &Value) -> u64 {
    item["brokerProperties"]["deliveryCount"].as_u64().unwrap()
}

fn succeeded(answer: &Value) -> Vec<String> {
    answer["succeededLockTokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

fn failed_codes(answer: &Value) -> Vec<String> {
    answer["failedLockTokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["error"]["code"].as_str().unwrap().to_owned())
        .collect()
}

/// Receives until one event comes (each receive waits at most `wait` seconds).
async fn receive_one(system: &System, topic: &str, key: &str, sub: &str, wait: u32) -> Value {
    eventually(DEADLINE * 4, "an event to receive", || async {
        receive(system, topic, key, sub, 1, wait).await.into_iter().next()
    })
    .await
}

// ----- tests -----

#[tokio::test]
async fn receive_and_acknowledge_and_tokens_that_fail_alone() {
    let system = System::start(Options::default()).await;
    let key = namespace_topic(&system, "orders").await;
    queue_subscription(&system, "orders", "audit", json!({})).await;
    publish(&system, "orders", &key, &["e1", "e2"]).await;

    let got = receive(&system, "orders", &key, "audit", 10, 10).await;
    assert_eq!(got.len(), 2, "{got:?}");
    for item in &got {
        assert_eq!(count(item), 1);
        assert_eq!(item["event"]["source"], "/tests");
        assert_eq!(
            item["event"]["data"]["n"], item["event"]["id"],
            "the event as published"
        );
    }
    let tokens: Vec<&str> = got.iter().map(token).collect();
    let answer = lock_op(&system, "orders", &key, "audit", "acknowledge", "", &tokens).await;
    assert_eq!(succeeded(&answer).len(), 2, "{answer}");
    assert_eq!(answer["failedLockTokens"], json!([]));

    // Acknowledged is gone: nothing to receive; the old tokens fail alone, each for itself.
    assert!(receive(&system, "orders", &key, "audit", 10, 10).await.is_empty());
    publish(&system, "orders", &key, &["e3"]).await;
    let fresh = receive_one(&system, "orders", &key, "audit", 10).await;
    let answer = lock_op(
        &system,
        "orders",
        &key,
        "audit",
        "acknowledge",
        "",
        &[tokens[0], "garbage!", token(&fresh)],
    )
    .await;
    assert_eq!(succeeded(&answer), [token(&fresh)]);
    assert_eq!(failed_codes(&answer), ["TokenLost", "BadToken"], "{answer}");
    assert_eq!(answer["failedLockTokens"][0]["error"]["message"], "Token has expired.");
}

/// A consumer's calls join the trace of the events they handle (traces.md): the receive
/// and the acknowledge of an event published with a `traceparent` attribute are spans
/// under that context, counting events and tokens but never holding a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receive_and_acknowledge_are_spans_of_the_events_trace() {
    const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const PUBLISHER_SPAN: &str = "00f067aa0ba902b7";
    let collector = OtlpReceiver::start().await;
    let options = Options::default()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint())
        .env("OTEL_BSP_SCHEDULE_DELAY", "100");
    let system = System::start(options).await;
    let key = namespace_topic(&system, "orders").await;
    queue_subscription(&system, "orders", "audit", json!({})).await;
    let mut traced = cloud_event("e1");
    traced["traceparent"] = json!(format!("00-{TRACE_ID}-{PUBLISHER_SPAN}-01"));
    publish_events(&system, "orders", &key, vec![traced]).await;

    let got = receive_one(&system, "orders", &key, "audit", 10).await;
    let answer = lock_op(
        &system,
        "orders",
        &key,
        "audit",
        "acknowledge",
        "",
        &[token(&got), "garbage!"],
    )
    .await;
    assert_eq!(succeeded(&answer), [token(&got)]);

    let spans = eventually(DEADLINE, "the receive and acknowledge spans", || async {
        let spans = collector.trace(TRACE_ID);
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        (names.contains(&"receive") && names.contains(&"acknowledge")).then_some(spans)
    })
    .await;
    let span = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    let (received, acknowledged) = (span("receive"), span("acknowledge"));
    for call in [received, acknowledged] {
        assert_eq!(
            call.parent_span_id, PUBLISHER_SPAN,
            "the event's stored context is the parent"
        );
        assert_eq!(call.service, "eg-ingress");
        assert_eq!(call.attribute("eg.topic"), Some("orders"));
        assert_eq!(call.attribute("eg.subscription"), Some("audit"));
        assert!(
            call.attributes.iter().all(|(_, v)| !v.contains(token(&got))),
            "never a lock token: {:?}",
            call.attributes
        );
    }
    assert_eq!(received.attribute("eg.events"), Some("1"));
    assert!(!received.error);
    assert_eq!(acknowledged.attribute("eg.events"), Some("2"), "the tokens sent");
    assert_eq!(acknowledged.attribute("eg.succeeded"), Some("1"));
    assert_eq!(acknowledged.attribute("eg.failed"), Some("1"));
    assert!(acknowledged.error, "a token failed");
}

#[tokio::test]
async fn release_now_and_renew_and_reject_to_dead_letter() {
    let system = System::start(Options::default()).await;
    let key = namespace_topic(&system, "orders").await;
    let mut settings = dead_letter("rejected");
    settings["maxDeliveryCount"] = json!(5);
    queue_subscription(&system, "orders", "audit", settings).await;
    publish(&system, "orders", &key, &["e1"]).await;

    let first = receive_one(&system, "orders", &key, "audit", 10).await;
    assert_eq!(count(&first), 1);
    let answer = lock_op(&system, "orders", &key, "audit", "release", "", &[token(&first)]).await;
    assert_eq!(succeeded(&answer).len(), 1, "{answer}");
    let second = receive_one(&system, "orders", &key, "audit", 10).await;
    assert_eq!(count(&second), 2, "released events come back counted");
    assert_eq!(second["event"]["id"], "e1");
    // The released token is dead.
    let answer = lock_op(&system, "orders", &key, "audit", "acknowledge", "", &[token(&first)]).await;
    assert_eq!(failed_codes(&answer), ["TokenLost"]);

    // renewLock keeps the same token valid.
    let answer = lock_op(&system, "orders", &key, "audit", "renewLock", "", &[token(&second)]).await;
    assert_eq!(succeeded(&answer), [token(&second)]);
    let answer = lock_op(&system, "orders", &key, "audit", "reject", "", &[token(&second)]).await;
    assert_eq!(succeeded(&answer), [token(&second)]);
    let counted = metric(
        &system.ingress_metrics().await,
        "DeadLetteredCount",
        &[("topic", "orders"), ("subscription", "audit"), ("reason", "Rejected")],
    );
    assert_eq!(counted, 1.0, "the reject is counted once");

    let records = system.wait_dead_letters(1, DEADLINE).await;
    let record = &records[0].record;
    assert_eq!(
        record["deadLetterProperties"]["deadletterreason"], "Rejected",
        "{record}"
    );
    assert_eq!(record["deadLetterProperties"]["deliveryattempts"], 2);
    assert_eq!(record["event"]["id"], "e1");
    assert!(
        receive(&system, "orders", &key, "audit", 10, 10).await.is_empty(),
        "rejected is gone"
    );
}

#[tokio::test]
async fn release_with_a_delay_comes_back_after_it() {
    let system = System::start(Options::default()).await;
    let key = namespace_topic(&system, "orders").await;
    queue_subscription(&system, "orders", "audit", json!({})).await;
    publish(&system, "orders", &key, &["e1"]).await;
    let first = receive_one(&system, "orders", &key, "audit", 10).await;
    let answer = lock_op(
        &system,
        "orders",
        &key,
        "audit",
        "release",
        "&releaseDelayInSeconds=10",
        &[token(&first)],
    )
    .await;
    assert_eq!(succeeded(&answer).len(), 1, "{answer}");
    // Not receivable during the delay (the first receive answers empty within it, or — on
    // a slow machine — the event after it; either way it comes back counted).
    let back = receive_one(&system, "orders", &key, "audit", 30).await;
    assert_eq!(count(&back), 2);
    let answer = lock_op(&system, "orders", &key, "audit", "acknowledge", "", &[token(&back)]).await;
    assert_eq!(succeeded(&answer).len(), 1);
}

#[tokio::test]
async fn max_delivery_count_dead_letters() {
    let system = System::start(Options::default()).await;
    let key = namespace_topic(&system, "orders").await;
    let mut settings = dead_letter("worn-out");
    settings["maxDeliveryCount"] = json!(2);
    queue_subscription(&system, "orders", "audit", settings).await;
    publish(&system, "orders", &key, &["e1"]).await;
    for expected in 1..=2 {
        let item = receive_one(&system, "orders", &key, "audit", 10).await;
        assert_eq!(count(&item), expected);
        let answer = lock_op(&system, "orders", &key, "audit", "release", "", &[token(&item)]).await;
        assert_eq!(succeeded(&answer).len(), 1);
    }
    let records = system.wait_dead_letters(1, DEADLINE).await;
    assert_eq!(
        records[0].record["deadLetterProperties"]["deadletterreason"],
        "MaxDeliveryCountExceeded"
    );
    assert_eq!(records[0].record["deadLetterProperties"]["deliveryattempts"], 2);
    assert!(receive(&system, "orders", &key, "audit", 10, 10).await.is_empty());
}

#[tokio::test]
async fn refuses_bad_requests_and_push_subscriptions() {
    let system = System::start(Options::default()).await;
    let key = namespace_topic(&system, "orders").await;
    queue_subscription(&system, "orders", "audit", json!({})).await;
    let base = system.ingress_url().to_owned();
    for (segment, query, field) in [
        ("audit:receive", "maxEvents=1".to_owned(), "api-version"),
        ("audit:receive", format!("{API}&maxEvents=0"), "maxEvents"),
        ("audit:receive", format!("{API}&maxEvents=101"), "maxEvents"),
        ("audit:receive", format!("{API}&maxWaitTime=9"), "maxWaitTime"),
        ("audit:receive", format!("{API}&maxWaitTime=121"), "maxWaitTime"),
        (
            "audit:release",
            format!("{API}&releaseDelayInSeconds=30"),
            "releaseDelayInSeconds",
        ),
        ("audit:acknowledge", API.to_owned(), "lockTokens"),
    ] {
        let body = segment
            .ends_with("receive")
            .then_some(())
            .map_or(Some(json!({})), |()| None);
        let (status, answer) = pull(&system, &base, "orders", &key, segment, &query, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{segment}?{query}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{segment}?{query}: {message}");
    }
    let (status, _) = pull(&system, &base, "orders", &key, "audit:peek", API, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = pull(&system, &base, "orders", &key, "nobody:receive", API, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = pull(&system, &base, "orders", "wrong-key", "audit:receive", API, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A token of one subscription is a bad token on another.
    queue_subscription(&system, "orders", "other", json!({})).await;
    publish(&system, "orders", &key, &["e1"]).await;
    let item = receive_one(&system, "orders", &key, "audit", 10).await;
    let answer = lock_op(&system, "orders", &key, "other", "acknowledge", "", &[token(&item)]).await;
    assert_eq!(failed_codes(&answer), ["BadToken"]);

    // A push subscription does not take pull operations.
    let receiver = eg_system_tests::Receiver::start(eg_system_tests::Behaviour::Status(200)).await;
    let push = json!({"properties": {
        "deliveryConfiguration": {"deliveryMode": "Push", "push": {"maxDeliveryCount": 3, "eventTimeToLive": "P1D",
            "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": receiver.url()}}}},
        "eventDeliverySchema": "CloudEventSchemaV1_0"
    }});
    let (status, answer) = system.put_subscription("orders", "pushed", &push).await;
    assert!(status.is_success(), "{answer}");
    let (status, answer) = pull(&system, &base, "orders", &key, "pushed:receive", API, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("delivers by push"),
        "{answer}"
    );
}

#[tokio::test]
async fn many_consumers_on_two_ingress_copies_get_each_event_once() {
    let mut system = System::start(Options::default()).await;
    let second = system.start_extra_ingress().await;
    let key = namespace_topic(&system, "orders").await;
    queue_subscription(&system, "orders", "audit", json!({})).await;
    let ids: Vec<String> = (0..40).map(|i| format!("e{i}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    publish(&system, "orders", &key, &refs).await;

    let bases = [system.ingress_url().to_owned(), second];
    let system = Arc::new(system);
    let mut consumers = tokio::task::JoinSet::new();
    for c in 0..6 {
        let base = bases[c % 2].clone();
        let key = key.clone();
        let system = system.clone();
        consumers.spawn(async move {
            let mut seen = Vec::new();
            loop {
                let got = receive_at(&system, &base, "orders", &key, "audit", 5, 10).await;
                if got.is_empty() {
                    return seen;
                }
                let tokens: Vec<&str> = got.iter().map(token).collect();
                let answer = lock_op(&system, "orders", &key, "audit", "acknowledge", "", &tokens).await;
                assert_eq!(succeeded(&answer).len(), tokens.len(), "{answer}");
                seen.extend(got.iter().map(|g| g["event"]["id"].as_str().unwrap().to_owned()));
            }
        });
    }
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for seen in consumers.join_all().await {
        for id in seen {
            *tally.entry(id).or_default() += 1;
        }
    }
    assert_eq!(tally.len(), 40, "every event received: {tally:?}");
    assert!(tally.values().all(|&n| n == 1), "each once: {tally:?}");
}

#[tokio::test]
async fn a_waiting_receive_gets_an_event_published_while_it_waits() {
    let system = System::start(Options::default()).await;
    let key = namespace_topic(&system, "orders").await;
    queue_subscription(&system, "orders", "audit", json!({})).await;
    let waiting = receive(&system, "orders", &key, "audit", 1, 120);
    let publishing = async {
        // Give the receive time to park (if it has not, it finds the event at once: the
        // assertion below holds either way).
        tokio::time::sleep(Duration::from_millis(500)).await;
        publish(&system, "orders", &key, &["late"]).await;
    };
    let (got, ()) = tokio::join!(waiting, publishing);
    assert_eq!(
        got.len(),
        1,
        "the waiting receive is answered with the event, not after maxWaitTime empty"
    );
    assert_eq!(got[0]["event"]["id"], "late");
}

#[tokio::test]
async fn lock_expiry_redelivers_counted_and_ttl_dead_letters() {
    let system = System::start(Options::default()).await;
    let key = namespace_topic(&system, "orders").await;
    queue_subscription(&system, "orders", "audit", json!({})).await;
    let mut short = dead_letter("expired");
    short["eventTimeToLive"] = json!("PT1M");
    queue_subscription(&system, "orders", "brief", short).await;
    publish(&system, "orders", &key, &["e1"]).await;

    let first = receive_one(&system, "orders", &key, "audit", 10).await;
    // Not acknowledged: after the 60 s lock it is received again, counted, and the old
    // token is lost. Meanwhile `brief`'s copy outlives its one-minute time-to-live.
    let again = receive_one(&system, "orders", &key, "audit", 120).await;
    assert_eq!(count(&again), 2);
    assert_eq!(again["event"]["id"], "e1");
    let answer = lock_op(
        &system,
        "orders",
        &key,
        "audit",
        "acknowledge",
        "",
        &[token(&first), token(&again)],
    )
    .await;
    assert_eq!(failed_codes(&answer), ["TokenLost"]);
    assert_eq!(succeeded(&answer), [token(&again)]);

    let records = system.wait_dead_letters(1, DEADLINE * 3).await;
    assert_eq!(
        records[0].record["deadLetterProperties"]["deadletterreason"],
        "TimeToLiveExceeded"
    );
    assert!(receive(&system, "orders", &key, "brief", 1, 10).await.is_empty());
}

/// Azure's own consumer client (`azure-eventgrid`'s `EventGridConsumerClient`, key sent as
/// `Authorization: SharedAccessKey`) against eg unchanged: receive, renew, release, reject,
/// acknowledge, and a stale token failing alone as Event Grid answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_consumer_receives_renews_releases_rejects_and_acknowledges() {
    let system = System::start(Options::default()).await;
    let key = namespace_topic(&system, "orders").await;
    queue_subscription(&system, "orders", "audit", json!({})).await;
    publish(&system, "orders", &key, &["e1", "e2", "e3"]).await;
    let out =
        eg_system_tests::run_python_sdk("consume.py", &[system.ingress_url(), &key, "orders", "audit", "3"]).await;
    let r: Value = serde_json::from_str(out.stdout_of_success()).expect("consume.py prints JSON");
    let received = r["received"].as_array().expect("received");
    assert_eq!(received.len(), 3, "{r}");
    assert_eq!(
        r["again"][0][0], r["received"][0][0],
        "the released event comes back: {r}"
    );
    assert_eq!(r["again"][0][1], 2, "with its delivery count raised: {r}");
    assert_eq!(
        (&r["renewed"], &r["released"], &r["rejected"], &r["acknowledged"]),
        (&json!(3), &json!(1), &json!(1), &json!(2)),
        "{r}"
    );
    assert_eq!(r["stale"], json!(["TokenLost", "Token has expired."]), "{r}");
}
