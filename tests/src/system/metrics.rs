//! The tiers' `/metrics` pages, fetched for a test to read with [`metric`](crate::metric).

use super::System;
use super::tiers::Tier;
use crate::metric;

impl System {
    /// The `/metrics` text of every running tier process.
    pub async fn all_metrics(&self) -> String {
        let mut text = String::new();
        for tier in self.running_tiers() {
            text.push_str(&self.metrics_of(tier).await);
            text.push('\n');
        }
        text
    }

    /// The `/metrics` text of every running sender, one after the other (so
    /// [`metric`] sums over senders).
    pub async fn sender_metrics(&self) -> String {
        let mut text = String::new();
        for tier in self.senders.iter().flatten() {
            text.push_str(&self.metrics_of(tier).await);
            text.push('\n');
        }
        text
    }

    pub async fn ingress_metrics(&self) -> String {
        self.metrics_of(&self.ingress).await
    }

    pub async fn scheduler_metrics(&self) -> String {
        self.metrics_of(&self.scheduler).await
    }

    /// The pages of every dead-letter worker, one after the other (so [`crate::metric`]
    /// sums over the workers).
    pub async fn deadletter_metrics(&self) -> String {
        let mut text = self.metrics_of(&self.deadletter).await;
        for worker in &self.extra_deadletter {
            text.push('\n');
            text.push_str(&self.metrics_of(worker).await);
        }
        text
    }

    async fn metrics_of(&self, tier: &Tier) -> String {
        match self.http.get(format!("{}/metrics", tier.url())).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// What the ingress matched for `topic` (one per event and matching subscription).
    pub async fn matched_events(&self, topic: &str) -> f64 {
        metric(&self.ingress_metrics().await, "MatchedEventCount", &[("topic", topic)])
    }
}
