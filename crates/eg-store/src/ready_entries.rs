//! Ready entries as a reader meets them: each layout (`codec::EntryLayout`) decoded into
//! the deliveries it holds, shared entries (fan-outs, batches) handed out or expanded,
//! entries that cannot be delivered removed.

use crate::codec;
use crate::connection::Store;
use crate::error::StoreError;
use crate::keyspace::{Partition, SENDERS_GROUP};
use crate::scripts;
use crate::settlement::{Settle, Settlement, SharedHold};
use eg_core::Delivery;
use eg_core::history::HistoryEntry;
use redis::streams::{StreamId, StreamReadOptions, StreamReadReply};
use std::time::Duration;

/// A delivery read from a ready stream and now held by the reader.
#[derive(Debug, Clone)]
pub struct ReadyDelivery {
    pub partition: u16,
    pub entry_id: String,
    pub delivery: Delivery,
    /// The event's body, when the entry carries it (`Carried` layout: the event's only push
    /// delivery); `None`: it is in the event hash ([`Store::event_bodies`]), or was taken.
    pub carried_body: Option<String>,
    /// Whether the entry carries the body: what [`Settle::carries_body`] must say when
    /// this hold is settled (kept when `carried_body` is taken).
    pub carries_body: bool,
    /// Set when the entry is a fan-out or batch entry this delivery shares with its
    /// siblings, one per subscription or per event (it also carries the body then).
    pub shared: Option<SharedHold>,
}

impl ReadyDelivery {
    /// A settle of this hold, saying where its event's body is.
    pub fn settle(&self, settlement: Settlement, history: Option<HistoryEntry>) -> Settle {
        Settle {
            entry_id: self.entry_id.clone(),
            delivery: self.delivery.clone(),
            settlement,
            history,
            carries_body: self.carries_body,
            shared: self.shared,
        }
    }
}

/// What a read does with the shared entries (`FanOut` and `Batch` layouts) it meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FanOuts {
    /// Hands out their deliveries, each holding the shared entry (a sender's read).
    Deliver,
    /// Expands them into an entry per delivery (`expand_fan_out.lua`), to be read again:
    /// what taking back an abandoned entry does.
    Expand,
}

/// A held shared entry to expand (`expand_fan_out.lua`).
struct Expansion {
    entry_id: String,
    /// A fan-out's event hash; for a batch entry, which has none, the ready stream.
    event_hash: String,
    /// A fan-out's delivery records, in index order; empty for a batch entry, whose
    /// records and bodies the script takes from the entry itself.
    records: Vec<String>,
}

/// A batch entry's deliveries and their bodies (`Batch` layout: `d<i>` and `b<i>` from
/// 0), or `None` when a field is missing or a record does not decode.
fn take_batch(entry: &mut StreamId) -> Option<Vec<(Delivery, String)>> {
    let mut taken = Vec::new();
    loop {
        let index = taken.len();
        let record = take_string(entry, &codec::batch_record_field(index));
        let body = take_string(entry, &codec::batch_body_field(index));
        match (record, body) {
            (Some(record), Some(body)) => taken.push((codec::decode_delivery(&record).ok()?, body)),
            (None, None) if index > 0 => return Some(taken),
            _ => return None,
        }
    }
}

