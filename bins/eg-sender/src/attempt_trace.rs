//! An attempt's trace: the span of one delivery attempt, continuing the trace its
//! events were published in, and the `traceparent` the delivered request carries so the
//! endpoint's own spans join that trace (traces.md).
//!
//! A batch continues the context of its first event (one request has one parent). The
//! span holds the attempt's outcome, HTTP status, duration, attempt number and the
//! endpoint's identity (the hash probation keys it by, never its URL); the retry
//! scheduled or the dead-letter write are events on it. A batch whose first event has no
//! context gets no span at all (nothing to continue; the publish decided).

use crate::destination::{RenderedBatch, Sent};
use crate::verdict::Verdict;
use eg_core::probation::EndpointId;
use eg_core::{Delivery, TraceContext};
use eg_runtime::traces;
use eg_store::Settlement;

/// The W3C headers eg sends an attempt's context in.
const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// The span of an attempt at a batch of `events` deliveries whose first is `first`.
pub fn attempt_span(endpoint: &EndpointId, first: Option<&Delivery>, events: usize) -> tracing::Span {
    // An event without a context starts no trace of its own here: whether it is traced
    // was decided at its publish (the publisher's context, or eg's sampler there).
    let Some(first) = first.filter(|d| d.trace.is_some()) else {
        return tracing::Span::none();
    };
    let span = tracing::info_span!(
        target: traces::TARGET,
        "attempt",
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        eg.topic = %first.topic,
        eg.subscription = %first.subscription,
        eg.endpoint = %endpoint,
        eg.attempt = first.attempts.saturating_add(1),
        eg.events = events,
        eg.outcome = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        eg.duration_ms = tracing::field::Empty,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
    );
    traces::continue_trace(&span, first.trace.as_ref());
    span
}

/// Adds the attempt's context to the request's headers (`traceparent`, and
/// `tracestate` when there is one), unless the subscription's own delivery properties
/// set them, and keeps it as the batch's [`RenderedBatch::trace`] for destinations that
/// build their messages' headers themselves. Returns the context sent.
pub fn carry(
    span: &tracing::Span,
    parent: Option<&TraceContext>,
    batch: &mut RenderedBatch<'_>,
) -> Option<TraceContext> {
    let context = traces::propagate(span, parent)?;
    traces::name_in_logs(span, &context);
    add_headers(&mut batch.delivery_headers, Some(&context));
    batch.trace = Some(context.clone());
    Some(context)
}

/// Adds `context` to `headers` as the W3C `traceparent` and `tracestate`, unless they
/// already name a `traceparent` (a delivery property set by the subscription wins, with
/// whatever `tracestate` it has). The one place every destination's headers get it from.
pub fn add_headers(headers: &mut Vec<(String, String)>, context: Option<&TraceContext>) {
    let Some(context) = context else { return };
    if headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(TRACEPARENT)) {
        return;
    }
    headers.retain(|(name, _)| !name.eq_ignore_ascii_case(TRACESTATE));
    headers.push((TRACEPARENT.to_owned(), context.traceparent()));
    if let Some(state) = context.tracestate() {
        headers.push((TRACESTATE.to_owned(), state.to_owned()));
    }
}

/// Records what the attempt got back on its span.
pub fn record_sent(span: &tracing::Span, sent: &Sent) {
    span.record("eg.outcome", sent.outcome.name().as_str());
    span.record("eg.duration_ms", sent.took.as_millis() as u64);
    if let Some(status) = sent.outcome.status_code() {
        span.record("http.response.status_code", status);
    }
    if !sent.outcome.is_success() {
        span.record("otel.status_code", "ERROR");
    }
}

/// Records the fate decided for each delivery as an event of the attempt's span: a
/// retry with its due time, or the dead-letter write with its reason.
pub fn record_verdicts(span: &tracing::Span, verdicts: &[Verdict]) {
    if span.is_none() {
        return;
    }
    span.in_scope(|| {
        for verdict in verdicts {
            match &verdict.settlement {
                Settlement::Retry { delivery, due } => tracing::info!(
                    target: traces::TARGET,
                    delivery = %delivery.id,
                    attempts = delivery.attempts,
                    due_ms = due.0,
                    "retry scheduled"
                ),
                Settlement::DeadLetter { entry } => tracing::info!(
                    target: traces::TARGET,
                    delivery = %entry.delivery_id,
                    reason = %entry.reason,
                    "dead-lettered"
                ),
                _ => {}
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(state: Option<&str>) -> TraceContext {
        TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", state).unwrap()
    }

    #[test]
    fn the_context_is_added_as_the_w3c_headers() {
        let mut headers = vec![("team".to_owned(), "billing".to_owned())];
        add_headers(&mut headers, Some(&context(Some("k=v"))));
        assert_eq!(
            headers[1..],
            [
                (TRACEPARENT.to_owned(), context(None).traceparent()),
                (TRACESTATE.to_owned(), "k=v".to_owned())
            ]
        );
        let mut untraced = vec![("team".to_owned(), "billing".to_owned())];
        add_headers(&mut untraced, None);
        assert_eq!(untraced.len(), 1, "no context, no header");
    }

    #[test]
    fn a_traceparent_the_subscription_sets_is_kept_with_its_own_tracestate() {
        let own = || {
            vec![
                ("TraceParent".to_owned(), "mine".to_owned()),
                ("tracestate".to_owned(), "a=b".to_owned()),
            ]
        };
        let mut headers = own();
        add_headers(&mut headers, Some(&context(Some("k=v"))));
        assert_eq!(headers, own());
        // A tracestate set alone does not belong to the context sent: the attempt's wins.
        let mut headers = vec![("tracestate".to_owned(), "a=b".to_owned())];
        add_headers(&mut headers, Some(&context(None)));
        assert_eq!(headers, [(TRACEPARENT.to_owned(), context(None).traceparent())]);
    }
}
