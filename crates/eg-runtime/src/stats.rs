//! System-wide rates from per-process counters, for the status page.
//!
//! Every tier counts what it does in its own Prometheus recorder, but the status page
//! (served by eg-ingress) needs rates for the whole deployment: publishes happen in the
//! ingress, deliveries in the senders, dead-letter drops in the dead-letter worker.
//! So each process also keeps a small [`Tally`]:
//!
//! - [`TallyingRecorder`] wraps the Prometheus recorder. It forwards everything and adds
//!   the increments of a few counters to the tally, by [`Kind`] and label
//!   ([`counts_of`]). Call sites do not change: they keep calling `metrics::counter!`.
//! - [`spawn_flusher`] moves the tally into Redis every [`FLUSH_INTERVAL`], with the
//!   time it was taken. How counts are stored (bucket numbers, fields, keys, expiry, the
//!   once-only flush script) is `eg_store::stats`'s.
//! - [`Stats::window`] sums the buckets of the last minute into counts and rates.
//!
//! Counts are never doubled: each flush carries a sequence number of its process, and
//! the script applies a number once, so a flush retried after a lost answer is skipped.
//! A failed flush is kept and retried as it was; what a process counted meanwhile waits
//! for the next one. What a process had counted but not flushed when it died (at most
//! the last flush interval; [`SHUTDOWN_FLUSH_INTERVAL`] while it shuts down) is lost:
//! these rates are for watching, `/metrics` stays the record.
//!
//! Fields are bounded: their labels are topic and subscription names (bounded by the
//! catalog, and published counts only ever name existing topics), outcomes and reasons.

use crate::Shutdown;
use crate::metrics as m;
use eg_core::UnixMillis;
use eg_store::stats::{Batch, Counts, window_span};
use eg_store::{Clock, RedisSettings, StatsStore, StoreError};
use metrics::{Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use std::collections::{BTreeMap, HashMap};

pub use eg_store::stats::Kind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

/// How often a process moves what it counted into Redis.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(2);
/// How often it does once shutdown was requested (the process may exit at any moment).
pub const SHUTDOWN_FLUSH_INTERVAL: Duration = Duration::from_millis(500);
/// Buckets summed for "the last minute": the current, partly filled one and the five
/// before it, so the window is 50 to 60 seconds long, ending now (buckets are
/// `eg_store::stats::BUCKET_SECONDS` wide).
pub const RATE_BUCKETS: u64 = 6;

/// The label of a subscription's counts: `<topic>/<subscription>` (their keys, lower case).
pub fn subscription_label(topic: &str, subscription: &str) -> String {
    format!("{topic}/{subscription}")
}

/// Whether increments of counter `name` are tallied.
pub fn is_tallied(name: &str) -> bool {
    matches!(
        name,
        m::PUBLISH_SUCCESS_COUNT
            | m::MATCHED_EVENT_COUNT
            | m::UNMATCHED_EVENT_COUNT
            | m::MISSED_EVENT_COUNT
            | m::DELIVERY_SUCCESS_COUNT
            | m::DELIVERY_ATTEMPT_FAIL_COUNT
            | m::DEAD_LETTERED_COUNT
            | m::DROPPED_EVENT_COUNT
            | m::ARCHIVE_DROPPED_COUNT
    )
}

/// The counts (kind and label) an increment of counter `name` adds to, given its labels
/// (`label("topic")` is the value of label `topic`): `PublishSuccessCount` is
/// `Published`, `MatchedEventCount` `Matched`, `UnmatchedEventCount` `Unmatched` (by
/// topic); `MissedEventCount` is `Missed`, `DeliverySuccessCount` `Delivered`,
/// `DeliveryAttemptFailCount` `Failed` and `FailedBy`, `DeadLetteredCount` `DeadLettered`
/// and `DeadLetteredBy`, `DroppedEventCount` `Dropped` and `DroppedBy` (by
/// topic/subscription, and by outcome or reason); `ArchiveDroppedCount` is
/// `ArchiveDropped` (by partition). A counter missing a label adds to fewer counts.
pub fn counts_of<'a>(name: &str, label: impl Fn(&str) -> Option<&'a str>) -> Vec<(Kind, String)> {
    let topic = label("topic");
    let pair = topic.zip(label("subscription")).map(|(t, s)| subscription_label(t, s));
    let pair = pair.as_deref();
    let parts: Vec<(Kind, Option<&str>)> = match name {
        m::PUBLISH_SUCCESS_COUNT => vec![(Kind::Published, topic)],
        m::MATCHED_EVENT_COUNT => vec![(Kind::Matched, topic)],
        m::UNMATCHED_EVENT_COUNT => vec![(Kind::Unmatched, topic)],
        m::MISSED_EVENT_COUNT => vec![(Kind::Missed, pair)],
        m::DELIVERY_SUCCESS_COUNT => vec![(Kind::Delivered, pair)],
        m::DELIVERY_ATTEMPT_FAIL_COUNT => vec![(Kind::Failed, pair), (Kind::FailedBy, label("outcome"))],
        m::DEAD_LETTERED_COUNT => vec![(Kind::DeadLettered, pair), (Kind::DeadLetteredBy, label("reason"))],
        m::DROPPED_EVENT_COUNT => vec![(Kind::Dropped, pair), (Kind::DroppedBy, label("reason"))],
        m::ARCHIVE_DROPPED_COUNT => vec![(Kind::ArchiveDropped, label("partition"))],
        _ => Vec::new(),
    };
    parts
        .into_iter()
        .filter_map(|(kind, value)| value.map(|v| (kind, v.to_owned())))
        .collect()
}

