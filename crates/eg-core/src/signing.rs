//! Signed deliveries: Standard Webhooks (<https://www.standardwebhooks.com/>) signatures
//! on every request to a subscription that has signing secrets. Event Grid has no such
//! feature (it authenticates the receiver to nobody); this is eg's own addition.
//!
//! A request carries `webhook-id`, `webhook-timestamp` (Unix seconds) and
//! `webhook-signature`: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` per secret,
//! space-separated. Two secrets are allowed at once so a receiver can rotate without a
//! window in which it rejects genuine requests.
//!
//! A [`SigningSecret`] can only be built valid, never shows its key in `Debug`, and
//! shows itself to the API only as a [`fingerprint`](SigningSecret::fingerprint).

use crate::time::UnixMillis;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::fmt;
use std::time::Duration;

/// What every secret starts with.
pub(crate) const SECRET_PREFIX: &str = "whsec_";
/// Shortest key accepted (192 bits), in bytes after base64 decoding.
pub(crate) const MIN_KEY_BYTES: usize = 24;
/// Longest key accepted, in bytes: SHA-256's block size (longer keys are hashed by HMAC
/// anyway, so they add nothing).
pub(crate) const MAX_KEY_BYTES: usize = 64;
/// Secrets a subscription may have at once: the current one and, during rotation, the next.
pub(crate) const MAX_SECRETS: usize = 2;

/// Standard base64, padding optional when reading (secret generators differ).
const BASE64_LENIENT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);
const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Why a `whsec_…` string is not a usable secret. The messages never repeat the input:
/// it may be a real secret with a typo.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("is a fingerprint as GET shows it, not a secret: send the secret itself (\"whsec_\" + base64)")]
    Fingerprint,
    #[error("must start with \"whsec_\" followed by the base64 key")]
    MissingPrefix,
    #[error("is not valid base64 after \"whsec_\"")]
    NotBase64,
    #[error("the key must be {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes after base64 decoding, got {0}")]
    KeyLength(usize),
}

/// One HMAC-SHA256 signing key.
#[derive(Clone)]
pub struct SigningSecret {
    key: Vec<u8>,
    /// The keyed HMAC, prepared once: signing clones it, so it never fails at send time.
    mac: Hmac<Sha256>,
}

impl SigningSecret {
    /// Reads `whsec_<base64 key>`; the key must be 24–64 bytes.
    pub fn parse(raw: &str) -> Result<Self, SecretError> {
        let Some(encoded) = raw.strip_prefix(SECRET_PREFIX) else {
            return Err(SecretError::MissingPrefix);
        };
        if encoded.starts_with('…') {
            return Err(SecretError::Fingerprint);
        }
        let key = BASE64_LENIENT.decode(encoded).map_err(|_| SecretError::NotBase64)?;
        if !(MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&key.len()) {
            return Err(SecretError::KeyLength(key.len()));
        }
        let mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|_| SecretError::KeyLength(key.len()))?;
        Ok(Self { key, mac })
    }

    /// What the API shows instead of the secret: `whsec_…` and the last 8 hex digits of
    /// the SHA-256 of the key. Enough to tell two secrets apart during a rotation (and for
    /// a receiver to check which one it holds), nothing to recover the key from.
    pub(crate) fn fingerprint(&self) -> String {
        let digest = Sha256::digest(&self.key);
        let hex: String = digest[digest.len() - 4..].iter().map(|b| format!("{b:02x}")).collect();
        format!("{SECRET_PREFIX}…{hex}")
    }

    /// The raw HMAC-SHA256 of `{id}.{timestamp}.{body}`.
    fn mac(&self, id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.mac.clone();
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// `v1,<base64 signature>` for one message.
    pub fn signature(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        format!(
            "v1,{}",
            BASE64.encode(self.mac(id, timestamp, body).finalize().into_bytes())
        )
    }

    /// Whether `signature_header` (space-separated `v1,…` entries, others ignored) holds
    /// this secret's signature of the message. Compared in constant time.
    pub(crate) fn verifies(&self, id: &str, timestamp: i64, body: &[u8], signature_header: &str) -> bool {
        signature_header.split(' ').any(|entry| {
            entry
                .strip_prefix("v1,")
                .and_then(|b64| BASE64_LENIENT.decode(b64).ok())
                .is_some_and(|sig| self.mac(id, timestamp, body).verify_slice(&sig).is_ok())
        })
    }
}

