//! Publishes each subscription's endpoint probation state as gauges (behaviour.md#metrics),
//! read from the probation records every sender shares.
//! Labelled by topic and subscription, never by URL (URLs can hold secrets).

use eg_core::UnixMillis;
use eg_core::probation::{EndpointId, ProbationState, state_of};
use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_store::{CatalogCache, Clock, Store};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// How often the gauges are published: half the shortest default probation (10 s, e.g.
/// `Busy`), so every probation shows in at least one pass; not more often, since each
/// pass reads every subscription's probation record.
const PROBATION_GAUGE_INTERVAL: Duration = Duration::from_secs(5);

/// Publishes the gauges every [`PROBATION_GAUGE_INTERVAL`] for the subscriptions in
/// `cache` (the scheduler's shared catalog, kept fresh in the background).
pub async fn probation_loop(store: Store, cache: Arc<CatalogCache>, clock: Clock, shutdown: Shutdown) {
    let mut tick = tokio::time::interval(PROBATION_GAUGE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shown: BTreeSet<(String, String)> = BTreeSet::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.requested() => return,
        }
        match publish_gauges(&store, &cache, clock.now()).await {
            Ok(labels) => {
                // Subscriptions that are gone stop showing probation.
                for (topic, sub) in shown.difference(&labels) {
                    set(topic, sub, ProbationState::Healthy, UnixMillis(0));
                }
                shown = labels;
            }
            Err(e) => tracing::warn!(error = %e, "cannot read probation records"),
        }
    }
}

async fn publish_gauges(
    store: &Store,
    cache: &CatalogCache,
    now: UnixMillis,
) -> Result<BTreeSet<(String, String)>, eg_store::StoreError> {
    let snapshot = cache.snapshot();
    let subs: Vec<_> = snapshot
        .topics
        .values()
        .flat_map(|t| t.subscriptions.iter().cloned())
        .collect();
    // Queue-mode subscriptions have no endpoint: they show as healthy.
    let endpoints: Vec<Option<EndpointId>> = subs.iter().map(|s| s.endpoint_id()).collect();
    let ids: Vec<EndpointId> = endpoints.iter().flatten().cloned().collect();
    let mut records = store.probation_records(&ids).await?.into_iter();
    let mut labels = BTreeSet::new();
    for (sub, endpoint) in subs.iter().zip(&endpoints) {
        let record = endpoint.as_ref().and_then(|_| records.next().flatten());
        let (topic, name) = (sub.topic.key(), sub.name.key());
        set(&topic, &name, state_of(record.as_ref(), now), now);
        labels.insert((topic, name));
    }
    Ok(labels)
}

fn set(topic: &str, subscription: &str, state: ProbationState, now: UnixMillis) {
    let (on, remaining) = match state {
        ProbationState::Healthy => (0.0, 0.0),
        ProbationState::Probing => (1.0, 0.0),
        ProbationState::Probation { until } => (1.0, until.since(now).as_secs_f64()),
    };
    let labels = [("topic", topic.to_owned()), ("subscription", subscription.to_owned())];
    metrics::gauge!(m::ENDPOINT_ON_PROBATION, &labels).set(on);
    metrics::gauge!(m::ENDPOINT_PROBATION_REMAINING_SECONDS, &labels).set(remaining);
}
