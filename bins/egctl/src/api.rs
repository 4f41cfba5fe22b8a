//! The HTTP client for eg-ingress: the management API under `/admin` (bearer token)
//! and the publish API (`aeg-sas-key`). It turns every answer that is not a success
//! into a [`Failure`] carrying the HTTP status and the API's own error message, and
//! every transport problem into one naming the URL, so commands only handle success.

use crate::config::Target;
use crate::failure::Failure;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::time::Duration;
use url::Url;

/// The most of a non-JSON error body quoted in a message (a proxy's HTML page, say).
const QUOTED_BODY_CHARS: usize = 200;

/// How long a connection may take to open; requests as a whole get `--timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A success answer: its status (some commands tell 201 from 200, or 200 from 204)
/// and its JSON body (`Null` when empty).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

pub struct Api {
    http: reqwest::Client,
    /// As the operator wrote it, for messages.
    shown_url: String,
    base: Url,
    target: Target,
    timeout: Duration,
}

impl Api {
    pub fn new(target: Target, timeout: Duration) -> Result<Self, Failure> {
        // reqwest is built without a default TLS crypto provider (as every eg binary):
        // without this, https URLs would fail at the first request.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(timeout)
            .user_agent(concat!("egctl/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Failure::other(format!("cannot set up an HTTP client: {e}")))?;
        let base = Url::parse(&target.url).map_err(|e| Failure::usage(format!("{}: {e}", target.url)))?;
        Ok(Self {
            http,
            shown_url: target.url.clone(),
            base,
            target,
            timeout,
        })
    }

    /// The base URL with `segments` appended, each percent-encoded (event ids may
    /// hold `/`, `?` or `#`).
    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// A management API call: `/admin/<segments…>?<query>` with an optional JSON body.
    pub async fn admin(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Answer, Failure> {
        let mut all = vec!["admin"];
        all.extend_from_slice(segments);
        let mut request = self
            .http
            .request(method, self.url(&all, query))
            .bearer_auth(self.target.token.expose());
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        self.answer(request).await
    }

    pub async fn get(&self, segments: &[&str]) -> Result<Value, Failure> {
        Ok(self.admin(Method::GET, segments, &[], None).await?.body)
    }

    pub async fn get_query(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Value, Failure> {
        Ok(self.admin(Method::GET, segments, query, None).await?.body)
    }

    pub async fn post(&self, segments: &[&str], body: Option<&Value>) -> Result<Value, Failure> {
        Ok(self.admin(Method::POST, segments, &[], body).await?.body)
    }

    /// `POST /topics/{topic}/api/events?api-version=2018-01-01` with the topic's key.
    pub async fn publish(&self, topic: &str, key: &str, content_type: &str, body: Vec<u8>) -> Result<Answer, Failure> {
        let url = self.url(
            &["topics", topic, "api", "events"],
            &[("api-version", "2018-01-01".to_owned())],
        );
        let request = self
            .http
            .post(url)
            .header("aeg-sas-key", key)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body);
        self.answer(request).await
    }

    async fn answer(&self, request: reqwest::RequestBuilder) -> Result<Answer, Failure> {
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| self.unreachable(&e))?;
        if !status.is_success() {
            return Err(Failure::Api {
                status,
                message: error_message(status, &text),
            });
        }
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .map_err(|e| Failure::other(format!("{status} with a body that is not JSON ({e})")))?
        };
        Ok(Answer { status, body })
    }

    fn unreachable(&self, e: &reqwest::Error) -> Failure {
        let reason = if e.is_timeout() {
            format!("no answer within {}", humantime::format_duration(self.timeout))
        } else {
            innermost_cause(e)
        };
        Failure::Unreachable {
            url: self.shown_url.clone(),
            reason,
        }
    }
}

/// The most specific cause in an error chain ("Connection refused (os error 111)"
/// rather than reqwest's "error sending request for url (…)").
fn innermost_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// The message of an error answer: Event Grid's `error.message` when the body is one,
/// with a hint for the statuses an operator can fix from here.
fn error_message(status: StatusCode, body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v["error"]["message"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| {
            let trimmed = body.trim();
            if trimmed.is_empty() {
                "no error message in the answer".to_owned()
            } else {
                trimmed.chars().take(QUOTED_BODY_CHARS).collect()
            }
        });
    if status == StatusCode::UNAUTHORIZED {
        format!(
            "{message} (check the admin token: --token-file, --token, EGCTL_TOKEN_FILE, EGCTL_TOKEN or the config file; \
             eg-ingress must have EG__ADMIN__TOKEN set)"
        )
    } else {
        message
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn error_messages_come_from_event_grid_error_bodies() {
        let body = r#"{"error":{"code":"BadRequest","message":"properties.filter: bad","details":[]}}"#;
        assert_eq!(error_message(StatusCode::BAD_REQUEST, body), "properties.filter: bad");
        assert_eq!(
            error_message(StatusCode::BAD_GATEWAY, "  <html>x</html>\n"),
            "<html>x</html>"
        );
        assert_eq!(
            error_message(StatusCode::NOT_FOUND, ""),
            "no error message in the answer"
        );
        assert!(error_message(StatusCode::UNAUTHORIZED, "").contains("admin token"));
    }

    #[test]
    fn path_segments_are_encoded() {
        let target = Target {
            url: "http://h:1/prefix/".into(),
            token: crate::config::tests_token("t"),
        };
        let api = Api::new(target, Duration::from_secs(1)).unwrap();
        let url = api.url(
            &["admin", "topics", "t", "events", "a/b?c#d", "history"],
            &[("s", "x y".into())],
        );
        assert_eq!(
            url.as_str(),
            "http://h:1/prefix/admin/topics/t/events/a%2Fb%3Fc%23d/history?s=x+y"
        );
    }
}
