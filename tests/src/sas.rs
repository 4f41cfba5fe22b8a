//! Publisher credentials as Event Grid's SDKs and docs build them: SAS tokens
//! (`r=<resource>&e=<expiry>&s=<signature>`, HMAC-SHA256 with a topic key) and the percent
//! encoding they and `?aeg-sas-key=` use.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Every byte but ASCII letters and digits as `%XX`.
pub fn percent_encode(raw: &str) -> String {
    raw.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A SAS token for `resource`, expiring at `expires` (Unix seconds), signed with `key`
/// (a topic key, base64).
pub fn sas_token(resource: &str, expires: i64, key: &str) -> String {
    let signed = format!("r={}&e={expires}", percent_encode(resource));
    let key = BASE64.decode(key).expect("a topic key is base64");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
    mac.update(signed.as_bytes());
    format!(
        "{signed}&s={}",
        percent_encode(&BASE64.encode(mac.finalize().into_bytes()))
    )
}

/// An hour from now, in Unix seconds: a token expiry that is not in the way.
pub fn in_an_hour() -> i64 {
    chrono::Utc::now().timestamp() + 3600
}
