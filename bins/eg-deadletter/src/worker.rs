//! The dead-letter loop of each partition: promote records whose delay has passed, read
//! them, write them grouped per object, finish what was written.
//!
//! # Nothing lost, nothing written twice
//!
//! A record leaves Redis (`finish_dead_letters`) only after its store confirmed the
//! object holding it. Until then it stays pending in the dead-letter consumer group, and
//! any worker may claim it once it has been idle for `EG__DEADLETTER__RETRY_INTERVAL`
//! (the reclaim interval). Several workers can therefore hold the same record one after
//! the other, read it with other records each time, or hold parts of one object at once;
//! these rules keep every record in exactly one object, and never in none:
//!
//! 1. **One name per record, kept in Redis.** Before anything is written, the records
//!    read are named (`Store::name_dead_letter_objects`, one script on the partition's
//!    keys): a record named by an earlier attempt keeps its name; the others of a group
//!    (one destination, subscription folder and topic) take the name derived from the
//!    group's records (`object_name`). A name keeps the records it was first given, and
//!    both are forgotten only in the step that finishes the records. So a record is only
//!    ever written under its one name, however it is read again: with newer records of
//!    the same hour (they get a name of their own), or split between workers.
//! 2. **A name's object holds the same records every time.** The object is written with
//!    all the records of its name still in Redis — those this worker read and the others
//!    the naming step read from the stream — in stream order, so every attempt at a name
//!    writes the same bytes while none of its records has been finished. A record
//!    finished meanwhile was finished with its object written (or given up), and a
//!    record read after another worker finished it is named no more and not written.
//! 3. **Create-only.** Objects are written with `PutMode::Create`. An attempt at a name
//!    whose write landed though its answer was lost (a timeout after the upload, a reset
//!    connection) gets "already exists", which counts as written: every record of the
//!    name still in Redis is in that object (records only ever leave the stream, and each
//!    attempt writes all that are there). Two workers writing one name at once write the
//!    same bytes (fewer records only if some were given up in between: those are
//!    counted as dropped), and one of them finds it already there.
//! 4. **Announced before finished.** After the put, the object is announced
//!    (`Notifier::object_written`); if that fails the records stay, and their next
//!    attempt meets "already exists" and announces the object again (at least once, so
//!    possibly twice).
//! 5. **Attempts end before records are claimed again.** Every write — the put, and the
//!    notification after it — must end within ¾ of the reclaim interval from the read
//!    that handed the records over; past it the attempt is abandoned as failed and the
//!    records finished inside the last quarter. This keeps a second worker from repeating
//!    an attempt still under way; the rules above no longer rely on it.
//! 6. **A store that fails waits.** After a failure its (store, container) is not tried
//!    again before its backoff has passed (`failures`); its records stay pending, are
//!    claimed again after the reclaim interval, and dropped and counted after
//!    `EG__DEADLETTER__GIVE_UP_AFTER`, as before (their names go with them).
//!
//! Limits: the names are as durable as Redis's acknowledged writes — a failover that
//! loses the naming step (asynchronous replication) lets a later attempt name the records
//! afresh. A record dropped after `give_up_after` may already be in an object whose
//! answer was lost: it is counted as dropped though it was written.

use crate::failures::{Backoff, BackoffKey, FailureKind, WriteFailure};
use crate::notify::Notifier;
use crate::object_name::{self, RecordId};
use crate::stores::{Destination, Stores};
use crate::write_trace;
use crate::written::WrittenObject;
use eg_core::fate;
use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_runtime::settings::DeadLetterSection;
use eg_store::{Clock, DeadLetterItem, DestinationProblem, Partition, Store};
use object_store::path::Path as ObjectPath;
use object_store::{PutMode, PutPayload};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tracing::Instrument;

/// Most promote-and-write rounds of one pass (each up to `EG__DEADLETTER__BATCH` records).
const ROUNDS_PER_PASS: usize = 20;

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

/// One named object to write: the records of its name read by this worker (`mine`,
/// held by it in the consumer group) and the others of the same name still in Redis
/// (read by the naming step: an earlier attempt named them together).
struct Object {
    key: GroupKey,
    /// The object's guid, as kept in Redis.
    name: String,
    mine: Vec<DeadLetterItem>,
    others: Vec<DeadLetterItem>,
}

impl Object {
    /// Every record, in stream order.
    fn in_stream_order(&self) -> Vec<&DeadLetterItem> {
        let mut all: Vec<&DeadLetterItem> = self.mine.iter().chain(&self.others).collect();
        all.sort_by_key(|i| stream_order(&i.entry_id));
        all
    }
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

