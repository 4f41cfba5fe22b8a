//! An in-process webhook endpoint on `127.0.0.1:<free port>` that answers every delivery
//! `200` after a fixed delay (a slow endpoint), counting requests, events and how many
//! requests it holds at once. It consents to Event Grid validation handshakes at once.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    events: AtomicU64,
    in_flight: AtomicU64,
    most_in_flight: AtomicU64,
}

pub struct SlowReceiver {
    url: String,
    counters: Arc<Counters>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Clone, Copy)]
pub struct Counts {
    pub requests: u64,
    pub events: u64,
    pub in_flight: u64,
    pub most_in_flight: u64,
}

impl SlowReceiver {
    pub async fn start(delay: Duration) -> anyhow::Result<Self> {
        let counters = Arc::new(Counters::default());
        let app = Router::new()
            .fallback(receive)
            .with_state((Arc::clone(&counters), delay));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, counters, task })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn counts(&self) -> Counts {
        let c = &self.counters;
        Counts {
            requests: c.requests.load(Ordering::Relaxed),
            events: c.events.load(Ordering::Relaxed),
            in_flight: c.in_flight.load(Ordering::Relaxed),
            most_in_flight: c.most_in_flight.load(Ordering::Relaxed),
        }
    }
}

impl Drop for SlowReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request being held; counted out when dropped (also when the sender gives up on it
/// and the request is cancelled).
struct Held<'a>(&'a Counters);

impl<'a> Held<'a> {
    fn new(counters: &'a Counters) -> Self {
        let now = counters.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        counters.most_in_flight.fetch_max(now, Ordering::Relaxed);
        Self(counters)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn receive(
    State((counters, delay)): State<(Arc<Counters>, Duration)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if headers
        .get("aeg-event-type")
        .is_some_and(|v| v.as_bytes() == b"SubscriptionValidation")
    {
        let code = parsed[0]["data"]["validationCode"].clone();
        return axum::Json(json!({ "validationResponse": code })).into_response();
    }
    let held = Held::new(&counters);
    tokio::time::sleep(delay).await;
    drop(held);
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let events = parsed.as_array().map_or(1, Vec::len) as u64;
    counters.events.fetch_add(events, Ordering::Relaxed);
    StatusCode::OK.into_response()
}
