//! Publisher authentication (behaviour.md#topics-and-publishing): does a publish request's
//! credential hold for the topic? An access key (either of the topic's two), or a SAS token
//! signed with one.
//!
//! What a SAS token must be issued for depends on the API ([`Resource`]): a custom
//! topic's publish path exactly, or, on the namespace data plane, the resource itself or
//! any path above it at a segment boundary (Event Grid: "a SAS token is valid for all
//! resources prefixed with the resource URI used in the signature string"). eg has no
//! namespace object, so a token for the namespace root (`/`) holds when it is signed
//! with the topic's key, where Event Grid would want the namespace's.
//!
//! Pure: the ingress finds the credential in the request and passes the time from its
//! clock corrected to Redis's, so every ingress copy agrees on when a token expires and
//! the expiry is tested with an injected time. Keys and signatures are compared in
//! constant time; no error repeats a key or a token.

use crate::time::UnixMillis;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, NaiveDateTime, Utc};
use hmac::{Hmac, Mac};
use percent_encoding::percent_decode_str;
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// What the publisher presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential<'a> {
    /// An access key, as sent in `aeg-sas-key`.
    Key(&'a str),
    /// `r=<resource>&e=<expiry>&s=<signature>`, URL-encoded, as Event Grid's SDKs build it.
    SasToken(&'a str),
}

/// Why a publisher was refused; the messages are what the publisher is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("no credential: send the topic's key (aeg-sas-key or Authorization: SharedAccessKey <key>) or a SAS token")]
    Missing,
    #[error("the access key is not valid for this topic")]
    WrongKey,
    #[error("the SAS token is malformed: {0}")]
    MalformedToken(&'static str),
    #[error("the SAS token has expired")]
    Expired,
    #[error("the SAS token was issued for another resource")]
    WrongResource,
    #[error("the SAS token's signature is not valid for this topic")]
    BadSignature,
}

/// The resource a request acts on, and which SAS tokens it takes. Paths are compared
/// without host, query or trailing `/`, and case-insensitively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource<'a> {
    /// A custom topic's publish path (`/topics/{topic}/api/events`): a token must name
    /// exactly it.
    Exactly(&'a str),
    /// A namespace data-plane resource (`/topics/{topic}` for publish,
    /// `/topics/{topic}/eventsubscriptions/{name}` for pull delivery): a token may name it
    /// or any path above it ([`covers`]), the namespace root `/` included.
    OrAbove(&'a str),
}

impl Resource<'_> {
    /// Whether a token issued for `token_path` holds for this resource.
    fn taken_by(self, token_path: &str) -> bool {
        match self {
            Resource::Exactly(path) => same_path(token_path, path),
            Resource::OrAbove(path) => covers(token_path, path),
        }
    }
}

/// Checks `credential` against the topic's `keys` at `now`, for a request acting on
/// `resource`.
pub fn verify(
    credential: Option<Credential<'_>>,
    keys: &[String; 2],
    resource: Resource<'_>,
    now: UnixMillis,
) -> Result<(), AuthError> {
    match credential {
        None => Err(AuthError::Missing),
        Some(Credential::Key(presented)) => verify_key(presented, keys),
        Some(Credential::SasToken(token)) => verify_token(token, keys, resource, now),
    }
}

/// Whether a SAS token issued for `token_path` holds for `resource_path` on the
/// namespace data plane: the paths are the same, or the token's is a prefix of the
/// resource's that ends at a `/` (so `/topics/ord` does not cover `/topics/orders`).
/// Both are compared case-insensitively and without a trailing `/`; the root covers
/// everything.
pub fn covers(token_path: &str, resource_path: &str) -> bool {
    let token = token_path.trim_end_matches('/').as_bytes();
    let resource = resource_path.trim_end_matches('/').as_bytes();
    resource.len() >= token.len()
        && resource[..token.len()].eq_ignore_ascii_case(token)
        && (resource.len() == token.len() || resource[token.len()] == b'/')
}

/// Both keys are always compared, so the time taken says nothing about which matched.
fn verify_key(presented: &str, keys: &[String; 2]) -> Result<(), AuthError> {
    let matched = keys.iter().fold(0u8, |acc, k| {
        acc | u8::from(bool::from(k.as_bytes().ct_eq(presented.as_bytes())))
    });
    if matched == 1 { Ok(()) } else { Err(AuthError::WrongKey) }
}

/// token = `r=<urlenc resource>&e=<urlenc expiry>&s=<urlenc base64(HMAC-SHA256(base64decode(key), "r=…&e=…"))>`
fn verify_token(token: &str, keys: &[String; 2], resource: Resource<'_>, now: UnixMillis) -> Result<(), AuthError> {
    let SasToken {
        signed,
        resource: named,
        expires,
        signature,
    } = SasToken::parse(token)?;
    if expires <= now.to_datetime() {
        return Err(AuthError::Expired);
    }
    if !resource.taken_by(path_of(&named)) {
        return Err(AuthError::WrongResource);
    }
    let signature = BASE64
        .decode(decode(signature)?)
        .map_err(|_| AuthError::MalformedToken("s= is not base64"))?;
    if keys.iter().any(|key| signs(key, signed, &signature)) {
        Ok(())
    } else {
        Err(AuthError::BadSignature)
    }
}

/// A SAS token's parts: the signed text, what it says, and the signature over it (as
/// sent: it is decoded only once the token's expiry and resource hold).
struct SasToken<'a> {
    signed: &'a str,
    resource: String,
    expires: DateTime<Utc>,
    signature: &'a str,
}

