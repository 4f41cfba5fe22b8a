//! What the status page shows (read by `gather`): the catalog (topics and
//! subscriptions), endpoint probation, dead-letter counts and failing dead-letter
//! destinations, queue depths (the senders'
//! partitions, and each queue-mode subscription's queue) and the
//! deployment's rates over the last minute (`eg_runtime::stats`). The HTML page and
//! `GET /admin/status` are two renderings of this one value.
//!
//! A part that cannot be read (Redis hiccup) is left empty and named in `problems`, so
//! the page still shows what it could instead of failing as a whole.

use super::dead_letter::{DeadLetterFailure, DeadLetterTarget, FailingDeadLetters};
use super::tiers::TierStatus;
use crate::operations::subscription_key;
use crate::state::App;
use eg_core::Subscription;
use eg_core::UnixMillis;
use eg_core::destination::Target;
use eg_core::probation::{self, ProbationState};
use eg_runtime::stats::{Kind, Window, subscription_label};
use eg_store::{DeadLetterCounts, Depths, DestinationProblem, QueueDepth, StoreError};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// When this was gathered (RFC 3339, Redis's clock).
    pub generated_at: String,
    #[serde(skip)]
    pub generated_at_ms: UnixMillis,
    pub topics: Vec<TopicStatus>,
    pub rates: Rates,
    pub queues: Queues,
    /// Every tier with the copies of it running now.
    pub tiers: Vec<TierStatus>,
    /// Subscriptions whose dead letters cannot be written now (also those deleted
    /// since, while their records still fail), by topic and subscription.
    pub failing_dead_letter_destinations: Vec<FailingDeadLetters>,
    /// Delivery identities whose token endpoint is down or refusing (the senders report
    /// them), by name.
    pub failing_identities: Vec<super::identities::IdentityFailure>,
    /// Parts that could not be read this time (they show as empty or zero).
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicStatus {
    pub name: String,
    pub input_schema: String,
    /// A namespace topic (Event Grid's namespace topic form, push and queue
    /// subscriptions); otherwise a custom topic.
    pub namespace_topic: bool,
    /// Events accepted per second over the last minute.
    pub publish_rate: f64,
    /// Events that matched no active subscription in the last hour (Event Grid's
    /// unmatched count): published while every subscription was waiting for validation,
    /// filtered out, or there was none.
    pub unmatched_last_hour: u64,
    pub subscriptions: Vec<SubscriptionStatus>,
    /// The topic's archive (archive.md), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveStatus>,
}

/// An archived topic's row: the archive backlog (every partition's, which all archived
/// topics share), how long its oldest entry has waited, and the topic's last write problem.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveStatus {
    /// Where it is written: the store's label (`local`, `azure:<account>`,
    /// `s3:<connection>`) and the container or bucket.
    pub store: String,
    pub container: String,
    pub retention_days: u16,
    pub backlog: u64,
    pub oldest_waiting_ms: Option<i64>,
    pub last_error: Option<String>,
    /// Backlog entries dropped at the bound in the last hour (`drop-oldest`; every
    /// partition's, as the backlog): events that will never be in the archive.
    pub dropped_last_hour: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    pub name: String,
    /// `Push` (the senders deliver to its endpoint) or `Queue` (consumers pull).
    pub delivery_mode: &'static str,
    /// The endpoint without its query string (which may hold a secret); a queue or
    /// broker destination's identity (`storagequeue://account/queue`, …); empty for a
    /// queue subscription.
    pub endpoint_base_url: String,
    /// `WebHook`, `StorageQueue`, `RabbitMQ` or `NatsJetStream`.
    pub destination_type: &'static str,
    /// A queue subscription's queue, summed over the partitions; `null` for push.
    pub queue: Option<QueueFigures>,
    pub paused: bool,
    pub provisioning_state: String,
    /// Why the subscription is not `Succeeded`; `null` when it is.
    pub provisioning_message: Option<String>,
    /// Deliveries accepted by the endpoint per second over the last minute.
    pub delivery_rate: f64,
    /// Failed attempts per second over the last minute.
    pub failure_rate: f64,
    /// Deliveries dead-lettered per second over the last minute.
    pub dead_letter_rate: f64,
    /// `null` while the endpoint is healthy.
    pub probation: Option<ProbationStatus>,
    /// Dead letters kept for this subscription (all partitions).
    pub dead_letters: u64,
    /// Of those, not redriven yet.
    pub dead_letters_not_redriven: u64,
    /// Where its dead letters go; `null` without a dead-letter destination.
    pub dead_letter_destination: Option<DeadLetterTarget>,
    /// `null` unless writing its dead letters fails now.
    pub dead_letter_failure: Option<DeadLetterFailure>,
    /// Events its topic accepted in the last hour that it would have matched had its
    /// endpoint consented, counted while it waited for validation (not kept for it).
    /// Events another subscription matched count too: the topic's unmatched count does
    /// not have them.
    pub missed_last_hour: u64,
    /// `deliveryLimits` and how they hold now; absent without limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<super::limits::LimitsStatus>,
    /// An ordered subscription's deliveries waiting behind their key's head (every
    /// partition); absent when unordered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_in_lines: Option<u64>,
}

