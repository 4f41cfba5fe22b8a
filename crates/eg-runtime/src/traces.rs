//! OpenTelemetry traces: export over OTLP/HTTP when the standard `OTEL_*` variables ask
//! for it, and the few helpers the tiers use to continue an event's W3C trace context.
//!
//! Off unless configured: with no OTLP endpoint set, no exporter, thread or layer exists
//! and eg's trace spans are plain `tracing` spans (logged like any other, carrying a
//! `trace_id` and `span_id` fields when the event has a context: [`name_in_logs`]). When
//! on, only spans of target [`TARGET`] become OpenTelemetry spans: the publish, each delivery attempt, the retry
//! and dead-letter decisions as their events, and the spans pull delivery records after
//! the fact ([`record_finished`]). Request spans of the ops endpoints or the status page
//! stay out of the trace backend.
//!
//! The exporter sends with eg's own `reqwest` client on the process's tokio runtime
//! ([`export::OnRuntime`]), so tracing adds no second HTTP stack. Sampling
//! (`OTEL_TRACES_SAMPLER`, `_ARG`), the batch processor (`OTEL_BSP_*`), the endpoint,
//! headers and timeout (`OTEL_EXPORTER_OTLP_*`) and the resource (`OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`) are read by the OpenTelemetry SDK as its specification says.

mod export;

use eg_core::TraceContext;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `tracing` target of the spans and events exported as OpenTelemetry spans.
pub const TARGET: &str = "eg::trace";

/// How long a process's last spans may take to leave when it stops.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// The provider, when export is on: flushed when the process stops.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// What the `OTEL_*` variables ask of eg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Export {
    /// No export: no endpoint set, `OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true`.
    Off,
    /// OTLP over HTTP with protobuf bodies, to the endpoint the variables name.
    OtlpHttp {
        /// Set by `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` (else the tier's name).
        service_named: bool,
    },
}

/// A setting eg cannot honour, named with what was wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{variable}: {problem}")]
pub struct ExportError {
    pub variable: &'static str,
    pub problem: String,
}

/// Reads what export the variables ask for (`var` looks a variable up; an empty value
/// counts as unset, as the specification says).
pub fn export_from(var: impl Fn(&str) -> Option<String>) -> Result<Export, ExportError> {
    let var = |name: &str| var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(Export::Off);
    }
    match var("OTEL_TRACES_EXPORTER").as_deref() {
        None | Some("otlp") => {}
        Some("none") => return Ok(Export::Off),
        Some(other) => {
            return Err(ExportError {
                variable: "OTEL_TRACES_EXPORTER",
                problem: format!("eg exports traces over OTLP only: `otlp` or `none`, got {other:?}"),
            });
        }
    }
    if var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none() && var("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() {
        return Ok(Export::Off);
    }
    for variable in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
        match var(variable).as_deref() {
            None => continue,
            Some("http/protobuf") => break,
            Some(other) => {
                return Err(ExportError {
                    variable,
                    problem: format!(
                        "eg exports OTLP over HTTP with protobuf bodies: `http/protobuf`, got {other:?} \
                         (point it at the collector's OTLP/HTTP port, 4318 by default)"
                    ),
                });
            }
        }
    }
    let service_named = var("OTEL_SERVICE_NAME").is_some()
        || var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| {
            attributes
                .split(',')
                .any(|pair| pair.split('=').next().is_some_and(|k| k.trim() == "service.name"))
        });
    Ok(Export::OtlpHttp { service_named })
}

/// The tracer provider `export` asks for, exporting as `tier` unless the variables name
/// the service; `None` when export is off. Call once, inside the tokio runtime.
pub fn provider(export: &Export, tier: &str) -> Result<Option<SdkTracerProvider>, ExportError> {
    let Export::OtlpHttp { service_named } = export else {
        return Ok(None);
    };
    let exporter = export::span_exporter().map_err(|e| ExportError {
        variable: "OTEL_EXPORTER_OTLP_ENDPOINT",
        problem: format!("cannot set up the OTLP exporter: {e}"),
    })?;
    let mut resource = Resource::builder();
    if !service_named {
        resource = resource.with_service_name(tier.to_owned());
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let _ = PROVIDER.set(provider.clone());
    Ok(Some(provider))
}

/// The `tracing` layer that turns eg's trace spans into OpenTelemetry spans.
pub fn layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S> + use<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    use tracing_subscriber::Layer;
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("eg"))
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| meta.target() == TARGET))
}

