//! Reads everything the overview shows ([`Status`]) in a few batched reads: the
//! catalog, the rates, every subscription's probation record in one round of reads,
//! every subscription's dead-letter counts in one pipeline per partition, the failing
//! dead-letter destinations, the queue subscriptions' depths, each partition's depths
//! and the running tier copies.
//!
//! A read that fails leaves its part empty and says so once in `problems` ([`Problems`]),
//! so the page still shows what it could.

use super::dead_letter::FailingDeadLetters;
use super::hour::LastHour;
use super::identities::IdentityFailure;
use super::model::{
    DepthCounts, PartitionDepths, QueueFigures, Queues, Rates, Status, SubscriptionStatus, TopicStatus, queues_figures,
    subscription_status,
};
use super::tiers::tiers_of;
use crate::operations::subscription_key;
use crate::state::App;
use eg_core::probation::{EndpointId, ProbationRecord};
use eg_core::profile::DeliveryProfile;
use eg_core::{Subscription, UnixMillis};
use eg_runtime::stats::{Kind, Stats, Window};
use eg_store::{DestinationProblem, FailingDestination};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::sync::Arc;

/// The parts that could not be read, one line each, shown at the top of the page.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    /// A read's value, or `T::default()` with "`what` unavailable: why" noted.
    fn or_empty<T: Default, E: Display>(&mut self, what: &str, read: Result<T, E>) -> T {
        read.unwrap_or_else(|e| {
            self.0.push(format!("{what} unavailable: {e}"));
            T::default()
        })
    }
}

/// Reads everything the page shows.
pub async fn gather(app: &App, stats: &Stats, last_hour: &LastHour) -> Status {
    let now = app.clock.now();
    let mut problems = Problems::default();
    // The cache refreshes itself every few seconds; asking costs one GET and shows a
    // change made a moment ago.
    let catalog = app.cache.refresh().await.unwrap_or_else(|e| {
        problems
            .0
            .push(format!("catalog not refreshed ({e}); showing the copy in memory"));
        app.cache.snapshot()
    });
    let window = problems.or_empty("rates", stats.window(now).await);
    let hour = problems.or_empty(
        "unmatched and missed counts of the last hour",
        last_hour.window(stats, now, &window).await,
    );

    let mut entries: Vec<_> = catalog.topics.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut subscriptions: Vec<&Arc<Subscription>> = entries
        .iter()
        .flat_map(|(_, entry)| entry.subscriptions.iter())
        .collect();
    subscriptions.sort_by_key(|s| (s.topic.key(), s.name.key()));

    let failing = problems.or_empty(
        "failing dead-letter destinations",
        app.store.dead_letter_problems().await,
    );
    let read = Reads {
        window: &window,
        hour: &hour,
        failing: &failing,
        now,
    };
    let mut by_topic = subscription_statuses(app, &subscriptions, &read, &mut problems).await;
    let unmatched = hour.by_label(Kind::Unmatched);
    let dropped: u64 = hour.by_label(Kind::ArchiveDropped).values().sum();
    let archives = archive_statuses(app, &entries, now, dropped, &mut problems).await;
    let topics = entries
        .iter()
        .map(|(key, entry)| TopicStatus {
            archive: archives.get(*key).cloned(),
            name: entry.topic.name.as_str().to_owned(),
            input_schema: entry.topic.input_schema.to_string(),
            namespace_topic: entry.topic.profile == DeliveryProfile::NamespaceTopic,
            publish_rate: window.rate(Kind::Published, key),
            unmatched_last_hour: unmatched.get(*key).copied().unwrap_or(0),
            subscriptions: by_topic.remove(*key).unwrap_or_default(),
        })
        .collect();
    let queues = partition_queues(app, &mut problems).await;
    let copies = problems.or_empty("running tier copies", app.store.live_copies(now).await);
    let identities = problems.or_empty("failing delivery identities", app.store.identity_problems(now).await);
    let plain: Vec<&Subscription> = subscriptions.iter().map(|s| s.as_ref()).collect();
    let failing_identities = identities
        .iter()
        .map(|f| IdentityFailure::of(f, &plain, app.validator.bearer()))
        .collect();

    Status {
        generated_at: now.to_rfc3339(),
        generated_at_ms: now,
        topics,
        rates: Rates::of(&window),
        queues,
        tiers: tiers_of(copies, now),
        failing_dead_letter_destinations: failing.iter().map(FailingDeadLetters::of).collect(),
        failing_identities,
        problems: problems.0,
    }
}

