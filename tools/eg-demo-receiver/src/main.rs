//! A demo webhook receiver: answers `POST /` (and any path) with 200, prints each event
//! it receives, answers Event Grid's validation handshake, and lists the last 100
//! events at `GET /events`. Listens on `$EG_DEMO_RECEIVER_LISTEN` (default 127.0.0.1:9000).

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

type Received = Arc<Mutex<VecDeque<Value>>>;

const KEEP: usize = 100;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let listen = std::env::var("EG_DEMO_RECEIVER_LISTEN").unwrap_or_else(|_| "127.0.0.1:9000".into());
    let received: Received = Arc::default();
    let app = Router::new()
        .route("/events", get(list))
        .fallback(receive)
        .with_state(received);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("demo receiver listening on http://{listen} (GET /events lists what arrived)");
    axum::serve(listener, app).await
}

async fn list(State(received): State<Received>) -> Response {
    let events: Vec<Value> = received.lock().map(|r| r.iter().cloned().collect()).unwrap_or_default();
    axum::Json(json!({ "count": events.len(), "events": events })).into_response()
}

async fn receive(State(received): State<Received>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(Value::Array(events)) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "expected a JSON array of events").into_response();
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_owned()
    };
    for event in events {
        if event["eventType"] == "Microsoft.EventGrid.SubscriptionValidationEvent" {
            let code = event["data"]["validationCode"].clone();
            println!("validation handshake answered");
            return axum::Json(json!({ "validationResponse": code })).into_response();
        }
        println!(
            "received {} {} subject={} (subscription {}, delivery count {})",
            event["eventType"],
            event["id"],
            event["subject"],
            header("aeg-subscription-name"),
            header("aeg-delivery-count")
        );
        if let Ok(mut r) = received.lock() {
            if r.len() == KEEP {
                r.pop_front();
            }
            r.push_back(event);
        }
    }
    StatusCode::OK.into_response()
}
