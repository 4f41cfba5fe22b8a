//! Publishes each rate-limited subscription's backlog, the deliveries waiting for its
//! `deliveryLimits` rate, as a gauge (docs/rate-limits.md#what-you-see), read from the
//! limit records every sender shares, so every scheduler copy reports the same values.
//! Labelled by topic and subscription, and only for subscriptions with a rate: the
//! series grow with the limited subscriptions, not with senders, reasons or events.

use eg_core::UnixMillis;
use eg_core::throttle::{self, ThrottleId};
use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_store::{CatalogCache, Clock, Store};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// As often as the queue depths: finer than a scrape, one read per limited subscription.
const BACKLOG_INTERVAL: Duration = Duration::from_secs(5);

/// Publishes the gauges every [`BACKLOG_INTERVAL`] for the subscriptions in `cache`.
pub async fn backlog_loop(store: Store, cache: Arc<CatalogCache>, clock: Clock, shutdown: Shutdown) {
    let mut tick = tokio::time::interval(BACKLOG_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shown: BTreeSet<(String, String)> = BTreeSet::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.requested() => return,
        }
        match publish(&store, &cache, clock.now()).await {
            Ok(labels) => {
                // A subscription deleted or no longer limited shows nothing waiting.
                for (topic, sub) in shown.difference(&labels) {
                    metrics::gauge!(m::DELIVERY_THROTTLED_BACKLOG, "topic" => topic.clone(), "subscription" => sub.clone())
                        .set(0.0);
                }
                shown = labels;
            }
            Err(e) => tracing::warn!(error = %e, "cannot read delivery limit records"),
        }
    }
}

async fn publish(
    store: &Store,
    cache: &CatalogCache,
    now: UnixMillis,
) -> Result<BTreeSet<(String, String)>, eg_store::StoreError> {
    let snapshot = cache.snapshot();
    let limited: Vec<_> = snapshot
        .topics
        .values()
        .flat_map(|t| t.subscriptions.iter())
        .filter(|s| s.limits.as_ref().is_some_and(|l| l.interval().is_some()))
        .cloned()
        .collect();
    let ids: Vec<ThrottleId> = limited
        .iter()
        .map(|s| ThrottleId::of(&s.topic.key(), &s.name.key()))
        .collect();
    let records = store.throttle_records(&ids).await?;
    let mut labels = BTreeSet::new();
    for (sub, record) in limited.iter().zip(&records) {
        let Some(limits) = sub.limits.as_ref() else { continue };
        let (topic, name) = (sub.topic.key(), sub.name.key());
        metrics::gauge!(m::DELIVERY_THROTTLED_BACKLOG, "topic" => topic.clone(), "subscription" => name.clone())
            .set(throttle::backlog(record, limits, now) as f64);
        labels.insert((topic, name));
    }
    Ok(labels)
}
