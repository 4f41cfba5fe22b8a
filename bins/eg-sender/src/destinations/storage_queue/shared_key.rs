//! Azure Storage's Shared Key authorization, as the queue service checks it: an
//! HMAC-SHA256, keyed with the account key, over a canonical form of the request (the
//! "string to sign"). Pure functions, so the signature is tested against a vector
//! computed independently; the Storage Queue destination ([`crate::storage_queue`]) is
//! the one caller.
//!
//! The rules, from Azure's "Authorize with Shared Key" (service version 2015-02-21 and
//! later): the verb and twelve standard header lines (`Content-Length` empty when 0, the
//! `Date` line empty because `x-ms-date` is sent), then every `x-ms-*` header lower-cased
//! and sorted as `name:value`, then `/<account><path>` and each query parameter
//! lower-cased and sorted as `\nname:value`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

/// The storage account key, decoded: what signs every request of its account.
#[derive(Clone)]
pub struct AccountKey(Vec<u8>);

/// An account key that is not base64 (the portal gives keys in base64).
#[derive(Debug, thiserror::Error)]
#[error("the account key is not base64 ({0}); copy it as the Azure portal shows it")]
pub struct NotBase64(base64::DecodeError);

impl AccountKey {
    pub fn from_base64(key: &str) -> Result<Self, NotBase64> {
        STANDARD.decode(key.trim()).map(Self).map_err(NotBase64)
    }
}

impl fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccountKey(***)")
    }
}

/// The parts of a request that are signed.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    pub method: &'a str,
    /// The body's length in bytes.
    pub content_length: usize,
    /// Exactly as sent (`""` when there is none).
    pub content_type: &'a str,
    /// Every `x-ms-*` header sent, in any order.
    pub ms_headers: &'a [(&'a str, &'a str)],
    /// The URL's path, as sent (`/devstoreaccount1/orders/messages` for Azurite's
    /// path-style URLs, `/orders/messages` for Azure's).
    pub path: &'a str,
    /// The query parameters, decoded, in any order.
    pub query: &'a [(&'a str, &'a str)],
}

/// The string to sign for `request` to `account`.
pub fn string_to_sign(account: &str, request: &SignedRequest<'_>) -> String {
    let content_length = match request.content_length {
        0 => String::new(),
        n => n.to_string(),
    };
    // VERB, Content-Encoding, Content-Language, Content-Length, Content-MD5,
    // Content-Type, Date, If-Modified-Since, If-Match, If-None-Match,
    // If-Unmodified-Since, Range.
    let mut out = format!(
        "{}\n\n\n{content_length}\n\n{}\n\n\n\n\n\n\n",
        request.method, request.content_type
    );
    let mut headers: Vec<(String, &str)> = request
        .ms_headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim()))
        .filter(|(name, _)| name.starts_with("x-ms-"))
        .collect();
    headers.sort();
    for (name, value) in headers {
        out.push_str(&format!("{name}:{value}\n"));
    }
    out.push_str(&canonical_resource(account, request.path, request.query));
    out
}

/// `/<account><path>`, then each query parameter (names lower-cased, sorted; the values
/// of a repeated name sorted and joined with commas) on a line of its own.
fn canonical_resource(account: &str, path: &str, query: &[(&str, &str)]) -> String {
    let mut params: Vec<(String, Vec<&str>)> = Vec::new();
    for (name, value) in query {
        let name = name.to_ascii_lowercase();
        match params.iter_mut().find(|(n, _)| *n == name) {
            Some((_, values)) => values.push(value),
            None => params.push((name, vec![value])),
        }
    }
    params.sort();
    let mut out = format!("/{account}{path}");
    for (name, mut values) in params {
        values.sort_unstable();
        out.push_str(&format!("\n{name}:{}", values.join(",")));
    }
    out
}

/// The `Authorization` header's value: `SharedKey <account>:<signature>`.
pub fn authorization(account: &str, key: &AccountKey, request: &SignedRequest<'_>) -> String {
    format!(
        "SharedKey {account}:{}",
        signature(key, &string_to_sign(account, request))
    )
}

/// Base64 of HMAC-SHA256(key, string to sign).
fn signature(key: &AccountKey, string_to_sign: &str) -> String {
    // HMAC takes a key of any length: this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key.0) else {
        return String::new();
    };
    mac.update(string_to_sign.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Azurite's well-known development key (public, in Microsoft's docs).
    const AZURITE_KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    fn put_message<'a>(headers: &'a [(&'a str, &'a str)], query: &'a [(&'a str, &'a str)]) -> SignedRequest<'a> {
        SignedRequest {
            method: "POST",
            content_length: 73,
            content_type: "application/xml",
            ms_headers: headers,
            path: "/devstoreaccount1/orders/messages",
            query,
        }
    }

    #[test]
    fn the_string_to_sign_follows_azures_layout() {
        // Out of order and mixed case on purpose: both are normalised.
        let headers = [
            ("x-ms-version", "2021-12-02"),
            ("X-MS-Date", "Wed, 25 Nov 2026 16:00:00 GMT"),
        ];
        let query = [("messagettl", "-1")];
        assert_eq!(
            string_to_sign("devstoreaccount1", &put_message(&headers, &query)),
            "POST\n\n\n73\n\napplication/xml\n\n\n\n\n\n\n\
             x-ms-date:Wed, 25 Nov 2026 16:00:00 GMT\nx-ms-version:2021-12-02\n\
             /devstoreaccount1/devstoreaccount1/orders/messages\nmessagettl:-1"
        );
    }

    #[test]
    fn an_empty_body_leaves_the_length_line_empty_and_query_names_are_sorted() {
        let headers = [("x-ms-date", "d"), ("x-ms-version", "v")];
        let query = [
            ("VisibilityTimeout", "0"),
            ("messagettl", "60"),
            ("comp", "b"),
            ("comp", "a"),
        ];
        let request = SignedRequest {
            method: "PUT",
            content_length: 0,
            content_type: "",
            ms_headers: &headers,
            path: "/q",
            query: &query,
        };
        assert_eq!(
            string_to_sign("acct", &request),
            "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:d\nx-ms-version:v\n/acct/q\ncomp:a,b\nmessagettl:60\nvisibilitytimeout:0"
        );
    }

    /// Pinned from /work/notes/destinations-research-sharedkey-demo.py's signer (the one
    /// verified against Azurite) for the same request: an independent implementation.
    #[test]
    fn the_signature_matches_an_independent_signer() {
        let headers = [
            ("x-ms-date", "Wed, 25 Nov 2026 16:00:00 GMT"),
            ("x-ms-version", "2021-12-02"),
        ];
        let query = [("messagettl", "-1")];
        let key = AccountKey::from_base64(AZURITE_KEY).unwrap();
        assert_eq!(
            authorization("devstoreaccount1", &key, &put_message(&headers, &query)),
            "SharedKey devstoreaccount1:z2xWV7yPzo9yw3Df8J9kgNAeU86LK6y1HtHgwL8oXpY="
        );
    }

    #[test]
    fn a_key_that_is_not_base64_is_refused_and_never_printed() {
        assert!(AccountKey::from_base64("not base64!").is_err());
        let key = AccountKey::from_base64(AZURITE_KEY).unwrap();
        assert_eq!(format!("{key:?}"), "AccountKey(***)");
    }
}
