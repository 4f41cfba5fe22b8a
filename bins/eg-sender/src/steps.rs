//! One batch of deliveries for one subscription, from pick-up to settlement, as named
//! steps: **check** (attempts and time-to-live left), **gate** (pause, consent,
//! endpoint probation), **render**, **attempt** (through the destination), **classify**
//! (the outcome against the endpoint's probation record, and its metrics), **decide**
//! (each delivery's own decision by eg-core's policy: every event keeps its own attempt
//! count and time-to-live, even when the batch failed as a whole) and **settle**.
//!
//! The steps work over two seams, the [`Destination`] and the [`DeliveryStore`], so each
//! is tested here with recording doubles, without Redis or a network.

use crate::destination::{Destination, RenderedBatch, Sent};
use crate::late::LateListeners;
use crate::probation::RecentlyClear;
use crate::settle_queue::SettleItem;
use crate::store::DeliveryStore;
use crate::verdict::Verdict;
use eg_core::fate::{self, Consent, DropReason};
use eg_core::policy::{DeliveryPolicy, ProfilePolicies};
use eg_core::probation::{EndpointAttempt, EndpointId, Gate, HealthChange, ProbationPolicy};
use eg_core::render::{self, RenderedEvent};
use eg_core::subscription::Subscription;
use eg_core::{AttemptOutcome, DeadLetterReason, Decision, LastAttempt, UnixMillis, signing};
use eg_runtime::metrics as m;
use eg_store::{Clock, Partition, ReadyDelivery, Settlement};
use std::borrow::Borrow;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// The steps of an attempt, over a store `S` and a destination `D`.
pub struct Steps<S, D> {
    pub store: S,
    pub destination: D,
    pub clock: Clock,
    pub policies: ProfilePolicies,
    /// Off when `None`: every attempt goes ahead.
    pub probation: Option<ProbationPolicy>,
    /// Bounds one attempt; also the lease of a probe.
    pub attempt_timeout: Duration,
    pub late: LateListeners,
    pub recently_clear: RecentlyClear,
}

/// The gate's answer for a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gated {
    Open,
    /// The subscription is paused: set aside until the resume (or the end of the TTL).
    Paused,
    /// Not now (consent awaited, endpoint on probation): held back uncharged until then.
    HoldBack(UnixMillis),
    /// The endpoint refused its consent for good.
    Refused(DeadLetterReason),
}

/// The render step's result.
pub struct Rendered<'a> {
    /// `None` when no event of the batch could be rendered.
    pub batch: Option<RenderedBatch<'a>>,
    /// The deliveries whose events are in the batch, in order.
    pub kept: Vec<Held>,
    /// The deliveries whose events cannot be rendered, with their verdicts.
    pub unrenderable: Vec<(Held, Verdict)>,
}

impl<S: DeliveryStore, D: Destination> Steps<S, D> {
    /// One batch, from pick-up to settlement.
    pub async fn deliver(&self, batch: Batch) {
        let Batch { subscription, held } = batch;
        let policy = self.policies.of(subscription.profile);
        let now = self.clock.now();

        let (live, expired) = check(policy, &subscription, held, now);
        self.settle_all(expired).await;
        if live.is_empty() {
            return;
        }

        let subscription = self.unless_resumed(subscription).await;
        let endpoint = EndpointId::of(&subscription.endpoint_url);
        match self.gate(&subscription, &endpoint, now).await {
            Gated::Open => {}
            Gated::Paused => return self.set_aside(&subscription, &live, now).await,
            Gated::HoldBack(until) => return self.hold_back(&subscription, &live, until).await,
            Gated::Refused(reason) => {
                let verdicts = live.iter().map(|h| {
                    let verdict = Verdict::decided(Decision::DeadLetter(reason), &h.ready.delivery, &subscription, now);
                    (h, verdict)
                });
                return self.settle_all(verdicts).await;
            }
        }

        let Rendered {
            batch,
            kept,
            unrenderable,
        } = render(&subscription, live, self.clock.now());
        self.settle_all(unrenderable).await;
        let Some(batch) = batch else { return };

        let sent = self.destination.send(batch, self.late.window()).await;
        let finished_at = self.clock.now();
        self.classify(&endpoint, &subscription, &sent, now, finished_at, kept.len())
            .await;

        let verdicts = decide(policy, &subscription, &kept, &sent, finished_at, rand::random::<f64>);
        let retries = self.settle_attempted(&kept, verdicts).await;
        if let Some(late) = sent.late {
            self.late
                .listen(self.store.clone(), subscription.clone(), late, retries);
        }
    }

