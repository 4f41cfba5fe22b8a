//! The topic archive's writer (archive.md): a second loop of eg-deadletter, beside the
//! dead-letter writer, because this tier already owns the object stores, their
//! credentials and failure classification. Per partition it reads the archive backlog
//! through the `archive` consumer group (so writers scale out like dead letters), groups
//! the entries by (topic, minute accepted), writes one gzip JSON-lines object per group
//! and removes the entries only once the store confirmed the object. An object is named
//! once, in Redis, by the dead-letter writer's rules (its module doc): one name per
//! entry, kept until the entry leaves; every attempt at a name writes all its entries
//! still waiting; create-only puts, "already exists" counting as written. A store that fails
//! is retried with backoff; the entries wait in Redis meanwhile (bounded by
//! `EG__ARCHIVE__MAX_BACKLOG`), shown by the backlog gauge.

use crate::failures::{FailureKind, WriteFailure};
use crate::object_name::{key_prefix, under_key_prefix};
use crate::stores::{Destination, Stores};
use eg_core::UnixMillis;
use eg_core::topic::{Archive, archive_object_name};
use eg_runtime::Shutdown;
use eg_store::archive_backlog::{BacklogEntry, NamedArchiveObject};
use eg_store::keyspace::Partition;
use eg_store::{CatalogCache, Clock, Store};
use flate2::Compression;
use flate2::write::GzEncoder;
use object_store::path::Path as ObjectPath;
use object_store::{PutMode, PutPayload};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// Entries read per round.
const BATCH: usize = 1000;
/// An entry another writer held this long is taken over (that writer died).
const CLAIM_AFTER: Duration = Duration::from_secs(60);

use eg_runtime::metrics::{
    ARCHIVE_BACKLOG, ARCHIVE_OLDEST_WAITING_MS, ARCHIVE_WRITE_FAILURE_COUNT, ARCHIVE_WRITTEN_COUNT,
};

/// The writer: shared by one loop per partition.
#[derive(Clone)]
pub struct ArchiveWriter {
    store: Store,
    clock: Clock,
    cache: Arc<CatalogCache>,
    stores: Arc<Stores>,
    consumer: String,
    interval: Duration,
    /// Longest wait between attempts at a failing store (`EG__DEADLETTER__RETRY_INTERVAL`).
    max_backoff: Duration,
}

impl ArchiveWriter {
    pub fn new(
        store: Store,
        clock: Clock,
        cache: Arc<CatalogCache>,
        stores: Arc<Stores>,
        consumer: String,
        interval: Duration,
        max_backoff: Duration,
    ) -> Self {
        Self {
            store,
            clock,
            cache,
            stores,
            consumer,
            interval,
            max_backoff,
        }
    }

    pub async fn run(&self, shutdown: Shutdown) {
        let loops: Vec<_> = self
            .store
            .keys()
            .all_partitions()
            .map(|p| {
                let writer = self.clone();
                let shutdown = shutdown.clone();
                tokio::spawn(async move { writer.partition_loop(p, shutdown).await })
            })
            .collect();
        for l in loops {
            let _ = l.await;
        }
    }

