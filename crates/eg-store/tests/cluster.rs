//! The Redis layer on a real Redis Cluster: the same store code runs there (no script or
//! pipeline spans hash tags), partitions land evenly on the primaries, and with replica
//! acknowledgements a primary's failover loses no publish that was answered as stored.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_store::{Catalog, PublishOutcome, RedisSettings, Store, StoreError};
use eg_testkit::RedisCluster;
use redis::Commands;
use std::collections::BTreeMap;
use std::time::Duration;

fn cluster_settings(cluster: &RedisCluster, partitions: u16, replica_acks: u16) -> RedisSettings {
    RedisSettings {
        cluster_nodes: cluster.urls(),
        sentinel: None,
        credentials: Default::default(),
        tls: Default::default(),
        replica_acks,
        ..settings(String::new(), partitions)
    }
}

async fn connect_to(cluster: &RedisCluster, partitions: u16, replica_acks: u16) -> Store {
    let store = Store::connect(&cluster_settings(cluster, partitions, replica_acks)).unwrap();
    assert!(store.is_cluster());
    store.check_layout().await.unwrap();
    store.ensure_groups().await.unwrap();
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_runs_unchanged_on_a_three_primary_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let store = connect_to(&cluster, 6, 0).await;

    // Two partitions per primary: the tags spread evenly over the slot ranges.
    let mut per_primary: BTreeMap<u16, u16> = BTreeMap::new();
    for (_, slot) in store.keys().slot_map() {
        *per_primary.entry(cluster.primary_of(slot)).or_default() += 1;
    }
    assert_eq!(
        per_primary.values().copied().collect::<Vec<_>>(),
        [2, 2, 2],
        "{per_primary:?}"
    );

    let catalog = Catalog::new(store.clone());
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    let version = catalog.version().await.unwrap();
    for p in store.keys().all_partitions() {
        let events = [event(&format!("e{}", p.index), 2)];
        assert_eq!(
            store.publish(&p, version, &events).await.unwrap(),
            PublishOutcome::Stored { duplicates: vec![] }
        );
        let read = read(&store, &p, "c1", 10).await;
        assert_eq!(read.len(), 2, "partition {}", p.index);
        let depths = store.depths(&p).await.unwrap();
        assert_eq!(depths.in_flight, 2);
    }
    // The reads that visit every partition (or endpoint) at once.
    assert!(store.event_history("orders", "e0").await.unwrap().is_empty());
    assert_eq!(store.dead_letter_counts("orders", "billing").await.unwrap().total, 0);
    let sub = subscription("orders", "billing");
    let ids: Vec<_> = ["http://a.example/1", "http://b.example/2", "http://c.example/3"]
        .iter()
        .map(|url| webhook_endpoint(url))
        .collect();
    assert_eq!(store.probation_records(&ids).await.unwrap().len(), 3);
    assert!(catalog.put_subscription(&sub, 5).await.is_ok());
    // Rate limits: both scripts and the read on subscriptions of different slots.
    use eg_core::throttle::{BusyPolicy, GateAsk, ThrottleGate, ThrottleId};
    let limits = eg_core::subscription::DeliveryLimits::parse(
        &serde_json::json!({"requestsPerSecond": 1, "maxConcurrentRequests": 1}),
    )
    .unwrap();
    let subs: Vec<_> = (0..3).map(|i| ThrottleId::of("orders", &format!("s{i}"))).collect();
    let now = eg_core::UnixMillis(1_700_000_000_000);
    for id in &subs {
        let ask = GateAsk {
            now,
            want: 1,
            lease: Some(("a:1", Duration::from_secs(5))),
            reserve_within: Duration::ZERO,
        };
        let gate = store
            .delivery_gate(id, Some(&limits), ask, BusyPolicy::default())
            .await
            .unwrap();
        assert_eq!(gate, ThrottleGate::Go { granted: 1 });
        store
            .delivery_feedback(id, now, "a:1", Some(Duration::from_secs(3)), BusyPolicy::default())
            .await
            .unwrap();
    }
    let records = store.throttle_records(&subs).await.unwrap();
    assert!(records.iter().all(|r| r.slowed_until > now.0 && r.leases.is_empty()));
}

