//! The deliveries of one read, from pick-up to settlement, as named steps: **look up**
//! (each delivery's stored event and subscription; those whose subscription or event is
//! gone are dropped), **batch** (grouped per subscription and cut by its batch
//! settings), then for each batch **check** (attempts and time-to-live left), **gate** (pause, consent,
//! endpoint probation), **render**, **attempt** (through the destination), **classify**
//! (the outcome against the endpoint's probation record, and its metrics), **decide**
//! (each delivery's own decision by eg-core's policy: every event keeps its own attempt
//! count and time-to-live, even when the batch failed as a whole) and **settle**.
//!
//! The steps work over two seams, the [`Destination`] and the [`DeliveryStore`], so each
//! is tested here with recording doubles, without Redis or a network.

use crate::attempt_trace;
use crate::destination::{Destination, RenderedBatch, Sent, delivery_headers};
use crate::late::{LateListeners, QueuedRetry};
use crate::limits::{Admission, Limits};
use crate::probation::RecentlyClear;
use crate::store::DeliveryStore;
use crate::verdict::Verdict;
use eg_core::destination::{EndpointIds, Target};
use eg_core::fate::{self, Consent, DropReason};
use eg_core::history::{Hold, HoldReason};
use eg_core::policy::{DeliveryPolicy, ProfilePolicies};
use eg_core::probation::{EndpointAttempt, EndpointId, Gate, ProbationChange, ProbationPolicy};
use eg_core::render::{self, RenderedEvent};
use eg_core::subscription::Subscription;
use eg_core::{AttemptOutcome, DeadLetterReason, Decision, LastAttempt, UnixMillis, signing};
use eg_runtime::metrics as m;
use eg_store::{Clock, Partition, ReadyDelivery, Settlement, StoreError};
use std::borrow::Borrow;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

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
    store: S,
    destination: D,
    clock: Clock,
    policies: ProfilePolicies,
    /// Off when `None`: every attempt goes ahead.
    probation: Option<ProbationPolicy>,
    /// Bounds one attempt; also the lease of a probe.
    attempt_timeout: Duration,
    late: LateListeners,
    recently_clear: RecentlyClear,
    endpoint_ids: EndpointIds,
    limits: Limits,
}

/// The gate's answer for a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gated {
    Open,
    /// The subscription is paused: set aside until the resume (or the end of the TTL).
    Paused,
    /// Not now (consent awaited, endpoint on probation): held back uncharged until the
    /// hold's end.
    HoldBack(Hold),
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

impl<S, D> Steps<S, D> {
    /// The steps over `store` and `destination`; `probation` off when `None`, and
    /// `attempt_timeout` bounding one attempt (and a probe's lease).
    pub fn new(
        store: S,
        destination: D,
        clock: Clock,
        policies: ProfilePolicies,
        probation: Option<ProbationPolicy>,
        attempt_timeout: Duration,
        late: LateListeners,
    ) -> Self {
        // A schedule that does not apply as written is a trap (a quick trial that is not
        // quick): say so where the policy is applied.
        for warning in eg_runtime::settings::schedule_warnings(&policies) {
            tracing::warn!("{warning}");
        }
        let limits = Limits::new(policies.custom_topic.max_retry_after);
        Self {
            store,
            destination,
            clock,
            policies,
            probation,
            attempt_timeout,
            late,
            recently_clear: RecentlyClear::default(),
            endpoint_ids: EndpointIds::default(),
            limits,
        }
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// What bounds one attempt.
    pub fn attempt_timeout(&self) -> Duration {
        self.attempt_timeout
    }
}

impl<S: DeliveryStore, D: Destination> Steps<S, D> {
    /// Look up: each delivery read with its stored event and its subscription, ready to
    /// be batched. A delivery whose subscription is deleted, or whose event is gone, is
    /// dropped. One whose subscription cannot be looked up is left held: it is taken
    /// back and retried after the visibility timeout rather than dropped on a Redis
    /// hiccup (so is every delivery when the events cannot be read: the error).
    pub async fn look_up(
        &self,
        partition: &Partition,
        mut deliveries: Vec<ReadyDelivery>,
    ) -> Result<Vec<(Arc<Subscription>, Held)>, StoreError> {
        let bodies = self.bodies_of(partition, &mut deliveries).await?;
        let mut found = Vec::with_capacity(deliveries.len());
        for (ready, body) in deliveries.into_iter().zip(bodies) {
            let delivery = &ready.delivery;
            let subscription = match self.store.subscription_of(delivery).await {
                Ok(subscription) => subscription,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot look up the subscription; leaving the delivery for later");
                    continue;
                }
            };
            match (subscription, body) {
                (Some(subscription), Some(body)) => found.push((
                    subscription,
                    Held {
                        partition: partition.clone(),
                        ready,
                        body,
                    },
                )),
                (None, _) => {
                    let verdict = Verdict::dropped(delivery, DropReason::SubscriptionDeleted, self.clock.now());
                    self.settle(partition, &ready, verdict).await;
                }
                (Some(_), None) => {
                    // Also seen by a stale holder (its delivery was taken back and finished
                    // elsewhere): then the settle changes nothing, and there is nothing to
                    // report.
                    let verdict = Verdict::dropped(delivery, DropReason::EventMissing, self.clock.now());
                    if self.settle(partition, &ready, verdict).await {
                        tracing::error!(delivery = %delivery.id, event = %delivery.event_key, "the stored event is gone");
                    }
                }
            }
        }
        Ok(found)
    }