/// What this process counted since its last flush, by kind and label. Lock-free on the
/// counting side: each count is an atomic that the tallying counters hold directly.
#[derive(Debug, Default)]
pub struct Tally {
    cells: Mutex<BTreeMap<(Kind, String), Arc<AtomicU64>>>,
}

impl Tally {
    /// The cell of a count (created on first use; cells are never removed, as their
    /// labels are bounded).
    pub fn cell(&self, kind: Kind, label: &str) -> Arc<AtomicU64> {
        let mut cells = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
        cells.entry((kind, label.to_owned())).or_default().clone()
    }

    pub fn add(&self, kind: Kind, label: &str, n: u64) {
        self.cell(kind, label).fetch_add(n, Ordering::Relaxed);
    }

    /// Takes everything counted so far (leaving zeros): the non-zero counts.
    pub fn take(&self) -> Counts {
        let cells = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
        cells
            .iter()
            .filter_map(|(count, cell)| {
                let n = cell.swap(0, Ordering::Relaxed);
                (n > 0).then(|| (count.clone(), n))
            })
            .collect()
    }
}

/// A [`Recorder`] that hands everything to `inner` and also adds the increments of the
/// tallied counters ([`is_tallied`]) to a [`Tally`].
pub struct TallyingRecorder<R> {
    inner: R,
    tally: Arc<Tally>,
    /// The tallying handle of each tallied counter seen, so a `counter!` call (which
    /// registers every time) costs a map look-up, not new cells.
    counters: RwLock<HashMap<Key, Counter>>,
}

impl<R> TallyingRecorder<R> {
    pub fn new(inner: R, tally: Arc<Tally>) -> Self {
        Self {
            inner,
            tally,
            counters: RwLock::default(),
        }
    }
}

struct TallyingCounter {
    inner: Counter,
    cells: Vec<Arc<AtomicU64>>,
}

impl CounterFn for TallyingCounter {
    fn increment(&self, value: u64) {
        self.inner.increment(value);
        for cell in &self.cells {
            cell.fetch_add(value, Ordering::Relaxed);
        }
    }

    fn absolute(&self, value: u64) {
        // Not an increment: a rate cannot be told from it. eg never sets counters.
        self.inner.absolute(value);
    }
}

