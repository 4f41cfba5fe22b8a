//! Idempotent publish against a real Redis (docs/deduplication.md): `publish.lua` skips an
//! event whose identity the topic's seen set holds from within the window, in the same
//! call that stores the others; a repeat inside one call is skipped too; at the window's
//! end the identity is new again. Time is the caller's `now`, so the window's end is
//! reached without waiting.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::UnixMillis;
use eg_store::queue::{DuplicateCheck, EventToStore, Routes};
use eg_store::{Catalog, PublishOutcome};
use std::time::Duration;

const WINDOW: Duration = Duration::from_secs(20);

fn check(identities: &[&str], now: i64) -> DuplicateCheck {
    DuplicateCheck {
        topic: "orders".into(),
        identities: identities.iter().map(|i| (*i).to_owned()).collect(),
        window: WINDOW,
        now: UnixMillis(now),
    }
}

/// Publishes `events` with `check` against the current catalog; the skipped positions.
async fn publish_checked(h: &Harness, events: &[EventToStore], check: Option<&DuplicateCheck>) -> Vec<usize> {
    let version = Catalog::new(h.store.clone()).version().await.unwrap();
    match h
        .store
        .publish_checked(&h.p0(), version, events, &Routes::default(), check)
        .await
        .unwrap()
    {
        PublishOutcome::Stored { duplicates } => duplicates,
        stale => panic!("not stored: {stale:?}"),
    }
}

/// The event keys whose deliveries reached the ready stream, in order.
fn stored(h: &Harness) -> Vec<String> {
    ready_entries(&mut h.redis(), &h.p0().ready())
        .into_iter()
        .map(|(_, d)| d.event_key)
        .collect()
}

#[tokio::test]
async fn an_identity_seen_within_the_window_is_skipped_and_new_again_at_its_end() {
    let h = Harness::start().await;
    // "a" twice in one request: the first is stored, the second skipped.
    let first = [event("e1", 1), event("e2", 1), event("e3", 1)];
    let skipped = publish_checked(&h, &first, Some(&check(&["a", "b", "a"], 1_000))).await;
    assert_eq!(skipped, [2]);
    assert_eq!(stored(&h), ["e1", "e2"]);

    // A retry later in the window: "a" skipped, "c" new.
    let retry = [event("e4", 1), event("e5", 1)];
    let skipped = publish_checked(&h, &retry, Some(&check(&["a", "c"], 20_999))).await;
    assert_eq!(skipped, [0]);
    assert_eq!(stored(&h), ["e1", "e2", "e5"]);

    // The window runs from the first acceptance (1 000 ms), not from the skipped repeat:
    // at 21 000 "a" and "b" are forgotten, "c" (20 999) is still remembered.
    let after = [event("e6", 1), event("e7", 1), event("e8", 1)];
    let skipped = publish_checked(&h, &after, Some(&check(&["a", "b", "c"], 21_000))).await;
    assert_eq!(skipped, [2]);
    assert_eq!(stored(&h), ["e1", "e2", "e5", "e6", "e7"]);

    // What the set holds: each identity once, scored by when it was accepted; it
    // expires a window after the last publish.
    let mut redis = h.redis();
    let seen = h.p0().seen("orders");
    let members: Vec<(String, i64)> = query(&mut redis, &["ZRANGE", &seen, "0", "-1", "WITHSCORES"]);
    assert_eq!(
        members,
        [
            ("c".to_owned(), 20_999),
            ("a".to_owned(), 21_000),
            ("b".to_owned(), 21_000)
        ]
    );
    let ttl: i64 = query(&mut redis, &["PTTL", &seen]);
    assert!(ttl > 0 && ttl <= 20_000, "{ttl}");
}

#[tokio::test]
async fn a_skipped_event_leaves_nothing_behind_and_the_others_keep_their_layouts() {
    let h = Harness::start().await;
    let ordered = |key: &str, line: &str| EventToStore {
        event_key: key.into(),
        body: body(key),
        deliveries: vec![delivery(&format!("{key}-d"), key).in_line(Some(line.into()))],
    };
    publish_checked(&h, &[ordered("a1", "A")], Some(&check(&["x"], 1_000))).await;
    // A fan-out event, an ordered one and a two-delivery one, each a repeat of "x" but
    // the ordered "y": only "y" is written, behind a1 in line A.
    let events = [event("f1", 2), ordered("a2", "A"), ordered("a3", "A")];
    let skipped = publish_checked(&h, &events, Some(&check(&["x", "y", "x"], 2_000))).await;
    assert_eq!(skipped, [0, 2]);
    let mut redis = h.redis();
    assert!(!exists(&mut redis, &h.p0().event("f1")));
    let line: Vec<String> = query(&mut redis, &["LRANGE", &h.p0().line("orders/billing", "A"), "0", "-1"]);
    assert_eq!(line.len(), 2, "a1 and a2 only: {line:?}");
    assert!(line[1].starts_with("a2-d\n"), "{line:?}");
    assert_eq!(
        hget(&mut redis, &h.p0().lines_waiting(), "orders/billing").as_deref(),
        Some("1")
    );
    assert_eq!(stored(&h), ["a1"], "only the line's head is ready");
}

#[tokio::test]
async fn without_a_check_nothing_is_remembered_and_every_event_is_stored() {
    let h = Harness::start().await;
    let events = [event("e1", 1), event("e2", 1)];
    assert!(publish_checked(&h, &events, None).await.is_empty());
    assert!(publish_checked(&h, &events, None).await.is_empty());
    assert_eq!(stored(&h), ["e1", "e2", "e1", "e2"]);
    let keys: Vec<String> = query(&mut h.redis(), &["KEYS", "*:seen:*"]);
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn deleting_the_topic_forgets_what_it_remembered() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    let home = h.store.keys().home_partition("orders");
    let version = catalog.version().await.unwrap();
    let stored = h
        .store
        .publish_checked(
            &home,
            version,
            &[event("e1", 1)],
            &Routes::default(),
            Some(&check(&["a"], 1_000)),
        )
        .await
        .unwrap();
    assert_eq!(stored, PublishOutcome::Stored { duplicates: vec![] });
    assert!(exists(&mut h.redis(), &home.seen("orders")));
    assert!(catalog.delete_topic(&topic_name("orders")).await.unwrap());
    assert!(!exists(&mut h.redis(), &home.seen("orders")));
}