/// Pull delivery's scripts (publish into a queue, receive, settle each way, promote) on
/// every partition of a cluster: each touches one hash tag only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_delivery_scripts_run_on_a_three_primary_cluster() {
    use eg_store::{LockCheck, Retention, Settle, Settlement};
    let cluster = RedisCluster::start(3, 0);
    let store = connect_to(&cluster, 6, 0).await;
    let catalog = Catalog::new(store.clone());
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    let version = catalog.version().await.unwrap();
    let queued = std::collections::HashSet::from(["orders/billing".to_owned()]);
    let lock = Duration::from_secs(60);
    assert!(!store.lock_secret(b"secret").await.unwrap().is_empty());
    for p in store.keys().all_partitions() {
        let events = [event(&format!("e{}", p.index), 1), event(&format!("f{}", p.index), 1)];
        let outcome = store
            .publish_routed(&p, version, &events, &eg_store::Routes::queued(queued.clone()))
            .await
            .unwrap();
        assert_eq!(outcome, PublishOutcome::Stored { duplicates: vec![] });
        let got = store.receive_queue(&p, "orders/billing", lock, 10).await.unwrap();
        assert_eq!(got.len(), 2, "partition {}", p.index);
        let mut released = got[1].delivery.clone();
        released.attempts = got[1].delivery_count();
        let settlements = [
            Settlement::Done,
            Settlement::Retry {
                delivery: released,
                due: eg_core::UnixMillis(1),
            },
        ];
        let items: Vec<Settle> = got
            .iter()
            .zip(settlements)
            .map(|(e, settlement)| e.settle(settlement))
            .collect();
        let settled = store
            .settle_queue(
                &p,
                "orders/billing",
                &items,
                &[1, 1],
                lock,
                LockCheck::Held,
                &Retention::NONE,
            )
            .await
            .unwrap();
        assert_eq!(settled, [true, true]);
        assert_eq!(store.promote_queue(&p, "orders/billing", 10).await.unwrap().moved, 1);
        let again = store.receive_queue(&p, "orders/billing", lock, 10).await.unwrap();
        assert_eq!(again[0].delivery_count(), 2);
        let (_, named) = store.read_signals(&p, "0-0", Duration::from_millis(10)).await.unwrap();
        assert!(named.iter().any(|n| n == "orders/billing"));
    }
}

/// What a primary's failover did to the publishes answered as stored.
struct Failover {
    /// Answered as stored while the replica was in sync (before it was frozen).
    stored_in_sync: Vec<String>,
    /// Answered as stored while the replica lagged (frozen), then the primary died.
    stored_lagging: Vec<String>,
    /// Publishes refused (not answered as stored) while the replica lagged.
    refused_lagging: usize,
    /// Of all publishes answered as stored, those missing after the replica took over.
    lost: Vec<String>,
}

