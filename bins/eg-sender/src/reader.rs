//! The sender's loops: one reader per partition feeding batches of deliveries to
//! attempts, bounded by one semaphore for the whole process (a slot per request). A
//! reader takes free slots first and asks Redis for that many deliveries — times the
//! largest `maxEventsPerBatch` in the catalog, since one slot may carry a whole batch.
//! Deliveries read together for the same subscription are cut into batches by its batch
//! settings (optimistic batching: what is ready now, never waiting to fill a batch). A
//! batch beyond the slots held waits for one; if none frees within the read's budget
//! ([`Sender::slot_wait_budget`]), the rest are handed back uncharged instead of waiting
//! in this process until they are taken back.

use crate::destinations::Destinations;
use crate::late::LateListeners;
use crate::settle_queue::SettleQueue;
use crate::steps::{self, Batch, Held, Steps};
use crate::store::RedisStore;
use crate::verdict::Verdict;
use eg_runtime::Shutdown;
use eg_runtime::startup::Process;
use eg_store::{CatalogCache, Partition, ReadyDelivery, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tracing::Instrument;

/// The sender process: its partition readers, its slots, and the steps every batch
/// goes through.
pub struct Sender {
    store: Store,
    cache: Arc<CatalogCache>,
    consumer: String,
    /// One per request in flight, shared by every partition reader.
    slots: Arc<Semaphore>,
    concurrency: usize,
    /// How long a delivery read may stay unsettled before a scheduler takes it back.
    visibility_timeout: Duration,
    steps: Steps<RedisStore, Destinations>,
}

/// Longest a blocking read waits, so shutdown is noticed promptly.
const READ_BLOCK: Duration = Duration::from_secs(1);
/// Most deliveries read at once per partition.
const MAX_READ: usize = 500;
/// How many deliveries to read with `slots` slots in hand when a subscription may batch
/// up to `largest_batch` events per request: enough to fill a batch per slot, at most
/// [`MAX_READ`], at least one per slot.
fn read_size(slots: usize, largest_batch: u32) -> usize {
    let per_slot = usize::try_from(largest_batch.max(1)).unwrap_or(1);
    slots.saturating_mul(per_slot).min(MAX_READ).max(slots)
}

/// The pause after a failed read, doubling with each failure in a row up to the last.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const LAST_BACKOFF: Duration = Duration::from_secs(5);

/// How long a woken reader waits for a slot when none is free (longer than one read).
const SLOT_WAIT: Duration = Duration::from_millis(20);

impl Sender {
    pub async fn build(process: &Process) -> anyhow::Result<Arc<Self>> {
        let s = &process.settings;
        let consumer = process.consumer.clone();
        tracing::info!(%consumer, concurrency = s.sender.concurrency, "sender ready");
        let cache = process.load_catalog().await?;
        let cache = Arc::new(cache);
        let queue = SettleQueue::start(&process.store, s.retention());
        let destinations = Destinations::from_settings(s)?;
        tokio::spawn(crate::identities::report(
            process.store.clone(),
            destinations.token_watch(),
            process.clock.clone(),
            process.shutdown.clone(),
        ));
        let steps = Steps::new(
            RedisStore::new(process.store.clone(), queue, cache.clone()),
            destinations,
            process.clock.clone(),
            s.delivery_policies()?,
            s.probation_policy()?,
            s.delivery.timeout,
            LateListeners::new(s.sender.late_success_window, s.sender.max_late_listeners),
        );
        Ok(Arc::new(Self {
            store: process.store.clone(),
            cache,
            consumer,
            slots: Arc::new(Semaphore::new(s.sender.concurrency.max(1))),
            concurrency: s.sender.concurrency.max(1),
            visibility_timeout: s.delivery.visibility_timeout,
            steps,
        }))
    }

    pub fn catalog(&self) -> Arc<CatalogCache> {
        self.cache.clone()
    }

    /// Runs until shutdown, then waits for the attempts in flight to settle.
    pub async fn run(self: Arc<Self>, shutdown: Shutdown) {
        let readers: Vec<_> = self
            .store
            .keys()
            .all_partitions()
            .map(|p| tokio::spawn(self.clone().read_partition(p, shutdown.clone())))
            .collect();
        for r in readers {
            let _ = r.await;
        }
        // Every slot back means every attempt has settled.
        let _ = self.slots.acquire_many(self.concurrency as u32).await;
    }

    /// One partition's reader, read after read until shutdown: take a slot, read, look
    /// up and batch, dispatch each batch to an attempt.
    async fn read_partition(self: Arc<Self>, partition: Partition, shutdown: Shutdown) {
        let mut backoff = FIRST_BACKOFF;
        while !shutdown.is_triggered() {
            let Some(mut permits) = self.take_slot(&shutdown).await else {
                return;
            };
            // Not cancelled by shutdown: entries Redis hands over must reach an attempt, not
            // sit pending until the visibility timeout. The read waits at most READ_BLOCK.
            let Some(deliveries) = self.read_or_back_off(&partition, &mut permits, &mut backoff).await else {
                continue;
            };
            if deliveries.is_empty() {
                continue;
            }
            let Some(batches) = self.prepare(&partition, deliveries).await else {
                continue;
            };
            self.dispatch(batches, permits, &shutdown).await;
        }
    }

    /// Slots are taken before reading: a read is sized by the slots in hand (times what
    /// one batch can carry), so little sits pending here unattended, and what waits for a
    /// slot is handed back in time (the partition readers share the slots and would
    /// otherwise over-read together). `None`: shutting down.
    async fn take_slot(&self, shutdown: &Shutdown) -> Option<OwnedSemaphorePermit> {
        tokio::select! {
            permit = self.slots.clone().acquire_owned() => permit.ok(),
            _ = shutdown.requested() => None,
        }
    }

    /// [`Sender::read`], backing off after a failed read (`None`: nothing read this
    /// time). A missing consumer group is recreated at once.
    async fn read_or_back_off(
        &self,
        partition: &Partition,
        permits: &mut OwnedSemaphorePermit,
        backoff: &mut Duration,
    ) -> Option<Vec<ReadyDelivery>> {
        match self.read(partition, permits).await {
            Ok(deliveries) => {
                *backoff = FIRST_BACKOFF;
                Some(deliveries)
            }
            Err(e) => {
                if e.is_missing_group() {
                    tracing::warn!("consumer group missing (redis lost its data?); recreating it");
                    let _ = self.store.ensure_groups().await;
                } else {
                    tracing::warn!(error = %e, partition = partition.index, retry_in = ?*backoff, "cannot read deliveries");
                    tokio::time::sleep(*backoff).await;
                    *backoff = (*backoff * 2).min(LAST_BACKOFF);
                }
                None
            }
        }
    }

    /// The look-up and batch steps for what was read (`None`: the events could not be
    /// read).
    async fn prepare(&self, partition: &Partition, deliveries: Vec<ReadyDelivery>) -> Option<Vec<Batch>> {
        match self.steps.look_up(partition, deliveries).await {
            Ok(found) => Some(steps::batches(found)),
            Err(e) => {
                // The deliveries stay pending and are reclaimed after the visibility timeout.
                tracing::warn!(error = %e, "cannot prepare deliveries; they will be reclaimed");
                None
            }
        }
    }

    /// Starts an attempt per batch, each holding one slot. The slots of deliveries settled
    /// unattempted, or merged into batches, go back when `permits` is dropped; batches
    /// beyond the slots held wait for one, and are handed back if none frees in time.
    async fn dispatch(self: &Arc<Self>, batches: Vec<Batch>, mut permits: OwnedSemaphorePermit, shutdown: &Shutdown) {
        // One deadline for every batch of this read that waits for a slot.
        let slot_deadline = tokio::time::Instant::now() + self.slot_wait_budget();
        let mut batches = batches.into_iter();
        while let Some(batch) = batches.next() {
            let permit = match permits.split(1) {
                Some(permit) => permit,
                None => match self.wait_for_slot(slot_deadline, shutdown).await {
                    Some(permit) => permit,
                    None => {
                        self.hand_back(std::iter::once(batch).chain(batches.by_ref())).await;
                        break;
                    }
                },
            };
            let sender = self.clone();
            let span = tracing::info_span!(
                "delivery",
                topic = %batch.subscription.topic,
                subscription = %batch.subscription.name,
                events = batch.held.len(),
            );
            // Boxed: the delivery's future is large, and a task's future is copied as it
            // is spawned and polled (those copies were 4 % of the sender's CPU).
            tokio::spawn(
                async move {
                    Box::pin(sender.steps.deliver(batch)).await;
                    drop(permit);
                }
                .instrument(span),
            );
        }
    }

    /// How long the batches of one read may wait for slots, all together: a quarter of
    /// the visibility timeout, and at most half of what it leaves after an attempt's
    /// timeout, so a batch that waited still settles long before it could be taken back.
    fn slot_wait_budget(&self) -> Duration {
        (self.visibility_timeout / 4).min(self.visibility_timeout.saturating_sub(self.steps.attempt_timeout()) / 2)
    }

    /// A slot for a batch read ahead of the slots held, waiting until `deadline` at most
    /// (`None`: none freed, or shutting down).
    async fn wait_for_slot(&self, deadline: tokio::time::Instant, shutdown: &Shutdown) -> Option<OwnedSemaphorePermit> {
        tokio::select! {
            permit = tokio::time::timeout_at(deadline, self.slots.clone().acquire_owned()) => permit.ok()?.ok(),
            _ = shutdown.requested() => None,
        }
    }

    /// Hands batches that found no slot back to the ready stream as they were (uncharged),
    /// rather than keep them here while their visibility timeout runs.
    async fn hand_back(&self, batches: impl Iterator<Item = Batch>) {
        let now = self.steps.clock().now();
        let held: Vec<Held> = batches.flat_map(|b| b.held).collect();
        tracing::warn!(
            deliveries = held.len(),
            "no free slot for deliveries read ahead; handing them back"
        );
        self.steps
            .settle_all(held.iter().map(|h| (h, Verdict::handed_back(&h.ready.delivery, now))))
            .await;
    }

    /// Waits (at most READ_BLOCK) for the next delivery holding one slot, then takes
    /// free slots for what is ready with it and reads up to [`read_size`] more without
    /// waiting: an idle reader never sits on slots another partition's reader could use,
    /// and what one publish stored together is read together (and can be batched).
    async fn read(
        &self,
        partition: &Partition,
        permits: &mut OwnedSemaphorePermit,
    ) -> Result<Vec<ReadyDelivery>, eg_store::StoreError> {
        let mut ready = self.store.read_ready(partition, &self.consumer, 1, READ_BLOCK).await?;
        if !ready.is_empty()
            && let Some(more) = self.take_free_slots(MAX_READ - 1).await
        {
            permits.merge(more);
            let largest_batch = self.cache.snapshot().largest_batch;
            let wanted = read_size(permits.num_permits(), largest_batch);
            // A fan-out entry is a delivery per subscription, a batch entry one per event:
            // when the first entry was one, read as many fewer entries, so what is read
            // still fits the slots.
            let extra = wanted.saturating_sub(ready.len()) / ready.len();
            if extra > 0 {
                match self
                    .store
                    .read_ready(partition, &self.consumer, extra, Duration::ZERO)
                    .await
                {
                    Ok(rest) => ready.extend(rest),
                    // What was read stays ours to attempt; the rest waits for the next read.
                    Err(e) => tracing::warn!(error = %e, "cannot read more deliveries"),
                }
            }
            // Slots beyond what was read go back at once, for the other readers.
            if let Some(unused) = permits.num_permits().checked_sub(ready.len())
                && unused > 0
            {
                drop(permits.split(unused));
            }
        }
        Ok(ready)
    }

    /// Takes up to `most` free slots. When none is free, waits a moment for one: another
    /// reader may hold the free ones for the length of one read (`None`: still none).
    async fn take_free_slots(&self, most: usize) -> Option<OwnedSemaphorePermit> {
        if let Some(taken) = self.try_take_slots(most) {
            return Some(taken);
        }
        let mut taken = tokio::time::timeout(SLOT_WAIT, self.slots.clone().acquire_owned())
            .await
            .ok()?
            .ok()?;
        if let Some(more) = self.try_take_slots(most - 1) {
            taken.merge(more);
        }
        Some(taken)
    }

    /// Takes up to `most` of the slots free now, without waiting (`None`: none free).
    fn try_take_slots(&self, most: usize) -> Option<OwnedSemaphorePermit> {
        loop {
            let free = self.slots.available_permits().min(most);
            if free == 0 {
                return None;
            }
            // Another reader may take slots between the count and the take: count again.
            match self.slots.clone().try_acquire_many_owned(free as u32) {
                Ok(taken) => return Some(taken),
                Err(TryAcquireError::NoPermits) => continue,
                Err(TryAcquireError::Closed) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ahead_of_the_slots_only_as_far_as_a_batch_can_carry() {
        assert_eq!(read_size(4, 1), 4, "nothing batches: one delivery per slot");
        assert_eq!(read_size(4, 10), 40);
        assert_eq!(read_size(10, 100), MAX_READ, "bounded");
        assert_eq!(read_size(MAX_READ + 1, 1), MAX_READ + 1, "never fewer than the slots");
        assert_eq!(read_size(1, 0), 1);
    }
}
