//! The topic archive's retention (archive.md): every `EG__ARCHIVE__SWEEP_INTERVAL`, one
//! eg-deadletter copy — the one that takes a short Redis lease, so copies don't all list
//! the same stores — lists each archived topic's objects and deletes those whose minute
//! is older than the topic's `retentionDays`.

use crate::object_name::{key_prefix, under_key_prefix};
use crate::stores::{Destination, Stores};
use eg_core::topic::{ARCHIVE_ROOT, archive_expired, archive_object_minute};
use eg_runtime::Shutdown;
use eg_store::{CatalogCache, Clock, Store};
use futures_util::StreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use std::sync::Arc;
use std::time::Duration;

pub struct ArchiveSweep {
    pub store: Store,
    pub clock: Clock,
    pub cache: Arc<CatalogCache>,
    pub stores: Arc<Stores>,
    pub consumer: String,
    pub interval: Duration,
}

impl ArchiveSweep {
    pub async fn run(&self, shutdown: Shutdown) {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.requested() => return,
            }
            // The lease outlives a sweep's interval: another copy sweeps only once it lapsed.
            match self.store.take_archive_sweep_lease(&self.consumer, self.interval).await {
                Ok(true) => self.sweep().await,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "cannot take the archive sweep lease"),
            }
        }
    }

    async fn sweep(&self) {
        let now = self.clock.now();
        let snapshot = self.cache.snapshot();
        for entry in snapshot.topics() {
            let Some(archive) = &entry.topic.archive else { continue };
            let topic = entry.topic.name.key();
            let destination = Destination::from(&archive.destination);
            let built = match self.stores.get(&destination) {
                Ok(built) => built,
                Err(failure) => {
                    tracing::warn!(topic, problem = %failure.message, "archive sweep: store unavailable");
                    continue;
                }
            };
            // `<prefix>/` or nothing: stripped from listed names before they are read.
            let prefix = under_key_prefix(key_prefix(&destination.store), String::new());
            let folder = ObjectPath::from(format!("{prefix}{ARCHIVE_ROOT}/{topic}"));
            let mut listing = built.store.list(Some(&folder));
            let mut deleted = 0u64;
            while let Some(item) = listing.next().await {
                let meta = match item {
                    Ok(meta) => meta,
                    Err(e) => {
                        tracing::warn!(topic, error = %e, "archive sweep: listing failed");
                        break;
                    }
                };
                let name = meta.location.as_ref();
                let name = name.strip_prefix(prefix.as_str()).unwrap_or(name);
                let expired = archive_object_minute(&topic, name)
                    .is_some_and(|minute| archive_expired(minute, archive.retention_millis(), now));
                if expired {
                    match built.store.delete(&meta.location).await {
                        Ok(()) => deleted += 1,
                        Err(e) => tracing::warn!(topic, error = %e, "archive sweep: delete failed"),
                    }
                }
            }
            if deleted > 0 {
                tracing::info!(topic, deleted, "archive objects past their retention deleted");
            }
        }
    }
}
