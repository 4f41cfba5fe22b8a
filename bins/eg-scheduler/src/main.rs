//! eg-scheduler: moves due retries into the ready streams, takes back deliveries whose
//! holder vanished (after the visibility timeout), hands back deliveries of resumed
//! (or expiring) paused subscriptions and publishes queue depths. Every
//! step is an atomic script, so any number of copies run with no leader.

mod health;
mod paused;
mod reclaim;

use eg_runtime::metrics as m;
use eg_runtime::{Shutdown, Startup};
use eg_store::{Partition, Store};
use std::time::Duration;

eg_runtime::use_mimalloc!();

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let process = Startup::tier("eg-scheduler", |s| s.scheduler.listen.clone())
        .start()
        .await?;
    let s = process.settings.clone();
    let mut tasks = Vec::new();
    for p in process.store.keys().all_partitions() {
        tasks.push(tokio::spawn(promote_loop(
            process.store.clone(),
            p.clone(),
            s.scheduler.interval,
            s.scheduler.batch,
            process.shutdown.clone(),
        )));
        tasks.push(tokio::spawn(reclaim::reclaim_loop(
            process.store.clone(),
            process.clock.clone(),
            p.clone(),
            process.consumer.clone(),
            s.delivery.visibility_timeout,
            s.scheduler.reclaim_interval,
            process.shutdown.clone(),
        )));
        tasks.push(tokio::spawn(depth_loop(
            process.store.clone(),
            p,
            process.shutdown.clone(),
        )));
    }
    let cache = process.load_catalog().await?;
    tasks.push(tokio::spawn(paused::unpark_loop(
        process.store.clone(),
        cache,
        process.clock.clone(),
        s.scheduler.interval,
        s.scheduler.batch,
        process.shutdown.clone(),
    )));
    tasks.push(tokio::spawn(health::health_loop(
        process.store.clone(),
        process.clock.clone(),
        Duration::from_secs(5),
        process.shutdown.clone(),
    )));
    for t in tasks {
        let _ = t.await;
    }
    process.finish().await
}

/// Shortest sleep between passes that did not move a whole batch: retries falling due
/// one by one (a retry storm) are moved in groups, at most this late, instead of one
/// script call per retry.
const MIN_PAUSE: Duration = Duration::from_millis(10);

/// Moves due retries into the ready stream; keeps going while whole batches come back.
/// Between passes it sleeps until the earliest retry left falls due, at most `every`
/// (which also bounds how late it sees a retry written after its last pass) and at least
/// [`MIN_PAUSE`]: a retry fires within ~10 ms of its due time, not up to a whole interval late.
async fn promote_loop(store: Store, partition: Partition, every: Duration, batch: usize, shutdown: Shutdown) {
    let mut pause = every;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.requested() => return,
        }
        pause = every;
        loop {
            match store.promote_retries(&partition, batch).await {
                Ok(promoted) if promoted.moved >= batch => continue,
                Ok(promoted) => {
                    if let Some(next_in) = promoted.next_in {
                        pause = next_in.clamp(MIN_PAUSE, every);
                    }
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, partition = partition.index, "cannot promote due retries");
                    break;
                }
            }
        }
    }
}

async fn depth_loop(store: Store, partition: Partition, shutdown: Shutdown) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
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
            }
            Err(e) => tracing::warn!(error = %e, partition = partition.index, "cannot read queue depths"),
        }
    }
}
