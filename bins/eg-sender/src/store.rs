//! The store seam: the few operations of eg-store the steps of an attempt need, as a
//! trait, so each step is tested with a recording double instead of a Redis. The
//! Redis implementation ([`RedisStore`]) is eg-store itself plus this process's settle
//! queue and catalog cache.

use crate::endpoint_records::{EndpointRecords, RecordError};
use crate::settle_queue::{SettleError, SettleQueue};
use eg_core::probation::{EndpointAttempt, EndpointId, Gate, ProbationChange, ProbationPolicy};
use eg_core::subscription::{DeliveryLimits, Subscription};
use eg_core::throttle::{BusyPolicy, GateAsk, ThrottleGate, ThrottleId};
use eg_core::{Delivery, UnixMillis};
use eg_store::{CatalogCache, Partition, Settle, Settled, Store, StoreError};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// What the steps ask of the store.
pub trait DeliveryStore: Clone + Send + Sync + 'static {
    /// The stored events under `event_keys`, in order (`None`: gone).
    fn event_bodies(
        &self,
        partition: &Partition,
        event_keys: &[&str],
    ) -> impl Future<Output = Result<Vec<Option<String>>, StoreError>> + Send;

    /// The delivery's subscription as of the catalog version it was matched against or
    /// later (`None`: it does not exist).
    fn subscription_of(
        &self,
        delivery: &Delivery,
    ) -> impl Future<Output = Result<Option<Arc<Subscription>>, StoreError>> + Send;

    /// Settles one delivery (with whatever else of its partition is settling now).
    fn settle(
        &self,
        partition: &Partition,
        settle: Settle,
    ) -> impl Future<Output = Result<Settled, SettleError>> + Send;

    /// The endpoint's probation gate; a probe holds a lease of `probe_lease`.
    fn endpoint_gate(
        &self,
        endpoint: &EndpointId,
        now: UnixMillis,
        probe_lease: Duration,
    ) -> impl Future<Output = Result<Gate, StoreError>> + Send;

    /// Records a finished attempt against the endpoint's probation record (with whatever
    /// else of that endpoint is being recorded now).
    fn record_endpoint_result(
        &self,
        endpoint: &EndpointId,
        attempt: &EndpointAttempt,
        policy: &ProbationPolicy,
    ) -> impl Future<Output = Result<ProbationChange, RecordError>> + Send;

    /// The subscription as the catalog has it now (`None`: it is gone).
    fn current_subscription(
        &self,
        subscription: &Subscription,
    ) -> impl Future<Output = Result<Option<Arc<Subscription>>, StoreError>> + Send;

    /// Removes a queued retry of `delivery` (`false`: it is no longer queued);
    /// `carried_body`, the body the attempt sent when its entry carried it.
    fn cancel_retry(
        &self,
        partition: &Partition,
        delivery: &Delivery,
        carried_body: Option<&str>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// The subscription's shared delivery limits gate (`limits` `None`: only whether it is
    /// slowed down). Doubles without limits let everything through.
    fn delivery_gate(
        &self,
        _id: &ThrottleId,
        _limits: Option<&DeliveryLimits>,
        ask: GateAsk<'_>,
        _policy: BusyPolicy,
    ) -> impl Future<Output = Result<ThrottleGate, StoreError>> + Send {
        let granted = ask.want.max(1);
        async move { Ok(ThrottleGate::Go { granted }) }
    }

    /// Ends an attempt's lease (`""`: none) and, with the `Retry-After` of a busy answer,
    /// slows the subscription; returns the end of the slowdown.
    fn delivery_feedback(
        &self,
        _id: &ThrottleId,
        _now: UnixMillis,
        _lease: &str,
        _retry_after: Option<Duration>,
        _policy: BusyPolicy,
    ) -> impl Future<Output = Result<Option<UnixMillis>, StoreError>> + Send {
        async { Ok(None) }
    }
}

/// The store seam over Redis.
#[derive(Clone)]
pub struct RedisStore {
    store: Store,
    queue: Arc<SettleQueue>,
    records: EndpointRecords,
    catalog: Arc<CatalogCache>,
}

impl RedisStore {
    pub fn new(store: Store, queue: SettleQueue, catalog: Arc<CatalogCache>) -> Self {
        Self {
            records: EndpointRecords::new(store.clone()),
            store,
            queue: Arc::new(queue),
            catalog,
        }
    }
}

impl DeliveryStore for RedisStore {
    async fn event_bodies(
        &self,
        partition: &Partition,
        event_keys: &[&str],
    ) -> Result<Vec<Option<String>>, StoreError> {
        self.store.event_bodies(partition, event_keys).await
    }

    /// The cached catalog's copy, unless it is older than the version the delivery was
    /// matched against (a subscription changed a moment ago through another process) or
    /// does not know the subscription yet: then the catalog is refreshed first.
    async fn subscription_of(&self, delivery: &Delivery) -> Result<Option<Arc<Subscription>>, StoreError> {
        let (topic, name) = (&delivery.topic, &delivery.subscription);
        let snapshot = self.catalog.snapshot();
        if snapshot.version >= delivery.catalog_version
            && let Some(s) = snapshot.subscription_arc(topic, name)
        {
            return Ok(Some(s.clone()));
        }
        Ok(self.catalog.refresh().await?.subscription_arc(topic, name).cloned())
    }

    async fn settle(&self, partition: &Partition, settle: Settle) -> Result<Settled, SettleError> {
        self.queue.settle(partition, settle).await
    }

    async fn endpoint_gate(
        &self,
        endpoint: &EndpointId,
        now: UnixMillis,
        probe_lease: Duration,
    ) -> Result<Gate, StoreError> {
        self.store.endpoint_gate(endpoint, now, probe_lease).await
    }

    async fn record_endpoint_result(
        &self,
        endpoint: &EndpointId,
        attempt: &EndpointAttempt,
        policy: &ProbationPolicy,
    ) -> Result<ProbationChange, RecordError> {
        self.records.record(endpoint, attempt, policy).await
    }

    async fn current_subscription(&self, subscription: &Subscription) -> Result<Option<Arc<Subscription>>, StoreError> {
        let snapshot = self.catalog.refresh().await?;
        Ok(snapshot
            .subscription_arc(&subscription.topic.key(), &subscription.name.key())
            .cloned())
    }

    async fn cancel_retry(
        &self,
        partition: &Partition,
        delivery: &Delivery,
        carried_body: Option<&str>,
    ) -> Result<bool, StoreError> {
        self.store.cancel_retry(partition, delivery, carried_body).await
    }

    async fn delivery_gate(
        &self,
        id: &ThrottleId,
        limits: Option<&DeliveryLimits>,
        ask: GateAsk<'_>,
        policy: BusyPolicy,
    ) -> Result<ThrottleGate, StoreError> {
        self.store.delivery_gate(id, limits, ask, policy).await
    }

    async fn delivery_feedback(
        &self,
        id: &ThrottleId,
        now: UnixMillis,
        lease: &str,
        retry_after: Option<Duration>,
        policy: BusyPolicy,
    ) -> Result<Option<UnixMillis>, StoreError> {
        self.store.delivery_feedback(id, now, lease, retry_after, policy).await
    }
}
