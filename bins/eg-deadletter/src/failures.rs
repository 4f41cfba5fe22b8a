//! Why a dead-letter write failed, and when to try that store again.
//!
//! Every failure gets a short kind that says who must act: an operator (`NotConfigured`,
//! `Unauthenticated`, `PermissionDenied`, `ContainerNotFound`), the store (`Unavailable`:
//! refused connections, timeouts, 5xx, throttling) or eg itself (`Rejected`). The kind
//! labels `DeadLetterWriteFailCount`, names the problem on the status page, and is in the
//! log line. Whatever the kind, the records are kept and tried again: each kind can be
//! fixed without eg (add the key, create the container, wait for the store).
//!
//! [`Backoff`] spaces those tries per store and container, doubling the wait after each
//! failure up to a cap, so a store that is down is not hammered by every pass of every
//! partition, and the other stores keep flowing. It is pure: the caller passes the time.

use crate::store_said;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The class of a failed write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The subscription names an account or connection this worker has no configuration
    /// for (removed since the subscription was created), or the configuration is unusable.
    NotConfigured,
    /// The store refused the credentials themselves: HTTP 401, or a 403 whose code says so
    /// (Azure `AuthenticationFailed`, S3 `InvalidAccessKeyId`, `SignatureDoesNotMatch`).
    Unauthenticated,
    /// The credentials are valid but may not write there: any other 403 (Azure
    /// `AuthorizationFailure` from a firewall rule, S3 `AccessDenied`).
    PermissionDenied,
    /// The container or bucket does not exist (HTTP 404 on a write).
    ContainerNotFound,
    /// The store did not answer, or answered that it cannot now: connection refused,
    /// timeout, 5xx, throttling, a local disk error.
    Unavailable,
    /// The write could not be formed, or the store refused the request itself.
    Rejected,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotConfigured => "NotConfigured",
            Self::Unauthenticated => "Unauthenticated",
            Self::PermissionDenied => "PermissionDenied",
            Self::ContainerNotFound => "ContainerNotFound",
            Self::Unavailable => "Unavailable",
            Self::Rejected => "Rejected",
        }
    }
}

/// A failed write: its kind and what went wrong, for a person (never a key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFailure {
    pub kind: FailureKind,
    pub message: String,
}

/// Longest message kept: store errors can quote a whole XML error body.
const MESSAGE_MAX: usize = 400;

impl WriteFailure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        if message.len() > MESSAGE_MAX {
            let mut end = MESSAGE_MAX;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        Self { kind, message }
    }

    /// A failed `put` (never `AlreadyExists`: the caller counts that as written). The
    /// message is what the store said when it answered with an error code, else
    /// `object_store`'s whole account.
    pub fn from_store(error: &object_store::Error) -> Self {
        let text = error.to_string();
        let message = store_said::read(&text).map_or_else(|| text.clone(), |said| said.describe());
        Self::new(classify(error), message)
    }
}

/// The kind of a failed `put`. A 404 on a write can only mean the container or bucket:
/// the object itself is being created. A 403 is told apart by the store's code.
pub fn classify(error: &object_store::Error) -> FailureKind {
    use object_store::Error as E;
    match error {
        E::Unauthenticated { .. } => FailureKind::Unauthenticated,
        E::PermissionDenied { .. } => {
            let text = error.to_string();
            if store_said::read(&text).is_some_and(|said| said.credentials_refused()) {
                FailureKind::Unauthenticated
            } else {
                FailureKind::PermissionDenied
            }
        }
        E::NotFound { .. } => FailureKind::ContainerNotFound,
        E::InvalidPath { .. } | E::NotSupported { .. } | E::NotImplemented { .. } => FailureKind::Rejected,
        E::UnknownConfigurationKey { .. } => FailureKind::NotConfigured,
        // Generic (connection, timeout, 5xx, 429, a local I/O error), a failed task, and
        // whatever later versions add: worth trying again.
        _ => FailureKind::Unavailable,
    }
}

/// When each failing store and container may be tried again.
#[derive(Debug)]
pub struct Backoff {
    first: Duration,
    cap: Duration,
    failing: HashMap<BackoffKey, Failing>,
}

/// A store's label and a container.
pub type BackoffKey = (String, String);

#[derive(Debug, Clone, Copy)]
struct Failing {
    failures: u32,
    next_try: Instant,
}

impl Backoff {
    /// Waits `first` after one failure, twice that after two, … never more than `cap`.
    pub fn new(first: Duration, cap: Duration) -> Self {
        Self {
            first,
            cap: cap.max(first),
            failing: HashMap::new(),
        }
    }

    /// Whether a write to `key` may be tried at `now`.
    pub fn may_try(&self, key: &BackoffKey, now: Instant) -> bool {
        self.failing.get(key).is_none_or(|f| now >= f.next_try)
    }

