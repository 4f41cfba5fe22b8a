//! The bench's webhook endpoint: an in-process HTTP server on `127.0.0.1:<free port>`
//! that counts what arrives and how late. Each event the load generator publishes
//! carries the moment it was sent (`data.egBenchSentUs`, µs since the Unix epoch); the
//! receiver finds every such stamp in a request body without parsing the JSON and
//! records `now − stamp` in a [`Histogram`] — publish→receipt latency.
//!
//! It can answer after a fixed delay (a slow endpoint) and fail one request in every
//! `fail_every` with `503` (a flaky one), or refuse every delivery with `400` (an
//! endpoint whose failures are not retried: each event is dead-lettered at once). It consents to Event Grid validation
//! handshakes at once.

use crate::histogram::Histogram;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The field every published event's `data` carries: when it was sent, µs.
pub const STAMP_FIELD: &str = "egBenchSentUs";

#[derive(Debug, Clone, Copy, Default)]
pub struct Behaviour {
    /// How long each request is held before the answer.
    pub delay: Duration,
    /// Answer `503` to one request in every this many (2: every other one); 0 never.
    pub fail_every: u64,
    /// Answer `400` to every delivery request (validation handshakes still succeed).
    pub refuse_all: bool,
}

#[derive(Default)]
struct Shared {
    behaviour: Behaviour,
    /// Every delivery request so far (what `fail_every` counts).
    seen: AtomicU64,
    /// Requests answered 2xx / answered 503 (or 400) on purpose.
    requests: AtomicU64,
    failed: AtomicU64,
    /// Events in requests answered 2xx.
    events: AtomicU64,
    in_flight: AtomicU64,
    most_in_flight: AtomicU64,
    /// Publish→receipt of every event answered 2xx.
    latency: Histogram,
}

pub struct Receiver {
    url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Clone, Copy)]
pub struct Counts {
    pub requests: u64,
    pub failed: u64,
    pub events: u64,
    pub in_flight: u64,
    pub most_in_flight: u64,
}

impl Receiver {
    pub async fn start(behaviour: Behaviour) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared {
            behaviour,
            ..Shared::default()
        });
        let app = Router::new().fallback(receive).with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, shared, task })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn counts(&self) -> Counts {
        let c = &self.shared;
        Counts {
            requests: c.requests.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            events: c.events.load(Ordering::Relaxed),
            in_flight: c.in_flight.load(Ordering::Relaxed),
            most_in_flight: c.most_in_flight.load(Ordering::Relaxed),
        }
    }

    /// Events received (in requests answered 2xx) so far.
    pub fn events(&self) -> u64 {
        self.shared.events.load(Ordering::Relaxed)
    }

    /// Publish→receipt latency of the events received since the last reset.
    pub fn latency(&self) -> &Histogram {
        &self.shared.latency
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request being held; counted out when dropped (also when the sender gives up on it
/// and the request is cancelled).
struct Held<'a>(&'a Shared);

impl<'a> Held<'a> {
    fn new(shared: &'a Shared) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        shared.most_in_flight.fetch_max(now, Ordering::Relaxed);
        Self(shared)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

async fn receive(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    if headers
        .get("aeg-event-type")
        .is_some_and(|v| v.as_bytes() == b"SubscriptionValidation")
    {
        let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let code = parsed[0]["data"]["validationCode"].clone();
        return axum::Json(json!({ "validationResponse": code })).into_response();
    }
    let received = now_micros();
    let behaviour = shared.behaviour;
    let held = Held::new(&shared);
    if !behaviour.delay.is_zero() {
        tokio::time::sleep(behaviour.delay).await;
    }
    drop(held);
    let seen = shared.seen.fetch_add(1, Ordering::Relaxed);
    if behaviour.refuse_all {
        shared.failed.fetch_add(1, Ordering::Relaxed);
        return StatusCode::BAD_REQUEST.into_response();
    }
    if behaviour.fail_every > 0 && seen % behaviour.fail_every == behaviour.fail_every - 1 {
        shared.failed.fetch_add(1, Ordering::Relaxed);
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let mut events = 0u64;
    for stamp in stamps(&body) {
        shared.latency.record(received.saturating_sub(stamp));
        events += 1;
    }
    shared.requests.fetch_add(1, Ordering::Relaxed);
    shared.events.fetch_add(events.max(1), Ordering::Relaxed);
    StatusCode::OK.into_response()
}

/// Every `"egBenchSentUs": <digits>` in a body, in order.
pub fn stamps(body: &[u8]) -> impl Iterator<Item = u64> + '_ {
    let text = std::str::from_utf8(body).unwrap_or("");
    text.match_indices(MARKER).filter_map(move |(at, _)| {
        let rest = text[at + MARKER.len()..].trim_start();
        let rest = rest.strip_prefix(':')?.trim_start();
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        rest[..digits].parse().ok()
    })
}

/// The stamp's field name with its quotes, so a pad of letters can never match.
const MARKER: &str = "\"egBenchSentUs\"";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_stamp_whatever_the_spacing() {
        let body = br#"[{"data":{"egBenchSentUs":17,"pad":"egBenchSentUs"}},{"data":{"egBenchSentUs" : 42}}]"#;
        assert_eq!(stamps(body).collect::<Vec<_>>(), [17, 42]);
        assert_eq!(stamps(b"[]").count(), 0);
        assert!(MARKER.contains(STAMP_FIELD));
    }

    #[tokio::test]
    async fn counts_and_fails_every_other_request() -> anyhow::Result<()> {
        let r = Receiver::start(Behaviour {
            delay: Duration::ZERO,
            fail_every: 2,
            refuse_all: false,
        })
        .await?;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().no_proxy().build()?;
        let mut statuses = Vec::new();
        for _ in 0..4 {
            let body = format!(r#"[{{"data":{{"egBenchSentUs":{}}}}}]"#, now_micros());
            statuses.push(http.post(r.url()).body(body).send().await?.status().as_u16());
        }
        assert_eq!(statuses.iter().filter(|s| **s == 503).count(), 2, "{statuses:?}");
        let c = r.counts();
        assert_eq!((c.requests, c.failed, c.events), (2, 2, 2));
        assert_eq!(r.latency().count(), 2);
        Ok(())
    }
}
