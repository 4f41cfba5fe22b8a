//! The dead-letter write as a span of the event's trace (traces.md): one span per
//! object written, a child of the context stored with its first traced record, naming
//! the store kind, the subscription, how many records and the outcome. An object whose
//! records carry no context gets no span (whether an event is traced was decided at its
//! publish), so untraced dead letters cost nothing here.

use eg_core::deadletter::DeadLetterEntry;
use eg_runtime::traces;

/// The span of writing an object of `records` (in stream order) to `store` (its kind).
pub fn write_span<'a>(
    store: &str,
    records: impl IntoIterator<Item = &'a DeadLetterEntry>,
    count: usize,
) -> tracing::Span {
    let mut records = records.into_iter();
    let Some((first, parent)) = records.find_map(|e| e.trace().map(|t| (e, t))) else {
        return tracing::Span::none();
    };
    let span = tracing::info_span!(
        target: traces::TARGET,
        "dead-letter write",
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        eg.store = store,
        eg.topic = %first.topic.to_ascii_lowercase(),
        eg.subscription = %first.subscription.to_ascii_lowercase(),
        eg.records = count,
        eg.outcome = tracing::field::Empty,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
    );
    traces::continue_trace(&span, Some(&parent));
    if let Some(own) = traces::propagate(&span, Some(&parent)) {
        traces::name_in_logs(&span, &own);
    }
    span
}

/// Records how the write ended: `written`, `already written` (an earlier attempt
/// landed), or the failure's kind, an error.
pub fn record_outcome(span: &tracing::Span, outcome: &str, failed: bool) {
    span.record("eg.outcome", outcome);
    if failed {
        span.record("otel.status_code", "ERROR");
    }
}
