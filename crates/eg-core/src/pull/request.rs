//! The requests of pull delivery and their ranges, each parsed into a value that can
//! only be valid ("parse, don't validate"), with errors naming the parameter.
//!
//! - `api-version` (query, required on every operation): `YYYY-MM-DD` or
//!   `YYYY-MM-DD-preview`, so a future SDK default keeps working;
//! - receive: `maxEvents` 1–100 (default 1), `maxWaitTime` 10–120 s (default 60);
//! - release: `releaseDelayInSeconds` one of 0, 10, 60, 600, 3600 (default 0);
//! - acknowledge, release, reject, renewLock: body `{"lockTokens": [...]}`, 1–1,000 strings.

use crate::api_error::InvalidField;
use serde_json::Value;
use std::time::Duration;

/// The five operations on a queue subscription (the part after the last `:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Receive,
    Acknowledge,
    Release,
    Reject,
    RenewLock,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Receive => "receive",
            Self::Acknowledge => "acknowledge",
            Self::Release => "release",
            Self::Reject => "reject",
            Self::RenewLock => "renewLock",
        }
    }
}

/// Splits a path segment `<subscription>:<action>` at its last `:`. `Err` says what is
/// wrong with it.
pub fn parse_action(segment: &str) -> Result<(&str, Action), String> {
    let Some((subscription, action)) = segment.rsplit_once(':') else {
        return Err(format!(
            "{segment:?} names no operation: use <subscription>:receive, :acknowledge, :release, :reject or :renewLock"
        ));
    };
    let action = match action {
        "receive" => Action::Receive,
        "acknowledge" => Action::Acknowledge,
        "release" => Action::Release,
        "reject" => Action::Reject,
        "renewLock" => Action::RenewLock,
        other => {
            return Err(format!(
                "unknown operation {other:?}: use receive, acknowledge, release, reject or renewLock"
            ));
        }
    };
    Ok((subscription, action))
}

/// `api-version` must be present and look like one of Event Grid's.
pub fn require_api_version(value: Option<&str>) -> Result<(), InvalidField> {
    let Some(value) = value else {
        return Err(InvalidField::new(
            "api-version",
            "is required, as a query parameter (e.g. ?api-version=2024-06-01)",
        ));
    };
    let date = value.strip_suffix("-preview").unwrap_or(value);
    if date.len() == 10 && chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok() {
        Ok(())
    } else {
        Err(InvalidField::new(
            "api-version",
            format!("{value:?} is not an API version; use the form YYYY-MM-DD or YYYY-MM-DD-preview (e.g. 2024-06-01)"),
        ))
    }
}

pub(crate) const MAX_EVENTS_RANGE: (u32, u32) = (1, 100);
pub(crate) const DEFAULT_MAX_EVENTS: u32 = 1;
pub(crate) const MAX_WAIT_RANGE: (u64, u64) = (10, 120);
pub(crate) const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(60);
pub(crate) const MAX_LOCK_TOKENS: usize = 1000;

/// A receive's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveOptions {
    pub max_events: u32,
    pub max_wait: Duration,
}

fn integer_in(name: &str, raw: &str, low: u64, high: u64) -> Result<u64, InvalidField> {
    let value: u64 = raw.trim().parse().map_err(|_| {
        InvalidField::new(
            name,
            format!("must be a whole number from {low} to {high}, got {raw:?}"),
        )
    })?;
    if (low..=high).contains(&value) {
        Ok(value)
    } else {
        Err(InvalidField::new(
            name,
            format!("must be from {low} to {high}, got {value}"),
        ))
    }
}

impl ReceiveOptions {
    /// From the query's `maxEvents` and `maxWaitTime` (seconds), each optional.
    pub fn parse(max_events: Option<&str>, max_wait_time: Option<&str>) -> Result<Self, InvalidField> {
        let max_events = match max_events {
            None => DEFAULT_MAX_EVENTS,
            Some(raw) => integer_in(
                "maxEvents",
                raw,
                u64::from(MAX_EVENTS_RANGE.0),
                u64::from(MAX_EVENTS_RANGE.1),
            )? as u32,
        };
        let max_wait = match max_wait_time {
            None => DEFAULT_MAX_WAIT,
            Some(raw) => Duration::from_secs(integer_in("maxWaitTime", raw, MAX_WAIT_RANGE.0, MAX_WAIT_RANGE.1)?),
        };
        Ok(Self { max_events, max_wait })
    }
}

/// How long a released event waits before it can be received again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseDelay(Duration);

/// Event Grid's `ReleaseDelay` values, in seconds.
pub(crate) const RELEASE_DELAYS: [u64; 5] = [0, 10, 60, 600, 3600];

impl ReleaseDelay {
    pub const NONE: Self = Self(Duration::ZERO);

    /// From the query's `releaseDelayInSeconds` (absent: no delay).
    pub fn parse(raw: Option<&str>) -> Result<Self, InvalidField> {
        let Some(raw) = raw else { return Ok(Self::NONE) };
        match raw.trim().parse::<u64>() {
            Ok(seconds) if RELEASE_DELAYS.contains(&seconds) => Ok(Self(Duration::from_secs(seconds))),
            _ => Err(InvalidField::new(
                "releaseDelayInSeconds",
                format!("must be one of 0, 10, 60, 600 or 3600, got {raw:?}"),
            )),
        }
    }

