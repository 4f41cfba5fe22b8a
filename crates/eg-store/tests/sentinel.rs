//! The Redis layer behind Redis Sentinel: the store finds the primary through the
//! sentinels (with passwords for the data nodes and for the sentinels), and when the
//! primary is killed while publishes go on, it follows the failover by itself; with
//! replica acknowledgements, no publish answered as stored is lost.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_store::{Catalog, Credentials, PublishOutcome, RedisSettings, SentinelSettings, Store};
use eg_testkit::RedisSentinel;
use eg_testkit::sentinel::MASTER_NAME;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PASSWORD: &str = "data-Pa55";
const SENTINEL_PASSWORD: &str = "sentinel-Pa55";

fn sentinel_settings(sentinel: &RedisSentinel, replica_acks: u16) -> RedisSettings {
    RedisSettings {
        sentinel: Some(SentinelSettings {
            nodes: sentinel.nodes_setting().split(',').map(str::to_owned).collect(),
            master_name: MASTER_NAME.into(),
            credentials: Credentials {
                username: None,
                password: Some(SENTINEL_PASSWORD.into()),
            },
        }),
        credentials: Credentials {
            username: None,
            password: Some(PASSWORD.into()),
        },
        replica_acks,
        replica_ack_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(1),
        command_timeout: Duration::from_secs(2),
        ..settings(String::new(), 1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_followed_and_no_acknowledged_publish_is_lost() {
    let mut sentinel = RedisSentinel::start(PASSWORD, SENTINEL_PASSWORD);
    let store = Store::connect(&sentinel_settings(&sentinel, 1)).unwrap();
    store.check_layout().await.unwrap();
    store.ensure_groups().await.unwrap();
    let catalog = Catalog::new(store.clone());
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    let version = catalog.version().await.unwrap();

    // Publishes one event after another until told to stop; remembers those stored.
    let acknowledged: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publisher = {
        let (store, acknowledged, stop) = (store.clone(), acknowledged.clone(), stop.clone());
        tokio::spawn(async move {
            let p = store.keys().partition(0);
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let key = format!("e{n}");
                match store.publish(&p, version, &[event(&key, 1)]).await {
                    Ok(PublishOutcome::Stored { .. }) => acknowledged.lock().unwrap().push(key),
                    other => {
                        eprintln!("publish {key}: {other:?}");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        })
    };
    let count = || acknowledged.lock().unwrap().len();
    eg_testkit::eventually(Duration::from_secs(20), "publishes are acknowledged", || async {
        (count() >= 20).then_some(())
    })
    .await;

    // The harness blocks while it waits; the publisher goes on on the other worker.
    let (old, new_primary) = tokio::task::block_in_place(|| {
        let old = sentinel.kill_primary();
        let new = sentinel.wait_for_failover(old);
        // The old primary comes back as a replica of the new one: replica acks work again.
        sentinel.restart(old);
        (old, new)
    });
    let before = count();
    eg_testkit::eventually(
        Duration::from_secs(60),
        "publishes are acknowledged again, by the new primary",
        || async { (count() >= before + 20).then_some(()) },
    )
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    publisher.await.unwrap();
    assert_ne!(new_primary, old);

    // Every acknowledged publish is on the new primary, ready to deliver.
    let p = store.keys().partition(0);
    let mut ready = BTreeSet::new();
    loop {
        let batch = read(&store, &p, "c1", 1000).await;
        if batch.is_empty() {
            break;
        }
        ready.extend(batch.into_iter().map(|d| d.delivery.event_key.clone()));
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let lost: Vec<&String> = acknowledged.iter().filter(|k| !ready.contains(*k)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged publishes lost: {lost:?}",
        lost.len(),
        acknowledged.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_sentinel_password_or_master_name_is_refused() {
    let sentinel = RedisSentinel::start(PASSWORD, SENTINEL_PASSWORD);
    let mut wrong = sentinel_settings(&sentinel, 0);
    if let Some(s) = wrong.sentinel.as_mut() {
        s.master_name = "nosuchprimary".into();
    }
    let store = Store::connect(&wrong).unwrap();
    let error = store.check_layout().await.unwrap_err().to_string();
    assert!(
        !error.contains(PASSWORD) && !error.contains(SENTINEL_PASSWORD),
        "{error}"
    );
    let right = Store::connect(&sentinel_settings(&sentinel, 0)).unwrap();
    right.check_layout().await.unwrap();
}