    async fn partition_loop(&self, partition: Partition, shutdown: Shutdown) {
        let mut backoff = self.interval;
        loop {
            let wait = match self.pass(&partition).await {
                Ok(true) => Duration::ZERO,
                Ok(false) => {
                    backoff = self.interval;
                    self.interval
                }
                Err(problem) => {
                    tracing::warn!(partition = partition.index, %problem, "archive write failed; retried");
                    backoff = (backoff * 2).min(self.max_backoff.max(self.interval));
                    backoff
                }
            };
            self.show_backlog(&partition).await;
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.requested() => return,
            }
        }
    }

    async fn show_backlog(&self, partition: &Partition) {
        if let Ok(size) = self.store.archive_backlog_size(partition).await {
            let label = partition.index.to_string();
            metrics::gauge!(ARCHIVE_BACKLOG, "partition" => label.clone()).set(size.entries as f64);
            let now = self.clock.now().0;
            let age = size.oldest.map_or(0, |at| now.saturating_sub(at).max(0));
            metrics::gauge!(ARCHIVE_OLDEST_WAITING_MS, "partition" => label).set(age as f64);
        }
    }

    /// One round: reads a batch, names its objects, writes them, finishes what was
    /// written. `true` when the batch was full (more may wait); an error when an object
    /// was not written.
    pub(crate) async fn pass(&self, partition: &Partition) -> Result<bool, String> {
        let entries = self
            .store
            .read_archive_backlog(partition, &self.consumer, BATCH, CLAIM_AFTER)
            .await
            .map_err(|e| e.to_string())?;
        let full = entries.len() == BATCH;
        // Trimmed by drop-oldest while held (already counted): only finished.
        let (live, trimmed): (Vec<BacklogEntry>, Vec<BacklogEntry>) =
            entries.into_iter().partition(|e| e.topic.is_some());
        let trimmed: Vec<String> = trimmed.into_iter().map(|e| e.id).collect();
        self.store
            .finish_archived(partition, &trimmed)
            .await
            .map_err(|e| e.to_string())?;
        let proposals: Vec<(String, Vec<String>)> = group_entries(&live)
            .into_iter()
            .filter_map(|(key, group)| {
                let first = group.first()?;
                let name = archive_object_name(
                    key.topic.as_deref()?,
                    UnixMillis(first.accepted_at()),
                    partition.index,
                    &first.id,
                );
                Some((name, group.iter().map(|e| e.id.clone()).collect()))
            })
            .collect();
        let named = self
            .store
            .name_archive_objects(partition, &proposals)
            .await
            .map_err(|e| e.to_string())?;
        let read: HashMap<&str, &BacklogEntry> = live.iter().map(|e| (e.id.as_str(), e)).collect();
        let mut failed = None;
        for object in named {
            if let Err(problem) = self.settle_object(partition, object, &read).await {
                failed = Some(problem);
            }
        }
        failed.map_or(Ok(full), Err)
    }

    /// Writes one named object (unless its topic stopped archiving) and finishes its
    /// entries; an error when the store did not take it.
    async fn settle_object(
        &self,
        partition: &Partition,
        object: NamedArchiveObject,
        read: &HashMap<&str, &BacklogEntry>,
    ) -> Result<(), String> {
        let mine: Vec<&BacklogEntry> = object
            .members
            .iter()
            .filter_map(|id| read.get(id.as_str()).copied())
            .collect();
        // A name comes back only for entries handed in, so one of them is here.
        let Some(topic) = mine.first().and_then(|e| e.topic.clone()) else {
            return Ok(());
        };
        let Some(archive) = self.archive_of(&topic).await? else {
            // The topic was deleted or stopped archiving: nothing to write it to.
            tracing::warn!(
                topic,
                events = object.members.len(),
                "archive entries of a topic no longer archived; dropped"
            );
            return self
                .store
                .finish_archived(partition, &object.members)
                .await
                .map_err(|e| e.to_string());
        };
        let others: Vec<BacklogEntry> = object
            .others
            .into_iter()
            .map(|(id, body)| BacklogEntry {
                id,
                topic: Some(topic.clone()),
                body,
            })
            .collect();
        let mut lines: Vec<&BacklogEntry> = mine.into_iter().chain(&others).collect();
        lines.sort_by_key(|e| stream_order(&e.id));
        let destination = Destination::from(&archive.destination);
        match self.write(&object.name, &destination, &lines).await {
            Ok(written) => {
                self.store
                    .finish_archived(partition, &object.members)
                    .await
                    .map_err(|e| e.to_string())?;
                if written == Written::Now {
                    metrics::counter!(ARCHIVE_WRITTEN_COUNT, "topic" => topic.clone()).increment(lines.len() as u64);
                }
                self.store.record_archive_problem(&topic, None).await.ok();
                Ok(())
            }
            Err(failure) => {
                metrics::counter!(ARCHIVE_WRITE_FAILURE_COUNT, "topic" => topic.clone(), "kind" => failure.kind.as_str())
                    .increment(1);
                let problem = format!("{}: {}", failure.kind.as_str(), failure.message);
                self.store.record_archive_problem(&topic, Some(&problem)).await.ok();
                Err(problem)
            }
        }
    }

    /// The archive settings of `topic`, read again from Redis before it is taken as not
    /// archived: this copy of the catalog may predate the topic or its archive.
    async fn archive_of(&self, topic: &str) -> Result<Option<Archive>, String> {
        if let Some(archive) = self.cache.snapshot().topic(topic).and_then(|t| t.topic.archive.clone()) {
            return Ok(Some(archive));
        }
        let fresh = self.cache.refresh().await.map_err(|e| e.to_string())?;
        Ok(fresh.topic(topic).and_then(|t| t.topic.archive.clone()))
    }

    /// Writes one object, its lines gzip, under its name, create-only: an attempt whose
    /// object is already there (an earlier attempt landed though its answer was lost)
    /// wrote nothing new, and every entry of the name still waiting is in that object
    /// (entries only ever leave the backlog, and each attempt writes all that are there).
    async fn write(
        &self,
        name: &str,
        destination: &Destination,
        lines: &[&BacklogEntry],
    ) -> Result<Written, WriteFailure> {
        let path = under_key_prefix(key_prefix(&destination.store), name.to_owned());
        let bytes = gzip_lines(lines).map_err(|e| WriteFailure::new(FailureKind::Rejected, e.to_string()))?;
        let built = self.stores.get(destination)?;
        let location = ObjectPath::from(path.as_str());
        let put = built
            .store
            .put_opts(&location, PutPayload::from(bytes), PutMode::Create.into());
        match tokio::time::timeout(Duration::from_secs(30), put).await {
            Ok(Ok(_)) => Ok(Written::Now),
            Ok(Err(object_store::Error::AlreadyExists { .. })) => Ok(Written::Before),
            Ok(Err(e)) => Err(WriteFailure::from_store(&e)),
            Err(_) => Err(WriteFailure::new(FailureKind::Unavailable, "no answer within 30s")),
        }
    }
}

