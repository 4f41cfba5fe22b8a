//! What one delivery attempt came to, and how the outcome is handled
//! (behaviour.md#what-a-failure-leads-to).
//!
//! The classification table is data (`OutcomePolicy`) so a deployment can override it;
//! the default is the current Event Grid behaviour for webhooks.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The result of one attempt, as the sender saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// The endpoint answered. `retry_after` is its `Retry-After`, if any.
    Status { code: u16, retry_after: Option<Duration> },
    /// No response within the delivery timeout.
    TimedOut,
    /// Connection refused or reset, TLS failure, broken stream.
    SocketError,
    /// The endpoint's host name did not resolve.
    ResolutionError,
    /// The attempt's holder vanished (a sender crashed mid-delivery).
    Aborted,
    /// The endpoint resolved to an address deliveries may not go to (loopback, private,
    /// link-local, metadata …) and no allow-list entry covers it. Never retried.
    AddressNotAllowed,
    /// A queue or broker destination confirmed it holds the events (a storage queue's
    /// 201, a publisher confirm, a JetStream acknowledgement).
    Stored,
    /// A queue or broker destination refused or failed the events, as Event Grid names
    /// it (`NotFound`, `Unauthorized`, `Full`, `PayloadTooLarge`, `Disabled`, …), and the
    /// HTTP status its retry table treats it as (404, 401, 503, 413, 403, …), so one
    /// table decides what is retried for every destination.
    Refused { outcome: OutcomeName, as_status: u16 },
    /// No request was sent: the webhook's bearer token could not be got (its identity
    /// provider down, refusing or answering nonsense). Retried on the schedule and, as
    /// it says nothing about the endpoint, not counted against its probation.
    TokenUnavailable,
}

/// `lastDeliveryOutcome` names (behaviour.md#dead-lettering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OutcomeName {
    Succeeded,
    NotFound,
    Unauthorized,
    Forbidden,
    BadRequest,
    PayloadTooLarge,
    TimedOut,
    Busy,
    SocketError,
    ResolutionError,
    Probation,
    Aborted,
    Canceled,
    GenericError,
    /// eg's own: the endpoint's address is not allowed
    /// (behaviour.md#protecting-endpoints-and-the-system, endpoint safety).
    AddressNotAllowed,
    /// A queue at its size limit (Event Grid's name for queue destinations).
    Full,
    /// The destination is disabled (a queue or entity turned off).
    Disabled,
    /// eg's own: no bearer token could be got for a webhook, so nothing was sent
    /// (docs/oauth-delivery.md). Older tiers do not know this name: see
    /// [`OutcomeName::known_to_every_tier`].
    TokenUnavailable,
}

impl OutcomeName {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "Succeeded",
            Self::NotFound => "NotFound",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden => "Forbidden",
            Self::BadRequest => "BadRequest",
            Self::PayloadTooLarge => "PayloadTooLarge",
            Self::TimedOut => "TimedOut",
            Self::Busy => "Busy",
            Self::SocketError => "SocketError",
            Self::ResolutionError => "ResolutionError",
            Self::Probation => "Probation",
            Self::Aborted => "Aborted",
            Self::Canceled => "Canceled",
            Self::GenericError => "GenericError",
            Self::AddressNotAllowed => "AddressNotAllowed",
            Self::Full => "Full",
            Self::Disabled => "Disabled",
            Self::TokenUnavailable => "TokenUnavailable",
        }
    }

    pub const ALL: [OutcomeName; 18] = [
        Self::Succeeded,
        Self::NotFound,
        Self::Unauthorized,
        Self::Forbidden,
        Self::BadRequest,
        Self::PayloadTooLarge,
        Self::TimedOut,
        Self::Busy,
        Self::SocketError,
        Self::ResolutionError,
        Self::Probation,
        Self::Aborted,
        Self::Canceled,
        Self::GenericError,
        Self::AddressNotAllowed,
        Self::Full,
        Self::Disabled,
        Self::TokenUnavailable,
    ];

    /// The name written where a tier older than this one may read it (a delivery's
    /// last attempt in a retry record): those read the names they know and would refuse
    /// the whole record otherwise. An outcome added later is written as the nearest
    /// older one and kept beside it for newer readers.
    pub fn known_to_every_tier(self) -> Self {
        match self {
            Self::TokenUnavailable => Self::GenericError,
            other => other,
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str().eq_ignore_ascii_case(raw))
    }
}

