//! The dead-letter archive: every dead-lettered delivery's record (entry and event), kept
//! per subscription and partition beside the dead-letter files, so operators can list,
//! show, redrive and purge dead letters through the management API.
//!
//! Records enter in `settle.lua` (the step that dead-letters them), are redriven by
//! `redrive.lua` (each at most once: it leaves the not-yet-redriven set in the same step)
//! and leave only by `purge.lua` or, past the per-subscription bound, oldest first.

use crate::codec;
use crate::connection::Store;
use crate::error::StoreError;
use crate::keyspace::{Archive, Partition};
use crate::scripts;
use eg_core::deadletter::{DeadLetterEntry, stored_event_id};
use eg_core::{Delivery, UnixMillis};
use std::collections::HashSet;

/// How many dead letters a subscription has, over all partitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeadLetterCounts {
    pub total: u64,
    pub not_redriven: u64,
}

/// One archived dead-letter record.
#[derive(Debug, Clone)]
pub struct ArchivedRecord {
    /// The record id (the dead-lettered delivery's id).
    pub id: String,
    pub partition: u16,
    pub entry: DeadLetterEntry,
    pub event_json: String,
    pub redriven_at: Option<UnixMillis>,
}

impl ArchivedRecord {
    /// The event's own id (read from the event for entries written before entries held it).
    pub fn event_id(&self) -> String {
        if self.entry.event_id.is_empty() {
            stored_event_id(&self.event_json).unwrap_or_default()
        } else {
            self.entry.event_id.clone()
        }
    }

    fn decode(id: String, partition: u16, raw: &str, redriven_at: Option<i64>) -> Option<Self> {
        let (entry, event_json) = codec::decode_dead_letter(raw).ok()?;
        Some(Self {
            id,
            partition,
            entry,
            event_json,
            redriven_at: redriven_at.map(UnixMillis),
        })
    }
}

/// Dead-letter times to look at: `from` inclusive, `to` exclusive; `None` is open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeRange {
    pub from: Option<UnixMillis>,
    pub to: Option<UnixMillis>,
}

impl TimeRange {
    fn min(&self) -> String {
        self.from.map_or("-inf".into(), |t| t.0.to_string())
    }
    fn max(&self) -> String {
        self.to.map_or("+inf".into(), |t| format!("({}", t.0))
    }
}

/// Which records an operation applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every record in the time range.
    Range(TimeRange),
    /// These record ids.
    Ids(Vec<String>),
    /// The records of these events (by the events' own ids) in the time range.
    EventIds(TimeRange, Vec<String>),
}

/// Where a page of a listing ends: the next page starts after this record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub at: UnixMillis,
    pub id: String,
}

impl Cursor {
    pub fn encode(&self) -> String {
        format!("{}:{}", self.at.0, self.id)
    }

    pub fn decode(raw: &str) -> Option<Self> {
        let (at, id) = raw.split_once(':')?;
        Some(Self {
            at: UnixMillis(at.parse().ok()?),
            id: id.to_owned(),
        })
    }

    fn is_before(&self, at: UnixMillis, id: &str) -> bool {
        (self.at, self.id.as_str()) < (at, id)
    }
}

/// Result of one chunk of a redrive or purge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Records handled by this call.
    pub done: u64,
    /// Records the selection still matches that are not handled yet.
    pub remaining: u64,
}

/// Records read per round trip while scanning.
const SCAN_CHUNK: usize = 500;

/// Which of a subscription's archive sets to read.
#[derive(Debug, Clone, Copy)]
enum Set {
    All,
    Waiting,
}

impl Set {
    fn key(self, archive: &Archive) -> &str {
        match self {
            Self::All => &archive.all,
            Self::Waiting => &archive.waiting,
        }
    }
}

impl Store {
    /// How many dead letters `subscription` (`<topic>/<subscription>` keys) has.
    pub async fn dead_letter_counts(&self, topic: &str, subscription: &str) -> Result<DeadLetterCounts, StoreError> {
        let subscription = format!("{topic}/{subscription}");
        // One pipeline per partition, all at once: their keys are in different slots.
        let (_held, link) = self.link().await?;
        let per_partition = self.keys().all_partitions().map(|p| {
            let archive = p.archive(&subscription);
            let mut link = link.clone();
            async move {
                redis::pipe()
                    .zcard(archive.all)
                    .zcard(archive.waiting)
                    .query_async::<(u64, u64)>(&mut link)
                    .await
            }
        });
        let counts = futures_util::future::try_join_all(per_partition).await?;
        Ok(counts
            .into_iter()
            .fold(DeadLetterCounts::default(), |acc, (all, waiting)| DeadLetterCounts {
                total: acc.total + all,
                not_redriven: acc.not_redriven + waiting,
            }))
    }