/// Whether spans are exported (the `OTEL_*` variables asked for it).
pub fn enabled() -> bool {
    PROVIDER.get().is_some()
}

/// Sends the spans still queued (within [`SHUTDOWN_TIMEOUT`]) and stops the exporter.
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
    }
}

/// Makes `span` (created, not yet entered) continue the trace `parent`: a child of the
/// span it names. Does nothing when export is off or there is no parent.
pub fn continue_trace(span: &tracing::Span, parent: Option<&TraceContext>) {
    let Some(parent) = parent.and_then(span_context) else {
        return;
    };
    let context = opentelemetry::Context::new().with_remote_span_context(parent);
    // Fails only without the layer (export off): then there is nothing to continue.
    let _ = span.set_parent(context);
}

/// The context to send on from `span`: the span itself when eg records it, else
/// `parent` unchanged (export off: the endpoint still joins the publisher's trace).
pub fn propagate(span: &tracing::Span, parent: Option<&TraceContext>) -> Option<TraceContext> {
    recorded(span).or_else(|| parent.cloned())
}

/// Names `sent`, the context a span sends on or stores, in the span's `trace_id` and
/// `span_id` fields (declared `Empty` where the span is made), so every log line inside
/// it names the trace and the span the next hop continues: eg's own span when export is
/// on, the stored parent when off (the same ids the `traceparent` carries). A span
/// without a context records nothing: untraced work costs nothing here.
pub fn name_in_logs(span: &tracing::Span, sent: &TraceContext) {
    span.record("trace_id", sent.trace_id());
    span.record("span_id", sent.parent_id());
}

/// `span`'s own W3C context when export is on (sampled or not), `None` when off.
pub fn recorded(span: &tracing::Span) -> Option<TraceContext> {
    PROVIDER.get()?;
    let context = span.context();
    let own = context.span().span_context().clone();
    if !own.is_valid() {
        return None;
    }
    let state = own.trace_state().header();
    let traceparent = format!(
        "00-{}-{}-{:02x}",
        own.trace_id(),
        own.span_id(),
        own.trace_flags().to_u8()
    );
    TraceContext::parse(&traceparent, Some(&state))
}

/// An attribute of a [`record_finished`] span.
pub use opentelemetry::KeyValue;

/// A span whose parent is known only when its work is done, recorded then: from
/// `started` to now, a child of `parent`, with `attributes`, an error when `failed`.
///
/// Pull delivery learns an event's context from the events a request locked or settled;
/// a `tracing` span could no longer take that parent once entered, and one made before
/// would start a trace of its own for requests whose events have none. So these spans
/// are made only for a parent, after the fact. Nothing when export is off.
pub fn record_finished(
    name: &'static str,
    parent: &TraceContext,
    started: SystemTime,
    attributes: Vec<KeyValue>,
    failed: bool,
) {
    use opentelemetry::trace::{Span, SpanKind, Status, Tracer};
    let (Some(provider), Some(parent)) = (PROVIDER.get(), span_context(parent)) else {
        return;
    };
    let tracer = provider.tracer("eg");
    let context = opentelemetry::Context::new().with_remote_span_context(parent);
    let mut span = tracer
        .span_builder(name)
        .with_kind(SpanKind::Server)
        .with_start_time(started)
        .with_attributes(attributes)
        .start_with_context(&tracer, &context);
    if failed {
        span.set_status(Status::error(""));
    }
    span.end();
}