impl<'a> SasToken<'a> {
    fn parse(token: &'a str) -> Result<Self, AuthError> {
        let (signed, signature) = token
            .rsplit_once("&s=")
            .ok_or(AuthError::MalformedToken("no s= part"))?;
        let mut resource = None;
        let mut expiry = None;
        for part in signed.split('&') {
            match part.split_once('=') {
                Some(("r", v)) => resource = Some(decode(v)?),
                Some(("e", v)) => expiry = Some(decode(v)?),
                _ => return Err(AuthError::MalformedToken("unexpected part before s=")),
            }
        }
        let resource = resource.ok_or(AuthError::MalformedToken("no r= part"))?;
        let expiry = expiry.ok_or(AuthError::MalformedToken("no e= part"))?;
        let expires = parse_expiry(&expiry).ok_or(AuthError::MalformedToken("e= is not a date"))?;
        Ok(Self {
            signed,
            resource,
            expires,
            signature,
        })
    }
}

/// Whether `signature` is the HMAC-SHA256 of `signed` under `key` (base64), checked in
/// constant time.
fn signs(key: &str, signed: &str, signature: &[u8]) -> bool {
    let Ok(secret) = BASE64.decode(key) else { return false };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&secret) else {
        return false;
    };
    mac.update(signed.as_bytes());
    mac.verify_slice(signature).is_ok()
}

fn decode(v: &str) -> Result<String, AuthError> {
    percent_decode_str(v)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| AuthError::MalformedToken("not UTF-8 after URL-decoding"))
}

/// The SDKs write the expiry as `M/d/yyyy h:mm:ss AM/PM` (UTC); RFC 3339 and Unix
/// seconds are accepted too.
fn parse_expiry(raw: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = NaiveDateTime::parse_from_str(raw, "%m/%d/%Y %I:%M:%S %p") {
        return Some(t.and_utc());
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(raw) {
        return Some(t.with_timezone(&Utc));
    }
    raw.parse::<i64>().ok().and_then(|s| DateTime::from_timestamp(s, 0))
}

/// The path of a token's resource, a URL (any host; query ignored) or a bare path.
fn path_of(resource: &str) -> &str {
    let without_query = resource.split('?').next().unwrap_or_default();
    match without_query.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => without_query,
    }
}

