//! Replay jobs (archive.md, "Replay"): created by the API, listed and cancelled through
//! it, worked by eg-deadletter. A job is a hash in the partition its events are enqueued
//! on; `replay_chunk.lua` enqueues a chunk and moves the job's position in one step, and
//! `replay_finish.lua` ends it unless it ended already. The index (`Keyspace::replays`)
//! says where each job lives.

use crate::Store;
use crate::codec;
use crate::error::StoreError;
use crate::keyspace::Partition;
use crate::scripts;
use eg_core::replay::{ReplayPosition, ReplaySpec, ReplayState, ReplayView};
use eg_core::{Delivery, UnixMillis};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// How long a finished job stays readable.
pub const FINISHED_REPLAY_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

/// A job where a worker finds it: its view, where it stands and its partition.
#[derive(Debug, Clone)]
pub struct ReplayJob {
    pub view: ReplayView,
    pub position: ReplayPosition,
    pub partition: u16,
}

/// One chunk to enqueue: the events (their delivery and stored body) and how the job
/// moves.
pub struct ReplayChunk<'a> {
    pub read_at: &'a ReplayPosition,
    pub next: &'a ReplayPosition,
    pub catalog_version: u64,
    /// Archived entries this chunk read, and how many of them the filters held back.
    pub read: u64,
    pub filtered: u64,
    pub events: &'a [(Delivery, String)],
    /// The `<topic>/<subscription>` key when the subscription is a queue (pull delivery).
    pub queue: Option<&'a str>,
    pub now: UnixMillis,
}

/// What became of a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkOutcome {
    Enqueued,
    /// The job is no longer where the caller read it: another worker moved it.
    Moved,
    /// The job ended (cancelled, say) or is gone.
    NotRunning(Option<ReplayState>),
    /// The catalog changed since the caller matched: reload it and check again.
    StaleCatalog(u64),
}