impl SubscriptionStatus {
    /// Where a push subscription delivers, as the page shows it: a webhook's URL, or a
    /// queue or broker destination's kind and identity (`StorageQueue
    /// storagequeue://account/queue`).
    pub fn destination_label(&self) -> String {
        if self.destination_type == "WebHook" {
            self.endpoint_base_url.clone()
        } else {
            format!("{} {}", self.destination_type, self.endpoint_base_url)
        }
    }
}

/// A queue subscription's events now, every partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueFigures {
    /// Receivable now: never received, or whose lock expired.
    pub available: u64,
    /// Received and locked to a consumer, the lock not expired.
    pub locked: u64,
    /// Released with a delay, not receivable yet.
    pub delayed: u64,
    /// Age of the oldest event still in the queue (not acknowledged, rejected or
    /// ended); `null` when the queue is empty.
    pub oldest_unacknowledged_seconds: Option<u64>,
}

impl QueueFigures {
    /// The figures of depths summed over partitions, aged at `now`.
    pub fn of(depths: &[QueueDepth], now: UnixMillis) -> Self {
        let oldest = depths.iter().filter_map(|d| d.oldest_ms).min();
        Self {
            available: depths.iter().map(|d| d.available).sum(),
            locked: depths.iter().map(|d| d.locked).sum(),
            delayed: depths.iter().map(|d| d.delayed).sum(),
            oldest_unacknowledged_seconds: oldest.map(|ms| u64::try_from((now.0 - ms).max(0) / 1000).unwrap_or(0)),
        }
    }
}

/// Reads a queue subscription's depths in every partition: `None` for push.
pub async fn queue_figures(app: &App, sub: &Subscription, now: UnixMillis) -> Result<Option<QueueFigures>, StoreError> {
    if sub.is_push() {
        return Ok(None);
    }
    let mut figures = queues_figures(app, &[sub], now).await?;
    Ok(Some(figures.remove(&subscription_key(sub)).unwrap_or_default()))
}