impl PartialEq for SigningSecret {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for SigningSecret {}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SigningSecret").field(&self.fingerprint()).finish()
    }
}

/// Stored (in the catalog, never in API answers) as the `whsec_…` string.
impl Serialize for SigningSecret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format!("{SECRET_PREFIX}{}", BASE64.encode(&self.key)))
    }
}

impl<'de> Deserialize<'de> for SigningSecret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(|e| serde::de::Error::custom(format!("signing secret {e}")))
    }
}

/// A subscription's secrets: none (deliveries unsigned), one, or two during a rotation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<SigningSecret>", into = "Vec<SigningSecret>")]
pub struct SigningSecrets(Vec<SigningSecret>);

impl SigningSecrets {
    pub fn new(secrets: Vec<SigningSecret>) -> Result<Self, TooManySecrets> {
        if secrets.len() > MAX_SECRETS {
            return Err(TooManySecrets(secrets.len()));
        }
        Ok(Self(secrets))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_slice(&self) -> &[SigningSecret] {
        &self.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("at most {MAX_SECRETS} secrets (the current one and the next, during a rotation), got {0}")]
pub struct TooManySecrets(pub usize);

impl TryFrom<Vec<SigningSecret>> for SigningSecrets {
    type Error = TooManySecrets;

    fn try_from(secrets: Vec<SigningSecret>) -> Result<Self, Self::Error> {
        Self::new(secrets)
    }
}

impl From<SigningSecrets> for Vec<SigningSecret> {
    fn from(secrets: SigningSecrets) -> Self {
        secrets.0
    }
}

/// The three headers of one signed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    /// `webhook-id`
    pub id: String,
    /// `webhook-timestamp`: Unix seconds.
    pub timestamp: String,
    /// `webhook-signature`: one `v1,…` per secret, space-separated.
    pub signature: String,
}

/// The `webhook-signature` value: one `v1,<base64>` per secret, in the subscription's
/// order, space-separated.
pub(crate) fn sign(secrets: &[SigningSecret], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| s.signature(id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The headers for a request whose body is exactly `body`, sent at `at`; `None` when the
/// subscription has no secrets (unsigned deliveries carry no `webhook-*` headers).
pub fn headers(secrets: &[SigningSecret], id: &str, at: UnixMillis, body: &[u8]) -> Option<SignedHeaders> {
    if secrets.is_empty() {
        return None;
    }
    let timestamp = at.0.div_euclid(1000);
    Some(SignedHeaders {
        id: id.to_owned(),
        timestamp: timestamp.to_string(),
        signature: sign(secrets, id, timestamp, body),
    })
}

/// `webhook-id` of a request carrying these deliveries, the same for every attempt at
/// them: for one delivery its own id (stable across retries and reclaims); for a batch
/// `batch_` + the first 16 bytes, hex, of SHA-256 over the sorted ids joined by `\n`, so
/// the same deliveries batched together again (in any order) get the same id.
pub fn webhook_id<'a>(delivery_ids: impl IntoIterator<Item = &'a str>) -> String {
    let mut ids: Vec<&str> = delivery_ids.into_iter().collect();
    if let [only] = ids.as_slice() {
        return (*only).to_owned();
    }
    ids.sort_unstable();
    let digest = Sha256::digest(ids.join("\n").as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("batch_{hex}")
}

/// Why a receiver should refuse a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("webhook-timestamp is not an integer number of seconds")]
    BadTimestamp,
    #[error("webhook-timestamp is further from now than the tolerance")]
    OutsideTolerance,
    #[error("no signature in webhook-signature matches")]
    NoMatch,
}

/// What a receiver does with the three headers: the timestamp must be within `tolerance`
/// of `now` (replay protection; Standard Webhooks suggests 5 minutes) and one of the
/// signatures must be `secret`'s.
pub fn verify(
    secret: &SigningSecret,
    id: &str,
    timestamp: &str,
    signature_header: &str,
    body: &[u8],
    now: UnixMillis,
    tolerance: Duration,
) -> Result<(), VerifyError> {
    let ts: i64 = timestamp.parse().map_err(|_| VerifyError::BadTimestamp)?;
    if ts.abs_diff(now.0.div_euclid(1000)) > tolerance.as_secs() {
        return Err(VerifyError::OutsideTolerance);
    }
    if secret.verifies(id, ts, body, signature_header) {
        Ok(())
    } else {
        Err(VerifyError::NoMatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    const SPEC_ID: &str = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
    const SPEC_TS: i64 = 1_649_367_553;
    const SPEC_BODY: &str = r#"{"email":"test@example.com","username":"test_user"}"#;
    const SPEC_SIGNATURE: &str = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";

    fn other_secret() -> SigningSecret {
        SigningSecret::parse(&format!("whsec_{}", BASE64.encode([7u8; 32]))).unwrap()
    }

    #[test]
    fn standard_webhooks_test_vector() {
        let secret = SigningSecret::parse(SPEC_SECRET).unwrap();
        assert_eq!(
            sign(std::slice::from_ref(&secret), SPEC_ID, SPEC_TS, SPEC_BODY.as_bytes()),
            SPEC_SIGNATURE
        );
        assert!(secret.verifies(SPEC_ID, SPEC_TS, SPEC_BODY.as_bytes(), SPEC_SIGNATURE));
    }

    #[test]
    fn rotation_signs_with_both_secrets_in_order() {
        let spec = SigningSecret::parse(SPEC_SECRET).unwrap();
        let next = other_secret();
        let header = sign(&[next.clone(), spec.clone()], SPEC_ID, SPEC_TS, SPEC_BODY.as_bytes());
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2, "{header}");
        assert_eq!(parts[1], SPEC_SIGNATURE);
        assert_eq!(parts[0], next.signature(SPEC_ID, SPEC_TS, SPEC_BODY.as_bytes()));
        assert_ne!(parts[0], parts[1]);
        // A receiver holding either secret accepts the request.
        assert!(spec.verifies(SPEC_ID, SPEC_TS, SPEC_BODY.as_bytes(), &header));
        assert!(next.verifies(SPEC_ID, SPEC_TS, SPEC_BODY.as_bytes(), &header));
        let unrelated = SigningSecret::parse(&format!("whsec_{}", BASE64.encode([9u8; 24]))).unwrap();
        assert!(!unrelated.verifies(SPEC_ID, SPEC_TS, SPEC_BODY.as_bytes(), &header));
    }

    #[test]
    fn any_change_to_the_message_breaks_the_signature() {
        let secret = SigningSecret::parse(SPEC_SECRET).unwrap();
        let body = SPEC_BODY.as_bytes();
        assert!(!secret.verifies("msg_other", SPEC_TS, body, SPEC_SIGNATURE));
        assert!(!secret.verifies(SPEC_ID, SPEC_TS + 1, body, SPEC_SIGNATURE));
        assert!(!secret.verifies(SPEC_ID, SPEC_TS, b"{}", SPEC_SIGNATURE));
        assert!(!secret.verifies(
            SPEC_ID,
            SPEC_TS,
            body,
            "v2,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        ));
        assert!(!secret.verifies(SPEC_ID, SPEC_TS, body, "v1,not-base64!"));
        assert!(!secret.verifies(SPEC_ID, SPEC_TS, body, ""));
    }

    #[test]
    fn invalid_secrets_are_refused_with_a_reason() {
        assert_eq!(
            SigningSecret::parse("C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap_err(),
            SecretError::MissingPrefix
        );
        assert_eq!(SigningSecret::parse("whsec_!!!!").unwrap_err(), SecretError::NotBase64);
        assert_eq!(
            SigningSecret::parse(&format!("whsec_{}", BASE64.encode([1u8; 23]))).unwrap_err(),
            SecretError::KeyLength(23)
        );
        assert_eq!(
            SigningSecret::parse(&format!("whsec_{}", BASE64.encode([1u8; 65]))).unwrap_err(),
            SecretError::KeyLength(65)
        );
        assert_eq!(SigningSecret::parse("whsec_").unwrap_err(), SecretError::KeyLength(0));
        let shown = SigningSecret::parse(SPEC_SECRET).unwrap().fingerprint();
        assert_eq!(SigningSecret::parse(&shown).unwrap_err(), SecretError::Fingerprint);
        // Both ends of the range, padded or not.
        assert!(SigningSecret::parse(&format!("whsec_{}", BASE64.encode([1u8; 64]))).is_ok());
        let padded = format!("whsec_{}", BASE64.encode([1u8; 25]));
        assert!(padded.ends_with('='));
        assert!(SigningSecret::parse(&padded).is_ok());
        assert!(SigningSecret::parse(padded.trim_end_matches('=')).is_ok());
    }

    #[test]
    fn the_key_never_shows_in_debug_or_errors() {
        let secret = SigningSecret::parse(SPEC_SECRET).unwrap();
        let debug = format!("{secret:?} {:?}", vec![secret.clone()]);
        assert!(!debug.contains("C2FVsBQIhrscChlQIMV"), "{debug}");
        assert!(debug.contains(&secret.fingerprint()), "{debug}");
        let fp = secret.fingerprint();
        assert!(
            fp.starts_with("whsec_…") && fp.chars().count() == "whsec_…".chars().count() + 8,
            "{fp}"
        );
        let err = SigningSecret::parse("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7o").unwrap_err();
        assert!(!err.to_string().contains("C2FV"), "{err}");
    }

    #[test]
    fn stored_form_round_trips() {
        let secret = SigningSecret::parse(SPEC_SECRET).unwrap();
        let stored = serde_json::to_string(&secret).unwrap();
        assert_eq!(stored, format!("\"{SPEC_SECRET}\""));
        let back: SigningSecret = serde_json::from_str(&stored).unwrap();
        assert_eq!(back, secret);
        assert!(serde_json::from_str::<SigningSecret>("\"whsec_short\"").is_err());
    }

    #[test]
    fn headers_only_for_subscriptions_with_secrets() {
        let secret = SigningSecret::parse(SPEC_SECRET).unwrap();
        assert_eq!(headers(&[], "d1", UnixMillis(1), b"[]"), None);
        let signed = headers(
            &[secret],
            SPEC_ID,
            UnixMillis(SPEC_TS * 1000 + 999),
            SPEC_BODY.as_bytes(),
        )
        .unwrap();
        assert_eq!(signed.id, SPEC_ID);
        assert_eq!(signed.timestamp, "1649367553");
        assert_eq!(signed.signature, SPEC_SIGNATURE);
    }

    #[test]
    fn webhook_ids_are_stable_per_set_of_deliveries() {
        assert_eq!(webhook_id(["abc"]), "abc");
        let batch = webhook_id(["a", "b", "c"]);
        assert!(
            batch.starts_with("batch_") && batch.len() == "batch_".len() + 32,
            "{batch}"
        );
        assert_eq!(webhook_id(["c", "a", "b"]), batch);
        assert_ne!(webhook_id(["a", "b"]), batch);
        assert_ne!(webhook_id(["a", "b", "d"]), batch);
    }

    #[test]
    fn receivers_check_the_timestamp_and_the_signature() {
        let secret = SigningSecret::parse(SPEC_SECRET).unwrap();
        let body = SPEC_BODY.as_bytes();
        let five_min = Duration::from_secs(300);
        let at = |secs: i64| UnixMillis(secs * 1000);
        let check = |ts: &str, sig: &str, now| verify(&secret, SPEC_ID, ts, sig, body, now, five_min);
        assert_eq!(check("1649367553", SPEC_SIGNATURE, at(SPEC_TS + 300)), Ok(()));
        assert_eq!(check("1649367553", SPEC_SIGNATURE, at(SPEC_TS - 300)), Ok(()));
        assert_eq!(
            check("1649367553", SPEC_SIGNATURE, at(SPEC_TS + 301)),
            Err(VerifyError::OutsideTolerance)
        );
        assert_eq!(
            check("soon", SPEC_SIGNATURE, at(SPEC_TS)),
            Err(VerifyError::BadTimestamp)
        );
        assert_eq!(check("1649367553", "v1,AAAA", at(SPEC_TS)), Err(VerifyError::NoMatch));
    }
}
