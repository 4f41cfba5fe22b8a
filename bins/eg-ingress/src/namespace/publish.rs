//! `POST /topics/{topic}:publish?api-version=…`: the namespace publish, as Event Grid's
//! namespace SDKs send it (`EventGridPublisherClient(…, namespace_topic=…)` in Python,
//! `aznamespaces.SenderClient` in Go). The events go through the same accept-and-store
//! path as `/api/events` (`crate::publish`, [`Route::Namespace`]); what differs is the
//! answer: `200` with the JSON body `{}`, which the Python SDK parses (an empty body
//! makes its `send` fail after the events were stored).

use super::{answer, require_api_version, split_action};
use crate::errors::Refusal;
use crate::publish::{Route, accept_counted};
use crate::state::App;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::Arc;

/// `POST /topics/{segment}`, where the segment is `<topic>:<action>`; the one action on
/// a topic is `publish`.
pub async fn topic_action(
    State(app): State<Arc<App>>,
    Path(segment): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let topic = match publish_target(&segment, &query) {
        Ok(topic) => topic,
        Err(refusal) => {
            app.discard_body(&headers, body);
            return answer(Err(refusal));
        }
    };
    let accepted = accept_counted(&app, Route::Namespace, topic, &query, &headers, body).await;
    answer(accepted.map(|_| published()))
}

/// The topic a request publishes to, once its path names the `publish` action and it
/// carries an `api-version`.
fn publish_target<'a>(segment: &'a str, query: &HashMap<String, String>) -> Result<&'a str, Refusal> {
    let topic = match split_action(segment) {
        Some((topic, "publish")) => topic,
        Some((topic, action)) => {
            return Err(Refusal::not_found(format!(
                "a topic has no action {action:?}; publish with POST /topics/{topic}:publish"
            )));
        }
        None => {
            return Err(Refusal::not_found(format!(
                "nothing is served at POST /topics/{segment}; publish with POST /topics/{segment}:publish \
                 or POST /topics/{segment}/api/events"
            )));
        }
    };
    require_api_version(query)?;
    Ok(topic)
}

/// Event Grid's `PublishResult`: an empty JSON object.
fn published() -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], "{}").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versioned() -> HashMap<String, String> {
        HashMap::from([("api-version".to_owned(), "2024-06-01".to_owned())])
    }

    #[test]
    fn only_the_publish_action_reaches_a_topic() {
        assert_eq!(publish_target("orders:publish", &versioned()).ok(), Some("orders"));
        let unknown = publish_target("orders:receive", &versioned()).unwrap_err();
        assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
        assert_eq!(
            unknown.message(),
            "a topic has no action \"receive\"; publish with POST /topics/orders:publish"
        );
        let bare = publish_target("orders", &versioned()).unwrap_err();
        assert_eq!(bare.status(), StatusCode::NOT_FOUND);
        assert!(bare.message().starts_with("nothing is served at POST /topics/orders;"));
        // The action is checked first: an unknown one is 404 with or without a version.
        assert_eq!(
            publish_target("orders:nope", &HashMap::new()).unwrap_err().status(),
            StatusCode::NOT_FOUND
        );
        let unversioned = publish_target("orders:publish", &HashMap::new()).unwrap_err();
        assert_eq!(unversioned.status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn refusals_carry_the_error_code_header() {
        let response = answer(Err(Refusal::not_found("gone")));
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()["x-ms-error-code"], "NotFound");
        let response = answer(Err(Refusal::of_status(StatusCode::UNSUPPORTED_MEDIA_TYPE, "no")));
        assert_eq!(response.headers()["x-ms-error-code"], "UnsupportedMediaType");
        let ok = answer(Ok(published()));
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(ok.headers()[header::CONTENT_TYPE], "application/json");
        assert!(ok.headers().get("x-ms-error-code").is_none());
    }
}
