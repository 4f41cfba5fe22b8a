//! Pull delivery's upkeep (queue-mode subscriptions), per partition, every pass, for
//! each queue in the partition's queues index:
//!
//! - **promote** released-with-delay events that are due back into their queue
//!   (`promote.lua`), ringing the partition's signal so waiting receivers look;
//! - **sweep** locks that expired on an event's last allowed delivery, or past its
//!   time-to-live, and never-received events past their time-to-live: dead-lettered (`MaxDeliveryCountExceeded`, `TimeToLiveExceeded`) or
//!   dropped without a destination, so an abandoned subscription does not keep them
//!   forever and dead-letter timing does not wait for someone to receive. The settle
//!   checks each lock is still expired with the counter read, so a receiver that takes
//!   it meanwhile wins and nothing is ended twice;
//! - **drop** the queues of deleted subscriptions (their events counted as dropped,
//!   `SubscriptionDeleted`);
//! - **gauges** per subscription: available, locked, delayed, oldest unacknowledged age.
//!
//! Every change is one script on one partition: any number of scheduler copies share it.

use eg_core::DeadLetterReason;
use eg_core::fate::DropReason;
use eg_core::pull::on_sweep;
use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_runtime::pull_tally::Tally;
use eg_store::{
    CatalogCache, CatalogSnapshot, Clock, LockCheck, Partition, QueueDepth, Retention, Settle, Settlement, Store,
    StoreError,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub async fn queues_loop(
    store: Store,
    catalog: Arc<CatalogCache>,
    clock: Clock,
    retention: Retention,
    every: Duration,
    batch: usize,
    shutdown: Shutdown,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.requested() => return,
        }
        let mut depths: HashMap<String, QueueDepth> = HashMap::new();
        for partition in store.keys().all_partitions() {
            if let Err(error) = pass(&store, &catalog, &clock, &retention, &partition, batch, &mut depths).await {
                tracing::warn!(%error, partition = partition.index, "pull queue upkeep failed; next pass retries");
            }
        }
        publish_gauges(&clock, depths);
    }
}

/// Sets each subscription's gauges from its depths summed over the partitions.
fn publish_gauges(clock: &Clock, depths: HashMap<String, QueueDepth>) {
    for (key, depth) in depths {
        let Some((topic, name)) = key.split_once('/') else {
            continue;
        };
        let labels = [("topic", topic.to_owned()), ("subscription", name.to_owned())];
        metrics::gauge!(m::QUEUE_AVAILABLE_DEPTH, &labels).set(depth.available as f64);
        metrics::gauge!(m::QUEUE_LOCKED_DEPTH, &labels).set(depth.locked as f64);
        metrics::gauge!(m::QUEUE_DELAYED_DEPTH, &labels).set(depth.delayed as f64);
        let age = depth
            .oldest_ms
            .map_or(0.0, |ms| (clock.now().0 - ms).max(0) as f64 / 1000.0);
        metrics::gauge!(m::QUEUE_OLDEST_UNACKNOWLEDGED_SECONDS, &labels).set(age);
    }
}

