//! How a [`Receiver`](super::Receiver) answers: the behaviours a test picks, validation
//! handshakes (behaviour.md#protecting-endpoints-and-the-system), and the axum handler that
//! records each request before answering.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use reqwest::Method;
use serde_json::{Value, json};

use super::{ReceiverState, Recorded};

/// The longest header value a receiver takes, as common servers do (nginx's default
/// buffer for a header line and Node's whole-head limit are 8 KiB): a delivery with a
/// longer one is answered `431 Request Header Fields Too Large`, whatever the behaviour.
pub const MAX_HEADER_VALUE_BYTES: usize = 8 * 1024;

/// How a [`Receiver`] answers.
#[derive(Debug, Clone, Copy)]
pub enum Behaviour {
    /// Always this status.
    Status(u16),
    /// `status` for the first `failures` requests, then 200.
    FailFirst { failures: usize, status: u16 },
    /// Waits this long before answering the first request (200); answers the rest at once.
    SlowFirst(Duration),
    /// Answers request `i` (deliveries only, in arrival order) as `replies[i]` says; every
    /// request after the script ran out gets 200 at once. A `const` slice, e.g.
    /// `const REPLIES: &[Reply] = &[Reply::status(503).retry_after("3")];`.
    Script(&'static [Reply]),
}

/// One scripted answer of a [`Behaviour::Script`] receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    /// The `Retry-After` header to send, verbatim (`"3"`, or an HTTP date).
    pub retry_after: Option<&'static str>,
    /// How long to wait before answering (the request is recorded on arrival).
    pub delay: Duration,
}

impl Reply {
    /// `status` at once, no extra headers.
    pub const fn status(status: u16) -> Self {
        Self {
            status,
            retry_after: None,
            delay: Duration::ZERO,
        }
    }

    /// The same answer with `Retry-After: value`.
    pub const fn retry_after(self, value: &'static str) -> Self {
        Self {
            retry_after: Some(value),
            ..self
        }
    }

    /// The same answer, sent `delay` after the request arrived.
    pub const fn after(self, delay: Duration) -> Self {
        Self { delay, ..self }
    }
}

/// How a [`Receiver`] answers validation handshakes
/// (behaviour.md#protecting-endpoints-and-the-system). Handshake requests are recorded
/// apart from deliveries ([`Receiver::validations`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validation {
    /// Echo the Event Grid validation code; allow any origin for CloudEvents.
    Consent,
    /// Answer 200 with no body and no `WebHook-Allowed-Origin` (no consent).
    Ignore,
    /// Consent as [`Validation::Consent`], after this long.
    SlowConsent(Duration),
}

fn record(uri: &Uri, headers: &HeaderMap, raw_body: String, status: u16) -> Recorded {
    Recorded {
        path: uri.path().to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
        raw_body,
        at: Instant::now(),
        status,
    }
}

/// Answers a validation handshake, if this request is one.
fn handshake(
    state: &ReceiverState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    raw_body: &str,
    token_refused: bool,
) -> Option<Response> {
    let is_event_grid = headers
        .get("aeg-event-type")
        .is_some_and(|v| v.as_bytes() == b"SubscriptionValidation");
    if *method != Method::OPTIONS && !is_event_grid {
        return None;
    }
    let status = if token_refused { 401 } else { 200 };
    state
        .validations
        .lock()
        .expect("receiver lock")
        .push(record(uri, headers, raw_body.to_owned(), status));
    if token_refused {
        return Some(StatusCode::UNAUTHORIZED.into_response());
    }
    let validation = *state.validation.lock().expect("receiver lock");
    let consent = matches!(validation, Validation::Consent | Validation::SlowConsent(_));
    if *method == Method::OPTIONS {
        let mut response = StatusCode::OK.into_response();
        if consent {
            response
                .headers_mut()
                .insert("webhook-allowed-origin", axum::http::HeaderValue::from_static("*"));
        }
        return Some(response);
    }
    let body: Value = serde_json::from_str(raw_body).unwrap_or(Value::Null);
    let code = body[0]["data"]["validationCode"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Some(if consent {
        axum::Json(json!({ "validationResponse": code })).into_response()
    } else {
        StatusCode::OK.into_response()
    })
}

pub(super) async fn receive(
    State(state): State<Arc<ReceiverState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw_body = String::from_utf8_lossy(&body).into_owned();
    // Behind an identity provider, every request needs a good token, handshakes too.
    let token_refused = match &state.bearer {
        Some(check) => {
            let authorization = headers.get("authorization").and_then(|v| v.to_str().ok());
            check.verify(authorization).await.is_err()
        }
        None => false,
    };
    if let Some(response) = handshake(&state, &method, &uri, &headers, &raw_body, token_refused) {
        let validation = *state.validation.lock().expect("receiver lock");
        if let Validation::SlowConsent(delay) = validation {
            tokio::time::sleep(delay).await;
        }
        return response;
    }
    let reply = {
        let mut requests = state.requests.lock().expect("receiver lock");
        let seen_before = requests.len();
        let too_long = headers.values().any(|v| v.len() > MAX_HEADER_VALUE_BYTES);
        let reply = match state.behaviour {
            _ if too_long => Reply::status(431),
            _ if token_refused => Reply::status(401),
            Behaviour::Status(code) => Reply::status(code),
            Behaviour::FailFirst { failures, status } => {
                Reply::status(if seen_before < failures { status } else { 200 })
            }
            Behaviour::SlowFirst(delay) if seen_before == 0 => Reply::status(200).after(delay),
            Behaviour::SlowFirst(_) => Reply::status(200),
            Behaviour::Script(replies) => replies.get(seen_before).copied().unwrap_or(Reply::status(200)),
        };
        requests.push(record(&uri, &headers, raw_body, reply.status));
        reply
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut response = StatusCode::from_u16(reply.status)
        .expect("a valid status code")
        .into_response();
    if let Some(value) = reply.retry_after {
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static(value),
        );
    }
    response
}
