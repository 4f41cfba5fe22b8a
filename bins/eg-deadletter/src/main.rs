//! eg-deadletter: writes dead-letter records to their destination after the batching
//! delay, acknowledging them only once the file is written and fsynced. Records whose
//! destination stays unavailable past `give_up_after` are dropped and counted.

mod directory;
mod worker;

/// mimalloc instead of the system allocator: allocation was a fifth of the sender's CPU
/// under glibc's malloc (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let process = eg_runtime::startup::start("eg-deadletter").await?;
    let s = process.settings.clone();
    let ops = eg_runtime::ops::router(process.store.clone(), process.metrics.clone());
    let (listen, shutdown) = (s.deadletter.listen.clone(), process.shutdown.clone());
    let ops = tokio::spawn(async move { eg_runtime::ops::serve(&listen, ops, shutdown).await });
    tracing::info!(dir = %s.deadletter.dir.display(), delay = ?s.deadletter.delay, "writing dead-letter records");
    let worker = worker::Worker::new(process.store.clone(), process.clock.clone(), &s.deadletter);
    worker.run(process.shutdown.clone()).await;
    let _ = ops.await;
    tracing::info!("stopped");
    Ok(())
}
