//! The delivery queues of each partition: publish (store events, enqueue deliveries),
//! read ready deliveries, settle an attempt, promote due retries, reclaim abandoned
//! deliveries, and hand dead-letter records to the dead-letter worker.

use crate::codec;
use crate::connection::Store;
use crate::error::StoreError;
use crate::keyspace::{DEADLETTER_GROUP, Partition, SENDERS_GROUP};
pub use crate::ready_entries::ReadyDelivery;
use crate::scripts;
pub use crate::settlement::{Retention, Settle, Settled, Settlement, SharedHold};
use eg_core::Delivery;
use eg_core::deadletter::DeadLetterEntry;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadOptions, StreamReadReply};
use std::time::Duration;

pub use crate::codec::{ArchiveAppend, DuplicateCheck, EventToStore, Routes, WhenFull};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishOutcome {
    /// Written; `duplicates` are the positions (in the events given) of the events a
    /// duplicate check skipped, in order: nothing of them was written.
    Stored { duplicates: Vec<usize> },
    /// The catalog changed after the caller's snapshot (at this version): nothing was
    /// written; re-match with a fresh catalog and try again.
    StaleCatalog(u64),
    /// The topic is archived and its partition's archive backlog is at the bound, with
    /// `WhenFull::Refuse`: nothing was written (archive.md).
    ArchiveFull { backlog: u64 },
}

/// The positions (from 0) of the events `publish.lua` skipped, from its space-separated
/// event numbers (from 1); `None` when one is not a number.
fn skipped_positions(skipped: &str) -> Option<Vec<usize>> {
    skipped
        .split_ascii_whitespace()
        .map(|i| i.parse::<usize>().ok()?.checked_sub(1))
        .collect()
}

/// Publish calls of events up to this many bytes in all share one connection
/// (`crate::shared_link`): many small calls then travel together. Larger ones take a
/// pooled connection each: measured (issue 31), requests of 100 events of 1 KB cost the
/// ingress ~3 µs more per event on the shared one, and published ~12 % fewer.
const SHARED_LINK_MOST_BYTES: usize = 16 * 1024;

/// What one promote call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promoted {
    pub moved: usize,
    /// How long until the earliest member left falls due (by Redis's clock), if any.
    pub next_in: Option<Duration>,
}

/// A dead-letter record read from a dead-letter stream.
#[derive(Debug, Clone)]
pub struct DeadLetterItem {
    pub partition: u16,
    pub entry_id: String,
    pub entry: DeadLetterEntry,
    pub event_json: String,
}

/// Queue depths of one partition.
#[derive(Debug, Clone, Copy, Default)]
pub struct Depths {
    pub ready: u64,
    pub in_flight: u64,
    pub retry: u64,
    /// Deliveries set aside for paused subscriptions.
    pub paused: u64,
    pub deadletter_backlog: u64,
    /// Deliveries of ordered subscriptions waiting behind their key's head (in lines,
    /// not yet in any of the above).
    pub waiting_in_lines: u64,
}

impl Store {
    /// Stores the events of one publish request and enqueues their deliveries in one
    /// atomic step on one partition. `catalog_version` is the snapshot matched against.
    pub async fn publish(
        &self,
        partition: &Partition,
        catalog_version: u64,
        events: &[EventToStore],
    ) -> Result<PublishOutcome, StoreError> {
        self.publish_routed(partition, catalog_version, events, &Routes::default())
            .await
    }

    /// [`Store::publish`], with deliveries routed as `routes` says: those of queue-mode
    /// subscriptions into their queue stream for pull receivers instead of the ready
    /// stream, those of batching subscriptions together into `Batch` entries.
    pub async fn publish_routed(
        &self,
        partition: &Partition,
        catalog_version: u64,
        events: &[EventToStore],
        routes: &Routes,
    ) -> Result<PublishOutcome, StoreError> {
        self.publish_checked(partition, catalog_version, events, routes, None)
            .await
    }

    /// [`Store::publish_routed`], skipping each event whose identity the topic accepted
    /// within its duplicate detection window (`check`; in the same atomic step). A topic
    /// with a window publishes to its home partition only, so every copy meets one set.
    pub async fn publish_checked(
        &self,
        partition: &Partition,
        catalog_version: u64,
        events: &[EventToStore],
        routes: &Routes,
        check: Option<&DuplicateCheck>,
    ) -> Result<PublishOutcome, StoreError> {
        self.publish_archived(partition, catalog_version, events, routes, check, None)
            .await
            .map(|(outcome, _)| outcome)
    }

