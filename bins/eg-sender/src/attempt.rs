//! One delivery attempt: the request of spec §3 and its outcome.

use crate::http;
use eg_core::subscription::Subscription;
use eg_core::{AttemptOutcome, Delivery};
use serde_json::Value;
use std::time::{Duration, Instant};

pub struct AttemptResult {
    pub outcome: AttemptOutcome,
    pub took: Duration,
}

/// POSTs the event (as a one-element array) to the subscription's endpoint.
pub async fn send(
    client: &reqwest::Client,
    subscription: &Subscription,
    delivery: &Delivery,
    event_json: &str,
    max_response_bytes: usize,
) -> AttemptResult {
    let event: Value = serde_json::from_str(event_json).unwrap_or(Value::Null);
    let data_version = event
        .get("dataVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut request = client
        .post(&subscription.endpoint_url)
        .header("content-type", "application/json; charset=utf-8")
        .header("aeg-event-type", "Notification")
        .header("aeg-subscription-name", subscription.name.as_str().to_ascii_uppercase())
        .header("aeg-delivery-count", delivery.attempts.to_string())
        .header("aeg-metadata-version", "1")
        .header("aeg-data-version", data_version);
    for h in &subscription.delivery_headers {
        if let Some(value) = h.value_for(&event) {
            request = request.header(h.name.as_str(), value);
        }
    }
    let body = format!("[{event_json}]");
    let started = Instant::now();
    let outcome = match request.body(body).send().await {
        Ok(response) => {
            let code = response.status().as_u16();
            let retry_after = http::retry_after(response.headers());
            match http::drain(response, max_response_bytes).await {
                Ok(()) => AttemptOutcome::Status { code, retry_after },
                // The status line came, but the body did not in time: the attempt failed.
                Err(e) => http::failure(&e),
            }
        }
        Err(e) => http::failure(&e),
    };
    AttemptResult {
        outcome,
        took: started.elapsed(),
    }
}
