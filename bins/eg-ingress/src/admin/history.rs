//! `GET /admin/topics/{topic}/events/{eventId}/history[?subscription=…]`: what happened
//! to an event's deliveries, step by step (kept for `EG__HISTORY__RETENTION`).

use super::Reply;
use crate::changes::topic_name;
use crate::errors::Refusal;
use crate::state::App;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use eg_core::SubscriptionName;
use eg_core::history::HistoryEntry;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

pub async fn history(
    State(app): State<Arc<App>>,
    Path((topic, event_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Reply {
    let topic = topic_name(&topic)?;
    let subscription = match query.get("subscription") {
        Some(raw) => Some(
            SubscriptionName::parse(raw)
                .map_err(|e| Refusal::bad_request(format!("subscription: {}", e.problem)))?
                .key(),
        ),
        None => None,
    };
    let entries: Vec<HistoryEntry> = app
        .store
        .event_history(&topic.key(), &event_id)
        .await?
        .into_iter()
        .filter(|e| subscription.as_ref().is_none_or(|s| &e.subscription == s))
        .collect();
    if entries.is_empty() {
        return Err(Refusal::not_found(format!(
            "no delivery history for event {event_id:?} of topic {:?}{} (none yet, or older than the retention)",
            topic.as_str(),
            subscription
                .map(|s| format!(" and subscription {s:?}"))
                .unwrap_or_default()
        )));
    }
    let value: Vec<Value> = entries.iter().map(HistoryEntry::to_resource).collect();
    Ok((
        StatusCode::OK,
        Json(json!({ "topic": topic.as_str(), "eventId": event_id, "value": value })),
    ))
}
