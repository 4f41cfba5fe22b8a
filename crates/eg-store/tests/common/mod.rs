//! Shared set-up for the Redis-layer integration tests: one real redis-server per test,
//! a connected store with its consumer groups, domain values to store, and small
//! synchronous readers of what actually sits in Redis.
#![allow(dead_code, clippy::unwrap_used)]

use eg_core::deadletter::DeadLetterEntry;
use eg_core::history::{DeliveryState, HistoryEntry};
use eg_core::{
    DeadLetterReason, Delivery, LastAttempt, OutcomeName, Subscription, SubscriptionName, Topic, TopicName, UnixMillis,
};
use eg_store::queue::EventToStore;
use eg_store::{Catalog, Partition, ReadyDelivery, RedisSettings, Retention, Settlement, Store, codec};
use eg_testkit::RedisServer;
use serde_json::json;
use std::time::Duration;

pub const PARTITIONS: u16 = 2;

pub fn settings(url: String, partitions: u16) -> RedisSettings {
    RedisSettings {
        partitions,
        command_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        ..RedisSettings::for_url(url)
    }
}

/// Connects a store the way every tier does at start.
pub async fn connect(server: &RedisServer) -> Store {
    let store = Store::connect(&settings(server.url(), PARTITIONS)).unwrap();
    store.check_layout().await.unwrap();
    store.ensure_groups().await.unwrap();
    store
}

pub struct Harness {
    pub server: RedisServer,
    pub store: Store,
}

impl Harness {
    pub async fn start() -> Self {
        let server = RedisServer::start();
        let store = connect(&server).await;
        Self { server, store }
    }

    pub fn catalog(&self) -> Catalog {
        Catalog::new(self.store.clone())
    }

    pub fn p0(&self) -> Partition {
        self.store.keys().partition(0)
    }

    pub fn redis(&self) -> redis::Connection {
        self.server.client()
    }
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName::parse(name).unwrap()
}

pub fn sub_name(name: &str) -> SubscriptionName {
    SubscriptionName::parse(name).unwrap()
}

pub fn topic(name: &str) -> Topic {
    Topic::from_resource(topic_name(name), &json!({})).unwrap()
}

pub fn subscription_to(topic: &str, name: &str, url: &str) -> Subscription {
    Subscription::from_resource(
        &self::topic(topic),
        sub_name(name),
        &json!({"properties":{"destination":{"endpointType":"WebHook","properties":{"endpointUrl": url}}}}),
        UnixMillis(0),
    )
    .unwrap()
}

pub fn subscription(topic: &str, name: &str) -> Subscription {
    subscription_to(topic, name, "http://127.0.0.1:9/hook")
}

pub fn keys(tag: &str) -> [String; 2] {
    [format!("{tag}-key1"), format!("{tag}-key2")]
}

pub fn delivery(id: &str, event_key: &str) -> Delivery {
    Delivery::new(
        id.into(),
        event_key.into(),
        "orders".into(),
        "billing".into(),
        UnixMillis(1_000),
    )
}

/// An event with `n` deliveries, ids `<event_key>-d<i>`.
pub fn event(event_key: &str, n: usize) -> EventToStore {
    EventToStore {
        event_key: event_key.into(),
        body: body(event_key),
        deliveries: (0..n)
            .map(|i| delivery(&format!("{event_key}-d{i}"), event_key))
            .collect(),
    }
}

pub fn body(event_key: &str) -> String {
    json!({"id": event_key, "eventType": "A", "subject": "s", "data": {"line": "a\nb"}}).to_string()
}

/// A history step of attempt `attempt` for `subscription`, at `attempt` seconds.
pub fn step(subscription: &str, attempt: u32, state: DeliveryState) -> HistoryEntry {
    HistoryEntry {
        subscription: subscription.into(),
        attempt,
        at: UnixMillis(attempt as i64 * 1_000),
        outcome: None,
        http_status: None,
        duration_ms: None,
        next: None,
        state,
        reason: None,
        hold: None,
        error: None,
    }
}

pub fn failed_attempt() -> LastAttempt {
    LastAttempt {
        outcome: OutcomeName::Busy,
        status: Some(503),
        at: UnixMillis(2_000),
    }
}

