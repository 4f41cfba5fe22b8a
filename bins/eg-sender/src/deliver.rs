//! One batch of deliveries for one subscription, from pick-up to settlement: the
//! pre-attempt checks, the endpoint's probation gate, the attempt, the endpoint's
//! health, and each delivery's own decision (every event keeps its own attempt count
//! and time-to-live, even when the batch failed as a whole).

use crate::attempt::{self, Attempt, Request};
use crate::healthy::HealthyEndpoints;
use crate::late::LateListeners;
use crate::settle;
use crate::settler::{self, Settler};
use eg_core::fate::{self, Consent, DropReason};
use eg_core::policy::ProfilePolicies;
use eg_core::probation::{EndpointAttempt, EndpointId, Gate, HealthChange, ProbationPolicy};
use eg_core::render::{self, RenderedEvent};
use eg_core::signing;
use eg_core::subscription::Subscription;
use eg_core::{Decision, LastAttempt};
use eg_outbound::Client;
use eg_runtime::metrics as m;
use eg_runtime::startup::Process;
use eg_store::{Catalog, CatalogCache, Clock, Partition, ReadyDelivery, Settlement, Store};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

pub struct Sender {
    pub(crate) store: Store,
    pub(crate) cache: Arc<CatalogCache>,
    pub(crate) clock: Clock,
    policies: ProfilePolicies,
    probation: Option<ProbationPolicy>,
    outbound: Client,
    pub(crate) timeout: Duration,
    /// How long a delivery read may stay unsettled before a scheduler takes it back.
    pub(crate) visibility_timeout: Duration,
    late: LateListeners,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) concurrency: usize,
    max_response_bytes: usize,
    settler: Settler,
    healthy: HealthyEndpoints,
    pub(crate) consumer: String,
}

/// A delivery read from a ready stream, with its stored event.
pub struct Held {
    pub partition: Partition,
    pub ready: ReadyDelivery,
    pub body: String,
}

