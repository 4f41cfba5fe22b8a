//! Accepting validated events into a topic: match them against the topic's subscriptions
//! in the cached catalog and store them with one delivery per match, in one atomic
//! step. The store refuses a match made against a stale catalog copy; then the copy is
//! reloaded and the events matched again.
//!
//! The ingress's publish routes and eg-deadletter's notifications both publish through
//! [`store_events`], so an event eg announces itself takes the same path as one a user
//! publishes: filters, deliveries, retries, the same metrics.

use eg_core::event::AcceptedEvent;
use eg_core::topic::duplicate_identity;
use eg_core::{Delivery, TopicName, UnixMillis};
use eg_store::codec;
use eg_store::queue::{ArchiveAppend, DuplicateCheck, EventToStore, Routes};
use eg_store::{CatalogCache, CatalogSnapshot, Clock, PublishOutcome, Store, StoreError, TopicEntry};
use std::sync::Arc;

use crate::metrics as m;

/// A stale catalog copy is refreshed and the events re-matched at most this often.
const STALE_CATALOG_RETRIES: usize = 3;

/// What [`store_events`] needs of the process: the store, its catalog copy and clock.
#[derive(Clone, Copy)]
pub struct Acceptor<'a> {
    pub store: &'a Store,
    pub cache: &'a CatalogCache,
    pub clock: &'a Clock,
    /// The archive backlog's bound, for topics with an archive (archive.md).
    pub archive: crate::settings::ArchiveSection,
}

/// Why events were not stored. `E` is the caller's own refusal, from the check it runs
/// against each newer catalog (a publisher's key may have been regenerated since).
#[derive(Debug, thiserror::Error)]
pub enum AcceptError<E> {
    #[error("topic {0:?} does not exist")]
    NoTopic(String),
    #[error("the topic's subscriptions are changing too fast to publish; nothing was accepted, retry")]
    CatalogChurn,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The caller's refusal itself is in the variant (it may not be printable).
    #[error("refused by a newer catalog")]
    Refused(E),
    /// The topic is archived and the archive backlog of its partition is full
    /// (`EG__ARCHIVE__WHEN_FULL=refuse`): nothing was stored.
    #[error(
        "the topic's archive backlog holds {0} events waiting for the object store (EG__ARCHIVE__MAX_BACKLOG); nothing was accepted, retry later"
    )]
    ArchiveFull(u64),
}

/// How many events were accepted and how many deliveries they got; `duplicates` of the
/// events were skipped, their identity accepted within the topic's duplicate detection
/// window before (accepted all the same: the publisher retried).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    pub events: usize,
    pub deliveries: usize,
    pub duplicates: usize,
}

