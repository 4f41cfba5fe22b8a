//! Every dead-letter record ends up in exactly one object, against a real Redis and the
//! real local-directory store, when a write lands but its answer is lost and the records
//! come back in another grouping: with newer records of the same hour, or a few at a time
//! (another worker's smaller batch).
//!
//! The store is `faulty_store::Faulty`: its first puts fail, refused before writing, or —
//! as a connection reset after the upload — after really writing the object.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::notify::Notifier;
use crate::stores::{Built, Destination, Stores};
use crate::test_support::{Faulty, connect};
use crate::worker::Worker;
use eg_core::deadletter::DeadLetterEntry;
use eg_core::fate::DeadLetterReason;
use eg_core::subscription::DeadLetterStore;
use eg_core::{Delivery, UnixMillis};
use eg_runtime::settings::DeadLetterSection;
use eg_store::queue::EventToStore;
use eg_store::{Catalog, Clock, Partition, Retention, Settlement, Store};
use eg_testkit::RedisServer;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const CONTAINER: &str = "dead-letters";
/// Every record's dead-letter time: one hour, one folder.
const DEAD_LETTERED_AT: UnixMillis = UnixMillis(1_772_600_767_000);

struct Setup {
    server: RedisServer,
    store: Store,
    dir: tempfile::TempDir,
    objects: Arc<Faulty>,
}

impl Setup {
    /// Its store refuses the first `refused` puts, then loses the answer of `lost`.
    async fn start(refused: usize, lost: usize) -> Self {
        let server = RedisServer::start();
        let store = connect(&server).await;
        let dir = tempfile::tempdir().unwrap();
        let objects = Arc::new(Faulty::new(&dir.path().join(CONTAINER), refused, lost));
        Self {
            server,
            store,
            dir,
            objects,
        }
    }

    fn partition(&self) -> Partition {
        self.store.keys().partition(0)
    }

    /// A dead-letter worker (one process) reading `batch` records at a time, whose
    /// records come back to another worker after `retry_interval`.
    fn worker(&self, consumer: &str, batch: usize, retry_interval: Duration, give_up_after: Duration) -> Worker {
        let section = DeadLetterSection {
            dir: self.dir.path().to_owned(),
            delay: Duration::ZERO,
            retry_interval,
            give_up_after,
            batch,
            ..DeadLetterSection::default()
        };
        let stores = Stores::new(
            self.dir.path().to_owned(),
            BTreeMap::new(),
            BTreeMap::new(),
            Duration::from_secs(5),
        );
        stores.insert(
            Destination {
                store: DeadLetterStore::LocalDirectory,
                container: CONTAINER.into(),
            },
            Built {
                store: self.objects.clone(),
                base_url: "file:///dead-letters".into(),
            },
        );
        Worker::new(
            self.store.clone(),
            Clock::default(),
            &section,
            consumer.into(),
            stores,
            Arc::new(Notifier::off()),
        )
    }

    /// Dead-letters one delivery of each event in `events` (the record's `id` is the
    /// event's key), the way a sender does.
    async fn dead_letter(&self, events: &[&str]) {
        let p = self.partition();
        let to_store: Vec<EventToStore> = events
            .iter()
            .map(|key| EventToStore {
                event_key: (*key).into(),
                body: serde_json::json!({"id": key, "eventType": "A", "subject": "s", "data": {}}).to_string(),
                deliveries: vec![Delivery::new(
                    format!("{key}-d"),
                    (*key).into(),
                    "orders".into(),
                    "billing".into(),
                    UnixMillis(1_000),
                )],
            })
            .collect();
        let version = Catalog::new(self.store.clone()).version().await.unwrap();
        self.store.publish(&p, version, &to_store).await.unwrap();
        let held = self
            .store
            .read_ready(&p, "sender", events.len(), Duration::from_millis(20))
            .await
            .unwrap();
        assert_eq!(held.len(), events.len());
        for h in &held {
            let settlement = Settlement::DeadLetter {
                entry: entry(&h.delivery),
            };
            let item = h.settle(settlement, None);
            self.store.settle_many(&p, &[item], &Retention::NONE).await.unwrap();
        }
    }

    /// The `id` of every record in every object, per object.
    fn objects_written(&self) -> Vec<Vec<String>> {
        let mut objects = Vec::new();
        let mut folders = vec![self.dir.path().join(CONTAINER)];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "json") {
                    let records: Vec<serde_json::Value> =
                        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                    objects.push(records.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect());
                }
            }
        }
        objects.sort();
        objects
    }

    async fn backlog(&self) -> u64 {
        self.store.depths(&self.partition()).await.unwrap().deadletter_backlog
    }

    /// Whether Redis still holds any object name.
    fn names_kept(&self) -> bool {
        let mut redis = self.server.client();
        let p = self.partition();
        let count: u64 = redis::cmd("EXISTS")
            .arg(p.deadletter_object_of())
            .arg(p.deadletter_object_members())
            .query(&mut redis)
            .unwrap();
        count > 0
    }
}

