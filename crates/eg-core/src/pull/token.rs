//! The lock token a receive hands out with each event. It names where the lock is held
//! (partition and stream entry id, so any ingress copy can settle it without sticky
//! routing) and which delivery it belongs to (the entry's delivery count when the lock
//! was granted, so a token goes stale the moment the event is delivered again), and is
//! signed with HMAC-SHA256 over the subscription, so a token of one subscription is
//! useless on another and a forged or damaged token is refused without a Redis call.
//!
//! Form: base64url (no padding) of `version(1) ‖ partition(u16) ‖ entry ms(u64) ‖ entry
//! seq(u64) ‖ count(u32) ‖ hmac(16)`, all big-endian: 39 bytes, 52 characters.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

const VERSION: u8 = 1;
const FIELDS: usize = 1 + 2 + 8 + 8 + 4;
const MAC_BYTES: usize = 16;
const TOKEN_BYTES: usize = FIELDS + MAC_BYTES;

/// The secret lock tokens are signed with (shared by every ingress copy through Redis).
#[derive(Clone)]
pub struct TokenKey(Vec<u8>);

impl TokenKey {
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        Self(secret.into())
    }

    fn mac(&self, subscription: &str, fields: &[u8]) -> [u8; MAC_BYTES] {
        // HMAC accepts a key of any length: this cannot fail.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            return [0; MAC_BYTES];
        };
        mac.update(subscription.as_bytes());
        mac.update(b"\n");
        mac.update(fields);
        let full = mac.finalize().into_bytes();
        let mut out = [0; MAC_BYTES];
        out.copy_from_slice(&full[..MAC_BYTES]);
        out
    }
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(…)")
    }
}

/// One lock: the queue entry `ms-seq` of `partition`, at delivery `count` of that entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockToken {
    pub partition: u16,
    pub(crate) entry_ms: u64,
    pub(crate) entry_seq: u64,
    /// The entry's own delivery counter (Redis's pending-entry count) when the lock was
    /// granted.
    pub count: u32,
}

/// Why a token cannot be read (the per-token `BadToken` error's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadToken {
    #[error("not a lock token: it is not base64url text")]
    NotBase64,
    #[error("not a lock token: wrong length or version")]
    Malformed,
    #[error("the lock token was not issued for this event subscription (or was altered)")]
    WrongSignature,
}

impl LockToken {
    /// A token for the stream entry id `entry_id` (`<ms>-<seq>`); `None` if it is not one.
    pub fn for_entry(partition: u16, entry_id: &str, count: u32) -> Option<Self> {
        let (ms, seq) = entry_id.split_once('-')?;
        Some(Self {
            partition,
            entry_ms: ms.parse().ok()?,
            entry_seq: seq.parse().ok()?,
            count,
        })
    }

    /// The stream entry id the lock is held on.
    pub fn entry_id(&self) -> String {
        format!("{}-{}", self.entry_ms, self.entry_seq)
    }

    fn fields(&self) -> [u8; FIELDS] {
        let mut out = [0; FIELDS];
        out[0] = VERSION;
        out[1..3].copy_from_slice(&self.partition.to_be_bytes());
        out[3..11].copy_from_slice(&self.entry_ms.to_be_bytes());
        out[11..19].copy_from_slice(&self.entry_seq.to_be_bytes());
        out[19..23].copy_from_slice(&self.count.to_be_bytes());
        out
    }

    /// The token text for `subscription` (`<topic>/<subscription>` keys).
    pub fn encode(&self, key: &TokenKey, subscription: &str) -> String {
        let fields = self.fields();
        let mut bytes = Vec::with_capacity(TOKEN_BYTES);
        bytes.extend_from_slice(&fields);
        bytes.extend_from_slice(&key.mac(subscription, &fields));
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// Reads a token presented for `subscription`.
    pub fn decode(text: &str, key: &TokenKey, subscription: &str) -> Result<Self, BadToken> {
        let bytes = URL_SAFE_NO_PAD
            .decode(text.trim_end_matches('='))
            .map_err(|_| BadToken::NotBase64)?;
        if bytes.len() != TOKEN_BYTES || bytes[0] != VERSION {
            return Err(BadToken::Malformed);
        }
        let (fields, mac) = bytes.split_at(FIELDS);
        if !bool::from(key.mac(subscription, fields).ct_eq(mac)) {
            return Err(BadToken::WrongSignature);
        }
        let u64_at = |at: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&fields[at..at + 8]);
            u64::from_be_bytes(b)
        };
        Ok(Self {
            partition: u16::from_be_bytes([fields[1], fields[2]]),
            entry_ms: u64_at(3),
            entry_seq: u64_at(11),
            count: u32::from_be_bytes([fields[19], fields[20], fields[21], fields[22]]),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn key() -> TokenKey {
        TokenKey::new(b"0123456789abcdef0123456789abcdef".to_vec())
    }

    #[test]
    fn a_token_round_trips_for_its_subscription_only() {
        let token = LockToken::for_entry(3, "1732540000123-7", 2).unwrap();
        let text = token.encode(&key(), "orders/audit");
        assert_eq!(text.len(), 52);
        assert_eq!(LockToken::decode(&text, &key(), "orders/audit").unwrap(), token);
        assert_eq!(token.entry_id(), "1732540000123-7");
        assert_eq!(
            LockToken::decode(&text, &key(), "orders/billing"),
            Err(BadToken::WrongSignature)
        );
        let other_key = TokenKey::new(b"another secret".to_vec());
        assert_eq!(
            LockToken::decode(&text, &other_key, "orders/audit"),
            Err(BadToken::WrongSignature)
        );
    }

    #[test]
    fn damaged_tokens_are_bad_tokens() {
        let text = LockToken::for_entry(0, "5-0", 1).unwrap().encode(&key(), "t/s");
        assert_eq!(
            LockToken::decode("not a token!", &key(), "t/s"),
            Err(BadToken::NotBase64)
        );
        assert_eq!(LockToken::decode("abcd", &key(), "t/s"), Err(BadToken::Malformed));
        assert_eq!(LockToken::decode("", &key(), "t/s"), Err(BadToken::Malformed));
        // One character changed anywhere breaks the signature.
        let mut chars: Vec<char> = text.chars().collect();
        chars[10] = if chars[10] == 'A' { 'B' } else { 'A' };
        let altered: String = chars.into_iter().collect();
        assert_eq!(
            LockToken::decode(&altered, &key(), "t/s"),
            Err(BadToken::WrongSignature)
        );
    }

    #[test]
    fn entry_ids_must_be_stream_ids() {
        assert!(LockToken::for_entry(0, "12", 1).is_none());
        assert!(LockToken::for_entry(0, "a-1", 1).is_none());
        assert!(LockToken::for_entry(0, "1-b", 1).is_none());
    }
}
