//! Endpoint validation handshakes (spec §8): before a webhook subscription becomes
//! active its endpoint must show it wants the events, so eg cannot be pointed at a
//! third party's URL to flood it.
//!
//! Both handshakes go through the same guarded [`Client`] as deliveries, so a
//! validation request cannot reach an address a delivery could not.
//!
//! Decisions:
//!
//! - **Event Grid schema**: consent is status **200 exactly**. Azure documents that
//!   "202 Accepted isn't recognized as a valid Event Grid subscription validation
//!   response", and accepting other 2xx would let an endpoint that answers every POST
//!   with 204 look as if it consented. The body must be a JSON object whose
//!   `validationResponse` (property name compared ignoring ASCII case, as Azure's
//!   deserialiser does and as Microsoft's own JavaScript sample relies on with
//!   `ValidationResponse`) is a string equal to the validation code **ignoring ASCII
//!   case**: the code is a GUID, and a GUID is the same value in upper or lower case
//!   (.NET receivers that round-trip it through `Guid` may change the case); no
//!   entropy is lost. The body is read up to `max_response_bytes`; a longer one is
//!   refused.
//! - **CloudEvents**: consent is any **2xx** (`204 No Content` is the natural answer to
//!   `OPTIONS`) carrying `WebHook-Allowed-Origin` equal to our origin (compared
//!   ignoring ASCII case and surrounding spaces: it is a DNS name) or `*`.
//!   `WebHook-Allowed-Rate` is reported when it is `*` or a positive integer; a
//!   missing or malformed rate does not withdraw consent (the origin grants it), it is
//!   reported as `None`. The response body is not read.
//! - `Handshake::Refused` reasons are for the user who created the subscription: they
//!   say what the endpoint did wrong and what it should do, and never contain the URL
//!   (its query carries secrets) or echo what the endpoint sent.

use crate::client::{Blocked, Client, SendError};
use crate::response::{classify, read_bounded};
use eg_core::AttemptOutcome;
use reqwest::header::CONTENT_TYPE;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::fmt;
use std::num::NonZeroU32;

/// A delivery rate of the CloudEvents webhook spec: `*` or requests per minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Unlimited,
    PerMinute(NonZeroU32),
}

impl Rate {
    /// `*` or a positive integer; anything else is `None`.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim() {
            "*" => Some(Self::Unlimited),
            n if n.bytes().all(|b| b.is_ascii_digit()) => n.parse().ok().map(Self::PerMinute),
            _ => None,
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unlimited => f.write_str("*"),
            Self::PerMinute(n) => write!(f, "{n}"),
        }
    }
}

/// How a validation handshake ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    /// The endpoint consented. `allowed_rate` is its `WebHook-Allowed-Rate`
    /// (CloudEvents only).
    Accepted { allowed_rate: Option<Rate> },
    /// The endpoint answered, but not with consent. `reason` is user-facing.
    Refused { reason: String },
    /// The endpoint's address is not allowed; no request was sent.
    AddressNotAllowed(Blocked),
    /// No answer: timed out, did not resolve, connection failed.
    Unreachable(AttemptOutcome),
}

fn refused(reason: impl Into<String>) -> Handshake {
    Handshake::Refused { reason: reason.into() }
}

fn failed(error: SendError) -> Handshake {
    match error {
        SendError::Blocked(blocked) => Handshake::AddressNotAllowed(blocked),
        SendError::Transport(e) => Handshake::Unreachable(classify(&e)),
    }
}

fn describe(status: StatusCode) -> String {
    let mut text = status.to_string();
    if status.is_redirection() {
        text.push_str(" (redirects are not followed)");
    }
    text
}

