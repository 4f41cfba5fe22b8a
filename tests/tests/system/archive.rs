//! The topic archive (docs/archive.md), end to end: every event an archived topic
//! accepts — matched by a subscription or not — lands once in the archive's local
//! directory as gzip JSON lines, and a publish the archive backlog's bound refuses
//! answers `503 ArchiveBacklogFull` and stores nothing; objects past the retention go;
//! an Azure store down and back: the backlog shows, then drains, nothing lost.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, System, azure_dead_letter_to, azurite_container, create_container, event,
    eventually, numbered_events, s3_bucket, s3_dead_letter_to, sorted, strings, subscription, text_reply,
};
use eg_testkit::{Azurite, S3Server};
use flate2::read::GzDecoder;
use futures_util::StreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

const CONTAINER: &str = "topic-archive";

fn archived_topic() -> Value {
    json!({"inputSchema": "EventGridSchema", "archive": {
        "destination": {"endpointType": "LocalDirectory", "properties": {"containerName": CONTAINER}},
        "retentionDays": 7
    }})
}

fn order(id: &str, subject: &str) -> Value {
    event(id, "Order.Created", subject, json!({"id": id}))
}

/// Every line of every archive object under `root`, in name order.
fn archived_lines(root: &Path) -> Vec<Value> {
    let mut files: Vec<_> = eg_testkit::files_under(root)
        .into_iter()
        .filter(|path| path.to_string_lossy().ends_with(".jsonl.gz"))
        .collect();
    files.sort();
    let mut lines = Vec::new();
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        let mut text = String::new();
        GzDecoder::new(&bytes[..]).read_to_string(&mut text).unwrap();
        lines.extend(text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()));
    }
    lines
}

