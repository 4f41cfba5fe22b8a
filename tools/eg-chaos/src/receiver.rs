//! The webhook endpoints: one HTTP server on `127.0.0.1:0`, one path per subscription
//! (`/hook/<index>`). While faults run they misbehave at random per request — 5xx, 429
//! with `Retry-After`, 400 (not retried), an answer slower than the delivery timeout, a
//! reset connection, a success after the timeout (late success) — and otherwise answer
//! 200; once calmed they answer 200 at once.
//!
//! What a receiver records is what the oracle believes, so it records conservatively:
//! an event counts as *accepted* only when the handler is about to return a 2xx (a
//! handler whose connection went away before that is dropped and records nothing).
//! Served with hyper directly so a handler can reset its own connection (SO_LINGER 0,
//! then drop the socket).

use crate::scenario::{Schema, event_seq};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;

/// What one subscription's receiver saw of one event.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    /// Requests that carried it.
    pub arrivals: u32,
    /// Of those, answered 2xx (on time or late).
    pub accepted: u32,
    /// Answered with a status the tiers do not retry (400).
    pub refused: u32,
    /// Of the accepted ones, answered 2xx only after the delivery timeout.
    pub late: u32,
    /// Unix ms of the first request that carried it (0: none).
    pub first_arrival: i64,
    /// Unix ms of the first 2xx answer for it (0: none).
    pub first_accepted: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reply {
    Ok,
    ServerError,
    TooManyRequests,
    BadRequest,
    SlowFailure,
    Reset,
    LateSuccess,
}

impl Reply {
    pub fn name(self) -> &'static str {
        match self {
            Reply::Ok => "ok",
            Reply::ServerError => "5xx",
            Reply::TooManyRequests => "429_retry_after",
            Reply::BadRequest => "400_not_retried",
            Reply::SlowFailure => "slower_than_timeout",
            Reply::Reset => "connection_reset",
            Reply::LateSuccess => "late_success",
        }
    }
}

/// One subscription's endpoint.
pub struct Endpoint {
    /// The subscription's name, as `aeg-subscription-name` must carry it (upper case).
    name: String,
    pub schema: Schema,
    failure_rate: Mutex<f64>,
    pub seen: Mutex<HashMap<u64, Seen>>,
    /// Ids in deliveries that this run never published.
    pub strangers: Mutex<Vec<String>>,
    /// Requests whose body or content type does not fit the delivery schema.
    pub malformed: Mutex<Vec<String>>,
    pub requests: AtomicU64,
    /// Unix ms of every delivery request (validations not counted), for the rate check.
    pub request_times: Mutex<Vec<i64>>,
    pub batched_requests: AtomicU64,
    pub validations: AtomicU64,
}

pub struct Receivers {
    base_url: String,
    endpoints: Vec<Arc<Endpoint>>,
    calm: Arc<AtomicBool>,
    replies: Arc<Mutex<BTreeMap<Reply, u64>>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Shared {
    endpoints: Vec<Arc<Endpoint>>,
    calm: Arc<AtomicBool>,
    replies: Arc<Mutex<BTreeMap<Reply, u64>>>,
    /// The attempt timeout the tiers use: slow answers come later than this.
    timeout: Duration,
}

/// Lets a handler reset the connection its request came on.
#[derive(Clone)]
struct Connection(Arc<Notify>);

impl Receivers {
    /// `endpoints`: (subscription name, delivery schema, failure rate) per subscription.
    pub async fn start(endpoints: Vec<(String, Schema, f64)>, timeout: Duration) -> anyhow::Result<Self> {
        // One more endpoint past the subscriptions': the sink that throwaway subscriptions
        // (catalog churn) point at. Their filters match nothing, so it must get nothing.
        let endpoints: Vec<Arc<Endpoint>> = endpoints
            .into_iter()
            .chain([("CHURN-SINK".to_owned(), Schema::EventGrid, 0.0)])
            .map(|(name, schema, rate)| {
                Arc::new(Endpoint {
                    name: name.to_ascii_uppercase(),
                    schema,
                    failure_rate: Mutex::new(rate),
                    seen: Mutex::default(),
                    strangers: Mutex::default(),
                    malformed: Mutex::default(),
                    requests: AtomicU64::new(0),
                    request_times: Mutex::default(),
                    batched_requests: AtomicU64::new(0),
                    validations: AtomicU64::new(0),
                })
            })
            .collect();
        let calm = Arc::new(AtomicBool::new(false));
        let replies = Arc::new(Mutex::new(BTreeMap::new()));
        let shared = Shared {
            endpoints: endpoints.clone(),
            calm: calm.clone(),
            replies: replies.clone(),
            timeout,
        };
        let app = Router::new()
            .route("/hook/{index}", axum::routing::any(receive))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let task = tokio::spawn(serve(listener, app));
        Ok(Self {
            base_url: format!("http://{address}/hook"),
            endpoints,
            calm,
            replies,
            task,
        })
    }

