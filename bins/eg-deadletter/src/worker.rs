//! The dead-letter loop of each partition: promote records whose delay has passed,
//! read them, write them grouped per file, finish what was written.

use crate::directory;
use eg_core::fate;
use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_runtime::settings::DeadLetterSection;
use eg_store::{Clock, DeadLetterItem, Partition, Store};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    clock: Clock,
    root: PathBuf,
    delay: Duration,
    give_up_after: Duration,
    retry_interval: Duration,
    interval: Duration,
    batch: usize,
    consumer: String,
}

impl Worker {
    /// `consumer` is this process's name in the dead-letter consumer group (built at
    /// start-up, `Process::consumer`).
    pub fn new(store: Store, clock: Clock, s: &DeadLetterSection, consumer: String) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                clock,
                root: s.dir.clone(),
                delay: s.delay,
                give_up_after: s.give_up_after,
                retry_interval: s.retry_interval,
                interval: s.interval,
                batch: s.batch.max(1),
                consumer,
            }),
        }
    }

    pub async fn run(&self, shutdown: Shutdown) {
        let loops: Vec<_> = self
            .inner
            .store
            .keys()
            .all_partitions()
            .map(|p| {
                let worker = self.clone();
                let shutdown = shutdown.clone();
                tokio::spawn(async move { worker.partition_loop(p, shutdown).await })
            })
            .collect();
        for l in loops {
            let _ = l.await;
        }
    }

    async fn partition_loop(&self, partition: Partition, shutdown: Shutdown) {
        let mut tick = tokio::time::interval(self.inner.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.requested() => return,
            }
            // A pass runs to its end even during shutdown: files written get acknowledged.
            if let Err(e) = self.pass(&partition).await {
                if e.is_missing_group() {
                    let _ = self.inner.store.ensure_groups().await;
                } else {
                    tracing::warn!(error = %e, partition = partition.index, "dead-letter pass failed");
                }
            }
        }
    }

    async fn pass(&self, partition: &Partition) -> Result<(), eg_store::StoreError> {
        let inner = &self.inner;
        inner
            .store
            .promote_due_dead_letters(partition, inner.delay, inner.batch)
            .await?;
        loop {
            let items = inner
                .store
                .read_dead_letters(partition, &inner.consumer, inner.batch, inner.retry_interval)
                .await?;
            if items.is_empty() {
                return Ok(());
            }
            let full = items.len() >= inner.batch;
            let mut finished = Vec::new();
            for (folder, group) in group_by_folder(items) {
                let ids = self.write_group(&folder, group).await;
                finished.extend(ids);
            }
            inner.store.finish_dead_letters(partition, &finished).await?;
            if !full {
                return Ok(());
            }
        }
    }

    /// Writes one file for the group; returns the entry ids that are finished (written,
    /// or given up on). The rest stay pending and are read again after `retry_interval`.
    async fn write_group(&self, folder: &[String], group: Vec<DeadLetterItem>) -> Vec<String> {
        let inner = &self.inner;
        let records: Vec<serde_json::Value> = group.iter().map(|i| i.entry.record(&i.event_json)).collect();
        let bytes = serde_json::to_vec(&records).unwrap_or_default();
        let path = directory::folder_path(&inner.root, folder);
        let written = match path {
            Ok(path) => tokio::task::spawn_blocking(move || directory::write_file(&path, &bytes))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e))),
            Err(e) => Err(e),
        };
        match written {
            Ok(file) => {
                tracing::info!(file = %file.display(), records = group.len(), "dead-letter records written");
                group.into_iter().map(|i| i.entry_id).collect()
            }
            Err(e) => {
                metrics::counter!(m::DEAD_LETTER_WRITE_FAIL_COUNT).increment(1);
                let now = inner.clock.now();
                let mut expired = Vec::new();
                let mut waiting = 0;
                for i in group {
                    match fate::dead_letter_given_up(i.entry.dead_lettered_at, now, inner.give_up_after) {
                        Some(reason) => expired.push((reason, i)),
                        None => waiting += 1,
                    }
                }
                tracing::warn!(error = %e, folder = %folder.join("/"), waiting, giving_up = expired.len(), "cannot write dead-letter records");
                for (reason, i) in &expired {
                    metrics::counter!(
                        m::DROPPED_EVENT_COUNT,
                        "topic" => i.entry.topic.to_ascii_lowercase(),
                        "subscription" => i.entry.subscription.to_ascii_lowercase(),
                        "reason" => reason.as_str()
                    )
                    .increment(1);
                    tracing::error!(delivery = %i.entry.delivery_id, "dropping a dead-letter record: its destination was unavailable too long");
                }
                expired.into_iter().map(|(_, i)| i.entry_id).collect()
            }
        }
    }
}

fn group_by_folder(items: Vec<DeadLetterItem>) -> BTreeMap<Vec<String>, Vec<DeadLetterItem>> {
    let mut groups: BTreeMap<Vec<String>, Vec<DeadLetterItem>> = BTreeMap::new();
    for item in items {
        let mut folder = vec![item.entry.container_name.clone()];
        folder.extend(item.entry.folder());
        groups.entry(folder).or_default().push(item);
    }
    groups
}
