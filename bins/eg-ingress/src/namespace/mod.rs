//! Event Grid's namespace data plane: the operations its official SDKs call on a
//! namespace endpoint, served at the root of eg's base URL so that `endpoint = <eg base
//! URL>` works unchanged. Today that is publish (`POST /topics/{topic}:publish`, in
//! [`publish`]).
//!
//! What every operation shares lives here:
//! - the `:<action>` suffix of the last path segment, which axum cannot route (a route
//!   parameter must fill a whole segment), so a handler takes the segment and splits it;
//! - the required `api-version` query parameter;
//! - Event Grid's `x-ms-error-code` header on every refusal, beside its error body.

mod publish;

pub use publish::topic_action;

use crate::errors::{Refusal, code_of};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;

/// Splits a last path segment `<name>:<action>` at its last `:`; `None` when it has no
/// `:`. (axum has already percent-decoded it, so `%3A` is a `:` too.)
pub fn split_action(segment: &str) -> Option<(&str, &str)> {
    segment.rsplit_once(':')
}

/// Refuses a request without an `api-version` of the form `YYYY-MM-DD` or
/// `YYYY-MM-DD-preview` (eg-core's rule, shared with pull delivery). Any such version is
/// taken, so a newer SDK's default works.
pub fn require_api_version(query: &HashMap<String, String>) -> Result<(), Refusal> {
    eg_core::pull::require_api_version(query.get("api-version").map(String::as_str))
        .map_err(|e| Refusal::bad_request(e.to_string()))
}

/// The answer to a data-plane request: a refusal also names its error code in
/// `x-ms-error-code`, as Event Grid's does.
pub fn answer(result: Result<Response, Refusal>) -> Response {
    match result {
        Ok(response) => response,
        Err(refusal) => {
            // Every `Refusal` constructor uses Event Grid's code for its status.
            let code = code_of(refusal.status());
            let mut response = refusal.into_response();
            response
                .headers_mut()
                .insert("x-ms-error-code", HeaderValue::from_static(code));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_is_after_the_last_colon() {
        assert_eq!(split_action("orders:publish"), Some(("orders", "publish")));
        assert_eq!(split_action("a:b:receive"), Some(("a:b", "receive")));
        assert_eq!(split_action("orders:"), Some(("orders", "")));
        assert_eq!(split_action("orders"), None);
    }

    #[test]
    fn api_versions_of_the_documented_form_are_taken() {
        let query = |v: &str| HashMap::from([("api-version".to_owned(), v.to_owned())]);
        for good in [
            "2024-06-01",
            "2023-11-01",
            "2023-06-01-preview",
            "2023-10-01-preview",
            "2031-02-28",
        ] {
            assert!(require_api_version(&query(good)).is_ok(), "{good}");
        }
        for bad in [
            "",
            "2024-6-1",
            "2024-13-01",
            "2024-02-30",
            "latest",
            "2024-06-01-beta",
            "2024-06-01preview",
        ] {
            let refusal = require_api_version(&query(bad)).unwrap_err();
            assert!(
                refusal.message().starts_with("api-version: "),
                "{bad}: {}",
                refusal.message()
            );
            assert!(refusal.message().contains("YYYY-MM-DD"), "{}", refusal.message());
        }
        let missing = require_api_version(&HashMap::new()).unwrap_err();
        assert_eq!(
            missing.message(),
            "api-version: is required, as a query parameter (e.g. ?api-version=2024-06-01)"
        );
    }
}
