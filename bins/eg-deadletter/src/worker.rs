//! The dead-letter loop of each partition: promote records whose delay has passed, read
//! them, write them grouped per object, finish what was written.
//!
//! # Nothing lost, nothing written twice
//!
//! A record leaves Redis (`finish_dead_letters`) only after its store confirmed the
//! object holding it. Until then it stays pending in the dead-letter consumer group, and
//! any worker may claim it once it has been idle for `EG__DEADLETTER__RETRY_INTERVAL`
//! (the reclaim interval). Several workers can therefore hold the same record one after
//! the other; these rules keep it in one object, and never in none:
//!
//! 1. **One writer at a time.** Every write — the put, and the notification after it —
//!    must end within a window of ¾ of the reclaim interval from the read that handed
//!    the records over; past it the attempt is abandoned as failed. The records are
//!    finished right after, inside the last quarter. So when a second worker claims a
//!    record, the first one's attempt is over: two workers never write the same record
//!    at once.
//! 2. **The same records, the same name.** An object's name is derived from the records
//!    it holds (`object_name`), and it is written create-only (`PutMode::Create`). A
//!    repeated attempt for a group whose write landed though its answer was lost gets
//!    "already exists", which counts as written: the records are finished, not written
//!    again.
//! 3. **Announced before finished.** After the put, the object is announced
//!    (`Notifier::object_written`); if that fails the records stay, and their next attempt
//!    meets "already exists" and announces the object again.
//! 4. **A store that fails waits.** After a failure its (store, container) is not tried
//!    again before its backoff has passed (`failures`); its records stay pending, are
//!    claimed again after the reclaim interval, and dropped and counted after
//!    `EG__DEADLETTER__GIVE_UP_AFTER`, as before.
//!
//! What remains: records kept after a write that landed — its answer lost (a timeout
//! after the upload, a reset connection), or its announcement failed — are written again
//! under another name if they are next read in a different grouping (more records of the
//! same hour arrived, or another worker claimed part of them). Then a record is in two
//! objects, never in none. Closing that needs the group's object name kept in Redis with
//! its records, so every later attempt reuses it.

use crate::failures::{Backoff, BackoffKey, FailureKind, WriteFailure};
use crate::notify::Notifier;
use crate::object_name::{self, RecordId};
use crate::stores::{Destination, Stores};
use crate::written::WrittenObject;
use eg_core::fate;
use eg_core::subscription::DeadLetterStore;
use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_runtime::settings::DeadLetterSection;
use eg_store::{Clock, DeadLetterItem, DestinationProblem, Partition, Store};
use object_store::path::Path as ObjectPath;
use object_store::{PutMode, PutPayload};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    clock: Clock,
    stores: Stores,
    backoff: Mutex<Backoff>,
    delay: Duration,
    give_up_after: Duration,
    retry_interval: Duration,
    interval: Duration,
    batch: usize,
    consumer: String,
    notifier: Arc<Notifier>,
}

/// The records of one object: one destination, one subscription's folder, one topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    destination: Destination,
    folder: Vec<String>,
    topic: String,
}

/// How long a write may take, counted from the read that handed its records over: ¾ of
/// the reclaim interval, so the records are finished before another worker may claim them.
pub fn write_window(retry_interval: Duration) -> Duration {
    retry_interval.saturating_mul(3) / 4
}

/// Waits after a store's failures start at the reclaim interval (records come back no
/// sooner anyway) and stop doubling at ten times it (5 minutes by default).
fn backoff_for(retry_interval: Duration) -> Backoff {
    Backoff::new(retry_interval, retry_interval.saturating_mul(10))
}