#[allow(clippy::too_many_arguments)]
async fn pass(
    store: &Store,
    catalog: &CatalogCache,
    clock: &Clock,
    retention: &Retention,
    partition: &Partition,
    batch: usize,
    depths: &mut HashMap<String, QueueDepth>,
) -> Result<(), StoreError> {
    let mut snapshot = catalog.snapshot();
    for key in store.queue_subscriptions(partition).await? {
        let Some((topic, name)) = key.split_once('/') else {
            continue;
        };
        let find = |s: &CatalogSnapshot| {
            s.topic(topic)
                .and_then(|e| e.subscriptions.iter().find(|x| x.name.key() == name))
                .cloned()
        };
        let mut found = find(&snapshot);
        if found.is_none() {
            // Created a moment ago, after this copy's catalog? Only the current catalog
            // may say a queue's subscription is gone.
            snapshot = catalog.refresh().await?;
            found = find(&snapshot);
        }
        let Some(sub) = found else {
            drop_deleted(store, partition, &key, batch).await?;
            continue;
        };
        let Some(lock) = sub.receive_lock() else {
            continue;
        };
        while store.promote_queue(partition, &key, batch).await?.moved >= batch {}
        sweep(store, clock, retention, partition, &key, &sub, lock, batch).await?;
        end_unread_past_ttl(store, clock, retention, partition, &key, &sub, lock, batch).await?;
        let depth = store.queue_depth(partition, &key, lock).await?;
        let total = depths.entry(key.clone()).or_default();
        total.available += depth.available;
        total.locked += depth.locked;
        total.delayed += depth.delayed;
        total.oldest_ms = match (total.oldest_ms, depth.oldest_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(())
}

/// Removes the queue of a deleted subscription, its events counted as dropped with
/// `SubscriptionDeleted` (as the senders count push deliveries of deleted subscriptions).
async fn drop_deleted(store: &Store, partition: &Partition, key: &str, batch: usize) -> Result<(), StoreError> {
    loop {
        let removed = store.drop_queue(partition, key, batch).await?;
        if removed > 0 {
            tracing::info!(subscription = %key, removed, "dropped queued events of a deleted subscription");
            let (topic, subscription) = key.split_once('/').unwrap_or((key, ""));
            metrics::counter!(m::DROPPED_EVENT_COUNT, "topic" => topic.to_owned(), "subscription" => subscription.to_owned(), "reason" => DropReason::SubscriptionDeleted.as_str())
                .increment(removed as u64);
        }
        if removed == 0 {
            return Ok(());
        }
    }
}

/// Ends never-received events past their time-to-live at the head of the queue (the
/// queue is in publish order, so the scan stops at the first one still alive). They are
/// locked first, so no receiver gets them meanwhile; any that turn out alive after all
/// (a receiver took the expired ones first) go back uncharged.
#[allow(clippy::too_many_arguments)]
async fn end_unread_past_ttl(
    store: &Store,
    clock: &Clock,
    retention: &Retention,
    partition: &Partition,
    key: &str,
    sub: &eg_core::Subscription,
    lock: Duration,
    batch: usize,
) -> Result<(), StoreError> {
    let now = clock.now();
    let past_ttl = |d: &eg_core::Delivery| on_sweep(0, false, d.published_at, &sub.retry_policy, now).is_some();
    let head = store.unread_head(partition, key, batch).await?;
    let expired = head.iter().take_while(|(_, d)| past_ttl(d)).count();
    if expired == 0 {
        return Ok(());
    }
    let locked = store.lock_unread(partition, key, expired).await?;
    let items: Vec<Settle> = locked
        .into_iter()
        .map(|e| {
            let settlement = if past_ttl(&e.delivery) {
                tracing::info!(subscription = %key, event = %e.delivery.event_id, "ending a queued event past its time-to-live");
                eg_store::pull::ending(sub, &e.delivery, e.delivery.attempts, DeadLetterReason::TimeToLiveExceeded, now)
            } else {
                Settlement::Requeue {
                    delivery: e.delivery.clone(),
                }
            };
            Settle {
                entry_id: e.entry_id,
                delivery: e.delivery,
                settlement,
                history: None,
                carries_body: false,
                shared: None,
            }
        })
        .collect();
    let counters = vec![1; items.len()];
    let results = store
        .settle_queue(partition, key, &items, &counters, lock, LockCheck::Held, retention)
        .await?;
    for (took_effect, item) in results.into_iter().zip(&items) {
        if took_effect && !matches!(item.settlement, Settlement::Requeue { .. }) {
            Tally::ended(sub, DeadLetterReason::TimeToLiveExceeded).record(key);
        } else if !took_effect {
            tracing::debug!(subscription = %key, entry = %item.entry_id, "a queued event changed hands during the sweep");
        }
    }
    Ok(())
}

/// Ends expired locks whose event may not be delivered again.
#[allow(clippy::too_many_arguments)]
async fn sweep(
    store: &Store,
    clock: &Clock,
    retention: &Retention,
    partition: &Partition,
    key: &str,
    sub: &eg_core::Subscription,
    lock: Duration,
    batch: usize,
) -> Result<(), StoreError> {
    let expired = store.expired_locks(partition, key, lock, batch).await?;
    if expired.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = expired.iter().map(|(id, _)| id.clone()).collect();
    let deliveries = store.queue_entries(partition, key, &ids).await?;
    let now = clock.now();
    // Per event ended: its settle, its lock's counter, and the reason to count.
    let mut items = Vec::new();
    let mut counters = Vec::new();
    let mut reasons = Vec::new();
    for ((id, counter), delivery) in expired.into_iter().zip(deliveries) {
        let Some(delivery) = delivery else { continue };
        let count = delivery.attempts + counter;
        if let Some(reason) = on_sweep(count, true, delivery.published_at, &sub.retry_policy, now) {
            let settlement = eg_store::pull::ending(sub, &delivery, count, reason, now);
            tracing::info!(subscription = %key, event = %delivery.event_id, %reason, "ending a queued event whose lock expired");
            items.push(Settle {
                entry_id: id,
                delivery,
                settlement,
                history: None,
                carries_body: false,
                shared: None,
            });
            counters.push(counter);
            reasons.push(reason);
        }
    }
    let results = store
        .settle_queue(partition, key, &items, &counters, lock, LockCheck::Expired, retention)
        .await?;
    for (took_effect, reason) in results.into_iter().zip(reasons) {
        if took_effect {
            Tally::ended(sub, reason).record(key);
        }
    }
    Ok(())
}