impl<R: Recorder> Recorder for TallyingRecorder<R> {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        if !is_tallied(key.name()) {
            return self.inner.register_counter(key, metadata);
        }
        let known = self
            .counters
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned();
        if let Some(counter) = known {
            return counter;
        }
        let labels: Vec<(&str, &str)> = key.labels().map(|l| (l.key(), l.value())).collect();
        let counts = counts_of(key.name(), |name| {
            labels.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
        });
        let counter = Counter::from_arc(Arc::new(TallyingCounter {
            inner: self.inner.register_counter(key, metadata),
            cells: counts
                .iter()
                .map(|(kind, label)| self.tally.cell(*kind, label))
                .collect(),
        }));
        let mut counters = self.counters.write().unwrap_or_else(PoisonError::into_inner);
        counters.entry(key.clone()).or_insert(counter).clone()
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        self.inner.register_gauge(key, metadata)
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        self.inner.register_histogram(key, metadata)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("stats: {0}")]
    Store(#[from] StoreError),
}

/// Counts summed over a window of buckets, with rates per second over its length.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    /// How long the window is.
    pub seconds: f64,
    /// By kind and label.
    pub counts: Counts,
}

impl Window {
    /// Sums the counts of buckets over a window `seconds` long.
    pub fn sum(seconds: f64, buckets: impl IntoIterator<Item = Counts>) -> Self {
        let mut counts = Counts::new();
        for bucket in buckets {
            for (count, n) in bucket {
                *counts.entry(count).or_default() += n;
            }
        }
        Self { seconds, counts }
    }

    pub fn count(&self, kind: Kind, label: &str) -> u64 {
        self.counts.get(&(kind, label.to_owned())).copied().unwrap_or(0)
    }

    /// Per second over the window.
    pub fn rate(&self, kind: Kind, label: &str) -> f64 {
        self.per_second(self.count(kind, label))
    }