    /// [`Self::dead_letter_counts`] of many subscriptions (`topic/subscription` each), in
    /// their order, for the status page: one pipeline per partition carries every
    /// subscription's two counts, so the page costs as many round trips as there are
    /// partitions, not that times the subscriptions.
    pub async fn dead_letter_counts_of(&self, subscriptions: &[String]) -> Result<Vec<DeadLetterCounts>, StoreError> {
        if subscriptions.is_empty() {
            return Ok(Vec::new());
        }
        let (_held, link) = self.link().await?;
        let per_partition = self.keys().all_partitions().map(|p| {
            let mut pipe = redis::pipe();
            for subscription in subscriptions {
                let archive = p.archive(subscription);
                pipe.zcard(archive.all).zcard(archive.waiting);
            }
            let mut link = link.clone();
            async move { pipe.query_async::<Vec<u64>>(&mut link).await }
        });
        let mut totals = vec![DeadLetterCounts::default(); subscriptions.len()];
        for counts in futures_util::future::try_join_all(per_partition).await? {
            // Two replies per subscription, as queued: all kept, then waiting.
            for (sum, pair) in totals.iter_mut().zip(counts.chunks_exact(2)) {
                sum.total += pair[0];
                sum.not_redriven += pair[1];
            }
        }
        Ok(totals)
    }

    /// One page of a subscription's dead letters in `range`, oldest first, starting after
    /// `after`; the cursor of the next page when there may be more.
    pub async fn dead_letter_page(
        &self,
        subscription: &str,
        range: TimeRange,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<ArchivedRecord>, Option<Cursor>), StoreError> {
        let limit = limit.max(1);
        let range = TimeRange {
            from: after.map(|c| c.at).max(range.from),
            ..range
        };
        let mut found: Vec<(UnixMillis, String, u16)> = Vec::new();
        for p in self.keys().all_partitions() {
            let archive = p.archive(subscription);
            let mut offset = 0;
            let mut taken = 0;
            // Records at the cursor's own millisecond that come before it are skipped; they
            // sort first (same score, ordered by id), so this ends quickly.
            while taken < limit {
                let chunk = self.scan(Set::All.key(&archive), range, offset, SCAN_CHUNK).await?;
                let len = chunk.len();
                for (id, at) in chunk {
                    if after.is_none_or(|c| c.is_before(at, &id)) {
                        found.push((at, id, p.index));
                        taken += 1;
                    }
                }
                if len < SCAN_CHUNK {
                    break;
                }
                offset += len;
            }
        }
        found.sort();
        let more = found.len() > limit;
        found.truncate(limit);
        let next = match (more, found.last()) {
            (true, Some((at, id, _))) => Some(Cursor {
                at: *at,
                id: id.clone(),
            }),
            _ => None,
        };
        let mut records = Vec::with_capacity(found.len());
        for p in self.keys().all_partitions() {
            let ids: Vec<String> = found
                .iter()
                .filter(|(_, _, index)| *index == p.index)
                .map(|(_, id, _)| id.clone())
                .collect();
            records.extend(self.archived(&p, subscription, &ids).await?.into_iter().flatten());
        }
        records.sort_by(|a, b| (a.entry.dead_lettered_at, &a.id).cmp(&(b.entry.dead_lettered_at, &b.id)));
        Ok((records, next))
    }

    /// One archived record, wherever it is.
    pub async fn dead_letter(&self, subscription: &str, id: &str) -> Result<Option<ArchivedRecord>, StoreError> {
        for p in self.keys().all_partitions() {
            if let Some(record) = self.archived(&p, subscription, &[id.to_owned()]).await?.pop().flatten() {
                return Ok(Some(record));
            }
        }
        Ok(None)
    }

