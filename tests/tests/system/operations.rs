//! Operator tasks through the management API, against the four binaries: pause and
//! resume, dead-letter listing, redrive (once, keeping ids, fresh attempts) and purge,
//! delivery history, queue depths, and each tier's process metrics; and the deployment's
//! record in Redis (prefix and partition count): checked at start, recorded again while
//! tiers run.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, System, Validation, check_dead_letter_operations, dead_letter_to,
    eventually, json_reply, metric, order_events, refusing_three_times, subscription,
};
use eg_testkit::tier::Role;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

async fn queues(system: &System) -> Value {
    let (status, body) = system.get("/queues").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Waits until the history of `event_id` has an entry in `state`; returns the history.
async fn history_with(system: &System, topic: &str, event_id: &str, state: &str) -> Vec<Value> {
    eventually(DEADLINE, &format!("history of {event_id} reaching {state}"), || async {
        let (status, body) = system.get(&format!("/topics/{topic}/events/{event_id}/history")).await;
        let steps = body["value"].as_array().cloned().unwrap_or_default();
        (status == StatusCode::OK && steps.iter().any(|s| s["state"] == state)).then_some(steps)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_made_during_an_updates_validation_handshake_is_not_undone() {
    let system = System::start(Options::default()).await;
    let first = Receiver::start(Behaviour::Status(200)).await;
    let slow = Receiver::start_with(Behaviour::Status(200), Validation::SlowConsent(Duration::from_secs(2))).await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "Billing", subscription(first.url(), json!({})))
        .await;

    // The update moves the subscription to an endpoint whose handshake takes 2 s; the
    // pause comes while it runs. The update was decided from the running subscription.
    let moved = subscription(slow.url(), json!({}));
    let update = system.admin(Method::PUT, "/topics/orders/eventSubscriptions/Billing", Some(&moved));
    let pause = async {
        eventually(DEADLINE, "the update's handshake to start", || async {
            (!slow.validations().is_empty()).then_some(())
        })
        .await;
        system
            .post("/topics/orders/eventSubscriptions/Billing/pause", Some(&json!({})))
            .await
    };
    let (updated, (status, paused)) = tokio::join!(update, pause);
    assert_eq!(status, StatusCode::OK, "{paused}");
    let (status, updated) = json_reply(updated).await;
    assert_eq!(status, StatusCode::OK, "{updated}");

    // Both took effect: the update was decided again on top of the pause.
    let (status, now) = system.get("/topics/orders/eventSubscriptions/Billing").await;
    assert_eq!(status, StatusCode::OK, "{now}");
    assert_eq!(now["properties"]["paused"], true, "the pause was undone: {now}");
    assert_eq!(updated["properties"]["paused"], true, "{updated}");
    assert_eq!(
        now["properties"]["destination"]["properties"]["endpointBaseUrl"],
        slow.url(),
        "{now}"
    );
    assert_eq!(now["properties"]["provisioningState"], "Succeeded", "{now}");
    assert_eq!(
        slow.validations().len(),
        2,
        "the handshake is made again for the new decision"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_subscription_accumulates_events_and_resume_delivers_each_once() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "Billing", subscription(receiver.url(), json!({})))
        .await;
    let (status, paused) = system
        .post("/topics/orders/eventSubscriptions/Billing/pause", Some(&json!({})))
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["properties"]["paused"], true);

    system.publish_ok("orders", &order_events(&["p1", "p2", "p3"])).await;
    eventually(DEADLINE, "three deliveries set aside", || async {
        (queues(&system).await["total"]["paused"] == 3).then_some(())
    })
    .await;
    let steps = history_with(&system, "orders", "p1", "Paused").await;
    assert_eq!(steps[0]["subscription"], "billing");
    assert_eq!(steps[0]["attempt"], 0, "a pause charges no attempt: {steps:?}");
    assert!(
        steps[0]["nextAttemptTime"].is_null(),
        "it waits for the resume: {steps:?}"
    );
    assert!(steps[0]["expiresAt"].is_string(), "the TTL deadline: {steps:?}");

    // An update that does not mention `paused` keeps it paused.
    let updated = system
        .create_subscription(
            "orders",
            "Billing",
            subscription(
                receiver.url(),
                json!({"filter": {"includedEventTypes": ["Order.Created"]}}),
            ),
        )
        .await;
    assert_eq!(updated["properties"]["paused"], true);
    system.publish_ok("orders", &order_events(&["p4"])).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(receiver.count(), 0, "nothing is attempted while paused");

    let (status, resumed) = system
        .post("/topics/orders/eventSubscriptions/Billing/resume", Some(&json!({})))
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["properties"]["paused"], false);
    receiver.wait_for(4, DEADLINE).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut ids = receiver.delivered_ids();
    ids.sort();
    assert_eq!(ids, ["p1", "p2", "p3", "p4"], "each delivered once");
    assert!(
        receiver
            .received()
            .iter()
            .all(|r| r.header("aeg-delivery-count") == Some("0")),
        "the pause did not count as an attempt"
    );
    eventually(DEADLINE, "nothing paused or ready once all were delivered", || async {
        let total = queues(&system).await["total"].clone();
        (total["paused"].as_u64() == Some(0) && total["ready"].as_u64() == Some(0)).then_some(())
    })
    .await;
    let steps = history_with(&system, "orders", "p1", "Delivered").await;
    let states: Vec<&str> = steps.iter().filter_map(|s| s["state"].as_str()).collect();
    // Set aside once; a sender that read it while the resume was being written may set
    // it aside once more before it sees the resume.
    assert!(
        matches!(
            states.as_slice(),
            ["Paused", "Delivered"] | ["Paused", "Paused", "Delivered"]
        ),
        "{states:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_subscriptions_events_still_expire_by_their_ttl() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("orders").await;
    let body = subscription(
        receiver.url(),
        json!({
            "paused": true,
            "retryPolicy": {"maxDeliveryAttempts": 30, "eventTimeToLiveInMinutes": 1},
            "deadLetterDestination": dead_letter_to("dead"),
        }),
    );
    let created = system.create_subscription("orders", "Billing", body).await;
    assert_eq!(created["properties"]["paused"], true, "created paused");
    system.publish_ok("orders", &order_events(&["ttl-1"])).await;

    let records = system.wait_dead_letters(1, Duration::from_secs(100)).await;
    assert_eq!(records[0].record["id"], "ttl-1");
    assert_eq!(records[0].record["deadLetterReason"], "TimeToLiveExceeded");
    assert_eq!(records[0].record["deliveryAttempts"], 0);
    assert_eq!(receiver.count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_redriven_once_with_their_ids_and_purged() {
    let system = System::start(Options::default()).await;
    let receiver = refusing_three_times().await;
    system.create_topic("orders").await;
    let body = subscription(receiver.url(), json!({"deadLetterDestination": dead_letter_to("dead")}));
    system.create_subscription("orders", "Billing", body).await;
    check_dead_letter_operations(&system, &receiver, "orders", "Billing").await;

    let steps = history_with(&system, "orders", "a", "Delivered").await;
    let summary: Vec<(String, Option<u64>)> = steps
        .iter()
        .map(|s| (s["state"].as_str().unwrap().to_owned(), s["httpStatus"].as_u64()))
        .collect();
    assert_eq!(
        summary,
        [("DeadLettered".into(), Some(400)), ("Delivered".into(), Some(200))],
        "{steps:?}"
    );
    assert_eq!(steps[0]["reason"], "NonRetriableFailure");
    assert!(steps.iter().all(|s| s["durationMs"].is_u64()), "{steps:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_shows_every_attempt_and_refusals_name_what_was_wrong() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::FailFirst {
        failures: 2,
        status: 500,
    })
    .await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "Billing", subscription(receiver.url(), json!({})))
        .await;
    system.publish_ok("orders", &order_events(&["h1"])).await;
    let steps = history_with(&system, "orders", "h1", "Delivered").await;
    let shape: Vec<(u64, &str, Option<u64>, &str)> = steps
        .iter()
        .map(|s| {
            (
                s["attempt"].as_u64().unwrap(),
                s["outcome"].as_str().unwrap(),
                s["httpStatus"].as_u64(),
                s["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (1, "GenericError", Some(500), "Retrying"),
            (2, "GenericError", Some(500), "Retrying"),
            (3, "Succeeded", Some(200), "Delivered"),
        ]
    );
    // An attempt does not start before the retry was due. Times are stamped by the
    // sender's clock, kept to Redis's within half a round trip: allow 250 ms.
    for pair in steps.windows(2) {
        let due = timestamp(&pair[0]["nextAttemptTime"]);
        let started = timestamp(&pair[1]["time"]);
        assert!(
            due <= started + chrono::Duration::milliseconds(250),
            "attempt at {started} before its retry was due at {due}"
        );
    }
    assert!(steps[2]["nextAttemptTime"].is_null());

    let (status, filtered) = system.get("/topics/orders/events/h1/history?subscription=other").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{filtered}");
    let (status, body) = system.get("/topics/orders/events/never-published/history").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("never-published"),
        "{body}"
    );

    let base = "/topics/orders/eventSubscriptions/Billing/deadLetters";
    for (path, body, needle) in [
        (format!("{base}/redrive"), json!({}), "selects nothing"),
        (format!("{base}/redrive"), json!({"from": "yesterday"}), "from:"),
        (format!("{base}/purge"), json!({"ids": [1]}), "ids[0]"),
        (format!("{base}/purge"), json!({"everything": true}), "everything"),
    ] {
        let (status, answer) = system.post(&path, Some(&body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(needle),
            "{body}: {answer}"
        );
    }
    let (status, answer) = system.get(&format!("{base}?limit=0")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let (status, answer) = system.get("/topics/orders/eventSubscriptions/Nope/deadLetters").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    let (status, answer) = system
        .post("/topics/orders/eventSubscriptions/Nope/pause", Some(&json!({})))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    let unauthorized = system
        .http()
        .get(format!("{}/admin/queues", system.ingress_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), StatusCode::UNAUTHORIZED);
}

/// An RFC 3339 time from a history step.
fn timestamp(value: &Value) -> chrono::DateTime<chrono::FixedOffset> {
    let text = value.as_str().unwrap_or_else(|| panic!("not a time: {value}"));
    chrono::DateTime::parse_from_rfc3339(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Every tier's `/metrics` carries the standard Prometheus process metrics, with values
/// of this process: CPU and memory per copy, without a node exporter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tier_exports_its_process_metrics() {
    let system = System::start(Options::default()).await;
    let started_before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for (tier, text) in [
        ("ingress", system.ingress_metrics().await),
        ("scheduler", system.scheduler_metrics().await),
        ("sender", system.sender_metrics().await),
        ("deadletter", system.deadletter_metrics().await),
    ] {
        assert!(
            text.contains("# TYPE process_cpu_seconds_total counter"),
            "{tier}: no process CPU counter in\n{text}"
        );
        let resident = metric(&text, "process_resident_memory_bytes", &[]);
        assert!(
            (1e6..2e9).contains(&resident),
            "{tier}: resident memory {resident} bytes"
        );
        // Whole seconds (metrics counters are integers): a fresh tier may show 0.
        assert!(
            text.lines().any(|line| line.starts_with("process_cpu_seconds_total ")),
            "{tier}: no process_cpu_seconds_total sample"
        );
        assert!(metric(&text, "process_open_fds", &[]) >= 3.0, "{tier}");
        assert!(metric(&text, "process_threads", &[]) >= 1.0, "{tier}");
        let start = metric(&text, "process_start_time_seconds", &[]);
        assert!(
            (started_before - 600.0..=started_before).contains(&start),
            "{tier}: started at {start}, the test at {started_before}"
        );
    }
}

/// A log file is read by people and log collectors, not a terminal: no colour codes in it.
/// (The harness removes NO_COLOR, so the tiers decide this themselves.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tier_logs_written_to_a_file_are_plain_text() {
    let system = System::start(Options::default()).await;
    let logs: Vec<(String, String)> = system
        .logs()
        .into_iter()
        .filter(|(name, _)| name.ends_with(".log"))
        .collect();
    assert!(
        logs.len() >= 4,
        "a log per tier: {:?}",
        logs.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    for (name, text) in &logs {
        assert!(text.contains("INFO"), "{name} was read: {text}");
        assert!(!text.contains('\u{1b}'), "{name} holds ANSI escape codes: {text}");
    }
}

/// The deployments a system's Redis records (`eg:deployments`), as `prefix partitions`.
fn deployments(system: &System) -> Vec<String> {
    let listed = system.redis_cli(&["HGETALL", eg_store::keyspace::DEPLOYMENTS]);
    let fields: Vec<&str> = listed.lines().collect();
    fields.chunks(2).map(|pair| pair.join(" ")).collect()
}

/// The first tiers of a deployment start on an empty Redis and record it: its partition
/// count under its prefix, and its prefix among the deployments of this Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_start_on_an_empty_redis_records_the_deployment() {
    let system = System::start(Options::default().senders(0)).await;
    assert_eq!(system.redis_cli(&["GET", "{eg:catalog}:partitions"]), "2");
    assert_eq!(deployments(&system), ["eg 2"]);
}

/// A tier whose `EG__REDIS__PREFIX` names no deployment of a Redis that holds another
/// one's refuses to start, naming the setting, its prefix and the prefixes found (it
/// would otherwise run, report ready and deliver nothing). A new deployment beside the
/// other is started on purpose with `EG__REDIS__NEW_DEPLOYMENT=true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tier_with_a_prefix_of_no_deployment_refuses_to_start_and_says_why() {
    let system = System::start(Options::default().senders(0)).await;
    let log = system
        .start_refused(Role::Sender, "mistyped-sender", &[("EG__REDIS__PREFIX", "eg-prdo")])
        .await;
    assert!(
        log.contains(r#"no eg deployment under EG__REDIS__PREFIX="eg-prdo""#)
            && log.contains(r#"deployments under "eg" (2 partitions)"#)
            && log.contains("EG__REDIS__NEW_DEPLOYMENT=true"),
        "the refusal names the setting, the prefix and the prefixes found:\n{log}"
    );
    assert_eq!(deployments(&system), ["eg 2"], "the refused prefix is not recorded");
}

/// Redis loses its data while the tiers run: the tiers record the deployment again
/// (on their heartbeat), so a tier started next is still checked against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployment_is_recorded_again_after_redis_lost_its_data() {
    let system = System::start(Options::default().senders(0)).await;
    system.flush_redis();
    eventually(DEADLINE, "the running tiers recording the deployment again", || async {
        (system.redis_cli(&["GET", "{eg:catalog}:partitions"]) == "2" && deployments(&system) == ["eg 2"]).then_some(())
    })
    .await;
    let log = system
        .start_refused(Role::Sender, "four-partition-sender", &[("EG__REDIS__PARTITIONS", "4")])
        .await;
    assert!(log.contains("EG__REDIS__PARTITIONS=2"), "{log}");
}
