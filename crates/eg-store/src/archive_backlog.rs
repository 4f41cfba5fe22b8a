//! The topic archive's backlog (archive.md), read by its writer in eg-deadletter: the
//! partition's `archive` stream, which `publish.lua` appends to, read through the
//! `archive` consumer group so any number of writers share it, and an entry removed
//! (XACK + XDEL) only once its object store confirmed the object holding it.

use crate::Store;
use crate::error::StoreError;
use crate::keyspace::Partition;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadOptions, StreamReadReply};
use std::time::Duration;

/// The consumer group of the archive writers.
pub const ARCHIVE_GROUP: &str = "archive";

/// One waiting entry: an accepted event of an archived topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BacklogEntry {
    /// The stream id: its milliseconds are when the event was accepted (Redis's clock).
    pub id: String,
    /// `None` for an entry trimmed by `drop-oldest` while a writer held it: nothing to
    /// write, only to finish.
    pub topic: Option<String>,
    pub body: String,
}

impl BacklogEntry {
    /// When the event was accepted, in ms since the epoch (the stream id's first part).
    pub fn accepted_at(&self) -> i64 {
        self.id.split('-').next().and_then(|ms| ms.parse().ok()).unwrap_or(0)
    }
}

/// The backlog of one partition as the status page and metrics show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BacklogSize {
    pub entries: u64,
    /// When the oldest waiting entry was accepted (ms), if any waits.
    pub oldest: Option<i64>,
}

impl Store {
    /// Up to `count` entries for `consumer` to write: first those it read and has not
    /// finished (a failed write is retried with the same entries), then those another
    /// writer left for longer than `min_idle` (it died), then new ones.
    pub async fn read_archive_backlog(
        &self,
        partition: &Partition,
        consumer: &str,
        count: usize,
        min_idle: Duration,
    ) -> Result<Vec<BacklogEntry>, StoreError> {
        let stream = partition.archive_backlog();
        let mut conn = self.conn().await?;
        // Created from id 0, so nothing appended before the first writer started is skipped.
        let created: Result<(), redis::RedisError> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&stream)
            .arg(ARCHIVE_GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut conn)
            .await;
        if let Err(e) = created
            && e.code() != Some("BUSYGROUP")
        {
            return Err(e.into());
        }
        let opts = StreamReadOptions::default().group(ARCHIVE_GROUP, consumer).count(count);
        for from in ["0", ">"] {
            if from == ">" {
                let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
                    .arg(&stream)
                    .arg(ARCHIVE_GROUP)
                    .arg(consumer)
                    .arg(u64::try_from(min_idle.as_millis()).unwrap_or(u64::MAX))
                    .arg("0-0")
                    .arg("COUNT")
                    .arg(count)
                    .query_async(&mut conn)
                    .await?;
                if !reply.claimed.is_empty() {
                    return Ok(reply.claimed.into_iter().map(entry).collect());
                }
            }
            let reply: Option<StreamReadReply> =
                redis::AsyncCommands::xread_options(&mut conn, &[&stream], &[from], &opts).await?;
            let ids: Vec<StreamId> = reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids).collect();
            if !ids.is_empty() {
                return Ok(ids.into_iter().map(entry).collect());
            }
        }
        Ok(Vec::new())
    }

    /// Removes written entries from the backlog (XACK and XDEL, one transaction on one key).
    pub async fn finish_archived(&self, partition: &Partition, ids: &[String]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let stream = partition.archive_backlog();
        let mut conn = self.conn().await?;
        let () = redis::pipe()
            .atomic()
            .cmd("XACK")
            .arg(&stream)
            .arg(ARCHIVE_GROUP)
            .arg(ids)
            .ignore()
            .cmd("XDEL")
            .arg(&stream)
            .arg(ids)
            .ignore()
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Remembers the last write problem of `topic`'s archive (`None`: it wrote), for the
    /// status page: one hash on the topic's home partition.
    pub async fn record_archive_problem(&self, topic: &str, problem: Option<&str>) -> Result<(), StoreError> {
        let key = self.keys().home_partition(topic).archive_problems();
        let mut conn = self.conn().await?;
        let () = match problem {
            Some(p) => {
                redis::cmd("HSET")
                    .arg(&key)
                    .arg(topic)
                    .arg(p)
                    .query_async(&mut conn)
                    .await?
            }
            None => redis::cmd("HDEL")
                .arg(&key)
                .arg(topic)
                .query_async(&mut conn)
                .await
                .map(|_: i64| ())?,
        };
        Ok(())
    }

    /// The last write problem of `topic`'s archive, if its last write failed.
    pub async fn archive_problem(&self, topic: &str) -> Result<Option<String>, StoreError> {
        let key = self.keys().home_partition(topic).archive_problems();
        let mut conn = self.conn().await?;
        Ok(redis::cmd("HGET").arg(&key).arg(topic).query_async(&mut conn).await?)
    }

    /// Takes the archive sweep's lease for `holder` for `ttl` when no copy holds it (or
    /// `holder` itself does: it renews); whether it is `holder`'s now.
    pub async fn take_archive_sweep_lease(&self, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let key = self.keys().archive_sweep_lease();
        let mut conn = self.conn().await?;
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let taken: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(holder)
            .arg("NX")
            .arg("PX")
            .arg(ttl)
            .query_async(&mut conn)
            .await?;
        if taken.is_some() {
            return Ok(true);
        }
        let current: Option<String> = redis::cmd("GET").arg(&key).query_async(&mut conn).await?;
        Ok(current.as_deref() == Some(holder))
    }

    /// How many entries wait on `partition`, and since when the oldest.
    pub async fn archive_backlog_size(&self, partition: &Partition) -> Result<BacklogSize, StoreError> {
        let stream = partition.archive_backlog();
        let mut conn = self.conn().await?;
        let (entries, first): (u64, Vec<(String, redis::Value)>) = redis::pipe()
            .cmd("XLEN")
            .arg(&stream)
            .cmd("XRANGE")
            .arg(&stream)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut conn)
            .await?;
        let oldest = first.first().map(|(id, _)| BacklogEntry {
            id: id.clone(),
            topic: None,
            body: String::new(),
        });
        Ok(BacklogSize {
            entries,
            oldest: oldest.map(|e| e.accepted_at()),
        })
    }
}

fn entry(mut id: StreamId) -> BacklogEntry {
    let topic: Option<String> = id.get("t");
    let body: Option<String> = id.get("b");
    BacklogEntry {
        id: std::mem::take(&mut id.id),
        topic: topic.filter(|_| body.is_some()),
        body: body.unwrap_or_default(),
    }
}