impl Store {
    /// Stores a new running job `id` (unique: the caller's UUID) for `spec` on `partition`.
    pub async fn create_replay(&self, id: &str, spec: &ReplaySpec, partition: &Partition) -> Result<(), StoreError> {
        let spec_json = serde_json::to_string(spec).map_err(|e| StoreError::corrupt(partition.replay(id), e))?;
        let mut conn = self.conn().await?;
        // The job first: an index entry never names a job that was not written.
        let () = redis::cmd("HSET")
            .arg(partition.replay(id))
            .arg("spec")
            .arg(&spec_json)
            .arg("state")
            .arg(ReplayState::Running.as_str())
            .arg("position")
            .arg(ReplayPosition::default().encode())
            .arg("read")
            .arg(0)
            .arg("replayed")
            .arg(0)
            .arg("filtered")
            .arg(0)
            .query_async(&mut conn)
            .await?;
        let () = redis::cmd("HSET")
            .arg(self.keys().replays())
            .arg(id)
            .arg(format!("{} {}/{}", partition.index, spec.topic, spec.subscription))
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// The job `id`, if it exists (finished ones are kept a week).
    pub async fn replay_job(&self, id: &str) -> Result<Option<ReplayJob>, StoreError> {
        let mut conn = self.conn().await?;
        let located: Option<String> = redis::cmd("HGET")
            .arg(self.keys().replays())
            .arg(id)
            .query_async(&mut conn)
            .await?;
        let Some(partition) = located.as_deref().and_then(index_partition) else {
            return Ok(None);
        };
        drop(conn);
        self.replay_job_on(id, partition).await
    }

    /// Job `id` on `partition` (where the index or a listing put it), if still readable.
    pub async fn replay_job_on(&self, id: &str, partition: u16) -> Result<Option<ReplayJob>, StoreError> {
        let key = self.keys().partition(partition).replay(id);
        let mut conn = self.conn().await?;
        let fields: HashMap<String, String> = redis::cmd("HGETALL").arg(&key).query_async(&mut conn).await?;
        decode_job(id, partition, &key, &fields)
    }

    /// Every job still readable, of one subscription (`<topic>/<subscription>` keys) or of
    /// all, newest first. Index entries of expired jobs are removed on the way.
    pub async fn replay_jobs(&self, subscription: Option<&str>) -> Result<Vec<ReplayJob>, StoreError> {
        let mut conn = self.conn().await?;
        let index: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(self.keys().replays())
            .query_async(&mut conn)
            .await?;
        drop(conn);
        let mut by_partition: BTreeMap<u16, Vec<String>> = BTreeMap::new();
        for (id, located) in index {
            let Some((partition, of)) = located.split_once(' ') else {
                continue;
            };
            if subscription.is_some_and(|s| s != of) {
                continue;
            }
            if let Some(partition) = index_partition(partition) {
                by_partition.entry(partition).or_default().push(id);
            }
        }
        // One pipeline per partition, all at once: their keys are in different slots.
        let (_held, link) = self.link().await?;
        let reads = by_partition.into_iter().map(|(partition, ids)| {
            let mut link = link.clone();
            let keys: Vec<String> = ids
                .iter()
                .map(|id| self.keys().partition(partition).replay(id))
                .collect();
            async move {
                let mut pipe = redis::pipe();
                for key in &keys {
                    pipe.cmd("HGETALL").arg(key);
                }
                let fields: Vec<HashMap<String, String>> = pipe.query_async(&mut link).await?;
                Ok::<_, StoreError>((partition, ids, keys, fields))
            }
        });
        let mut jobs = Vec::new();
        let mut expired = Vec::new();
        for (partition, ids, keys, fields) in futures_util::future::try_join_all(reads).await? {
            for ((id, key), fields) in ids.into_iter().zip(keys).zip(fields) {
                match decode_job(&id, partition, &key, &fields)? {
                    Some(job) => jobs.push(job),
                    None => expired.push(id),
                }
            }
        }
        if !expired.is_empty() {
            let mut conn = self.conn().await?;
            let _: u64 = redis::cmd("HDEL")
                .arg(self.keys().replays())
                .arg(&expired)
                .query_async(&mut conn)
                .await?;
        }
        jobs.sort_by_key(|j| std::cmp::Reverse(j.view.spec.created_at));
        Ok(jobs)
    }

    /// Enqueues `chunk` of job `id` on `partition` and moves the job (see `replay_chunk.lua`).
    pub async fn enqueue_replay_chunk(
        &self,
        id: &str,
        partition: &Partition,
        chunk: &ReplayChunk<'_>,
    ) -> Result<ChunkOutcome, StoreError> {
        let mut invocation = scripts::REPLAY_CHUNK.prepare_invoke();
        invocation.key(partition.replay(id)).key(partition.catalog_version());
        match chunk.queue {
            Some(queue) => {
                invocation
                    .key(partition.queue(queue))
                    .key(partition.queues_index())
                    .key(partition.queue_signal());
                for (delivery, _) in chunk.events {
                    invocation.key(partition.event(&delivery.event_key));
                }
            }
            None => {
                invocation.key(partition.ready());
            }
        }
        invocation
            .arg(chunk.read_at.encode())
            .arg(chunk.next.encode())
            .arg(chunk.catalog_version)
            .arg(chunk.read)
            .arg(chunk.filtered)
            .arg(chunk.now.0)
            .arg(if chunk.queue.is_some() { "queue" } else { "push" })
            .arg(chunk.queue.unwrap_or(""));
        for (delivery, body) in chunk.events {
            let record = match chunk.queue {
                Some(_) => codec::encode_delivery(delivery),
                None => codec::encode_carried_delivery(delivery),
            };
            invocation.arg(record).arg(body);
        }
        let mut conn = self.conn().await?;
        let reply: Vec<String> = invocation.invoke_async(&mut conn).await?;
        match reply.as_slice() {
            [ok] if ok == "OK" => Ok(ChunkOutcome::Enqueued),
            [moved] if moved == "MOVED" => Ok(ChunkOutcome::Moved),
            [not, state] if not == "NOT_RUNNING" => Ok(ChunkOutcome::NotRunning(ReplayState::parse(state))),
            [stale, version] if stale == "STALE" => Ok(ChunkOutcome::StaleCatalog(version.parse().unwrap_or(0))),
            other => Err(StoreError::corrupt(
                partition.replay(id),
                format!("unexpected replay chunk reply {other:?}"),
            )),
        }
    }

    /// Ends job `id` as `state` unless it ended already; answers its state after the call
    /// (`None`: no such job).
    pub async fn finish_replay(
        &self,
        id: &str,
        partition: u16,
        state: ReplayState,
        problem: Option<&str>,
        now: UnixMillis,
    ) -> Result<Option<ReplayState>, StoreError> {
        let key = self.keys().partition(partition).replay(id);
        let mut conn = self.conn().await?;
        let after: String = scripts::REPLAY_FINISH
            .key(&key)
            .arg(state.as_str())
            .arg(now.0)
            .arg(FINISHED_REPLAY_KEPT.as_millis() as u64)
            .arg(problem.unwrap_or(""))
            .invoke_async(&mut conn)
            .await?;
        Ok(ReplayState::parse(&after))
    }

    /// Notes (or, with `None`, clears) what keeps a running job waiting, for the API.
    pub async fn note_replay_problem(&self, id: &str, partition: u16, problem: Option<&str>) -> Result<(), StoreError> {
        let key = self.keys().partition(partition).replay(id);
        let mut conn = self.conn().await?;
        match problem {
            Some(problem) => {
                // Only while the job exists: an expired one is not brought back without
                // its expiry.
                let exists: bool = redis::cmd("HEXISTS")
                    .arg(&key)
                    .arg("state")
                    .query_async(&mut conn)
                    .await?;
                if exists {
                    let () = redis::cmd("HSET")
                        .arg(&key)
                        .arg("problem")
                        .arg(problem)
                        .query_async(&mut conn)
                        .await?;
                }
            }
            None => {
                let _: u64 = redis::cmd("HDEL")
                    .arg(&key)
                    .arg("problem")
                    .query_async(&mut conn)
                    .await?;
            }
        }
        Ok(())
    }

    /// Takes (or renews) the lease on job `id` for `holder`; whether `holder` holds it now.
    pub async fn take_replay_lease(
        &self,
        id: &str,
        partition: u16,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let key = self.keys().partition(partition).replay_lease(id);
        self.take_lease(&key, holder, ttl).await
    }
}

/// A job from its hash's fields; `None` when the hash is gone (the job expired).
fn decode_job(
    id: &str,
    partition: u16,
    key: &str,
    fields: &HashMap<String, String>,
) -> Result<Option<ReplayJob>, StoreError> {
    if fields.is_empty() {
        return Ok(None);
    }
    let spec: ReplaySpec = fields
        .get("spec")
        .and_then(|raw| serde_json::from_str(raw).ok())
        .ok_or_else(|| StoreError::corrupt(key, "a replay job without a readable spec"))?;
    let state = fields
        .get("state")
        .and_then(|s| ReplayState::parse(s))
        .ok_or_else(|| StoreError::corrupt(key, "a replay job without a known state"))?;
    let position = ReplayPosition::decode(fields.get("position").map_or("", String::as_str))
        .ok_or_else(|| StoreError::corrupt(key, "a replay job with an unreadable position"))?;
    let number = |name: &str| fields.get(name).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    let time = |name: &str| fields.get(name).and_then(|n| n.parse::<i64>().ok()).map(UnixMillis);
    Ok(Some(ReplayJob {
        view: ReplayView {
            id: id.to_owned(),
            spec,
            state,
            read: number("read"),
            replayed: number("replayed"),
            filtered: number("filtered"),
            problem: fields.get("problem").cloned(),
            updated_at: time("updated"),
            finished_at: time("finished"),
        },
        position,
        partition,
    }))
}

/// The partition number of an index entry (`<partition> <topic>/<subscription>`).
fn index_partition(located: &str) -> Option<u16> {
    located.split(' ').next()?.parse().ok()
}
