//! The JSON answers of pull delivery, exactly as Event Grid's (and so its SDKs') shapes:
//! a receive answers `{"value":[{"brokerProperties":{"lockToken","deliveryCount"},
//! "event":{…}}]}` with `value` always present (the Python SDK iterates it); the lock
//! operations answer `200` with `{"succeededLockTokens":[…],"failedLockTokens":[{
//! "lockToken","error":{"code","message"}}]}` even when every token failed.

use serde::Serialize;
use serde_json::Value;

/// One received event: its lock and the event as stored (a CloudEvent in structured
/// mode; nothing is added to it).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceivedEvent {
    pub broker_properties: BrokerProperties,
    pub event: Value,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerProperties {
    pub lock_token: String,
    pub delivery_count: u32,
}

/// A receive's answer.
#[derive(Debug, Serialize, Default)]
pub struct ReceiveAnswer {
    pub value: Vec<ReceivedEvent>,
}

/// What became of one token of a lock operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockOutcome {
    Succeeded,
    /// Well formed, but its lock is no longer held (settled, expired, taken over).
    Lost,
    /// Not a token of this subscription; the message says why.
    Bad(String),
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FailedLockToken {
    pub lock_token: String,
    pub error: TokenError,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct TokenError {
    pub(crate) code: &'static str,
    pub message: String,
}

/// A lock operation's answer (acknowledge, release, reject, renewLock): the tokens that
/// succeeded, and each that failed with why. Named for the lock, not "settle": a renew
/// settles nothing, and eg-store's settle is the state change behind it.
#[derive(Debug, Serialize, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LockAnswer {
    pub(crate) failed_lock_tokens: Vec<FailedLockToken>,
    pub(crate) succeeded_lock_tokens: Vec<String>,
}

/// Event Grid's answer for a token that is no longer held.
pub(crate) const TOKEN_LOST: &str = "TokenLost";
pub(crate) const TOKEN_LOST_MESSAGE: &str = "Token has expired.";
pub(crate) const BAD_TOKEN: &str = "BadToken";

impl LockAnswer {
    /// The answer for `tokens` with their outcomes, in request order.
    pub fn new(results: impl IntoIterator<Item = (String, LockOutcome)>) -> Self {
        let mut answer = Self::default();
        for (token, outcome) in results {
            match outcome {
                LockOutcome::Succeeded => answer.succeeded_lock_tokens.push(token),
                LockOutcome::Lost => answer.failed_lock_tokens.push(FailedLockToken {
                    lock_token: token,
                    error: TokenError {
                        code: TOKEN_LOST,
                        message: TOKEN_LOST_MESSAGE.to_owned(),
                    },
                }),
                LockOutcome::Bad(message) => answer.failed_lock_tokens.push(FailedLockToken {
                    lock_token: token,
                    error: TokenError {
                        code: BAD_TOKEN,
                        message,
                    },
                }),
            }
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_empty_receive_still_has_value() {
        assert_eq!(
            serde_json::to_string(&ReceiveAnswer::default()).unwrap(),
            r#"{"value":[]}"#
        );
        let one = ReceiveAnswer {
            value: vec![ReceivedEvent {
                broker_properties: BrokerProperties {
                    lock_token: "tok".into(),
                    delivery_count: 1,
                },
                event: serde_json::json!({"id":"1","source":"/s","type":"t","specversion":"1.0"}),
            }],
        };
        assert_eq!(
            serde_json::to_string(&one).unwrap(),
            r#"{"value":[{"brokerProperties":{"lockToken":"tok","deliveryCount":1},"event":{"id":"1","source":"/s","specversion":"1.0","type":"t"}}]}"#
        );
    }

    #[test]
    fn settle_answers_carry_both_lists() {
        assert_eq!(
            serde_json::to_string(&LockAnswer::default()).unwrap(),
            r#"{"failedLockTokens":[],"succeededLockTokens":[]}"#
        );
        let answer = LockAnswer::new([
            ("a".to_owned(), LockOutcome::Succeeded),
            ("b".to_owned(), LockOutcome::Lost),
            ("c".to_owned(), LockOutcome::Bad("not a lock token".into())),
        ]);
        assert_eq!(
            serde_json::to_string(&answer).unwrap(),
            r#"{"failedLockTokens":[{"lockToken":"b","error":{"code":"TokenLost","message":"Token has expired."}},{"lockToken":"c","error":{"code":"BadToken","message":"not a lock token"}}],"succeededLockTokens":["a"]}"#
        );
    }
}
