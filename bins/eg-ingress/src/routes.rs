//! Every route of the ingress, and the rule every answer follows: a refusal (including
//! axum's own, for an unknown route or a malformed path) carries Event Grid's error body.
//! The handlers live with their API (`publish`, `namespace`, `pull`, `admin`, `status`); this is
//! the one place that names them all.

use crate::errors::Refusal;
use crate::state::App;
use crate::{admin, namespace, publish, pull, status};
use axum::Router;
use axum::body::to_bytes;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use eg_runtime::ops;
use eg_runtime::startup::Process;
use std::sync::Arc;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

/// Most bytes of an error body produced by axum itself that are quoted in the Event
/// Grid error body replacing it (they are short texts such as "Invalid URL: …").
const MAX_QUOTED_ERROR_BYTES: usize = 2048;

/// The publish APIs (Event Grid's custom-topic one and its namespace data plane), pull
/// delivery's operations, the management API (only with an admin token configured), the
/// status page and the ops endpoints, all over one shared [`App`].
pub fn router(app: &Arc<App>, pull: &Arc<pull::Pull>, process: &Process) -> Router {
    // `{name}` is the whole segment `<subscription>:<action>`, split by the handler.
    let pull_routes = Router::new()
        .route("/topics/{topic}/eventsubscriptions/{name}", post(pull::operate))
        .route("/topics/{topic}/eventSubscriptions/{name}", post(pull::operate))
        .with_state((app.clone(), pull.clone()));
    let mut router = Router::new()
        .route("/topics/{topic}/api/events", post(publish::publish))
        // `{topic}` is the whole segment `<topic>:publish`: axum routes no suffix after a
        // parameter, so the handler splits it.
        .route("/topics/{topic}", post(namespace::topic_action))
        .route(
            "/validation/topics/{topic}/eventSubscriptions/{name}",
            get(admin::manual_validation),
        )
        .with_state(app.clone())
        .merge(pull_routes);
    if app.admin_token.is_some() {
        router = router.nest("/admin", admin::router(app.clone()));
    }
    // A span per request with the path only: a query may carry `aeg-sas-key`.
    let trace = TraceLayer::new_for_http()
        .make_span_with(|r: &Request<_>| tracing::info_span!("request", method = %r.method(), path = %r.uri().path()));
    router
        .fallback(not_found)
        .layer(middleware::from_fn(event_grid_errors))
        .merge(ops::router(process.store.clone(), process.metrics.clone()))
        .merge(status::router(app.clone(), process))
        .route("/", get(|| async { "eg-ingress" }))
        .route("/openapi.yaml", get(openapi))
        .layer(trace)
        .layer(CatchPanicLayer::custom(panicked))
}

/// docs/openapi.yaml, built in: the document describes the binary that serves it, and
/// it needs no auth (it holds no secret, and a client generator fetches it first).
const OPENAPI: &str = include_str!("../../../docs/openapi.yaml");

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI)
}

/// Anything not routed: Event Grid's `404`, naming the path (never the query: it may
/// carry a key).
async fn not_found(request: Request) -> Refusal {
    Refusal::not_found(format!(
        "nothing is served at {} {}; publish with POST /topics/{{topic}}/api/events",
        request.method(),
        request.uri().path()
    ))
}

/// Gives every error answer that is not already JSON (axum's rejections, e.g. a path
/// that is not UTF-8, a method a route does not take) Event Grid's error body, quoting
/// axum's text as the message and keeping its headers (`Allow` on a `405`).
async fn event_grid_errors(request: Request, next: Next) -> Response {
    // The URI is shared, not copied: only an error answer reads its path.
    let method = request.method().clone();
    let uri = request.uri().clone();
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = to_bytes(body, MAX_QUOTED_ERROR_BYTES)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let path = uri.path();
    let message = match status {
        StatusCode::METHOD_NOT_ALLOWED => format!("{method} is not allowed on {path}"),
        StatusCode::NOT_FOUND if text.is_empty() => format!("nothing is served at {method} {path}"),
        _ if text.is_empty() => status.canonical_reason().unwrap_or("refused").to_owned(),
        _ => text,
    };
    let mut answer = Refusal::of_status(status, message).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().append(name, value.clone());
        }
    }
    answer
}

/// A handler that panicked: the request gets a `500` in Event Grid's shape (the
/// process and other requests carry on); the panic is a bug, logged as an error.
fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown");
    tracing::error!(panic = what, "a request handler panicked");
    Refusal::of_status(
        StatusCode::INTERNAL_SERVER_ERROR,
        "the request failed inside the service (a bug: the log says where)",
    )
    .into_response()
}