/// Publishes to partition 0 of a 3-primary cluster with a replica each, cuts the
/// partition's replica off (SIGSTOP and its link closed, so it falls behind), publishes
/// more, kills the primary, thaws the replica, waits until it has taken over, and checks
/// what survived.
async fn fail_over_a_lagging_replica(replica_acks: u16) -> Failover {
    let mut cluster = RedisCluster::start(3, 1);
    let store = Store::connect(&RedisSettings {
        replica_ack_timeout: Duration::from_millis(200),
        ..cluster_settings(&cluster, 3, replica_acks)
    })
    .unwrap();
    store.check_layout().await.unwrap();
    store.ensure_groups().await.unwrap();
    let catalog = Catalog::new(store.clone());
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    let version = catalog.version().await.unwrap();
    let p0 = store.keys().partition(0);
    let slot = store.keys().slot_map()[0].1;
    let primary = cluster.primary_of(slot);
    let replica = cluster.replica_of(primary);

    let publish = |key: String| {
        let (store, p0) = (store.clone(), p0.clone());
        async move {
            match store.publish(&p0, version, &[event(&key, 1)]).await {
                Ok(PublishOutcome::Stored { .. }) => Some(key),
                Ok(other) => panic!("unexpected {other:?}"),
                Err(StoreError::NotReplicated { .. }) => None,
                Err(other) => panic!("unexpected {other}"),
            }
        }
    };
    // In sync (a slow confirmation right after start is retried, not counted).
    let mut stored_in_sync = Vec::new();
    for n in 0..100 {
        if stored_in_sync.len() == 20 {
            break;
        }
        stored_in_sync.extend(publish(format!("in-sync-{n}")).await);
    }
    // Cut the replica off: frozen, and its replication link closed by the primary, so
    // what follows reaches neither its process nor its socket.
    cluster.freeze(replica, true);
    cluster.node_cli(primary, &["CLIENT", "KILL", "TYPE", "replica"]);
    let (mut stored_lagging, mut refused_lagging) = (Vec::new(), 0);
    for n in 0..10 {
        match publish(format!("lagging-{n}")).await {
            Some(key) => stored_lagging.push(key),
            None => refused_lagging += 1,
        }
    }
    cluster.kill(primary);
    cluster.freeze(replica, false);
    let new = tokio::task::block_in_place(|| cluster.wait_for_failover(slot, primary));
    assert_eq!(new, replica, "the frozen replica is the only one that can take over");

    let mut redis = cluster.client();
    // An event is kept in its ready entry (its one delivery carries it) or in its hash.
    let entries: redis::streams::StreamRangeReply = redis.xrange_all(p0.ready()).unwrap();
    let carried: Vec<String> = entries
        .ids
        .iter()
        .filter_map(|e| e.get::<String>(eg_store::codec::DELIVERY_FIELD))
        .filter_map(|raw| eg_store::codec::decode_delivery(&raw).ok())
        .map(|d| d.event_key)
        .collect();
    let lost = stored_in_sync
        .iter()
        .chain(&stored_lagging)
        .filter(|key| !carried.contains(key) && !redis.exists::<_, bool>(p0.event(key)).unwrap())
        .cloned()
        .collect();
    Failover {
        stored_in_sync,
        stored_lagging,
        refused_lagging,
        lost,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_replica_acks_a_failover_loses_what_the_replica_had_not_received() {
    let failover = fail_over_a_lagging_replica(0).await;
    println!(
        "replica_acks 0: {} stored in sync, {} stored while the replica lagged, {} lost",
        failover.stored_in_sync.len(),
        failover.stored_lagging.len(),
        failover.lost.len()
    );
    assert_eq!(failover.stored_in_sync.len(), 20);
    assert_eq!(failover.refused_lagging, 0, "without acks the primary alone answers");
    // Exactly the replication backlog the replica never got: answered 200, then gone.
    assert_eq!(failover.lost, failover.stored_lagging);
    assert_eq!(failover.lost.len(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replica_acks_a_failover_loses_no_publish_answered_as_stored() {
    let failover = fail_over_a_lagging_replica(1).await;
    println!(
        "replica_acks 1: {} stored in sync, {} refused while the replica lagged, {} lost",
        failover.stored_in_sync.len(),
        failover.refused_lagging,
        failover.lost.len()
    );
    assert_eq!(failover.stored_in_sync.len(), 20);
    assert!(
        failover.stored_lagging.is_empty(),
        "nothing counts as stored without the replica"
    );
    assert_eq!(failover.refused_lagging, 10);
    assert!(failover.lost.is_empty(), "lost: {:?}", failover.lost);
}

/// The probation identity of the webhook at `url`.
fn webhook_endpoint(url: &str) -> eg_core::probation::EndpointId {
    eg_core::destination::Target::WebHook(eg_core::destination::WebHook {
        url: url.to_owned(),
        ..Default::default()
    })
    .endpoint_id()
}
