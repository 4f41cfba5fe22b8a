//! The status page's counts in Redis: one hash per time bucket, written once per flush
//! by every process (`stats_flush.lua`) and summed by the status page. What is counted,
//! when to flush and how counts become rates is `eg-runtime`'s; callers hand over counts
//! by (kind, label) and times, and this module numbers the buckets and spells the fields
//! (the forms are `codec::stats`'s).
//!
//! Stats have a connection of their own (one multiplexed connection, opened on first
//! use and again after an error), so they never take a connection a delivery waits for.

use crate::codec::stats::{bucket_of, decode_stats_field, encode_stats_field};
use crate::connection::{Link, RedisSettings, Target, breaks_connection};
use crate::error::StoreError;
use crate::keyspace::Keyspace;
use crate::scripts;
use eg_core::UnixMillis;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

pub use crate::codec::stats::{BUCKET_SECONDS, Kind, window_span};

/// Counts by kind and label.
pub type Counts = BTreeMap<(Kind, String), u64>;

/// How long a bucket (and a writer's last flush number) outlives its last write.
pub const BUCKET_TTL: Duration = Duration::from_secs(3600);

/// One flush of one process: what it counted, to add to `bucket` once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The writing process (random per process start).
    pub writer: String,
    /// Rises by one per flush of that writer.
    pub seq: u64,
    /// When the counts were taken: they are added to the bucket holding this time.
    pub taken_at: UnixMillis,
    pub counts: Counts,
}

/// The stats keys: written by every process's flusher, read by the status page.
#[derive(Clone)]
pub struct StatsStore {
    inner: Arc<Inner>,
}

struct Inner {
    target: Target,
    conn: tokio::sync::Mutex<Option<Link>>,
    keys: Keyspace,
}

impl StatsStore {
    /// Prepares the connection (it is opened on first use): Redis may be down now.
    pub fn new(settings: &RedisSettings) -> Result<Self, StoreError> {
        Ok(Self {
            inner: Arc::new(Inner {
                target: Target::new(settings)?,
                conn: tokio::sync::Mutex::new(None),
                keys: Keyspace::new(&settings.prefix, settings.partitions),
            }),
        })
    }

    async fn conn(&self) -> Result<Link, StoreError> {
        let mut slot = self.inner.conn.lock().await;
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let conn = self.inner.target.open().await?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Forgets the connection after an error that may have broken it.
    async fn reset(&self, error: &redis::RedisError) {
        if breaks_connection(error) {
            *self.inner.conn.lock().await = None;
        }
    }

    /// Adds a batch to its bucket unless it was applied before; `Ok(false)` when it was
    /// (a retry after a lost answer never counts twice).
    pub async fn write(&self, batch: &Batch) -> Result<bool, StoreError> {
        let keys = &self.inner.keys;
        let mut invocation = scripts::STATS_FLUSH.prepare_invoke();
        invocation
            .key(keys.stats_bucket(bucket_of(batch.taken_at)))
            .key(keys.stats_writer(&batch.writer))
            .arg(batch.seq)
            .arg(BUCKET_TTL.as_secs());
        for ((kind, label), n) in &batch.counts {
            invocation
                .arg(encode_stats_field(*kind, label))
                .arg(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        let mut conn = self.conn().await?;
        match invocation.invoke_async::<i64>(&mut conn).await {
            Ok(applied) => Ok(applied == 1),
            Err(e) => {
                self.reset(&e).await;
                Err(e.into())
            }
        }
    }

    /// The counts of each of `buckets` (numbers from [`window_span`]; empty for a bucket
    /// that expired or was never written), in the same order. Fields this version does
    /// not know are left out.
    pub async fn read(&self, buckets: &[u64]) -> Result<Vec<Counts>, StoreError> {
        let keys = &self.inner.keys;
        let mut pipe = redis::pipe();
        for bucket in buckets {
            pipe.hgetall(keys.stats_bucket(*bucket));
        }
        let mut conn = self.conn().await?;
        let replies: Vec<redis::Value> = match pipe.query_async(&mut conn).await {
            Ok(replies) => replies,
            Err(e) => {
                self.reset(&e).await;
                return Err(e.into());
            }
        };
        // Decoded one by one, so an error names the bucket that holds other than counts.
        buckets
            .iter()
            .zip(replies)
            .map(|(bucket, reply)| {
                redis::from_redis_value(reply).map(decode_bucket).map_err(|e| {
                    StoreError::corrupt(
                        keys.stats_bucket(*bucket),
                        format!("a stats bucket holds something other than counts: {e}"),
                    )
                })
            })
            .collect()
    }
}

/// A bucket's counts from its hash (a negative count reads as none).
fn decode_bucket(hash: HashMap<String, i64>) -> Counts {
    hash.into_iter()
        .filter_map(|(field, n)| {
            let (kind, label) = decode_stats_field(&field)?;
            Some(((kind, label.to_owned()), u64::try_from(n).unwrap_or(0)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_decode_to_known_counts() {
        let hash = HashMap::from([
            ("published|a".to_owned(), 10),
            ("failed-by|NotFound".to_owned(), 2),
            ("future-kind|x".to_owned(), 9),
            ("delivered|a/s".to_owned(), -1),
        ]);
        assert_eq!(
            decode_bucket(hash),
            Counts::from([
                ((Kind::Published, "a".to_owned()), 10),
                ((Kind::FailedBy, "NotFound".to_owned()), 2),
                ((Kind::Delivered, "a/s".to_owned()), 0),
            ])
        );
    }
}
