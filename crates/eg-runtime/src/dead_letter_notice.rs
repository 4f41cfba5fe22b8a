//! Announcing each dead-letter object eg writes (behaviour.md#dead-lettering): a
//! `Microsoft.Storage.BlobCreated` event (`eg_core::storage_event`) published to the
//! notify topic (`EG__DEADLETTER__NOTIFY_TOPIC`) through [`crate::accept`], the same
//! match-and-store step a user's publish takes, so the topic's subscriptions get it with
//! their filters, retries and delivery schema.
//!
//! eg-deadletter announces an object after the store confirmed it and before its records
//! leave Redis: when the announcement fails, the records stay and are written and
//! announced again later. An object is so announced at least once, never lost, and a
//! repeat carries the same event id.
//!
//! The topic is an ordinary catalog topic (`egctl topics list` shows it). The notifier
//! creates it, in Event Grid schema, when it is missing at start-up or later (deleted by
//! an operator); one that exists is used as it is.

use crate::accept::{AcceptError, Acceptor, store_events};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use eg_core::storage_event::{self, NoticeError, WrittenObject};
use eg_core::{Subscription, TopicName};
use eg_store::{Catalog, CatalogCache, CatalogSnapshot, Clock, Store, StoreError};
use std::convert::Infallible;
use std::sync::Arc;

/// Publishes dead-letter notifications to the notify topic.
pub struct Notifier {
    store: Store,
    catalog: Catalog,
    cache: Arc<CatalogCache>,
    clock: Clock,
    topic: TopicName,
}

/// Why an object could not be announced (its records are kept and tried again).
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("cannot announce the dead-letter object on topic {topic:?}: {source}")]
    Store { topic: String, source: StoreError },
    #[error("cannot announce the dead-letter object: {0}")]
    Notice(#[from] NoticeError),
    #[error(
        "cannot announce the dead-letter object: topic {0:?} was deleted twice while the notification was stored; it is tried again"
    )]
    TopicGone(String),
    #[error(
        "cannot announce the dead-letter object: the subscriptions of topic {0:?} are changing too fast; it is tried again"
    )]
    CatalogChurn(String),
    #[error(
        "cannot announce the dead-letter object: topic {0:?} is archived and its archive backlog is full; it is tried again"
    )]
    ArchiveFull(String),
}

/// What became of one announcement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announced {
    /// Stored with this many deliveries (0: no subscription of the topic wanted it).
    Stored { deliveries: usize },
    /// Not announced: the object holds dead letters of the notify topic itself.
    Skipped,
}

impl Notifier {
    /// A notifier for `topic`, which is created now if it is missing. `cache` is the
    /// process's catalog copy, kept fresh by its owner.
    pub async fn start(
        store: Store,
        cache: Arc<CatalogCache>,
        clock: Clock,
        topic: TopicName,
    ) -> Result<Self, StoreError> {
        let notifier = Self {
            catalog: Catalog::new(store.clone()),
            store,
            cache,
            clock,
            topic,
        };
        notifier.ensure_topic().await?;
        Ok(notifier)
    }

    /// The notify topic.
    pub fn topic(&self) -> &TopicName {
        &self.topic
    }

    /// Announces `object`, confirmed written just now. When the subscription that
    /// dead-lettered named its storage account by resource id (`StorageBlob`), that id
    /// is the event's `topic`, as Azure writes it; `object.account_id` need not say.
    pub async fn announce(&self, object: &WrittenObject<'_>) -> Result<Announced, NotifyError> {
        if !storage_event::is_announced(object.topic, &self.topic) {
            tracing::warn!(
                topic = object.topic,
                subscription = object.subscription,
                "not announcing dead letters of the notify topic's own subscription (it should not dead-letter: a loop)"
            );
            return Ok(Announced::Skipped);
        }
        // A second round when the topic was deleted under the first: it is created again.
        for _ in 0..2 {
            match self.store_notice(object).await {
                Err(NotifyError::TopicGone(_)) => continue,
                result => return result,
            }
        }
        Err(NotifyError::TopicGone(self.topic.as_str().to_owned()))
    }