    pub fn url(&self, index: usize) -> String {
        format!("{}/{index}", self.base_url)
    }

    /// The subscriptions' endpoints, in subscription order.
    pub fn endpoints(&self) -> &[Arc<Endpoint>] {
        &self.endpoints[..self.endpoints.len() - 1]
    }

    /// The endpoint of throwaway subscriptions whose filters match nothing.
    pub fn sink_url(&self) -> String {
        self.url(self.endpoints.len() - 1)
    }

    /// Deliveries the sink got (each one a violation).
    pub fn sink_requests(&self) -> u64 {
        self.endpoints.last().map_or(0, |e| e.requests.load(Ordering::Relaxed))
    }

    /// From now on every delivery is answered 200 at once.
    pub fn calm_down(&self) {
        self.calm.store(true, Ordering::SeqCst);
        for endpoint in &self.endpoints {
            *lock(&endpoint.failure_rate) = 0.0;
        }
    }

    /// How often each kind of answer was chosen.
    pub fn replies(&self) -> BTreeMap<Reply, u64> {
        lock(&self.replies).clone()
    }
}

impl Drop for Receivers {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn serve(listener: tokio::net::TcpListener, app: Router) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        // Dropping the socket then sends RST instead of FIN: a reset, as a crashed
        // endpoint or a middlebox would.
        let _ = stream.set_zero_linger();
        let reset = Arc::new(Notify::new());
        let service = TowerToHyperService::new(app.clone().layer(Extension(Connection(reset.clone()))));
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = reset.notified() => {} // drops the connection and its handler
            }
        });
    }
}

fn choose(rate: f64) -> Reply {
    if rand::random::<f64>() >= rate {
        return Reply::Ok;
    }
    // Given a bad answer, which one.
    let roll = rand::random_range(0..100);
    match roll {
        0..30 => Reply::ServerError,
        30..45 => Reply::TooManyRequests,
        45..60 => Reply::SlowFailure,
        60..77 => Reply::Reset,
        77..96 => Reply::LateSuccess,
        _ => Reply::BadRequest,
    }
}

