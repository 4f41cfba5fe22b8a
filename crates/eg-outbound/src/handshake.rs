//! Endpoint validation handshakes (behaviour.md#protecting-endpoints-and-the-system):
//! before a webhook subscription becomes active its endpoint must show it wants the events,
//! so eg cannot be pointed at a third party's URL to flood it.
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
//!   say what the endpoint answered (its status and a short excerpt of its body), what
//!   was wrong with it and what it should answer. They never contain the URL (its query
//!   carries secrets).
//! - The excerpt is quoted on purpose. An earlier rule never echoed what the endpoint
//!   sent; but "200 OK with the body `Cannot POST /hook`" is what tells someone which
//!   receiver answered and why, and without it the reason could only be found in the
//!   receiver's own logs. The excerpt is made harmless first ([`excerpt`]): at most
//!   [`EXCERPT_CHARS`] characters, control and bidirectional-formatting characters
//!   replaced, and the endpoint's URL (whole, its path, its query) and the validation
//!   code cut out. The code matters most: an endpoint that echoes its requests (a
//!   request bin, an echo server) would otherwise hand whoever reads the reason the
//!   code, and so the power to consent for an endpoint that never did.
//! - `Handshake::Unreachable` says in words why no answer came, and whether a
//!   connection was made at all: only then can the validation event (and its
//!   validationUrl) have reached the endpoint.

use crate::client::{Blocked, Client, RequestBuilder, SendError};
use crate::response::{Bounded, read_bounded};
use crate::transport::{Response, TransportError};
use eg_core::AttemptOutcome;
use eg_core::identity::AccessToken;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http::{Method, StatusCode};
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
    /// No answer: timed out, did not resolve, connection failed. `outcome` is what a
    /// delivery would have counted; `cause` says why in words, for the user;
    /// `connected` is whether a connection was made, so that the request may have
    /// reached the endpoint.
    Unreachable {
        outcome: AttemptOutcome,
        cause: &'static str,
        connected: bool,
    },
}

fn refused(reason: impl Into<String>) -> Handshake {
    Handshake::Refused { reason: reason.into() }
}

fn failed(error: SendError) -> Handshake {
    match error {
        SendError::Blocked(blocked) => Handshake::AddressNotAllowed(blocked),
        SendError::Transport(e) => unreachable(&e),
    }
}

/// A transport failure, with why in words. A connect error means nothing was sent.
fn unreachable(error: &TransportError) -> Handshake {
    let outcome = error.outcome();
    let connected = !error.is_connect() && outcome != AttemptOutcome::ResolutionError;
    let cause = if outcome == AttemptOutcome::ResolutionError {
        "its host name did not resolve"
    } else if error.is_connect() && error.is_connection_refused() {
        "the connection was refused (nothing listens at that address and port)"
    } else if error.is_connect() && outcome == AttemptOutcome::TimedOut {
        "no connection could be made in time"
    } else if error.is_connect() {
        "the connection could not be made (reset, or a failed TLS handshake)"
    } else if outcome == AttemptOutcome::TimedOut {
        "no complete answer came within the validation timeout"
    } else {
        "the connection broke before a complete answer came"
    };
    Handshake::Unreachable {
        outcome,
        cause,
        connected,
    }
}

/// Most characters of an endpoint's answer quoted in a refusal reason.
pub const EXCERPT_CHARS: usize = 200;

/// Most bytes of an answer that is not consent read to quote from it.
const EXCERPT_READ_BYTES: usize = 4096;

/// What must never appear in a quoted answer, and what stands in its place.
struct Secrets<'a> {
    /// `(secret, placeholder)`, the longest first so a part never hides the whole.
    cut: Vec<(&'a str, &'static str)>,
}

impl<'a> Secrets<'a> {
    /// The endpoint URL (whole, its query, its path when it is more than `/`), and the
    /// validation code when there is one.
    fn of(url: &'a str, code: Option<&'a str>) -> Self {
        let mut cut = vec![(url, "<endpoint URL>")];
        let after_scheme = url.find("://").map_or(0, |i| i + 3);
        if let Some(start) = url[after_scheme..].find('/').map(|i| i + after_scheme) {
            let (path, query) = match url[start..].find('?') {
                Some(q) => (&url[start..start + q], &url[start + q + 1..]),
                None => (&url[start..], ""),
            };
            if !query.is_empty() {
                cut.push((query, "<endpoint query>"));
            }
            if path.len() > 1 {
                cut.push((path, "<endpoint path>"));
            }
        }
        if let Some(code) = code.filter(|c| !c.is_empty()) {
            cut.push((code, "<validationCode>"));
        }
        cut.sort_by_key(|(secret, _)| std::cmp::Reverse(secret.len()));
        Self { cut }
    }
}