pub fn dead_letter_entry(d: &Delivery) -> DeadLetterEntry {
    DeadLetterEntry {
        container_name: "dead-letters".into(),
        store: Default::default(),
        subscription: "Billing".into(),
        topic: d.topic.clone(),
        delivery_id: d.id.clone(),
        reason: DeadLetterReason::MaxDeliveryAttemptsExceeded,
        delivery_attempts: 3,
        last_outcome: Some(OutcomeName::GenericError),
        last_http_status_code: Some(500),
        publish_time: d.published_at,
        last_attempt_time: Some(UnixMillis(2_000)),
        dead_lettered_at: UnixMillis(3_000),
        format: Default::default(),
        stored_format: d.format,
        event_id: d.event_id.clone(),
        traceparent: None,
        tracestate: None,
    }
}

/// Publishes against the partition's current catalog version and insists it was stored.
pub async fn publish(store: &Store, partition: &Partition, events: &[EventToStore]) {
    let version = Catalog::new(store.clone()).version().await.unwrap();
    let outcome = store.publish(partition, version, events).await.unwrap();
    assert_eq!(outcome, eg_store::PublishOutcome::Stored { duplicates: vec![] });
}

/// Settles one held delivery with the real call (`settle_many`), keeping no history or
/// archive; whether it took effect.
pub async fn settle(store: &Store, partition: &Partition, held: &ReadyDelivery, settlement: &Settlement) -> bool {
    let item = held.settle(settlement.clone(), None);
    let settled = store.settle_many(partition, &[item], &Retention::NONE).await.unwrap();
    settled[0].took_effect
}

/// How many due retries one promote call moves.
pub async fn promote_due(store: &Store, partition: &Partition, max: usize) -> usize {
    store.promote_retries(partition, max).await.unwrap().moved
}

/// Reads ready deliveries with a short block (never zero: that would be BLOCK 0).
pub async fn read(store: &Store, partition: &Partition, consumer: &str, count: usize) -> Vec<eg_store::ReadyDelivery> {
    store
        .read_ready(partition, consumer, count, Duration::from_millis(20))
        .await
        .unwrap()
}

// ---- synchronous readers of raw Redis state --------------------------------------

pub fn query<T: redis::FromRedisValue>(conn: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(conn).unwrap()
}

pub fn xlen(conn: &mut redis::Connection, key: &str) -> u64 {
    query(conn, &["XLEN", key])
}

pub fn zcard(conn: &mut redis::Connection, key: &str) -> u64 {
    query(conn, &["ZCARD", key])
}

pub fn exists(conn: &mut redis::Connection, key: &str) -> bool {
    query::<u64>(conn, &["EXISTS", key]) == 1
}

pub fn hget(conn: &mut redis::Connection, key: &str, field: &str) -> Option<String> {
    query(conn, &["HGET", key, field])
}

/// Number of entries pending (read, not acknowledged) in `group` of `stream`.
pub fn pending(conn: &mut redis::Connection, stream: &str, group: &str) -> u64 {
    let summary: redis::Value = query(conn, &["XPENDING", stream, group]);
    match summary {
        redis::Value::Array(items) => redis::from_redis_value_ref(&items[0]).unwrap(),
        other => panic!("unexpected XPENDING reply {other:?}"),
    }
}

/// `(entry id, consumer)` of every pending entry of `group`.
pub fn pending_owners(conn: &mut redis::Connection, stream: &str, group: &str) -> Vec<(String, String)> {
    let rows: Vec<(String, String, u64, u64)> = query(conn, &["XPENDING", stream, group, "-", "+", "100"]);
    rows.into_iter().map(|(id, consumer, _, _)| (id, consumer)).collect()
}

/// One field of one stream entry (`None`: no such entry or field).
pub fn entry_field(conn: &mut redis::Connection, stream: &str, id: &str, field: &str) -> Option<String> {
    let reply: redis::streams::StreamRangeReply = query(conn, &["XRANGE", stream, id, id]);
    reply.ids.first().and_then(|e| e.get(field))
}

/// `(entry id, field d)` of every entry of a ready stream, oldest first.
pub fn ready_entries(conn: &mut redis::Connection, stream: &str) -> Vec<(String, Delivery)> {
    let reply: redis::streams::StreamRangeReply = query(conn, &["XRANGE", stream, "-", "+"]);
    reply
        .ids
        .into_iter()
        .map(|e| {
            let raw: String = e.get(codec::DELIVERY_FIELD).unwrap();
            (e.id, codec::decode_delivery(&raw).unwrap())
        })
        .collect()
}