    /// Each delivery's event body, in order (`None`: gone): taken from the entry that
    /// carries it, else read from the event hashes in one round trip (none when every
    /// entry carries its body).
    async fn bodies_of(
        &self,
        partition: &Partition,
        deliveries: &mut [ReadyDelivery],
    ) -> Result<Vec<Option<String>>, StoreError> {
        let mut bodies: Vec<Option<String>> = deliveries.iter_mut().map(|d| d.carried_body.take()).collect();
        let stored: Vec<(usize, &str)> = deliveries
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.carries_body)
            .map(|(at, d)| (at, d.delivery.event_key.as_str()))
            .collect();
        if !stored.is_empty() {
            let keys: Vec<&str> = stored.iter().map(|(_, key)| *key).collect();
            let read = self.store.event_bodies(partition, &keys).await?;
            for ((at, _), body) in stored.iter().zip(read) {
                bodies[*at] = body;
            }
        }
        Ok(bodies)
    }

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
        let Some(target) = subscription.target() else {
            // Replaced by a queue-mode subscription of the same name since it was routed:
            // the push subscription these deliveries were for is gone.
            let verdicts = live.iter().map(|h| {
                let verdict = Verdict::dropped(&h.ready.delivery, DropReason::SubscriptionDeleted, now);
                (h, verdict)
            });
            return self.settle_all(verdicts).await;
        };
        let endpoint = self.endpoint_ids.of(target);
        match self.gate(&subscription, &endpoint, now).await {
            Gated::Open => {}
            Gated::Paused => return self.set_aside(&subscription, &live, now).await,
            Gated::HoldBack(hold) => return self.hold_back(&subscription, &live, hold).await,
            Gated::Refused(reason) => {
                let verdicts = live.iter().map(|h| {
                    let verdict = Verdict::decided(Decision::DeadLetter(reason), &h.ready.delivery, &subscription, now);
                    (h, verdict)
                });
                return self.settle_all(verdicts).await;
            }
        }

        let lease = match self
            .limits
            .admit(&self.store, &subscription, now, self.attempt_timeout)
            .await
        {
            Admission::Go { lease, at } => {
                self.wait_for_turn(&subscription, live.len(), at).await;
                lease
            }
            Admission::Throttled { until, reason } => {
                return self.throttled(&subscription, &live, until, reason).await;
            }
        };

        let started_at = self.clock.now();
        let Rendered {
            batch,
            kept,
            unrenderable,
        } = render(&subscription, target, live, started_at);
        self.settle_all(unrenderable).await;
        let Some(mut batch) = batch else { return };

        let first = kept.first().map(|h| &h.ready.delivery);
        let span = attempt_trace::attempt_span(&endpoint, first, kept.len());
        attempt_trace::carry(&span, first.and_then(|d| d.trace.as_ref()), &mut batch);
        let sent = self
            .destination
            .send(batch, self.late.window())
            .instrument(span.clone())
            .await;
        attempt_trace::record_sent(&span, &sent);
        let finished_at = self.clock.now();
        self.limits
            .after(&self.store, &subscription, lease, &sent.outcome, finished_at)
            .await;
        self.classify(&endpoint, &subscription, &sent, started_at, finished_at, kept.len())
            .await;

        let verdicts = decide(policy, &subscription, &kept, &sent, finished_at, rand::random::<f64>);
        attempt_trace::record_verdicts(&span, &verdicts);
        let retries = self.settle_attempted(&kept, verdicts, sent.late.is_some()).await;
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
            Consent::AwaitedUntil(look_again) => {
                return Gated::HoldBack(Hold {
                    reason: HoldReason::AwaitingValidation,
                    until: look_again,
                });
            }
            Consent::Refused(reason) => return Gated::Refused(reason),
        }
        match self.probation_gate(endpoint, now).await {
            Gate::Wait(until) => Gated::HoldBack(Hold {
                reason: HoldReason::EndpointProbation,
                until,
            }),
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
        if crate::limits::asked_to_wait(outcome) {
            return;
        }
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
            Ok(ProbationChange::ProbationStarted {
                level, until, length, ..
            }) => {
                metrics::counter!(m::ENDPOINT_PROBATION_COUNT, "topic" => subscription.topic.key(), "subscription" => subscription.name.key())
                    .increment(1);
                tracing::warn!(until = %until.to_rfc3339(), length = ?length, level, outcome = %outcome.name(), "endpoint put on probation");
            }
            Ok(ProbationChange::Succeeded { ended_probation }) => {
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
    /// set until the hold ends (spread a little, never past its TTL); its history says why.
    async fn hold_back(&self, subscription: &Subscription, held: &[Held], hold: Hold) {
        let policy = self.policies.of(subscription.profile);
        let now = self.clock.now();
        metrics::counter!(m::DELIVERY_DELAYED_COUNT, "topic" => subscription.topic.key(), "subscription" => subscription.name.key())
            .increment(held.len() as u64);
        self.settle_all(held.iter().map(|h| {
            let delivery = h.ready.delivery.held_back(now);
            let due = policy.held_back_until(
                &delivery,
                &subscription.retry_policy,
                hold.until,
                now,
                rand::random::<f64>(),
            );
            (h, Verdict::held_back(delivery, hold, due, now))
        }))
        .await;
    }

    /// Over the subscription's delivery limits: each delivery back in the retry set
    /// unchanged, due at `until` (spread a little, never past its TTL), uncharged and
    /// without a history step.
    async fn throttled(&self, subscription: &Subscription, held: &[Held], until: UnixMillis, reason: &'static str) {
        let now = self.clock.now();
        let waits = u64::try_from(until.since(now).as_millis()).unwrap_or(u64::MAX);
        metrics::counter!(m::DELIVERY_THROTTLED_MS, "topic" => subscription.topic.key(), "subscription" => subscription.name.key())
            .increment((held.len() as u64).saturating_mul(waits));
        self.settle_all(held.iter().map(|h| {
            let deadline = eg_core::policy::ttl_deadline(&h.ready.delivery, &subscription.retry_policy);
            let jitter = Duration::from_millis(rand::random::<u64>() % 50);
            let due = eg_core::throttle::due_of_handback(until, jitter, deadline);
            (h, Verdict::throttled(&h.ready.delivery, due, reason, now))
        }))
        .await;
    }

    /// A turn reserved a moment ahead: wait for it here (the time counts as throttled).
    async fn wait_for_turn(&self, subscription: &Subscription, deliveries: usize, at: UnixMillis) {
        let wait = at.since(self.clock.now());
        if wait.is_zero() {
            return;
        }
        let waits = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        metrics::counter!(m::DELIVERY_THROTTLED_MS, "topic" => subscription.topic.key(), "subscription" => subscription.name.key())
            .increment((deliveries as u64).saturating_mul(waits));
        tokio::time::sleep(wait).await;
    }

    /// Settles the verdicts of an attempt together; returns the retries that took
    /// effect when a late answer is `listening` (a late success cancels them).
    async fn settle_attempted(&self, kept: &[Held], verdicts: Vec<Verdict>, listening: bool) -> Vec<QueuedRetry> {
        let settles = kept.iter().zip(verdicts).map(|(h, verdict)| {
            let retry = match &verdict.settlement {
                Settlement::Retry { delivery, .. } if listening => Some(delivery.clone()),
                _ => None,
            };
            async move { (self.settle(&h.partition, &h.ready, verdict).await, h, retry) }
        });
        let mut retries = Vec::new();
        for (took_effect, h, retry) in futures_util::future::join_all(settles).await {
            if took_effect && let Some(delivery) = retry {
                retries.push(QueuedRetry {
                    partition: h.partition.clone(),
                    delivery,
                    // The retry of a delivery whose entry carried its body waits beside it.
                    carried_body: h.ready.carries_body.then(|| h.body.clone()),
                });
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
    /// timeout: a duplicate, not a loss. Returns whether the settle took effect.
    pub async fn settle(&self, partition: &Partition, ready: &ReadyDelivery, verdict: Verdict) -> bool {
        let mut backoff = Duration::from_millis(50);
        for _ in 0..10 {
            let settle = ready.settle(verdict.settlement.clone(), verdict.history_step());
            match self.store.settle(partition, settle).await {
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

/// Batch: the deliveries found for the same subscription go together, in the order
/// read, cut into batches by its batch settings (eg-core's plan: what is ready now,
/// never waiting to fill a batch).
pub fn batches(found: Vec<(Arc<Subscription>, Held)>) -> Vec<Batch> {
    let mut groups: Vec<(Arc<Subscription>, Vec<Held>)> = Vec::new();
    for (subscription, held) in found {
        match groups.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &subscription)) {
            Some((_, list)) => list.push(held),
            None => groups.push((subscription, vec![held])),
        }
    }
    let mut batches = Vec::new();
    for (subscription, held) in groups {
        let sizes: Vec<usize> = held.iter().map(|h| h.body.len()).collect();
        let plan = eg_core::batch::plan(&sizes, subscription.batching);
        let mut held = held.into_iter();
        for range in plan {
            batches.push(Batch {
                subscription: subscription.clone(),
                held: held.by_ref().take(range.len()).collect(),
            });
        }
    }
    batches
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
pub fn render<'a>(
    subscription: &'a Subscription,
    target: &'a Target,
    held: Vec<Held>,
    now: UnixMillis,
) -> Rendered<'a> {
    let schema = subscription.delivery_schema;
    let mut events: Vec<RenderedEvent<'_>> = Vec::with_capacity(held.len());
    let mut renderable = Vec::with_capacity(held.len());
    for h in &held {
        let delivery = &h.ready.delivery;
        match render::render_stamped(&h.body, delivery.format, schema, delivery.data_version.as_deref()) {
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
    let first_held = held.iter().zip(&renderable).find(|(_, ok)| **ok).map(|(h, _)| h);
    let sent_ids = held
        .iter()
        .zip(&renderable)
        .filter(|(_, ok)| **ok)
        .map(|(h, _)| h.ready.delivery.id.as_str());
    let batch_id = signing::webhook_id(sent_ids);
    let batch = first_held.zip(events.first()).map(|(h, first_event)| RenderedBatch {
        subscription,
        target,
        delivery_headers: delivery_headers(subscription, first_event.json(), &h.ready.delivery.id),
        body: render::delivery_body(schema, &events),
        delivery_count: h.ready.delivery.attempts,
        batch_id,
        sent_at: now,
        trace: None,
        replay_job: h.ready.delivery.replay.clone(),
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
            Verdict::decided(decision, &attempted, subscription, now).attempted(sent)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use eg_core::history::{DeliveryState, HistoryEntry};
    use eg_core::{Delivery, SubscriptionName, Topic, TopicName};
    use eg_store::{Keyspace, Settle, Settled};
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// The store seam, recording what the steps ask of it.
    #[derive(Clone, Default)]
    struct RecordingStore(Arc<Recorded>);

    #[derive(Default)]
    struct Recorded {
        settled: Mutex<Vec<Settle>>,
        /// Stored events by key (gone when absent).
        bodies: Mutex<HashMap<String, String>>,
        /// The catalog's subscriptions by name (deleted when absent).
        subscriptions: Mutex<HashMap<String, Arc<Subscription>>>,
        /// Subscriptions whose look-up fails (Redis unreachable).
        unreadable: Mutex<Vec<String>>,
        /// The probation gate's answer (open when `None`).
        gate: Mutex<Option<Gate>>,
        endpoint_results: Mutex<Vec<EndpointAttempt>>,
        /// The catalog's copy of the subscription (unknown when `None`).
        current: Mutex<Option<Arc<Subscription>>>,
        /// How many settle calls fail before the store answers again.
        failing_settles: AtomicUsize,
        /// Whether settles find the delivery taken back.
        taken_back: AtomicBool,
    }

    impl RecordingStore {
        fn settled(&self) -> Vec<Settle> {
            std::mem::take(&mut *self.0.settled.lock().unwrap())
        }
    }

    impl DeliveryStore for RecordingStore {
        async fn event_bodies(&self, _: &Partition, event_keys: &[&str]) -> Result<Vec<Option<String>>, StoreError> {
            let bodies = self.0.bodies.lock().unwrap();
            Ok(event_keys.iter().map(|k| bodies.get(*k).cloned()).collect())
        }

        async fn subscription_of(&self, delivery: &Delivery) -> Result<Option<Arc<Subscription>>, StoreError> {
            if self.0.unreadable.lock().unwrap().contains(&delivery.subscription) {
                return Err(StoreError::Timeout(Duration::from_secs(1)));
            }
            Ok(self
                .0
                .subscriptions
                .lock()
                .unwrap()
                .get(&delivery.subscription)
                .cloned())
        }

        async fn settle(&self, _: &Partition, settle: Settle) -> Result<Settled, crate::settle_queue::SettleError> {
            let failing = &self.0.failing_settles;
            if failing.load(Ordering::SeqCst) > 0 {
                failing.fetch_sub(1, Ordering::SeqCst);
                return Err(crate::settle_queue::SettleError::Stopped);
            }
            let took_effect = !self.0.taken_back.load(Ordering::SeqCst);
            if took_effect {
                self.0.settled.lock().unwrap().push(settle);
            }
            Ok(Settled {
                took_effect,
                archive_evicted: 0,
            })
        }

        async fn endpoint_gate(
            &self,
            _: &EndpointId,
            _: UnixMillis,
            _: Duration,
        ) -> Result<Gate, eg_store::StoreError> {
            Ok(self.0.gate.lock().unwrap().unwrap_or(Gate::Open))
        }

        async fn record_endpoint_result(
            &self,
            _: &EndpointId,
            attempt: &EndpointAttempt,
            _: &ProbationPolicy,
        ) -> Result<ProbationChange, crate::endpoint_records::RecordError> {
            self.0.endpoint_results.lock().unwrap().push(*attempt);
            Ok(ProbationChange::Ignored)
        }

        async fn current_subscription(
            &self,
            _: &Subscription,
        ) -> Result<Option<Arc<Subscription>>, eg_store::StoreError> {
            Ok(self.0.current.lock().unwrap().clone())
        }

        async fn cancel_retry(
            &self,
            _: &Partition,
            _: &Delivery,
            _: Option<&str>,
        ) -> Result<bool, eg_store::StoreError> {
            Ok(false)
        }
    }

    /// A destination answering every batch with one outcome, recording what it was sent.
    struct Answering {
        outcome: AttemptOutcome,
        sent: Mutex<Vec<(String, u32)>>,
    }

    impl Destination for Answering {
        async fn send(&self, batch: RenderedBatch<'_>, _: Option<Duration>) -> Sent {
            self.sent.lock().unwrap().push((batch.body.body, batch.delivery_count));
            Sent {
                outcome: self.outcome,
                error: None,
                took: Duration::from_millis(7),
                late: None,
            }
        }
    }

    fn status(code: u16) -> AttemptOutcome {
        AttemptOutcome::Status {
            code,
            retry_after: None,
        }
    }

    fn steps(outcome: AttemptOutcome) -> Steps<RecordingStore, Answering> {
        Steps::new(
            RecordingStore::default(),
            Answering {
                outcome,
                sent: Mutex::new(Vec::new()),
            },
            Clock::default(),
            ProfilePolicies::default(),
            Some(ProbationPolicy::default()),
            Duration::from_secs(1),
            LateListeners::new(Duration::ZERO, 0),
        )
    }

    fn subscription() -> Subscription {
        let topic = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        let resource = json!({"properties": {"destination": {"endpointType": "WebHook",
            "properties": {"endpointUrl": "https://example.com/hook"}}}});
        Subscription::from_resource(
            &topic,
            SubscriptionName::parse("billing").unwrap(),
            &resource,
            UnixMillis(0),
        )
        .unwrap()
    }

    fn held(id: &str, body: &str) -> Held {
        let delivery = Delivery::new(
            id.into(),
            format!("event-{id}"),
            "orders".into(),
            "billing".into(),
            Clock::default().now(),
        );
        Held {
            partition: Keyspace::new("eg", 1).partition(0),
            ready: ReadyDelivery {
                partition: 0,
                entry_id: format!("{id}-0"),
                delivery,
                carried_body: None,
                carries_body: false,
                shared: None,
            },
            body: body.into(),
        }
    }

    fn event(id: &str) -> Held {
        let body = json!({"id": id, "eventType": "A", "subject": "s", "eventTime": "2026-01-01T00:00:00Z",
            "data": {}, "dataVersion": "1"});
        held(id, &body.to_string())
    }

    fn batch(subscription: Subscription, held: Vec<Held>) -> Batch {
        Batch {
            subscription: Arc::new(subscription),
            held,
        }
    }

    /// The history step a settle appends (the steps always give one).
    fn history(settle: &Settle) -> &HistoryEntry {
        settle.history.as_ref().expect("a history step")
    }

    fn states(settled: &[Settle]) -> Vec<(String, DeliveryState, Option<String>)> {
        settled
            .iter()
            .map(|i| (i.delivery.id.clone(), history(i).state, history(i).reason.clone()))
            .collect()
    }

    #[tokio::test]
    async fn a_success_sends_the_batch_once_and_settles_each_delivery_done() {
        let steps = steps(status(200));
        steps.deliver(batch(subscription(), vec![event("a"), event("b")])).await;

        let sent = steps.destination.sent.lock().unwrap().clone();
        assert_eq!(sent.len(), 1, "one request for the batch");
        assert!(
            sent[0].0.contains("\"a\"") && sent[0].0.contains("\"b\""),
            "{}",
            sent[0].0
        );
        assert_eq!(sent[0].1, 0, "no attempt before this one");
        let settled = steps.store.settled();
        assert_eq!(
            states(&settled),
            [
                ("a".into(), DeliveryState::Delivered, None),
                ("b".into(), DeliveryState::Delivered, None)
            ]
        );
        assert!(settled.iter().all(|i| matches!(i.settlement, Settlement::Done)));
        let history = history(&settled[0]);
        assert_eq!(
            (history.http_status, history.duration_ms, history.attempt),
            (Some(200), Some(7), 1)
        );
        assert_eq!(
            steps.store.0.endpoint_results.lock().unwrap().len(),
            1,
            "classified once"
        );
    }

    #[tokio::test]
    async fn a_failure_retries_each_delivery_with_its_attempt_counted() {
        let steps = steps(status(500));
        let before = steps.clock.now();
        steps.deliver(batch(subscription(), vec![event("a"), event("b")])).await;

        let settled = steps.store.settled();
        assert_eq!(settled.len(), 2);
        for item in &settled {
            let Settlement::Retry { delivery, due } = &item.settlement else {
                panic!("{:?}", item.settlement)
            };
            assert_eq!(delivery.attempts, 1);
            assert!(*due > before, "a retry is later");
            assert_eq!(history(item).state, DeliveryState::Retrying);
            assert_eq!(history(item).next, Some(*due));
        }
    }

    #[tokio::test]
    async fn a_refusal_without_a_dead_letter_destination_is_dropped_for_the_dead_letter_reason() {
        let steps = steps(status(400));
        steps.deliver(batch(subscription(), vec![event("a")])).await;

        let settled = steps.store.settled();
        assert_eq!(
            states(&settled),
            [("a".into(), DeliveryState::Dropped, Some("NonRetriableFailure".into()))]
        );
        assert!(matches!(settled[0].settlement, Settlement::Done));

        // With a destination, the same refusal is dead-lettered there, for that reason.
        let topic = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        let resource = json!({"properties": {
            "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://example.com/hook"}},
            "deadLetterDestination": {"endpointType": "LocalDirectory", "properties": {"containerName": "dead-letters"}}}});
        let with_destination = Subscription::from_resource(
            &topic,
            SubscriptionName::parse("billing").unwrap(),
            &resource,
            UnixMillis(0),
        )
        .unwrap();
        steps.deliver(batch(with_destination, vec![event("b")])).await;
        let settled = steps.store.settled();
        assert_eq!(
            states(&settled),
            [(
                "b".into(),
                DeliveryState::DeadLettered,
                Some("NonRetriableFailure".into())
            )]
        );
        let Settlement::DeadLetter { entry } = &settled[0].settlement else {
            panic!("not dead-lettered: {:?}", settled[0].settlement)
        };
        assert_eq!(entry.reason, DeadLetterReason::NonRetriableFailure);
    }

    #[tokio::test]
    async fn check_ends_a_delivery_out_of_attempts_unattempted_and_sends_the_rest() {
        let steps = steps(status(200));
        let subscription = subscription();
        let mut spent = event("spent");
        spent.ready.delivery.attempts = subscription.retry_policy.max_delivery_attempts();
        steps.deliver(batch(subscription, vec![spent, event("fresh")])).await;

        let sent = steps.destination.sent.lock().unwrap().clone();
        assert_eq!(sent.len(), 1);
        assert!(!sent[0].0.contains("spent"), "{}", sent[0].0);
        assert_eq!(
            states(&steps.store.settled()),
            [
                (
                    "spent".into(),
                    DeliveryState::Dropped,
                    Some("MaxDeliveryAttemptsExceeded".into())
                ),
                ("fresh".into(), DeliveryState::Delivered, None)
            ]
        );
    }

    #[tokio::test]
    async fn an_endpoint_on_probation_holds_the_batch_back_uncharged() {
        let steps = steps(status(200));
        let until = steps.clock.now().plus(Duration::from_secs(60));
        *steps.store.0.gate.lock().unwrap() = Some(Gate::Wait(until));
        steps.deliver(batch(subscription(), vec![event("a")])).await;

        assert!(steps.destination.sent.lock().unwrap().is_empty(), "nothing attempted");
        let settled = steps.store.settled();
        let Settlement::Retry { delivery, due } = &settled[0].settlement else {
            panic!("{:?}", settled[0].settlement)
        };
        assert_eq!(delivery.attempts, 0, "not charged");
        assert!(*due >= until);
        assert_eq!(history(&settled[0]).state, DeliveryState::HeldBack);
        assert_eq!(
            history(&settled[0]).hold,
            Some(Hold {
                reason: HoldReason::EndpointProbation,
                until
            }),
            "the history says why and until when"
        );
    }

    #[tokio::test]
    async fn an_endpoint_awaiting_consent_holds_the_batch_back_and_one_that_refused_dead_letters() {
        let steps = steps(status(200));
        let mut awaiting = subscription();
        awaiting.provisioning = eg_core::validation::Provisioning::AwaitingManualAction {
            code: "c".into(),
            deadline: steps.clock.now().plus(Duration::from_secs(600)),
            reason: String::new(),
        };
        steps.deliver(batch(awaiting, vec![event("a")])).await;
        let settled = steps.store.settled();
        assert_eq!(states(&settled)[0].1, DeliveryState::HeldBack);
        let hold = history(&settled[0]).hold.expect("a hold reason");
        assert_eq!(hold.reason, HoldReason::AwaitingValidation);
        assert!(hold.until > steps.clock.now(), "consent is looked at again later");

        let mut refused = subscription();
        refused.provisioning = eg_core::validation::Provisioning::Failed { reason: "no".into() };
        steps.deliver(batch(refused, vec![event("b")])).await;
        assert_eq!(
            states(&steps.store.settled()),
            [("b".into(), DeliveryState::Dropped, Some("NonRetriableFailure".into()))]
        );
        assert!(steps.destination.sent.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_paused_subscription_sets_its_deliveries_aside_unless_the_catalog_has_it_resumed() {
        let steps = steps(status(200));
        let mut paused = subscription();
        paused.paused = true;
        *steps.store.0.current.lock().unwrap() = Some(Arc::new(paused.clone()));
        steps.deliver(batch(paused.clone(), vec![event("a")])).await;
        let settled = steps.store.settled();
        assert!(
            matches!(settled[0].settlement, Settlement::Park { .. }),
            "{:?}",
            settled[0].settlement
        );
        assert_eq!(history(&settled[0]).state, DeliveryState::Paused);

        // The copy in hand predates a resume: the catalog's copy wins.
        *steps.store.0.current.lock().unwrap() = Some(Arc::new(subscription()));
        steps.deliver(batch(paused, vec![event("b")])).await;
        assert_eq!(states(&steps.store.settled())[0].1, DeliveryState::Delivered);
    }

    #[tokio::test]
    async fn an_unrenderable_event_is_dropped_and_the_rest_of_the_batch_is_sent() {
        let steps = steps(status(200));
        steps
            .deliver(batch(subscription(), vec![held("broken", "not json"), event("b")]))
            .await;

        let sent = steps.destination.sent.lock().unwrap().clone();
        assert_eq!(sent.len(), 1);
        assert_eq!(
            states(&steps.store.settled()),
            [
                (
                    "broken".into(),
                    DeliveryState::Dropped,
                    Some("EventUnrenderable".into())
                ),
                ("b".into(), DeliveryState::Delivered, None)
            ]
        );
    }

    #[test]
    fn decide_gives_each_delivery_its_own_decision() {
        let subscription = subscription();
        let policy = ProfilePolicies::default();
        let policy = policy.of(subscription.profile);
        let mut last = event("last");
        last.ready.delivery.attempts = subscription.retry_policy.max_delivery_attempts() - 1;
        let kept = [event("first"), last];
        let sent = Sent {
            outcome: status(503),
            error: None,
            took: Duration::from_millis(3),
            late: None,
        };
        let verdicts = decide(policy, &subscription, &kept, &sent, Clock::default().now(), || 0.5);
        assert!(matches!(verdicts[0].settlement, Settlement::Retry { .. }));
        assert_eq!(verdicts[1].history.state, DeliveryState::Dropped);
        assert_eq!(
            verdicts[1].history.reason.as_deref(),
            Some("MaxDeliveryAttemptsExceeded")
        );
        assert_eq!(verdicts[1].history.outcome, Some(status(503).name()));
    }

    #[tokio::test]
    async fn settle_retries_until_the_store_answers_and_reports_a_delivery_taken_back() {
        let steps = steps(status(200));
        let h = event("a");
        let verdict = || Verdict::dropped(&h.ready.delivery, DropReason::EventMissing, UnixMillis(1));
        steps.store.0.failing_settles.store(2, Ordering::SeqCst);
        assert!(steps.settle(&h.partition, &h.ready, verdict()).await, "took effect");
        assert_eq!(steps.store.settled().len(), 1);

        steps.store.0.taken_back.store(true, Ordering::SeqCst);
        assert!(
            !steps.settle(&h.partition, &h.ready, verdict()).await,
            "someone else holds it now"
        );
    }

    /// A store holding the events of `stored` and the subscriptions named in `existing`
    /// (as copies of `subscription()` under that name).
    fn stored(steps: &Steps<RecordingStore, Answering>, stored: &[&str], existing: &[&str]) {
        let mut bodies = steps.store.0.bodies.lock().unwrap();
        for id in stored {
            bodies.insert(format!("event-{id}"), event(id).body);
        }
        let mut subscriptions = steps.store.0.subscriptions.lock().unwrap();
        for name in existing {
            let mut s = subscription();
            s.name = SubscriptionName::parse(name).unwrap();
            subscriptions.insert((*name).into(), Arc::new(s));
        }
    }

    /// A delivery read for the subscription named `subscription`.
    fn read(id: &str, subscription: &str) -> ReadyDelivery {
        let mut ready = event(id).ready;
        ready.delivery.subscription = subscription.into();
        ready
    }

    #[tokio::test]
    async fn look_up_finds_each_delivery_its_event_and_subscription() {
        let steps = steps(status(200));
        stored(&steps, &["a", "b"], &["billing"]);
        let partition = Keyspace::new("eg", 1).partition(0);
        let found = steps
            .look_up(&partition, vec![read("a", "billing"), read("b", "billing")])
            .await
            .unwrap();

        let ids: Vec<_> = found.iter().map(|(_, h)| h.ready.delivery.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(found.iter().all(|(s, _)| s.name.as_str() == "billing"));
        assert!(found[0].1.body.contains("\"a\""), "{}", found[0].1.body);
        assert!(steps.store.settled().is_empty(), "nothing dropped");
    }

    #[tokio::test]
    async fn look_up_takes_a_carried_body_from_its_entry_and_reads_only_the_others() {
        let steps = steps(status(200));
        // Only "stored" is in the event store; "carried" brings its body along, and a
        // body the store had under its key would be a different one.
        stored(&steps, &["stored"], &["billing"]);
        steps
            .store
            .0
            .bodies
            .lock()
            .unwrap()
            .insert("event-carried".into(), "not this one".into());
        let mut carried = read("carried", "billing");
        carried.carried_body = Some(event("carried").body);
        carried.carries_body = true;
        let partition = Keyspace::new("eg", 1).partition(0);
        let found = steps
            .look_up(&partition, vec![carried, read("stored", "billing")])
            .await
            .unwrap();

        let ids: Vec<_> = found.iter().map(|(_, h)| h.ready.delivery.id.as_str()).collect();
        assert_eq!(ids, ["carried", "stored"]);
        assert!(found[0].1.body.contains("\"carried\""), "{}", found[0].1.body);
        assert!(found[0].1.ready.carries_body, "settled as carrying its body");
        assert!(found[1].1.body.contains("\"stored\""), "{}", found[1].1.body);
    }

    #[tokio::test]
    async fn look_up_drops_a_delivery_whose_subscription_is_deleted_or_event_is_gone() {
        let steps = steps(status(200));
        // "gone" has no stored event; "orphan" belongs to a deleted subscription (and
        // its event is gone too: the deleted subscription is the reason given).
        stored(&steps, &["kept", "orphaned"], &["billing"]);
        let partition = Keyspace::new("eg", 1).partition(0);
        let found = steps
            .look_up(
                &partition,
                vec![
                    read("kept", "billing"),
                    read("orphaned", "deleted"),
                    read("gone", "billing"),
                    read("orphan", "deleted"),
                ],
            )
            .await
            .unwrap();

        let ids: Vec<_> = found.iter().map(|(_, h)| h.ready.delivery.id.as_str()).collect();
        assert_eq!(ids, ["kept"]);
        let settled = steps.store.settled();
        assert_eq!(
            states(&settled),
            [
                (
                    "orphaned".into(),
                    DeliveryState::Dropped,
                    Some("SubscriptionDeleted".into())
                ),
                ("gone".into(), DeliveryState::Dropped, Some("EventMissing".into())),
                (
                    "orphan".into(),
                    DeliveryState::Dropped,
                    Some("SubscriptionDeleted".into())
                ),
            ]
        );
        assert!(settled.iter().all(|i| matches!(i.settlement, Settlement::Done)));
    }

    #[tokio::test]
    async fn look_up_leaves_held_a_delivery_whose_subscription_cannot_be_looked_up() {
        let steps = steps(status(200));
        stored(&steps, &["a", "b"], &["billing"]);
        steps.store.0.unreadable.lock().unwrap().push("unknown".into());
        let partition = Keyspace::new("eg", 1).partition(0);
        let found = steps
            .look_up(&partition, vec![read("a", "unknown"), read("b", "billing")])
            .await
            .unwrap();

        let ids: Vec<_> = found.iter().map(|(_, h)| h.ready.delivery.id.as_str()).collect();
        assert_eq!(ids, ["b"]);
        assert!(
            steps.store.settled().is_empty(),
            "not dropped: taken back after the visibility timeout"
        );
    }

    fn batching(max_events: u32) -> Arc<Subscription> {
        let mut s = subscription();
        s.batching.max_events_per_batch = max_events;
        Arc::new(s)
    }

    fn ids(batch: &Batch) -> Vec<&str> {
        batch.held.iter().map(|h| h.ready.delivery.id.as_str()).collect()
    }

    #[test]
    fn batches_group_deliveries_per_subscription_in_the_order_read() {
        let (billing, shipping) = (batching(10), batching(10));
        let found = vec![
            (billing.clone(), event("a")),
            (shipping.clone(), event("b")),
            (billing.clone(), event("c")),
        ];
        let cut = batches(found);
        assert_eq!(cut.len(), 2);
        assert!(Arc::ptr_eq(&cut[0].subscription, &billing));
        assert_eq!(ids(&cut[0]), ["a", "c"]);
        assert!(Arc::ptr_eq(&cut[1].subscription, &shipping));
        assert_eq!(ids(&cut[1]), ["b"]);
    }

    #[test]
    fn batches_are_cut_by_the_subscriptions_batch_settings() {
        let two = batching(2);
        let found = ["a", "b", "c", "d", "e"].map(|id| (two.clone(), event(id)));
        let cut: Vec<_> = batches(found.into()).iter().map(ids).map(|ids| ids.join(",")).collect();
        assert_eq!(cut, ["a,b", "c,d", "e"]);

        let unbatched = batching(1);
        let found = ["a", "b"].map(|id| (unbatched.clone(), event(id)));
        assert_eq!(batches(found.into()).len(), 2, "one event per request");
        assert!(batches(Vec::new()).is_empty());
    }
}
