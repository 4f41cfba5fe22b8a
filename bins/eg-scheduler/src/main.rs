//! eg-scheduler: moves due retries into the ready streams, takes back deliveries whose
//! holder vanished (after the visibility timeout), hands back deliveries of resumed
//! (or expiring) paused subscriptions and publishes queue depths, endpoint probation
//! gauges and rate-limited subscriptions' backlogs, keeps pull delivery's queues
//! (delayed releases promoted, expired last locks and time-to-lives ended, queue gauges)
//! and sweeps ordering lines whose head Redis lost. Every step is an atomic script, so
//! any number of copies run with no leader.

mod depth;
mod lines;
mod paused;
mod probation;
mod promote;
mod pull_queues;
mod reclaim;
mod throttle_backlog;

use eg_runtime::{Process, Startup};
use eg_store::{CatalogCache, Partition};
use std::sync::Arc;
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
    let catalog = Arc::new(process.load_catalog().await?);
    process.keep_catalog_fresh(catalog.clone());
    tasks.extend(catalog_loops(&process, catalog));
    for t in tasks {
        let _ = t.await;
    }
    process.finish().await
}

/// The loops each partition gets: due retries promoted, deliveries of vanished holders
/// reclaimed, queue depths published, stuck ordering lines swept.
fn partition_loops(process: &Process, partition: Partition) -> [JoinHandle<()>; 4] {
    let s = &process.settings;
    [
        tokio::spawn(promote::promote_loop(
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
        tokio::spawn(lines::sweep_loop(
            process.store.clone(),
            partition.clone(),
            s.scheduler.line_sweep_interval,
            process.shutdown.clone(),
        )),
        tokio::spawn(depth::depth_loop(
            process.store.clone(),
            partition,
            process.shutdown.clone(),
        )),
    ]
}

/// The loops that read the catalog, sharing one copy: paused deliveries handed back
/// (every partition), pull queues kept, endpoint probation and rate-limit backlogs
/// published per subscription.
fn catalog_loops(process: &Process, catalog: Arc<CatalogCache>) -> [JoinHandle<()>; 4] {
    let s = &process.settings.scheduler;
    [
        tokio::spawn(pull_queues::queues_loop(
            process.store.clone(),
            catalog.clone(),
            process.clock.clone(),
            process.settings.retention(),
            s.interval,
            s.batch,
            process.shutdown.clone(),
        )),
        tokio::spawn(paused::unpark_loop(
            process.store.clone(),
            catalog.clone(),
            process.clock.clone(),
            s.interval,
            s.batch,
            process.shutdown.clone(),
        )),
        tokio::spawn(probation::probation_loop(
            process.store.clone(),
            catalog.clone(),
            process.clock.clone(),
            process.shutdown.clone(),
        )),
        tokio::spawn(throttle_backlog::backlog_loop(
            process.store.clone(),
            catalog,
            process.clock.clone(),
            process.shutdown.clone(),
        )),
    ]
}
