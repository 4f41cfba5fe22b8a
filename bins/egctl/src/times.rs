//! Times on the command line: RFC 3339 (`2026-01-02T03:04:05Z`), `now`, or a duration
//! meaning that long ago (`2h`, `30m`, `1day 2h`), because "the last two hours" is what
//! an operator usually means.

use chrono::{DateTime, SecondsFormat, Utc};

/// Parses a time argument relative to the current time (a clap value parser).
pub fn parse(raw: &str) -> Result<DateTime<Utc>, String> {
    parse_at(raw, Utc::now())
}

/// Parses a time argument relative to `now`.
pub fn parse_at(raw: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let raw = raw.trim();
    if raw.eq_ignore_ascii_case("now") {
        return Ok(now);
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(raw) {
        return Ok(at.with_timezone(&Utc));
    }
    let ago = humantime::parse_duration(raw).map_err(|_| {
        format!("{raw:?} is neither an RFC 3339 time (2026-01-02T03:04:05Z) nor a duration ago (2h, 30m)")
    })?;
    let ago = chrono::Duration::from_std(ago).map_err(|_| format!("{raw:?} is too long ago"))?;
    now.checked_sub_signed(ago)
        .ok_or_else(|| format!("{raw:?} is too long ago"))
}

/// The form the API takes: RFC 3339 in UTC with milliseconds.
pub fn format(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn takes_rfc3339_now_and_durations_ago() {
        let now = DateTime::parse_from_rfc3339("2026-01-02T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(format(parse_at("2h", now).unwrap()), "2026-01-02T10:00:00.000Z");
        assert_eq!(format(parse_at("1day 30m", now).unwrap()), "2026-01-01T11:30:00.000Z");
        assert_eq!(format(parse_at("now", now).unwrap()), "2026-01-02T12:00:00.000Z");
        assert_eq!(
            format(parse_at("2026-01-02T05:00:00+02:00", now).unwrap()),
            "2026-01-02T03:00:00.000Z"
        );
        assert!(parse_at("yesterday", now).unwrap_err().contains("RFC 3339"));
    }
}