fn entry(d: &Delivery) -> DeadLetterEntry {
    DeadLetterEntry {
        container_name: CONTAINER.into(),
        store: DeadLetterStore::LocalDirectory,
        subscription: "Billing".into(),
        topic: d.topic.clone(),
        delivery_id: d.id.clone(),
        reason: DeadLetterReason::MaxDeliveryAttemptsExceeded,
        delivery_attempts: 3,
        last_outcome: None,
        last_http_status_code: None,
        publish_time: d.published_at,
        last_attempt_time: None,
        dead_lettered_at: DEAD_LETTERED_AT,
        format: Default::default(),
        stored_format: d.format,
        event_id: d.event_id.clone(),
        traceparent: None,
        tracestate: None,
    }
}

fn ids(objects: &[&[&str]]) -> Vec<Vec<String>> {
    objects
        .iter()
        .map(|o| o.iter().map(|id| (*id).to_owned()).collect())
        .collect()
}

const RECLAIM: Duration = Duration::from_secs(1);
const HOURS: Duration = Duration::from_secs(1_000_000_000);

#[tokio::test]
async fn a_landed_write_read_again_with_newer_records_is_not_written_twice() {
    let s = Setup::start(0, 1).await;
    s.dead_letter(&["a", "b"]).await;
    s.worker("w1", 10, RECLAIM, HOURS).pass(&s.partition()).await.unwrap();
    assert_eq!(s.objects_written(), ids(&[&["a", "b"]]), "the write landed");
    assert_eq!(s.backlog().await, 2, "its answer was lost: the records stay");

    // A newer record of the same hour arrives; a and b come back to another worker.
    s.dead_letter(&["c"]).await;
    tokio::time::sleep(RECLAIM).await;
    s.worker("w2", 10, RECLAIM, HOURS).pass(&s.partition()).await.unwrap();

    assert_eq!(s.objects_written(), ids(&[&["a", "b"], &["c"]]));
    assert_eq!(s.backlog().await, 0);
    assert!(!s.names_kept(), "finished records leave no name behind");
}

#[tokio::test]
async fn a_landed_write_read_again_a_record_at_a_time_is_not_written_twice() {
    let s = Setup::start(0, 1).await;
    s.dead_letter(&["a", "b", "c"]).await;
    s.worker("w1", 10, RECLAIM, HOURS).pass(&s.partition()).await.unwrap();
    assert_eq!(s.objects_written(), ids(&[&["a", "b", "c"]]));
    s.dead_letter(&["d"]).await;

    // Another worker takes one record at a time: the first one it reads brings the
    // others of its object along.
    tokio::time::sleep(RECLAIM).await;
    s.worker("w2", 1, RECLAIM, HOURS).pass(&s.partition()).await.unwrap();

    assert_eq!(s.objects_written(), ids(&[&["a", "b", "c"], &["d"]]));
    assert_eq!(s.backlog().await, 0);
    assert!(!s.names_kept());
}

#[tokio::test]
async fn a_write_that_never_landed_is_written_with_the_records_first_named_with_it() {
    let s = Setup::start(1, 0).await;
    s.dead_letter(&["a", "b"]).await;
    s.worker("w1", 10, RECLAIM, HOURS).pass(&s.partition()).await.unwrap();
    assert_eq!(s.objects_written(), Vec::<Vec<String>>::new());
    assert!(s.names_kept(), "a and b were named together");
    s.dead_letter(&["c"]).await;

    tokio::time::sleep(RECLAIM).await;
    s.worker("w2", 1, RECLAIM, HOURS).pass(&s.partition()).await.unwrap();
    assert_eq!(s.objects_written(), ids(&[&["a", "b"], &["c"]]));
    assert_eq!(s.backlog().await, 0);
    assert!(!s.names_kept());
}

#[tokio::test]
async fn records_dropped_after_give_up_after_leave_no_name_behind() {
    let s = Setup::start(usize::MAX, 0).await;
    s.dead_letter(&["a", "b"]).await;
    s.worker("w1", 10, RECLAIM, Duration::ZERO)
        .pass(&s.partition())
        .await
        .unwrap();
    assert_eq!(s.backlog().await, 0, "dropped and counted");
    assert!(!s.names_kept());
}
