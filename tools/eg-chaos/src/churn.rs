//! Catalog churn while events flow: at random moments a subscription is written again
//! through the management API with exactly the body it has (same filter, endpoint and
//! schema: what it matches does not change, but the catalog version moves, so every
//! ingress re-matches and every sender refreshes), and a throwaway subscription whose
//! filter matches nothing is created or deleted. The oracle's expectations stay the same;
//! what it checks is that catalog writes under load neither lose nor misroute anything.

use crate::deployment::{ADMIN_TOKEN, Deployment};
use crate::faults::exponential;
use crate::journal::Journal;
use crate::receiver::{Receivers, lock};
use crate::scenario::Scenario;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Churn {
    pub scenario: Arc<Scenario>,
    pub receivers: Arc<Receivers>,
    pub deployment: Arc<Deployment>,
    pub http: reqwest::Client,
    pub journal: Journal,
    /// Management calls made, by kind and answer (`rewrite_200`, `create_201`, …).
    pub calls: Mutex<BTreeMap<String, u64>>,
}

impl Churn {
    pub async fn run(self: Arc<Self>, mean_interval: Duration, stop_at: Instant) {
        if mean_interval.is_zero() {
            return;
        }
        let mut throwaway: Option<(String, String)> = None;
        let mut created = 0u64;
        loop {
            let wait = exponential(mean_interval);
            if Instant::now() + wait >= stop_at {
                break;
            }
            tokio::time::sleep(wait).await;
            let urls = self.deployment.ingress_urls();
            let ingress = &urls[rand::random_range(0..urls.len())];
            if rand::random_range(0..4) == 0 {
                // Create a throwaway subscription, or delete the one there is.
                match throwaway.take() {
                    Some((topic, name)) => {
                        let path = format!("/topics/{topic}/eventSubscriptions/{name}");
                        let status = self.call(ingress, reqwest::Method::DELETE, &path, None).await;
                        self.count("delete_throwaway", &status);
                        if status != "200" && status != "204" {
                            throwaway = Some((topic, name)); // try again next time
                        }
                    }
                    None => {
                        // Custom topics only: a throwaway in the custom-topic form.
                        let custom: Vec<_> = self.scenario.topics.iter().filter(|t| !t.namespace).collect();
                        let topic = custom[rand::random_range(0..custom.len())];
                        let name = format!("churn-{created}");
                        created += 1;
                        let body = json!({"properties": {
                            "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": self.receivers.sink_url()}},
                            "filter": {"includedEventTypes": ["Chaos.Never"]},
                        }});
                        let path = format!("/topics/{}/eventSubscriptions/{name}", topic.name);
                        let status = self.call(ingress, reqwest::Method::PUT, &path, Some(body)).await;
                        self.count("create_throwaway", &status);
                        // Even when the answer was lost it may exist: delete it next time.
                        throwaway = Some((topic.name.clone(), name));
                    }
                }
            } else {
                let index = rand::random_range(0..self.scenario.subscriptions.len());
                let sub = &self.scenario.subscriptions[index];
                let topic = &self.scenario.topics[sub.topic].name;
                let path = format!("/topics/{topic}/eventSubscriptions/{}", sub.name);
                let body = self.scenario.subscription_body(sub, &self.receivers.url(index));
                let status = self.call(ingress, reqwest::Method::PUT, &path, Some(body)).await;
                self.count("rewrite", &status);
            }
        }
    }

    /// The answer's status, or the kind of connection error.
    async fn call(
        &self,
        ingress: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> String {
        let mut request = self
            .http
            .request(method.clone(), format!("{ingress}/admin{path}"))
            .bearer_auth(ADMIN_TOKEN)
            .timeout(Duration::from_secs(10));
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let status = match request.send().await {
            Ok(response) => response.status().as_u16().to_string(),
            Err(e) if e.is_timeout() => "timeout".into(),
            Err(_) => "connection_error".into(),
        };
        self.journal
            .note(&format!("catalog churn: {method} {path} -> {status}"));
        status
    }

    fn count(&self, kind: &str, status: &str) {
        *lock(&self.calls).entry(format!("{kind}_{status}")).or_default() += 1;
    }
}
