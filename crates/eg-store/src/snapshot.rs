//! The catalog as read at one version: every topic with its keys and subscriptions.
//! [`crate::Catalog::load`] builds it; [`crate::CatalogCache`] keeps the current one.

use eg_core::{Subscription, Topic};
use std::collections::HashMap;
use std::sync::Arc;

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

    /// Every topic with its subscriptions (the archive sweep walks the archived ones).
    pub fn topics(&self) -> impl Iterator<Item = &TopicEntry> {
        self.topics.values()
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
