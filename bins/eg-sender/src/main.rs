//! eg-sender: reads ready deliveries from every partition, POSTs them to their
//! webhooks with bounded concurrency, and settles each attempt by the policy of
//! eg-core: done, retry at T, dead-letter, or drop. Run as many copies as load needs.

mod destination;
mod late;
mod probation;
mod reader;
mod settle_queue;
mod steps;
mod store;
mod verdict;
mod webhook;

use std::sync::Arc;

/// mimalloc instead of the system allocator: allocation was a fifth of the sender's CPU
/// under glibc's malloc (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let process = eg_runtime::startup::start("eg-sender").await?;
    let sender = reader::Sender::build(&process).await?;
    eg_runtime::startup::spawn_clock_sync(process.store.clone(), process.clock.clone(), process.shutdown.clone());
    eg_runtime::startup::spawn_catalog_refresh(
        sender.catalog(),
        process.settings.catalog.refresh_interval,
        process.shutdown.clone(),
    );
    let ops = eg_runtime::ops::router(process.store.clone(), process.metrics.clone());
    let (listen, shutdown) = (process.settings.sender.listen.clone(), process.shutdown.clone());
    let ops = tokio::spawn(async move { eg_runtime::ops::serve(&listen, ops, shutdown).await });
    Arc::clone(&sender).run(process.shutdown.clone()).await;
    process.shutdown.trigger();
    let _ = ops.await;
    tracing::info!("stopped");
    Ok(())
}
