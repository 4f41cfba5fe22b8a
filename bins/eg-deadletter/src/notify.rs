//! Announcing each dead-letter object this worker writes, on the notify topic
//! (`EG__DEADLETTER__NOTIFY_TOPIC`; see `eg_runtime::dead_letter_notice` and
//! `eg_core::storage_event` for the event). The worker calls
//! [`Notifier::object_written`] after the store confirmed an object and before its
//! records leave Redis: an error keeps the records, which are written and announced
//! again later, so every object is announced at least once.

use eg_core::storage_event;
use eg_runtime::dead_letter_notice::{self, Announced, NotifyError};
use eg_runtime::startup::{Process, until_ready};
use std::sync::Arc;

pub use crate::written::WrittenObject;

/// Announces written objects, or does nothing when no notify topic is configured.
pub struct Notifier {
    announcer: Option<dead_letter_notice::Notifier>,
}

impl Notifier {
    /// Off when `deadletter.notify_topic` is empty. Otherwise loads the catalog (kept
    /// fresh until shutdown) and creates the notify topic if it is missing, waiting for
    /// Redis like the rest of start-up.
    pub async fn start(process: &Process) -> anyhow::Result<Self> {
        let Some(topic) = process
            .settings
            .deadletter
            .notify_topic_name()
            .map_err(anyhow::Error::msg)?
        else {
            return Ok(Self { announcer: None });
        };
        let cache = Arc::new(process.load_catalog().await?);
        process.keep_catalog_fresh(cache.clone());
        let announcer = until_ready("create the dead-letter notify topic", &process.shutdown, || {
            dead_letter_notice::Notifier::start(
                process.store.clone(),
                cache.clone(),
                process.clock.clone(),
                topic.clone(),
            )
        })
        .await?;
        tracing::info!(topic = %topic, "announcing dead-letter objects");
        Ok(Self {
            announcer: Some(announcer),
        })
    }

    /// Announces nothing (tests).
    #[cfg(test)]
    pub fn off() -> Self {
        Self { announcer: None }
    }

    /// Announces `written`; an error means it was not, and its records must stay.
    pub async fn object_written(&self, written: &WrittenObject) -> Result<(), NotifyError> {
        let Some(announcer) = &self.announcer else {
            return Ok(());
        };
        let object = storage_event::WrittenObject {
            store: &written.store,
            account_id: None, // read from the subscription by the announcer
            container: &written.container,
            path: &written.path,
            url: &written.url,
            content_length: written.content_length,
            etag: written.etag.as_deref(),
            records: written.records,
            topic: &written.topic,
            subscription: &written.subscription,
        };
        match announcer.announce(&object).await {
            Ok(Announced::Stored { deliveries }) => {
                tracing::debug!(path = %written.path, deliveries, "dead-letter object announced");
                Ok(())
            }
            Ok(Announced::Skipped) => Ok(()),
            Err(e) => {
                tracing::warn!(error = %e, topic = %written.topic, subscription = %written.subscription, store = %written.store.label(), "cannot announce a dead-letter object; its records are kept and tried again");
                Err(e)
            }
        }
    }
}
