//! The HTTP webhook destination: the request of spec §3 for a rendered batch, and its
//! outcome. The request runs in its own task so that, when it times out, it can go on
//! being listened to for a late success (spec §5) without holding a concurrency slot.

use crate::destination::{Destination, RenderedBatch, Sent};
use eg_core::{AttemptOutcome, signing};
use eg_outbound::Client;
use std::time::{Duration, Instant};

/// POSTs batches over the outbound client (which enforces the address policy).
pub struct Webhook {
    pub client: Client,
    /// Bounds one attempt.
    pub timeout: Duration,
    /// Most bytes of a response body read (the rest is not waited for).
    pub max_response_bytes: usize,
}

impl Destination for Webhook {
    async fn send(&self, batch: RenderedBatch<'_>, late_window: Option<Duration>) -> Sent {
        let RenderedBatch {
            subscription,
            body,
            first_event,
            delivery_count,
            batch_id,
            sent_at,
        } = batch;
        let timeout = self.timeout;
        let mut builder = self
            .client
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
        if let Some(signed) = signing::headers(secrets, &batch_id, sent_at, body.body.as_bytes()) {
            builder = builder
                .header("webhook-id", signed.id)
                .header("webhook-timestamp", signed.timestamp)
                .header("webhook-signature", signed.signature);
        }
        let max_response_bytes = self.max_response_bytes;
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
            Ok(joined) => Sent {
                outcome: joined.unwrap_or(AttemptOutcome::SocketError),
                took: started.elapsed(),
                late: None,
            },
            Err(_) => {
                let late = match late_window {
                    Some(_) => Some(task),
                    None => {
                        task.abort();
                        None
                    }
                };
                Sent {
                    outcome: AttemptOutcome::TimedOut,
                    took: started.elapsed(),
                    late,
                }
            }
        }
    }
}