fn same_path(a: &str, b: &str) -> bool {
    a.trim_end_matches('/').eq_ignore_ascii_case(b.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    use std::time::Duration;

    const PATH: Resource<'static> = Resource::Exactly("/topics/orders/api/events");
    const URL: &str = "https://eg.example:8080/topics/orders/api/events?api-version=2018-01-01";
    /// 2027-01-15T08:00:00Z: the injected time every check runs at.
    const NOW: UnixMillis = UnixMillis(1_800_000_000_000);
    const HOUR: Duration = Duration::from_secs(3600);

    fn keys() -> [String; 2] {
        [BASE64.encode([1u8; 32]), BASE64.encode([2u8; 32])]
    }

    fn enc(s: &str) -> String {
        utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
    }

    /// A token the way Event Grid's SDKs build it, with its expiry written as given.
    fn token_with_expiry(resource: &str, expiry: &str, key: &str) -> String {
        let signed = format!("r={}&e={}", enc(resource), enc(expiry));
        let secret = BASE64.decode(key).unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(&secret).unwrap();
        mac.update(signed.as_bytes());
        format!("{signed}&s={}", enc(&BASE64.encode(mac.finalize().into_bytes())))
    }

    /// A token in the SDKs' own expiry format.
    fn sas_token(resource: &str, expires: UnixMillis, key: &str) -> String {
        let expiry = expires.to_datetime().format("%m/%d/%Y %I:%M:%S %p").to_string();
        token_with_expiry(resource, &expiry, key)
    }

    fn check(token: &str) -> Result<(), AuthError> {
        verify(Some(Credential::SasToken(token)), &keys(), PATH, NOW)
    }

    #[test]
    fn either_key_works_and_others_do_not() {
        let k = keys();
        assert_eq!(verify(Some(Credential::Key(&k[0])), &k, PATH, NOW), Ok(()));
        assert_eq!(verify(Some(Credential::Key(&k[1])), &k, PATH, NOW), Ok(()));
        for wrong in ["nope", "", &format!("{}x", k[0])] {
            assert_eq!(
                verify(Some(Credential::Key(wrong)), &k, PATH, NOW),
                Err(AuthError::WrongKey),
                "{wrong:?}"
            );
        }
        assert_eq!(verify(None, &k, PATH, NOW), Err(AuthError::Missing));
    }

    #[test]
    fn a_valid_token_signed_with_either_key_is_accepted() {
        let k = keys();
        assert_eq!(check(&sas_token(URL, NOW.plus(HOUR), &k[0])), Ok(()));
        assert_eq!(check(&sas_token(URL, NOW.plus(HOUR), &k[1])), Ok(()));
        // Any host, no query, a trailing slash, another case: the path is what counts.
        for resource in [
            "http://localhost/topics/orders/api/events",
            "/topics/orders/api/events/",
            "https://EG.example/Topics/Orders/API/Events",
        ] {
            assert_eq!(check(&sas_token(resource, NOW.plus(HOUR), &k[0])), Ok(()), "{resource}");
        }
    }

    #[test]
    fn expiry_is_judged_by_the_time_given_not_the_system_clock() {
        let k = keys();
        let token = sas_token(URL, NOW.plus(HOUR), &k[0]);
        let at = |now: UnixMillis| verify(Some(Credential::SasToken(&token)), &k, PATH, now);
        assert_eq!(at(NOW), Ok(()));
        assert_eq!(at(NOW.plus(HOUR - Duration::from_secs(1))), Ok(()));
        // A token is dead at its expiry instant.
        assert_eq!(at(NOW.plus(HOUR)), Err(AuthError::Expired));
        assert_eq!(at(NOW.plus(2 * HOUR)), Err(AuthError::Expired));
        // Long past by the system clock, still valid at an injected earlier time.
        let old = sas_token(URL, UnixMillis(1_000_000), &k[0]);
        assert_eq!(
            verify(Some(Credential::SasToken(&old)), &k, PATH, UnixMillis(999_000)),
            Ok(())
        );
    }

    #[test]
    fn expired_tokens_are_refused() {
        let expired = sas_token(URL, UnixMillis(NOW.0 - 3_600_000), &keys()[0]);
        assert_eq!(check(&expired), Err(AuthError::Expired));
        // Expiry and resource are judged before the signature is even decoded.
        let (signed, _) = expired.rsplit_once("&s=").unwrap();
        assert_eq!(check(&format!("{signed}&s=%%%")), Err(AuthError::Expired));
    }

    #[test]
    fn every_expiry_form_the_sdks_use_is_read() {
        let k = keys();
        let secs = (NOW.0 / 1000) + 3600;
        for expiry in [
            "01/15/2027 09:00:00 AM".to_owned(),
            "2027-01-15T09:00:00Z".to_owned(),
            "2027-01-15T10:00:00+01:00".to_owned(),
            secs.to_string(),
        ] {
            assert_eq!(check(&token_with_expiry(URL, &expiry, &k[0])), Ok(()), "{expiry}");
        }
        assert_eq!(
            check(&token_with_expiry(URL, "01/15/2027 07:00:00 AM", &k[0])),
            Err(AuthError::Expired)
        );
    }

    #[test]
    fn a_token_for_another_resource_is_refused() {
        let other = sas_token("https://eg.example/topics/other/api/events", NOW.plus(HOUR), &keys()[0]);
        assert_eq!(check(&other), Err(AuthError::WrongResource));
    }

    #[test]
    fn a_token_signed_with_another_key_is_refused() {
        let forged = sas_token(URL, NOW.plus(HOUR), &BASE64.encode([9u8; 32]));
        assert_eq!(check(&forged), Err(AuthError::BadSignature));
        // The signed text changed after signing (the resource still matches: its case
        // does not count): the signature no longer holds.
        let good = sas_token(URL, NOW.plus(HOUR), &keys()[0]);
        let tampered = good.replacen("orders", "Orders", 1);
        assert_ne!(tampered, good);
        assert_eq!(check(&tampered), Err(AuthError::BadSignature));
    }

    #[test]
    fn a_namespace_token_covers_its_resource_and_everything_below_at_segment_boundaries() {
        let topic = "/topics/orders";
        let subscription = "/topics/orders/eventsubscriptions/audit";
        for (token, resource) in [
            ("/", topic),
            ("", topic),
            ("/", subscription),
            ("/topics/orders", topic),
            ("/topics/orders/", topic),
            ("/Topics/ORDERS", topic),
            ("/topics/orders", subscription),
            ("/topics/orders/eventSubscriptions/audit", subscription),
            ("/topics", topic),
        ] {
            assert!(covers(token, resource), "{token:?} should cover {resource:?}");
        }
        for (token, resource) in [
            // A prefix that stops inside a segment.
            ("/topics/ord", topic),
            ("/topics/orders/eventsubscriptions/aud", subscription),
            // Another topic or subscription.
            ("/topics/other", topic),
            ("/topics/orders-eu", topic),
            ("/topics/orders/eventsubscriptions/billing", subscription),
            // Below the resource: a subscription's token does not publish.
            (subscription, topic),
            ("/topics/orders/api/events", topic),
        ] {
            assert!(!covers(token, resource), "{token:?} should not cover {resource:?}");
        }
    }

    #[test]
    fn namespace_tokens_at_root_topic_and_subscription_scope() {
        let k = keys();
        let publish = Resource::OrAbove("/topics/orders");
        let receive = Resource::OrAbove("/topics/orders/eventsubscriptions/audit");
        let at = |resource: Resource<'_>, url: &str| {
            verify(
                Some(Credential::SasToken(&sas_token(url, NOW.plus(HOUR), &k[0]))),
                &k,
                resource,
                NOW,
            )
        };
        for url in ["https://ns.westeurope-1.eventgrid.azure.net", "http://127.0.0.1:8080/"] {
            assert_eq!(at(publish, url), Ok(()), "{url}");
            assert_eq!(at(receive, url), Ok(()), "{url}");
        }
        let topic = "https://ns.eventgrid.azure.net/topics/orders";
        assert_eq!(at(publish, topic), Ok(()));
        assert_eq!(at(receive, topic), Ok(()));
        let audit = "https://ns.eventgrid.azure.net/topics/orders/eventsubscriptions/audit";
        assert_eq!(at(receive, audit), Ok(()));
        assert_eq!(at(publish, audit), Err(AuthError::WrongResource));
        let billing = "https://ns.eventgrid.azure.net/topics/orders/eventsubscriptions/billing";
        assert_eq!(at(receive, billing), Err(AuthError::WrongResource));
        assert_eq!(
            at(publish, "https://ns.eventgrid.azure.net/topics/other"),
            Err(AuthError::WrongResource)
        );
        // The custom-topic rule stays exact: the root and the topic do not stand for its publish path.
        assert_eq!(
            at(PATH, "https://ns.eventgrid.azure.net/"),
            Err(AuthError::WrongResource)
        );
        assert_eq!(at(PATH, topic), Err(AuthError::WrongResource));
        assert_eq!(at(PATH, URL), Ok(()));
        // A namespace-root token signed with another key (Event Grid's namespace key, say) does not hold.
        let foreign = sas_token(
            "https://ns.eventgrid.azure.net",
            NOW.plus(HOUR),
            &BASE64.encode([9u8; 32]),
        );
        assert_eq!(
            verify(Some(Credential::SasToken(&foreign)), &k, publish, NOW),
            Err(AuthError::BadSignature)
        );
    }

    #[test]
    fn malformed_tokens_say_what_is_wrong() {
        let k = keys();
        let good = sas_token(URL, NOW.plus(HOUR), &k[0]);
        let (signed, signature) = good.rsplit_once("&s=").unwrap();
        let cases = [
            ("garbage".to_owned(), "no s= part"),
            (format!("{signed}&x=1&s={signature}"), "unexpected part before s="),
            (format!("e=1&s={signature}"), "no r= part"),
            (format!("r={}&s={signature}", enc(URL)), "no e= part"),
            (format!("r={}&e=tomorrow&s={signature}", enc(URL)), "e= is not a date"),
            (format!("{signed}&s=%%%"), "s= is not base64"),
            (format!("r=%FF&e=1&s={signature}"), "not UTF-8 after URL-decoding"),
        ];
        for (token, what) in cases {
            assert_eq!(check(&token), Err(AuthError::MalformedToken(what)), "{token}");
        }
        assert_eq!(
            AuthError::MalformedToken("no s= part").to_string(),
            "the SAS token is malformed: no s= part"
        );
    }
}
