//! One delivery attempt: the request of spec §3 for a batch of rendered events, and its
//! outcome. The request runs in its own task so that, when it times out, it can go on
//! being listened to for a late success (spec §5) without holding a concurrency slot.

use crate::late::PendingResponse;
use eg_core::render::DeliveryBody;
use eg_core::subscription::Subscription;
use eg_core::{AttemptOutcome, UnixMillis, signing};
use eg_outbound::Client;
use serde_json::Value;
use std::time::{Duration, Instant};

pub struct Attempt {
    pub outcome: AttemptOutcome,
    pub took: Duration,
    /// The request, still running after the attempt timed out (late-success listening on).
    pub pending: Option<PendingResponse>,
}

/// What goes into one request.
pub struct Request<'a> {
    pub subscription: &'a Subscription,
    pub body: DeliveryBody,
    /// The first event as delivered: dynamic delivery headers read their source field here.
    pub first_event: Value,
    /// `aeg-delivery-count`: attempts the batch's first event has had before this one.
    pub delivery_count: u32,
    /// `webhook-id` of a signed delivery: the same for every attempt at these deliveries
    /// (`eg_core::signing::webhook_id`).
    pub webhook_id: String,
    /// When the attempt is made (the Redis-synced clock): `webhook-timestamp`.
    pub sent_at: UnixMillis,
}

/// POSTs the batch. `timeout` bounds the attempt; with `late_window` the request keeps
/// running that much longer in the background after a timeout.
pub async fn send(
    client: &Client,
    request: Request<'_>,
    timeout: Duration,
    late_window: Option<Duration>,
    max_response_bytes: usize,
) -> Attempt {
    let Request {
        subscription,
        body,
        first_event,
        delivery_count,
        webhook_id,
        sent_at,
    } = request;
    let mut builder = client
        .post(&subscription.endpoint_url)
        .timeout(timeout + late_window.unwrap_or_default())
        .header("content-type", body.content_type)
        .header("aeg-event-type", "Notification")
        .header("aeg-subscription-name", subscription.name.as_str().to_ascii_uppercase())
        .header("aeg-delivery-count", delivery_count.to_string())
        .header("aeg-metadata-version", "1");
    if let Some(version) = &body.data_version {
        builder = builder.header("aeg-data-version", version.as_str());
    }
    for h in &subscription.delivery_headers {
        // A dynamic value that cannot be a header value (a line break, say) is left out
        // rather than failing the whole request.
        if let Some(value) = h.value_for(&first_event)
            && reqwest::header::HeaderValue::from_str(&value).is_ok()
        {
            builder = builder.header(h.name.as_str(), value);
        }
    }
    // Signed over exactly the bytes sent; the secrets never leave this call.
    let secrets = subscription.signing_secrets.as_slice();
    if let Some(signed) = signing::headers(secrets, &webhook_id, sent_at, body.body.as_bytes()) {
        builder = builder
            .header("webhook-id", signed.id)
            .header("webhook-timestamp", signed.timestamp)
            .header("webhook-signature", signed.signature);
    }
    let started = Instant::now();
    let mut task = tokio::spawn(async move {
        match builder.body(body.body).send().await {
            Ok(response) => {
                let code = response.status().as_u16();
                let retry_after = eg_outbound::retry_after(response.headers());
                match eg_outbound::drain(response, max_response_bytes).await {
                    Ok(()) => AttemptOutcome::Status { code, retry_after },
                    // The status line came, but the body did not in time: the attempt failed.
                    Err(e) => eg_outbound::classify(&e),
                }
            }
            Err(e) => e.outcome(),
        }
    });
    match tokio::time::timeout(timeout, &mut task).await {
        Ok(joined) => Attempt {
            outcome: joined.unwrap_or(AttemptOutcome::SocketError),
            took: started.elapsed(),
            pending: None,
        },
        Err(_) => {
            let pending = match late_window {
                Some(_) => Some(task),
                None => {
                    task.abort();
                    None
                }
            };
            Attempt {
                outcome: AttemptOutcome::TimedOut,
                took: started.elapsed(),
                pending,
            }
        }
    }
}
