//! The HTTP webhook destination: the request of behaviour.md#a-delivery-attempt for a
//! rendered batch, and its outcome. A request that times out is moved to a task of its
//! own, so it can go on being listened to for a late success
//! (behaviour.md#retry-schedule-and-policy) without holding a concurrency slot.

use super::Kind;
use crate::destination::{RenderedBatch, Sent};
use eg_core::destination::WebHook;
use eg_core::{AttemptOutcome, signing};
use eg_outbound::{Client, Clients, RequestBuilder, TokenError};
use eg_runtime::bearer::{Bearer, Granted};
use eg_runtime::settings::Settings;
use std::time::{Duration, Instant};

/// POSTs batches over the outbound client (which enforces the address policy).
pub struct Webhook {
    /// The plain client and one per configured client certificate.
    clients: Clients,
    /// Bounds one attempt.
    timeout: Duration,
    /// Most bytes of a response body read (the rest is not waited for).
    max_response_bytes: usize,
    /// Tokens for webhooks that ask for one.
    bearer: Bearer,
}

impl Webhook {
    /// Posts over `client`; an attempt is bounded by `timeout`, and reads at most
    /// `max_response_bytes` of a response body.
    pub fn new(clients: Clients, timeout: Duration, max_response_bytes: usize, bearer: Bearer) -> Self {
        Self {
            clients,
            timeout,
            max_response_bytes,
            bearer,
        }
    }
}

impl Webhook {
    /// Its token cache's health (the sender reports failing identities).
    pub fn token_watch(&self) -> eg_runtime::bearer::TokenWatch {
        self.bearer.watch()
    }
}

impl Kind for Webhook {
    type Target = WebHook;

    /// The outbound client waits for a response as long as an attempt and its late
    /// window may last.
    fn from_settings(s: &Settings) -> anyhow::Result<Self> {
        let client = s.outbound_clients(s.delivery.timeout + s.sender.late_success_window)?;
        warn_of_expired_certificates(s);
        let bearer = Bearer::from_settings(s)?;
        Ok(Self::new(
            client,
            s.delivery.timeout,
            s.sender.max_response_bytes,
            bearer,
        ))
    }

    async fn send(&self, hook: &WebHook, batch: RenderedBatch<'_>, late_window: Option<Duration>) -> Sent {
        let started = Instant::now();
        let Some(client) = self.clients.presenting(hook.client_certificate.as_deref()) else {
            return unknown_certificate(hook, started);
        };
        let Some(auth) = &hook.auth else {
            let request = self.request(client, hook, &batch, late_window).body(batch.body.body);
            return self.post(request, started, self.timeout, late_window).await;
        };
        // A token first, within the attempt's time; without one nothing is sent.
        let granted = match self.bearer.grant(auth, self.timeout).await {
            Ok(granted) => granted,
            Err(e) => return token_unavailable(e, started),
        };
        let request = self
            .request(client, hook, &batch, late_window)
            .body(batch.body.body.clone());
        let remaining = self.timeout.saturating_sub(started.elapsed());
        let sent = self
            .post(bearer(request, &granted), started, remaining, late_window)
            .await;
        // A refused token is asked for again once, and the request sent again once, if
        // half the attempt's time is left: a token revoked or rotated early.
        if sent.outcome.status_code() != Some(401) || started.elapsed() > self.timeout / 2 {
            return sent;
        }
        self.bearer.forget(&granted);
        let granted = match self
            .bearer
            .grant(auth, self.timeout.saturating_sub(started.elapsed()))
            .await
        {
            Ok(granted) => granted,
            Err(e) => return token_unavailable(e, started),
        };
        let request = self.request(client, hook, &batch, late_window).body(batch.body.body);
        let remaining = self.timeout.saturating_sub(started.elapsed());
        self.post(bearer(request, &granted), started, remaining, late_window)
            .await
    }
}

