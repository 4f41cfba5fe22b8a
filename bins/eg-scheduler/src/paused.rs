//! Hands set-aside deliveries of paused subscriptions back to the senders: all of them
//! once the subscription is resumed or deleted (the ingress does this right after a
//! resume; this loop is the safety net if it stopped half-way, or if a sender with an
//! older catalog set more aside after the resume), and, while it stays paused, those
//! whose time-to-live has ended, so they are dead-lettered on time.

use eg_runtime::Shutdown;
use eg_store::{CatalogCache, Clock, Partition, Store, StoreError};
use std::sync::Arc;
use std::time::Duration;

pub async fn unpark_loop(
    store: Store,
    cache: Arc<CatalogCache>,
    clock: Clock,
    every: Duration,
    batch: usize,
    shutdown: Shutdown,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.requested() => return,
        }
        for partition in store.keys().all_partitions() {
            if let Err(e) = unpark_partition(&store, &cache, &clock, &partition, batch).await {
                tracing::warn!(error = %e, partition = partition.index, "cannot hand back paused deliveries");
            }
        }
    }
}

async fn unpark_partition(
    store: &Store,
    cache: &CatalogCache,
    clock: &Clock,
    partition: &Partition,
    batch: usize,
) -> Result<(), StoreError> {
    let subscriptions = store.paused_subscriptions(partition).await?;
    if subscriptions.is_empty() {
        return Ok(());
    }
    // Handing deliveries back is a decision: it checks the newest catalog, not the
    // copy kept fresh in the background (one cheap version read when nothing moved).
    let snapshot = cache.refresh().await?;
    for key in subscriptions {
        let still_paused = key
            .split_once('/')
            .and_then(|(topic, sub)| snapshot.subscription(topic, sub))
            .is_some_and(|s| s.paused);
        let expired_by = still_paused.then(|| clock.now());
        let moved = store.unpark_all(partition, &key, expired_by, batch).await?;
        if moved > 0 {
            tracing::info!(subscription = %key, moved, resumed = !still_paused, "handed paused deliveries back");
        }
    }
    Ok(())
}