impl Worker {
    /// `consumer` is this process's name in the dead-letter consumer group (built at
    /// start-up, `Process::consumer`).
    /// `notifier` announces each object written (a no-op without a notify topic).
    pub fn new(
        store: Store,
        clock: Clock,
        s: &DeadLetterSection,
        consumer: String,
        stores: Stores,
        notifier: Arc<Notifier>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                clock,
                stores,
                backoff: Mutex::new(backoff_for(s.retry_interval)),
                delay: s.delay,
                give_up_after: s.give_up_after,
                retry_interval: s.retry_interval,
                interval: s.interval,
                batch: s.batch.max(1),
                consumer,
                notifier,
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
            // A pass runs to its end even during shutdown: objects written get finished.
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
            let deadline = Instant::now() + write_window(inner.retry_interval);
            if items.is_empty() {
                return Ok(());
            }
            let full = items.len() >= inner.batch;
            // Groups to different stores are written side by side: a slow store does not
            // hold up the others.
            let settled = futures_util::future::join_all(
                group_by_object(items)
                    .into_iter()
                    .map(|(key, group)| self.settle_group(partition.index, key, group, deadline)),
            )
            .await;
            let finished: Vec<String> = settled.into_iter().flatten().collect();
            inner.store.finish_dead_letters(partition, &finished).await?;
            if !full {
                return Ok(());
            }
        }
    }

    /// Writes one group's object unless its store is waiting out a failure; returns the
    /// entry ids that are finished (written, or given up on). The rest stay pending and
    /// are read again after `retry_interval`.
    async fn settle_group(
        &self,
        partition: u16,
        key: GroupKey,
        group: Vec<DeadLetterItem>,
        deadline: Instant,
    ) -> Vec<String> {
        let backoff_key: BackoffKey = (key.destination.store.label(), key.destination.container.clone());
        if !self.backoff().may_try(&backoff_key, Instant::now().into_std()) {
            return self.keep_or_give_up(group);
        }
        match self.write_group(partition, &key, &group, deadline).await {
            Ok(object) => {
                self.backoff().succeeded(&backoff_key);
                self.written(object, group, deadline).await
            }
            Err(failure) => {
                let wait = self.backoff().failed(backoff_key.clone(), Instant::now().into_std());
                self.failed(&backoff_key, failure, wait, group).await
            }
        }
    }

    /// The store has the object: announce it, then its records may go.
    async fn written(&self, object: WrittenObject, group: Vec<DeadLetterItem>, deadline: Instant) -> Vec<String> {
        tracing::info!(
            store = %object.store.label(),
            container = %object.container,
            path = %object.path,
            records = object.records,
            "dead-letter records written"
        );
        self.clear_problem(&object.topic, &object.subscription).await;
        // The announcement is part of the attempt, so it ends inside the window too. Not
        // announced: the records stay, and their next attempt finds the object (already
        // exists) and announces it then.
        let announced = tokio::time::timeout_at(deadline, self.inner.notifier.object_written(&object)).await;
        let problem = match announced {
            Ok(Ok(())) => return group.into_iter().map(|i| i.entry_id).collect(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "it took too long".to_owned(),
        };
        tracing::warn!(
            topic = %object.topic,
            subscription = %object.subscription,
            path = %object.path,
            error = %problem,
            "cannot announce a dead-letter object; keeping its records to announce it again"
        );
        self.keep_or_give_up(group)
    }

    /// The write failed: count it, say so where operators look, keep the records.
    async fn failed(
        &self,
        key: &BackoffKey,
        failure: WriteFailure,
        wait: Duration,
        group: Vec<DeadLetterItem>,
    ) -> Vec<String> {
        metrics::counter!(
            m::DEAD_LETTER_WRITE_FAIL_COUNT,
            "store" => key.0.clone(),
            "kind" => failure.kind.as_str()
        )
        .increment(1);
        let (topic, subscription) = subscription_of(&group);
        tracing::warn!(
            topic = %topic,
            subscription = %subscription,
            store = %key.0,
            container = %key.1,
            kind = failure.kind.as_str(),
            error = %failure.message,
            records = group.len(),
            retry_in = ?wait,
            "cannot write dead-letter records; keeping them"
        );
        self.record_problem(&topic, &subscription, key, &failure).await;
        self.keep_or_give_up(group)
    }

    fn backoff(&self) -> std::sync::MutexGuard<'_, Backoff> {
        // Only whole insertions and removals happen under the lock.
        self.inner
            .backoff
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes the group as one object, create-only, within `deadline`.
    async fn write_group(
        &self,
        partition: u16,
        key: &GroupKey,
        group: &[DeadLetterItem],
        deadline: Instant,
    ) -> Result<WrittenObject, WriteFailure> {
        let ids: Vec<RecordId<'_>> = group
            .iter()
            .map(|i| RecordId {
                entry_id: &i.entry_id,
                delivery_id: &i.entry.delivery_id,
            })
            .collect();
        let path = object_name::object_path(key_prefix(&key.destination.store), &key.folder, partition, &ids)
            .map_err(|problem| WriteFailure::new(FailureKind::Rejected, problem))?;
        let records: Vec<serde_json::Value> = group.iter().map(|i| i.entry.record(&i.event_json)).collect();
        let bytes = serde_json::to_vec(&records)
            .map_err(|e| WriteFailure::new(FailureKind::Rejected, format!("cannot encode the records: {e}")))?;
        let content_length = bytes.len() as u64;
        let built = self.inner.stores.get(&key.destination)?;
        let location = ObjectPath::from(path.as_str());
        let put = built
            .store
            .put_opts(&location, PutPayload::from(bytes), PutMode::Create.into());
        let etag = match tokio::time::timeout_at(deadline, put).await {
            Ok(Ok(result)) => result.e_tag,
            // An earlier attempt at these very records landed: they are written.
            Ok(Err(object_store::Error::AlreadyExists { .. })) => None,
            Ok(Err(e)) => return Err(WriteFailure::from_store(&e)),
            Err(_) => {
                return Err(WriteFailure::new(
                    FailureKind::Unavailable,
                    format!("no answer within {:?}", write_window(self.inner.retry_interval)),
                ));
            }
        };
        let (topic, subscription) = subscription_of(group);
        Ok(WrittenObject {
            store: key.destination.store.clone(),
            container: key.destination.container.clone(),
            url: format!("{}/{path}", built.base_url),
            path,
            content_length,
            etag,
            records: group.len(),
            topic,
            subscription,
        })
    }

    /// Keeps the records that may still wait; returns the ids of those waiting longer than
    /// `give_up_after`, dropped and counted.
    fn keep_or_give_up(&self, group: Vec<DeadLetterItem>) -> Vec<String> {
        let inner = &self.inner;
        let now = inner.clock.now();
        let mut expired = Vec::new();
        for i in group {
            if let Some(reason) = fate::dead_letter_given_up(i.entry.dead_lettered_at, now, inner.give_up_after) {
                metrics::counter!(
                    m::DROPPED_EVENT_COUNT,
                    "topic" => i.entry.topic.to_ascii_lowercase(),
                    "subscription" => i.entry.subscription.to_ascii_lowercase(),
                    "reason" => reason.as_str()
                )
                .increment(1);
                tracing::error!(
                    topic = %i.entry.topic,
                    subscription = %i.entry.subscription,
                    store = %i.entry.store.label(),
                    container = %i.entry.container_name,
                    delivery = %i.entry.delivery_id,
                    "dropping a dead-letter record: its destination was unavailable too long"
                );
                expired.push(i.entry_id);
            }
        }
        expired
    }

    async fn record_problem(&self, topic: &str, subscription: &str, key: &BackoffKey, failure: &WriteFailure) {
        let now = self.inner.clock.now();
        let problem = DestinationProblem {
            store: key.0.clone(),
            container: key.1.clone(),
            kind: failure.kind.as_str().to_owned(),
            message: failure.message.clone(),
            since: now,
            last: now,
        };
        if let Err(e) = self
            .inner
            .store
            .record_dead_letter_problem(topic, subscription, problem)
            .await
        {
            tracing::warn!(error = %e, topic, subscription, "cannot record a dead-letter destination's problem");
        }
    }

    async fn clear_problem(&self, topic: &str, subscription: &str) {
        if let Err(e) = self.inner.store.clear_dead_letter_problem(topic, subscription).await {
            tracing::warn!(error = %e, topic, subscription, "cannot clear a dead-letter destination's problem");
        }
    }
}

