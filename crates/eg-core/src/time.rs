//! Instants as milliseconds since the Unix epoch: the unit Redis scores and stream ids use,
//! so a time read from Redis `TIME` and a time in a record compare without conversion.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UnixMillis(pub i64);

impl UnixMillis {
    pub fn now() -> Self {
        Self(Utc::now().timestamp_millis())
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_utc_rfc3339() {
        assert_eq!(UnixMillis(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn since_never_goes_negative() {
        assert_eq!(UnixMillis(5).since(UnixMillis(10)), Duration::ZERO);
        assert_eq!(UnixMillis(10).since(UnixMillis(4)), Duration::from_millis(6));
    }
}
