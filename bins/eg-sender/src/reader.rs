//! The sender's loops: one reader per partition feeding attempts, bounded by one
//! semaphore for the whole process. A reader asks Redis only for as many deliveries as
//! there are free slots, so nothing waits in this process unattended while its
//! visibility timeout runs.

use crate::{attempt, settle};
use eg_core::subscription::Subscription;
use eg_core::{DeliveryPolicy, LastAttempt};
use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_runtime::startup::Process;
use eg_store::{Catalog, CatalogCache, Clock, Partition, ReadyDelivery, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tracing::Instrument;

/// Longest a blocking read waits, so shutdown is noticed promptly.
const READ_BLOCK: Duration = Duration::from_secs(1);

pub struct Sender {
    store: Store,
    cache: Arc<CatalogCache>,
    clock: Clock,
    policy: DeliveryPolicy,
    client: reqwest::Client,
    slots: Arc<Semaphore>,
    concurrency: usize,
    max_response_bytes: usize,
    consumer: String,
}

impl Sender {
    pub fn catalog(&self) -> Arc<CatalogCache> {
        self.cache.clone()
    }

    pub async fn build(process: &Process) -> anyhow::Result<Arc<Self>> {
        let s = &process.settings;
        let consumer = format!(
            "sender-{}-{}-{:04x}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "local".into()),
            std::process::id(),
            rand::random::<u16>()
        );
        tracing::info!(%consumer, concurrency = s.sender.concurrency, "sender ready");
        Ok(Arc::new(Self {
            store: process.store.clone(),
            cache: Arc::new(CatalogCache::load(Catalog::new(process.store.clone())).await?),
            clock: process.clock.clone(),
            policy: s.delivery_policy()?,
            client: crate::http::client(s.delivery.timeout)?,
            slots: Arc::new(Semaphore::new(s.sender.concurrency.max(1))),
            concurrency: s.sender.concurrency.max(1),
            max_response_bytes: s.sender.max_response_bytes,
            consumer,
        }))
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

    async fn read_partition(self: Arc<Self>, partition: Partition, shutdown: Shutdown) {
        let mut backoff = Duration::from_millis(100);
        while !shutdown.is_triggered() {
            let first = tokio::select! {
                permit = self.slots.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => return },
                _ = shutdown.requested() => return,
            };
            let free = 1 + self.slots.available_permits();
            // Not cancelled by shutdown: entries Redis hands over must reach an attempt, not
            // sit pending until the visibility timeout. The read waits at most READ_BLOCK.
            let batch = self
                .store
                .read_ready(&partition, &self.consumer, free.min(100), READ_BLOCK)
                .await;
            let deliveries = match batch {
                Ok(d) => {
                    backoff = Duration::from_millis(100);
                    d
                }
                Err(e) => {
                    if e.is_missing_group() {
                        tracing::warn!("consumer group missing (redis lost its data?); recreating it");
                        let _ = self.store.ensure_groups().await;
                    } else {
                        tracing::warn!(error = %e, partition = partition.index, retry_in = ?backoff, "cannot read deliveries");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                    continue;
                }
            };
            let bodies = match self.bodies(&partition, &deliveries).await {
                Ok(b) => b,
                Err(e) => {
                    // The deliveries stay pending and are reclaimed after the visibility timeout.
                    tracing::warn!(error = %e, "cannot read event bodies");
                    continue;
                }
            };
            let mut first = Some(first);
            for (ready, body) in deliveries.into_iter().zip(bodies) {
                let permit = match first.take() {
                    Some(p) => p,
                    None => match self.slots.clone().acquire_owned().await {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                };
                let sender = self.clone();
                let partition = partition.clone();
                let span = tracing::info_span!(
                    "delivery",
                    topic = %ready.delivery.topic,
                    subscription = %ready.delivery.subscription,
                    delivery = %ready.delivery.id,
                    attempt = ready.delivery.attempts
                );
                tokio::spawn(
                    async move {
                        sender.deliver(&partition, ready, body).await;
                        drop(permit);
                    }
                    .instrument(span),
                );
            }
        }
    }

    async fn bodies(
        &self,
        partition: &Partition,
        deliveries: &[ReadyDelivery],
    ) -> Result<Vec<Option<String>>, eg_store::StoreError> {
        let keys: Vec<&str> = deliveries.iter().map(|d| d.delivery.event_key.as_str()).collect();
        self.store.event_bodies(partition, &keys).await
    }

    /// One delivery, from pick-up to settlement.
    async fn deliver(&self, partition: &Partition, ready: ReadyDelivery, body: Option<String>) {
        let delivery = &ready.delivery;
        let subscription = match self.subscription(&delivery.topic, &delivery.subscription).await {
            Ok(Some(subscription)) => subscription,
            Ok(None) => {
                self.settle(partition, &ready, settle::dropped(delivery, "SubscriptionDeleted"))
                    .await;
                return;
            }
            // Unknown whether it still exists: leave it held; it is taken back and retried
            // after the visibility timeout rather than dropped on a Redis hiccup.
            Err(e) => {
                tracing::warn!(error = %e, "cannot look up the subscription; leaving the delivery for later");
                return;
            }
        };
        let Some(body) = body else {
            tracing::error!(delivery = %delivery.id, event = %delivery.event_key, "the stored event is gone");
            self.settle(partition, &ready, settle::dropped(delivery, "EventMissing"))
                .await;
            return;
        };
        let limits = subscription.retry_policy;
        if let Some(reason) = self.policy.before_attempt(delivery, &limits, self.clock.now()) {
            let decision = eg_core::Decision::DeadLetter(reason);
            let settlement = settle::settlement(decision, delivery, &subscription, self.clock.now());
            self.settle(partition, &ready, settlement).await;
            return;
        }
        let result = attempt::send(&self.client, &subscription, delivery, &body, self.max_response_bytes).await;
        let now = self.clock.now();
        let outcome_name = result.outcome.name();
        let attempted = delivery.after_attempt(LastAttempt {
            outcome: outcome_name,
            status: result.outcome.status_code(),
            at: now,
        });
        metrics::histogram!(m::DESTINATION_PROCESSING_DURATION_MS, "topic" => delivery.topic.clone(), "subscription" => delivery.subscription.clone())
            .record(result.took.as_secs_f64() * 1000.0);
        if !result.outcome.is_success() {
            metrics::counter!(m::DELIVERY_ATTEMPT_FAIL_COUNT, "topic" => delivery.topic.clone(), "subscription" => delivery.subscription.clone(), "outcome" => outcome_name.as_str())
                .increment(1);
        }
        let decision = self
            .policy
            .after_attempt(&attempted, &limits, &result.outcome, now, rand::random::<f64>());
        tracing::debug!(
            topic = %delivery.topic, subscription = %delivery.subscription, delivery = %delivery.id,
            attempt = attempted.attempts, outcome = %outcome_name, status = ?result.outcome.status_code(),
            took_ms = result.took.as_millis() as u64, ?decision, "attempt"
        );
        let settlement = settle::settlement(decision, &attempted, &subscription, now);
        self.settle(partition, &ready, settlement).await;
    }

    /// The subscription, refreshing the catalog once if this copy does not know it yet
    /// (it may have been created a moment ago through another process). `Ok(None)` means
    /// it does not exist; an error means that could not be known.
    async fn subscription(&self, topic: &str, name: &str) -> Result<Option<Subscription>, eg_store::StoreError> {
        if let Some(s) = self.cache.snapshot().subscription(topic, name) {
            return Ok(Some(s.clone()));
        }
        Ok(self.cache.refresh().await?.subscription(topic, name).cloned())
    }

    /// Settles, retrying while Redis is unreachable. If it never succeeds the delivery
    /// stays pending and is reclaimed after the visibility timeout: a duplicate, not a loss.
    async fn settle(&self, partition: &Partition, ready: &ReadyDelivery, settled: settle::Settled) {
        let mut backoff = Duration::from_millis(50);
        for _ in 0..10 {
            match self
                .store
                .settle(
                    partition,
                    &ready.entry_id,
                    &ready.delivery.event_key,
                    &settled.settlement,
                )
                .await
            {
                Ok(true) => {
                    settled.record();
                    return;
                }
                Ok(false) => {
                    tracing::info!(delivery = %ready.delivery.id, "delivery was taken back before this attempt settled; the new holder owns it");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, delivery = %ready.delivery.id, retry_in = ?backoff, "cannot settle");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
        tracing::error!(delivery = %ready.delivery.id, "giving up settling; the delivery will be reclaimed and retried");
    }
}