async fn receive(
    State(shared): State<Shared>,
    Extension(connection): Extension<Connection>,
    Path(index): Path<usize>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(endpoint) = shared.endpoints.get(index).cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if let Some(response) = handshake(&endpoint, &method, &headers, &body) {
        return response;
    }
    endpoint.requests.fetch_add(1, Ordering::Relaxed);
    let arrived = chrono::Utc::now().timestamp_millis();
    lock(&endpoint.request_times).push(arrived);
    let seqs = match event_ids(&endpoint, &headers, &body) {
        Ok(ids) => ids,
        Err(problem) => {
            lock(&endpoint.malformed).push(problem);
            // Still 200: a malformed delivery is a violation of its own, not a reason
            // to make the system retry it.
            return StatusCode::OK.into_response();
        }
    };
    if seqs.len() > 1 {
        endpoint.batched_requests.fetch_add(1, Ordering::Relaxed);
    }
    {
        let mut seen = lock(&endpoint.seen);
        for seq in &seqs {
            let entry = seen.entry(*seq).or_default();
            entry.arrivals += 1;
            if entry.first_arrival == 0 {
                entry.first_arrival = arrived;
            }
        }
    }
    let reply = if shared.calm.load(Ordering::SeqCst) {
        Reply::Ok
    } else {
        choose(*lock(&endpoint.failure_rate))
    };
    *lock(&shared.replies).entry(reply).or_default() += 1;
    let record = |accepted: bool, refused: bool, late: bool| {
        let now = chrono::Utc::now().timestamp_millis();
        let mut seen = lock(&endpoint.seen);
        for seq in &seqs {
            let entry = seen.entry(*seq).or_default();
            if accepted && entry.first_accepted == 0 {
                entry.first_accepted = now;
            }
            entry.accepted += u32::from(accepted);
            entry.refused += u32::from(refused);
            entry.late += u32::from(late);
        }
    };
    match reply {
        Reply::Ok => {
            record(true, false, false);
            StatusCode::OK.into_response()
        }
        Reply::ServerError => {
            let status = [500, 502, 503][rand::random_range(0..3)];
            StatusCode::from_u16(status)
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
                .into_response()
        }
        Reply::TooManyRequests => {
            let mut response = StatusCode::TOO_MANY_REQUESTS.into_response();
            let seconds = ["1", "2"][rand::random_range(0..2)];
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, HeaderValue::from_static(seconds));
            response
        }
        Reply::BadRequest => {
            record(false, true, false);
            StatusCode::BAD_REQUEST.into_response()
        }
        Reply::SlowFailure => {
            tokio::time::sleep(shared.timeout + Duration::from_millis(600)).await;
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        Reply::Reset => {
            connection.0.notify_one();
            std::future::pending::<()>().await;
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        Reply::LateSuccess => {
            tokio::time::sleep(shared.timeout + Duration::from_millis(300)).await;
            record(true, false, true);
            StatusCode::OK.into_response()
        }
    }
}

/// Answers a validation handshake, if this request is one: echo the Event Grid code,
/// allow any origin for CloudEvents.
fn handshake(endpoint: &Endpoint, method: &Method, headers: &HeaderMap, body: &Bytes) -> Option<Response> {
    if *method == Method::OPTIONS {
        endpoint.validations.fetch_add(1, Ordering::Relaxed);
        let mut response = StatusCode::OK.into_response();
        response
            .headers_mut()
            .insert("webhook-allowed-origin", HeaderValue::from_static("*"));
        return Some(response);
    }
    let is_validation = headers
        .get("aeg-event-type")
        .is_some_and(|v| v.as_bytes() == b"SubscriptionValidation");
    if !is_validation {
        return None;
    }
    endpoint.validations.fetch_add(1, Ordering::Relaxed);
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let code = body[0]["data"]["validationCode"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Some(axum::Json(json!({ "validationResponse": code })).into_response())
}

/// The sequence numbers of the events in a delivery, after checking that the body and
/// its content type fit the subscription's delivery schema (docs/delivery.md).
fn event_ids(endpoint: &Endpoint, headers: &HeaderMap, body: &Bytes) -> Result<Vec<u64>, String> {
    let content_type = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON ({e})"))?;
    let events: Vec<&Value> = match (endpoint.schema, &value) {
        (Schema::EventGrid, Value::Array(events)) if content_type.starts_with("application/json") => {
            events.iter().collect()
        }
        (Schema::CloudEvents, Value::Object(_)) if content_type.starts_with("application/cloudevents+json") => {
            vec![&value]
        }
        (Schema::CloudEvents, Value::Array(events))
            if content_type.starts_with("application/cloudevents-batch+json") && events.len() > 1 =>
        {
            events.iter().collect()
        }
        _ => {
            return Err(format!(
                "{:?} delivery with content type {content_type:?}: {}",
                endpoint.schema,
                truncate(&value.to_string())
            ));
        }
    };
    let name = headers
        .get("aeg-subscription-name")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if name != endpoint.name {
        return Err(format!(
            "aeg-subscription-name {name:?} on the endpoint of {}",
            endpoint.name
        ));
    }
    let mut seqs = Vec::with_capacity(events.len());
    for event in events {
        let Some(id) = event["id"].as_str() else {
            return Err(format!("an event without an id: {}", truncate(&event.to_string())));
        };
        let Some(seq) = event_seq(id) else {
            lock(&endpoint.strangers).push(id.to_owned());
            continue;
        };
        // The body must be the event the id names (the publisher put the sequence
        // number in data.seq and at the end of the subject).
        let subject = event["subject"].as_str().unwrap_or_default();
        if event["data"]["seq"].as_u64() != Some(seq) || !subject.ends_with(&format!("/{seq}")) {
            return Err(format!(
                "{id} carries another event's body: {}",
                truncate(&event.to_string())
            ));
        }
        seqs.push(seq);
    }
    Ok(seqs)
}

fn truncate(text: &str) -> String {
    text.chars().take(300).collect()
}
