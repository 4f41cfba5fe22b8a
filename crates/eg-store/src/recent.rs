//! A subscription's recent deliveries, read from delivery history for the status page.
//! There is no per-subscription index of deliveries; each partition's history index
//! names its event histories by their last write, so the newest few are read, with a
//! page of the delivered log's newest bucket (events delivered by their only delivery),
//! and the steps of one subscription kept. Bounded work per call, and true: what it
//! shows happened, though on a busy partition it may show fewer than asked for.

use crate::codec;
use crate::connection::{Link, Store};
use crate::error::StoreError;
use crate::keyspace::Partition;
use eg_core::history::HistoryEntry;
use std::collections::HashMap;

/// Event histories looked at per partition, newest first.
const LISTS_PER_PARTITION: isize = 200;
/// Delivered-log fields looked at per partition: one `HSCAN` page of its newest bucket
/// (a hash has no order, so these are a sample of the newest bucket's deliveries).
const LOGGED_PER_PARTITION: usize = 1000;

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
            async move { histories_in(&mut link, &p, topic).await }
        });
        let per_partition = futures_util::future::try_join_all(reads).await?;
        // An event may have steps in its list (held back, say) and its delivery in the log.
        let mut by_event: HashMap<String, Vec<String>> = HashMap::new();
        for (event_id, steps) in per_partition.into_iter().flatten() {
            by_event.entry(event_id).or_default().extend(steps);
        }
        let mut recent: Vec<RecentDelivery> = by_event
            .into_iter()
            .filter_map(|(event_id, list)| of_subscription(event_id, &list, subscription))
            .collect();
        recent.sort_by(|a, b| b.latest.at.cmp(&a.latest.at).then_with(|| a.event_id.cmp(&b.event_id)));
        recent.truncate(most);
        Ok(recent)
    }
}

/// The newest event histories of `topic` in one partition, as (event id, raw steps): the
/// most recently written lists, and a page of the delivered log's newest bucket.
async fn histories_in(
    link: &mut Link,
    partition: &Partition,
    topic: &str,
) -> redis::RedisResult<Vec<(String, Vec<String>)>> {
    let prefix = partition.history(topic, "");
    let (names, newest_bucket): (Vec<String>, Vec<String>) = redis::pipe()
        .cmd("ZREVRANGE")
        .arg(partition.history_index())
        .arg(0)
        .arg(LISTS_PER_PARTITION - 1)
        .zrange(partition.delivered_log(), -1, -1)
        .query_async(link)
        .await?;
    let ours: Vec<String> = names.into_iter().filter(|n| n.starts_with(&prefix)).collect();
    let mut pipe = redis::pipe();
    for name in &ours {
        pipe.lrange(name, 0, -1);
    }
    if let Some(bucket) = newest_bucket.first() {
        pipe.cmd("HSCAN")
            .arg(bucket)
            .arg(0)
            .arg("MATCH")
            .arg(format!("{}/*", glob_escaped(topic)))
            .arg("COUNT")
            .arg(LOGGED_PER_PARTITION);
    }
    if ours.is_empty() && newest_bucket.is_empty() {
        return Ok(Vec::new());
    }
    let mut replies: Vec<redis::Value> = pipe.query_async(link).await?;
    // The HSCAN reply is last: (cursor, [field, step, …]).
    let logged: Vec<(String, String)> = match newest_bucket.first() {
        None => Vec::new(),
        Some(bucket) => {
            let (_cursor, pairs): (String, Vec<(String, String)>) =
                redis::from_redis_value(replies.pop().unwrap_or(redis::Value::Nil))?;
            with_shared_steps(link, bucket, pairs).await?
        }
    };
    let lists: Vec<Vec<String>> = replies
        .into_iter()
        .map(redis::from_redis_value)
        .collect::<Result<_, _>>()?;
    let field_prefix = format!("{topic}/");
    Ok(ours
        .into_iter()
        .map(|name| name[prefix.len()..].to_owned())
        .zip(lists)
        .chain(logged.into_iter().filter_map(|(field, value)| {
            // A fan-out's deliveries settled together share a field, a step a line.
            let steps = value.split('\n').map(str::to_owned).collect();
            Some((field.strip_prefix(&field_prefix)?.to_owned(), steps))
        }))
        .collect())
}

/// `logged` (field, value) pairs of `bucket` with each value that names a shared step's
/// record (a delivered batch's) replaced by that step; pairs whose record is gone are
/// left out.
async fn with_shared_steps(
    link: &mut Link,
    bucket: &str,
    logged: Vec<(String, String)>,
) -> redis::RedisResult<Vec<(String, String)>> {
    let mut records: Vec<&str> = logged
        .iter()
        .filter_map(|(_, value)| codec::shared_step_record(value))
        .collect();
    if records.is_empty() {
        return Ok(logged);
    }
    records.sort_unstable();
    records.dedup();
    let steps: Vec<Option<String>> = redis::cmd("HMGET").arg(bucket).arg(&records).query_async(link).await?;
    let shared: HashMap<String, String> = records
        .into_iter()
        .zip(steps)
        .filter_map(|(record, step)| Some((record.to_owned(), step?)))
        .collect();
    Ok(logged
        .into_iter()
        .filter_map(|(field, value)| match codec::shared_step_record(&value) {
            Some(record) => Some((field, shared.get(record)?.clone())),
            None => Some((field, value)),
        })
        .collect())
}

/// `s` with the characters `HSCAN … MATCH` treats as a pattern escaped.
fn glob_escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The subscription's steps in one event's history, as a recent delivery.
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
    fn topic_names_match_literally() {
        assert_eq!(glob_escaped("orders"), "orders");
        assert_eq!(glob_escaped("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
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