/// The OpenTelemetry form of a stored context (remote: it came from another process).
fn span_context(context: &TraceContext) -> Option<SpanContext> {
    let trace_id = TraceId::from_hex(context.trace_id()).ok()?;
    let span_id = SpanId::from_hex(context.parent_id()).ok()?;
    let state = context
        .tracestate()
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(context.flags()),
        true,
        state,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use tracing_subscriber::layer::SubscriberExt;

    fn export(vars: &[(&str, &str)]) -> Result<Export, ExportError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        export_from(|name| vars.get(name).cloned())
    }

    #[test]
    fn export_is_off_unless_an_endpoint_is_set() {
        assert_eq!(export(&[]), Ok(Export::Off));
        assert_eq!(export(&[("OTEL_SERVICE_NAME", "eg")]), Ok(Export::Off));
        assert_eq!(export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]), Ok(Export::Off));
        let on = Ok(Export::OtlpHttp { service_named: false });
        assert_eq!(export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]), on);
        assert_eq!(
            export(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces")]),
            on
        );
    }

    #[test]
    fn export_can_be_turned_off_explicitly() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        assert_eq!(export(&[endpoint, ("OTEL_SDK_DISABLED", "true")]), Ok(Export::Off));
        assert_eq!(export(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]), Ok(Export::Off));
    }

    #[test]
    fn a_protocol_or_exporter_eg_cannot_speak_is_refused_by_name() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        let grpc = export(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap_err();
        assert_eq!(grpc.variable, "OTEL_EXPORTER_OTLP_PROTOCOL");
        assert!(grpc.problem.contains("http/protobuf"), "{grpc}");
        let per_signal = export(&[
            endpoint,
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ]);
        assert!(per_signal.is_ok(), "the per-signal variable wins");
        let zipkin = export(&[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")]).unwrap_err();
        assert_eq!(zipkin.variable, "OTEL_TRACES_EXPORTER");
    }

    #[test]
    fn the_service_is_named_by_the_variables_or_else_by_the_tier() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        let named = Ok(Export::OtlpHttp { service_named: true });
        assert_eq!(export(&[endpoint, ("OTEL_SERVICE_NAME", "eg-prod")]), named);
        assert_eq!(
            export(&[endpoint, ("OTEL_RESOURCE_ATTRIBUTES", "team=x, service.name=eg")]),
            named
        );
        assert_eq!(
            export(&[endpoint, ("OTEL_RESOURCE_ATTRIBUTES", "team=x")]),
            Ok(Export::OtlpHttp { service_named: false })
        );
    }

    #[test]
    fn a_stored_context_becomes_a_remote_parent() {
        let stored =
            TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Some("k=v")).unwrap();
        let parent = span_context(&stored).unwrap();
        assert!(parent.is_remote() && parent.is_sampled());
        assert_eq!(parent.trace_id().to_string(), stored.trace_id());
        assert_eq!(parent.span_id().to_string(), stored.parent_id());
        assert_eq!(parent.trace_state().header(), "k=v");
    }

    /// A writer into a shared buffer, for reading back what a log line said.
    #[derive(Clone, Default)]
    struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_log_line_inside_a_traced_span_names_the_trace_and_the_span_in_text_and_json() {
        let context = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None).unwrap();
        for json in [false, true] {
            let lines = Lines::default();
            let writer = lines.clone();
            let layer = tracing_subscriber::fmt::layer()
                .with_writer(move || writer.clone())
                .with_ansi(false);
            let subscriber: Box<dyn tracing::Subscriber + Send + Sync> = if json {
                Box::new(tracing_subscriber::registry().with(layer.json().flatten_event(true)))
            } else {
                Box::new(tracing_subscriber::registry().with(layer))
            };
            tracing::subscriber::with_default(subscriber, || {
                let span = tracing::info_span!(
                    target: TARGET,
                    "attempt",
                    trace_id = tracing::field::Empty,
                    span_id = tracing::field::Empty
                );
                name_in_logs(&span, &context);
                span.in_scope(|| tracing::info!("inside"));
            });
            let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
            assert!(text.contains("4bf92f3577b34da6a3ce929d0e0e4736"), "json {json}: {text}");
            assert!(text.contains("00f067aa0ba902b7"), "json {json}: {text}");
            assert!(text.contains("span_id"), "json {json}: {text}");
        }
    }

    #[test]
    fn without_export_the_stored_context_is_sent_on_unchanged() {
        let stored = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", None);
        let span = tracing::info_span!(target: TARGET, "attempt");
        continue_trace(&span, stored.as_ref());
        assert_eq!(propagate(&span, stored.as_ref()), stored);
    }
}
