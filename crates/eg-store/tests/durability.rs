//! What survives Redis being killed and restarted from its append-only file, and how the
//! store recovers when Redis comes back without its consumer groups.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_store::Settlement;
use eg_testkit::eventually;
use std::time::Duration;

#[tokio::test]
async fn a_published_delivery_and_its_event_survive_a_kill_and_restart() {
    let mut h = Harness::start().await;
    let catalog = h.catalog();
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    catalog
        .put_subscription(&subscription("orders", "billing"), 10)
        .await
        .unwrap();
    let published = event("e1", 1);
    publish(&h.store, &h.p0(), std::slice::from_ref(&published)).await;

    h.server.restart();

    let store = connect(&h.server).await;
    let p0 = store.keys().partition(0);
    let got = read(&store, &p0, "sender", 10).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].delivery, published.deliveries[0]);
    // Its only delivery carries the body in its entry.
    assert_eq!(got[0].carried_body.as_ref(), Some(&published.body));
    assert_eq!(store.event_bodies(&p0, &["missing"]).await.unwrap(), [None]);

    let snapshot = eg_store::Catalog::new(store.clone()).load().await.unwrap();
    assert_eq!(snapshot.topic("orders").unwrap().keys, keys("o"));
    assert_eq!(
        snapshot.subscription("orders", "billing"),
        Some(&subscription("orders", "billing"))
    );

    assert!(settle(&store, &p0, &got[0], &Settlement::Done).await);
    let mut redis = h.redis();
    assert!(!exists(
        &mut redis,
        &eg_store::Keyspace::new("eg", PARTITIONS).partition(0).event("e1")
    ));
}

#[tokio::test]
async fn a_delivery_in_flight_at_the_kill_can_be_claimed_after_restart() {
    let mut h = Harness::start().await;
    let published = event("e1", 1);
    publish(&h.store, &h.p0(), std::slice::from_ref(&published)).await;
    let held = read(&h.store, &h.p0(), "crashed-sender", 10).await.remove(0);

    h.server.restart();

    let store = connect(&h.server).await;
    let p0 = store.keys().partition(0);
    assert!(
        read(&store, &p0, "sender", 10).await.is_empty(),
        "still held by the crashed sender"
    );
    let store_ref = &store;
    let p0_ref = &p0;
    let claimed = eventually(
        Duration::from_secs(5),
        "the in-flight delivery to be claimable",
        || async move {
            let claimed = store_ref
                .claim_abandoned(p0_ref, "sender", Duration::from_millis(100), 10)
                .await
                .unwrap();
            (!claimed.is_empty()).then_some(claimed)
        },
    )
    .await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].entry_id, held.entry_id);
    assert_eq!(claimed[0].delivery, published.deliveries[0]);
}

#[tokio::test]
async fn the_existing_store_reconnects_after_a_restart() {
    let mut h = Harness::start().await;
    publish(&h.store, &h.p0(), &[event("e1", 1)]).await;

    h.server.restart();

    let store = &h.store;
    eventually(
        Duration::from_secs(5),
        "the old pool to reach the restarted redis",
        || async move { store.ping().await.ok() },
    )
    .await;
    let got = read(&h.store, &h.p0(), "sender", 10).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].delivery, event("e1", 1).deliveries[0]);
}

#[tokio::test]
async fn a_missing_consumer_group_is_reported_and_ensure_groups_recreates_it() {
    let mut h = Harness::start().await;
    let published = event("e1", 1);
    publish(&h.store, &h.p0(), std::slice::from_ref(&published)).await;

    h.server.restart();
    let store = connect(&h.server).await;
    let p0 = store.keys().partition(0);
    let mut redis = h.redis();
    let destroyed: u64 = query(
        &mut redis,
        &[
            "XGROUP",
            "DESTROY",
            &eg_store::Keyspace::new("eg", PARTITIONS).partition(0).ready(),
            "senders",
        ],
    );
    assert_eq!(destroyed, 1);

    let err = store
        .read_ready(&p0, "sender", 10, Duration::from_millis(20))
        .await
        .unwrap_err();
    assert!(err.is_missing_group(), "{err:?}");
    let err = store
        .claim_abandoned(&p0, "sender", Duration::ZERO, 10)
        .await
        .unwrap_err();
    assert!(err.is_missing_group(), "{err:?}");

    store.ensure_groups().await.unwrap();
    store.ensure_groups().await.unwrap(); // safe to repeat

    let got = read(&store, &p0, "sender", 10).await;
    assert_eq!(
        got.len(),
        1,
        "entries already in the stream are delivered to the new group"
    );
    assert_eq!(got[0].delivery, published.deliveries[0]);
    assert_eq!(got[0].carried_body.as_ref(), Some(&published.body));
}
