//! Replay jobs (archive.md, "Replay"): a third loop of eg-deadletter, the tier that owns
//! the object stores the archive is in. Each copy looks for running jobs every second and
//! works the ones whose lease it takes; a copy that dies leaves its lease to lapse, and
//! another goes on from the job's position (eg_core::replay). A job waits until the
//! archive backlog holds nothing accepted before its window's end, then reads the
//! window's objects in archive order and enqueues the events its filters pass, a chunk
//! at a time, paced to its rate.

use crate::object_name::{key_prefix, under_key_prefix};
use crate::stores::{Destination, Stores};
use eg_core::replay::{ArchivedLine, ReplayPosition, ReplaySpec, ReplayState, objects_to_read, replay_rate};
use eg_core::{Delivery, Subscription, UnixMillis};
use eg_runtime::Shutdown;
use eg_store::replay::{ChunkOutcome, ReplayChunk, ReplayJob};
use eg_store::{CatalogCache, Clock, Partition, Store, StoreError};
use futures_util::StreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a copy looks for running jobs.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// A worker's lease on a job; renewed at every chunk, so a copy that died hands its job
/// on within this.
const LEASE: Duration = Duration::from_secs(5);
/// Most archived lines per chunk (one script call each); fewer at a low rate, so a
/// chunk's pacing never outlasts the lease.
const CHUNK_LINES: usize = 100;

pub struct Replayer {
    pub store: Store,
    pub clock: Clock,
    pub cache: Arc<CatalogCache>,
    pub stores: Arc<Stores>,
    pub consumer: String,
}

/// Why a job stopped short of its end.
enum Stop {
    /// It ended (cancelled), another worker took it, or the process is stopping.
    Left,
    /// It cannot go on: it fails, saying why.
    Fail(String),
    /// Something outside it is down (Redis, the store): it is tried again later.
    Later(String),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Later(format!("redis: {e}"))
    }
}

