//! What tests publish and subscribe: events, subscription bodies and dead-letter
//! destinations in the shapes the APIs take, with the usual fields filled in.

use std::ops::Range;

use serde_json::{Value, json};

/// An Event Grid schema event as a publisher sends it.
pub fn event(id: &str, event_type: &str, subject: &str, data: Value) -> Value {
    json!({
        "id": id,
        "eventType": event_type,
        "subject": subject,
        "eventTime": "2026-01-02T03:04:05.678Z",
        "data": data,
    })
}

/// Events `<prefix>-<n>` for each `n` in `numbers`, of type `Test.Happened`, with
/// subject `/things/<prefix>/<n>` and data `{"n": n}`: a load whose ids a test can name.
pub fn numbered_events(prefix: &str, numbers: Range<usize>) -> Vec<Value> {
    numbers
        .map(|n| {
            event(
                &format!("{prefix}-{n}"),
                "Test.Happened",
                &format!("/things/{prefix}/{n}"),
                json!({ "n": n }),
            )
        })
        .collect()
}

/// A WebHook subscription body for `endpoint_url`, with `extra` merged into its
/// `properties` (e.g. `filter`, `retryPolicy`, `deadLetterDestination`).
pub fn subscription(endpoint_url: &str, extra: Value) -> Value {
    let mut properties = json!({
        "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": endpoint_url}},
    });
    if let (Some(target), Value::Object(extra)) = (properties.as_object_mut(), extra) {
        target.extend(extra);
    }
    json!({ "properties": properties })
}

/// `deadLetterDestination` for a container of the dead-letter directory.
pub fn dead_letter_to(container: &str) -> Value {
    json!({"endpointType": "LocalDirectory", "properties": {"containerName": container}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_subscription_properties() {
        let body = subscription("http://h/x", json!({"retryPolicy": {"maxDeliveryAttempts": 3}}));
        assert_eq!(
            body["properties"]["destination"]["properties"]["endpointUrl"],
            "http://h/x"
        );
        assert_eq!(body["properties"]["retryPolicy"]["maxDeliveryAttempts"], 3);
    }
}