/// Whether an object was written by this attempt or found written by an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    Now,
    Before,
}

/// A stream id's place in stream order: (milliseconds, sequence).
fn stream_order(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// The group an entry is written in: its topic (`None`: trimmed) and minute.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    topic: Option<String>,
    minute: i64,
}

/// Entries by (topic, minute accepted), each group in stream order.
fn group_entries(entries: &[BacklogEntry]) -> BTreeMap<GroupKey, Vec<&BacklogEntry>> {
    let mut groups: BTreeMap<GroupKey, Vec<&BacklogEntry>> = BTreeMap::new();
    for e in entries {
        let key = GroupKey {
            topic: e.topic.clone(),
            minute: e.accepted_at() / 60_000,
        };
        groups.entry(key).or_default().push(e);
    }
    groups
}

/// One JSON object per line: `{"streamId", "acceptedAt" (ms), "event"}`, the event as
/// the topic stored it; gzip-compressed.
fn gzip_lines(group: &[&BacklogEntry]) -> std::io::Result<Vec<u8>> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    for e in group {
        // The body is one JSON object already: written as is, not parsed again.
        writeln!(
            gz,
            "{{\"streamId\":\"{}\",\"acceptedAt\":{},\"event\":{}}}",
            e.id,
            e.accepted_at(),
            e.body
        )?;
    }
    gz.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    fn entry(id: &str, topic: &str, body: &str) -> BacklogEntry {
        BacklogEntry {
            id: id.into(),
            topic: Some(topic.into()),
            body: body.into(),
        }
    }

    #[test]
    fn entries_are_grouped_by_topic_and_minute_in_stream_order() {
        let entries = [
            entry("60000-0", "a", "{}"),
            entry("60001-0", "b", "{}"),
            entry("119999-0", "a", "{}"),
            entry("120000-0", "a", "{}"),
        ];
        let groups = group_entries(&entries);
        let ids: Vec<Vec<&str>> = groups
            .values()
            .map(|g| g.iter().map(|e| e.id.as_str()).collect())
            .collect();
        assert_eq!(ids, [vec!["60000-0", "119999-0"], vec!["120000-0"], vec!["60001-0"]]);
    }

    #[test]
    fn an_object_is_one_json_line_per_event_gzip() {
        let a = entry("60000-0", "a", r#"{"id":"1"}"#);
        let b = entry("60000-1", "a", r#"{"id":"2"}"#);
        let bytes = gzip_lines(&[&a, &b]).unwrap();
        let mut text = String::new();
        GzDecoder::new(&bytes[..]).read_to_string(&mut text).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["streamId"], "60000-1");
        assert_eq!(lines[1]["acceptedAt"], 60000);
        assert_eq!(lines[1]["event"]["id"], "2");
    }
}