/// The archive row of each archived topic (archive.md): the backlog summed over the
/// partitions, read once and only when some topic is archived, and the entries dropped
/// at its bound in the last hour.
async fn archive_statuses(
    app: &App,
    entries: &[(&String, &eg_store::TopicEntry)],
    now: UnixMillis,
    dropped_last_hour: u64,
    problems: &mut Problems,
) -> HashMap<String, super::model::ArchiveStatus> {
    let archived: Vec<(&String, &eg_core::topic::Archive)> = entries
        .iter()
        .filter_map(|(k, e)| Some((*k, e.topic.archive.as_ref()?)))
        .collect();
    let mut out = HashMap::new();
    if archived.is_empty() {
        return out;
    }
    let mut backlog = 0;
    let mut oldest: Option<i64> = None;
    for p in app.store.keys().all_partitions() {
        match app.store.archive_backlog_size(&p).await {
            Ok(size) => {
                backlog += size.entries;
                oldest = match (oldest, size.oldest) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            Err(e) => problems.0.push(format!("archive backlog not read ({e})")),
        }
    }
    for (key, archive) in archived {
        let last_error = app.store.archive_problem(key).await.unwrap_or_default();
        let status = super::model::ArchiveStatus {
            store: archive.destination.store.label(),
            container: archive.destination.container_name.clone(),
            retention_days: archive.retention_days,
            backlog,
            oldest_waiting_ms: oldest.map(|at| (now.0 - at).max(0)),
            last_error,
            dropped_last_hour,
        };
        out.insert(key.clone(), status);
    }
    out
}

/// What every subscription's row is read against.
struct Reads<'a> {
    window: &'a Window,
    hour: &'a Window,
    failing: &'a [FailingDestination],
    now: UnixMillis,
}

/// Every subscription's row, by topic: probation records, dead-letter counts and queue
/// figures each read for all subscriptions at once.
async fn subscription_statuses(
    app: &App,
    subscriptions: &[&Arc<Subscription>],
    read: &Reads<'_>,
    problems: &mut Problems,
) -> BTreeMap<String, Vec<SubscriptionStatus>> {
    // Queue-mode subscriptions have no endpoint, so no probation record.
    let endpoints: Vec<Option<EndpointId>> = subscriptions.iter().map(|s| s.endpoint_id()).collect();
    let ids: Vec<EndpointId> = endpoints.iter().flatten().cloned().collect();
    let read_records = problems.or_empty("endpoint probation records", app.store.probation_records(&ids).await);
    let mut read_records = read_records.into_iter();
    let records: Vec<Option<ProbationRecord>> = endpoints
        .iter()
        .map(|e| e.as_ref().and_then(|_| read_records.next().flatten()))
        .collect();
    let keys: Vec<String> = subscriptions.iter().map(|s| subscription_key(s)).collect();
    let counts = problems.or_empty("dead-letter counts", app.store.dead_letter_counts_of(&keys).await);
    let plain: Vec<&Subscription> = subscriptions.iter().map(|s| s.as_ref()).collect();
    let mut queues_of = problems.or_empty(
        "queue subscriptions' depths",
        queues_figures(app, &plain, read.now).await,
    );
    let limited = super::limits::limited(&plain);
    let mut throttles = problems
        .or_empty("delivery limit records", app.store.throttle_records(&limited).await)
        .into_iter();
    let waiting = problems.or_empty("deliveries waiting in lines", app.store.waiting_in_lines().await);
    let failing_of: HashMap<(&str, &str), &DestinationProblem> = read
        .failing
        .iter()
        .map(|f| ((f.topic.as_str(), f.subscription.as_str()), &f.problem))
        .collect();

    let mut by_topic: BTreeMap<String, Vec<SubscriptionStatus>> = BTreeMap::new();
    for (i, sub) in subscriptions.iter().enumerate() {
        // Unread (the problem is named): zeros, still shown as a queue.
        let queue = queues_of
            .remove(&keys[i])
            .or_else(|| (!sub.is_push()).then(QueueFigures::default));
        let record = records.get(i).and_then(Option::as_ref);
        let counts = counts.get(i).copied().unwrap_or_default();
        let (topic, name) = (sub.topic.key(), sub.name.key());
        let failure = failing_of.get(&(topic.as_str(), name.as_str())).copied();
        let mut row = subscription_status(sub, record, counts, failure, queue, read.window, read.hour, read.now);
        if sub.limits.is_some() {
            let current = row.delivery_rate + row.failure_rate;
            row.limits = super::limits::limits_of(sub, current, throttles.next().as_ref(), read.now);
        }
        if row.waiting_in_lines.is_some() {
            row.waiting_in_lines = Some(waiting.get(&keys[i]).copied().unwrap_or(0));
        }
        by_topic.entry(topic).or_default().push(row);
    }
    by_topic
}

/// Each partition's depths and their total; a partition that cannot be read is named.
async fn partition_queues(app: &App, problems: &mut Problems) -> Queues {
    let mut queues = Queues::default();
    for partition in app.store.keys().all_partitions() {
        match app.store.depths(&partition).await {
            Ok(depths) => {
                let depths = DepthCounts::of(&depths);
                queues.total.add(&depths);
                queues.partitions.push(PartitionDepths {
                    partition: partition.index,
                    depths,
                });
            }
            Err(e) => problems.0.push(format!(
                "queue depths of partition {} unavailable: {e}",
                partition.index
            )),
        }
    }
    queues
}
