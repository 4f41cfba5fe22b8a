//! Pull delivery's queues (Event Grid namespaces' queue mode) in Redis: each queue-mode
//! subscription has, per partition, a stream of its deliveries with the consumer group
//! `receivers`, whose pending list holds the locks (an entry's idle time is its lock's
//! age, its delivery counter the count the lock token carries), a delayed set for
//! releases with a delay, an index of the partition's queues, and a signal stream that
//! wakes waiting receivers. Every step is one script on one partition's hash tag:
//! receive (`queue_receive.lua`), settle (`queue_settle.lua`, which shares
//! `settle.lua`'s steps), promotion of delayed releases (`promote.lua`).
//!
//! What to do with an event (deliver, dead-letter, requeue) is `eg_core::pull`'s
//! decision; this module only carries it out.

use crate::codec;
use crate::connection::Store;
use crate::error::StoreError;
use crate::keyspace::{LOCKS_CONSUMER, Partition, RECEIVERS_GROUP};
use crate::queue::Promoted;
use crate::scripts;
use crate::settlement::{Retention, Settle, Settlement};
use eg_core::Delivery;
use std::time::Duration;

/// One queue entry under a lock this call was granted (or found).
#[derive(Debug, Clone)]
pub struct QueueEntry {
    pub partition: u16,
    pub entry_id: String,
    /// The delivery record; its `attempts` counts the deliveries made before this entry
    /// existed (a released event gets a new entry).
    pub delivery: Delivery,
    /// The entry's own delivery counter (Redis's pending-entry count).
    pub counter: u32,
}

impl QueueEntry {
    /// A settle of this lock (a queue entry never carries the event's body, and pull
    /// delivery keeps no history steps).
    pub fn settle(&self, settlement: Settlement) -> Settle {
        Settle {
            entry_id: self.entry_id.clone(),
            delivery: self.delivery.clone(),
            settlement,
            history: None,
            carries_body: false,
            shared: None,
        }
    }

    /// Event Grid's `deliveryCount`: every delivery of the event so far, this one included.
    pub fn delivery_count(&self) -> u32 {
        self.delivery.attempts + self.counter
    }
}

/// Which locks a queue settle may end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockCheck {
    /// Still held (a consumer's acknowledge, release, reject, renew; or the receive that
    /// just granted it).
    Held,
    /// Expired and not taken again (the scheduler's sweep).
    Expired,
}

/// One queue subscription's depths in one partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Receivable now: never delivered, or whose lock expired.
    pub available: u64,
    /// Under a lock not expired.
    pub locked: u64,
    /// Released with a delay, not receivable yet.
    pub delayed: u64,
    /// Publish time (ms) of the oldest entry still in the queue, if any.
    pub oldest_ms: Option<i64>,
}

/// The settlement that ends `delivery` of `subscription` at its `count`-th delivery for
/// `reason`: its dead-letter record, or, without a dead-letter destination, done (the drop
/// of `DeadLetterReason::dead_letter_to`, counted by the caller).
pub fn ending(
    subscription: &eg_core::Subscription,
    delivery: &Delivery,
    count: u32,
    reason: eg_core::DeadLetterReason,
    now: eg_core::UnixMillis,
) -> Settlement {
    let Ok(destination) = reason.dead_letter_to(subscription.dead_letter.as_ref()) else {
        return Settlement::Done;
    };
    let mut counted = delivery.clone();
    counted.attempts = count;
    Settlement::DeadLetter {
        entry: eg_core::deadletter::DeadLetterEntry::for_delivery(&counted, subscription, destination, reason, now),
    }
}

/// The queue settle's check arguments after the items.
const CHECK_HELD: &str = "held";
const CHECK_EXPIRED: &str = "expired";

