//! An in-process copy of the catalog, refreshed when the catalog version moves.
//!
//! Ingress matches publishes against it (the publish script refuses a stale copy);
//! senders and schedulers look subscriptions up in it and see changes within the
//! refresh interval, or at once when they meet a subscription they do not know yet.

use crate::catalog::Catalog;
use crate::error::StoreError;
use eg_core::{Subscription, Topic};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

#[derive(Debug, Clone)]
pub struct TopicEntry {
    pub topic: Topic,
    pub keys: [String; 2],
    /// Shared, so senders can hold one without copying it per delivery.
    pub subscriptions: Vec<Arc<Subscription>>,
}

#[derive(Debug, Clone, Default)]
pub struct CatalogSnapshot {
    pub version: u64,
    /// By topic key.
    pub topics: HashMap<String, TopicEntry>,
    /// The largest `maxEventsPerBatch` of any subscription (1 when none batches): how far
    /// a sender may read ahead of its free slots, since one slot may carry that many.
    pub largest_batch: u32,
}

impl CatalogSnapshot {
    pub(crate) fn from_pairs(
        version: u64,
        topics: Vec<(String, String)>,
        keys: Vec<(String, String)>,
        subs: Vec<(String, String)>,
    ) -> Self {
        let keys: HashMap<String, String> = keys.into_iter().collect();
        let mut by_topic: HashMap<String, TopicEntry> = topics
            .into_iter()
            .filter_map(|(key, raw)| match serde_json::from_str::<Topic>(&raw) {
                Ok(topic) => {
                    let key1 = keys.get(&format!("{key}/key1")).cloned().unwrap_or_default();
                    let key2 = keys.get(&format!("{key}/key2")).cloned().unwrap_or_default();
                    Some((
                        key,
                        TopicEntry {
                            topic,
                            keys: [key1, key2],
                            subscriptions: Vec::new(),
                        },
                    ))
                }
                Err(e) => {
                    tracing::error!(topic = %key, error = %e, "skipping a topic that does not parse");
                    None
                }
            })
            .collect();
        for (field, raw) in subs {
            match serde_json::from_str::<Subscription>(&raw) {
                Ok(sub) => {
                    if let Some(entry) = by_topic.get_mut(&sub.topic.key()) {
                        entry.subscriptions.push(Arc::new(sub));
                    }
                }
                Err(e) => {
                    tracing::error!(subscription = %field, error = %e, "skipping a subscription that does not parse")
                }
            }
        }
        let largest_batch = by_topic
            .values()
            .flat_map(|entry| &entry.subscriptions)
            .map(|sub| sub.batching.max_events_per_batch)
            .max()
            .unwrap_or(1)
            .max(1);
        Self {
            version,
            topics: by_topic,
            largest_batch,
        }
    }

    pub fn topic(&self, topic_key: &str) -> Option<&TopicEntry> {
        self.topics.get(topic_key)
    }

    pub fn subscription(&self, topic_key: &str, subscription_key: &str) -> Option<&Subscription> {
        self.subscription_arc(topic_key, subscription_key).map(|s| &**s)
    }

    pub fn subscription_arc(&self, topic_key: &str, subscription_key: &str) -> Option<&Arc<Subscription>> {
        self.topics
            .get(topic_key)?
            .subscriptions
            .iter()
            .find(|s| s.name.key() == subscription_key)
    }
}

pub struct CatalogCache {
    catalog: Catalog,
    current: RwLock<Arc<CatalogSnapshot>>,
}

impl CatalogCache {
    pub async fn load(catalog: Catalog) -> Result<Self, StoreError> {
        let snapshot = catalog.load().await?;
        Ok(Self {
            catalog,
            current: RwLock::new(Arc::new(snapshot)),
        })
    }

    pub fn snapshot(&self) -> Arc<CatalogSnapshot> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reloads the whole catalog.
    pub async fn reload(&self) -> Result<Arc<CatalogSnapshot>, StoreError> {
        let fresh = Arc::new(self.catalog.load().await?);
        let mut guard = match self.current.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Always replace, even with a lower version: Redis may have come back empty.
        *guard = fresh.clone();
        Ok(fresh)
    }

    /// Reloads only if the catalog version moved (one cheap `GET` otherwise).
    pub async fn refresh(&self) -> Result<Arc<CatalogSnapshot>, StoreError> {
        let current = self.snapshot();
        if self.catalog.version().await? == current.version {
            return Ok(current);
        }
        self.reload().await
    }
}