/// Deliveries for one subscription that go in one request.
pub struct Batch {
    pub subscription: Arc<Subscription>,
    pub held: Vec<Held>,
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
        let outbound = Client::new(s.outbound_settings(s.delivery.timeout + s.sender.late_success_window)?)?;
        let catalog = Catalog::new(process.store.clone());
        let cache = eg_runtime::startup::until_ready("load the catalog", &process.shutdown, || {
            CatalogCache::load(catalog.clone())
        })
        .await?;
        Ok(Arc::new(Self {
            store: process.store.clone(),
            cache: Arc::new(cache),
            clock: process.clock.clone(),
            policies: s.delivery_policies()?,
            probation: s.probation_policy()?,
            outbound,
            timeout: s.delivery.timeout,
            visibility_timeout: s.delivery.visibility_timeout,
            late: LateListeners::new(s.sender.late_success_window, s.sender.max_late_listeners),
            slots: Arc::new(Semaphore::new(s.sender.concurrency.max(1))),
            concurrency: s.sender.concurrency.max(1),
            max_response_bytes: s.sender.max_response_bytes,
            settler: Settler::start(&process.store, s.retention()),
            healthy: HealthyEndpoints::default(),
            consumer,
        }))
    }

    /// One batch, from pick-up to settlement.
    pub async fn deliver(&self, batch: Batch) {
        let Batch { subscription, held } = batch;
        let policy = self.policies.of(subscription.profile);
        let limits = subscription.retry_policy;

        // Out of attempts or time already (a retry that woke at its TTL deadline).
        let now = self.clock.now();
        let mut live = Vec::with_capacity(held.len());
        let mut expired = Vec::new();
        for h in held {
            match policy.before_attempt(&h.ready.delivery, &limits, now) {
                Some(reason) => {
                    let settled =
                        settle::settlement(Decision::DeadLetter(reason), &h.ready.delivery, &subscription, now);
                    expired.push((h, settled));
                }
                None => live.push(h),
            }
        }
        let (expired, settlements): (Vec<Held>, Vec<settle::Settled>) = expired.into_iter().unzip();
        self.settle_together(expired.iter().zip(settlements)).await;
        if live.is_empty() {
            return;
        }

        // Paused by an operator: set aside uncharged until the resume; the time-to-live
        // still counts (the scheduler hands back those whose TTL ends meanwhile, and the
        // check above dead-letters them). A resume writes the catalog before it hands
        // deliveries back, so one look at the catalog version keeps a sender whose copy
        // predates the resume from setting them aside again.
        let subscription = if subscription.paused {
            self.latest(subscription).await
        } else {
            subscription
        };
        if subscription.paused {
            self.settle_together(live.iter().map(|h| {
                let until = eg_core::policy::ttl_deadline(&h.ready.delivery, &limits);
                (h, settle::paused(&h.ready.delivery, until, now))
            }))
            .await;
            return;
        }

        // Deliveries queued before the subscription moved to an endpoint that has not
        // consented yet must not reach it: they wait (uncharged) for the consent, or are
        // dead-lettered once it has been refused for good.
        match fate::consent(&subscription.provisioning, now) {
            Consent::Given => {}
            Consent::AwaitedUntil(look_again) => {
                self.hold_back(&subscription, live, look_again).await;
                return;
            }
            Consent::Refused(reason) => {
                self.settle_together(live.iter().map(|h| {
                    let decision = Decision::DeadLetter(reason);
                    (h, settle::settlement(decision, &h.ready.delivery, &subscription, now))
                }))
                .await;
                return;
            }
        }

        let endpoint = EndpointId::of(&subscription.endpoint_url);
        let started_at = now;
        if let Gate::Wait(until) = self.gate(&endpoint, now).await {
            self.hold_back(&subscription, live, until).await;
            return;
        }

        let (live, request) = self.render(&subscription, live).await;
        let Some(request) = request else { return };
        let attempt = attempt::send(
            &self.outbound,
            request,
            self.timeout,
            self.late.window(),
            self.max_response_bytes,
        )
        .await;
        let Attempt { outcome, took, .. } = &attempt;
        let now = self.clock.now();
        let outcome_name = outcome.name();
        self.record_health(&endpoint, &subscription, outcome, started_at, now)
            .await;

        let (topic, sub) = (subscription.topic.key(), subscription.name.key());
        metrics::histogram!(m::DESTINATION_PROCESSING_DURATION_MS, "topic" => topic.clone(), "subscription" => sub.clone())
            .record(took.as_secs_f64() * 1000.0);
        if !outcome.is_success() {
            metrics::counter!(m::DELIVERY_ATTEMPT_FAIL_COUNT, "topic" => topic, "subscription" => sub, "outcome" => outcome_name.as_str())
                .increment(live.len() as u64);
        }
        tracing::debug!(
            events = live.len(), outcome = %outcome_name, status = ?outcome.status_code(),
            took_ms = took.as_millis() as u64, "attempt"
        );

        // Settled together: the settle queue sends them as one call (a batch's events,
        // or whatever else is settling in the partition at the moment).
        let settles = live.iter().map(|h| {
            let attempted = h.ready.delivery.after_attempt(LastAttempt {
                outcome: outcome_name,
                status: outcome.status_code(),
                at: now,
            });
            let decision = policy.after_attempt(&attempted, &limits, outcome, now, rand::random::<f64>());
            let settled = settle::settlement(decision, &attempted, &subscription, now).attempted(*took);
            let retry = match &settled.settlement {
                Settlement::Retry { delivery, .. } => Some(delivery.clone()),
                _ => None,
            };
            async move { (self.settle(h, settled).await, h, retry) }
        });
        let mut retries = Vec::new();
        for (took_effect, h, retry) in futures_util::future::join_all(settles).await {
            if took_effect && let Some(retry) = retry {
                retries.push((h.partition.clone(), retry));
            }
        }
        if let Some(pending) = attempt.pending {
            self.late
                .listen(self.store.clone(), subscription.clone(), pending, retries);
        }
    }

    /// The subscription as the catalog has it now (the copy in hand if it cannot be read,
    /// or if the subscription is gone: the reader drops its deliveries).
    async fn latest(&self, subscription: Arc<Subscription>) -> Arc<Subscription> {
        match self.cache.refresh().await {
            Ok(snapshot) => snapshot
                .subscription_arc(&subscription.topic.key(), &subscription.name.key())
                .cloned()
                .unwrap_or(subscription),
            Err(e) => {
                tracing::warn!(error = %e, "cannot check the catalog; the subscription stays paused for now");
                subscription
            }
        }
    }

    /// Renders each event in the subscription's delivery schema and builds the request.
    /// An event that cannot be rendered (a corrupt record) cannot be delivered by anyone:
    /// it is dropped, counted and logged, and the rest of the batch goes on.
    async fn render<'a>(&self, subscription: &'a Subscription, held: Vec<Held>) -> (Vec<Held>, Option<Request<'a>>) {
        let schema = subscription.delivery_schema;
        let mut rendered: Vec<RenderedEvent<'_>> = Vec::with_capacity(held.len());
        let mut renderable = Vec::with_capacity(held.len());
        for h in &held {
            let ok = match render::render(&h.body, h.ready.delivery.format, schema) {
                Ok(event) => {
                    rendered.push(event);
                    true
                }
                Err(e) => {
                    tracing::error!(error = %e, delivery = %h.ready.delivery.id, "cannot render the stored event");
                    false
                }
            };
            renderable.push(ok);
        }
        let first = held.iter().zip(&renderable).find(|(_, ok)| **ok).map(|(h, _)| h);
        let sent_ids = held
            .iter()
            .zip(&renderable)
            .filter(|(_, ok)| **ok)
            .map(|(h, _)| h.ready.delivery.id.as_str());
        let webhook_id = signing::webhook_id(sent_ids);
        let request = first.map(|h| Request {
            subscription,
            first_event: rendered[0].value().into_owned(),
            body: render::delivery_body(schema, &rendered),
            delivery_count: h.ready.delivery.attempts,
            webhook_id,
            sent_at: self.clock.now(),
        });
        drop(rendered);
        let mut kept = Vec::with_capacity(held.len());
        for (h, ok) in held.into_iter().zip(renderable) {
            if ok {
                kept.push(h);
            } else {
                self.settle(
                    &h,
                    settle::dropped(&h.ready.delivery, DropReason::EventUnrenderable, self.clock.now()),
                )
                .await;
            }
        }
        (kept, request)
    }

    /// The endpoint's probation gate; an unreadable gate lets the attempt through
    /// (probation protects endpoints, it must not stop delivery when Redis hiccups).
    async fn gate(&self, endpoint: &EndpointId, now: eg_core::UnixMillis) -> Gate {
        if self.probation.is_none() || self.healthy.is_fresh(endpoint, Instant::now()) {
            return Gate::Open;
        }
        match self.store.endpoint_gate(endpoint, now, self.timeout).await {
            Ok(gate) => gate,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the endpoint's health; attempting anyway");
                Gate::Open
            }
        }
    }

    async fn record_health(
        &self,
        endpoint: &EndpointId,
        subscription: &Subscription,
        outcome: &eg_core::AttemptOutcome,
        started_at: eg_core::UnixMillis,
        finished_at: eg_core::UnixMillis,
    ) {
        let Some(policy) = &self.probation else { return };
        if outcome.is_success() && self.healthy.is_fresh(endpoint, Instant::now()) {
            return;
        }
        let attempt = EndpointAttempt {
            outcome: outcome.name(),
            started_at,
            finished_at,
        };
        if !outcome.is_success() {
            self.healthy.forget(endpoint);
        }
        let generation = self.healthy.generation();
        match self.store.record_endpoint_result(endpoint, &attempt, policy).await {
            Ok(HealthChange::ProbationStarted {
                level, until, length, ..
            }) => {
                metrics::counter!(m::ENDPOINT_PROBATION_COUNT, "topic" => subscription.topic.key(), "subscription" => subscription.name.key())
                    .increment(1);
                tracing::warn!(until = %until.to_rfc3339(), length = ?length, level, outcome = %outcome.name(), "endpoint put on probation");
            }
            Ok(HealthChange::Succeeded { ended_probation }) => {
                if ended_probation {
                    tracing::info!("endpoint recovered; probation over");
                }
                self.healthy.saw_clean(endpoint, Instant::now(), generation);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot record the endpoint's health"),
        }
    }

    /// The endpoint is on probation: nothing is attempted and no attempt is charged; each
    /// delivery waits in the retry set until the probation ends (or its TTL does).
    async fn hold_back(&self, subscription: &Subscription, held: Vec<Held>, until: eg_core::UnixMillis) {
        let policy = self.policies.of(subscription.profile);
        let now = self.clock.now();
        metrics::counter!(m::DELIVERY_DELAYED_COUNT, "topic" => subscription.topic.key(), "subscription" => subscription.name.key())
            .increment(held.len() as u64);
        self.settle_together(held.iter().map(|h| {
            let delivery = h.ready.delivery.held_back(now);
            let due = policy.held_back_until(&delivery, &subscription.retry_policy, until, now, rand::random::<f64>());
            (h, settle::held_back(delivery, due, now))
        }))
        .await;
    }

    /// Settles these together: concurrently, so the settle queue sends them as one call.
    pub(crate) async fn settle_together<'h>(&self, settles: impl IntoIterator<Item = (&'h Held, settle::Settled)>) {
        futures_util::future::join_all(settles.into_iter().map(|(h, settled)| self.settle(h, settled))).await;
    }

    /// Settles, retrying while Redis is unreachable. If it never succeeds the delivery
    /// stays pending and is reclaimed after the visibility timeout: a duplicate, not a
    /// loss. Returns whether the settlement took effect.
    pub(crate) async fn settle(&self, held: &Held, settled: settle::Settled) -> bool {
        self.settle_ready(&held.partition, &held.ready, settled).await
    }

    pub(crate) async fn settle_ready(
        &self,
        partition: &Partition,
        ready: &ReadyDelivery,
        settled: settle::Settled,
    ) -> bool {
        let mut backoff = Duration::from_millis(50);
        for _ in 0..10 {
            let request = settler::Request {
                entry_id: ready.entry_id.clone(),
                delivery: ready.delivery.clone(),
                settlement: settled.settlement.clone(),
                history: settled.history.clone(),
            };
            match self.settler.settle(partition, request).await {
                Ok(outcome) if outcome.took_effect => {
                    settled.record();
                    if outcome.archive_evicted > 0 {
                        metrics::counter!(m::DEAD_LETTER_ARCHIVE_EVICTED_COUNT, "topic" => ready.delivery.topic.clone(), "subscription" => ready.delivery.subscription.clone())
                            .increment(outcome.archive_evicted);
                    }
                    return true;
                }
                Ok(_) => {
                    tracing::info!(delivery = %ready.delivery.id, "delivery was taken back before this attempt settled; the new holder owns it");
                    return false;
                }
                Err(e) => {
                    tracing::warn!(error = %e, delivery = %ready.delivery.id, retry_in = ?backoff, "cannot settle");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
        tracing::error!(delivery = %ready.delivery.id, "giving up settling; the delivery will be reclaimed and retried");
        false
    }
}