    /// [`Store::publish_checked`], appending the events of an archived topic to the
    /// partition's archive backlog in the same atomic step (`archive`). Also answers how
    /// many backlog entries were dropped to stay within the bound (`WhenFull::DropOldest`).
    pub async fn publish_archived(
        &self,
        partition: &Partition,
        catalog_version: u64,
        events: &[EventToStore],
        routes: &Routes,
        check: Option<&DuplicateCheck>,
        archive: Option<&ArchiveAppend>,
    ) -> Result<(PublishOutcome, u64), StoreError> {
        let call = codec::PublishCall::new(partition, catalog_version, events, routes, check, archive);
        let bytes: usize = events.iter().map(|e| e.body.len()).sum();
        let reply: Vec<String> = if self.replica_acks == 0 && bytes <= SHARED_LINK_MOST_BYTES {
            call.invocation().invoke_async(&mut self.shared().await?).await?
        } else if self.replica_acks == 0 {
            call.invocation().invoke_async(&mut self.conn().await?).await?
        } else {
            let mut conn = self.conn().await?;
            // The script and WAIT in one pipeline on one connection.
            let mut write = redis::pipe();
            call.eval_into(&mut write);
            let slot = crate::keyspace::slot(&partition.ready());
            let (mut replies, acked) = conn
                .write_and_wait(slot, &write, self.replica_acks, self.replica_ack_timeout)
                .await?;
            let reply: Vec<String> = match replies.pop() {
                Some(value) => redis::from_redis_value(value).map_err(redis::RedisError::from)?,
                None => Vec::new(),
            };
            if reply.first().is_some_and(|r| r == "OK") && acked < self.replica_acks {
                return Err(StoreError::NotReplicated {
                    acked,
                    wanted: self.replica_acks,
                });
            }
            reply
        };
        match reply.as_slice() {
            [ok, skipped, dropped] if ok == "OK" => Ok((
                PublishOutcome::Stored {
                    duplicates: skipped_positions(skipped).ok_or_else(|| {
                        StoreError::corrupt(partition.ready(), format!("publish skipped {skipped:?}"))
                    })?,
                },
                dropped.parse().unwrap_or(0),
            )),
            [stale, version] if stale == "STALE" => Ok((PublishOutcome::StaleCatalog(version.parse().unwrap_or(0)), 0)),
            [full, backlog] if full == "ARCHIVE_FULL" => Ok((
                PublishOutcome::ArchiveFull {
                    backlog: backlog.parse().unwrap_or(0),
                },
                0,
            )),
            other => Err(StoreError::corrupt(
                partition.ready(),
                format!("unexpected publish reply {other:?}"),
            )),
        }
    }

    /// `XAUTOCLAIM`, following its cursor through the whole pending list: one call scans
    /// only about ten times `COUNT` entries, and abandoned entries may sit behind many
    /// live ones.
    pub(crate) async fn auto_claim(
        &self,
        stream: &str,
        group: &str,
        consumer: &str,
        min_idle: Duration,
        count: usize,
    ) -> Result<Vec<StreamId>, StoreError> {
        let mut conn = self.conn().await?;
        let mut cursor = "0-0".to_owned();
        let mut claimed = Vec::new();
        loop {
            let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
                .arg(stream)
                .arg(group)
                .arg(consumer)
                .arg(min_idle.as_millis() as u64)
                .arg(&cursor)
                .arg("COUNT")
                .arg(count - claimed.len())
                .query_async(&mut conn)
                .await?;
            claimed.extend(reply.claimed);
            cursor = reply.next_stream_id;
            if cursor == "0-0" || claimed.len() >= count {
                return Ok(claimed);
            }
        }
    }

    /// The stored bodies of these events (`None` where an event is gone).
    pub async fn event_bodies(
        &self,
        partition: &Partition,
        event_keys: &[&str],
    ) -> Result<Vec<Option<String>>, StoreError> {
        if event_keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for key in event_keys {
            pipe.hget(partition.event(key), codec::EVENT_BODY_FIELD);
        }
        let mut conn = self.conn().await?;
        Ok(pipe.query_async(&mut conn).await?)
    }