    /// Sends up to `limit` selected records that were not redriven yet back into
    /// delivery, each as the delivery `redelivery` makes of it (a new delivery id and
    /// event key, no attempts). Each record is redriven at most once, however often or
    /// concurrently this runs.
    pub async fn redrive_dead_letters(
        &self,
        subscription: &str,
        selection: &Selection,
        limit: u64,
        redelivery: impl Fn(&ArchivedRecord) -> Delivery,
    ) -> Result<Progress, StoreError> {
        let mut done = 0;
        for p in self.keys().all_partitions() {
            let archive = p.archive(subscription);
            while done < limit {
                let want = SCAN_CHUNK.min((limit - done) as usize);
                let ids = self.select(&p, &archive, Set::Waiting, selection, want).await?;
                if ids.is_empty() {
                    break;
                }
                let records: Vec<ArchivedRecord> = self
                    .archived(&p, subscription, &ids)
                    .await?
                    .into_iter()
                    .flatten()
                    .collect();
                if records.len() < ids.len() {
                    self.unredrivable(&archive, &ids, &records).await?;
                }
                done += self.redrive_chunk(&p, &archive, &records, &redelivery).await?;
                if matches!(selection, Selection::Ids(_)) {
                    break;
                }
            }
        }
        let remaining = self.count_selected(subscription, Set::Waiting, selection).await?;
        Ok(Progress { done, remaining })
    }

    /// Removes up to `limit` selected records from the archive for good.
    pub async fn purge_dead_letters(
        &self,
        subscription: &str,
        selection: &Selection,
        limit: u64,
    ) -> Result<Progress, StoreError> {
        let mut done = 0;
        for p in self.keys().all_partitions() {
            let archive = p.archive(subscription);
            while done < limit {
                let want = SCAN_CHUNK.min((limit - done) as usize);
                let ids = self.select(&p, &archive, Set::All, selection, want).await?;
                if ids.is_empty() {
                    break;
                }
                let mut conn = self.conn().await?;
                let purged: u64 = scripts::PURGE
                    .key(&archive.all)
                    .key(&archive.waiting)
                    .key(&archive.records)
                    .arg(&ids)
                    .invoke_async(&mut conn)
                    .await?;
                done += purged;
                if purged == 0 || matches!(selection, Selection::Ids(_)) {
                    break;
                }
            }
        }
        let remaining = self.count_selected(subscription, Set::All, selection).await?;
        Ok(Progress { done, remaining })
    }

    /// Ids among `ids` without a readable record (logged when read) can never be
    /// redriven: they leave the waiting set, so they do not stop every later redrive at
    /// the same place. They stay listed until purged.
    async fn unredrivable(
        &self,
        archive: &Archive,
        ids: &[String],
        records: &[ArchivedRecord],
    ) -> Result<(), StoreError> {
        let readable: HashSet<&str> = records.iter().map(|r| r.id.as_str()).collect();
        let stuck: Vec<&String> = ids.iter().filter(|id| !readable.contains(id.as_str())).collect();
        let mut conn = self.conn().await?;
        let _: u64 = redis::AsyncCommands::zrem(&mut conn, &archive.waiting, &stuck).await?;
        Ok(())
    }

    async fn redrive_chunk(
        &self,
        partition: &Partition,
        archive: &Archive,
        records: &[ArchivedRecord],
        redelivery: &impl Fn(&ArchivedRecord) -> Delivery,
    ) -> Result<u64, StoreError> {
        if records.is_empty() {
            return Ok(0);
        }
        let mut invocation = scripts::REDRIVE.prepare_invoke();
        invocation
            .key(&archive.waiting)
            .key(&archive.records)
            .key(partition.ready());
        let deliveries: Vec<Delivery> = records.iter().map(redelivery).collect();
        for d in &deliveries {
            invocation.key(partition.event(&d.event_key));
        }
        invocation.arg(deliveries.first().map_or(0, |d| d.published_at.0));
        for (record, delivery) in records.iter().zip(&deliveries) {
            invocation.arg(&record.id).arg(codec::encode_delivery(delivery));
        }
        let mut conn = self.conn().await?;
        Ok(invocation.invoke_async(&mut conn).await?)
    }