/// Matches `events` against the subscriptions of topic `name` and stores each event that
/// matched something with its deliveries, in one atomic step; an event matching nothing
/// is counted as unmatched and not stored. An event a subscription waiting for
/// validation would have matched is counted as missed by it. `snapshot` is the catalog
/// copy the caller checked the topic in; `recheck` runs again on every newer copy met on
/// the way, and its refusal ends the call with nothing stored.
pub async fn store_events<E>(
    acceptor: Acceptor<'_>,
    name: &TopicName,
    mut snapshot: Arc<CatalogSnapshot>,
    events: &[AcceptedEvent],
    mut recheck: impl FnMut(&CatalogSnapshot) -> Result<(), E>,
) -> Result<Accepted, AcceptError<E>> {
    let Acceptor {
        store,
        cache,
        clock,
        archive: bound,
    } = acceptor;
    let count = events.len();
    let spread = store.keys().partition(rand::random_range(0..store.keys().partitions()));

    for _ in 0..STALE_CATALOG_RETRIES {
        let entry = topic_entry(&snapshot, name)?;
        // A key's line must live under one hash tag: a topic with an ordered subscription
        // publishes to its home partition (matched again after a stale catalog, so a
        // subscription made ordered meanwhile moves the request home too). So does a topic
        // with a duplicate detection window, so every copy meets one seen set.
        let window = entry.topic.duplicate_window;
        let partition = if window.is_some() || entry.subscriptions.iter().any(|s| ordered(s)) {
            store.keys().home_partition(&name.key())
        } else {
            spread.clone()
        };
        let now = clock.now();
        let archive = entry.topic.archive.as_ref().map(|_| ArchiveAppend {
            topic: name.key(),
            max_backlog: bound.max_backlog,
            when_full: bound.when_full,
        });
        let (origins, to_store): (Vec<&AcceptedEvent>, Vec<EventToStore>) =
            fan_out(entry, events, now, snapshot.version, archive.is_some())
                .into_iter()
                .unzip();
        let check = window.map(|window| DuplicateCheck {
            topic: name.key(),
            identities: origins
                .iter()
                .map(|e| duplicate_identity(entry.topic.input_schema, e))
                .collect(),
            window: window.duration(),
            now,
        });
        if to_store.is_empty() {
            // No script will check the catalog version, so check it here: a key regenerated
            // or a subscription created a moment ago through another copy must apply.
            let current = cache.refresh().await?;
            if current.version != snapshot.version {
                snapshot = current;
                recheck(&snapshot).map_err(AcceptError::Refused)?;
                continue;
            }
            metrics::counter!(m::UNMATCHED_EVENT_COUNT, "topic" => name.key()).increment(count as u64);
            count_missed(entry, events, now);
            return Ok(Accepted {
                events: count,
                deliveries: 0,
                duplicates: 0,
            });
        }
        let routes = routes(entry);
        let (outcome, dropped) = store
            .publish_archived(
                &partition,
                snapshot.version,
                &to_store,
                &routes,
                check.as_ref(),
                archive.as_ref(),
            )
            .await?;
        if dropped > 0 {
            metrics::counter!(m::ARCHIVE_DROPPED_COUNT, "partition" => partition.index.to_string()).increment(dropped);
        }
        match outcome {
            PublishOutcome::ArchiveFull { backlog } => {
                metrics::counter!(m::ARCHIVE_REFUSED_COUNT, "topic" => name.key()).increment(count as u64);
                return Err(AcceptError::ArchiveFull(backlog));
            }
            PublishOutcome::Stored { duplicates } => {
                let matched: usize = to_store
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| duplicates.binary_search(i).is_err())
                    .map(|(_, e)| e.deliveries.len())
                    .sum();
                // Archive-only events (no delivery) were stored too: count them as unmatched.
                let with_deliveries = to_store.iter().filter(|e| !e.deliveries.is_empty()).count();
                metrics::counter!(m::MATCHED_EVENT_COUNT, "topic" => name.key()).increment(matched as u64);
                metrics::counter!(m::UNMATCHED_EVENT_COUNT, "topic" => name.key())
                    .increment((count - with_deliveries) as u64);
                if !duplicates.is_empty() {
                    metrics::counter!(m::DUPLICATE_EVENT_COUNT, "topic" => name.key())
                        .increment(duplicates.len() as u64);
                }
                count_missed(entry, events, now);
                tracing::debug!(topic = %name, events = count, deliveries = matched, duplicates = duplicates.len(), "accepted");
                return Ok(Accepted {
                    events: count,
                    deliveries: matched,
                    duplicates: duplicates.len(),
                });
            }
            PublishOutcome::StaleCatalog(version) => {
                tracing::debug!(topic = %name, cached = snapshot.version, current = version, "catalog changed; re-matching");
                snapshot = cache.reload().await?;
                recheck(&snapshot).map_err(AcceptError::Refused)?;
            }
        }
    }
    Err(AcceptError::CatalogChurn)
}