    /// Builds the event against the current catalog and stores it.
    async fn store_notice(&self, object: &WrittenObject<'_>) -> Result<Announced, NotifyError> {
        let mut snapshot = self.snapshot_with_topic().await?;
        if object.account_id.is_none() && subscription_of(&snapshot, object).is_none() {
            // A subscription created a moment ago may not be in this copy of the catalog
            // yet: one fresh read, so the event names the account it named.
            let fresh = self.cache.refresh().await.map_err(|e| self.store_error(e))?;
            if fresh.topic(&self.topic.key()).is_some() {
                snapshot = fresh;
            }
        }
        let object = WrittenObject {
            account_id: object.account_id.or_else(|| account_id(&snapshot, object)),
            ..*object
        };
        let event = storage_event::blob_created(&object, self.clock.now());
        let entry = snapshot
            .topic(&self.topic.key())
            .ok_or_else(|| NotifyError::TopicGone(self.topic.as_str().to_owned()))?;
        let stored = storage_event::stored_form(&entry.topic, &event)?;
        let acceptor = Acceptor {
            store: &self.store,
            cache: &self.cache,
            clock: &self.clock,
            // The notify topic is eg's own; archived with the default bound if an operator archives it.
            archive: crate::settings::ArchiveSection::default(),
        };
        let nothing_to_recheck = |_: &CatalogSnapshot| Ok::<(), Infallible>(());
        match store_events(acceptor, &self.topic, snapshot, &[stored], nothing_to_recheck).await {
            Ok(accepted) => {
                tracing::debug!(id = %event.id, subject = %event.subject, deliveries = accepted.deliveries, "dead-letter object announced");
                Ok(Announced::Stored {
                    deliveries: accepted.deliveries,
                })
            }
            Err(AcceptError::Store(source)) => Err(self.store_error(source)),
            Err(AcceptError::NoTopic(name)) => Err(NotifyError::TopicGone(name)),
            Err(AcceptError::CatalogChurn) => Err(NotifyError::CatalogChurn(self.topic.as_str().to_owned())),
            Err(AcceptError::ArchiveFull(_)) => Err(NotifyError::ArchiveFull(self.topic.as_str().to_owned())),
            Err(AcceptError::Refused(never)) => match never {},
        }
    }

    /// The catalog copy, holding the notify topic: reloaded if this copy lacks it,
    /// and the topic created again if an operator deleted it.
    async fn snapshot_with_topic(&self) -> Result<Arc<CatalogSnapshot>, NotifyError> {
        let key = self.topic.key();
        let snapshot = self.cache.snapshot();
        if snapshot.topic(&key).is_some() {
            return Ok(snapshot);
        }
        let snapshot = self.cache.refresh().await.map_err(|e| self.store_error(e))?;
        if snapshot.topic(&key).is_some() {
            return Ok(snapshot);
        }
        self.ensure_topic().await.map_err(|e| self.store_error(e))?;
        self.cache.reload().await.map_err(|e| self.store_error(e))
    }

    /// Creates the notify topic (Event Grid schema) unless a topic of its name exists.
    async fn ensure_topic(&self) -> Result<(), StoreError> {
        let topic = storage_event::notify_topic(self.topic.clone());
        if self.catalog.create_topic(&topic, [new_key(), new_key()]).await? {
            tracing::info!(topic = %self.topic, "created the dead-letter notify topic");
        }
        Ok(())
    }

    fn store_error(&self, source: StoreError) -> NotifyError {
        NotifyError::Store {
            topic: self.topic.as_str().to_owned(),
            source,
        }
    }
}

/// The storage account resource id the dead-lettering subscription names, if it
/// still names the store the object went to.
fn account_id<'a>(snapshot: &'a CatalogSnapshot, object: &WrittenObject<'_>) -> Option<&'a str> {
    let sub = subscription_of(snapshot, object)?;
    let destination = sub.dead_letter.as_ref().filter(|d| d.store == *object.store)?;
    destination.resource_id.as_deref()
}

/// The subscription that dead-lettered `object`, as `snapshot` has it.
fn subscription_of<'a>(snapshot: &'a CatalogSnapshot, object: &WrittenObject<'_>) -> Option<&'a Subscription> {
    snapshot.subscription(
        &object.topic.to_ascii_lowercase(),
        &object.subscription.to_ascii_lowercase(),
    )
}

/// An access key for a topic eg creates (the management API's form: 32 random bytes,
/// base64). Nobody is given it: only eg publishes to the notify topic.
fn new_key() -> String {
    BASE64.encode(rand::random::<[u8; 32]>())
}