    /// Up to `want` ids of `set` in one partition that `selection` picks. Waiting-set
    /// scans always start at the front: what was handled has left the set.
    async fn select(
        &self,
        partition: &Partition,
        archive: &Archive,
        set: Set,
        selection: &Selection,
        want: usize,
    ) -> Result<Vec<String>, StoreError> {
        match selection {
            Selection::Range(range) => Ok(self
                .scan(set.key(archive), *range, 0, want)
                .await?
                .into_iter()
                .map(|(id, _)| id)
                .collect()),
            Selection::Ids(ids) => self.present(set.key(archive), ids).await,
            Selection::EventIds(range, event_ids) => {
                let wanted: HashSet<&str> = event_ids.iter().map(String::as_str).collect();
                let mut picked = Vec::new();
                let mut offset = 0;
                loop {
                    let chunk = self.scan(set.key(archive), *range, offset, SCAN_CHUNK).await?;
                    let ids: Vec<String> = chunk.iter().map(|(id, _)| id.clone()).collect();
                    let records = self.archived_in(archive, partition.index, &ids).await?;
                    picked.extend(
                        records
                            .into_iter()
                            .flatten()
                            .filter(|r| wanted.contains(r.event_id().as_str()))
                            .map(|r| r.id),
                    );
                    if picked.len() >= want || chunk.len() < SCAN_CHUNK {
                        picked.truncate(want);
                        return Ok(picked);
                    }
                    offset += chunk.len();
                }
            }
        }
    }

    async fn count_selected(&self, subscription: &str, set: Set, selection: &Selection) -> Result<u64, StoreError> {
        let mut total = 0;
        for p in self.keys().all_partitions() {
            let archive = p.archive(subscription);
            total += match selection {
                Selection::Range(range) => {
                    let mut conn = self.conn().await?;
                    redis::AsyncCommands::zcount::<_, _, _, u64>(&mut conn, set.key(&archive), range.min(), range.max())
                        .await?
                }
                Selection::Ids(ids) => self.present(set.key(&archive), ids).await?.len() as u64,
                Selection::EventIds(..) => self.select(&p, &archive, set, selection, usize::MAX).await?.len() as u64,
            };
        }
        Ok(total)
    }

    /// `(id, dead-letter time)` of the members of `set` in `range`, from `offset` on.
    async fn scan(
        &self,
        set: &str,
        range: TimeRange,
        offset: usize,
        count: usize,
    ) -> Result<Vec<(String, UnixMillis)>, StoreError> {
        let mut conn = self.conn().await?;
        let found: Vec<(String, i64)> = redis::cmd("ZRANGE")
            .arg(set)
            .arg(range.min())
            .arg(range.max())
            .arg("BYSCORE")
            .arg("LIMIT")
            .arg(offset)
            .arg(count)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await?;
        Ok(found.into_iter().map(|(id, at)| (id, UnixMillis(at))).collect())
    }

    /// Those of `ids` that are members of `set`.
    async fn present(&self, set: &str, ids: &[String]) -> Result<Vec<String>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn().await?;
        let scores: Vec<Option<f64>> = redis::cmd("ZMSCORE").arg(set).arg(ids).query_async(&mut conn).await?;
        Ok(ids
            .iter()
            .zip(scores)
            .filter(|(_, s)| s.is_some())
            .map(|(id, _)| id.clone())
            .collect())
    }

    /// The records with these ids in one partition (`None` where there is none).
    async fn archived(
        &self,
        partition: &Partition,
        subscription: &str,
        ids: &[String],
    ) -> Result<Vec<Option<ArchivedRecord>>, StoreError> {
        self.archived_in(&partition.archive(subscription), partition.index, ids)
            .await
    }

    async fn archived_in(
        &self,
        archive: &Archive,
        partition: u16,
        ids: &[String],
    ) -> Result<Vec<Option<ArchivedRecord>>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.hget(&archive.records, id)
                .hget(&archive.records, format!("{id}:r"));
        }
        let mut conn = self.conn().await?;
        let values: Vec<Option<String>> = pipe.query_async(&mut conn).await?;
        Ok(ids
            .iter()
            .zip(values.chunks(2))
            .map(|(id, pair)| {
                let raw = pair.first()?.as_deref()?;
                let redriven_at = pair.get(1).cloned().flatten().and_then(|t| t.parse().ok());
                let record = ArchivedRecord::decode(id.clone(), partition, raw, redriven_at);
                if record.is_none() {
                    tracing::error!(key = %archive.records, record = %id, "an archived dead-letter record does not decode");
                }
                record
            })
            .collect())
    }
}
