//! Reading eg's HTTP answers: status and body, and the checks on Event Grid's error
//! body that many areas make.

use reqwest::StatusCode;
use serde_json::Value;

/// The status and JSON body of a response (`Null` when the body is empty or not JSON).
pub async fn json_reply(response: reqwest::Response) -> (StatusCode, Value) {
    let (status, text) = text_reply(response).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub async fn text_reply(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}

/// Asserts a `400` in Event Grid's error shape whose message names `field` first
/// (`"properties.eventDeliverySchema: …"`); returns the message.
pub fn assert_refused(status: StatusCode, body: &Value, field: &str) -> String {
    assert_eq!(status, StatusCode::BAD_REQUEST, "expected a 400 naming {field}: {body}");
    assert_eq!(body["error"]["code"], "BadRequest", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.starts_with(&format!("{field}:")),
        "the refusal should name {field}: {message:?}"
    );
    message
}
