//! Replay jobs' bookkeeping against a real Redis: jobs on several partitions are listed
//! (one pipeline per partition), filtered by subscription, newest first; a job that
//! expired leaves the index; a lease is one holder's until it lapses, renewed by it.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::UnixMillis;
use eg_core::replay::{ReplaySpec, ReplayState};
use serde_json::json;
use std::time::Duration;

fn spec(subscription: &str, created_at: i64) -> ReplaySpec {
    let body = json!({"from": "2026-11-27T10:00:00Z", "to": "2026-11-27T11:00:00Z"});
    ReplaySpec::from_request(&body, "orders", subscription, UnixMillis(created_at)).unwrap()
}

#[tokio::test]
async fn jobs_on_every_partition_are_listed_newest_first_and_expired_ones_leave_the_index() {
    let h = Harness::start().await;
    let keys = h.store.keys();
    assert!(keys.partitions() > 1, "the harness has several partitions");
    let last = keys.partitions() - 1;
    let now = 1_795_900_000_000;
    h.store
        .create_replay("old", &spec("billing", now), &keys.partition(0))
        .await
        .unwrap();
    h.store
        .create_replay("new", &spec("billing", now + 1_000), &keys.partition(last))
        .await
        .unwrap();
    h.store
        .create_replay("other", &spec("audit", now + 2_000), &keys.partition(last))
        .await
        .unwrap();

    let ids =
        |jobs: Vec<eg_store::replay::ReplayJob>| jobs.into_iter().map(|j| (j.view.id, j.partition)).collect::<Vec<_>>();
    let all = h.store.replay_jobs(None).await.unwrap();
    assert_eq!(
        ids(all),
        [("other".into(), last), ("new".into(), last), ("old".into(), 0)]
    );
    let billing = h.store.replay_jobs(Some("orders/billing")).await.unwrap();
    assert_eq!(ids(billing), [("new".into(), last), ("old".into(), 0)]);

    // Finished jobs are kept a while, then expire: the listing drops their index entry.
    let ended = h
        .store
        .finish_replay("old", 0, ReplayState::Cancelled, None, UnixMillis(now + 5_000))
        .await
        .unwrap();
    assert_eq!(ended, Some(ReplayState::Cancelled));
    let _: u64 = query(&mut h.redis(), &["DEL", &keys.partition(0).replay("old")]);
    let billing = h.store.replay_jobs(Some("orders/billing")).await.unwrap();
    assert_eq!(ids(billing), [("new".into(), last)]);
    assert_eq!(
        hget(&mut h.redis(), &keys.replays(), "old"),
        None,
        "its index entry went too"
    );
    assert!(h.store.replay_job("old").await.unwrap().is_none());
}

#[tokio::test]
async fn a_lease_is_its_holders_until_it_lapses_and_the_holder_renews_it() {
    let h = Harness::start().await;
    let ttl = Duration::from_millis(300);
    assert!(h.store.take_replay_lease("job", 0, "a", ttl).await.unwrap());
    assert!(
        !h.store.take_replay_lease("job", 0, "b", ttl).await.unwrap(),
        "a holds it"
    );
    // Renewed by its holder before it lapses, it outlives its first term.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(h.store.take_replay_lease("job", 0, "a", ttl).await.unwrap());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!h.store.take_replay_lease("job", 0, "b", ttl).await.unwrap(), "renewed");
    // Not renewed, it lapses and another copy takes it.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(h.store.take_replay_lease("job", 0, "b", ttl).await.unwrap());
    // The archive sweep's lease is the same kind.
    assert!(h.store.take_archive_sweep_lease("a", ttl).await.unwrap());
    assert!(!h.store.take_archive_sweep_lease("b", ttl).await.unwrap());
}
