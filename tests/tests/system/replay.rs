//! Replaying a topic's archive into a subscription (docs/archive.md, "Replay"), end to
//! end: a window with a filter replays what the subscription's and the request's filters
//! pass, each event once, with its own id and the job's mark; a job whose worker is
//! killed goes on from where it was and replays nothing twice; a cancelled job stops; bad
//! requests are refused naming the field.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, System, TierId, event, eventually, numbered_events, subscription,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

const CONTAINER: &str = "replay-archive";
const REPLAY_HEADER: &str = "aeg-replay-job";

fn archived_topic() -> Value {
    json!({"inputSchema": "EventGridSchema", "archive": {
        "destination": {"endpointType": "LocalDirectory", "properties": {"containerName": CONTAINER}},
        "retentionDays": 7
    }})
}

fn rfc3339(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Per event id, how many deliveries the receiver got without a replay mark and with
/// each job's mark.
fn deliveries(receiver: &Receiver) -> HashMap<String, (usize, HashMap<String, usize>)> {
    let mut seen: HashMap<String, (usize, HashMap<String, usize>)> = HashMap::new();
    for request in receiver.received().iter().filter(|r| r.status == 200) {
        for id in request.event_ids() {
            let entry = seen.entry(id).or_default();
            match request.header(REPLAY_HEADER) {
                Some(job) => *entry.1.entry(job.to_owned()).or_default() += 1,
                None => entry.0 += 1,
            }
        }
    }
    seen
}

/// Waits until the job is no longer running; answers it.
async fn finished(system: &System, path: &str) -> Value {
    eventually(Duration::from_secs(60), "the replay job to finish", || async {
        let (status, job) = system.get(path).await;
        assert_eq!(status, StatusCode::OK, "{job}");
        (job["state"] != "Running").then_some(job)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_a_window_with_a_filter_sends_each_passing_event_once_marked() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let system = System::start(Options::default()).await;
    system.create_topic_with("orders", archived_topic()).await;
    system
        .create_subscription(
            "orders",
            "paid",
            subscription(receiver.url(), json!({"filter": {"subjectBeginsWith": "/paid"}})),
        )
        .await;
    let order = |id: &str, event_type: &str, subject: &str| event(id, event_type, subject, json!({"id": id}));
    system
        .publish_ok(
            "orders",
            &json!([
                order("o-1", "Order.Created", "/paid/1"),
                order("o-2", "Order.Created", "/open/2"),
                order("o-3", "Order.Created", "/paid/3"),
                order("o-4", "Order.Shipped", "/paid/4"),
            ]),
        )
        .await;
    receiver.wait_for_ids(["o-1", "o-3", "o-4"], DEADLINE).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let window_end = chrono::Utc::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    // After the window: archived, never replayed by this job.
    system
        .publish_ok("orders", &json!([order("o-5", "Order.Created", "/paid/5")]))
        .await;
    receiver.wait_for_ids(["o-5"], DEADLINE).await;

    let replay = "/topics/orders/eventSubscriptions/paid/replay";
    let from = rfc3339(window_end - chrono::Duration::minutes(5));
    let (status, job) = system
        .post(
            replay,
            Some(&json!({"from": from, "to": rfc3339(window_end),
                "filter": {"includedEventTypes": ["Order.Created"]}})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    assert_eq!(job["state"], "Running", "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let path = format!("/topics/orders/eventSubscriptions/paid/replays/{id}");
    let job = finished(&system, &path).await;
    assert_eq!(job["state"], "Succeeded", "{job}");
    // o-1..o-4 were in the window; o-2 fails the subscription's filter, o-4 the request's.
    assert_eq!(job["progress"]["read"], 4, "{job}");
    assert_eq!(job["progress"]["replayed"], 2, "{job}");
    assert_eq!(job["progress"]["filtered"], 2, "{job}");

    receiver.wait_for(6, DEADLINE).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = deliveries(&receiver);
    let marked = |event: &str| {
        seen.get(event)
            .map_or(0, |(_, jobs)| jobs.get(&id).copied().unwrap_or(0))
    };
    assert_eq!((marked("o-1"), marked("o-3")), (1, 1), "{seen:?}");
    assert_eq!((marked("o-2"), marked("o-4"), marked("o-5")), (0, 0, 0), "{seen:?}");
    assert!(
        seen.values().all(|(live, _)| *live == 1),
        "each delivered once live: {seen:?}"
    );

    // Into a subscription made a moment ago: the worker's catalog may not show it yet,
    // and it looks again before failing the job.
    system
        .create_subscription("orders", "fresh", subscription(receiver.url(), json!({})))
        .await;
    let (status, job) = system
        .post(
            "/topics/orders/eventSubscriptions/fresh/replay",
            Some(&json!({"from": from, "to": rfc3339(window_end)})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let fresh = format!(
        "/topics/orders/eventSubscriptions/fresh/replays/{}",
        job["id"].as_str().unwrap()
    );
    let job = finished(&system, &fresh).await;
    assert_eq!(
        (job["state"].as_str(), job["progress"]["replayed"].as_u64()),
        (Some("Succeeded"), Some(4)),
        "{job}"
    );

    let (status, list) = system.get("/topics/orders/eventSubscriptions/paid/replays").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["value"][0]["id"], id.as_str(), "{list}");

    // Bad requests say which field and why.
    let (status, body) = system.post(replay, Some(&json!({"from": "yesterday"}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("from"), "{body}");
    let (status, body) = system
        .post(replay, Some(&json!({"from": from, "to": "2999-01-01T00:00:00Z"})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("future"), "{body}");
    let (status, body) = system.get("/topics/orders/eventSubscriptions/paid/replays/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    system.create_topic("plain").await;
    system
        .create_subscription("plain", "all", subscription(receiver.url(), json!({})))
        .await;
    let (status, body) = system
        .post(
            "/topics/plain/eventSubscriptions/all/replay",
            Some(&json!({"from": from})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("not archived"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_resumes_after_its_worker_is_killed_and_a_cancelled_job_stops() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let mut system = System::start(Options::default()).await;
    system.create_topic_with("orders", archived_topic()).await;
    system
        .create_subscription("orders", "all", subscription(receiver.url(), json!({})))
        .await;
    let events = numbered_events("r", 0..300);
    for batch in events.chunks(100) {
        system.publish_ok("orders", &json!(batch)).await;
    }
    receiver.wait_for(300, DEADLINE).await;
    let from = rfc3339(chrono::Utc::now() - chrono::Duration::minutes(5));
    let to = rfc3339(chrono::Utc::now());

    // 60 events a second: five seconds of work, killed a second and a half in.
    let (status, job) = system
        .post(
            "/topics/orders/eventSubscriptions/all/replay",
            Some(&json!({"from": from, "to": to, "maxEventsPerSecond": 60})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let path = format!("/topics/orders/eventSubscriptions/all/replays/{id}");
    eventually(DEADLINE, "the replay to start", || async {
        let (_, job) = system.get(&path).await;
        (job["progress"]["replayed"].as_u64().unwrap_or(0) > 0).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    system.restart(TierId::DeadLetter).await;
    let (_, during) = system.get(&path).await;
    assert_eq!(during["state"], "Running", "{during}");
    let job = finished(&system, &path).await;
    assert_eq!(job["state"], "Succeeded", "{job}");
    assert_eq!(job["progress"]["replayed"], 300, "{job}");
    eventually(DEADLINE, "300 replayed deliveries", || async {
        let seen = deliveries(&receiver);
        let replayed: usize = seen.values().map(|(_, jobs)| jobs.get(&id).copied().unwrap_or(0)).sum();
        (replayed >= 300).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = deliveries(&receiver);
    assert_eq!(seen.len(), 300, "{seen:?}");
    for (event, (live, jobs)) in &seen {
        assert_eq!(
            (*live, jobs.get(&id).copied()),
            (1, Some(1)),
            "{event}: once live, once replayed"
        );
    }

    // A slow job cancelled once it started: nothing more is enqueued after the cancel.
    let (status, slow) = system
        .post(
            "/topics/orders/eventSubscriptions/all/replay",
            Some(&json!({"from": from, "to": to, "maxEventsPerSecond": 10})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{slow}");
    let slow_id = slow["id"].as_str().unwrap().to_owned();
    let slow_path = format!("/topics/orders/eventSubscriptions/all/replays/{slow_id}");
    eventually(DEADLINE, "the slow replay to start", || async {
        let (_, job) = system.get(&slow_path).await;
        (job["progress"]["replayed"].as_u64().unwrap_or(0) > 0).then_some(())
    })
    .await;
    let (status, cancelled) = system.post(&format!("{slow_path}/cancel"), None).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["state"], "Cancelled", "{cancelled}");
    let replayed = cancelled["progress"]["replayed"].as_u64().unwrap();
    assert!(replayed < 300, "{cancelled}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, after) = system.get(&slow_path).await;
    assert_eq!(after["progress"]["replayed"].as_u64(), Some(replayed), "{after}");
    // What was enqueued before the cancel is delivered, and nothing after it.
    eventually(DEADLINE, "the cancelled job's deliveries", || async {
        let seen = deliveries(&receiver);
        let delivered: usize = seen
            .values()
            .map(|(_, jobs)| jobs.get(&slow_id).copied().unwrap_or(0))
            .sum();
        assert!(
            delivered as u64 <= replayed,
            "{delivered} delivered, {replayed} enqueued"
        );
        (delivered as u64 == replayed).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_into_a_namespace_queue_puts_each_event_in_the_queue_again() {
    use crate::queue_ops::{publish, queue_subscription};
    let system = System::start(Options::default()).await;
    let mut topic = json!({"publisherType": "Custom", "inputSchema": "CloudEventSchemaV1_0",
        "eventRetentionInDays": 1});
    topic["archive"] = archived_topic()["archive"].clone();
    let key = system.create_topic_with("jobs", topic).await;
    queue_subscription(&system, "jobs", "workers").await;
    publish(&system, "jobs", &key, 5).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let to = rfc3339(chrono::Utc::now());
    let from = rfc3339(chrono::Utc::now() - chrono::Duration::minutes(5));

    let (status, job) = system
        .post(
            "/topics/jobs/eventSubscriptions/workers/replay",
            Some(&json!({"from": from, "to": to})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let job = finished(
        &system,
        &format!("/topics/jobs/eventSubscriptions/workers/replays/{id}"),
    )
    .await;
    assert_eq!(
        (job["state"].as_str(), job["progress"]["replayed"].as_u64()),
        (Some("Succeeded"), Some(5)),
        "{job}"
    );

    // The queue holds each event twice: as published, and replayed.
    let mut ids = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while ids.len() < 10 && tokio::time::Instant::now() < deadline {
        let response = system
            .http()
            .post(format!(
                "{}/topics/jobs/eventsubscriptions/workers:receive?api-version=2024-06-01&maxEvents=10&maxWaitTime=10",
                system.ingress_url()
            ))
            .header("aeg-sas-key", &key)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let answer: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(status, StatusCode::OK, "receive: {answer}");
        ids.extend(
            answer["value"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["event"]["id"].as_str().map(str::to_owned)),
        );
    }
    ids.sort();
    let expected: Vec<String> = (0..5).flat_map(|i| [format!("q{i}"), format!("q{i}")]).collect();
    assert_eq!(ids, expected);
}
