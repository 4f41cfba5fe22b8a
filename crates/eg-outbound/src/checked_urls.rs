//! Endpoint URLs already parsed and checked against the address policy, so that the
//! thousands of requests a second to the same few endpoints do not parse their URL
//! (host normalisation, IDNA) again for every one. A client's policy never changes, so
//! a URL that passed [`check_url`](crate::check_url) once passes it again; a refused
//! one is not remembered and takes the full check every time.

use eg_core::memo::BoundedMemo;
use http::Uri;

/// Most URLs remembered; the memory is cleared when it would grow past this.
const MOST_REMEMBERED: usize = 10_000;

/// The URLs that passed the pre-flight check, as parsed.
#[derive(Debug)]
pub(crate) struct CheckedUrls {
    passed: BoundedMemo<String, Uri>,
}

impl Default for CheckedUrls {
    fn default() -> Self {
        Self {
            passed: BoundedMemo::new(MOST_REMEMBERED),
        }
    }
}

impl CheckedUrls {
    /// `raw` as parsed when it passed before (`None`: never seen, or refused).
    pub(crate) fn get(&self, raw: &str) -> Option<Uri> {
        self.passed.get(raw)
    }

    /// Remembers that `raw`, parsed as `url`, passed the check.
    pub(crate) fn passed(&self, raw: &str, uri: &Uri) {
        self.passed.insert(raw.to_owned(), uri.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_what_passed_and_stays_bounded() {
        let checked = CheckedUrls::default();
        assert_eq!(checked.get("https://example.com/hook"), None);
        let uri = Uri::from_static("https://example.com/hook");
        checked.passed("https://EXAMPLE.com/hook", &uri);
        assert_eq!(checked.get("https://EXAMPLE.com/hook"), Some(uri));
        for i in 0..MOST_REMEMBERED + 1 {
            let raw = format!("https://example.com/{i}");
            checked.passed(&raw, &raw.parse().unwrap());
        }
        assert!(checked.passed.len() <= MOST_REMEMBERED);
    }
}
