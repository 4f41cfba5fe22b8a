//! The topic archive's writer (archive.md): a second loop of eg-deadletter, beside the
//! dead-letter writer, because this tier already owns the object stores, their
//! credentials and failure classification. Per partition it reads the archive backlog
//! through the `archive` consumer group (so writers scale out like dead letters), groups
//! the entries by (topic, minute accepted), writes one gzip JSON-lines object per group
//! and removes the entries only once the store confirmed the object. A store that fails
//! is retried with backoff; the entries wait in Redis meanwhile (bounded by
//! `EG__ARCHIVE__MAX_BACKLOG`), shown by the backlog gauge.

use crate::failures::{FailureKind, WriteFailure};
use crate::object_name::{key_prefix, under_key_prefix};
use crate::stores::{Destination, Stores};
use eg_core::UnixMillis;
use eg_core::topic::archive_object_name;
use eg_runtime::Shutdown;
use eg_store::archive_backlog::BacklogEntry;
use eg_store::keyspace::Partition;
use eg_store::{CatalogCache, Clock, Store};
use flate2::Compression;
use flate2::write::GzEncoder;
use object_store::path::Path as ObjectPath;
use object_store::{PutMode, PutPayload};
use std::collections::BTreeMap;
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

    /// One round: reads a batch, writes its objects, finishes what was written. `true`
    /// when the batch was full (more may wait); an error when an object was not written.
    async fn pass(&self, partition: &Partition) -> Result<bool, String> {
        let entries = self
            .store
            .read_archive_backlog(partition, &self.consumer, BATCH, CLAIM_AFTER)
            .await
            .map_err(|e| e.to_string())?;
        let full = entries.len() == BATCH;
        let snapshot = self.cache.snapshot();
        let mut failed = None;
        for (key, group) in group_entries(&entries) {
            let ids: Vec<String> = group.iter().map(|e| e.id.clone()).collect();
            let Some(topic) = key.topic.as_ref() else {
                // Trimmed by drop-oldest while held (already counted): only finished.
                self.store
                    .finish_archived(partition, &ids)
                    .await
                    .map_err(|e| e.to_string())?;
                continue;
            };
            let mut archive = snapshot.topic(topic).and_then(|t| t.topic.archive.clone());
            if archive.is_none() {
                // This copy of the catalog may predate the topic or its archive: one fresh
                // read before anything is dropped.
                let fresh = self.cache.refresh().await.map_err(|e| e.to_string())?;
                archive = fresh.topic(topic).and_then(|t| t.topic.archive.clone());
            }
            let Some(archive) = archive else {
                // The topic was deleted or stopped archiving: nothing to write it to.
                tracing::warn!(
                    topic,
                    events = ids.len(),
                    "archive entries of a topic no longer archived; dropped"
                );
                self.store
                    .finish_archived(partition, &ids)
                    .await
                    .map_err(|e| e.to_string())?;
                continue;
            };
            let destination = Destination::from(&archive.destination);
            match self.write(partition, topic, &destination, &group).await {
                Ok(()) => {
                    self.store
                        .finish_archived(partition, &ids)
                        .await
                        .map_err(|e| e.to_string())?;
                    metrics::counter!(ARCHIVE_WRITTEN_COUNT, "topic" => topic.clone()).increment(ids.len() as u64);
                    self.store.record_archive_problem(topic, None).await.ok();
                }
                Err(failure) => {
                    metrics::counter!(ARCHIVE_WRITE_FAILURE_COUNT, "topic" => topic.clone(), "kind" => failure.kind.as_str())
                        .increment(1);
                    let problem = format!("{}: {}", failure.kind.as_str(), failure.message);
                    self.store.record_archive_problem(topic, Some(&problem)).await.ok();
                    failed = Some(problem);
                }
            }
        }
        failed.map_or(Ok(full), Err)
    }

    /// Writes one object: the group's lines, gzip, under the name of its first entry.
    /// A retry after a crash reads the same pending entries and writes the same name.
    async fn write(
        &self,
        partition: &Partition,
        topic: &str,
        destination: &Destination,
        group: &[&BacklogEntry],
    ) -> Result<(), WriteFailure> {
        let Some(first) = group.first() else {
            return Ok(());
        };
        let name = under_key_prefix(
            key_prefix(&destination.store),
            archive_object_name(topic, UnixMillis(first.accepted_at()), partition.index, &first.id),
        );
        let bytes = gzip_lines(group).map_err(|e| WriteFailure::new(FailureKind::Rejected, e.to_string()))?;
        let built = self.stores.get(destination)?;
        // Overwrite: a retry of the same entries writes the same lines under the same name.
        let location = ObjectPath::from(name.as_str());
        let put = built
            .store
            .put_opts(&location, PutPayload::from(bytes), PutMode::Overwrite.into());
        match tokio::time::timeout(Duration::from_secs(30), put).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(WriteFailure::from_store(&e)),
            Err(_) => Err(WriteFailure::new(FailureKind::Unavailable, "no answer within 30s")),
        }
    }
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