impl Store {
    /// Reads up to `count` new entries for `consumer`, waiting up to `block` for some
    /// (a zero `block` does not wait: Redis would take `BLOCK 0` as "wait forever").
    /// A fan-out entry gives one delivery per subscription and a batch entry one per
    /// event, each holding the entry ([`SharedHold`]), so a read may hand back more
    /// deliveries than `count`.
    pub async fn read_ready(
        &self,
        partition: &Partition,
        consumer: &str,
        count: usize,
        block: Duration,
    ) -> Result<Vec<ReadyDelivery>, StoreError> {
        let mut opts = StreamReadOptions::default().group(SENDERS_GROUP, consumer).count(count);
        if block.as_millis() > 0 {
            opts = opts.block(block.as_millis() as usize);
        }
        let mut conn = self.conn().await?;
        let reply: Option<StreamReadReply> =
            redis::AsyncCommands::xread_options(&mut conn, &[partition.ready()], &[">"], &opts).await?;
        drop(conn);
        let ids = reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids).collect();
        self.decode_entries(partition, ids, FanOuts::Deliver).await
    }

    /// Takes over deliveries held longer than `min_idle` by any consumer (a crashed or
    /// stuck sender's), for `consumer`.
    pub async fn claim_abandoned(
        &self,
        partition: &Partition,
        consumer: &str,
        min_idle: Duration,
        count: usize,
    ) -> Result<Vec<ReadyDelivery>, StoreError> {
        let ids = self
            .auto_claim(&partition.ready(), SENDERS_GROUP, consumer, min_idle, count)
            .await?;
        self.decode_entries(partition, ids, FanOuts::Expand).await
    }

    /// Entries that do not decode cannot be delivered by anyone: they are logged in full
    /// and removed, so they do not block the stream forever. An entry of a layout this
    /// release does not know (a newer release wrote it) is left held, not removed: it is
    /// taken back after the visibility timeout, for a sender that reads it.
    /// Fan-out and batch entries are delivered from or expanded, as `fan_outs` says.
    pub(crate) async fn decode_entries(
        &self,
        partition: &Partition,
        ids: Vec<StreamId>,
        fan_outs_do: FanOuts,
    ) -> Result<Vec<ReadyDelivery>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        let mut poison = Vec::new();
        let mut expansions: Vec<Expansion> = Vec::new();
        for mut entry in ids {
            let layout: Option<String> = entry.get(codec::ENTRY_LAYOUT_FIELD);
            let layout = match codec::EntryLayout::of(layout.as_deref()) {
                Ok(layout) => layout,
                Err(unknown) => {
                    tracing::error!(stream = %partition.ready(), entry = %entry.id, layout = %unknown, "a ready entry of a newer layout than this sender reads: upgrade it; the entry is left for a newer sender");
                    continue;
                }
            };
            if layout == codec::EntryLayout::Batch {
                let held = Some(&mut entry)
                    .filter(|_| fan_outs_do == FanOuts::Deliver)
                    .and_then(take_batch);
                match held {
                    Some(held) => {
                        let of = held.len();
                        out.extend(
                            held.into_iter()
                                .enumerate()
                                .map(|(index, (delivery, body))| ReadyDelivery {
                                    partition: partition.index,
                                    entry_id: entry.id.clone(),
                                    delivery,
                                    carried_body: Some(body),
                                    carries_body: true,
                                    shared: Some(SharedHold { index, of }),
                                }),
                        );
                    }
                    // Taken back, or a record this release cannot read: split into one
                    // `Carried` entry per delivery, each then read (or removed) alone.
                    None => {
                        if fan_outs_do == FanOuts::Deliver {
                            tracing::warn!(stream = %partition.ready(), entry = %entry.id, "a batch entry with a field missing or a record that does not decode: splitting it, so each delivery is read alone");
                        }
                        expansions.push(Expansion {
                            event_hash: partition.ready(),
                            entry_id: entry.id,
                            records: Vec::new(),
                        });
                    }
                }
                continue;
            }
            let raw: Option<String> = entry.get(codec::DELIVERY_FIELD);
            if layout == codec::EntryLayout::FanOut {
                let body = take_string(&mut entry, codec::ENTRY_BODY_FIELD);
                match (raw.as_deref().map(codec::decode_fan_out), body) {
                    (Some(Ok(deliveries)), Some(body)) if fan_outs_do == FanOuts::Deliver && !deliveries.is_empty() => {
                        let of = deliveries.len();
                        out.extend(
                            deliveries
                                .into_iter()
                                .enumerate()
                                .map(|(index, delivery)| ReadyDelivery {
                                    partition: partition.index,
                                    entry_id: entry.id.clone(),
                                    // Named as the only delivery of an event of its own:
                                    // one that lives on (retry, park, requeue) takes the
                                    // body along (its retry-set member, a hash of its own,
                                    // a new entry), which nothing else of the fan-out
                                    // counts or writes (an expansion of the entry, by any
                                    // release, included).
                                    delivery: Delivery {
                                        event_key: delivery.id.clone(),
                                        ..delivery
                                    },
                                    carried_body: Some(body.clone()),
                                    carries_body: true,
                                    shared: Some(SharedHold { index, of }),
                                }),
                        );
                    }
                    (Some(Ok(deliveries)), _) if !deliveries.is_empty() => expansions.push(Expansion {
                        event_hash: partition.event(&deliveries[0].event_key),
                        entry_id: entry.id,
                        records: deliveries.iter().map(codec::encode_delivery).collect(),
                    }),
                    _ => {
                        tracing::error!(stream = %partition.ready(), entry = %entry.id, record = ?raw, "removing a ready entry that is not a fan-out record");
                        poison.push(entry.id);
                    }
                }
                continue;
            }
            let (raw, carried_body) = match layout {
                codec::EntryLayout::Carried => (raw, take_string(&mut entry, codec::ENTRY_BODY_FIELD)),
                // A carried retry that a scheduler of an earlier release promoted whole.
                codec::EntryLayout::EventHash => match raw.as_deref().and_then(codec::split_carried_retry) {
                    Some((record, body)) => (Some(record.to_owned()), Some(body.to_owned())),
                    None => (raw, None),
                },
                codec::EntryLayout::FanOut | codec::EntryLayout::Batch => (raw, None),
            };
            let carries_body = carried_body.is_some() || layout == codec::EntryLayout::Carried;
            match raw.as_deref().map(codec::decode_delivery) {
                Some(Ok(delivery)) if carried_body.is_some() || !carries_body => out.push(ReadyDelivery {
                    partition: partition.index,
                    entry_id: entry.id,
                    delivery,
                    carried_body,
                    carries_body,
                    shared: None,
                }),
                _ => {
                    tracing::error!(stream = %partition.ready(), entry = %entry.id, record = ?raw, "removing a ready entry that is not a delivery record");
                    poison.push(entry.id);
                }
            }
        }
        if !poison.is_empty() {
            self.ack_delete(&partition.ready(), SENDERS_GROUP, &poison).await?;
        }
        self.expand(partition, &expansions).await?;
        Ok(out)
    }

    /// Expands held shared entries (`expand_fan_out.lua`): a fan-out entry into an event
    /// hash and one ready entry per delivery, a batch entry into one `Carried` entry per
    /// delivery. Their deliveries are read next, like any others.
    async fn expand(&self, partition: &Partition, expansions: &[Expansion]) -> Result<(), StoreError> {
        if expansions.is_empty() {
            return Ok(());
        }
        let mut call = scripts::EXPAND_FAN_OUT.prepare_invoke();
        call.key(partition.ready());
        call.arg(SENDERS_GROUP).arg(expansions.len());
        for expansion in expansions {
            call.key(&expansion.event_hash);
            call.arg(&expansion.entry_id).arg(expansion.records.len());
            for record in &expansion.records {
                call.arg(record);
            }
        }
        let mut conn = self.conn().await?;
        let _expanded: u64 = call.invoke_async(&mut conn).await?;
        Ok(())
    }
}

/// Takes a string field out of a stream entry without copying it.
fn take_string(entry: &mut StreamId, field: &str) -> Option<String> {
    match entry.map.remove(field)? {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
        other => redis::from_redis_value(other).ok(),
    }
}
