//! The management and publish APIs of a [`System`]'s ingress, as a test calls them: with
//! the admin token, and with each topic's key remembered from its creation.

use axum::http::StatusCode;
use reqwest::Method;
use serde_json::{Value, json};

use super::System;
use crate::{assert_refused, json_reply, text_reply};

/// The management API's bearer token in every system.
pub const ADMIN_TOKEN: &str = "system-test-admin-token";

/// A subscription PUT that must be refused with a 400 naming `field`; returns the message.
pub async fn assert_subscription_refused(
    system: &System,
    topic: &str,
    name: &str,
    body: &Value,
    field: &str,
) -> String {
    let (status, answer) = system.put_subscription(topic, name, body).await;
    assert_refused(status, &answer, field)
}

impl System {
    /// A management API call with the right bearer token.
    pub async fn admin(&self, method: Method, path: &str, body: Option<&Value>) -> reqwest::Response {
        let mut request = self
            .http
            .request(method, format!("{}/admin{path}", self.ingress_url()))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        request.send().await.expect("management API request")
    }

    /// `GET /admin{path}`; the status and the answer, whatever they are.
    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        json_reply(self.admin(Method::GET, path, None).await).await
    }

    /// `POST /admin{path}` with `body`, if any; the status and the answer, whatever they are.
    pub async fn post(&self, path: &str, body: Option<&Value>) -> (StatusCode, Value) {
        json_reply(self.admin(Method::POST, path, body).await).await
    }

    /// Creates an Event Grid schema topic and returns its `key1` (also remembered for
    /// [`System::publish`]).
    pub async fn create_topic(&self, topic: &str) -> String {
        let body = json!({"properties": {"inputSchema": "EventGridSchema"}});
        let (status, answer) = self.put_topic(topic, &body).await;
        assert!(status.is_success(), "PUT topic {topic}: {status} {answer}");
        self.remember_key(topic).await
    }

    /// Creates a new topic from its `properties` (schema, mapping, profile) and returns
    /// its `key1` (also remembered for [`System::publish`]).
    pub async fn create_topic_with(&self, topic: &str, properties: Value) -> String {
        let (status, answer) = self.put_topic(topic, &json!({ "properties": properties })).await;
        assert_eq!(status, StatusCode::CREATED, "PUT topic {topic}: {answer}");
        self.remember_key(topic).await
    }

    /// `PUT /admin/topics/{topic}` with `body`; the status and the answer, whatever they are.
    pub async fn put_topic(&self, topic: &str, body: &Value) -> (StatusCode, Value) {
        json_reply(self.admin(Method::PUT, &format!("/topics/{topic}"), Some(body)).await).await
    }

    /// Fetches the topic's `key1` and remembers it for [`System::publish`].
    async fn remember_key(&self, topic: &str) -> String {
        let (status, keys) = self.post(&format!("/topics/{topic}/listKeys"), None).await;
        assert_eq!(status, StatusCode::OK, "listKeys of {topic}: {keys}");
        let key1 = keys["key1"].as_str().expect("key1 in listKeys").to_owned();
        self.keys
            .lock()
            .expect("keys lock")
            .insert(topic.to_owned(), key1.clone());
        key1
    }

    /// Creates (or replaces) a subscription; returns the resource the API answered with.
    pub async fn create_subscription(&self, topic: &str, name: &str, body: Value) -> Value {
        let (status, answer) = self.put_subscription(topic, name, &body).await;
        assert!(
            status.is_success(),
            "PUT subscription {topic}/{name}: {status} {answer}"
        );
        answer
    }

    /// PUTs a subscription; the status and the answer, whatever they are.
    pub async fn put_subscription(&self, topic: &str, name: &str, body: &Value) -> (StatusCode, Value) {
        let path = format!("/topics/{topic}/eventSubscriptions/{name}");
        json_reply(self.admin(Method::PUT, &path, Some(body)).await).await
    }

    /// Redrives every dead letter of a subscription; insists on `200` and returns the
    /// answer (`{"redriven": n, "remaining": m}`).
    pub async fn redrive_all(&self, topic: &str, subscription: &str) -> Value {
        let path = format!("/topics/{topic}/eventSubscriptions/{subscription}/deadLetters/redrive");
        let (status, answer) = self.post(&path, Some(&json!({"all": true}))).await;
        assert_eq!(status, StatusCode::OK, "redrive {topic}/{subscription}: {answer}");
        answer
    }

    /// Publishes `events` (a JSON array) with the topic's `key1`.
    pub async fn publish(&self, topic: &str, events: &Value) -> reqwest::Response {
        let key = self.keys.lock().expect("keys lock").get(topic).cloned();
        let key = key.unwrap_or_else(|| panic!("create_topic({topic:?}) first"));
        self.publish_raw(topic, Some(&key), events.to_string().into_bytes())
            .await
    }

    /// Publishes and insists on `200`.
    pub async fn publish_ok(&self, topic: &str, events: &Value) {
        let (status, body) = text_reply(self.publish(topic, events).await).await;
        assert_eq!(status, StatusCode::OK, "publish to {topic}: {body}");
    }

    /// What a publisher outside the test's own task needs to publish to `topic`: the
    /// HTTP client, the publish URL and the topic's `key1`.
    pub fn publisher(&self, topic: &str) -> (reqwest::Client, String, String) {
        let key = self.keys.lock().expect("keys lock").get(topic).cloned();
        let key = key.unwrap_or_else(|| panic!("create_topic({topic:?}) first"));
        let url = format!(
            "{}/topics/{topic}/api/events?api-version=2018-01-01",
            self.ingress_url()
        );
        (self.http.clone(), url, key)
    }

    /// A publish request with any key (or none) and any body.
    pub async fn publish_raw(&self, topic: &str, key: Option<&str>, body: Vec<u8>) -> reqwest::Response {
        let mut request = self
            .http
            .post(format!(
                "{}/topics/{topic}/api/events?api-version=2018-01-01",
                self.ingress_url()
            ))
            .header("content-type", "application/json")
            .body(body);
        if let Some(key) = key {
            request = request.header("aeg-sas-key", key);
        }
        request.send().await.expect("publish request")
    }
}
