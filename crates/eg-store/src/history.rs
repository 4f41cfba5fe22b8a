//! Reading delivery history. Steps are written by `settle.lua` in the partition the
//! delivery lives in: into the event's history list, or, for an event delivered by its
//! only delivery, as one field of the partition's delivered log (`settle_steps.lua`).
//! An event's deliveries all live in the partition it was published to (redriven ones
//! too), but the caller does not know which, so all are asked at once.

use crate::codec;
use crate::connection::{Link, Store};
use crate::error::StoreError;
use crate::keyspace::Partition;
use eg_core::history::HistoryEntry;

impl Store {
    /// Every kept step of the deliveries of event `event_id` published to `topic` (topic
    /// key), oldest first. Entries that do not decode are skipped and logged.
    pub async fn event_history(&self, topic: &str, event_id: &str) -> Result<Vec<HistoryEntry>, StoreError> {
        // One read per partition, all at once (their keys are in different slots).
        let (_held, link) = self.link().await?;
        let reads = self.keys().all_partitions().map(|p| {
            let mut link = link.clone();
            async move { steps_in(&mut link, &p, topic, event_id).await }
        });
        let per_partition = futures_util::future::try_join_all(reads).await?;
        let mut entries: Vec<HistoryEntry> = per_partition
            .iter()
            .flatten()
            .filter_map(|raw| match serde_json::from_str(raw) {
                Ok(entry) => Some(entry),
                Err(e) => {
                    tracing::warn!(error = %e, %topic, "skipping a history entry that does not decode");
                    None
                }
            })
            .collect();
        entries.sort_by_key(|e| e.at);
        Ok(entries)
    }
}

/// The raw steps of one event in one partition: its list, then its fields in the
/// delivered log's buckets.
async fn steps_in(
    link: &mut Link,
    partition: &Partition,
    topic: &str,
    event_id: &str,
) -> redis::RedisResult<Vec<String>> {
    let (mut steps, buckets): (Vec<String>, Vec<String>) = redis::pipe()
        .lrange(partition.history(topic, event_id), 0, -1)
        .zrange(partition.delivered_log(), 0, -1)
        .query_async(link)
        .await?;
    if buckets.is_empty() {
        return Ok(steps);
    }
    let field = format!("{topic}/{event_id}");
    let mut pipe = redis::pipe();
    for bucket in &buckets {
        pipe.hget(bucket, &field);
    }
    let logged: Vec<Option<String>> = pipe.query_async(link).await?;
    // A step a batch shared is a record of its bucket, named by the event's field.
    let mut records = redis::pipe();
    let mut named = 0;
    for (bucket, value) in buckets.iter().zip(logged) {
        let Some(value) = value else { continue };
        match codec::shared_step_record(&value) {
            Some(record) => {
                records.hget(bucket, record);
                named += 1;
            }
            // The steps of a fan-out's deliveries settled together: one per line.
            None => steps.extend(value.split('\n').map(str::to_owned)),
        }
    }
    if named > 0 {
        let shared: Vec<Option<String>> = records.query_async(link).await?;
        steps.extend(shared.into_iter().flatten());
    }
    Ok(steps)
}