/// The archived events' ids once `want` of them are there (or the deadline passed).
async fn archived_ids(root: &Path, want: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let ids: Vec<String> = archived_lines(root)
            .iter()
            .map(|l| l["event"]["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        if ids.len() >= want || tokio::time::Instant::now() > deadline {
            return ids;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_the_local_directory_receives_every_accepted_event_once() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let system = System::start(Options::default()).await;
    system.create_topic_with("orders", archived_topic()).await;
    let (_, shown) = system.get("/topics/orders").await;
    assert_eq!(shown["properties"]["archive"]["retentionDays"], 7);
    system
        .create_subscription(
            "orders",
            "paid",
            subscription(receiver.url(), json!({"filter": {"subjectBeginsWith": "/paid"}})),
        )
        .await;
    // o-1 and o-3 match the subscription; o-2 and o-4 match nothing and are archived all the same.
    for batch in [
        json!([order("o-1", "/paid/1"), order("o-2", "/open/2")]),
        json!([order("o-3", "/paid/3")]),
        json!([order("o-4", "/open/4")]),
    ] {
        let (status, body) = text_reply(system.publish("orders", &batch).await).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let root = system.dead_letter_dir().join(CONTAINER).join("archive").join("orders");
    let ids = archived_ids(&root, 4).await;
    assert_eq!(sorted(ids), strings(&["o-1", "o-2", "o-3", "o-4"]), "each once");
    let lines = archived_lines(&root);
    assert!(
        lines
            .iter()
            .all(|l| l["streamId"].is_string() && l["acceptedAt"].is_u64()),
        "{lines:?}"
    );
    receiver.wait_for_ids(["o-1", "o-3"], DEADLINE).await;
    // The status answer has the topic's archive row: the backlog, no write problem.
    let (status, page) = system.get("/status").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let orders = page["topics"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "orders"))
        .unwrap();
    assert!(orders["archive"]["backlog"].is_u64(), "{orders}");
    assert!(orders["archive"]["lastError"].is_null(), "{orders}");
    assert_eq!(orders["archive"]["store"], "local", "{orders}");
    assert_eq!(orders["archive"]["container"], CONTAINER, "{orders}");
    assert_eq!(orders["archive"]["retentionDays"], 7, "{orders}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_a_publish_past_the_backlog_bound_is_refused_whole() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let system = System::start(Options::default().env("EG__ARCHIVE__MAX_BACKLOG", "2")).await;
    system.create_topic_with("orders", archived_topic()).await;
    system
        .create_subscription("orders", "all", subscription(receiver.url(), json!({})))
        .await;
    // Three events cannot fit a backlog of two, whatever the writer has done.
    let too_many = json!([order("r-1", "/a"), order("r-2", "/a"), order("r-3", "/a")]);
    let response = system.publish("orders", &too_many).await;
    assert!(response.headers().contains_key("retry-after"));
    let (status, body) = text_reply(response).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("ArchiveBacklogFull"), "{body}");
    // One that fits goes through; the refused ones were never stored, so never arrive.
    let (status, body) = text_reply(system.publish("orders", &json!([order("k-1", "/a")])).await).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let received = receiver.wait_for_ids(["k-1"], DEADLINE).await;
    assert_eq!(received, strings(&["k-1"]));
    let root = system.dead_letter_dir().join(CONTAINER).join("archive").join("orders");
    assert_eq!(archived_ids(&root, 1).await, strings(&["k-1"]));
}

/// `drop-oldest` never refuses, and what it drops shows in red on the status page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_entries_dropped_at_the_bound_are_counted_on_the_status_page() {
    let system = System::start(
        Options::default()
            .env("EG__ARCHIVE__MAX_BACKLOG", "1")
            .env("EG__ARCHIVE__WHEN_FULL", "drop-oldest"),
    )
    .await;
    system.create_topic_with("orders", archived_topic()).await;
    // Five in one request: the backlog keeps one, whatever the writer has done.
    let batch: Vec<Value> = (1..=5).map(|n| order(&format!("d-{n}"), "/a")).collect();
    let (status, body) = text_reply(system.publish("orders", &json!(batch)).await).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let dropped = eventually(DEADLINE, "the dropped entries on the status answer", || async {
        let (_, page) = system.get("/status").await;
        let orders = page["topics"]
            .as_array()?
            .iter()
            .find(|t| t["name"] == "orders")?
            .clone();
        let dropped = orders["archive"]["droppedLastHour"].as_u64()?;
        (dropped > 0).then_some(dropped)
    })
    .await;
    assert_eq!(dropped, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_objects_past_the_retention_are_deleted_and_newer_ones_kept() {
    let system = System::start(Options::default().env("EG__ARCHIVE__SWEEP_INTERVAL", "1s")).await;
    system.create_topic_with("orders", archived_topic()).await;
    let root = system.dead_letter_dir().join(CONTAINER).join("archive").join("orders");
    // An object of a minute long past the 7-day retention, as an earlier writer left it.
    let old_dir = root.join("2020/01/01/00/00");
    std::fs::create_dir_all(&old_dir).unwrap();
    let old = old_dir.join("p0-1577836800000-0.jsonl.gz");
    let empty = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::fs::write(&old, empty.finish().unwrap()).unwrap();
    let (status, body) = text_reply(system.publish("orders", &json!([order("n-1", "/a")])).await).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(archived_ids(&root, 1).await, strings(&["n-1"]));
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while old.exists() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(!old.exists(), "the expired object is deleted");
    assert_eq!(archived_ids(&root, 1).await, strings(&["n-1"]), "the new one is kept");
}

/// The topic's row of `GET /status`.
async fn archive_row(system: &System) -> Value {
    let (status, page) = system.get("/status").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["topics"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "orders"))
        .map(|t| t["archive"].clone())
        .unwrap_or_default()
}

/// The event ids of every archive object in the store, in name order.
async fn stored_ids(store: &Arc<dyn ObjectStore>, folder: &str) -> Vec<String> {
    let mut names: Vec<object_store::path::Path> = store
        .list(Some(&object_store::path::Path::from(folder)))
        .filter_map(|m| async move { m.ok().map(|m| m.location) })
        .collect()
        .await;
    names.sort();
    let mut ids = Vec::new();
    for name in names {
        let bytes = store.get(&name).await.unwrap().bytes().await.unwrap();
        let mut text = String::new();
        GzDecoder::new(&bytes[..]).read_to_string(&mut text).unwrap();
        for line in text.lines() {
            let line: Value = serde_json::from_str(line).unwrap();
            ids.push(line["event"]["id"].as_str().unwrap_or_default().to_owned());
        }
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_azurite_down_and_back_the_backlog_shows_then_drains_nothing_lost() {
    let mut azurite = tokio::task::spawn_blocking(Azurite::start).await.unwrap();
    create_container(&azurite, "arch");
    let options = Options::default()
        .azurite(&azurite)
        .env("EG__DEADLETTER__RETRY_INTERVAL", "1s");
    let system = System::start(options).await;
    let topic = json!({"archive": {"destination": azure_dead_letter_to("arch"), "retentionDays": 7}});
    system.create_topic_with("orders", topic).await;

    azurite.stop();
    system
        .publish_ok("orders", &json!(numbered_events("down", 0..20)))
        .await;
    // The backlog waits in Redis, and the page says why.
    eventually(DEADLINE, "the archive's write problem shown", || async {
        let row = archive_row(&system).await;
        (row["lastError"].is_string() && row["backlog"].as_u64() == Some(20)).then_some(())
    })
    .await;

    let azurite = tokio::task::spawn_blocking(move || {
        azurite.start_again();
        azurite
    })
    .await
    .unwrap();
    eventually(DEADLINE * 2, "the backlog drained", || async {
        let row = archive_row(&system).await;
        (row["backlog"].as_u64() == Some(0) && row["lastError"].is_null()).then_some(())
    })
    .await;
    let store = azurite_container(&azurite, "arch");
    let ids = stored_ids(&store, "archive/orders").await;
    let expected: Vec<String> = (0..20).map(|n| format!("down-{n}")).collect();
    assert_eq!(sorted(ids), sorted(expected), "each once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_an_s3_bucket_receives_every_event_under_the_key_prefix() {
    let s3 = tokio::task::spawn_blocking(S3Server::start).await.unwrap();
    s3.create_bucket("arch");
    let system = System::start(Options::default().s3_server(&s3, "moto")).await;
    let destination = s3_dead_letter_to("moto", "arch", "eg/arch");
    let topic = json!({"archive": {"destination": destination, "retentionDays": 30}});
    system.create_topic_with("orders", topic).await;
    system.publish_ok("orders", &json!(numbered_events("s3", 0..10))).await;
    eventually(DEADLINE, "the backlog drained", || async {
        (archive_row(&system).await["backlog"].as_u64() == Some(0)).then_some(())
    })
    .await;
    let bucket = s3_bucket(&s3, "arch");
    let ids = stored_ids(&bucket, "eg/arch/archive/orders").await;
    let expected: Vec<String> = (0..10).map(|n| format!("s3-{n}")).collect();
    assert_eq!(sorted(ids), sorted(expected), "each once, under the key prefix");
}

/// During a rolling upgrade an earlier eg-deadletter would never write the backlog (and
/// an earlier ingress never fill it): an archive is refused while such a copy runs,
/// naming it, and taken once it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_is_refused_while_an_older_dead_letter_worker_runs() {
    let system = System::start(Options::default()).await;
    let store = system.store();
    let now = eg_core::UnixMillis(chrono::Utc::now().timestamp_millis());
    let older = eg_store::heartbeat::LiveCopy {
        tier: "eg-deadletter".into(),
        instance: "deadletter-old-1".into(),
        version: "0.0.9".into(),
        started_at: now,
        last_seen: now,
        capabilities: Vec::new(),
    };
    store.beat(&older).await.unwrap();
    let body = json!({ "properties": archived_topic() });
    let (status, answer) = system.put_topic("orders", &body).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("eg-deadletter deadletter-old-1 (version 0.0.9) cannot do a topic archive"),
        "{message}"
    );
    // A topic without an archive needs nothing of the older copy.
    system.create_topic("plain").await;
    store.leave("eg-deadletter", "deadletter-old-1").await.unwrap();
    let (status, answer) = system.put_topic("orders", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}
