//! Dead-letter destinations that are failing, so a wrong key or a missing container is
//! seen (status page, `egctl subscriptions show`, the management API) and not only
//! logged: the dead-letter worker records a subscription's problem when a write fails
//! and clears it when one succeeds. One hash for the deployment (few subscriptions
//! fail at once, and one key needs no script across slots); `since` survives repeats,
//! so the page says how long it has been failing.

use crate::connection::Store;
use crate::error::StoreError;
use eg_core::UnixMillis;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Why a subscription's dead letters cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationProblem {
    /// The store's label (`eg_core::subscription::DeadLetterStore::label`).
    pub store: String,
    /// The container or bucket.
    pub container: String,
    /// A short class: `Unauthenticated`, `ContainerNotFound`, `Unavailable`, …
    pub kind: String,
    /// What the store said, for a person (never a key or a signature).
    pub message: String,
    /// When the failing began (the first failure since the last success).
    pub since: UnixMillis,
    /// The latest failure.
    pub last: UnixMillis,
}

/// A failing subscription, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailingDestination {
    pub topic: String,
    pub subscription: String,
    pub problem: DestinationProblem,
}

impl Store {
    /// Records that `topic/subscription`'s dead letters could not be written; keeps the
    /// `since` of a problem already recorded.
    pub async fn record_dead_letter_problem(
        &self,
        topic: &str,
        subscription: &str,
        mut problem: DestinationProblem,
    ) -> Result<(), StoreError> {
        let key = self.keys.dead_letter_problems();
        let field = field(topic, subscription);
        let mut conn = self.conn().await?;
        let earlier: Option<String> = conn.hget(&key, &field).await?;
        if let Some(earlier) = earlier.and_then(|raw| serde_json::from_str::<DestinationProblem>(&raw).ok()) {
            problem.since = earlier.since.min(problem.since);
        }
        let json = serde_json::to_string(&problem).map_err(|e| StoreError::corrupt(&key, e.to_string()))?;
        let _: i64 = conn.hset(&key, &field, json).await?;
        Ok(())
    }

    /// Forgets `topic/subscription`'s problem (a write succeeded, or it was deleted).
    pub async fn clear_dead_letter_problem(&self, topic: &str, subscription: &str) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let _: i64 = conn
            .hdel(self.keys.dead_letter_problems(), field(topic, subscription))
            .await?;
        Ok(())
    }

    /// `topic/subscription`'s problem, if its dead letters are failing.
    pub async fn dead_letter_problem(
        &self,
        topic: &str,
        subscription: &str,
    ) -> Result<Option<DestinationProblem>, StoreError> {
        let key = self.keys.dead_letter_problems();
        let mut conn = self.conn().await?;
        let raw: Option<String> = conn.hget(&key, field(topic, subscription)).await?;
        raw.map(|raw| serde_json::from_str(&raw).map_err(|e| StoreError::corrupt(&key, e.to_string())))
            .transpose()
    }

    /// Every failing subscription, by topic and name.
    pub async fn dead_letter_problems(&self) -> Result<Vec<FailingDestination>, StoreError> {
        let key = self.keys.dead_letter_problems();
        let mut conn = self.conn().await?;
        let all: HashMap<String, String> = conn.hgetall(&key).await?;
        let mut failing = Vec::with_capacity(all.len());
        for (field, raw) in all {
            let problem: DestinationProblem =
                serde_json::from_str(&raw).map_err(|e| StoreError::corrupt(&key, e.to_string()))?;
            let (topic, subscription) = field.split_once('/').unwrap_or((field.as_str(), ""));
            failing.push(FailingDestination {
                topic: topic.to_owned(),
                subscription: subscription.to_owned(),
                problem,
            });
        }
        failing.sort_by(|a, b| (&a.topic, &a.subscription).cmp(&(&b.topic, &b.subscription)));
        Ok(failing)
    }
}

fn field(topic: &str, subscription: &str) -> String {
    format!("{}/{}", topic.to_ascii_lowercase(), subscription.to_ascii_lowercase())
}