impl fmt::Display for OutcomeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AttemptOutcome {
    /// Only 200, 201, 202, 203 and 204 are success (behaviour.md#a-delivery-attempt).
    pub fn is_success(&self) -> bool {
        matches!(self, Self::Status { code: 200..=204, .. } | Self::Stored)
    }

    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn name(&self) -> OutcomeName {
        match self {
            Self::Status { code, .. } => match code {
                200..=204 => OutcomeName::Succeeded,
                400 => OutcomeName::BadRequest,
                401 => OutcomeName::Unauthorized,
                403 => OutcomeName::Forbidden,
                404 => OutcomeName::NotFound,
                408 => OutcomeName::TimedOut,
                413 => OutcomeName::PayloadTooLarge,
                429 | 503 => OutcomeName::Busy,
                _ => OutcomeName::GenericError,
            },
            Self::TimedOut => OutcomeName::TimedOut,
            Self::SocketError => OutcomeName::SocketError,
            Self::ResolutionError => OutcomeName::ResolutionError,
            Self::Aborted => OutcomeName::Aborted,
            Self::AddressNotAllowed => OutcomeName::AddressNotAllowed,
            Self::Stored => OutcomeName::Succeeded,
            Self::Refused { outcome, .. } => *outcome,
            Self::TokenUnavailable => OutcomeName::TokenUnavailable,
        }
    }
}

/// How an outcome is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    Delivered,
    /// Retry, no sooner than `at_least` after the attempt (the schedule may say later).
    Retry {
        at_least: Duration,
    },
    /// Dead-letter now (or drop without a dead-letter destination).
    NotRetried,
}

/// The classification table of behaviour.md#what-a-failure-leads-to, as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomePolicy {
    not_retried: Vec<u16>,
    /// Transport outcomes (timed out, socket error …) that are not retried either.
    not_retried_outcomes: Vec<OutcomeName>,
    status_minimums: BTreeMap<u16, Duration>,
    other_status_minimum: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting} {input:?}: {problem}")]
pub struct OutcomePolicyError {
    setting: &'static str,
    input: String,
    problem: String,
}

impl Default for OutcomePolicy {
    fn default() -> Self {
        Self {
            not_retried: vec![400, 401, 403, 413],
            not_retried_outcomes: Vec::new(),
            status_minimums: BTreeMap::from([(408, Duration::from_secs(120)), (503, Duration::from_secs(30))]),
            other_status_minimum: Duration::from_secs(10),
        }
    }
}

impl OutcomePolicy {
    /// The namespace-topic table (behaviour.md#namespace-topics): HTTP 400, 401, 403, 404,
    /// 414 and the outcomes TimedOut, SocketError and Canceled are not retried; no status
    /// minimums.
    pub fn namespace_topic() -> Self {
        Self {
            not_retried: vec![400, 401, 403, 404, 414],
            not_retried_outcomes: vec![OutcomeName::TimedOut, OutcomeName::SocketError, OutcomeName::Canceled],
            status_minimums: BTreeMap::new(),
            other_status_minimum: Duration::ZERO,
        }
    }

    /// Builds the table from its two settings: `not_retried` such as `400,401,403,413`
    /// (status codes, or outcome names such as `TimedOut`) and `retry_minimums` such as
    /// `408=2m,503=30s,*=10s` (`*` = any other status).
    pub fn parse(not_retried: &str, retry_minimums: &str) -> Result<Self, OutcomePolicyError> {
        let err = |setting, input: &str, problem: String| OutcomePolicyError {
            setting,
            input: input.to_owned(),
            problem,
        };
        let mut statuses = Vec::new();
        let mut outcomes = Vec::new();
        for item in not_retried.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if let Some(outcome) = OutcomeName::parse(item) {
                outcomes.push(outcome);
            } else {
                statuses.push(
                    parse_status(item).map_err(|p| err("not_retried", item, format!("{p}, nor an outcome name")))?,
                );
            }
        }
        let mut policy = Self {
            not_retried: statuses,
            not_retried_outcomes: outcomes,
            status_minimums: BTreeMap::new(),
            other_status_minimum: Duration::ZERO,
        };
        for rule in retry_minimums.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (status, delay) = rule
                .split_once('=')
                .ok_or_else(|| err("retry_minimums", rule, "expected STATUS=DURATION".into()))?;
            let delay =
                humantime::parse_duration(delay.trim()).map_err(|e| err("retry_minimums", rule, e.to_string()))?;
            match status.trim() {
                "*" => policy.other_status_minimum = delay,
                code => {
                    let code = parse_status(code).map_err(|p| err("retry_minimums", rule, p))?;
                    policy.status_minimums.insert(code, delay);
                }
            }
        }
        Ok(policy)
    }

    pub fn classify(&self, outcome: &AttemptOutcome) -> Handling {
        if outcome.is_success() {
            return Handling::Delivered;
        }
        if matches!(outcome, AttemptOutcome::AddressNotAllowed) || self.not_retried_outcomes.contains(&outcome.name()) {
            return Handling::NotRetried;
        }
        match outcome {
            AttemptOutcome::Status { code, .. } | AttemptOutcome::Refused { as_status: code, .. }
                if self.not_retried.contains(code) =>
            {
                Handling::NotRetried
            }
            AttemptOutcome::Status { code, .. } | AttemptOutcome::Refused { as_status: code, .. } => Handling::Retry {
                at_least: self
                    .status_minimums
                    .get(code)
                    .copied()
                    .unwrap_or(self.other_status_minimum),
            },
            _ => Handling::Retry {
                at_least: Duration::ZERO,
            },
        }
    }
}

