//! Publishing: authenticate, parse, match, and store the events with their deliveries
//! in one atomic step. `200` only once all of it is durable.
//!
//! Two routes publish ([`Route`]): Event Grid's custom-topic API,
//! `POST /topics/{topic}/api/events` (served here), and its namespace data plane,
//! `POST /topics/{topic}:publish` (served by `crate::namespace`). They differ in what a
//! SAS token must be issued for, in what is checked before the body is read, and in how
//! many events a request may hold; everything else, from the catalog lookup to the
//! durable store, is this one path. Matching and storing is
//! [`eg_runtime::accept`], which eg-deadletter's notifications go through too; the notify
//! topic itself (`deadletter.notify_topic`) takes no publish from outside (`403`).

use crate::auth::authenticate;
use crate::errors::Refusal;
use crate::state::App;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use eg_core::event::AcceptedEvent;
use eg_core::publish::{PublishError, PublishLimits, PublishedBatch, check_namespace_publish};
use eg_core::publisher_auth::Resource;
use eg_core::{TopicName, TraceContext};
use eg_runtime::accept::{AcceptError, Acceptor, store_events};
use eg_runtime::metrics as m;
use eg_runtime::traces;
use eg_store::{CatalogSnapshot, TopicEntry};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// The API a publish request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /topics/{topic}/api/events`: every input schema; a SAS token names exactly
    /// this path.
    CustomTopic,
    /// `POST /topics/{topic}:publish`: CloudEvents in structured mode only, at most
    /// 1,000 events; a SAS token names the topic or a path above it (the namespace root).
    Namespace,
}

impl Route {
    /// The path of the resource the request acts on, as SAS tokens name it.
    fn resource_path(self, topic: &str) -> String {
        match self {
            Route::CustomTopic => format!("/topics/{topic}/api/events"),
            Route::Namespace => format!("/topics/{topic}"),
        }
    }

    fn resource(self, path: &str) -> Resource<'_> {
        match self {
            Route::CustomTopic => Resource::Exactly(path),
            Route::Namespace => Resource::OrAbove(path),
        }
    }

    fn limits(self, limits: PublishLimits) -> PublishLimits {
        match self {
            Route::CustomTopic => limits,
            Route::Namespace => limits.for_namespace(),
        }
    }

    /// What is refused before the body is read: on the namespace route, a topic that
    /// does not take CloudEvents, and a content type other than the structured ones.
    fn check_before_body(self, entry: &TopicEntry, headers: &HeaderMap) -> Result<(), PublishError> {
        match self {
            Route::CustomTopic => Ok(()),
            Route::Namespace => {
                let binary_mode = headers.keys().any(|name| name.as_str().starts_with("ce-"));
                check_namespace_publish(&entry.topic, content_type(headers), binary_mode)
            }
        }
    }
}

/// `POST /topics/{topic}/api/events`: an empty `200` once the events are stored. The
/// request is taken whole, so its headers are borrowed rather than copied.
pub async fn publish(
    State(app): State<Arc<App>>,
    Path(topic): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    request: Request,
) -> Result<StatusCode, Refusal> {
    let (parts, body) = request.into_parts();
    accept_counted(&app, Route::CustomTopic, &topic, &query, &parts.headers, body)
        .await
        .map(|_| StatusCode::OK)
}