impl Webhook {
    /// The request of an attempt, without its body.
    fn request(
        &self,
        client: &Client,
        hook: &WebHook,
        batch: &RenderedBatch<'_>,
        late_window: Option<Duration>,
    ) -> RequestBuilder {
        let RenderedBatch {
            subscription,
            target: _,
            body,
            delivery_headers,
            delivery_count,
            batch_id,
            sent_at,
            // Already among the delivery headers (`attempt_trace::carry`).
            trace: _,
            replay_job,
        } = batch;
        let mut builder = client
            .post(&hook.url)
            .timeout(self.timeout + late_window.unwrap_or_default())
            .header("content-type", body.content_type)
            .header("aeg-event-type", "Notification")
            .header("aeg-subscription-name", subscription.name.as_str().to_ascii_uppercase())
            .header("aeg-delivery-count", delivery_count.to_string())
            .header("aeg-metadata-version", "1");
        if let Some(version) = &body.data_version {
            builder = builder.header("aeg-data-version", version.as_str());
        }
        if let Some(job) = replay_job {
            builder = builder.header(eg_core::replay::REPLAY_HEADER, job.as_str());
        }
        for (name, value) in delivery_headers {
            // A dynamic value that cannot be a header value (a line break, say) is left out
            // rather than failing the whole request.
            if http::HeaderValue::from_str(value).is_ok() {
                builder = builder.header(name, value);
            }
        }
        // Signed over exactly the bytes sent; the secrets never leave this call.
        let secrets = subscription.signing_secrets.as_slice();
        if let Some(signed) = signing::headers(secrets, batch_id, *sent_at, body.body.as_bytes()) {
            builder = builder
                .header("webhook-id", signed.id)
                .header("webhook-timestamp", signed.timestamp)
                .header("webhook-signature", signed.signature);
        }
        builder
    }

    /// Sends `request`, waiting `timeout` for its answer (then, with `late_window`, going
    /// on listening in the background); `started` is when the attempt began. The request
    /// runs in this task: only one that times out while a late answer is wanted is moved
    /// to a task of its own, so the common attempt pays for no spawn.
    async fn post(
        &self,
        request: RequestBuilder,
        started: Instant,
        timeout: Duration,
        late_window: Option<Duration>,
    ) -> Sent {
        let mut answer = Box::pin(answer_to(request, self.max_response_bytes));
        match tokio::time::timeout(timeout, answer.as_mut()).await {
            Ok(outcome) => Sent {
                outcome,
                error: None,
                took: started.elapsed(),
                late: None,
            },
            Err(_) => Sent {
                outcome: AttemptOutcome::TimedOut,
                error: None,
                took: started.elapsed(),
                // Dropping the answer otherwise cancels the request.
                late: late_window.map(|_| tokio::spawn(answer)),
            },
        }
    }
}

/// The outcome of sending `request`: its status (with `Retry-After`) once at most
/// `max_response_bytes` of the body were read, or the transport failure.
async fn answer_to(request: RequestBuilder, max_response_bytes: usize) -> AttemptOutcome {
    match request.send().await {
        Ok(response) => {
            let code = response.status().as_u16();
            let retry_after = eg_outbound::retry_after(response.headers());
            match eg_outbound::drain(response, max_response_bytes).await {
                Ok(()) => AttemptOutcome::Status { code, retry_after },
                // The status line came, but the body did not in time: the attempt failed.
                Err(e) => e.outcome(),
            }
        }
        Err(e) => e.outcome(),
    }
}

/// `Authorization: Bearer <token>` (marked sensitive: never printed by the client).
fn bearer(request: RequestBuilder, granted: &Granted) -> RequestBuilder {
    match http::HeaderValue::from_str(&format!("Bearer {}", granted.token.expose())) {
        Ok(mut value) => {
            value.set_sensitive(true);
            request.header(http::header::AUTHORIZATION, value)
        }
        // A token no header can carry is sent without: the endpoint's 401 says so.
        Err(_) => request,
    }
}

/// The attempt when no token could be got: nothing was sent. History says why, in the
/// provider's words (never a secret or a token).
/// The subscription names a client certificate this sender was not given (its settings
/// differ from the ingress's): refused like a broker connection it lacks, and logged
/// naming the setting to add.
fn unknown_certificate(hook: &WebHook, started: Instant) -> Sent {
    let name = hook.client_certificate.as_deref().unwrap_or_default();
    let error = format!(
        "eg-sender has no client certificate named {name:?} (EG__CLIENT_CERTIFICATES__{}__CERTIFICATE_FILE and __KEY_FILE)",
        name.to_ascii_uppercase()
    );
    tracing::error!("{error}");
    Sent {
        outcome: AttemptOutcome::Refused {
            outcome: eg_core::OutcomeName::NotFound,
            as_status: 404,
        },
        error: Some(error),
        took: started.elapsed(),
        late: None,
    }
}

/// Logs, at start, each configured client certificate that has expired: endpoints that
/// require it refuse every handshake until it is replaced.
fn warn_of_expired_certificates(s: &Settings) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let loaded = eg_runtime::settings::certificates::load_all(&s.client_certificates).unwrap_or_default();
    for (name, certificate) in loaded {
        if certificate.not_after.0 <= now {
            tracing::error!(
                certificate = %name,
                not_after = %certificate.not_after.to_rfc3339(),
                "client certificate expired: replace EG__CLIENT_CERTIFICATES__{}__CERTIFICATE_FILE and __KEY_FILE",
                name.to_ascii_uppercase()
            );
        }
    }
}

