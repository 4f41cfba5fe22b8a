//! What a subscription's page shows: its settings as the management API writes them,
//! its state (paused, provisioning, endpoint probation, dead letters), what it did in the
//! last minute and hour, and its recent deliveries from delivery history. Also an
//! event's history, one click away from a recent delivery.

use super::hour::LastHour;
use super::model::{SubscriptionStatus, queue_figures, subscription_status};
use crate::errors::Refusal;
use crate::state::App;
use eg_core::UnixMillis;
use eg_core::history::HistoryEntry;
use eg_core::replay::ReplayView;
use eg_runtime::stats::{Kind, Stats, Window, subscription_label};
use eg_store::recent::RecentDelivery;
use serde_json::Value;

/// Most recent deliveries shown.
const RECENT: usize = 25;

pub struct SubscriptionPage {
    pub generated_at_ms: UnixMillis,
    pub topic: String,
    /// The subscription as `GET …/eventSubscriptions/{name}` answers it (`properties`).
    pub properties: Value,
    pub status: SubscriptionStatus,
    pub last_minute: Activity,
    pub last_hour: Activity,
    pub recent: Vec<RecentDelivery>,
    /// Whether its topic is archived, so a replay can be started.
    pub archived: bool,
    /// Its replays, newest first.
    pub replays: Vec<ReplayView>,
    /// Parts that could not be read this time.
    pub problems: Vec<String>,
}

/// What a subscription's deliveries came to over a span of time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Activity {
    pub delivered: u64,
    pub failed: u64,
    pub dead_lettered: u64,
    pub dropped: u64,
}

impl Activity {
    fn of(window: &Window, label: &str) -> Self {
        Self {
            delivered: window.count(Kind::Delivered, label),
            failed: window.count(Kind::Failed, label),
            dead_lettered: window.count(Kind::DeadLettered, label),
            dropped: window.count(Kind::Dropped, label),
        }
    }
}

/// Reads a subscription's page; `404` when it does not exist.
pub async fn gather(
    app: &App,
    stats: &Stats,
    last_hour: &LastHour,
    topic: &str,
    name: &str,
) -> Result<SubscriptionPage, Refusal> {
    let (topic_resource, sub) = crate::operations::topic_and_subscription(app, topic, name).await?;
    let now = app.clock.now();
    let mut problems = Vec::new();
    let mut problem = |what: &str, e: &dyn std::fmt::Display| problems.push(format!("{what} unavailable: {e}"));
    let window = stats.window(now).await.unwrap_or_else(|e| {
        problem("rates", &e);
        Window::default()
    });
    let hour = last_hour.window(stats, now, &window).await.unwrap_or_else(|e| {
        problem("counts of the last hour", &e);
        Window::default()
    });
    let record = match sub.endpoint_id() {
        Some(endpoint) => app.store.probation_record(&endpoint).await.unwrap_or_else(|e| {
            problem("endpoint probation record", &e);
            None
        }),
        None => None,
    };
    let (topic_key, subscription_key) = (sub.topic.key(), sub.name.key());
    let counts = app
        .store
        .dead_letter_counts(&topic_key, &subscription_key)
        .await
        .unwrap_or_else(|e| {
            problem("dead-letter counts", &e);
            Default::default()
        });
    let recent = app
        .store
        .recent_deliveries(&topic_key, &subscription_key, RECENT)
        .await
        .unwrap_or_else(|e| {
            problem("recent deliveries", &e);
            Vec::new()
        });
    let dead_letter_problem = app
        .store
        .dead_letter_problem(&topic_key, &subscription_key)
        .await
        .unwrap_or_else(|e| {
            problem("dead-letter destination's state", &e);
            None
        });
    let queue = queue_figures(app, &sub, now).await.unwrap_or_else(|e| {
        problem("queue depths", &e);
        None
    });
    let waiting = match sub.ordering {
        Some(_) => app.store.waiting_in_lines().await.unwrap_or_else(|e| {
            problem("deliveries waiting in lines", &e);
            Default::default()
        }),
        None => Default::default(),
    };
    let (archived, replays) = match crate::operations::replays_for(app, &topic_resource, &sub).await {
        Ok(found) => found,
        Err(_) => {
            problems.push("replays unavailable: Redis did not answer".to_owned());
            (false, Vec::new())
        }
    };
    let label = subscription_label(&topic_key, &subscription_key);
    let mut status = subscription_status(
        &sub,
        record.as_ref(),
        counts,
        dead_letter_problem.as_ref(),
        queue,
        &window,
        &hour,
        now,
    );
    if status.waiting_in_lines.is_some() {
        status.waiting_in_lines = Some(
            waiting
                .get(&format!("{topic_key}/{subscription_key}"))
                .copied()
                .unwrap_or(0),
        );
    }
    Ok(SubscriptionPage {
        generated_at_ms: now,
        topic: sub.topic.as_str().to_owned(),
        properties: sub.to_resource(now)["properties"].clone(),
        status,
        last_minute: Activity::of(&window, &label),
        last_hour: Activity::of(&hour, &label),
        recent,
        archived,
        replays,
        problems,
    })
}

/// An event's delivery history, as `GET /admin/topics/{topic}/events/{id}/history`
/// answers it (`value`), optionally of one subscription.
pub struct EventPage {
    pub generated_at_ms: UnixMillis,
    pub topic: String,
    pub event_id: String,
    pub subscription: Option<String>,
    pub steps: Vec<Value>,
}

pub async fn event(app: &App, topic: &str, event_id: &str, subscription: Option<&str>) -> Result<EventPage, Refusal> {
    let name = crate::changes::topic_name(topic)?;
    let subscription_key = subscription.map(str::to_ascii_lowercase);
    let steps = app
        .store
        .event_history(&name.key(), event_id)
        .await?
        .iter()
        .filter(|e| subscription_key.as_ref().is_none_or(|s| &e.subscription == s))
        .map(HistoryEntry::to_resource)
        .collect();
    Ok(EventPage {
        generated_at_ms: app.clock.now(),
        topic: name.as_str().to_owned(),
        event_id: event_id.to_owned(),
        subscription: subscription.map(str::to_owned),
        steps,
    })
}