/// Accepts a publish to `topic` through `route` and counts it in the publish metrics.
/// Returns how many events were accepted.
pub async fn accept_counted(
    app: &App,
    route: Route,
    topic: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<usize, Refusal> {
    let started = Instant::now();
    let publisher_trace = publish_trace(headers);
    let span = publish_span(topic, publisher_trace.as_ref());
    let trace = PublishTrace {
        span: &span,
        publisher: publisher_trace.as_ref(),
    };
    // Boxed: the future is large, and every layer it passes through would copy it whole.
    let result = Box::pin(accept(app, route, topic, query, headers, body, trace))
        .instrument(span.clone())
        .await;
    match &result {
        Ok(count) => span.record("eg.events", count),
        Err(refusal) => span
            .record("otel.status_code", "ERROR")
            .record("http.response.status_code", refusal.status().as_u16()),
    };
    let label = topic.to_ascii_lowercase();
    match &result {
        Ok(count) => {
            metrics::counter!(m::PUBLISH_SUCCESS_COUNT, "topic" => label).increment(*count as u64);
            metrics::histogram!(m::PUBLISH_SUCCESS_LATENCY_MS).record(started.elapsed().as_secs_f64() * 1000.0);
        }
        Err(refusal) => {
            // Only known topics get their own label, so strangers cannot grow the label set.
            let known = app.cache.snapshot().topic(&label).is_some();
            let error = refusal.status().as_str().to_owned();
            let topic = if known { label } else { "unknown".to_owned() };
            metrics::counter!(m::PUBLISH_FAIL_COUNT, "topic" => topic, "error" => error).increment(1);
        }
    }
    result
}

/// Returns how many events were accepted.
async fn accept(
    app: &App,
    route: Route,
    topic: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: Body,
    trace: PublishTrace<'_>,
) -> Result<usize, Refusal> {
    if let Some(notify_topic) = app
        .notify_topic
        .as_ref()
        .filter(|t| t.as_str().eq_ignore_ascii_case(topic))
    {
        app.discard_body(headers, body);
        return Err(Refusal::of_status(
            StatusCode::FORBIDDEN,
            format!(
                "topic {:?} carries eg's dead-letter notifications (deadletter.notify_topic): only eg publishes to it",
                notify_topic.as_str()
            ),
        ));
    }
    let resource_path = route.resource_path(topic);
    let publisher = Publisher {
        query,
        headers,
        resource: route.resource(&resource_path),
    };
    let admitted = admit(app, topic, &publisher).await.and_then(|(name, snapshot)| {
        route
            .check_before_body(topic_entry(&snapshot, &name)?, headers)
            .map_err(refused)?;
        Ok((name, snapshot))
    });
    let (name, snapshot) = match admitted {
        Ok(admitted) => admitted,
        Err(refusal) => {
            app.discard_body(headers, body);
            return Err(refusal);
        }
    };
    let entry = topic_entry(&snapshot, &name)?;
    let bytes = app.read_body(headers, body).await?;
    let limits = route.limits(app.limits);
    let mut batch =
        PublishedBatch::parse(&bytes, content_type(headers), &entry.topic, app.clock.now(), limits).map_err(refused)?;
    if let Some(context) = trace.stored() {
        batch.events.iter_mut().for_each(|e| e.inherit_trace(&context));
    }
    // Boxed, as in `accept_counted`: the timeout would copy the store call whole.
    within_bound(app, Box::pin(store(app, &name, snapshot, &batch.events, &publisher))).await?
}

/// The W3C trace context of a publish request's `traceparent` and `tracestate` headers;
/// `None` when absent or malformed (ignored, never refused: eg_core::trace_context).
fn publish_trace(headers: &HeaderMap) -> Option<TraceContext> {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    TraceContext::parse(value("traceparent")?, value("tracestate"))
}

/// The publish's span: exported when trace export is on, a child of the publisher's
/// span when the request carries a context. With export off and no context it is not
/// made at all, so an untraced publish costs nothing.
fn publish_span(topic: &str, publisher: Option<&TraceContext>) -> tracing::Span {
    if publisher.is_none() && !traces::enabled() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        target: traces::TARGET,
        "publish",
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        eg.topic = %topic.to_ascii_lowercase(),
        eg.events = tracing::field::Empty,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
    );
    traces::continue_trace(&span, publisher);
    span
}

/// A publish's span and the context its request carried.
#[derive(Clone, Copy)]
struct PublishTrace<'a> {
    span: &'a tracing::Span,
    publisher: Option<&'a TraceContext>,
}

impl PublishTrace<'_> {
    /// The context its events are stored with (an event's own context wins): the
    /// publish span when eg records it, else the publisher's as sent. Without a
    /// publisher's context, only a publish eg sampled itself starts a trace, so an
    /// unsampled one stores nothing.
    fn stored(&self) -> Option<TraceContext> {
        let context = match self.publisher {
            Some(publisher) => traces::propagate(self.span, Some(publisher)),
            None => traces::recorded(self.span).filter(TraceContext::sampled),
        }?;
        traces::name_in_logs(self.span, &context);
        Some(context)
    }
}

fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok())
}

/// A body or content type refused: `413` for an event too large, `415` for a form the
/// route does not take, `400` for anything else.
fn refused(error: PublishError) -> Refusal {
    if error.is_too_large() {
        Refusal::too_large(error.to_string())
    } else if error.is_unsupported_media_type() {
        Refusal::of_status(StatusCode::UNSUPPORTED_MEDIA_TYPE, error.to_string())
    } else {
        Refusal::bad_request(error.to_string())
    }
}