    /// Settles holds of one partition in one script call (see `settle.lua`), each in
    /// order, atomically: ends the hold on the item's ready entry and moves its delivery
    /// on, appending its history step and archiving a dead-letter record for redrive,
    /// within `retention`. Nothing changes for an entry that is no longer held (reclaimed
    /// or settled by someone else). Returns one [`Settled`] per item, in order.
    pub async fn settle_many(
        &self,
        partition: &Partition,
        items: &[Settle],
        retention: &Retention,
    ) -> Result<Vec<Settled>, StoreError> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let call = codec::SettleCall::new(partition, items, retention)?;
        let mut conn = self.conn().await?;
        let replies: Vec<u64> = call.invocation().invoke_async(&mut conn).await?;
        let called = call.items();
        if replies.len() != called {
            return Err(StoreError::corrupt(
                partition.ready(),
                format!("settle answered {} results for {} items", replies.len(), called),
            ));
        }
        Ok(call
            .answers
            .iter()
            .map(|&item| replies.get(item).copied().unwrap_or_default())
            .map(|reply| Settled {
                took_effect: reply > 0,
                archive_evicted: reply.saturating_sub(1),
            })
            .collect())
    }

    /// Cancels the queued retry `delivery` (the record exactly as settled with
    /// `Settlement::Retry`) after a late success. `carried_body`: the body the attempt
    /// sent, when its entry carried it (the retry then waits beside its body). `false`
    /// when it is no longer queued.
    pub async fn cancel_retry(
        &self,
        partition: &Partition,
        delivery: &Delivery,
        carried_body: Option<&str>,
    ) -> Result<bool, StoreError> {
        let mut conn = self.conn().await?;
        let mut call = scripts::CANCEL_RETRY.prepare_invoke();
        call.key(partition.retry())
            .key(partition.event(&delivery.event_key))
            .key(partition.ready())
            .arg(codec::encode_delivery(delivery))
            .arg(codec::line_marker(partition, delivery).unwrap_or_default())
            .arg(format!("{}/{}", delivery.topic, delivery.subscription));
        if let Some(body) = carried_body {
            call.arg(body);
        }
        let cancelled: i64 = call.invoke_async(&mut conn).await?;
        Ok(cancelled == 1)
    }

    /// Moves retries that are due into the ready stream; returns how many moved and when
    /// the earliest left is due, so a scheduler can wake for it instead of at its next tick.
    pub async fn promote_retries(&self, partition: &Partition, max: usize) -> Result<Promoted, StoreError> {
        self.promote(
            &partition.retry(),
            &partition.ready(),
            codec::DELIVERY_FIELD,
            max,
            Duration::ZERO,
            Members::MayCarryBodies,
        )
        .await
    }

    /// Moves dead-letter records older than `delay` into the dead-letter stream.
    pub async fn promote_due_dead_letters(
        &self,
        partition: &Partition,
        delay: Duration,
        max: usize,
    ) -> Result<usize, StoreError> {
        Ok(self
            .promote(
                &partition.deadletter_delay(),
                &partition.deadletter(),
                codec::DEAD_LETTER_FIELD,
                max,
                delay,
                Members::Whole,
            )
            .await?
            .moved)
    }

    async fn promote(
        &self,
        set: &str,
        stream: &str,
        field: &str,
        max: usize,
        delay: Duration,
        members: Members,
    ) -> Result<Promoted, StoreError> {
        let mut conn = self.conn().await?;
        let (moved, wait_ms): (usize, i64) = scripts::PROMOTE
            .key(set)
            .key(stream)
            .arg(field)
            .arg(max)
            .arg(delay.as_millis() as u64)
            .arg(match members {
                Members::MayCarryBodies => "1",
                Members::Whole => "0",
            })
            .invoke_async(&mut conn)
            .await?;
        Ok(Promoted {
            moved,
            next_in: u64::try_from(wait_ms).ok().map(Duration::from_millis),
        })
    }

    /// Reads dead-letter records: first those another worker (or this one) held longer
    /// than `retry_after` without finishing, then new ones.
    pub async fn read_dead_letters(
        &self,
        partition: &Partition,
        consumer: &str,
        count: usize,
        retry_after: Duration,
    ) -> Result<Vec<DeadLetterItem>, StoreError> {
        let mut ids = self
            .auto_claim(&partition.deadletter(), DEADLETTER_GROUP, consumer, retry_after, count)
            .await?;
        let mut conn = self.conn().await?;
        if ids.len() < count {
            let opts = StreamReadOptions::default()
                .group(DEADLETTER_GROUP, consumer)
                .count(count - ids.len());
            let reply: Option<StreamReadReply> =
                redis::AsyncCommands::xread_options(&mut conn, &[partition.deadletter()], &[">"], &opts).await?;
            ids.extend(reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids));
        }
        drop(conn);
        let mut out = Vec::with_capacity(ids.len());
        let mut poison = Vec::new();
        for entry in ids {
            let raw: Option<String> = entry.get(codec::DEAD_LETTER_FIELD);
            match raw.as_deref().map(codec::decode_dead_letter) {
                Some(Ok((entry_meta, event_json))) => out.push(DeadLetterItem {
                    partition: partition.index,
                    entry_id: entry.id,
                    entry: entry_meta,
                    event_json,
                }),
                _ => {
                    tracing::error!(stream = %partition.deadletter(), entry = %entry.id, record = ?raw, "removing a dead-letter entry that does not parse");
                    poison.push(entry.id);
                }
            }
        }
        if !poison.is_empty() {
            self.finish_dead_letters(partition, &poison).await?;
        }
        Ok(out)
    }

    pub(crate) async fn ack_delete(&self, stream: &str, group: &str, ids: &[String]) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut conn = self.conn().await?;
        Ok(scripts::ACK_DELETE
            .key(stream)
            .arg(group)
            .arg(ids)
            .invoke_async(&mut conn)
            .await?)
    }

    pub async fn depths(&self, partition: &Partition) -> Result<Depths, StoreError> {
        let mut pipe = redis::pipe();
        pipe.xlen(partition.ready())
            .cmd("XPENDING")
            .arg(partition.ready())
            .arg(SENDERS_GROUP)
            .zcard(partition.retry())
            .zcard(partition.deadletter_delay())
            .xlen(partition.deadletter())
            .smembers(partition.paused_index())
            .hvals(partition.lines_waiting());
        let mut conn = self.conn().await?;
        let (ready, pending, retry, delayed, dl, paused_subscriptions, waiting): (
            u64,
            redis::Value,
            u64,
            u64,
            u64,
            Vec<String>,
            Vec<u64>,
        ) = pipe.query_async(&mut conn).await?;
        let mut paused = 0;
        if !paused_subscriptions.is_empty() {
            let mut pipe = redis::pipe();
            for subscription in &paused_subscriptions {
                pipe.zcard(partition.paused(subscription));
            }
            let counts: Vec<u64> = pipe.query_async(&mut conn).await?;
            paused = counts.iter().sum();
        }
        let in_flight = match pending {
            redis::Value::Array(items) => items
                .first()
                .and_then(|v| redis::from_redis_value_ref::<u64>(v).ok())
                .unwrap_or(0),
            _ => 0,
        };
        Ok(Depths {
            ready: ready.saturating_sub(in_flight),
            in_flight,
            retry,
            paused,
            deadletter_backlog: delayed + dl,
            waiting_in_lines: waiting.iter().sum(),
        })
    }
}

/// What the members of a set `promote.lua` moves are.
#[derive(Debug, Clone, Copy)]
enum Members {
    /// Retries: a member may be a carried retry (`record\nbody`, `settle_steps.lua`),
    /// which becomes a `Carried` entry.
    MayCarryBodies,
    /// Written to the stream's field as they are (dead-letter records, `entry\nbody`).
    Whole,
}

#[cfg(test)]
mod tests {
    use super::skipped_positions;

    #[test]
    fn the_scripts_skipped_event_numbers_become_positions_from_zero() {
        assert_eq!(skipped_positions(""), Some(vec![]));
        assert_eq!(skipped_positions("1 3"), Some(vec![0, 2]));
        assert_eq!(skipped_positions("0"), None, "the script numbers events from 1");
        assert_eq!(skipped_positions("x"), None);
    }
}
