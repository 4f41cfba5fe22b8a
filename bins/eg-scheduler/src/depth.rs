//! Publishing a partition's queue depths as gauges (ready, in flight, retry, paused,
//! dead-letter backlog, waiting in ordering lines). They are shared state in Redis, so every scheduler copy
//! reports the same values.

use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_store::{Partition, Store};
use std::time::Duration;

/// How often the depths are read: two pipelined reads per partition are cheap, and
/// 5 s is finer than a Prometheus scrape (commonly every 15 s or more), so every
/// scrape sees a value at most a few seconds old.
const DEPTH_INTERVAL: Duration = Duration::from_secs(5);

pub async fn depth_loop(store: Store, partition: Partition, shutdown: Shutdown) {
    let mut tick = tokio::time::interval(DEPTH_INTERVAL);
    let label = partition.index.to_string();
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
    }
}
