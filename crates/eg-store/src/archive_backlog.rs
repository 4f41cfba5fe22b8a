//! The topic archive's backlog (archive.md), read by its writer in eg-deadletter: the
//! partition's `archive` stream, which `publish.lua` appends to, read through the
//! `archive` consumer group so any number of writers share it, and an entry removed
//! (XACK + XDEL) only once its object store confirmed the object holding it.
//!
//! Each entry is named once: before its first write it is given the name of the object
//! it goes in (`name_archive_objects.lua`), and keeps it until it leaves the backlog
//! (`finish_archived.lua`). So a retry that reads the entries in another batch — a copy
//! that took over, or after `drop-oldest` trimmed some — writes them under the same name,
//! with the same others: the object is written once, or found already there. Names are
//! kept per name (its entry ids), not per entry: only a batch's worth is in flight.

use crate::Store;
use crate::error::StoreError;
use crate::keyspace::Partition;
use crate::scripts;
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

/// One archive object's name and the entries it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedArchiveObject {
    pub name: String,
    /// The ids of every entry of the object still in the backlog.
    pub members: Vec<String>,
    /// The entries of `members` that were not handed in, read from the backlog: (stream
    /// id, event body).
    pub others: Vec<(String, String)>,
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
                if !reply.deleted_ids.is_empty() {
                    // Trimmed (drop-oldest) while a writer that died held them: Redis drops
                    // them from the group; their names go too.
                    self.finish_archived(partition, &reply.deleted_ids).await?;
                }
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

    /// Names the objects of entries read from `partition`'s backlog: `groups` pairs a
    /// proposed name with the ids of the entries read for it. An entry without a name
    /// gets its group's; an entry named before keeps its name. Returns every name the
    /// entries have, each with all its entries still in the backlog (those not handed in
    /// read from it). An entry no longer in the backlog is in none.
    pub async fn name_archive_objects(
        &self,
        partition: &Partition,
        groups: &[(String, Vec<String>)],
    ) -> Result<Vec<NamedArchiveObject>, StoreError> {
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        let mut invocation = scripts::NAME_ARCHIVE_OBJECTS.prepare_invoke();
        invocation
            .key(partition.archive_backlog())
            .key(partition.archive_object_members());
        for (name, ids) in groups {
            invocation.arg(name).arg(ids.len()).arg(ids);
        }
        let mut conn = self.conn().await?;
        let reply: Vec<(String, Vec<String>, Vec<String>)> = invocation.invoke_async(&mut conn).await?;
        reply
            .into_iter()
            .map(|(name, members, others)| {
                let mut pairs = Vec::with_capacity(others.len() / 2);
                for pair in others.chunks(2) {
                    let [id, body] = pair else {
                        return Err(StoreError::corrupt(
                            partition.archive_backlog(),
                            format!("naming archive object {name} answered an entry id without its body"),
                        ));
                    };
                    pairs.push((id.clone(), body.clone()));
                }
                Ok(NamedArchiveObject {
                    name,
                    members,
                    others: pairs,
                })
            })
            .collect()
    }

    /// Removes entries from the backlog (written, dropped, or trimmed) and forgets their
    /// object names, in one step (`finish_archived.lua`).
    pub async fn finish_archived(&self, partition: &Partition, ids: &[String]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn().await?;
        let _pending: u64 = scripts::FINISH_ARCHIVED
            .key(partition.archive_backlog())
            .key(partition.archive_object_members())
            .arg(ARCHIVE_GROUP)
            .arg(ids)
            .invoke_async(&mut conn)
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
        self.take_lease(&self.keys().archive_sweep_lease(), holder, ttl).await
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
