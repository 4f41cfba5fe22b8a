//! Publisher authentication (spec §1): an access key (`aeg-sas-key` header or query)
//! or a SAS token (`aeg-sas-token` header or `Authorization: SharedAccessSignature …`).
//! Keys and signatures are compared in constant time and never logged.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, NaiveDateTime, Utc};
use hmac::{Hmac, Mac};
use percent_encoding::percent_decode_str;
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// What the publisher presented.
pub enum Credential<'a> {
    Key(&'a str),
    SasToken(&'a str),
}

#[derive(Debug, PartialEq, Eq)]
pub enum AuthError {
    Missing,
    WrongKey,
    MalformedToken(&'static str),
    Expired,
    WrongResource,
    BadSignature,
}

impl std::fmt::Display for AuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => f.write_str("no credential: send the aeg-sas-key header or a SAS token"),
            Self::WrongKey => f.write_str("the access key is not valid for this topic"),
            Self::MalformedToken(what) => write!(f, "the SAS token is malformed: {what}"),
            Self::Expired => f.write_str("the SAS token has expired"),
            Self::WrongResource => f.write_str("the SAS token was issued for another resource"),
            Self::BadSignature => f.write_str("the SAS token's signature is not valid for this topic"),
        }
    }
}

/// Checks `credential` against the topic's keys; `resource_path` is the publish path.
pub fn verify(
    credential: Option<Credential<'_>>,
    keys: &[String; 2],
    resource_path: &str,
    now: DateTime<Utc>,
) -> Result<(), AuthError> {
    match credential {
        None => Err(AuthError::Missing),
        Some(Credential::Key(presented)) => {
            let matched = keys.iter().fold(0u8, |acc, k| {
                acc | u8::from(bool::from(k.as_bytes().ct_eq(presented.as_bytes())))
            });
            if matched == 1 { Ok(()) } else { Err(AuthError::WrongKey) }
        }
        Some(Credential::SasToken(token)) => verify_token(token, keys, resource_path, now),
    }
}

/// token = `r=<urlenc resource>&e=<urlenc expiry>&s=<urlenc base64(HMAC-SHA256(base64decode(key), "r=…&e=…"))>`
fn verify_token(token: &str, keys: &[String; 2], resource_path: &str, now: DateTime<Utc>) -> Result<(), AuthError> {
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
    if expires <= now {
        return Err(AuthError::Expired);
    }
    if !resource_matches(&resource, resource_path) {
        return Err(AuthError::WrongResource);
    }
    let signature = BASE64
        .decode(decode(signature)?)
        .map_err(|_| AuthError::MalformedToken("s= is not base64"))?;
    let valid = keys.iter().any(|key| {
        let Ok(secret) = BASE64.decode(key) else { return false };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&secret) else {
            return false;
        };
        mac.update(signed.as_bytes());
        mac.verify_slice(&signature).is_ok()
    });
    if valid { Ok(()) } else { Err(AuthError::BadSignature) }
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

/// The token's resource is the topic's endpoint URL (any host; query ignored).
fn resource_matches(resource: &str, resource_path: &str) -> bool {
    let without_query = resource.split('?').next().unwrap_or_default();
    let path = match without_query.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => without_query,
    };
    path.trim_end_matches('/')
        .eq_ignore_ascii_case(resource_path.trim_end_matches('/'))
}

/// Builds a SAS token the way Event Grid's SDKs do (used by tests and the demo).
#[cfg(test)]
pub fn sas_token(resource: &str, expires: DateTime<Utc>, key: &str) -> String {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let enc = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
    let signed = format!(
        "r={}&e={}",
        enc(resource),
        enc(&expires.format("%m/%d/%Y %I:%M:%S %p").to_string())
    );
    let secret = BASE64.decode(key).unwrap_or_default();
    let mut mac = Hmac::<Sha256>::new_from_slice(&secret).unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
    mac.update(signed.as_bytes());
    format!("{signed}&s={}", enc(&BASE64.encode(mac.finalize().into_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    const PATH: &str = "/topics/orders/api/events";

    fn keys() -> [String; 2] {
        [BASE64.encode([1u8; 32]), BASE64.encode([2u8; 32])]
    }

    #[test]
    fn either_key_works_and_others_do_not() {
        let k = keys();
        let now = Utc::now();
        assert_eq!(verify(Some(Credential::Key(&k[0])), &k, PATH, now), Ok(()));
        assert_eq!(verify(Some(Credential::Key(&k[1])), &k, PATH, now), Ok(()));
        assert_eq!(
            verify(Some(Credential::Key("nope")), &k, PATH, now),
            Err(AuthError::WrongKey)
        );
        assert_eq!(verify(None, &k, PATH, now), Err(AuthError::Missing));
    }

    #[test]
    fn sdk_style_sas_tokens_are_checked() {
        let k = keys();
        let now = Utc::now();
        let url = "https://eg.example:8080/topics/orders/api/events?api-version=2018-01-01";
        let good = sas_token(url, now + Duration::hours(1), &k[1]);
        assert_eq!(verify(Some(Credential::SasToken(&good)), &k, PATH, now), Ok(()));
        let expired = sas_token(url, now - Duration::hours(1), &k[0]);
        assert_eq!(
            verify(Some(Credential::SasToken(&expired)), &k, PATH, now),
            Err(AuthError::Expired)
        );
        let other = sas_token(
            "https://eg.example/topics/other/api/events",
            now + Duration::hours(1),
            &k[0],
        );
        assert_eq!(
            verify(Some(Credential::SasToken(&other)), &k, PATH, now),
            Err(AuthError::WrongResource)
        );
        let forged = sas_token(url, now + Duration::hours(1), &BASE64.encode([9u8; 32]));
        assert_eq!(
            verify(Some(Credential::SasToken(&forged)), &k, PATH, now),
            Err(AuthError::BadSignature)
        );
        assert!(matches!(
            verify(Some(Credential::SasToken("garbage")), &k, PATH, now),
            Err(AuthError::MalformedToken(_))
        ));
    }
}
