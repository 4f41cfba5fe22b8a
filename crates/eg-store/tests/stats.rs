//! The status page's counts against a real Redis: a batch lands in its bucket under the
//! configured prefix, in one hash tag, with an expiry; a batch is applied once however
//! often it is sent; buckets read back in the order asked, decoded.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::UnixMillis;
use eg_store::stats::{BUCKET_SECONDS, BUCKET_TTL, Batch, Counts, Kind};
use eg_store::{Keyspace, RedisSettings, StatsStore};
use eg_testkit::RedisServer;
use redis::Commands;
use std::collections::BTreeMap;

fn stats_for(server: &RedisServer, prefix: &str) -> StatsStore {
    StatsStore::new(&RedisSettings {
        prefix: prefix.into(),
        ..settings(server.url(), PARTITIONS)
    })
    .unwrap()
}

fn counts(pairs: &[(Kind, &str, u64)]) -> Counts {
    pairs.iter().map(|(k, l, n)| ((*k, (*l).to_owned()), *n)).collect()
}

/// A batch taken a little into `bucket`.
fn batch(writer: &str, seq: u64, bucket: u64, pairs: &[(Kind, &str, u64)]) -> Batch {
    let start = bucket * BUCKET_SECONDS * 1000;
    Batch {
        writer: writer.into(),
        seq,
        taken_at: UnixMillis(i64::try_from(start).unwrap() + 2_500),
        counts: counts(pairs),
    }
}

#[tokio::test]
async fn a_batch_lands_in_its_bucket_under_the_prefix_with_an_expiry() {
    let server = RedisServer::start();
    let stats = stats_for(&server, "pfx");
    let written = batch(
        "w1",
        1,
        170,
        &[(Kind::Published, "orders", 30), (Kind::FailedBy, "NotFound", 3)],
    );
    assert!(stats.write(&written).await.unwrap());

    let mut redis = server.client();
    let mut keys: Vec<String> = redis.keys("*").unwrap();
    keys.sort();
    let space = Keyspace::new("pfx", PARTITIONS);
    assert_eq!(keys, [space.stats_bucket(170), space.stats_writer("w1")]);
    assert!(keys.iter().all(|k| k.starts_with("{pfx:stats}:")), "{keys:?}");
    for key in &keys {
        let ttl: i64 = redis.ttl(key).unwrap();
        let most = BUCKET_TTL.as_secs() as i64;
        assert!(ttl > most - 100 && ttl <= most, "ttl of {key}: {ttl}");
    }
    let stored: BTreeMap<String, u64> = redis.hgetall(space.stats_bucket(170)).unwrap();
    let expected = BTreeMap::from([
        ("failed-by|NotFound".to_owned(), 3),
        ("published|orders".to_owned(), 30),
    ]);
    assert_eq!(stored, expected);
}

#[tokio::test]
async fn a_batch_is_applied_once_however_often_it_is_sent() {
    let server = RedisServer::start();
    let stats = stats_for(&server, "eg");
    assert!(
        stats
            .write(&batch("w1", 1, 7, &[(Kind::Delivered, "t/s", 5)]))
            .await
            .unwrap()
    );
    // The answer to the first write was "lost": the same batch again changes nothing.
    assert!(
        !stats
            .write(&batch("w1", 1, 7, &[(Kind::Delivered, "t/s", 5)]))
            .await
            .unwrap()
    );
    assert!(
        stats
            .write(&batch("w1", 2, 7, &[(Kind::Delivered, "t/s", 7)]))
            .await
            .unwrap()
    );
    assert!(
        !stats
            .write(&batch("w1", 1, 7, &[(Kind::Delivered, "t/s", 5)]))
            .await
            .unwrap()
    );
    // Another writer numbers its own flushes.
    assert!(
        stats
            .write(&batch("w2", 1, 8, &[(Kind::Delivered, "t/s", 100)]))
            .await
            .unwrap()
    );

    let read = stats.read(&[6, 7, 8]).await.unwrap();
    assert_eq!(
        read,
        [
            counts(&[]),
            counts(&[(Kind::Delivered, "t/s", 12)]),
            counts(&[(Kind::Delivered, "t/s", 100)])
        ]
    );
}

#[tokio::test]
async fn a_bucket_holding_other_than_counts_is_reported_corrupt() {
    let server = RedisServer::start();
    let stats = stats_for(&server, "eg");
    let mut redis = server.client();
    let _: () = redis
        .hset(Keyspace::new("eg", PARTITIONS).stats_bucket(3), "published|t", "many")
        .unwrap();
    let error = stats.read(&[3]).await.unwrap_err();
    assert!(error.to_string().contains("{eg:stats}:3"), "{error}");
}