impl Replayer {
    pub async fn run(&self, shutdown: Shutdown) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(LOOK_EVERY) => {}
                _ = shutdown.requested() => return,
            }
            let jobs = match self.store.replay_jobs(None).await {
                Ok(jobs) => jobs,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list replay jobs");
                    continue;
                }
            };
            for job in jobs.into_iter().filter(|j| j.view.state == ReplayState::Running) {
                if shutdown.is_triggered() {
                    return;
                }
                match self
                    .store
                    .take_replay_lease(&job.view.id, job.partition, &self.consumer, LEASE)
                    .await
                {
                    Ok(true) => self.work(job, &shutdown).await,
                    Ok(false) => {}
                    Err(e) => tracing::warn!(job = %job.view.id, error = %e, "cannot take a replay lease"),
                }
            }
        }
    }

    async fn work(&self, job: ReplayJob, shutdown: &Shutdown) {
        let id = job.view.id.clone();
        tracing::info!(job = %id, topic = %job.view.spec.topic, subscription = %job.view.spec.subscription, "replay job taken");
        match self.replay(&job, shutdown).await {
            Ok(()) => {
                let now = self.clock.now();
                match self
                    .store
                    .finish_replay(&id, job.partition, ReplayState::Succeeded, None, now)
                    .await
                {
                    Ok(state) => tracing::info!(job = %id, state = ?state, "replay job finished"),
                    Err(e) => {
                        tracing::warn!(job = %id, error = %e, "cannot finish a replay job; it will be taken again")
                    }
                }
            }
            Err(Stop::Left) => {}
            Err(Stop::Fail(problem)) => {
                tracing::warn!(job = %id, problem, "replay job failed");
                if let Err(e) = self
                    .store
                    .finish_replay(
                        &id,
                        job.partition,
                        ReplayState::Failed,
                        Some(&problem),
                        self.clock.now(),
                    )
                    .await
                {
                    tracing::warn!(job = %id, error = %e, "cannot mark a replay job failed");
                }
            }
            Err(Stop::Later(problem)) => {
                tracing::warn!(job = %id, problem, "replay job waits");
                let _ = self.store.note_replay_problem(&id, job.partition, Some(&problem)).await;
            }
        }
    }

    /// Works `job` to its end (or until it must stop).
    async fn replay(&self, job: &ReplayJob, shutdown: &Shutdown) -> Result<(), Stop> {
        let spec = &job.view.spec;
        let partition = self.store.keys().partition(job.partition);
        self.wait_for_the_archive_writer(job, shutdown).await?;
        let (sub, archive) = self.find(spec, &job.view.id).await?;
        let destination = Destination::from(&archive.destination);
        let built = self
            .stores
            .get(&destination)
            .map_err(|f| Stop::Later(format!("the archive's store: {}", f.message)))?;
        // `<prefix>/` or nothing: stripped from listed names, put back to read them.
        let prefix = under_key_prefix(key_prefix(&destination.store), String::new());
        let mut position = job.position.clone();
        let rate = replay_rate(spec, &sub);
        let mut pace = Pace::new(rate);
        let chunk_lines = (rate as usize).clamp(1, CHUNK_LINES);
        for hour in spec.hour_folders() {
            let mut names = Vec::new();
            let mut listing = built.store.list(Some(&ObjectPath::from(format!("{prefix}{hour}"))));
            while let Some(item) = listing.next().await {
                let meta = item.map_err(|e| Stop::Later(format!("listing the archive: {e}")))?;
                let name = meta.location.as_ref();
                names.push(name.strip_prefix(prefix.as_str()).unwrap_or(name).to_owned());
            }
            drop(listing);
            for name in objects_to_read(spec, &names, &position) {
                let lines = self.read_object(&built.store, &format!("{prefix}{name}")).await?;
                let mut at = position.lines_done(name);
                while at < lines.len() {
                    if shutdown.is_triggered() {
                        return Err(Stop::Left);
                    }
                    let end = (at + chunk_lines).min(lines.len());
                    let next = self
                        .enqueue(job, &partition, &sub, name, &lines[at..end], &position, end)
                        .await?;
                    pace.wait(next.1).await;
                    position = next.0;
                    at = end;
                    if !self
                        .store
                        .take_replay_lease(&job.view.id, job.partition, &self.consumer, LEASE)
                        .await?
                    {
                        return Err(Stop::Left);
                    }
                }
            }
        }
        Ok(())
    }

    /// Enqueues the events of `lines` (lines `..end` of `object`) that the window and the
    /// filters pass, moving the job from `position`; answers the new position and how
    /// many events went.
    #[allow(clippy::too_many_arguments)]
    async fn enqueue(
        &self,
        job: &ReplayJob,
        partition: &Partition,
        sub: &Subscription,
        object: &str,
        lines: &[String],
        position: &ReplayPosition,
        end: usize,
    ) -> Result<(ReplayPosition, usize), Stop> {
        let spec = &job.view.spec;
        let part = eg_core::replay::ObjectOrder::of(&spec.topic, object).map_or(0, |o| o.partition);
        let mut sub = Arc::new(sub.clone());
        loop {
            let snapshot = self.cache.snapshot();
            let now = self.clock.now();
            let format = snapshot
                .topic(&spec.topic)
                .map(|e| e.topic.input_schema.stored_format())
                .unwrap_or_default();
            let mut next = position.clone();
            next.object = object.to_owned();
            next.line = end;
            let (mut read, mut filtered) = (0u64, 0u64);
            let mut events = Vec::new();
            for raw in lines {
                let line = ArchivedLine::parse(raw).map_err(|e| Stop::Fail(format!("{object}: {e}")))?;
                if next.handled(part, &line.stream_id) {
                    continue;
                }
                next.last.insert(part, line.stream_id.clone());
                if !spec.in_window(line.accepted_at) {
                    continue;
                }
                read += 1;
                let event = line.accepted(format);
                let routing = event.routing();
                let passes = sub.matches(&routing, now) && spec.filter.as_ref().is_none_or(|f| f.matches(&routing));
                if !passes {
                    filtered += 1;
                    continue;
                }
                events.push((
                    replayed_delivery(job, &event, format, snapshot.version, now),
                    event.json.clone(),
                ));
            }
            let queue = (!sub.is_push()).then(|| format!("{}/{}", spec.topic, spec.subscription));
            let chunk = ReplayChunk {
                read_at: position,
                next: &next,
                catalog_version: snapshot.version,
                read,
                filtered,
                events: &events,
                queue: queue.as_deref(),
                now,
            };
            match self.store.enqueue_replay_chunk(&job.view.id, partition, &chunk).await? {
                ChunkOutcome::Enqueued => return Ok((next, events.len())),
                ChunkOutcome::Moved => {
                    tracing::info!(job = %job.view.id, "replay job moved on by another worker; leaving it");
                    return Err(Stop::Left);
                }
                ChunkOutcome::NotRunning(state) => {
                    tracing::info!(job = %job.view.id, state = ?state, "replay job ended; leaving it");
                    return Err(Stop::Left);
                }
                ChunkOutcome::StaleCatalog(_) => {
                    self.cache.reload().await?;
                    sub = Arc::new(self.find(spec, &job.view.id).await?.0);
                }
            }
        }
    }

    /// The job's subscription and its topic's archive, as the catalog has them now. A
    /// subscription or archive this copy's catalog does not show yet (created a moment
    /// ago through the API) is looked for again in a freshly read catalog before the job
    /// fails for it.
    async fn find(&self, spec: &ReplaySpec, id: &str) -> Result<(Subscription, eg_core::topic::Archive), Stop> {
        match Self::find_in(&self.cache.snapshot(), spec, id) {
            Err(Stop::Fail(_)) => Self::find_in(&*self.cache.reload().await?, spec, id),
            found => found,
        }
    }

    fn find_in(
        snapshot: &eg_store::CatalogSnapshot,
        spec: &ReplaySpec,
        id: &str,
    ) -> Result<(Subscription, eg_core::topic::Archive), Stop> {
        let entry = snapshot
            .topic(&spec.topic)
            .ok_or_else(|| Stop::Fail(format!("topic {:?} was deleted", spec.topic)))?;
        let archive = entry
            .topic
            .archive
            .clone()
            .ok_or_else(|| Stop::Fail(format!("topic {:?} is no longer archived", spec.topic)))?;
        let sub = entry
            .subscriptions
            .iter()
            .find(|s| s.name.key() == spec.subscription)
            .ok_or_else(|| Stop::Fail(format!("subscription {:?} was deleted", spec.subscription)))?;
        if sub.ordering.is_some() && sub.is_push() {
            return Err(Stop::Fail(format!(
                "subscription {:?} orders its deliveries now; job {id} cannot keep that order",
                spec.subscription
            )));
        }
        Ok((Subscription::clone(sub), archive))
    }

    /// Waits while an event accepted before the window's end may still be in the archive
    /// backlog (not written yet): reading the archive before then would miss it.
    async fn wait_for_the_archive_writer(&self, job: &ReplayJob, shutdown: &Shutdown) -> Result<(), Stop> {
        let mut noted = false;
        loop {
            let mut waiting = false;
            for partition in self.store.keys().all_partitions() {
                let size = self.store.archive_backlog_size(&partition).await?;
                waiting |= size.oldest.is_some_and(|oldest| oldest < job.view.spec.to.0);
            }
            if !waiting {
                if noted {
                    self.store
                        .note_replay_problem(&job.view.id, job.partition, None)
                        .await?;
                }
                return Ok(());
            }
            if !noted {
                let problem = "waiting for the archive writer: events accepted in the window are still in Redis";
                self.store
                    .note_replay_problem(&job.view.id, job.partition, Some(problem))
                    .await?;
                noted = true;
            }
            tokio::select! {
                _ = tokio::time::sleep(LOOK_EVERY) => {}
                _ = shutdown.requested() => return Err(Stop::Left),
            }
            if !self
                .store
                .take_replay_lease(&job.view.id, job.partition, &self.consumer, LEASE)
                .await?
            {
                return Err(Stop::Left);
            }
        }
    }

    /// The lines of one archive object (gzip JSON lines).
    async fn read_object(&self, store: &Arc<dyn object_store::ObjectStore>, name: &str) -> Result<Vec<String>, Stop> {
        let path = ObjectPath::from(name);
        let bytes = store
            .get(&path)
            .await
            .map_err(|e| Stop::Later(format!("reading {name}: {e}")))?
            .bytes()
            .await
            .map_err(|e| Stop::Later(format!("reading {name}: {e}")))?;
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .map_err(|e| Stop::Fail(format!("{name} is not gzip JSON lines: {e}")))?;
        Ok(text.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect())
    }
}

