//! The one pooled HTTP client and what an attempt's response (or failure) means.

use eg_core::AttemptOutcome;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use std::error::Error as _;
use std::time::Duration;

pub fn client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    // reqwest is built without a default crypto provider; use ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .redirect(reqwest::redirect::Policy::none())
        .pool_idle_timeout(Duration::from_secs(60))
        .user_agent(concat!("eg-sender/", env!("CARGO_PKG_VERSION")))
        .build()?)
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

/// Classifies a transport failure.
pub fn failure(error: &reqwest::Error) -> AttemptOutcome {
    if error.is_timeout() {
        return AttemptOutcome::TimedOut;
    }
    let mut source = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if text.contains("dns error") || text.contains("failed to lookup address") {
            return AttemptOutcome::ResolutionError;
        }
        source = e.source();
    }
    AttemptOutcome::SocketError
}

/// Reads at most `limit` bytes of a response body and discards them, so a hostile
/// endpoint cannot make the sender hold an endless body.
pub async fn drain(mut response: reqwest::Response, limit: usize) -> Result<(), reqwest::Error> {
    let mut read = 0usize;
    while let Some(chunk) = response.chunk().await? {
        read += chunk.len();
        if read >= limit {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn reads_retry_after_seconds_and_dates() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("120"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(120)));
        let later = (chrono::Utc::now() + chrono::Duration::seconds(60)).to_rfc2822();
        h.insert(RETRY_AFTER, HeaderValue::from_str(&later).unwrap());
        assert!(retry_after(&h).is_some_and(|d| d > Duration::from_secs(50)));
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
    }
}
