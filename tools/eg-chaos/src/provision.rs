//! Provisioning: the scenario's topics and subscriptions created through the management
//! API, each push subscription validated before publishing starts.

use crate::deployment::ADMIN_TOKEN;
use crate::receiver::Receivers;
use crate::scenario::Scenario;
use anyhow::bail;
use serde_json::Value;

/// Creates the topics and subscriptions; waits until every subscription is validated.
/// Returns each topic's `key1`.
pub async fn provision(
    http: &reqwest::Client,
    ingress: &str,
    scenario: &Scenario,
    receivers: &Receivers,
) -> anyhow::Result<Vec<String>> {
    let admin = |method: reqwest::Method, path: String, body: Option<Value>| {
        let mut request = http
            .request(method, format!("{ingress}/admin{path}"))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        async move {
            let response = request.send().await?;
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            anyhow::Ok((status, body))
        }
    };
    let mut keys = Vec::new();
    for topic in &scenario.topics {
        let (status, body) = admin(
            reqwest::Method::PUT,
            format!("/topics/{}", topic.name),
            Some(scenario.topic_body(topic)),
        )
        .await?;
        if !status.is_success() {
            bail!("PUT topic {}: {status} {body}", topic.name);
        }
        let (status, body) = admin(reqwest::Method::POST, format!("/topics/{}/listKeys", topic.name), None).await?;
        let key = body["key1"].as_str().map(str::to_owned);
        match key {
            Some(key) if status.is_success() => keys.push(key),
            _ => bail!("listKeys of {}: {status} {body}", topic.name),
        }
    }
    for (index, sub) in scenario.subscriptions.iter().enumerate() {
        let topic = &scenario.topics[sub.topic].name;
        let path = format!("/topics/{topic}/eventSubscriptions/{}", sub.name);
        let body = scenario.subscription_body(sub, &receivers.url(index));
        let (status, answer) = admin(reqwest::Method::PUT, path.clone(), Some(body)).await?;
        if !status.is_success() {
            bail!("PUT subscription {topic}/{}: {status} {answer}", sub.name);
        }
        let state = answer["properties"]["provisioningState"].as_str().unwrap_or_default();
        if state != "Succeeded" {
            bail!(
                "subscription {topic}/{} is {state:?} after its PUT (validation failed?): {answer}",
                sub.name
            );
        }
    }
    for queue in &scenario.queues {
        let topic = &scenario.topics[queue.topic].name;
        let path = format!("/topics/{topic}/eventSubscriptions/{}", queue.name);
        let (status, answer) = admin(reqwest::Method::PUT, path, Some(scenario.queue_body(queue))).await?;
        if !status.is_success() {
            bail!("PUT queue subscription {topic}/{}: {status} {answer}", queue.name);
        }
    }
    Ok(keys)
}
