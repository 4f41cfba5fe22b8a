//! A namespace client as Event Grid's consumers speak to eg-ingress: publish CloudEvents
//! with `POST /topics/{t}:publish`, and pull delivery's `:receive` and `:acknowledge` on
//! one queue-mode subscription, all authenticated with `Authorization: SharedAccessKey`.
//! Only what the pull benchmark needs: a lock token and the event's id per received item.

use anyhow::{Context, bail};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

const API: &str = "api-version=2024-06-01";
const BATCH: &str = "application/cloudevents-batch+json; charset=utf-8";

/// One received event: its lock and which event it is.
#[derive(Debug, Clone)]
pub struct Received {
    pub lock_token: String,
    pub event_id: String,
}

#[derive(Clone)]
pub struct PullApi {
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/topics/{topic}`
    topic_url: String,
    subscription: String,
    authorization: String,
}

impl PullApi {
    pub fn new(http: reqwest::Client, ingress_url: &str, topic: &str, subscription: &str, key: &str) -> Self {
        Self {
            http,
            topic_url: format!("{ingress_url}/topics/{topic}"),
            subscription: subscription.to_owned(),
            authorization: format!("SharedAccessKey {key}"),
        }
    }

    /// Publishes a CloudEvents batch (a JSON array); fails unless eg answers `200`.
    pub async fn publish(&self, batch: Vec<u8>) -> anyhow::Result<()> {
        let request = self
            .http
            .post(format!("{}:publish?{API}", self.topic_url))
            .header("content-type", BATCH)
            .body(batch);
        self.send(request, ":publish").await.map(drop)
    }

    /// Receives up to `max_events`, waiting up to `max_wait_seconds` for the first.
    pub async fn receive(&self, max_events: u32, max_wait_seconds: u64) -> anyhow::Result<Vec<Received>> {
        let url = format!(
            "{}/eventsubscriptions/{}:receive?{API}&maxEvents={max_events}&maxWaitTime={max_wait_seconds}",
            self.topic_url, self.subscription
        );
        // The long poll may hold the request for the whole wait: give it that and more.
        let request = self.http.post(url).timeout(Duration::from_secs(max_wait_seconds + 30));
        let answer = self.send(request, ":receive").await?;
        let items = answer["value"]
            .as_array()
            .with_context(|| format!(":receive answered without a value array: {answer}"))?;
        items
            .iter()
            .map(|item| {
                let token = item["brokerProperties"]["lockToken"].as_str();
                let id = item["event"]["id"].as_str();
                match (token, id) {
                    (Some(t), Some(i)) => Ok(Received {
                        lock_token: t.to_owned(),
                        event_id: i.to_owned(),
                    }),
                    _ => bail!(":receive item without brokerProperties.lockToken or event.id: {item}"),
                }
            })
            .collect()
    }

    /// Acknowledges `received`; the ids of the events whose tokens succeeded, and how
    /// many tokens failed.
    pub async fn acknowledge(&self, received: &[Received]) -> anyhow::Result<(Vec<String>, usize)> {
        let tokens: Vec<&str> = received.iter().map(|r| r.lock_token.as_str()).collect();
        let request = self
            .http
            .post(format!(
                "{}/eventsubscriptions/{}:acknowledge?{API}",
                self.topic_url, self.subscription
            ))
            .header("content-type", "application/json")
            .body(json!({ "lockTokens": tokens }).to_string());
        let answer = self.send(request, ":acknowledge").await?;
        let ids: HashMap<&str, &str> = received
            .iter()
            .map(|r| (r.lock_token.as_str(), r.event_id.as_str()))
            .collect();
        let succeeded = answer["succeededLockTokens"]
            .as_array()
            .with_context(|| format!(":acknowledge answered without succeededLockTokens: {answer}"))?
            .iter()
            .filter_map(|t| t.as_str().and_then(|t| ids.get(t)).map(|id| (*id).to_owned()))
            .collect();
        let failed = answer["failedLockTokens"].as_array().map_or(0, Vec::len);
        Ok((succeeded, failed))
    }

    /// Sends with the key; the JSON answer, or an error naming the operation unless `200`.
    async fn send(&self, request: reqwest::RequestBuilder, what: &str) -> anyhow::Result<Value> {
        let response = request
            .header("authorization", &self.authorization)
            .send()
            .await
            .with_context(|| format!("{what} to eg-ingress"))?;
        let status = response.status();
        let text = response.text().await.with_context(|| format!("{what}: the answer"))?;
        if status != reqwest::StatusCode::OK {
            bail!("{what} answered {status}: {text}");
        }
        if text.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).with_context(|| format!("{what} answered {status} with no JSON: {text}"))
    }
}

/// A CloudEvent of about `bytes` bytes of JSON with id `bench-<n>`.
pub fn cloud_event(n: u64, bytes: usize) -> String {
    let one = |pad: &str| {
        format!(
            r#"{{"specversion":"1.0","id":"bench-{n:010}","source":"/eg-bench","type":"Bench.Happened","time":"2026-01-01T00:00:00Z","datacontenttype":"application/json","data":{{"pad":"{pad}"}}}}"#
        )
    };
    one(&"x".repeat(bytes.saturating_sub(one("").len())))
}

/// A batch (JSON array) of `count` events from id `first`.
pub fn cloud_event_batch(first: u64, count: u64, bytes: usize) -> Vec<u8> {
    let events: Vec<String> = (first..first + count).map(|n| cloud_event(n, bytes)).collect();
    format!("[{}]", events.join(",")).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_the_size_asked_and_valid_json() -> anyhow::Result<()> {
        assert_eq!(cloud_event(7, 1024).len(), 1024);
        let batch: Value = serde_json::from_slice(&cloud_event_batch(5, 3, 1024))?;
        let ids: Vec<&str> = batch
            .as_array()
            .context("an array")?
            .iter()
            .filter_map(|e| e["id"].as_str())
            .collect();
        assert_eq!(ids, ["bench-0000000005", "bench-0000000006", "bench-0000000007"]);
        Ok(())
    }
}
