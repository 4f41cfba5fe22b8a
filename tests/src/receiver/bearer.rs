//! A receiver's check of `Authorization: Bearer` tokens, as an API behind an identity
//! provider does it: an RS256 JWT whose signature verifies with a key of the provider's
//! published key set (fetched again when a token names a `kid` it lacks, as after the
//! provider restarted with a new key), whose `aud` is the receiver's and whose `exp` has
//! not passed. Anything else is answered `401`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// An RSA public key: modulus and exponent, big-endian.
type RsaKey = (Vec<u8>, Vec<u8>);

/// What a receiver requires of a token.
pub struct BearerCheck {
    jwks_url: String,
    audience: String,
    /// The provider's keys by `kid`.
    keys: Mutex<HashMap<String, RsaKey>>,
    /// Tokens the test told the receiver to refuse (revoked, say).
    refused: Mutex<BTreeSet<String>>,
}

impl BearerCheck {
    /// Tokens signed by a key at `jwks_url` for `audience`.
    pub fn new(jwks_url: &str, audience: &str) -> Self {
        Self {
            jwks_url: jwks_url.to_owned(),
            audience: audience.to_owned(),
            keys: Mutex::default(),
            refused: Mutex::default(),
        }
    }

    /// From now on refuses `token` even if it verifies.
    pub fn refuse(&self, token: &str) {
        self.refused.lock().expect("bearer lock").insert(token.to_owned());
    }

    /// Whether the `authorization` header's token is good; `Err` says why not.
    pub async fn verify(&self, authorization: Option<&str>) -> Result<(), String> {
        let token = authorization
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or("no bearer token")?;
        if self.refused.lock().expect("bearer lock").contains(token) {
            return Err("a refused token".into());
        }
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a JWT".into());
        };
        let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|e| format!("bad base64url: {e}"));
        let header: Value = serde_json::from_slice(&decode(header)?).map_err(|e| e.to_string())?;
        if header["alg"] != "RS256" {
            return Err(format!("alg {}", header["alg"]));
        }
        let kid = header["kid"].as_str().unwrap_or_default().to_owned();
        let key = match self.key(&kid) {
            Some(key) => key,
            None => {
                self.fetch_keys().await?;
                self.key(&kid).ok_or("no key with the token's kid")?
            }
        };
        let signed = &token[..token.len() - signature.len() - 1];
        ring::signature::RsaPublicKeyComponents { n: &key.0, e: &key.1 }
            .verify(
                &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                signed.as_bytes(),
                &decode(signature)?,
            )
            .map_err(|_| "bad signature")?;
        let claims: Value = serde_json::from_slice(&decode(payload)?).map_err(|e| e.to_string())?;
        let audience_ok = match &claims["aud"] {
            Value::String(aud) => *aud == self.audience,
            Value::Array(auds) => auds.iter().any(|a| *a == self.audience.as_str()),
            _ => false,
        };
        if !audience_ok {
            return Err(format!("aud {} is not {}", claims["aud"], self.audience));
        }
        let now = chrono::Utc::now().timestamp();
        match claims["exp"].as_i64() {
            Some(exp) if exp > now => Ok(()),
            _ => Err("expired".into()),
        }
    }

    fn key(&self, kid: &str) -> Option<RsaKey> {
        self.keys.lock().expect("bearer lock").get(kid).cloned()
    }

    async fn fetch_keys(&self) -> Result<(), String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let body = reqwest::get(&self.jwks_url)
            .await
            .map_err(|e| format!("key set: {e}"))?
            .bytes()
            .await
            .map_err(|e| format!("key set: {e}"))?;
        let set: Value = serde_json::from_slice(&body).map_err(|e| format!("key set: {e}"))?;
        let mut keys = self.keys.lock().expect("bearer lock");
        for key in set["keys"].as_array().into_iter().flatten() {
            let field = |name: &str| URL_SAFE_NO_PAD.decode(key[name].as_str().unwrap_or_default()).ok();
            if let (Some(kid), Some(n), Some(e)) = (key["kid"].as_str(), field("n"), field("e")) {
                keys.insert(kid.to_owned(), (n, e));
            }
        }
        Ok(())
    }
}
