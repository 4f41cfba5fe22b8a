//! The status page's counts against a real Redis: a batch lands in its bucket under the
//! configured prefix, in one hash tag, with an expiry; a batch is applied once however
//! often it is sent; buckets read back in the order asked.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_store::stats::{BUCKET_TTL, Batch};
use eg_store::{Keyspace, RedisSettings, StatsStore};
use eg_testkit::RedisServer;
use redis::Commands;
use std::collections::{BTreeMap, HashMap};

fn stats_for(server: &RedisServer, prefix: &str) -> StatsStore {
    StatsStore::new(&RedisSettings {
        prefix: prefix.into(),
        ..settings(server.url(), PARTITIONS)
    })
    .unwrap()
}

fn batch(writer: &str, seq: u64, bucket: u64, counts: &[(&str, u64)]) -> Batch {
    Batch {
        writer: writer.into(),
        seq,
        bucket,
        counts: counts.iter().map(|(f, n)| ((*f).to_owned(), *n)).collect(),
    }
}

fn hash(pairs: &[(&str, i64)]) -> HashMap<String, i64> {
    pairs.iter().map(|(f, n)| ((*f).to_owned(), *n)).collect()
}

#[tokio::test]
async fn a_batch_lands_in_its_bucket_under_the_prefix_with_an_expiry() {
    let server = RedisServer::start();
    let stats = stats_for(&server, "pfx");
    let written = batch("w1", 1, 170, &[("published|orders", 30), ("failed-by|NotFound", 3)]);
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
    assert_eq!(stored, written.counts);
}

#[tokio::test]
async fn a_batch_is_applied_once_however_often_it_is_sent() {
    let server = RedisServer::start();
    let stats = stats_for(&server, "eg");
    assert!(stats.write(&batch("w1", 1, 7, &[("delivered|t/s", 5)])).await.unwrap());
    // The answer to the first write was "lost": the same batch again changes nothing.
    assert!(!stats.write(&batch("w1", 1, 7, &[("delivered|t/s", 5)])).await.unwrap());
    assert!(stats.write(&batch("w1", 2, 7, &[("delivered|t/s", 7)])).await.unwrap());
    assert!(!stats.write(&batch("w1", 1, 7, &[("delivered|t/s", 5)])).await.unwrap());
    // Another writer numbers its own flushes.
    assert!(
        stats
            .write(&batch("w2", 1, 8, &[("delivered|t/s", 100)]))
            .await
            .unwrap()
    );

    let read = stats.read(&[6, 7, 8]).await.unwrap();
    assert_eq!(
        read,
        [
            hash(&[]),
            hash(&[("delivered|t/s", 12)]),
            hash(&[("delivered|t/s", 100)])
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
