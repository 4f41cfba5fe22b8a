//! The topic and subscription catalog in Redis: what the management API writes and
//! every tier reads (through `CatalogCache`).
//!
//! Each write is one script on the `{catalog}` keys and bumps the catalog version; the
//! new version is then copied into every partition, where the publish script checks it,
//! so a publish that starts after a write returned always matches against the write.

use crate::connection::Store;
use crate::error::StoreError;
use crate::scripts;
use crate::snapshot::CatalogSnapshot;
use eg_core::api_error::InvalidField;
use eg_core::{Subscription, SubscriptionName, Topic, TopicName};
use redis::AsyncCommands;

#[derive(Clone)]
pub struct Catalog {
    store: Store,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyName {
    Key1,
    Key2,
}

impl KeyName {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "key1" => Some(Self::Key1),
            "key2" => Some(Self::Key2),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Key1 => "key1",
            Self::Key2 => "key2",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutTopic {
    Created,
    Updated,
    /// The stored topic of this name cannot be replaced by this one (why, by field).
    Refused(InvalidField),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutSubscription {
    Created,
    Updated,
    NoTopic,
    LimitReached,
    /// A conditional write found its topic or the subscription changed since they were read.
    Changed,
}

/// What a subscription write was decided from (see [`Catalog::subscription_basis`]).
#[derive(Debug, Clone)]
pub struct SubscriptionBasis {
    pub topic: Topic,
    topic_record: String,
    /// The subscription as it was stored, if it existed.
    pub previous: Option<Subscription>,
    /// Its record (`""` if it did not exist).
    previous_record: String,
}

fn subscription_field(topic: &TopicName, name: &SubscriptionName) -> String {
    format!("{}/{}", topic.key(), name.key())
}

impl Catalog {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// Creates or updates a topic, unless the topic stored under its name refuses the
    /// replacement ([`Topic::may_replace`]). The check and the write cannot be raced: the
    /// write happens only if the topic the check read is still the one stored, else both
    /// are done again.
    pub async fn put_topic(&self, topic: &Topic, new_keys: [String; 2]) -> Result<PutTopic, StoreError> {
        let k = &self.store.keys;
        let json = serde_json::to_string(topic).map_err(|e| StoreError::corrupt(k.topics(), e))?;
        loop {
            let mut conn = self.store.conn().await?;
            let stored: Option<String> = conn.hget(k.topics(), topic.name.key()).await?;
            if let Some(stored) = &stored {
                let stored: Topic = serde_json::from_str(stored).map_err(|e| StoreError::corrupt(k.topics(), e))?;
                if let Err(refused) = topic.may_replace(&stored) {
                    return Ok(PutTopic::Refused(refused));
                }
            }
            let (created, version): (i64, u64) = scripts::PUT_TOPIC
                .key(k.topics())
                .key(k.topic_keys())
                .key(k.catalog_version())
                .arg(topic.name.key())
                .arg(&json)
                .arg(&new_keys[0])
                .arg(&new_keys[1])
                .arg(stored.as_deref().unwrap_or_default())
                .invoke_async(&mut conn)
                .await?;
            drop(conn);
            if created < 0 {
                continue; // another write of this topic came in between: check again
            }
            self.publish_version(version).await?;
            return Ok(if created == 1 {
                PutTopic::Created
            } else {
                PutTopic::Updated
            });
        }
    }

    /// Creates a topic only if none of its name is stored; returns whether it did. A topic
    /// that exists is left exactly as it is, whoever wrote it (a topic eg creates for
    /// itself must not undo what an operator changed).
    pub async fn create_topic(&self, topic: &Topic, new_keys: [String; 2]) -> Result<bool, StoreError> {
        let k = &self.store.keys;
        let json = serde_json::to_string(topic).map_err(|e| StoreError::corrupt(k.topics(), e))?;
        let mut conn = self.store.conn().await?;
        let (created, version): (i64, u64) = scripts::PUT_TOPIC
            .key(k.topics())
            .key(k.topic_keys())
            .key(k.catalog_version())
            .arg(topic.name.key())
            .arg(&json)
            .arg(&new_keys[0])
            .arg(&new_keys[1])
            .arg("") // written only if nothing is stored under the name
            .invoke_async(&mut conn)
            .await?;
        drop(conn);
        if created != 1 {
            return Ok(false);
        }
        self.publish_version(version).await?;
        Ok(true)
    }

    pub async fn get_topic(&self, name: &TopicName) -> Result<Option<Topic>, StoreError> {
        let mut conn = self.store.conn().await?;
        let raw: Option<String> = conn.hget(self.store.keys.topics(), name.key()).await?;
        raw.map(|r| serde_json::from_str(&r).map_err(|e| StoreError::corrupt(self.store.keys.topics(), e)))
            .transpose()
    }

    pub async fn list_topics(&self) -> Result<Vec<Topic>, StoreError> {
        let mut conn = self.store.conn().await?;
        let raw: Vec<String> = conn.hvals(self.store.keys.topics()).await?;
        let mut topics = raw
            .iter()
            .map(|r| serde_json::from_str::<Topic>(r).map_err(|e| StoreError::corrupt(self.store.keys.topics(), e)))
            .collect::<Result<Vec<_>, _>>()?;
        topics.sort_by_key(|t| t.name.key());
        Ok(topics)
    }

    /// Deletes a topic and its subscriptions; returns whether it existed. The identities
    /// its duplicate detection window remembers go too (a separate step on another hash
    /// tag: a topic made again under the name must not skip its predecessor's events).
    pub async fn delete_topic(&self, name: &TopicName) -> Result<bool, StoreError> {
        let k = &self.store.keys;
        let mut conn = self.store.conn().await?;
        let (existed, version): (i64, u64) = scripts::DELETE_TOPIC
            .key(k.topics())
            .key(k.topic_keys())
            .key(k.subscriptions())
            .key(k.subscription_counts())
            .key(k.catalog_version())
            .arg(name.key())
            .invoke_async(&mut conn)
            .await?;
        let seen = k.home_partition(&name.key()).seen(&name.key());
        let () = conn.del(seen).await?;
        drop(conn);
        self.publish_version(version).await?;
        Ok(existed == 1)
    }

    /// The topic's two access keys, if the topic exists.
    pub async fn topic_keys(&self, name: &TopicName) -> Result<Option<[String; 2]>, StoreError> {
        let mut conn = self.store.conn().await?;
        let t = name.key();
        let (k1, k2): (Option<String>, Option<String>) = conn
            .hmget(
                self.store.keys.topic_keys(),
                &[format!("{t}/key1"), format!("{t}/key2")],
            )
            .await?;
        Ok(k1.zip(k2).map(|(a, b)| [a, b]))
    }

    /// Replaces one key; returns false when the topic does not exist.
    pub async fn regenerate_key(&self, name: &TopicName, which: KeyName, new_key: &str) -> Result<bool, StoreError> {
        let k = &self.store.keys;
        let mut conn = self.store.conn().await?;
        let version: u64 = scripts::REGENERATE_KEY
            .key(k.topics())
            .key(k.topic_keys())
            .key(k.catalog_version())
            .arg(name.key())
            .arg(which.as_str())
            .arg(new_key)
            .invoke_async(&mut conn)
            .await?;
        drop(conn);
        if version == 0 {
            return Ok(false);
        }
        self.publish_version(version).await?;
        Ok(true)
    }

    /// Creates or updates a subscription, whatever is stored.
    pub async fn put_subscription(&self, sub: &Subscription, limit: u32) -> Result<PutSubscription, StoreError> {
        self.write_subscription(sub, limit, None).await
    }

    /// Creates or updates a subscription decided from `basis`, only if its topic and the
    /// subscription are still stored as `basis` read them ([`PutSubscription::Changed`]
    /// otherwise: read and decide again).
    pub async fn put_subscription_over(
        &self,
        sub: &Subscription,
        limit: u32,
        basis: &SubscriptionBasis,
    ) -> Result<PutSubscription, StoreError> {
        self.write_subscription(sub, limit, Some(basis)).await
    }

    /// What a subscription write is decided from: its topic (`None`: there is no such
    /// topic) and the subscription as stored now, if it exists.
    pub async fn subscription_basis(
        &self,
        topic: &TopicName,
        name: &SubscriptionName,
    ) -> Result<Option<SubscriptionBasis>, StoreError> {
        let k = &self.store.keys;
        let mut conn = self.store.conn().await?;
        let (topic_record, record): (Option<String>, Option<String>) = redis::pipe()
            .hget(k.topics(), topic.key())
            .hget(k.subscriptions(), subscription_field(topic, name))
            .query_async(&mut conn)
            .await?;
        let Some(topic_record) = topic_record else {
            return Ok(None);
        };
        let topic = serde_json::from_str(&topic_record).map_err(|e| StoreError::corrupt(k.topics(), e))?;
        let previous = record
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| StoreError::corrupt(k.subscriptions(), e))?;
        Ok(Some(SubscriptionBasis {
            topic,
            topic_record,
            previous,
            previous_record: record.unwrap_or_default(),
        }))
    }

    async fn write_subscription(
        &self,
        sub: &Subscription,
        limit: u32,
        basis: Option<&SubscriptionBasis>,
    ) -> Result<PutSubscription, StoreError> {
        let k = &self.store.keys;
        let mut conn = self.store.conn().await?;
        let json = serde_json::to_string(sub).map_err(|e| StoreError::corrupt(k.subscriptions(), e))?;
        let reply: Vec<String> = scripts::PUT_SUBSCRIPTION
            .key(k.topics())
            .key(k.subscriptions())
            .key(k.subscription_counts())
            .key(k.catalog_version())
            .arg(sub.topic.key())
            .arg(subscription_field(&sub.topic, &sub.name))
            .arg(json)
            .arg(limit)
            .arg(if basis.is_some() { "1" } else { "0" })
            .arg(basis.map(|b| b.topic_record.as_str()).unwrap_or_default())
            .arg(basis.map(|b| b.previous_record.as_str()).unwrap_or_default())
            .invoke_async(&mut conn)
            .await?;
        drop(conn);
        match reply.as_slice() {
            [status] if status == "NO_TOPIC" => Ok(PutSubscription::NoTopic),
            [status] if status == "LIMIT" => Ok(PutSubscription::LimitReached),
            [status] if status == "CHANGED" => Ok(PutSubscription::Changed),
            [status, created, version] if status == "OK" => {
                let version = version
                    .parse()
                    .map_err(|e| StoreError::corrupt(k.catalog_version(), e))?;
                self.publish_version(version).await?;
                Ok(if created == "1" {
                    PutSubscription::Created
                } else {
                    PutSubscription::Updated
                })
            }
            other => Err(StoreError::corrupt(
                k.subscriptions(),
                format!("unexpected script reply {other:?}"),
            )),
        }
    }

    pub async fn get_subscription(
        &self,
        topic: &TopicName,
        name: &SubscriptionName,
    ) -> Result<Option<Subscription>, StoreError> {
        let mut conn = self.store.conn().await?;
        let raw: Option<String> = conn
            .hget(self.store.keys.subscriptions(), subscription_field(topic, name))
            .await?;
        raw.map(|r| serde_json::from_str(&r).map_err(|e| StoreError::corrupt(self.store.keys.subscriptions(), e)))
            .transpose()
    }

    pub async fn list_subscriptions(&self, topic: &TopicName) -> Result<Vec<Subscription>, StoreError> {
        let mut conn = self.store.conn().await?;
        let key = self.store.keys.subscriptions();
        let pattern = format!("{}/*", topic.key());
        let mut iter: redis::AsyncIter<(String, String)> = conn.hscan_match(&key, pattern).await?;
        let mut subs = Vec::new();
        while let Some(item) = iter.next_item().await {
            let (_, raw) = item?;
            subs.push(serde_json::from_str::<Subscription>(&raw).map_err(|e| StoreError::corrupt(&key, e))?);
        }
        subs.sort_by_key(|s| s.name.key());
        Ok(subs)
    }

    pub async fn delete_subscription(&self, topic: &TopicName, name: &SubscriptionName) -> Result<bool, StoreError> {
        let k = &self.store.keys;
        let mut conn = self.store.conn().await?;
        let (existed, version): (i64, u64) = scripts::DELETE_SUBSCRIPTION
            .key(k.subscriptions())
            .key(k.subscription_counts())
            .key(k.catalog_version())
            .arg(topic.key())
            .arg(subscription_field(topic, name))
            .invoke_async(&mut conn)
            .await?;
        drop(conn);
        if existed == 1 {
            self.publish_version(version).await?;
        }
        Ok(existed == 1)
    }

    pub async fn version(&self) -> Result<u64, StoreError> {
        let mut conn = self.store.conn().await?;
        let v: Option<u64> = conn.get(self.store.keys.catalog_version()).await?;
        Ok(v.unwrap_or(0))
    }

    /// Reads the whole catalog at one version.
    pub async fn load(&self) -> Result<CatalogSnapshot, StoreError> {
        let k = &self.store.keys;
        let mut conn = self.store.conn().await?;
        type Pairs = Vec<(String, String)>;
        let (version, topics, keys, subs): (u64, Pairs, Pairs, Pairs) = scripts::LOAD_CATALOG
            .key(k.catalog_version())
            .key(k.topics())
            .key(k.topic_keys())
            .key(k.subscriptions())
            .invoke_async(&mut conn)
            .await?;
        Ok(CatalogSnapshot::from_pairs(version, topics, keys, subs))
    }

    /// Copies the catalog version into every partition (see the module comment).
    async fn publish_version(&self, version: u64) -> Result<(), StoreError> {
        let mut conn = self.store.conn().await?;
        for p in self.store.keys.all_partitions() {
            let _: i64 = scripts::RAISE_VERSION
                .key(p.catalog_version())
                .arg(version)
                .invoke_async(&mut conn)
                .await?;
        }
        Ok(())
    }
}
