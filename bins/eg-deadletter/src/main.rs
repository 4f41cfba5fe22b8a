//! eg-deadletter: writes dead-letter records to their destination after the batching
//! delay — the local directory, an Azure blob container or an S3 bucket, all through
//! `object_store` — and finishes them only once the store confirmed the object. Records
//! whose destination stays unavailable past `give_up_after` are dropped and counted.

#[cfg(test)]
mod archive_once_tests;
mod archive_sweep;
mod archive_writer;
mod failures;
mod notify;
mod object_name;
#[cfg(test)]
mod one_object_tests;
mod replayer;
mod store_said;
mod stores;
#[cfg(test)]
mod test_support;
mod worker;
mod write_trace;
mod written;

use anyhow::Context;
use eg_runtime::Startup;

eg_runtime::use_mimalloc!();

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let process = Startup::tier("eg-deadletter", |s| s.deadletter.listen.clone())
        .start()
        .await?;
    let s = &process.settings.deadletter;
    let storage = &process.settings.storage;
    let stores = stores::Stores::new(
        s.dir.clone(),
        storage
            .azure_accounts()
            .map_err(anyhow::Error::msg)
            .context("reading [storage] accounts")?,
        storage.s3.clone(),
        worker::write_window(s.retry_interval),
    );
    tracing::info!(
        dir = %s.dir.display(),
        delay = ?s.delay,
        azure_accounts = storage.accounts.len(),
        s3_connections = storage.s3.len(),
        "writing dead-letter records"
    );
    let notifier = std::sync::Arc::new(notify::Notifier::start(&process).await?);
    // The topic archive's writer (archive.md): the same stores, its own loop and group.
    let archive_cache = std::sync::Arc::new(process.load_catalog().await?);
    process.keep_catalog_fresh(archive_cache.clone());
    let archive_stores = std::sync::Arc::new(stores::Stores::new(
        s.dir.clone(),
        storage.azure_accounts().map_err(anyhow::Error::msg)?,
        storage.s3.clone(),
        worker::write_window(s.retry_interval),
    ));
    let archive = archive_writer::ArchiveWriter::new(
        process.store.clone(),
        process.clock.clone(),
        archive_cache.clone(),
        archive_stores.clone(),
        process.consumer.clone(),
        s.interval,
        s.retry_interval,
    );
    // Replay jobs read the archive through the same stores (archive.md, "Replay").
    let replayer = replayer::Replayer {
        store: process.store.clone(),
        clock: process.clock.clone(),
        cache: archive_cache.clone(),
        stores: archive_stores.clone(),
        consumer: process.consumer.clone(),
    };
    let sweep = archive_sweep::ArchiveSweep {
        store: process.store.clone(),
        clock: process.clock.clone(),
        cache: archive_cache,
        stores: archive_stores,
        consumer: process.consumer.clone(),
        interval: process.settings.archive.sweep_interval,
    };
    let archive_loop = {
        let shutdown = process.shutdown.clone();
        tokio::spawn(async move { archive.run(shutdown).await })
    };
    let sweep_loop = {
        let shutdown = process.shutdown.clone();
        tokio::spawn(async move { sweep.run(shutdown).await })
    };
    let replay_loop = {
        let shutdown = process.shutdown.clone();
        tokio::spawn(async move { replayer.run(shutdown).await })
    };
    let worker = worker::Worker::new(
        process.store.clone(),
        process.clock.clone(),
        s,
        process.consumer.clone(),
        stores,
        notifier,
    );
    worker.run(process.shutdown.clone()).await;
    let _ = archive_loop.await;
    let _ = sweep_loop.await;
    let _ = replay_loop.await;
    process.finish().await
}