    /// Promotes the records whose delay has passed and writes everything ready, again
    /// while promotion finds a full batch (a backlog is not held to one batch per tick),
    /// at most [`ROUNDS_PER_PASS`] times so a pass — which runs to its end even during
    /// shutdown — stays short.
    pub(crate) async fn pass(&self, partition: &Partition) -> Result<(), eg_store::StoreError> {
        let inner = &self.inner;
        for _ in 0..ROUNDS_PER_PASS {
            let promoted = inner
                .store
                .promote_due_dead_letters(partition, inner.delay, inner.batch)
                .await?;
            self.write_ready(partition).await?;
            if promoted < inner.batch {
                break;
            }
        }
        Ok(())
    }

    /// Reads, writes and finishes ready records until a read comes back short.
    async fn write_ready(&self, partition: &Partition) -> Result<(), eg_store::StoreError> {
        let inner = &self.inner;
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
            let objects = self.name_objects(partition, items).await?;
            // Objects in different stores are written side by side: a slow store does not
            // hold up the others.
            let settled =
                futures_util::future::join_all(objects.into_iter().map(|object| self.settle_object(object, deadline)))
                    .await;
            let finished: Vec<String> = settled.into_iter().flatten().collect();
            inner.store.finish_dead_letters(partition, &finished).await?;
            if !full {
                return Ok(());
            }
        }
    }

    /// Gives the records just read the names of their objects, kept in Redis: a record
    /// named by an earlier attempt keeps its name, the others take the one derived from
    /// their group. Each object comes back with every record of its name still in Redis,
    /// read here or not. A record in none was finished meanwhile by another worker.
    async fn name_objects(
        &self,
        partition: &Partition,
        items: Vec<DeadLetterItem>,
    ) -> Result<Vec<Object>, eg_store::StoreError> {
        let proposals: Vec<(String, Vec<String>)> = group_by_object(&items)
            .into_values()
            .map(|group| {
                let ids: Vec<RecordId<'_>> = group
                    .iter()
                    .map(|i| RecordId {
                        entry_id: &i.entry_id,
                        delivery_id: &i.entry.delivery_id,
                    })
                    .collect();
                let name = object_name::group_id(partition.index, &ids).to_string();
                (name, group.iter().map(|i| i.entry_id.clone()).collect())
            })
            .collect();
        let named = self.inner.store.name_dead_letter_objects(partition, &proposals).await?;
        let mut read: HashMap<String, DeadLetterItem> = items.into_iter().map(|i| (i.entry_id.clone(), i)).collect();
        let mut objects = Vec::with_capacity(named.len());
        for object in named {
            let mine: Vec<DeadLetterItem> = object.members.iter().filter_map(|id| read.remove(id)).collect();
            let Some(first) = mine.first().or(object.others.first()) else {
                continue;
            };
            objects.push(Object {
                key: group_key(first),
                name: object.name,
                mine,
                others: object.others,
            });
        }
        if !read.is_empty() {
            tracing::debug!(
                partition = partition.index,
                records = read.len(),
                "dead-letter records finished by another worker meanwhile"
            );
        }
        Ok(objects)
    }

    /// Writes one object unless its store is waiting out a failure; returns the entry ids
    /// that are finished (written, or given up on). The rest stay pending and are read
    /// again after `retry_interval`.
    async fn settle_object(&self, object: Object, deadline: Instant) -> Vec<String> {
        let backoff_key: BackoffKey = (
            object.key.destination.store.label(),
            object.key.destination.container.clone(),
        );
        if !self.backoff().may_try(&backoff_key, Instant::now().into_std()) {
            return self.keep_or_give_up(object.mine);
        }
        match self.write_object(&object, deadline).await {
            Ok(written) => {
                self.backoff().succeeded(&backoff_key);
                self.written(written, object, deadline).await
            }
            Err(failure) => {
                let wait = self.backoff().failed(backoff_key.clone(), Instant::now().into_std());
                self.failed(&backoff_key, failure, wait, object.mine).await
            }
        }
    }

    /// The store has the object: announce it, then its records may go — those read here
    /// and the others of its name.
    async fn written(&self, written: WrittenObject, object: Object, deadline: Instant) -> Vec<String> {
        tracing::info!(
            store = %written.store.label(),
            container = %written.container,
            path = %written.path,
            records = written.records,
            "dead-letter records written"
        );
        self.clear_problem(&written.topic, &written.subscription).await;
        // The announcement is part of the attempt, so it ends inside the window too. Not
        // announced: the records stay, and their next attempt finds the object (already
        // exists) and announces it then.
        let announced = tokio::time::timeout_at(deadline, self.inner.notifier.object_written(&written)).await;
        let problem = match announced {
            Ok(Ok(())) => {
                return object
                    .mine
                    .into_iter()
                    .chain(object.others)
                    .map(|i| i.entry_id)
                    .collect();
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "it took too long".to_owned(),
        };
        tracing::warn!(
            topic = %written.topic,
            subscription = %written.subscription,
            path = %written.path,
            error = %problem,
            "cannot announce a dead-letter object; keeping its records to announce it again"
        );
        self.keep_or_give_up(object.mine)
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
        let (topic, subscription) = subscription_of(group.first());
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

    /// Writes the object, create-only, within `deadline`: all its records, in stream
    /// order, so every attempt at one name writes the same bytes.
    async fn write_object(&self, object: &Object, deadline: Instant) -> Result<WrittenObject, WriteFailure> {
        let key = &object.key;
        let path = object_name::object_path(
            object_name::key_prefix(&key.destination.store),
            &key.folder,
            &object.name,
        )
        .map_err(|problem| WriteFailure::new(FailureKind::Rejected, problem))?;
        let records: Vec<serde_json::Value> = object
            .in_stream_order()
            .iter()
            .map(|i| i.entry.record(&i.event_json))
            .collect();
        let bytes = serde_json::to_vec(&records)
            .map_err(|e| WriteFailure::new(FailureKind::Rejected, format!("cannot encode the records: {e}")))?;
        let content_length = bytes.len() as u64;
        let records_len = records.len();
        let built = self.inner.stores.get(&key.destination)?;
        let location = ObjectPath::from(path.as_str());
        let store_kind = key.destination.store.label();
        let span = write_trace::write_span(
            &store_kind,
            object.in_stream_order().iter().map(|i| &i.entry),
            records_len,
        );
        let put = built
            .store
            .put_opts(&location, PutPayload::from(bytes), PutMode::Create.into());
        let etag = match tokio::time::timeout_at(deadline, put).instrument(span.clone()).await {
            Ok(Ok(result)) => {
                write_trace::record_outcome(&span, "written", false);
                result.e_tag
            }
            // An earlier attempt at these very records landed: they are written.
            Ok(Err(object_store::Error::AlreadyExists { .. })) => {
                write_trace::record_outcome(&span, "already written", false);
                None
            }
            Ok(Err(e)) => {
                let failure = WriteFailure::from_store(&e);
                write_trace::record_outcome(&span, failure.kind.as_str(), true);
                return Err(failure);
            }
            Err(_) => {
                write_trace::record_outcome(&span, FailureKind::Unavailable.as_str(), true);
                return Err(WriteFailure::new(
                    FailureKind::Unavailable,
                    format!("no answer within {:?}", write_window(self.inner.retry_interval)),
                ));
            }
        };
        let (topic, subscription) = subscription_of(object.mine.first().or(object.others.first()));
        Ok(WrittenObject {
            store: key.destination.store.clone(),
            container: key.destination.container.clone(),
            url: format!("{}/{path}", built.base_url),
            path,
            content_length,
            etag,
            records: records_len,
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

/// The topic and subscription of a record (an object's records share them, by
/// construction).
fn subscription_of(record: Option<&DeadLetterItem>) -> (String, String) {
    record
        .map(|i| (i.entry.topic.clone(), i.entry.subscription.clone()))
        .unwrap_or_default()
}

/// Where a record goes: records with the same key may share an object.
fn group_key(item: &DeadLetterItem) -> GroupKey {
    GroupKey {
        destination: Destination {
            store: item.entry.store.clone(),
            container: item.entry.container_name.clone(),
        },
        folder: item.entry.folder(),
        topic: item.entry.topic.to_ascii_lowercase(),
    }
}

fn group_by_object(items: &[DeadLetterItem]) -> BTreeMap<GroupKey, Vec<&DeadLetterItem>> {
    let mut groups: BTreeMap<GroupKey, Vec<&DeadLetterItem>> = BTreeMap::new();
    for item in items {
        groups.entry(group_key(item)).or_default().push(item);
    }
    groups
}

/// A stream entry id (`<ms>-<seq>`) as numbers, for ordering; an id of another shape
/// sorts first (Redis makes none).
fn stream_order(entry_id: &str) -> (u64, u64) {
    let (ms, seq) = entry_id.split_once('-').unwrap_or((entry_id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use eg_core::UnixMillis;
    use eg_core::deadletter::{DeadLetterEntry, DeadLetterFormat};
    use eg_core::fate::DeadLetterReason;
    use eg_core::schema::StoredFormat;
    use eg_core::subscription::DeadLetterStore;
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
                traceparent: None,
                tracestate: None,
            },
            event_json: "{}".into(),
        }
    }

    #[test]
    fn an_object_holds_one_destination_subscription_and_topic() {
        let azure = DeadLetterStore::AzureBlob { account: "a".into() };
        let local = DeadLetterStore::LocalDirectory;
        let items = [
            item("1-0", "orders", "Billing", azure.clone(), "dl"),
            item("2-0", "orders", "billing", azure.clone(), "dl"),
            item("3-0", "orders", "Billing", local.clone(), "dl"),
            item("4-0", "orders", "Billing", azure.clone(), "other"),
            item("5-0", "returns", "Billing", azure.clone(), "dl"),
            item("6-0", "orders", "Shipping", azure, "dl"),
        ];
        let groups = group_by_object(&items);
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