    /// A paused subscription as the catalog has it now: a resume writes the catalog
    /// before it hands deliveries back, so one look keeps a sender whose copy predates the
    /// resume from setting them aside again. The copy in hand if it cannot be read, or if
    /// the subscription is gone (the reader drops its deliveries).
    async fn unless_resumed(&self, subscription: Arc<Subscription>) -> Arc<Subscription> {
        if !subscription.paused {
            return subscription;
        }
        match self.store.current_subscription(&subscription).await {
            Ok(current) => current.unwrap_or(subscription),
            Err(e) => {
                tracing::warn!(error = %e, "cannot check the catalog; the subscription stays paused for now");
                subscription
            }
        }
    }

    /// Gate: whether the batch may be attempted now.
    async fn gate(&self, subscription: &Subscription, endpoint: &EndpointId, now: UnixMillis) -> Gated {
        if subscription.paused {
            return Gated::Paused;
        }
        match fate::consent(&subscription.provisioning, now) {
            Consent::Given => {}
            Consent::AwaitedUntil(look_again) => return Gated::HoldBack(look_again),
            Consent::Refused(reason) => return Gated::Refused(reason),
        }
        match self.probation_gate(endpoint, now).await {
            Gate::Wait(until) => Gated::HoldBack(until),
            Gate::Open | Gate::Probe => Gated::Open,
        }
    }

