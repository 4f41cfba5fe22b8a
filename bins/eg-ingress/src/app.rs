//! The ingress application: shared state, routes, and the two rules every answer
//! follows: request bodies are read within a size and a time limit, and every refusal
//! (including axum's own, for an unknown route or a malformed path) carries Event
//! Grid's error body.

use crate::errors::Refusal;
use crate::validation::Validator;
use crate::{admin, publish};
use axum::Router;
use axum::body::{Body, Bytes, HttpBody, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use eg_core::publish::PublishLimits;
use eg_runtime::ops;
use eg_runtime::startup::Process;
use eg_store::{Catalog, CatalogCache, Clock, Store};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

/// Most bytes of an error body produced by axum itself that are quoted in the Event
/// Grid error body replacing it (they are short texts such as "Invalid URL: …").
const MAX_QUOTED_ERROR_BYTES: usize = 2048;

pub struct App {
    pub store: Store,
    pub catalog: Catalog,
    pub cache: Arc<CatalogCache>,
    pub clock: Clock,
    pub limits: PublishLimits,
    /// Most bytes of a publish or management request body.
    pub max_request_bytes: usize,
    /// Longest a request body may take to arrive before `408`.
    pub body_read_timeout: Duration,
    /// Longest a publish waits on Redis before answering `503`.
    pub storage_timeout: std::time::Duration,
    pub max_subscriptions_per_topic: u32,
    /// Base of each topic's `endpoint`.
    pub public_url: String,
    pub admin_token: Option<String>,
    pub validator: Validator,
}

impl App {
    /// `bound`: the address the ingress listens on, the base of topic endpoints unless
    /// `ingress.public_url` is set.
    pub async fn build(process: &Process, bound: std::net::SocketAddr) -> anyhow::Result<Arc<Self>> {
        let s = &process.settings;
        let catalog = Catalog::new(process.store.clone());
        let cache = eg_runtime::startup::until_ready("load the catalog", &process.shutdown, || {
            CatalogCache::load(catalog.clone())
        })
        .await?;
        let cache = Arc::new(cache);
        let public_url = s
            .ingress
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{bound}"));
        if s.admin.token.is_none() {
            tracing::warn!("no admin token configured (EG__ADMIN__TOKEN): the management API is off");
        }
        Ok(Arc::new(Self {
            store: process.store.clone(),
            catalog,
            cache,
            clock: process.clock.clone(),
            limits: PublishLimits {
                max_events: s.ingress.max_events_per_request,
                max_event_bytes: s.ingress.max_event_bytes,
            },
            max_request_bytes: s.ingress.max_request_bytes,
            body_read_timeout: s.ingress.body_read_timeout,
            storage_timeout: s.ingress.storage_timeout,
            max_subscriptions_per_topic: s.ingress.max_subscriptions_per_topic,
            validator: Validator::new(s, &public_url)?,
            public_url,
            admin_token: s.admin.token.clone().filter(|t| !t.is_empty()),
        }))
    }

    pub fn router(self: &Arc<Self>, process: &Process) -> Router {
        let mut router = Router::new()
            .route("/topics/{topic}/api/events", post(publish::publish))
            .route(
                "/validation/topics/{topic}/eventSubscriptions/{name}",
                get(admin::manual_validation),
            )
            .with_state(self.clone());
        if self.admin_token.is_some() {
            router = router.nest("/admin", admin::router(self.clone()));
        }
        // A span per request with the path only: a query may carry `aeg-sas-key`.
        let trace = TraceLayer::new_for_http().make_span_with(
            |r: &Request<_>| tracing::info_span!("request", method = %r.method(), path = %r.uri().path()),
        );
        router
            .fallback(not_found)
            .layer(middleware::from_fn(event_grid_errors))
            .merge(ops::router(process.store.clone(), process.metrics.clone()))
            .merge(crate::status::router(self.clone(), process))
            .route("/", get(|| async { "eg-ingress" }))
            .layer(trace)
            .layer(CatchPanicLayer::custom(panicked))
    }

    /// Reads a request body of at most `max_request_bytes` within `body_read_timeout`.
    ///
    /// A `Content-Length` over the limit is refused (`413`) before a byte of the body is
    /// read (a client sending `Expect: 100-continue` never sends it); a body without
    /// one (chunked) is refused as soon as it grows past the limit, so no more than the
    /// limit is ever held. A body still incomplete at the deadline is `408`.
    pub async fn read_body(&self, headers: &HeaderMap, mut body: Body) -> Result<Bytes, Refusal> {
        let limit = self.max_request_bytes;
        // hyper has already refused a Content-Length that is not a number.
        let announced = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(length) = announced
            && length > limit as u64
        {
            self.discard_body(headers, body);
            return Err(Refusal::too_large(format!(
                "the request body is {length} bytes (Content-Length); at most {limit} are accepted"
            )));
        }
        let too_large = || Refusal::too_large(format!("the request body is over {limit} bytes, the most accepted"));
        let deadline = tokio::time::Instant::now() + self.body_read_timeout;
        let mut bytes = Vec::with_capacity(announced.map_or(0, |n| n as usize));
        loop {
            let frame = tokio::time::timeout_at(deadline, next_frame(&mut body))
                .await
                .map_err(|_| {
                    Refusal::timed_out(format!(
                        "the request body did not arrive within {:?} ({} bytes came); nothing was accepted",
                        self.body_read_timeout,
                        bytes.len()
                    ))
                })?;
            match frame {
                None => break,
                Some(Err(e)) => {
                    return Err(Refusal::bad_request(format!("the request body could not be read: {e}")));
                }
                Some(Ok(frame)) => {
                    if let Some(data) = frame {
                        if bytes.len() + data.len() > limit {
                            self.discard_body(headers, body);
                            return Err(too_large());
                        }
                        bytes.extend_from_slice(&data);
                    }
                }
            }
        }
        Ok(Bytes::from(bytes))
    }

    /// Reads what is left of a refused request's body in the background and throws it
    /// away, for at most [`LINGER_TIME`] and twice `max_request_bytes`, while the
    /// refusal is answered. A server that closes a connection with unread data resets
    /// it, and a client still sending its body may then never see the answer; reading
    /// on a little (as web servers' "lingering close" does) lets it. Nothing is kept.
    /// A client that sent `Expect: 100-continue` has not sent the body and never will.
    pub fn discard_body(&self, headers: &HeaderMap, mut body: Body) {
        let waits_for_continue = headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        if waits_for_continue || body.is_end_stream() {
            return;
        }
        let mut budget = self.max_request_bytes.saturating_mul(2);
        let deadline = tokio::time::Instant::now() + LINGER_TIME;
        tokio::spawn(async move {
            while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, next_frame(&mut body)).await {
                let size = frame.as_ref().map_or(0, Bytes::len);
                if size >= budget {
                    break;
                }
                budget -= size;
            }
        });
    }
}

/// The data of the next frame of a request body (`Some(None)` for a frame without
/// data, such as trailers; `None` at the end of the body).
async fn next_frame(body: &mut Body) -> Option<Result<Option<Bytes>, axum::Error>> {
    std::future::poll_fn(|cx| {
        Pin::new(&mut *body)
            .poll_frame(cx)
            .map(|frame| frame.map(|result| result.map(|f| f.into_data().ok())))
    })
    .await
}

/// Longest a refused request's remaining body is read (and thrown away) for; see
/// [`App::discard_body`].
const LINGER_TIME: Duration = Duration::from_secs(5);

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
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
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