/// The delivery of one replayed event: a fresh id and event key, a time-to-live counting
/// from now, the event's own id, and the job's mark.
fn replayed_delivery(
    job: &ReplayJob,
    event: &eg_core::event::AcceptedEvent,
    format: eg_core::StoredFormat,
    catalog_version: u64,
    now: UnixMillis,
) -> Delivery {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let spec = &job.view.spec;
    let mut delivery = Delivery::new(id.clone(), id, spec.topic.clone(), spec.subscription.clone(), now);
    delivery.format = format;
    delivery.catalog_version = catalog_version;
    delivery.event_id = event.id().to_owned();
    delivery.data_version = event.data_version().map(str::to_owned);
    delivery.replay = Some(job.view.id.clone());
    delivery
}

/// Paces enqueued events to a rate: after each chunk, waits until the events so far are
/// not ahead of it.
struct Pace {
    per_second: f64,
    started: Instant,
    sent: f64,
}

impl Pace {
    fn new(per_second: f64) -> Self {
        Self {
            per_second,
            started: Instant::now(),
            sent: 0.0,
        }
    }

    async fn wait(&mut self, events: usize) {
        self.sent += events as f64;
        let due = Duration::from_secs_f64(self.sent / self.per_second);
        if let Some(ahead) = due.checked_sub(self.started.elapsed()) {
            tokio::time::sleep(ahead).await;
        }
    }
}