/// A short excerpt of `body` safe to show anyone who may see the subscription: the
/// secrets cut out (ignoring ASCII case, as a GUID may change case), control and
/// bidirectional-formatting characters replaced by spaces, runs of spaces made one, and
/// at most [`EXCERPT_CHARS`] characters (then `…`).
fn excerpt(body: &[u8], secrets: &Secrets<'_>) -> String {
    let mut text = String::from_utf8_lossy(body).into_owned();
    for (secret, placeholder) in &secrets.cut {
        text = cut_out(&text, secret, placeholder);
    }
    let mut clean = String::with_capacity(text.len().min(EXCERPT_CHARS * 4));
    let mut chars = 0;
    for c in text.chars() {
        let c = if c.is_control() || is_format(c) { ' ' } else { c };
        if c.is_whitespace() && (clean.is_empty() || clean.ends_with(' ')) {
            continue;
        }
        if chars == EXCERPT_CHARS {
            return format!("{}…", clean.trim_end());
        }
        clean.push(if c.is_whitespace() { ' ' } else { c });
        chars += 1;
    }
    clean.trim_end().to_owned()
}

/// Invisible characters that change how the text around them reads: zero-width and
/// bidirectional controls, the byte-order mark.
fn is_format(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// `text` with every occurrence of `secret` (ignoring ASCII case) replaced.
fn cut_out(text: &str, secret: &str, placeholder: &str) -> String {
    if secret.is_empty() {
        return text.to_owned();
    }
    // ASCII lower-casing keeps every byte where it was, so positions carry over.
    let (haystack, needle) = (text.to_ascii_lowercase(), secret.to_ascii_lowercase());
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(at) = haystack[from..].find(&needle).map(|i| i + from) {
        out.push_str(&text[from..at]);
        out.push_str(placeholder);
        from = at + needle.len();
    }
    out.push_str(&text[from..]);
    out
}

/// The body an endpoint answered with, in words: "an empty body", "the body `…`",
/// or "a body longer than N bytes, beginning `…`".
fn body_words(body: &Bounded, limit: usize, secrets: &Secrets<'_>) -> String {
    if !body.complete {
        return format!(
            "a body longer than {limit} bytes, beginning `{}`",
            excerpt(&body.bytes, secrets)
        );
    }
    match excerpt(&body.bytes, secrets) {
        quoted if quoted.is_empty() => "an empty body".to_owned(),
        quoted => format!("the body `{quoted}`"),
    }
}

/// What the endpoint answered, for a reason: its status, and what it said when it can
/// be read (a body that cannot be read in time is left out: the status says enough).
async fn answer_words(response: Response, secrets: &Secrets<'_>) -> String {
    let status = describe(response.status());
    match read_bounded(response, EXCERPT_READ_BYTES).await {
        Ok(body) => format!("{status} with {}", body_words(&body, EXCERPT_READ_BYTES, secrets)),
        Err(_) => status,
    }
}

/// `Authorization: Bearer <token>`, marked sensitive (never printed by the client), when
/// there is a token; a token no header can carry is left out (the endpoint says 401).
fn with_token(request: RequestBuilder, token: Option<&AccessToken>) -> RequestBuilder {
    let value = token.and_then(|t| HeaderValue::from_str(&format!("Bearer {}", t.expose())).ok());
    match value {
        Some(mut value) => {
            value.set_sensitive(true);
            request.header(AUTHORIZATION, value)
        }
        None => request,
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
    event_grid_handshake_with_token(client, url, body, expected_code, max_response_bytes, None).await
}

/// [`event_grid_handshake`] carrying `Authorization: Bearer <token>`, as Event Grid's
/// does for a webhook behind Entra ID (docs/oauth-delivery.md).
pub async fn event_grid_handshake_with_token(
    client: &Client,
    url: &str,
    body: String,
    expected_code: &str,
    max_response_bytes: usize,
    token: Option<&AccessToken>,
) -> Handshake {
    const EXPECTED: &str = "it must answer 200 OK with the JSON body {\"validationResponse\": \"<validationCode>\"}";
    let secrets = Secrets::of(url, Some(expected_code));
    let request = client
        .post(url)
        .header(CONTENT_TYPE, "application/json; charset=utf-8")
        .header("aeg-event-type", "SubscriptionValidation");
    let sent = with_token(request, token).body(body).send().await;
    let response = match sent {
        Ok(response) => response,
        Err(e) => return failed(e),
    };
    let status = response.status();
    if status != StatusCode::OK {
        let answer = answer_words(response, &secrets).await;
        return refused(format!(
            "the endpoint answered {answer} to the validation request; {EXPECTED}"
        ));
    }
    let body = match read_bounded(response, max_response_bytes).await {
        Ok(body) => body,
        Err(e) => return unreachable(&e),
    };
    let answered = format!(
        "the endpoint answered 200 OK with {} to the validation request",
        body_words(&body, max_response_bytes, &secrets)
    );
    if !body.complete || body.bytes.iter().all(u8::is_ascii_whitespace) {
        return refused(format!("{answered}; {EXPECTED}"));
    }
    let Ok(Value::Object(answer)) = serde_json::from_slice::<Value>(&body.bytes) else {
        return refused(format!("{answered}, which is not a JSON object; {EXPECTED}"));
    };
    let code = answer
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("validationResponse"))
        .map(|(_, value)| value);
    match code {
        None => refused(format!("{answered}, which has no validationResponse; {EXPECTED}")),
        Some(Value::String(code)) if !expected_code.is_empty() && code.eq_ignore_ascii_case(expected_code) => {
            Handshake::Accepted { allowed_rate: None }
        }
        Some(Value::String(_)) => refused(format!(
            "{answered}, whose validationResponse does not match the validationCode of the validation event; \
             it must echo data.validationCode"
        )),
        Some(_) => refused(format!(
            "{answered}, whose validationResponse is not a string; {EXPECTED}"
        )),
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
    cloudevents_handshake_with_token(client, url, origin, requested_rate, None).await
}

/// [`cloudevents_handshake`] carrying `Authorization: Bearer <token>`.
pub async fn cloudevents_handshake_with_token(
    client: &Client,
    url: &str,
    origin: &str,
    requested_rate: Option<Rate>,
    token: Option<&AccessToken>,
) -> Handshake {
    let request = client
        .request(Method::OPTIONS, url)
        .header("WebHook-Request-Origin", origin);
    let mut request = with_token(request, token);
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
        let answer = answer_words(response, &Secrets::of(url, None)).await;
        return refused(format!(
            "the endpoint answered {answer} to the OPTIONS validation request; {expected}"
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

    const URL: &str = "https://hooks.example/in/orders?sig=QUERYSECRET";
    const CODE: &str = "512d38b6-c7b8-40c8-89fe-f46f9e9622b6";

    fn quoted(body: &str) -> String {
        excerpt(body.as_bytes(), &Secrets::of(URL, Some(CODE)))
    }

    #[test]
    fn an_excerpt_cuts_out_the_url_its_parts_and_the_code() {
        let echoed = format!(
            "POST {URL} got {{\"validationCode\":\"{}\"}} at /in/orders?sig=QUERYSECRET; sig=QUERYSECRET",
            CODE.to_ascii_uppercase()
        );
        let text = quoted(&echoed);
        assert!(!text.contains("QUERYSECRET"), "{text}");
        assert!(!text.contains("hooks.example/in"), "{text}");
        assert!(!text.to_ascii_lowercase().contains(CODE), "{text}");
        assert_eq!(
            text,
            "POST <endpoint URL> got {\"validationCode\":\"<validationCode>\"} at <endpoint path>?<endpoint query>; <endpoint query>"
        );
        // A path of `/` would cut every slash: it is left alone.
        let root = excerpt(b"a/b", &Secrets::of("http://h/", None));
        assert_eq!(root, "a/b");
    }

    #[test]
    fn an_excerpt_is_short_and_printable() {
        assert_eq!(
            quoted("  line one\r\n\tline\u{0}two \u{1b}[31mred\u{202E}  "),
            "line one line two [31mred"
        );
        let long = "x".repeat(500);
        let text = quoted(&long);
        assert_eq!(text.chars().count(), EXCERPT_CHARS + 1, "{text}");
        assert!(text.ends_with('…'));
        assert_eq!(quoted(" \n "), "");
        assert_eq!(excerpt(&[0xff, b'o', b'k'], &Secrets::of(URL, None)), "\u{FFFD}ok");
    }

    #[test]
    fn an_answer_is_named_by_its_body() {
        let secrets = Secrets::of(URL, Some(CODE));
        let body = |text: &str, complete| Bounded {
            bytes: text.as_bytes().to_vec(),
            complete,
        };
        assert_eq!(body_words(&body("", true), 10, &secrets), "an empty body");
        assert_eq!(body_words(&body("ok", true), 10, &secrets), "the body `ok`");
        assert_eq!(
            body_words(&body("0123456789", false), 10, &secrets),
            "a body longer than 10 bytes, beginning `0123456789`"
        );
    }

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