    /// All labels of a kind together.
    pub fn total(&self, kind: Kind) -> u64 {
        self.counts
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|(_, n)| *n)
            .sum()
    }

    pub fn total_rate(&self, kind: Kind) -> f64 {
        self.per_second(self.total(kind))
    }

    /// The counts of one kind by label.
    pub fn by_label(&self, kind: Kind) -> BTreeMap<String, u64> {
        self.counts
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|((_, label), n)| (label.clone(), *n))
            .collect()
    }

    pub fn per_second(&self, count: u64) -> f64 {
        if self.seconds > 0.0 {
            count as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// The deployment's counts in Redis (see `eg_store::stats`): written by every
/// process's [`Flusher`], read as windows by the status page.
#[derive(Clone)]
pub struct Stats {
    store: StatsStore,
}

impl Stats {
    /// Prepares the stats' own connection (opened on first use): Redis may be down now.
    pub fn new(settings: &RedisSettings) -> Result<Self, StatsError> {
        Ok(Self {
            store: StatsStore::new(settings)?,
        })
    }

    /// Adds a batch to its bucket unless it was applied before; `Ok(false)` when it was.
    pub async fn write(&self, batch: &Batch) -> Result<bool, StatsError> {
        Ok(self.store.write(batch).await?)
    }

    /// The counts of the last minute (see [`RATE_BUCKETS`]) as of `now`.
    pub async fn window(&self, now: UnixMillis) -> Result<Window, StatsError> {
        self.read(now, RATE_BUCKETS).await
    }

    /// The counts of the last `buckets` buckets as of `now` (at most an hour's: older
    /// ones have expired).
    pub async fn read(&self, now: UnixMillis, buckets: u64) -> Result<Window, StatsError> {
        let (buckets, seconds) = window_span(now, buckets);
        let hashes = self.store.read(&buckets).await?;
        Ok(Window::sum(seconds, hashes))
    }
}

/// Moves a process's [`Tally`] into Redis, one [`Batch`] at a time.
pub struct Flusher {
    stats: Stats,
    tally: Arc<Tally>,
    clock: Clock,
    writer: String,
    seq: u64,
    /// A batch taken from the tally but not known to be applied: sent again, as it is,
    /// before anything newer.
    pending: Option<Batch>,
}

impl Flusher {
    pub fn new(stats: Stats, tally: Arc<Tally>, clock: Clock) -> Self {
        Self {
            stats,
            tally,
            clock,
            writer: uuid::Uuid::new_v4().simple().to_string(),
            seq: 0,
            pending: None,
        }
    }

    /// Writes the pending batch, if any, then everything counted since. On an error
    /// the batch stays pending (and the tally keeps counting) for the next call.
    pub async fn flush(&mut self) -> Result<(), StatsError> {
        if self.pending.is_none() {
            let counts = self.tally.take();
            if counts.is_empty() {
                return Ok(());
            }
            self.seq += 1;
            self.pending = Some(Batch {
                writer: self.writer.clone(),
                seq: self.seq,
                taken_at: self.clock.now(),
                counts,
            });
        }
        if let Some(batch) = &self.pending {
            self.stats.write(batch).await?;
            self.pending = None;
        }
        Ok(())
    }

    /// Whether a batch waits to be written again.
    pub fn has_pending(&self) -> bool {
        self.pending.is_some()
    }
}

/// Flushes every [`FLUSH_INTERVAL`] for the life of the process; once shutdown is
/// requested, at once and then every [`SHUTDOWN_FLUSH_INTERVAL`], so the work a process
/// finishes during its grace period is counted too (the task ends with the process).
pub fn spawn_flusher(mut flusher: Flusher, shutdown: Shutdown) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(FLUSH_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stopping = false;
        let mut failing = false;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.requested(), if !stopping => {
                    stopping = true;
                    tick = tokio::time::interval(SHUTDOWN_FLUSH_INTERVAL);
                }
            }
            // Both passes: a pending batch goes first, then what was counted since.
            for _ in 0..2 {
                match flusher.flush().await {
                    Ok(()) if failing => {
                        failing = false;
                        tracing::info!("status-page counts are written to redis again");
                    }
                    Ok(()) => {}
                    Err(e) => {
                        if !failing {
                            tracing::warn!(error = %e, "cannot write status-page counts to redis; keeping them for the next try");
                        }
                        failing = true;
                        break;
                    }
                }
                if !flusher.has_pending() {
                    break;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn labels<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }

    fn c(kind: Kind, label: &str) -> (Kind, String) {
        (kind, label.to_owned())
    }

    #[test]
    fn each_tallied_counter_adds_to_its_counts() {
        let sub = [("topic", "orders"), ("subscription", "audit")];
        assert_eq!(
            counts_of(m::PUBLISH_SUCCESS_COUNT, labels(&[("topic", "orders")])),
            [c(Kind::Published, "orders")]
        );
        assert_eq!(
            counts_of(m::UNMATCHED_EVENT_COUNT, labels(&[("topic", "orders")])),
            [c(Kind::Unmatched, "orders")]
        );
        assert_eq!(
            counts_of(m::MISSED_EVENT_COUNT, labels(&sub)),
            [c(Kind::Missed, "orders/audit")]
        );
        assert_eq!(
            counts_of(m::ARCHIVE_DROPPED_COUNT, labels(&[("partition", "3")])),
            [c(Kind::ArchiveDropped, "3")]
        );
        assert!(is_tallied(m::ARCHIVE_DROPPED_COUNT));
        assert_eq!(
            counts_of(m::DELIVERY_SUCCESS_COUNT, labels(&sub)),
            [c(Kind::Delivered, "orders/audit")]
        );
        assert_eq!(
            counts_of(
                m::DELIVERY_ATTEMPT_FAIL_COUNT,
                labels(&[("topic", "orders"), ("subscription", "audit"), ("outcome", "NotFound")])
            ),
            [c(Kind::Failed, "orders/audit"), c(Kind::FailedBy, "NotFound")]
        );
        assert_eq!(
            counts_of(
                m::DEAD_LETTERED_COUNT,
                labels(&[("topic", "t"), ("subscription", "s"), ("reason", "TimeToLiveExceeded")])
            ),
            [
                c(Kind::DeadLettered, "t/s"),
                c(Kind::DeadLetteredBy, "TimeToLiveExceeded")
            ]
        );
        assert_eq!(
            counts_of(
                m::DROPPED_EVENT_COUNT,
                labels(&[("topic", "t"), ("subscription", "s"), ("reason", "EventMissing")])
            ),
            [c(Kind::Dropped, "t/s"), c(Kind::DroppedBy, "EventMissing")]
        );
        // A missing label means fewer fields, never a made-up one.
        assert_eq!(
            counts_of(m::DROPPED_EVENT_COUNT, labels(&[("reason", "EventMissing")])),
            [c(Kind::DroppedBy, "EventMissing")]
        );
        assert!(counts_of(m::PUBLISH_FAIL_COUNT, labels(&sub)).is_empty());
        assert!(!is_tallied(m::QUEUE_READY_DEPTH));
    }

    #[test]
    fn the_recorder_forwards_and_tallies() {
        let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = prometheus.handle();
        let tally = Arc::new(Tally::default());
        let recorder = TallyingRecorder::new(prometheus, tally.clone());
        metrics::with_local_recorder(&recorder, || {
            for _ in 0..3 {
                metrics::counter!(m::DELIVERY_SUCCESS_COUNT, "topic" => "t", "subscription" => "s").increment(2);
            }
            metrics::counter!(m::DELIVERY_ATTEMPT_FAIL_COUNT, "topic" => "t", "subscription" => "s", "outcome" => "Busy")
                .increment(1);
            metrics::counter!(m::RECLAIMED_DELIVERY_COUNT, "topic" => "t", "subscription" => "s").increment(5);
            metrics::gauge!(m::QUEUE_READY_DEPTH, "partition" => "0").set(7.0);
        });
        let text = handle.render();
        assert!(
            text.contains("DeliverySuccessCount{topic=\"t\",subscription=\"s\"} 6"),
            "{text}"
        );
        assert!(
            text.contains("ReclaimedDeliveryCount{topic=\"t\",subscription=\"s\"} 5"),
            "{text}"
        );
        assert!(text.contains("QueueReadyDepth{partition=\"0\"} 7"), "{text}");
        let taken = tally.take();
        assert_eq!(
            taken,
            Counts::from([
                (c(Kind::Delivered, "t/s"), 6),
                (c(Kind::Failed, "t/s"), 1),
                (c(Kind::FailedBy, "Busy"), 1),
            ])
        );
        // Taken means gone: the next flush only sees what came after.
        assert!(tally.take().is_empty());
        metrics::with_local_recorder(&recorder, || {
            metrics::counter!(m::DELIVERY_SUCCESS_COUNT, "topic" => "t", "subscription" => "s").increment(1);
        });
        assert_eq!(tally.take(), Counts::from([(c(Kind::Delivered, "t/s"), 1)]));
    }

    #[test]
    fn windows_sum_buckets_into_counts_and_rates() {
        let bucket = |pairs: &[(Kind, &str, u64)]| -> Counts { pairs.iter().map(|(k, l, n)| (c(*k, l), *n)).collect() };
        let window = Window::sum(
            50.0,
            [
                bucket(&[(Kind::Published, "a", 10), (Kind::FailedBy, "NotFound", 2)]),
                bucket(&[
                    (Kind::Published, "a", 15),
                    (Kind::Published, "b", 25),
                    (Kind::Delivered, "a/s", 5),
                ]),
            ],
        );
        assert_eq!(window.count(Kind::Published, "a"), 25);
        assert!((window.rate(Kind::Published, "a") - 0.5).abs() < 1e-9);
        assert_eq!(window.total(Kind::Published), 50);
        assert!((window.total_rate(Kind::Published) - 1.0).abs() < 1e-9);
        assert_eq!(window.count(Kind::Delivered, "a/s"), 5);
        assert_eq!(
            window.by_label(Kind::FailedBy),
            BTreeMap::from([("NotFound".to_owned(), 2)])
        );
        assert_eq!(window.total(Kind::DeadLettered), 0);
        assert_eq!(window.rate(Kind::Dropped, "a/s"), 0.0);
    }
}