fn token_unavailable(e: TokenError, started: Instant) -> Sent {
    Sent {
        outcome: AttemptOutcome::TokenUnavailable,
        error: Some(e.to_string()),
        took: started.elapsed(),
        late: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eg_core::address::AddressPolicy;
    use eg_core::render::DeliveryBody;
    use eg_core::subscription::{Subscription, resolve_headers};
    use eg_core::{SubscriptionName, Topic, TopicName, UnixMillis};
    use eg_outbound::OutboundSettings;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A receiver on 127.0.0.1 that reads one request, waits `delay`, answers `response`
    /// and hands back the request it read.
    async fn receiver(response: &'static str, delay: Duration) -> (String, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = socket.read(&mut buf).await.unwrap();
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            tokio::time::sleep(delay).await;
            let _ = socket.write_all(response.as_bytes()).await;
            String::from_utf8_lossy(&request).into_owned()
        });
        (url, task)
    }

    fn webhook(timeout: Duration) -> Webhook {
        let settings = OutboundSettings {
            policy: AddressPolicy::parse(["127.0.0.1/32"]).unwrap(),
            ..OutboundSettings::default()
        };
        let bearer = Bearer::from_settings(&eg_runtime::settings::Settings::default()).unwrap();
        Webhook::new(Clients::new(settings, &[]).unwrap(), timeout, 1024, bearer)
    }

    fn subscription_to(url: &str) -> Subscription {
        let topic = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        let resource = json!({"properties": {"destination": {"endpointType": "WebHook",
            "properties": {"endpointUrl": url}}}});
        Subscription::from_resource(
            &topic,
            SubscriptionName::parse("billing").unwrap(),
            &resource,
            UnixMillis(0),
        )
        .unwrap()
    }

    fn batch(subscription: &Subscription) -> RenderedBatch<'_> {
        RenderedBatch {
            subscription,
            target: subscription.target().expect("a push subscription"),
            body: DeliveryBody {
                body: r#"[{"id":"a"}]"#.into(),
                content_type: "application/json; charset=utf-8",
                data_version: Some("1".into()),
            },
            delivery_headers: resolve_headers(&subscription.delivery_headers, r#"{"id":"a"}"#).headers,
            delivery_count: 3,
            batch_id: "msg_1".into(),
            sent_at: UnixMillis(0),
            trace: None,
            replay_job: None,
        }
    }

    #[tokio::test]
    async fn posts_the_batch_with_event_grid_headers_and_reports_the_status_as_data() {
        let (url, request) = receiver(
            "HTTP/1.1 503 Service Unavailable\r\nretry-after: 7\r\ncontent-length: 0\r\n\r\n",
            Duration::ZERO,
        )
        .await;
        let subscription = subscription_to(&url);
        let sent = webhook(Duration::from_secs(5))
            .send_own(batch(&subscription), None)
            .await;
        assert_eq!(
            sent.outcome,
            AttemptOutcome::Status {
                code: 503,
                retry_after: Some(Duration::from_secs(7))
            }
        );
        assert!(sent.late.is_none());
        let request = request.await.unwrap().to_ascii_lowercase();
        assert!(request.starts_with("post /hook "), "{request}");
        for header in [
            "aeg-event-type: notification",
            "aeg-subscription-name: billing",
            "aeg-delivery-count: 3",
            "aeg-data-version: 1",
            "content-type: application/json; charset=utf-8",
        ] {
            assert!(request.contains(header), "{header} missing in {request}");
        }
        assert!(request.ends_with(r#"[{"id":"a"}]"#), "{request}");
    }

    #[tokio::test]
    async fn an_answer_later_than_the_timeout_is_timed_out_and_listened_to_only_when_asked() {
        let answer = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        let (url, _request) = receiver(answer, Duration::from_millis(400)).await;
        let subscription = subscription_to(&url);
        let sent = webhook(Duration::from_millis(100))
            .send_own(batch(&subscription), None)
            .await;
        assert_eq!(sent.outcome, AttemptOutcome::TimedOut);
        assert!(sent.late.is_none(), "no late listening asked for");

        let (url, _request) = receiver(answer, Duration::from_millis(400)).await;
        let subscription = subscription_to(&url);
        let sent = webhook(Duration::from_millis(100))
            .send_own(batch(&subscription), Some(Duration::from_secs(5)))
            .await;
        assert_eq!(sent.outcome, AttemptOutcome::TimedOut);
        let late = sent.late.expect("listened to after the timeout").await.unwrap();
        assert!(late.is_success(), "{late:?}");
    }
}