impl Store {
    /// The secret lock tokens are signed with: `candidate` becomes it if none is stored
    /// yet (first start), so every process of the deployment shares one.
    pub async fn lock_secret(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
        let mut conn = self.conn().await?;
        let key = self.keys().lock_secret();
        let (_, secret): ((), Vec<u8>) = redis::pipe()
            .cmd("SET")
            .arg(&key)
            .arg(candidate)
            .arg("NX")
            .ignore()
            .get(&key)
            .query_async(&mut conn)
            .await
            .map(|(secret,): (Vec<u8>,)| ((), secret))?;
        if secret.is_empty() {
            return Err(StoreError::corrupt(key, "the lock secret is empty"));
        }
        Ok(secret)
    }

    /// Locks up to `count` events of `subscription` (`<topic>/<subscription>`) in
    /// `partition` for `lock`: expired locks first, then events never delivered.
    pub async fn receive_queue(
        &self,
        partition: &Partition,
        subscription: &str,
        lock: Duration,
        count: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        let stream = partition.queue(subscription);
        let mut conn = self.conn().await?;
        let flat: Vec<redis::Value> = scripts::QUEUE_RECEIVE
            .key(&stream)
            .key(partition.queue_cursor(subscription))
            .arg(RECEIVERS_GROUP)
            .arg(LOCKS_CONSUMER)
            .arg(lock.as_millis() as u64)
            .arg(count)
            .invoke_async(&mut conn)
            .await?;
        drop(conn);
        let mut out = Vec::with_capacity(flat.len() / 3);
        for triple in flat.chunks(3) {
            let [id, record, counter] = triple else {
                return Err(StoreError::corrupt(stream, "queue receive answered an odd list"));
            };
            let id: String = redis::from_redis_value_ref(id).map_err(redis::RedisError::from)?;
            let record: String = redis::from_redis_value_ref(record).map_err(redis::RedisError::from)?;
            let counter: u32 = redis::from_redis_value_ref(counter).map_err(redis::RedisError::from)?;
            match codec::decode_delivery(&record) {
                Ok(delivery) => out.push(QueueEntry {
                    partition: partition.index,
                    entry_id: id,
                    delivery,
                    counter,
                }),
                Err(e) => {
                    // Nobody could ever deliver it: remove it so it does not come back forever.
                    tracing::error!(stream = %stream, entry = %id, error = %e, "removing a queue entry that is not a delivery record");
                    let mut conn = self.conn().await?;
                    let _: u64 = scripts::ACK_DELETE
                        .key(&stream)
                        .arg(RECEIVERS_GROUP)
                        .arg(&[id])
                        .invoke_async(&mut conn)
                        .await?;
                }
            }
        }
        Ok(out)
    }

    /// The deliveries of queue entries (for settling them by token): `None` where the
    /// entry is gone.
    pub async fn queue_entries(
        &self,
        partition: &Partition,
        subscription: &str,
        entry_ids: &[String],
    ) -> Result<Vec<Option<Delivery>>, StoreError> {
        if entry_ids.is_empty() {
            return Ok(Vec::new());
        }
        let stream = partition.queue(subscription);
        let mut pipe = redis::pipe();
        for id in entry_ids {
            pipe.cmd("XRANGE").arg(&stream).arg(id).arg(id);
        }
        let mut conn = self.conn().await?;
        let replies: Vec<redis::streams::StreamRangeReply> = pipe.query_async(&mut conn).await?;
        Ok(replies
            .into_iter()
            .map(|reply| {
                let entry = reply.ids.into_iter().next()?;
                let raw: String = entry.get(codec::DELIVERY_FIELD)?;
                codec::decode_delivery(&raw).ok()
            })
            .collect())
    }