fn parse_status(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(code) if (100..=599).contains(&code) => Ok(code),
        _ => Err(format!("{s:?} is not an HTTP status code")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> AttemptOutcome {
        AttemptOutcome::Status {
            code,
            retry_after: None,
        }
    }

    #[test]
    fn queue_and_broker_outcomes_go_through_the_same_table() {
        let policy = OutcomePolicy::default();
        assert!(AttemptOutcome::Stored.is_success());
        assert_eq!(AttemptOutcome::Stored.status_code(), None, "no HTTP status to report");
        let refused = |outcome, as_status| AttemptOutcome::Refused { outcome, as_status };
        assert_eq!(
            policy.classify(&refused(OutcomeName::Unauthorized, 401)),
            Handling::NotRetried
        );
        assert_eq!(
            policy.classify(&refused(OutcomeName::PayloadTooLarge, 413)),
            Handling::NotRetried
        );
        assert_eq!(
            policy.classify(&refused(OutcomeName::Full, 503)),
            Handling::Retry {
                at_least: Duration::from_secs(30)
            },
            "a full queue is busy: retried no sooner than 503's minimum"
        );
        assert_eq!(refused(OutcomeName::NotFound, 404).name(), OutcomeName::NotFound);
        assert!(matches!(
            policy.classify(&refused(OutcomeName::NotFound, 404)),
            Handling::Retry { .. }
        ));
        assert_eq!(OutcomeName::parse("full"), Some(OutcomeName::Full));
    }

    #[test]
    fn default_table_matches_the_spec() {
        let p = OutcomePolicy::default();
        for code in [200, 201, 202, 203, 204] {
            assert_eq!(p.classify(&status(code)), Handling::Delivered);
        }
        for code in [400, 401, 403, 413] {
            assert_eq!(p.classify(&status(code)), Handling::NotRetried, "{code}");
        }
        let retry = |secs| Handling::Retry {
            at_least: Duration::from_secs(secs),
        };
        assert_eq!(p.classify(&status(408)), retry(120));
        assert_eq!(p.classify(&status(503)), retry(30));
        for code in [205, 302, 404, 429, 500, 502, 504] {
            assert_eq!(p.classify(&status(code)), retry(10), "{code}");
        }
        assert_eq!(p.classify(&AttemptOutcome::TimedOut), retry(0));
        assert_eq!(p.classify(&AttemptOutcome::SocketError), retry(0));
        assert_eq!(
            p.classify(&AttemptOutcome::TokenUnavailable),
            retry(0),
            "retried on the schedule"
        );
        assert_eq!(AttemptOutcome::TokenUnavailable.name().as_str(), "TokenUnavailable");
    }

    #[test]
    fn namespace_topic_table_follows_spec_section_10() {
        let p = OutcomePolicy::namespace_topic();
        for code in [400, 401, 403, 404, 414] {
            assert_eq!(p.classify(&status(code)), Handling::NotRetried, "{code}");
        }
        assert_eq!(p.classify(&AttemptOutcome::TimedOut), Handling::NotRetried);
        assert_eq!(p.classify(&AttemptOutcome::SocketError), Handling::NotRetried);
        assert!(matches!(p.classify(&status(500)), Handling::Retry { .. }));
        assert!(matches!(p.classify(&status(503)), Handling::Retry { .. }));
    }

    #[test]
    fn refused_addresses_are_never_retried() {
        let p = OutcomePolicy::parse("", "").unwrap();
        assert_eq!(p.classify(&AttemptOutcome::AddressNotAllowed), Handling::NotRetried);
        assert_eq!(AttemptOutcome::AddressNotAllowed.name().as_str(), "AddressNotAllowed");
    }

    #[test]
    fn names_follow_event_grid() {
        assert_eq!(status(404).name(), OutcomeName::NotFound);
        assert_eq!(status(429).name(), OutcomeName::Busy);
        assert_eq!(status(500).name(), OutcomeName::GenericError);
        assert_eq!(AttemptOutcome::TimedOut.name(), OutcomeName::TimedOut);
    }

    #[test]
    fn a_deployment_can_override_the_table() {
        let p = OutcomePolicy::parse("400,404", "503=1s,*=0s").unwrap();
        assert_eq!(p.classify(&status(404)), Handling::NotRetried);
        assert_eq!(
            p.classify(&status(401)),
            Handling::Retry {
                at_least: Duration::ZERO
            }
        );
        assert_eq!(
            p.classify(&status(503)),
            Handling::Retry {
                at_least: Duration::from_secs(1)
            }
        );
        assert!(OutcomePolicy::parse("4000", "").is_err());
        let p = OutcomePolicy::parse("400,TimedOut", "").unwrap();
        assert_eq!(p.classify(&AttemptOutcome::TimedOut), Handling::NotRetried);
        assert!(OutcomePolicy::parse("", "503").is_err());
        assert!(OutcomePolicy::parse("", "503=later").is_err());
    }
}
