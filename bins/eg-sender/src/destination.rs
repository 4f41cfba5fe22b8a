//! The destination seam: "send this rendered batch and tell me the outcome". The steps
//! of an attempt know nothing of how a batch travels; a destination does, and reports
//! the outcome as data (`AttemptOutcome`), which eg-core's policy classifies. The
//! router of every destination kind ([`crate::destinations::Destinations`]) implements
//! it; tests of the steps implement it with recorded answers.

use eg_core::destination::Target;
use eg_core::render::DeliveryBody;
use eg_core::subscription::{Subscription, resolve_headers};
use eg_core::{AttemptOutcome, TraceContext, UnixMillis};
use std::future::Future;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A batch of one subscription's events, rendered in its delivery schema: what one
/// attempt sends.
pub struct RenderedBatch<'a> {
    pub subscription: &'a Subscription,
    /// Where it goes: the subscription's target (only push subscriptions are sent).
    pub target: &'a Target,
    pub body: DeliveryBody,
    /// The subscription's delivery properties, dynamic ones read from the batch's first
    /// event ([`delivery_headers`]).
    pub delivery_headers: Vec<(String, String)>,
    /// Attempts the batch's first event has had before this one (`aeg-delivery-count`).
    pub delivery_count: u32,
    /// The same for every attempt at these deliveries (`eg_core::signing::webhook_id`), so
    /// a receiver can recognise a repeat.
    pub batch_id: String,
    /// When the attempt is made (the Redis-synced clock).
    pub sent_at: UnixMillis,
    /// The trace context the attempt sends on (`crate::attempt_trace::carry`): the
    /// attempt span's when spans are exported, else the one stored with the first event.
    pub trace: Option<TraceContext>,
    /// The replay job of the batch's first event, when it is a replayed one: sent as
    /// `aeg-replay-job` (eg_core::replay::REPLAY_HEADER) beside the delivery properties.
    pub replay_job: Option<String>,
}

/// The delivery properties of `subscription` for one event (`event`, its JSON as
/// delivered; `event_id` names it in logs). A dynamic property whose value no header can
/// carry (too long, or a control character) is left out and logged: the delivery goes on
/// without it, since every attempt would meet the same value, and an endpoint refusing
/// the header (`431`) must not count against it.
pub fn delivery_headers(subscription: &Subscription, event: &str, event_id: &str) -> Vec<(String, String)> {
    let resolved = resolve_headers(&subscription.delivery_headers, event);
    for (header, problem) in &resolved.left_out {
        tracing::warn!(
            topic = %subscription.topic,
            subscription = %subscription.name,
            event = event_id,
            header = header.as_str(),
            reason = problem.as_str(),
            "delivery property left out: the event's value {problem}"
        );
    }
    resolved.headers
}

/// What an attempt came to.
pub struct Sent {
    pub outcome: AttemptOutcome,
    /// What the destination said about a failed attempt, for the step's history, when
    /// the outcome's name alone does not tell an operator what to fix.
    pub error: Option<String>,
    pub took: Duration,
    /// The answer still on its way after the attempt timed out, when the destination
    /// was asked to listen for a late one (behaviour.md#retry-schedule-and-policy).
    pub late: Option<LateAnswer>,
}

/// The answer of an attempt that timed out, still awaited in the background.
pub type LateAnswer = JoinHandle<AttemptOutcome>;

/// Where a subscription's events go.
pub trait Destination: Send + Sync + 'static {
    /// Sends `batch` and reports the outcome. With `late_window`, an attempt that times
    /// out goes on being listened to for that long ([`Sent::late`]).
    fn send(&self, batch: RenderedBatch<'_>, late_window: Option<Duration>) -> impl Future<Output = Sent> + Send;
}
