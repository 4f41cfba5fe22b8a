//! eg-scheduler: moves due retries into the ready streams, takes back deliveries whose
//! holder vanished (after the visibility timeout), hands back deliveries of resumed
//! (or expiring) paused subscriptions and publishes queue depths. Every
//! step is an atomic script, so any number of copies run with no leader.

mod paused;
mod probation;
mod reclaim;

use eg_runtime::metrics as m;
use eg_runtime::{Process, Shutdown, Startup};
use eg_store::{Partition, Store};
use std::time::Duration;
use tokio::task::JoinHandle;

eg_runtime::use_mimalloc!();

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let process = Startup::tier("eg-scheduler", |s| s.scheduler.listen.clone())
        .start()
        .await?;
    let mut tasks: Vec<_> = process
        .store
        .keys()
        .all_partitions()
        .flat_map(|p| partition_loops(&process, p))
        .collect();
    let s = &process.settings.scheduler;
    let cache = process.load_catalog().await?;
    tasks.push(tokio::spawn(paused::unpark_loop(
        process.store.clone(),
        cache,
        process.clock.clone(),
        s.interval,
        s.batch,
        process.shutdown.clone(),
    )));
    tasks.push(tokio::spawn(probation::probation_loop(
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

/// The loops each partition gets: due retries promoted, deliveries of vanished holders
/// reclaimed, queue depths published.
fn partition_loops(process: &Process, partition: Partition) -> [JoinHandle<()>; 3] {
    let s = &process.settings;
    [
        tokio::spawn(promote_loop(
            process.store.clone(),
            partition.clone(),
            s.scheduler.interval,
            s.scheduler.batch,
            process.shutdown.clone(),
        )),
        tokio::spawn(reclaim::reclaim_loop(
            process.store.clone(),
            process.clock.clone(),
            partition.clone(),
            process.consumer.clone(),
            s.delivery.visibility_timeout,
            s.scheduler.reclaim_interval,
            process.shutdown.clone(),
        )),
        tokio::spawn(depth_loop(process.store.clone(), partition, process.shutdown.clone())),
    ]
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
