//! Publishing a partition's queue depths as gauges (ready, in flight, retry, paused,
//! dead-letter backlog, waiting in ordering lines, the last also per ordered
//! subscription). They are shared state in Redis, so every scheduler copy reports the
//! same values.

use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_store::{Partition, Store};
use std::collections::HashSet;
use std::time::Duration;

/// How often the depths are read: two pipelined reads per partition are cheap, and
/// 5 s is finer than a Prometheus scrape (commonly every 15 s or more), so every
/// scrape sees a value at most a few seconds old.
const DEPTH_INTERVAL: Duration = Duration::from_secs(5);

pub async fn depth_loop(store: Store, partition: Partition, shutdown: Shutdown) {
    let mut tick = tokio::time::interval(DEPTH_INTERVAL);
    let label = partition.index.to_string();
    let mut waiting_shown = HashSet::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.requested() => return,
        }
        match store.depths(&partition).await {
            Ok(d) => {
                metrics::gauge!(m::QUEUE_READY_DEPTH, "partition" => label.clone()).set(d.ready as f64);
                metrics::gauge!(m::QUEUE_IN_FLIGHT_DEPTH, "partition" => label.clone()).set(d.in_flight as f64);
                metrics::gauge!(m::QUEUE_RETRY_DEPTH, "partition" => label.clone()).set(d.retry as f64);
                metrics::gauge!(m::QUEUE_PAUSED_DEPTH, "partition" => label.clone()).set(d.paused as f64);
                metrics::gauge!(m::DEAD_LETTER_BACKLOG_DEPTH, "partition" => label.clone())
                    .set(d.deadletter_backlog as f64);
                metrics::gauge!(m::QUEUE_ORDERED_WAITING_DEPTH, "partition" => label.clone())
                    .set(d.waiting_in_lines as f64);
            }
            Err(e) => tracing::warn!(error = %e, partition = partition.index, "cannot read queue depths"),
        }
        waiting_per_subscription(&store, &partition, &mut waiting_shown).await;
    }
}

/// `QueueOrderedWaitingSubscriptionDepth` of the subscriptions with deliveries waiting in
/// this partition's lines; one that had some and has none now is set to 0 (`shown`
/// remembers which), so a gauge never sticks at its last count.
async fn waiting_per_subscription(store: &Store, partition: &Partition, shown: &mut HashSet<String>) {
    let waiting = match store.waiting_in_lines_of(partition).await {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, partition = partition.index, "cannot read the deliveries waiting in lines");
            return;
        }
    };
    let gone: Vec<String> = shown.iter().filter(|s| !waiting.contains_key(*s)).cloned().collect();
    let now = waiting.iter().map(|(s, n)| (s.clone(), *n));
    for (subscription, n) in now.chain(gone.into_iter().map(|s| (s, 0))) {
        let (topic, name) = subscription.split_once('/').unwrap_or((&subscription, ""));
        metrics::gauge!(m::QUEUE_ORDERED_WAITING_SUBSCRIPTION_DEPTH, "topic" => topic.to_owned(), "subscription" => name.to_owned())
            .set(n as f64);
    }
    *shown = waiting.into_keys().collect();
}