/// Counts, for each subscription of the topic waiting for validation, the accepted events
/// it would have matched had its endpoint consented (`MissedEventCount`): what the
/// topic's unmatched count cannot tell once another subscription matched them. Costs
/// one pass over the subscriptions when none waits.
fn count_missed(entry: &TopicEntry, events: &[AcceptedEvent], now: UnixMillis) {
    for sub in entry.subscriptions.iter().filter(|s| !s.provisioning.is_active()) {
        let missed = events.iter().filter(|e| sub.wants(&e.routing(), now)).count();
        if missed > 0 {
            metrics::counter!(
                m::MISSED_EVENT_COUNT,
                "topic" => entry.topic.name.key(),
                "subscription" => sub.name.key()
            )
            .increment(missed as u64);
        }
    }
}

fn topic_entry<'a, E>(snapshot: &'a CatalogSnapshot, name: &TopicName) -> Result<&'a TopicEntry, AcceptError<E>> {
    snapshot
        .topic(&name.key())
        .ok_or_else(|| AcceptError::NoTopic(name.as_str().to_owned()))
}

/// Whether a subscription orders its deliveries per key (push mode only).
fn ordered(sub: &eg_core::Subscription) -> bool {
    sub.ordering.is_some() && sub.is_push()
}

/// Where the topic's deliveries go besides one ready entry each, by `<topic>/<subscription>`
/// key: the queue-mode subscriptions' into their queue for pull receivers, not to the
/// senders; the unordered push subscriptions that batch, into batch entries sent as one.
fn routes(entry: &TopicEntry) -> Routes {
    let key = |s: &eg_core::Subscription| format!("{}/{}", entry.topic.name.key(), s.name.key());
    Routes {
        queued: entry
            .subscriptions
            .iter()
            .filter(|s| !s.is_push())
            .map(|s| key(s))
            .collect(),
        batched: entry
            .subscriptions
            .iter()
            .filter(|s| s.is_push() && !ordered(s) && s.batching.batches())
            .map(|s| (key(s), s.batching))
            .collect(),
    }
}

/// The id of delivery `index` of `matched` deliveries of the event `event_key`: a lone
/// delivery is named like its event, so its carried record can leave the event key out
/// (`codec::encode_carried_delivery`); several are named `<event key>-<index>`, so they
/// can be stored as one fan-out entry listing their subscriptions (`codec::encode_fan_out`).
fn delivery_id(event_key: &str, index: usize, matched: usize) -> String {
    if matched == 1 {
        event_key.to_owned()
    } else {
        codec::fan_out_delivery_id(event_key, index)
    }
}

/// One stored event per event that matched something, with one delivery per match
/// (each remembers the catalog version it was matched against), beside the event it
/// came from. An event that matched nothing is not stored, and so not remembered by a
/// duplicate check either — unless the topic is `archived`: then it is stored with no
/// delivery, for the archive (and remembered).
fn fan_out<'e>(
    entry: &TopicEntry,
    events: &'e [AcceptedEvent],
    now: UnixMillis,
    version: u64,
    archived: bool,
) -> Vec<(&'e AcceptedEvent, EventToStore)> {
    let format = entry.topic.input_schema.stored_format();
    events
        .iter()
        .filter_map(|accepted| {
            let matched: Vec<_> = entry
                .subscriptions
                .iter()
                .filter(|s| s.matches(&accepted.routing(), now))
                .collect();
            let event_key = uuid::Uuid::new_v4().simple().to_string();
            let deliveries: Vec<Delivery> = matched
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    Delivery::new(
                        delivery_id(&event_key, i, matched.len()),
                        event_key.clone(),
                        entry.topic.name.key(),
                        s.name.key(),
                        now,
                    )
                    .with_format(format)
                    .matched_at(version)
                    .for_event(accepted.id())
                    .with_data_version(accepted.data_version().map(str::to_owned))
                    .in_trace(accepted.trace().cloned())
                    .in_line(
                        s.ordering
                            .as_ref()
                            .filter(|_| s.is_push())
                            .map(|order| order.key_of(&accepted.routing()).line_id().0),
                    )
                })
                .collect();
            (archived || !deliveries.is_empty()).then(|| {
                let stored = EventToStore {
                    event_key,
                    body: accepted.json.clone(),
                    deliveries,
                };
                (accepted, stored)
            })
        })
        .collect()
}