/// What the publisher presented and the resource it acts on: enough to check its
/// credential again whenever the catalog (and so perhaps the topic's keys) changes.
struct Publisher<'a> {
    query: &'a HashMap<String, String>,
    headers: &'a HeaderMap,
    resource: Resource<'a>,
}

impl Publisher<'_> {
    fn authenticate(&self, app: &App, snapshot: &CatalogSnapshot, name: &TopicName) -> Result<(), Refusal> {
        authenticate(
            topic_entry(snapshot, name)?,
            self.query,
            self.headers,
            self.resource,
            app.clock.now(),
        )
    }
}

/// The checks made before the body is read: the topic exists and the publisher holds
/// one of its keys. Returns the topic's name and the catalog it was found in.
async fn admit(
    app: &App,
    topic: &str,
    publisher: &Publisher<'_>,
) -> Result<(TopicName, Arc<CatalogSnapshot>), Refusal> {
    let name = TopicName::parse(topic).map_err(|_| Refusal::not_found(format!("topic {topic:?} does not exist")))?;
    let mut snapshot = app.cache.snapshot();
    if snapshot.topic(&name.key()).is_none() {
        // Created through another ingress copy a moment ago?
        // (Reloads only if the catalog moved: unknown names cannot make every request reload it.)
        snapshot = within_bound(app, app.cache.refresh()).await??;
    }
    topic_entry(&snapshot, &name)?;
    if let Err(refusal) = publisher.authenticate(app, &snapshot, &name) {
        // A key regenerated a moment ago (through any copy) is not in this copy's cached
        // catalog yet: check against the current one before refusing. Costs a refused
        // publisher one GET; a reload only if the catalog moved.
        let current = within_bound(app, app.cache.refresh()).await??;
        if current.version == snapshot.version {
            return Err(refusal);
        }
        snapshot = current;
        publisher.authenticate(app, &snapshot, &name)?;
    }
    Ok((name, snapshot))
}

/// Bounds how long a publish waits on Redis: during an outage publishers get a prompt
/// `503` with `Retry-After` instead of a hanging request.
async fn within_bound<T>(app: &App, step: impl Future<Output = T>) -> Result<T, Refusal> {
    tokio::time::timeout(app.storage_timeout, step).await.map_err(|_| {
        tracing::warn!(bound = ?app.storage_timeout, "storage did not answer in time");
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "storage did not answer in time; retry later (a retried publish may deliver an event twice, never lose it)",
        )
    })
}

/// Matches the events against the topic's subscriptions and stores them with their
/// deliveries ([`eg_runtime::accept`]); the publisher's credential is checked again
/// against every newer catalog met on the way.
async fn store(
    app: &App,
    name: &TopicName,
    snapshot: Arc<CatalogSnapshot>,
    events: &[AcceptedEvent],
    publisher: &Publisher<'_>,
) -> Result<usize, Refusal> {
    let acceptor = Acceptor {
        store: &app.store,
        cache: &app.cache,
        clock: &app.clock,
        archive: app.archive,
    };
    let recheck = |snapshot: &CatalogSnapshot| publisher.authenticate(app, snapshot, name);
    match store_events(acceptor, name, snapshot, events, recheck).await {
        Ok(accepted) => Ok(accepted.events),
        Err(AcceptError::Refused(refusal)) => Err(refusal),
        Err(AcceptError::Store(e)) => Err(e.into()),
        Err(e @ AcceptError::NoTopic(_)) => Err(Refusal::not_found(e.to_string())),
        Err(e @ AcceptError::CatalogChurn) => Err(Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            e.to_string(),
        )),
        // Never a gap in the archive: refused whole, with Retry-After (archive.md).
        Err(e @ AcceptError::ArchiveFull(_)) => Err(Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ArchiveBacklogFull",
            e.to_string(),
        )),
    }
}

fn topic_entry<'a>(snapshot: &'a CatalogSnapshot, name: &TopicName) -> Result<&'a TopicEntry, Refusal> {
    snapshot
        .topic(&name.key())
        .ok_or_else(|| Refusal::not_found(format!("topic {:?} does not exist", name.as_str())))
}