    pub fn duration(self) -> Duration {
        self.0
    }
}

/// The `lockTokens` of an acknowledge, release, reject or renewLock body.
pub fn lock_tokens(body: &[u8]) -> Result<Vec<String>, InvalidField> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(InvalidField::new(
            "lockTokens",
            "is required: send {\"lockTokens\": [\"<token>\", …]}",
        ));
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|e| InvalidField::new("", format!("the body is not JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(InvalidField::new("", "the body must be a JSON object with lockTokens"));
    };
    let Some(tokens) = object.get("lockTokens") else {
        return Err(InvalidField::new("lockTokens", "is required"));
    };
    let Some(tokens) = tokens.as_array() else {
        return Err(InvalidField::new("lockTokens", "must be an array of strings"));
    };
    if tokens.is_empty() || tokens.len() > MAX_LOCK_TOKENS {
        return Err(InvalidField::new(
            "lockTokens",
            format!("must hold 1 to {MAX_LOCK_TOKENS} tokens, got {}", tokens.len()),
        ));
    }
    tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            t.as_str()
                .map(str::to_owned)
                .ok_or_else(|| InvalidField::new(format!("lockTokens[{i}]"), "must be a string"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn receive_options_have_event_grids_defaults_and_ranges() {
        assert_eq!(
            ReceiveOptions::parse(None, None).unwrap(),
            ReceiveOptions {
                max_events: 1,
                max_wait: Duration::from_secs(60)
            }
        );
        let o = ReceiveOptions::parse(Some("100"), Some("10")).unwrap();
        assert_eq!((o.max_events, o.max_wait.as_secs()), (100, 10));
        assert_eq!(
            ReceiveOptions::parse(Some("1"), Some("120"))
                .unwrap()
                .max_wait
                .as_secs(),
            120
        );
        for (events, wait, field) in [
            (Some("0"), None, "maxEvents"),
            (Some("101"), None, "maxEvents"),
            (Some("-1"), None, "maxEvents"),
            (Some("x"), None, "maxEvents"),
            (None, Some("9"), "maxWaitTime"),
            (None, Some("121"), "maxWaitTime"),
        ] {
            let e = ReceiveOptions::parse(events, wait).unwrap_err();
            assert_eq!(e.field, field);
        }
    }

    #[test]
    fn release_delays_are_the_five_documented_values() {
        assert_eq!(ReleaseDelay::parse(None).unwrap(), ReleaseDelay::NONE);
        for ok in ["0", "10", "60", "600", "3600"] {
            assert_eq!(
                ReleaseDelay::parse(Some(ok)).unwrap().duration().as_secs(),
                ok.parse::<u64>().unwrap()
            );
        }
        for bad in ["30", "-10", "ten", ""] {
            let e = ReleaseDelay::parse(Some(bad)).unwrap_err();
            assert_eq!(e.field, "releaseDelayInSeconds");
            assert!(e.problem.contains("0, 10, 60, 600 or 3600"), "{}", e.problem);
        }
    }

    #[test]
    fn lock_tokens_are_one_to_a_thousand_strings() {
        assert_eq!(lock_tokens(br#"{"lockTokens":["a","b"]}"#).unwrap(), ["a", "b"]);
        assert_eq!(lock_tokens(b"").unwrap_err().field, "lockTokens");
        assert_eq!(lock_tokens(br#"{}"#).unwrap_err().field, "lockTokens");
        assert_eq!(lock_tokens(br#"{"lockTokens":[]}"#).unwrap_err().field, "lockTokens");
        assert_eq!(lock_tokens(br#"{"lockTokens":"a"}"#).unwrap_err().field, "lockTokens");
        assert_eq!(
            lock_tokens(br#"{"lockTokens":["a",1]}"#).unwrap_err().field,
            "lockTokens[1]"
        );
        assert!(lock_tokens(b"[").unwrap_err().problem.contains("not JSON"));
        let many = format!("{{\"lockTokens\":[{}]}}", vec!["\"t\""; 1001].join(","));
        assert!(lock_tokens(many.as_bytes()).unwrap_err().problem.contains("1 to 1000"));
        let most = format!("{{\"lockTokens\":[{}]}}", vec!["\"t\""; 1000].join(","));
        assert_eq!(lock_tokens(most.as_bytes()).unwrap().len(), 1000);
    }

    #[test]
    fn actions_split_at_the_last_colon() {
        assert_eq!(parse_action("audit:receive").unwrap(), ("audit", Action::Receive));
        assert_eq!(parse_action("a:b:renewLock").unwrap(), ("a:b", Action::RenewLock));
        assert!(parse_action("audit").unwrap_err().contains("names no operation"));
        assert!(parse_action("audit:peek").unwrap_err().contains("unknown operation"));
    }

    #[test]
    fn api_version_is_required_and_dated() {
        for ok in ["2024-06-01", "2023-11-01", "2023-10-01-preview"] {
            require_api_version(Some(ok)).unwrap();
        }
        assert_eq!(require_api_version(None).unwrap_err().field, "api-version");
        for bad in [
            "",
            "latest",
            "2024-6-1",
            "2024-13-01",
            "2024-02-30",
            "2024-06-01-beta",
            "2024-06-01preview",
        ] {
            assert_eq!(require_api_version(Some(bad)).unwrap_err().field, "api-version");
        }
    }
}