    /// Settles queue locks of `subscription` in `partition` in one script call: each
    /// item only if its entry is still pending with `counters[i]` and passes `check`
    /// for `lock`. A retry goes into the subscription's delayed set, a requeue back
    /// into its queue. Returns, per item, whether it took effect.
    #[allow(clippy::too_many_arguments)]
    pub async fn settle_queue(
        &self,
        partition: &Partition,
        subscription: &str,
        items: &[Settle],
        counters: &[u32],
        lock: Duration,
        check: LockCheck,
        retention: &Retention,
    ) -> Result<Vec<bool>, StoreError> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let fixed = [
            partition.queue(subscription),
            partition.queue_delayed(subscription),
            partition.deadletter_delay(),
            partition.history_index(),
            partition.queues_index(),
            partition.delivered_log(),
        ];
        let mut call = codec::SettleCall::on_stream(partition, fixed, RECEIVERS_GROUP, items, retention)?;
        call.args.push((lock.as_millis() as u64).to_string());
        call.args.push(
            match check {
                LockCheck::Held => CHECK_HELD,
                LockCheck::Expired => CHECK_EXPIRED,
            }
            .to_owned(),
        );
        call.args.extend(counters.iter().map(u32::to_string));
        let mut conn = self.conn().await?;
        let replies: Vec<u64> = call
            .invocation_of(&scripts::QUEUE_SETTLE)
            .invoke_async(&mut conn)
            .await?;
        if replies.len() != items.len() {
            return Err(StoreError::corrupt(
                partition.queue(subscription),
                format!(
                    "queue settle answered {} results for {} items",
                    replies.len(),
                    items.len()
                ),
            ));
        }
        Ok(replies.into_iter().map(|r| r > 0).collect())
    }

    /// The subscriptions with a queue in `partition`.
    pub async fn queue_subscriptions(&self, partition: &Partition) -> Result<Vec<String>, StoreError> {
        let mut conn = self.conn().await?;
        Ok(redis::cmd("SMEMBERS")
            .arg(partition.queues_index())
            .query_async(&mut conn)
            .await?)
    }

    /// Moves due delayed releases of `subscription` back into its queue, and rings the
    /// partition's signal when any moved, so waiting receivers look.
    pub async fn promote_queue(
        &self,
        partition: &Partition,
        subscription: &str,
        max: usize,
    ) -> Result<Promoted, StoreError> {
        let mut conn = self.conn().await?;
        let (moved, wait): (usize, i64) = scripts::PROMOTE
            .key(partition.queue_delayed(subscription))
            .key(partition.queue(subscription))
            .arg(codec::DELIVERY_FIELD)
            .arg(max)
            .arg(0)
            .invoke_async(&mut conn)
            .await?;
        if moved > 0 {
            self.ring(partition, &[subscription]).await?;
        }
        Ok(Promoted {
            moved,
            next_in: u64::try_from(wait).ok().map(Duration::from_millis),
        })
    }

    /// Adds a wake-up hint naming `subscriptions` to the partition's signal stream.
    pub async fn ring(&self, partition: &Partition, subscriptions: &[&str]) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let _: String = redis::cmd("XADD")
            .arg(partition.queue_signal())
            .arg("MAXLEN")
            .arg("~")
            .arg(10_000)
            .arg("*")
            .arg("s")
            .arg(subscriptions.join(" "))
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Waits up to `block` for wake-up hints after `after` (an entry id; `$` for "from
    /// now") on `partition`'s signal stream: the last id seen and the subscriptions named.
    /// A plain `XREAD` (no group): reading changes nothing in Redis.
    pub async fn read_signals(
        &self,
        partition: &Partition,
        after: &str,
        block: Duration,
    ) -> Result<(String, Vec<String>), StoreError> {
        let opts = redis::streams::StreamReadOptions::default()
            .count(1000)
            .block(block.as_millis().max(1) as usize);
        let mut conn = self.conn().await?;
        let reply: Option<redis::streams::StreamReadReply> =
            redis::AsyncCommands::xread_options(&mut conn, &[partition.queue_signal()], &[after], &opts).await?;
        let mut last = after.to_owned();
        let mut named = Vec::new();
        for key in reply.into_iter().flat_map(|r| r.keys) {
            for entry in key.ids {
                if let Some(names) = entry.get::<String>("s") {
                    named.extend(names.split(' ').filter(|n| !n.is_empty()).map(str::to_owned));
                }
                last = entry.id;
            }
        }
        if last == "$" {
            // Nothing came: go on from the stream's current end, not from "$" again,
            // so a hint written between two reads is not missed.
            let mut conn = self.conn().await?;
            let newest: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
                .arg(partition.queue_signal())
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1)
                .query_async(&mut conn)
                .await?;
            last = newest.ids.into_iter().next().map_or_else(|| "0-0".to_owned(), |e| e.id);
        }
        Ok((last, named))
    }

    /// Locks of `subscription` in `partition` expired for at least `lock`: entry ids
    /// with their counters (for the scheduler's sweep), at most `count`.
    pub async fn expired_locks(
        &self,
        partition: &Partition,
        subscription: &str,
        lock: Duration,
        count: usize,
    ) -> Result<Vec<(String, u32)>, StoreError> {
        let mut conn = self.conn().await?;
        let stream = partition.queue(subscription);
        let reply: redis::Value = redis::cmd("XPENDING")
            .arg(&stream)
            .arg(RECEIVERS_GROUP)
            .arg("IDLE")
            .arg(lock.as_millis() as u64)
            .arg("-")
            .arg("+")
            .arg(count)
            .query_async(&mut conn)
            .await
            .or_else(|e| {
                if e.code() == Some("NOGROUP") {
                    Ok(redis::Value::Nil)
                } else {
                    Err(e)
                }
            })?;
        let mut out = Vec::new();
        if let redis::Value::Array(entries) = reply {
            for entry in entries {
                let (id, _consumer, _idle, counter): (String, String, u64, u32) =
                    redis::from_redis_value(entry).map_err(redis::RedisError::from)?;
                out.push((id, counter));
            }
        }
        Ok(out)
    }

    /// Removes up to `max` queued events of the deleted subscription `subscription` in
    /// `partition` (each gives up its hold on its event), and the queue once it is
    /// empty. Returns how many were removed: call again until 0.
    pub async fn drop_queue(&self, partition: &Partition, subscription: &str, max: usize) -> Result<usize, StoreError> {
        let stream = partition.queue(subscription);
        let delayed = partition.queue_delayed(subscription);
        let mut conn = self.conn().await?;
        let (entries, members): (redis::streams::StreamRangeReply, Vec<String>) = redis::pipe()
            .cmd("XRANGE")
            .arg(&stream)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(max)
            .cmd("ZRANGE")
            .arg(&delayed)
            .arg(0)
            .arg(max.saturating_sub(1))
            .query_async(&mut conn)
            .await?;
        // (kind, id or member, event key)
        let mut items: Vec<(&str, String, String)> = Vec::new();
        for entry in entries.ids {
            let event = entry
                .get::<String>(codec::DELIVERY_FIELD)
                .and_then(|raw| codec::decode_delivery(&raw).ok())
                .map(|d| d.event_key)
                .unwrap_or_default();
            items.push(("s", entry.id, event));
        }
        for member in members {
            let event = codec::decode_delivery(&member).map(|d| d.event_key).unwrap_or_default();
            items.push(("z", member, event));
        }
        let mut call = scripts::QUEUE_DROP.prepare_invoke();
        call.key(&stream)
            .key(&delayed)
            .key(partition.queues_index())
            .key(partition.queue_cursor(subscription));
        call.arg(subscription).arg(items.len());
        for (kind, item, event) in &items {
            call.key(partition.event(event));
            call.arg(*kind).arg(item);
        }
        Ok(call.invoke_async(&mut conn).await?)
    }

    /// The oldest `count` entries of `subscription`'s queue that no receive has locked
    /// yet, oldest first (what the scheduler checks for ended time-to-lives).
    pub async fn unread_head(
        &self,
        partition: &Partition,
        subscription: &str,
        count: usize,
    ) -> Result<Vec<(String, Delivery)>, StoreError> {
        let stream = partition.queue(subscription);
        let mut conn = self.conn().await?;
        let groups: Vec<std::collections::HashMap<String, redis::Value>> = match redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(&stream)
            .query_async(&mut conn)
            .await
        {
            Ok(groups) => groups,
            // No queue yet ("no such key").
            Err(e) if e.code() == Some("ERR") => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let last = groups
            .iter()
            .find(|g| {
                g.get("name")
                    .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
                    .is_some_and(|n| n == RECEIVERS_GROUP)
            })
            .and_then(|g| g.get("last-delivered-id"))
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
            .unwrap_or_else(|| "0-0".to_owned());
        let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(&stream)
            .arg(format!("({last}"))
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut conn)
            .await?;
        Ok(reply
            .ids
            .into_iter()
            .filter_map(|e| {
                let raw: String = e.get(codec::DELIVERY_FIELD)?;
                Some((e.id, codec::decode_delivery(&raw).ok()?))
            })
            .collect())
    }

    /// Locks the oldest `count` never-received entries of `subscription` (for the
    /// scheduler, which then ends those past their time-to-live and hands the others
    /// back uncharged).
    pub async fn lock_unread(
        &self,
        partition: &Partition,
        subscription: &str,
        count: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        let stream = partition.queue(subscription);
        let opts = redis::streams::StreamReadOptions::default()
            .group(RECEIVERS_GROUP, LOCKS_CONSUMER)
            .count(count);
        let mut conn = self.conn().await?;
        let reply: Option<redis::streams::StreamReadReply> =
            redis::AsyncCommands::xread_options(&mut conn, &[&stream], &[">"], &opts).await?;
        Ok(reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| k.ids)
            .filter_map(|e| {
                let raw: String = e.get(codec::DELIVERY_FIELD)?;
                Some(QueueEntry {
                    partition: partition.index,
                    entry_id: e.id,
                    delivery: codec::decode_delivery(&raw).ok()?,
                    counter: 1,
                })
            })
            .collect())
    }

    /// One queue subscription's depths in `partition`, with `lock` its lock duration.
    pub async fn queue_depth(
        &self,
        partition: &Partition,
        subscription: &str,
        lock: Duration,
    ) -> Result<QueueDepth, StoreError> {
        let stream = partition.queue(subscription);
        let mut conn = self.conn().await?;
        // A partition this subscription never got an event in has no queue (and no group:
        // the pipeline's XPENDING would fail as a whole).
        let exists: bool = redis::cmd("EXISTS").arg(&stream).query_async(&mut conn).await?;
        if !exists {
            return Ok(QueueDepth::default());
        }
        let mut pipe = redis::pipe();
        pipe.xlen(&stream)
            .cmd("XPENDING")
            .arg(&stream)
            .arg(RECEIVERS_GROUP)
            .arg("IDLE")
            .arg(lock.as_millis() as u64)
            .arg("-")
            .arg("+")
            .arg(10_000)
            .zcard(partition.queue_delayed(subscription))
            .cmd("XRANGE")
            .arg(&stream)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1);
        let (length, expired, delayed, first): (u64, redis::Value, u64, redis::streams::StreamRangeReply) =
            match pipe.query_async(&mut conn).await {
                Ok(reply) => reply,
                Err(e) if e.code() == Some("NOGROUP") => return Ok(QueueDepth::default()),
                Err(e) => return Err(e.into()),
            };
        let expired = match expired {
            redis::Value::Array(items) => items.len() as u64,
            _ => 0,
        };
        let pending: redis::Value = redis::cmd("XPENDING")
            .arg(&stream)
            .arg(RECEIVERS_GROUP)
            .query_async(&mut conn)
            .await
            .unwrap_or(redis::Value::Nil);
        let pending = match pending {
            redis::Value::Array(items) => items
                .first()
                .and_then(|v| redis::from_redis_value_ref::<u64>(v).ok())
                .unwrap_or(0),
            _ => 0,
        };
        let oldest_ms = first
            .ids
            .into_iter()
            .next()
            .and_then(|e| e.get::<String>(codec::DELIVERY_FIELD))
            .and_then(|raw| codec::decode_delivery(&raw).ok())
            .map(|d| d.published_at.0);
        let locked = pending.saturating_sub(expired);
        Ok(QueueDepth {
            available: length.saturating_sub(locked),
            locked,
            delayed,
            oldest_ms,
        })
    }
}
