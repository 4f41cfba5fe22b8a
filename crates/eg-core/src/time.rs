//! Instants as milliseconds since the Unix epoch: the unit Redis scores and stream ids use,
//! so a time read from Redis `TIME` and a time in a record compare without conversion.
//! Also the ISO 8601 durations the management API takes and shows (`PT1M`, `P7D`).

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UnixMillis(pub i64);

impl UnixMillis {
    pub fn plus(self, d: Duration) -> Self {
        Self(self.0.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: UnixMillis) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    pub fn to_datetime(self) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(self.0)
            .single()
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
    }

    /// RFC 3339 with millisecond precision and a `Z`, as Event Grid writes times.
    pub fn to_rfc3339(self) -> String {
        self.to_datetime().to_rfc3339_opts(SecondsFormat::Millis, true)
    }
}

/// Parses an ISO 8601 duration such as `PT1M` or `P7D`; years and months are refused
/// because their length is not fixed.
pub(crate) fn parse_iso8601_duration(raw: &str) -> Result<Duration, String> {
    let parsed =
        iso8601::duration(raw).map_err(|_| format!("{raw:?} is not an ISO 8601 duration such as PT10M or P1D"))?;
    if let iso8601::Duration::YMDHMS { year, month, .. } = parsed
        && (year != 0 || month != 0)
    {
        return Err(format!("{raw:?}: years and months are not allowed; use days (P30D)"));
    }
    Ok(parsed.into())
}

/// Formats a duration as ISO 8601 in its largest exact unit (`P7D`, `PT90M`, `PT45S`).
pub(crate) fn iso8601_duration(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        s if s > 0 && s % 86_400 == 0 => format!("P{}D", s / 86_400),
        s if s > 0 && s % 3600 == 0 => format!("PT{}H", s / 3600),
        s if s > 0 && s % 60 == 0 => format!("PT{}M", s / 60),
        s => format!("PT{s}S"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_utc_rfc3339() {
        assert_eq!(UnixMillis(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn iso8601_durations_parse_and_format() {
        assert_eq!(parse_iso8601_duration("PT1M").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_iso8601_duration("P7D").unwrap(), Duration::from_secs(7 * 86_400));
        assert!(parse_iso8601_duration("P1Y").is_err());
        assert!(parse_iso8601_duration("7 days").is_err());
        assert_eq!(iso8601_duration(Duration::from_secs(7 * 86_400)), "P7D");
        assert_eq!(iso8601_duration(Duration::from_secs(5400)), "PT90M");
        assert_eq!(iso8601_duration(Duration::from_secs(45)), "PT45S");
    }

    #[test]
    fn since_never_goes_negative() {
        assert_eq!(UnixMillis(5).since(UnixMillis(10)), Duration::ZERO);
        assert_eq!(UnixMillis(10).since(UnixMillis(4)), Duration::from_millis(6));
    }
}