/// The Event Grid schema handshake: POSTs `body` (the JSON array holding the
/// `SubscriptionValidationEvent`, built by the caller) with
/// `aeg-event-type: SubscriptionValidation`, and expects
/// `200 {"validationResponse": "<expected_code>"}`.
pub async fn event_grid_handshake(
    client: &Client,
    url: &str,
    body: String,
    expected_code: &str,
    max_response_bytes: usize,
) -> Handshake {
    const EXPECTED: &str = "it must answer 200 OK with the JSON body {\"validationResponse\": \"<validationCode>\"}";
    let sent = client
        .post(url)
        .header(CONTENT_TYPE, "application/json; charset=utf-8")
        .header("aeg-event-type", "SubscriptionValidation")
        .body(body)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(e) => return failed(e),
    };
    let status = response.status();
    if status != StatusCode::OK {
        return refused(format!(
            "the endpoint answered {} to the validation request; {EXPECTED}",
            describe(status)
        ));
    }
    let body = match read_bounded(response, max_response_bytes).await {
        Ok(body) => body,
        Err(e) => return Handshake::Unreachable(classify(&e)),
    };
    if !body.complete {
        return refused(format!(
            "the endpoint's answer to the validation request is longer than {max_response_bytes} bytes; {EXPECTED}"
        ));
    }
    if body.bytes.iter().all(u8::is_ascii_whitespace) {
        return refused(format!(
            "the endpoint answered 200 OK with an empty body to the validation request; {EXPECTED}"
        ));
    }
    let Ok(Value::Object(answer)) = serde_json::from_slice::<Value>(&body.bytes) else {
        return refused(format!(
            "the endpoint's answer to the validation request is not a JSON object; {EXPECTED}"
        ));
    };
    let code = answer
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("validationResponse"))
        .map(|(_, value)| value);
    match code {
        None => refused(format!(
            "the endpoint's answer to the validation request has no validationResponse; {EXPECTED}"
        )),
        Some(Value::String(code)) if !expected_code.is_empty() && code.eq_ignore_ascii_case(expected_code) => {
            Handshake::Accepted { allowed_rate: None }
        }
        Some(Value::String(_)) => refused(
            "the endpoint's validationResponse does not match the validationCode of the validation event; \
             it must echo data.validationCode",
        ),
        Some(_) => refused(format!("the endpoint's validationResponse is not a string; {EXPECTED}")),
    }
}

/// The CloudEvents webhook abuse-protection handshake: `OPTIONS` with
/// `WebHook-Request-Origin: <origin>` (and `WebHook-Request-Rate` when
/// `requested_rate` is given); consent is a 2xx with `WebHook-Allowed-Origin` equal to
/// `origin` or `*`.
pub async fn cloudevents_handshake(
    client: &Client,
    url: &str,
    origin: &str,
    requested_rate: Option<Rate>,
) -> Handshake {
    let mut request = client
        .request(Method::OPTIONS, url)
        .header("WebHook-Request-Origin", origin);
    if let Some(rate) = requested_rate {
        request = request.header("WebHook-Request-Rate", rate.to_string());
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) => return failed(e),
    };
    let expected = format!("it must answer 2xx with the header WebHook-Allowed-Origin: {origin} (or *)");
    let status = response.status();
    if !status.is_success() {
        return refused(format!(
            "the endpoint answered {} to the OPTIONS validation request; {expected}",
            describe(status)
        ));
    }
    let headers = response.headers();
    let origins: Vec<&str> = headers
        .get_all("WebHook-Allowed-Origin")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::trim)
        .collect();
    if origins.is_empty() {
        return refused(format!(
            "the endpoint's answer to the OPTIONS validation request has no WebHook-Allowed-Origin header; {expected}"
        ));
    }
    if !origins
        .iter()
        .any(|o| *o == "*" || o.eq_ignore_ascii_case(origin.trim()))
    {
        return refused(format!(
            "the endpoint's WebHook-Allowed-Origin does not name this origin; {expected}"
        ));
    }
    let allowed_rate = headers
        .get("WebHook-Allowed-Rate")
        .and_then(|v| v.to_str().ok())
        .and_then(Rate::parse);
    Handshake::Accepted { allowed_rate }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rates() {
        assert_eq!(Rate::parse("*"), Some(Rate::Unlimited));
        assert_eq!(Rate::parse(" 120 "), NonZeroU32::new(120).map(Rate::PerMinute));
        for bad in ["0", "-1", "+5", "1.5", "", "lots", "99999999999"] {
            assert_eq!(Rate::parse(bad), None, "{bad}");
        }
        assert_eq!(Rate::Unlimited.to_string(), "*");
        assert_eq!(Rate::parse("42").map(|r| r.to_string()), Some("42".to_owned()));
    }
}
