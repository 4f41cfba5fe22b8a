//! The status page's counts against a real Redis: flushes sum into the current window;
//! a batch sent twice counts once; a flush that fails while Redis is down is kept and
//! written once it is back. (How buckets are stored is tested in eg-store.)
#![allow(clippy::unwrap_used)]

use eg_core::UnixMillis;
use eg_runtime::stats::{Flusher, Kind, Stats, Tally};
use eg_store::stats::{Batch, Counts};
use eg_store::{Clock, RedisSettings};
use eg_testkit::RedisServer;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn stats_for(server: &RedisServer, prefix: &str) -> Stats {
    Stats::new(&RedisSettings {
        prefix: prefix.into(),
        partitions: 2,
        pool_size: 2,
        command_timeout: Duration::from_secs(2),
        ..RedisSettings::for_url(server.url())
    })
    .unwrap()
}

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(f, n)| ((*f).to_owned(), *n)).collect()
}

fn delivered(label: &str, n: u64) -> Counts {
    Counts::from([((Kind::Delivered, label.to_owned()), n)])
}

#[tokio::test]
async fn flushes_land_in_the_current_bucket_and_sum_into_rates() {
    let server = RedisServer::start();
    let stats = stats_for(&server, "pfx");
    let tally = Arc::new(Tally::default());
    let clock = Clock::default();
    let mut flusher = Flusher::new(stats.clone(), tally.clone(), clock.clone());

    tally.add(Kind::Published, "orders", 30);
    tally.add(Kind::Delivered, "orders/audit", 12);
    tally.add(Kind::Failed, "orders/audit", 3);
    tally.add(Kind::FailedBy, "NotFound", 3);
    flusher.flush().await.unwrap();
    // Nothing new: no write at all.
    flusher.flush().await.unwrap();
    tally.add(Kind::Published, "orders", 10);
    flusher.flush().await.unwrap();
    assert!(!flusher.has_pending());

    let now = clock.now();
    let window = stats.window(now).await.unwrap();
    assert_eq!(window.count(Kind::Published, "orders"), 40);
    assert_eq!(window.count(Kind::Delivered, "orders/audit"), 12);
    assert_eq!(window.total(Kind::Failed), 3);
    assert_eq!(window.by_label(Kind::FailedBy), counts(&[("NotFound", 3)]));
    assert!(window.seconds >= 50.0 && window.seconds <= 60.0, "{}", window.seconds);
    let rate = window.rate(Kind::Published, "orders");
    assert!((rate - 40.0 / window.seconds).abs() < 1e-9, "{rate}");
}

#[tokio::test]
async fn a_batch_is_applied_once_however_often_it_is_sent() {
    let server = RedisServer::start();
    let stats = stats_for(&server, "eg");
    let now = UnixMillis(1_700_000_005_000);
    let batch = |seq: u64, n: u64| Batch {
        writer: "w1".into(),
        seq,
        taken_at: now,
        counts: delivered("t/s", n),
    };
    assert!(stats.write(&batch(1, 5)).await.unwrap());
    // The answer to the first write was "lost": the same batch again changes nothing.
    assert!(!stats.write(&batch(1, 5)).await.unwrap());
    assert!(stats.write(&batch(2, 7)).await.unwrap());
    assert!(!stats.write(&batch(1, 5)).await.unwrap());
    // Another writer numbers its own flushes.
    let other = Batch {
        writer: "w2".into(),
        ..batch(1, 100)
    };
    assert!(stats.write(&other).await.unwrap());
    let window = stats.window(now).await.unwrap();
    assert_eq!(window.count(Kind::Delivered, "t/s"), 112);
    // Buckets older than the window do not count.
    let later = UnixMillis(now.0 + 61_000);
    assert_eq!(stats.window(later).await.unwrap().total(Kind::Delivered), 0);
    assert_eq!(stats.read(later, 10).await.unwrap().total(Kind::Delivered), 112);
}

#[tokio::test]
async fn a_flush_that_fails_is_kept_and_written_once_redis_is_back() {
    let mut server = RedisServer::start();
    let stats = stats_for(&server, "eg");
    let tally = Arc::new(Tally::default());
    let clock = Clock::default();
    let mut flusher = Flusher::new(stats.clone(), tally.clone(), clock.clone());
    tally.add(Kind::Published, "t", 1);
    flusher.flush().await.unwrap();

    server.kill();
    tally.add(Kind::Published, "t", 10);
    assert!(flusher.flush().await.is_err());
    assert!(flusher.has_pending());
    // Counted while the batch waits: goes into the next batch, not lost, not merged twice.
    tally.add(Kind::Published, "t", 100);
    assert!(flusher.flush().await.is_err());

    server.start_again();
    flusher.flush().await.unwrap(); // the pending batch
    flusher.flush().await.unwrap(); // what came while it waited
    assert!(!flusher.has_pending());
    let window = stats.window(clock.now()).await.unwrap();
    assert_eq!(window.count(Kind::Published, "t"), 111);
}