/// The key prefix of an S3 destination; other stores have none.
fn key_prefix(store: &DeadLetterStore) -> &str {
    match store {
        DeadLetterStore::S3 { key_prefix, .. } => key_prefix,
        _ => "",
    }
}

/// The topic and subscription a group's records belong to (one each, by construction).
fn subscription_of(group: &[DeadLetterItem]) -> (String, String) {
    group
        .first()
        .map(|i| (i.entry.topic.clone(), i.entry.subscription.clone()))
        .unwrap_or_default()
}

fn group_by_object(items: Vec<DeadLetterItem>) -> BTreeMap<GroupKey, Vec<DeadLetterItem>> {
    let mut groups: BTreeMap<GroupKey, Vec<DeadLetterItem>> = BTreeMap::new();
    for item in items {
        let key = GroupKey {
            destination: Destination {
                store: item.entry.store.clone(),
                container: item.entry.container_name.clone(),
            },
            folder: item.entry.folder(),
            topic: item.entry.topic.to_ascii_lowercase(),
        };
        groups.entry(key).or_default().push(item);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use eg_core::UnixMillis;
    use eg_core::deadletter::{DeadLetterEntry, DeadLetterFormat};
    use eg_core::fate::DeadLetterReason;
    use eg_core::schema::StoredFormat;
    use std::collections::BTreeSet;

    fn item(id: &str, topic: &str, subscription: &str, store: DeadLetterStore, container: &str) -> DeadLetterItem {
        DeadLetterItem {
            partition: 0,
            entry_id: id.into(),
            entry: DeadLetterEntry {
                container_name: container.into(),
                store,
                subscription: subscription.into(),
                topic: topic.into(),
                delivery_id: format!("d{id}"),
                reason: DeadLetterReason::MaxDeliveryAttemptsExceeded,
                delivery_attempts: 1,
                last_outcome: None,
                last_http_status_code: None,
                publish_time: UnixMillis(0),
                last_attempt_time: None,
                dead_lettered_at: UnixMillis(1_772_600_767_000),
                format: DeadLetterFormat::EventGrid,
                stored_format: StoredFormat::EventGrid,
                event_id: id.into(),
            },
            event_json: "{}".into(),
        }
    }

    #[test]
    fn an_object_holds_one_destination_subscription_and_topic() {
        let azure = DeadLetterStore::AzureBlob { account: "a".into() };
        let local = DeadLetterStore::LocalDirectory;
        let groups = group_by_object(vec![
            item("1-0", "orders", "Billing", azure.clone(), "dl"),
            item("2-0", "orders", "billing", azure.clone(), "dl"),
            item("3-0", "orders", "Billing", local.clone(), "dl"),
            item("4-0", "orders", "Billing", azure.clone(), "other"),
            item("5-0", "returns", "Billing", azure.clone(), "dl"),
            item("6-0", "orders", "Shipping", azure, "dl"),
        ]);
        let sizes: Vec<usize> = groups.values().map(Vec::len).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 6);
        assert_eq!(groups.len(), 5, "{groups:?}");
        let together = groups.values().find(|g| g.len() == 2).unwrap();
        assert_eq!(
            together.iter().map(|i| i.entry_id.as_str()).collect::<Vec<_>>(),
            ["1-0", "2-0"],
            "subscription names differ only in case: one folder"
        );
        for group in groups.values() {
            let folders: BTreeSet<String> = group
                .iter()
                .map(|i| i.entry.subscription.to_ascii_uppercase())
                .collect();
            assert_eq!(folders.len(), 1, "{group:?}");
        }
    }

    #[test]
    fn writes_end_before_another_worker_may_claim_the_records() {
        assert_eq!(write_window(Duration::from_secs(30)), Duration::from_millis(22_500));
        assert!(write_window(Duration::from_millis(1)) < Duration::from_millis(1));
        let backoff = backoff_for(Duration::from_secs(30));
        let key = ("s3:x".to_owned(), "b".to_owned());
        assert!(backoff.may_try(&key, std::time::Instant::now()));
    }
}
