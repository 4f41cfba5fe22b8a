//! eg-deadletter: writes dead-letter records to their destination after the batching
//! delay, acknowledging them only once the file is written and fsynced. Records whose
//! destination stays unavailable past `give_up_after` are dropped and counted.

mod directory;
mod worker;

use eg_runtime::Startup;

eg_runtime::use_mimalloc!();

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let process = Startup::tier("eg-deadletter", |s| s.deadletter.listen.clone())
        .start()
        .await?;
    let s = &process.settings.deadletter;
    tracing::info!(dir = %s.dir.display(), delay = ?s.delay, "writing dead-letter records");
    let worker = worker::Worker::new(
        process.store.clone(),
        process.clock.clone(),
        s,
        process.consumer.clone(),
    );
    worker.run(process.shutdown.clone()).await;
    process.finish().await
}