/// The queues of the queue-mode subscriptions among `subs`, by subscription key: in each
/// partition, those its queues index lists (a partition no event of a subscription
/// reached has no queue for it). A queue subscription with no queue yet is empty.
pub async fn queues_figures(
    app: &App,
    subs: &[&Subscription],
    now: UnixMillis,
) -> Result<HashMap<String, QueueFigures>, StoreError> {
    let locks: HashMap<String, Duration> = subs
        .iter()
        .filter_map(|s| Some((subscription_key(s), s.receive_lock()?)))
        .collect();
    let mut depths: HashMap<String, Vec<QueueDepth>> = HashMap::new();
    if locks.is_empty() {
        return Ok(HashMap::new());
    }
    for partition in app.store.keys().all_partitions() {
        for key in app.store.queue_subscriptions(&partition).await? {
            if let Some(lock) = locks.get(&key) {
                let depth = app.store.queue_depth(&partition, &key, *lock).await?;
                depths.entry(key).or_default().push(depth);
            }
        }
    }
    Ok(locks
        .into_keys()
        .map(|key| {
            let figures = QueueFigures::of(depths.get(&key).map_or(&[][..], Vec::as_slice), now);
            (key, figures)
        })
        .collect())
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbationStatus {
    /// `Probation` (no attempts before `until`) or `Probing` (waiting for one probe).
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    #[serde(skip)]
    pub until_ms: Option<UnixMillis>,
    pub consecutive_failures: u32,
    pub level: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure_outcome: Option<String>,
}

/// Per second over the last minute (`windowSeconds` long); `lastMinute` has the counts.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rates {
    pub window_seconds: f64,
    pub published: f64,
    pub delivered: f64,
    pub failed: f64,
    pub dead_lettered: f64,
    pub dropped: f64,
    pub failures_by_outcome: BTreeMap<String, f64>,
    pub dead_lettered_by_reason: BTreeMap<String, f64>,
    pub dropped_by_reason: BTreeMap<String, f64>,
    pub last_minute: Counts,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub published: u64,
    pub delivered: u64,
    pub failed: u64,
    pub dead_lettered: u64,
    pub dropped: u64,
    pub failures_by_outcome: BTreeMap<String, u64>,
    pub dead_lettered_by_reason: BTreeMap<String, u64>,
    pub dropped_by_reason: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Queues {
    pub partitions: Vec<PartitionDepths>,
    pub total: DepthCounts,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionDepths {
    pub partition: u16,
    #[serde(flatten)]
    pub depths: DepthCounts,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DepthCounts {
    /// Waiting to be sent.
    pub ready: u64,
    /// Held by a sender now.
    pub in_flight: u64,
    /// Waiting for a retry.
    pub retry: u64,
    /// Set aside for paused subscriptions.
    pub paused: u64,
    /// Dead-letter records not yet written.
    pub dead_letter_backlog: u64,
}

impl DepthCounts {
    pub(super) fn of(d: &Depths) -> Self {
        Self {
            ready: d.ready,
            in_flight: d.in_flight,
            retry: d.retry,
            paused: d.paused,
            dead_letter_backlog: d.deadletter_backlog,
        }
    }

    pub(super) fn add(&mut self, o: &Self) {
        self.ready += o.ready;
        self.in_flight += o.in_flight;
        self.retry += o.retry;
        self.paused += o.paused;
        self.dead_letter_backlog += o.dead_letter_backlog;
    }
}

fn rates_by_label(window: &Window, kind: Kind) -> BTreeMap<String, f64> {
    window
        .by_label(kind)
        .into_iter()
        .map(|(label, n)| (label, window.per_second(n)))
        .collect()
}

impl Rates {
    pub fn of(window: &Window) -> Self {
        Self {
            window_seconds: window.seconds,
            published: window.total_rate(Kind::Published),
            delivered: window.total_rate(Kind::Delivered),
            failed: window.total_rate(Kind::Failed),
            dead_lettered: window.total_rate(Kind::DeadLettered),
            dropped: window.total_rate(Kind::Dropped),
            failures_by_outcome: rates_by_label(window, Kind::FailedBy),
            dead_lettered_by_reason: rates_by_label(window, Kind::DeadLetteredBy),
            dropped_by_reason: rates_by_label(window, Kind::DroppedBy),
            last_minute: Counts {
                published: window.total(Kind::Published),
                delivered: window.total(Kind::Delivered),
                failed: window.total(Kind::Failed),
                dead_lettered: window.total(Kind::DeadLettered),
                dropped: window.total(Kind::Dropped),
                failures_by_outcome: window.by_label(Kind::FailedBy),
                dead_lettered_by_reason: window.by_label(Kind::DeadLetteredBy),
                dropped_by_reason: window.by_label(Kind::DroppedBy),
            },
        }
    }
}

fn probation_of(record: Option<&probation::ProbationRecord>, now: UnixMillis) -> Option<ProbationStatus> {
    let record = record?;
    let (state, until) = match record.state(now) {
        ProbationState::Healthy => return None,
        ProbationState::Probation { until } => ("Probation", Some(until)),
        ProbationState::Probing => ("Probing", None),
    };
    Some(ProbationStatus {
        state,
        until: until.map(UnixMillis::to_rfc3339),
        until_ms: until,
        consecutive_failures: record.consecutive_failures,
        level: record.level,
        last_failure_outcome: record.last_failure.map(|o| o.as_str().to_owned()),
    })
}

/// One subscription's row, from what was read about it: `window` is the rate window,
/// `hour` the last hour's counts.
#[allow(clippy::too_many_arguments)]
pub fn subscription_status(
    sub: &Subscription,
    record: Option<&probation::ProbationRecord>,
    counts: DeadLetterCounts,
    dead_letter_problem: Option<&DestinationProblem>,
    queue: Option<QueueFigures>,
    window: &Window,
    hour: &Window,
    now: UnixMillis,
) -> SubscriptionStatus {
    let label = subscription_label(&sub.topic.key(), &sub.name.key());
    SubscriptionStatus {
        name: sub.name.as_str().to_owned(),
        delivery_mode: sub.delivery.mode_name(),
        endpoint_base_url: sub.target().map(Target::display_name).unwrap_or_default(),
        destination_type: sub.target().map_or("", Target::endpoint_type),
        queue,
        paused: sub.paused,
        provisioning_state: sub.provisioning.state_at(now).as_str().to_owned(),
        provisioning_message: sub.provisioning.message(now),
        delivery_rate: window.rate(Kind::Delivered, &label),
        failure_rate: window.rate(Kind::Failed, &label),
        dead_letter_rate: window.rate(Kind::DeadLettered, &label),
        probation: probation_of(record, now),
        dead_letters: counts.total,
        dead_letters_not_redriven: counts.not_redriven,
        dead_letter_destination: sub.dead_letter.as_ref().map(DeadLetterTarget::of),
        dead_letter_failure: dead_letter_problem.map(DeadLetterFailure::of),
        missed_last_hour: hour.count(Kind::Missed, &label),
        limits: None,
        waiting_in_lines: sub.ordering.is_some().then_some(0),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use eg_store::stats::Counts;

    #[test]
    fn rates_total_and_split_the_window() {
        let bucket: Counts = [
            (Kind::Published, "a", 30),
            (Kind::Published, "b", 30),
            (Kind::Delivered, "a/s", 12),
            (Kind::Failed, "a/s", 6),
            (Kind::FailedBy, "NotFound", 4),
            (Kind::FailedBy, "Busy", 2),
        ]
        .into_iter()
        .map(|(kind, label, n)| ((kind, label.to_owned()), n))
        .collect();
        let rates = Rates::of(&Window::sum(60.0, [bucket]));
        assert!((rates.published - 1.0).abs() < 1e-9);
        assert!((rates.delivered - 0.2).abs() < 1e-9);
        assert!((rates.failed - 0.1).abs() < 1e-9);
        assert_eq!(rates.last_minute.failures_by_outcome["NotFound"], 4);
        assert!((rates.failures_by_outcome["Busy"] - 2.0 / 60.0).abs() < 1e-9);
        assert_eq!(rates.last_minute.dead_lettered, 0);
    }

    #[test]
    fn a_healthy_endpoint_has_no_probation() {
        let now = UnixMillis(10_000);
        assert!(probation_of(None, now).is_none());
        let failing = probation::ProbationRecord {
            consecutive_failures: 2,
            ..Default::default()
        };
        assert!(probation_of(Some(&failing), now).is_none());
        let on = probation::ProbationRecord {
            consecutive_failures: 10,
            level: 1,
            probation_until: Some(UnixMillis(20_000)),
            last_failure: Some(eg_core::OutcomeName::Busy),
            ..Default::default()
        };
        let p = probation_of(Some(&on), now).unwrap();
        assert_eq!(p.state, "Probation");
        assert_eq!(p.until_ms, Some(UnixMillis(20_000)));
        assert_eq!(p.last_failure_outcome.as_deref(), Some("Busy"));
        assert_eq!(probation_of(Some(&on), UnixMillis(30_000)).unwrap().state, "Probing");
    }
}