    /// The endpoint's probation gate; an unreadable gate lets the attempt through
    /// (probation protects endpoints, it must not stop delivery when Redis hiccups).
    async fn probation_gate(&self, endpoint: &EndpointId, now: UnixMillis) -> Gate {
        if self.probation.is_none() || self.recently_clear.is_fresh(endpoint, Instant::now()) {
            return Gate::Open;
        }
        match self.store.endpoint_gate(endpoint, now, self.attempt_timeout).await {
            Ok(gate) => gate,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the endpoint's probation record; attempting anyway");
                Gate::Open
            }
        }
    }

    /// Classify: the outcome goes to the endpoint's probation record, the metrics and
    /// the log.
    async fn classify(
        &self,
        endpoint: &EndpointId,
        subscription: &Subscription,
        sent: &Sent,
        started_at: UnixMillis,
        finished_at: UnixMillis,
        events: usize,
    ) {
        let Sent { outcome, took, .. } = sent;
        self.record_probation(endpoint, subscription, outcome, started_at, finished_at)
            .await;
        let (topic, sub) = (subscription.topic.key(), subscription.name.key());
        metrics::histogram!(m::DESTINATION_PROCESSING_DURATION_MS, "topic" => topic.clone(), "subscription" => sub.clone())
            .record(took.as_secs_f64() * 1000.0);
        if !outcome.is_success() {
            metrics::counter!(m::DELIVERY_ATTEMPT_FAIL_COUNT, "topic" => topic, "subscription" => sub, "outcome" => outcome.name().as_str())
                .increment(events as u64);
        }
        tracing::debug!(
            events, outcome = %outcome.name(), status = ?outcome.status_code(),
            took_ms = took.as_millis() as u64, "attempt"
        );
    }

    async fn record_probation(
        &self,
        endpoint: &EndpointId,
        subscription: &Subscription,
        outcome: &AttemptOutcome,
        started_at: UnixMillis,
        finished_at: UnixMillis,
    ) {
        let Some(policy) = &self.probation else { return };
        if outcome.is_success() && self.recently_clear.is_fresh(endpoint, Instant::now()) {
            return;
        }
        let attempt = EndpointAttempt {
            outcome: outcome.name(),
            started_at,
            finished_at,
        };
        if !outcome.is_success() {
            self.recently_clear.forget(endpoint);
        }
        let generation = self.recently_clear.generation();
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
                self.recently_clear.saw_clear(endpoint, Instant::now(), generation);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot record the attempt in the endpoint's probation record"),
        }
    }

    /// A paused subscription's deliveries: set aside uncharged until the resume; the
    /// time-to-live still counts (the scheduler hands back those whose TTL ends meanwhile,
    /// and the check step dead-letters them).
    async fn set_aside(&self, subscription: &Subscription, held: &[Held], now: UnixMillis) {
        self.settle_all(held.iter().map(|h| {
            let until = eg_core::policy::ttl_deadline(&h.ready.delivery, &subscription.retry_policy);
            (h, Verdict::paused(&h.ready.delivery, until, now))
        }))
        .await;
    }

    /// Nothing is attempted and no attempt is charged; each delivery waits in the retry
    /// set until `until` (spread a little, never past its TTL).
    async fn hold_back(&self, subscription: &Subscription, held: &[Held], until: UnixMillis) {
        let policy = self.policies.of(subscription.profile);
        let now = self.clock.now();
        metrics::counter!(m::DELIVERY_DELAYED_COUNT, "topic" => subscription.topic.key(), "subscription" => subscription.name.key())
            .increment(held.len() as u64);
        self.settle_all(held.iter().map(|h| {
            let delivery = h.ready.delivery.held_back(now);
            let due = policy.held_back_until(&delivery, &subscription.retry_policy, until, now, rand::random::<f64>());
            (h, Verdict::held_back(delivery, due, now))
        }))
        .await;
    }

    /// Settles the verdicts of an attempt together; returns the retries that took
    /// effect (a late success cancels them).
    async fn settle_attempted(&self, kept: &[Held], verdicts: Vec<Verdict>) -> Vec<(Partition, eg_core::Delivery)> {
        let settles = kept.iter().zip(verdicts).map(|(h, verdict)| {
            let retry = match &verdict.settlement {
                Settlement::Retry { delivery, .. } => Some(delivery.clone()),
                _ => None,
            };
            async move { (self.settle(&h.partition, &h.ready, verdict).await, h, retry) }
        });
        let mut retries = Vec::new();
        for (took_effect, h, retry) in futures_util::future::join_all(settles).await {
            if took_effect && let Some(retry) = retry {
                retries.push((h.partition.clone(), retry));
            }
        }
        retries
    }

    /// Settles these together: concurrently, so the settle queue sends them as one call.
    pub async fn settle_all<H: Borrow<Held>>(&self, verdicts: impl IntoIterator<Item = (H, Verdict)>) {
        futures_util::future::join_all(verdicts.into_iter().map(|(h, verdict)| async move {
            let h = h.borrow();
            self.settle(&h.partition, &h.ready, verdict).await
        }))
        .await;
    }

    /// Settle: hands the verdict to the store, retrying while it is unreachable. If it
    /// never succeeds the delivery stays pending and is reclaimed after the visibility
    /// timeout: a duplicate, not a loss. Returns whether the settlement took effect.
    pub async fn settle(&self, partition: &Partition, ready: &ReadyDelivery, verdict: Verdict) -> bool {
        let mut backoff = Duration::from_millis(50);
        for _ in 0..10 {
            let item = SettleItem {
                entry_id: ready.entry_id.clone(),
                delivery: ready.delivery.clone(),
                settlement: verdict.settlement.clone(),
                history: verdict.history.clone(),
            };
            match self.store.settle(partition, item).await {
                Ok(settled) if settled.took_effect => {
                    verdict.record();
                    if settled.archive_evicted > 0 {
                        metrics::counter!(m::DEAD_LETTER_ARCHIVE_EVICTED_COUNT, "topic" => ready.delivery.topic.clone(), "subscription" => ready.delivery.subscription.clone())
                            .increment(settled.archive_evicted);
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

/// Check: a delivery already out of attempts or time (a retry that woke at its TTL
/// deadline) is not attempted. Returns the live ones, and the others with their verdicts.
pub fn check(
    policy: &DeliveryPolicy,
    subscription: &Subscription,
    held: Vec<Held>,
    now: UnixMillis,
) -> (Vec<Held>, Vec<(Held, Verdict)>) {
    let mut live = Vec::with_capacity(held.len());
    let mut expired = Vec::new();
    for h in held {
        match policy.before_attempt(&h.ready.delivery, &subscription.retry_policy, now) {
            Some(reason) => {
                let verdict = Verdict::decided(Decision::DeadLetter(reason), &h.ready.delivery, subscription, now);
                expired.push((h, verdict));
            }
            None => live.push(h),
        }
    }
    (live, expired)
}

/// Render: each event in the subscription's delivery schema, and the batch to send. An
/// event that cannot be rendered (a corrupt record) cannot be delivered by anyone: it is
/// dropped, and the rest of the batch goes on.
pub fn render(subscription: &Subscription, held: Vec<Held>, now: UnixMillis) -> Rendered<'_> {
    let schema = subscription.delivery_schema;
    let mut events: Vec<RenderedEvent<'_>> = Vec::with_capacity(held.len());
    let mut renderable = Vec::with_capacity(held.len());
    for h in &held {
        match render::render(&h.body, h.ready.delivery.format, schema) {
            Ok(event) => {
                events.push(event);
                renderable.push(true);
            }
            Err(e) => {
                tracing::error!(error = %e, delivery = %h.ready.delivery.id, "cannot render the stored event");
                renderable.push(false);
            }
        }
    }
    let first = held.iter().zip(&renderable).find(|(_, ok)| **ok).map(|(h, _)| h);
    let sent_ids = held
        .iter()
        .zip(&renderable)
        .filter(|(_, ok)| **ok)
        .map(|(h, _)| h.ready.delivery.id.as_str());
    let batch_id = signing::webhook_id(sent_ids);
    let batch = first.map(|h| RenderedBatch {
        subscription,
        first_event: events[0].value().into_owned(),
        body: render::delivery_body(schema, &events),
        delivery_count: h.ready.delivery.attempts,
        batch_id,
        sent_at: now,
    });
    drop(events);
    let mut kept = Vec::with_capacity(held.len());
    let mut unrenderable = Vec::new();
    for (h, ok) in held.into_iter().zip(renderable) {
        if ok {
            kept.push(h);
        } else {
            let verdict = Verdict::dropped(&h.ready.delivery, DropReason::EventUnrenderable, now);
            unrenderable.push((h, verdict));
        }
    }
    Rendered {
        batch,
        kept,
        unrenderable,
    }
}

/// Decide: each delivery's own decision after the attempt (its attempt counted), by the
/// profile's policy; `jitter_draw` gives one uniform draw in `[0, 1)` per delivery.
pub fn decide(
    policy: &DeliveryPolicy,
    subscription: &Subscription,
    kept: &[Held],
    sent: &Sent,
    now: UnixMillis,
    mut jitter_draw: impl FnMut() -> f64,
) -> Vec<Verdict> {
    let outcome = &sent.outcome;
    kept.iter()
        .map(|h| {
            let attempted = h.ready.delivery.after_attempt(LastAttempt {
                outcome: outcome.name(),
                status: outcome.status_code(),
                at: now,
            });
            let decision = policy.after_attempt(&attempted, &subscription.retry_policy, outcome, now, jitter_draw());
            Verdict::decided(decision, &attempted, subscription, now).attempted(sent.took)
        })
        .collect()
}