    /// Records a failed write at `now`; returns how long until the next try.
    pub fn failed(&mut self, key: BackoffKey, now: Instant) -> Duration {
        let failures = self.failing.get(&key).map_or(1, |f| f.failures.saturating_add(1));
        let wait = wait_after(failures, self.first, self.cap);
        self.failing.insert(
            key,
            Failing {
                failures,
                next_try: now + wait,
            },
        );
        wait
    }

    /// A write succeeded: the store is tried freely again.
    pub fn succeeded(&mut self, key: &BackoffKey) {
        self.failing.remove(key);
    }
}

/// `first × 2^(failures − 1)`, at most `cap`.
pub fn wait_after(failures: u32, first: Duration, cap: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(30);
    first.saturating_mul(1 << doublings).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Box<dyn std::error::Error + Send + Sync> {
        "status 4xx".into()
    }

    #[test]
    fn store_errors_get_the_kind_that_says_who_must_act() {
        use object_store::Error as E;
        let path = || "c/a.json".to_owned();
        let cases = [
            (
                E::Unauthenticated {
                    path: path(),
                    source: source(),
                },
                FailureKind::Unauthenticated,
            ),
            (
                E::PermissionDenied {
                    path: path(),
                    source: source(),
                },
                FailureKind::PermissionDenied,
            ),
            (
                E::NotFound {
                    path: path(),
                    source: source(),
                },
                FailureKind::ContainerNotFound,
            ),
            (
                E::Generic {
                    store: "S3",
                    source: "connection refused".into(),
                },
                FailureKind::Unavailable,
            ),
            (
                E::NotImplemented {
                    operation: "put".into(),
                    implementer: "x".into(),
                },
                FailureKind::Rejected,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(classify(&error), kind, "{error}");
            assert_eq!(WriteFailure::from_store(&error).kind, kind);
        }
    }

    /// A 403 as `object_store` returns it, with the store's error body.
    fn forbidden(code: &str, message: &str) -> object_store::Error {
        object_store::Error::PermissionDenied {
            path: "SUB/x.json".into(),
            source: format!(
                "Server returned non-2xx status code: 403 Forbidden: \
                 <Error><Code>{code}</Code><Message>{message}\nRequestId:1</Message></Error>"
            )
            .into(),
        }
    }

    #[test]
    fn a_403_is_unauthenticated_when_the_store_refused_the_credentials() {
        for code in ["AuthenticationFailed", "InvalidAccessKeyId", "SignatureDoesNotMatch"] {
            let failure = WriteFailure::from_store(&forbidden(code, "Refused."));
            assert_eq!(failure.kind, FailureKind::Unauthenticated, "{code}");
            assert_eq!(failure.message, format!("Refused. (403 {code})"));
        }
        for code in [
            "AuthorizationFailure",
            "AuthorizationPermissionMismatch",
            "AccessDenied",
        ] {
            let error = forbidden(code, "This request is not authorized to perform this operation.");
            assert_eq!(classify(&error), FailureKind::PermissionDenied, "{code}");
        }
    }

    #[test]
    fn long_messages_are_cut_on_a_character() {
        let failure = WriteFailure::new(FailureKind::Unavailable, "é".repeat(400));
        assert!(failure.message.len() <= MESSAGE_MAX + '…'.len_utf8());
        assert!(failure.message.ends_with('…'));
        assert_eq!(WriteFailure::new(FailureKind::Unavailable, "short").message, "short");
    }

    #[test]
    fn waits_double_up_to_the_cap() {
        let (first, cap) = (Duration::from_secs(30), Duration::from_secs(300));
        let waits: Vec<u64> = (1..=6).map(|n| wait_after(n, first, cap).as_secs()).collect();
        assert_eq!(waits, [30, 60, 120, 240, 300, 300]);
        assert_eq!(wait_after(u32::MAX, first, cap), cap, "no overflow");
    }

    #[test]
    fn a_failing_store_waits_and_the_others_do_not() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(4));
        let t0 = Instant::now();
        let down = ("azure:a".to_owned(), "dl".to_owned());
        let other = ("s3:b".to_owned(), "dl".to_owned());
        assert!(backoff.may_try(&down, t0));
        assert_eq!(backoff.failed(down.clone(), t0), Duration::from_secs(1));
        assert!(!backoff.may_try(&down, t0 + Duration::from_millis(999)));
        assert!(backoff.may_try(&other, t0), "another store keeps flowing");
        let t1 = t0 + Duration::from_secs(1);
        assert!(backoff.may_try(&down, t1));
        assert_eq!(backoff.failed(down.clone(), t1), Duration::from_secs(2));
        assert!(!backoff.may_try(&down, t1 + Duration::from_secs(1)));
        backoff.succeeded(&down);
        assert!(backoff.may_try(&down, t1), "a success ends the waiting");
        assert_eq!(backoff.failed(down, t1), Duration::from_secs(1), "and the doubling");
    }
}
