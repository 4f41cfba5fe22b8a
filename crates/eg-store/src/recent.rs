//! A subscription's recent deliveries, read from delivery history for the status page.
//! There is no per-subscription index of deliveries; each partition's history index
//! names its event histories by their last write, so the newest few are read and the
//! steps of one subscription kept. Bounded work per call, and true: what it shows
//! happened, though on a busy partition it may show fewer than asked for.

use crate::connection::Store;
use crate::error::StoreError;
use eg_core::history::HistoryEntry;

/// Event histories looked at per partition, newest first.
const LISTS_PER_PARTITION: isize = 200;

/// One event's delivery to a subscription, as its history stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentDelivery {
    pub event_id: String,
    /// Its newest step (the delivery's current state and last outcome).
    pub latest: HistoryEntry,
    /// How many steps are kept for it.
    pub steps: usize,
}

impl Store {
    /// Up to `most` of the newest deliveries to `subscription` (key) of `topic` (key)
    /// with a kept history, newest first.
    pub async fn recent_deliveries(
        &self,
        topic: &str,
        subscription: &str,
        most: usize,
    ) -> Result<Vec<RecentDelivery>, StoreError> {
        let (_held, link) = self.link().await?;
        let reads = self.keys().all_partitions().map(|p| {
            let mut link = link.clone();
            let index = p.history_index();
            let prefix = p.history(topic, "");
            async move {
                let names: Vec<String> = redis::cmd("ZREVRANGE")
                    .arg(&index)
                    .arg(0)
                    .arg(LISTS_PER_PARTITION - 1)
                    .query_async(&mut link)
                    .await?;
                let ours: Vec<String> = names.into_iter().filter(|n| n.starts_with(&prefix)).collect();
                if ours.is_empty() {
                    return Ok::<_, redis::RedisError>(Vec::new());
                }
                let mut pipe = redis::pipe();
                for name in &ours {
                    pipe.lrange(name, 0, -1);
                }
                let lists: Vec<Vec<String>> = pipe.query_async(&mut link).await?;
                Ok(ours
                    .into_iter()
                    .map(|name| name[prefix.len()..].to_owned())
                    .zip(lists)
                    .collect())
            }
        });
        let per_partition = futures_util::future::try_join_all(reads).await?;
        let mut recent: Vec<RecentDelivery> = per_partition
            .into_iter()
            .flatten()
            .filter_map(|(event_id, list)| of_subscription(event_id, &list, subscription))
            .collect();
        recent.sort_by(|a, b| b.latest.at.cmp(&a.latest.at).then_with(|| a.event_id.cmp(&b.event_id)));
        recent.truncate(most);
        Ok(recent)
    }
}

/// The subscription's steps in one event's history list, as a recent delivery.
fn of_subscription(event_id: String, list: &[String], subscription: &str) -> Option<RecentDelivery> {
    let steps: Vec<HistoryEntry> = list
        .iter()
        .filter_map(|raw| serde_json::from_str::<HistoryEntry>(raw).ok())
        .filter(|e| e.subscription == subscription)
        .collect();
    let latest = steps.iter().max_by_key(|e| e.at)?.clone();
    Some(RecentDelivery {
        event_id,
        latest,
        steps: steps.len(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use eg_core::history::DeliveryState;

    /// A stored step, as settle.lua keeps it.
    fn step(subscription: &str, attempt: u32, at: i64, state: &str) -> String {
        format!(r#"{{"s":"{subscription}","n":{attempt},"t":{at},"st":"{state}"}}"#)
    }

    #[test]
    fn a_delivery_is_its_subscriptions_newest_step() {
        let list = [
            step("audit", 1, 10, "Retrying"),
            step("billing", 1, 11, "Delivered"),
            step("audit", 2, 20, "Delivered"),
            "not json".to_owned(),
        ];
        let d = of_subscription("e1".into(), &list, "audit").unwrap();
        assert_eq!(d.steps, 2);
        assert_eq!(d.latest.attempt, 2);
        assert_eq!(d.latest.state, DeliveryState::Delivered);
        assert!(of_subscription("e1".into(), &list, "other").is_none());
    }
}
