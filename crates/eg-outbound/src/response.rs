//! What a response (or a failure to get one) means, and reading bodies within a bound.

use crate::resolve::refusal_in;
use crate::transport::{Response, TransportError};
use eg_core::AttemptOutcome;
use http::header::{HeaderMap, RETRY_AFTER};
use std::time::Duration;

/// Classifies a failure of a reqwest client (the destinations that reach a service
/// through one: storage queues, SQS): a refused address, a timeout, a name that did not
/// resolve, and everything else (refused or reset connection, TLS, broken stream) as
/// `SocketError`.
pub fn classify(error: &reqwest::Error) -> AttemptOutcome {
    if refusal_in(error).is_some() {
        AttemptOutcome::AddressNotAllowed
    } else if error.is_timeout() {
        AttemptOutcome::TimedOut
    } else if error.is_dns() {
        AttemptOutcome::ResolutionError
    } else {
        AttemptOutcome::SocketError
    }
}

/// A `Retry-After` in seconds or as an HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let raw = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = raw.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(raw).ok()?;
    (at.with_timezone(&chrono::Utc) - chrono::Utc::now()).to_std().ok()
}

/// Reads at most `limit` bytes of a response body and discards them, so a hostile
/// endpoint cannot make eg hold an endless body.
pub async fn drain(mut response: Response, limit: usize) -> Result<(), TransportError> {
    let mut read = 0usize;
    while let Some(chunk) = response.chunk().await? {
        read += chunk.len();
        if read >= limit {
            break;
        }
    }
    Ok(())
}

/// A body read up to a bound.
pub(crate) struct Bounded {
    pub bytes: Vec<u8>,
    /// False when the body went on past the bound (and was not read further).
    pub complete: bool,
}

pub(crate) async fn read_bounded(mut response: Response, limit: usize) -> Result<Bounded, TransportError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > limit {
            return Ok(Bounded { bytes, complete: false });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Bounded { bytes, complete: true })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;

    #[test]
    fn reads_retry_after_seconds_and_dates() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(RETRY_AFTER, HeaderValue::from_static("120"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(120)));
        let later = (chrono::Utc::now() + chrono::Duration::seconds(60)).to_rfc2822();
        h.insert(RETRY_AFTER, HeaderValue::from_str(&later).unwrap());
        assert!(retry_after(&h).is_some_and(|d| d > Duration::from_secs(50)));
        let http_date = (chrono::Utc::now() + chrono::Duration::seconds(60))
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        h.insert(RETRY_AFTER, HeaderValue::from_str(&http_date).unwrap());
        assert!(
            retry_after(&h).is_some_and(|d| d > Duration::from_secs(50)),
            "{http_date}"
        );
        h.insert(RETRY_AFTER, HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"));
        assert_eq!(retry_after(&h), None, "a date in the past is no lower bound");
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
    }
}
