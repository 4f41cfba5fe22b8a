//! Every archived event ends up in exactly one archive object, against a real Redis and
//! the real local-directory store, when a write lands but its answer is lost and
//! `drop-oldest` then trims the first entry of the batch: the retry reads the rest in a
//! batch of its own, and must write them under the name they were first given (found
//! already there), not into a second object.
#![allow(clippy::unwrap_used)]

use crate::archive_writer::ArchiveWriter;
use crate::stores::{Built, Destination, Stores};
use crate::test_support::{Faulty, connect};
use eg_core::TopicName;
use eg_core::subscription::DeadLetterStore;
use eg_core::topic::Topic;
use eg_store::queue::{ArchiveAppend, EventToStore, Routes, WhenFull};
use eg_store::{Catalog, CatalogCache, Clock, Store};
use eg_testkit::RedisServer;
use flate2::read::GzDecoder;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const CONTAINER: &str = "topic-archive";
const BOUND: u64 = 3;

async fn archived_topic(store: &Store) {
    let body = json!({"properties": {"archive": {
        "destination": {"endpointType": "LocalDirectory", "properties": {"containerName": CONTAINER}},
        "retentionDays": 7,
    }}});
    let topic = Topic::from_resource(TopicName::parse("orders").unwrap(), &body).unwrap();
    Catalog::new(store.clone())
        .put_topic(&topic, ["k1".into(), "k2".into()])
        .await
        .unwrap();
}

/// Publishes `ids` to the archived topic (matching no subscription: archived only), with
/// the backlog bound at `BOUND`, oldest dropped past it; how many it dropped.
async fn publish(store: &Store, ids: &[&str]) -> u64 {
    let events: Vec<EventToStore> = ids
        .iter()
        .map(|id| EventToStore {
            event_key: (*id).into(),
            body: json!({"id": id, "eventType": "A", "subject": "s", "data": {}}).to_string(),
            deliveries: Vec::new(),
        })
        .collect();
    let archive = ArchiveAppend {
        topic: "orders".into(),
        max_backlog: BOUND,
        when_full: WhenFull::DropOldest,
    };
    let version = Catalog::new(store.clone()).version().await.unwrap();
    let p = store.keys().partition(0);
    let (_, dropped) = store
        .publish_archived(&p, version, &events, &Routes::default(), None, Some(&archive))
        .await
        .unwrap();
    dropped
}

/// The event ids of every archive object under `root`, per object, sorted.
fn objects_written(root: &Path) -> Vec<Vec<String>> {
    let mut objects: Vec<Vec<String>> = eg_testkit::files_under(root)
        .into_iter()
        .filter(|path| path.to_string_lossy().ends_with(".jsonl.gz"))
        .map(|path| {
            let mut text = String::new();
            GzDecoder::new(&std::fs::read(&path).unwrap()[..])
                .read_to_string(&mut text)
                .unwrap();
            text.lines()
                .map(|l| {
                    serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]["id"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
                .collect()
        })
        .collect();
    objects.sort();
    objects
}

#[tokio::test]
async fn a_landed_write_retried_after_drop_oldest_trimmed_its_first_entry_is_not_written_twice() {
    let server = RedisServer::start();
    let store = connect(&server).await;
    archived_topic(&store).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(CONTAINER);
    // The first put writes the object, then its answer is lost.
    let objects = Arc::new(Faulty::new(&root, 0, 1));
    let stores = Stores::new(
        dir.path().to_owned(),
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
            store: objects,
            base_url: "file:///topic-archive".into(),
        },
    );
    let cache = Arc::new(CatalogCache::load(Catalog::new(store.clone())).await.unwrap());
    let writer = ArchiveWriter::new(
        store.clone(),
        Clock::default(),
        cache,
        Arc::new(stores),
        "w1".into(),
        Duration::from_millis(10),
        Duration::from_millis(10),
    );
    let p = store.keys().partition(0);

    assert_eq!(publish(&store, &["e1", "e2", "e3"]).await, 0);
    assert!(writer.pass(&p).await.is_err(), "the answer was lost");
    assert_eq!(objects_written(&root), [["e1", "e2", "e3"]], "the write landed");

    // A publish past the bound trims e1, which the writer still holds.
    assert_eq!(publish(&store, &["e4"]).await, 1);
    writer.pass(&p).await.unwrap();
    writer.pass(&p).await.unwrap();

    assert_eq!(
        objects_written(&root),
        [vec!["e1", "e2", "e3"], vec!["e4"]],
        "e2 and e3 in their first object only"
    );
    assert_eq!(store.archive_backlog_size(&p).await.unwrap().entries, 0);
    let mut redis = server.client();
    let names: u64 = redis::cmd("EXISTS")
        .arg(p.archive_object_members())
        .query(&mut redis)
        .unwrap();
    assert_eq!(names, 0, "finished entries leave no name behind");
}
