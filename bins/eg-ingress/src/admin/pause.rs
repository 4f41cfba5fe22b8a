//! Pause and resume a subscription. Paused, its events still match and accumulate (and
//! their time-to-live still counts), but senders set its deliveries aside instead of
//! attempting them. Resuming hands them straight back to the senders.

use super::{Reply, change_subscription};
use crate::errors::Refusal;
use crate::state::App;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use eg_core::Subscription;
use std::sync::Arc;

/// Most set-aside deliveries moved back per script call when resuming.
const UNPARK_BATCH: usize = 1_000;

/// `POST …/eventSubscriptions/{name}/pause`
pub async fn pause(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let sub = set_paused(&app, &topic, &name, true).await?;
    tracing::info!(topic = %sub.topic, subscription = %sub.name, "subscription paused");
    Ok((StatusCode::OK, Json(sub.to_resource(app.clock.now()))))
}

/// `POST …/eventSubscriptions/{name}/resume`
pub async fn resume(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let sub = set_paused(&app, &topic, &name, false).await?;
    let key = format!("{}/{}", sub.topic.key(), sub.name.key());
    let mut moved = 0;
    for partition in app.store.keys().all_partitions() {
        match app.store.unpark_all(&partition, &key, None, UNPARK_BATCH).await {
            Ok(n) => moved += n,
            // The schedulers hand back what is left on their next pass.
            Err(e) => {
                tracing::warn!(error = %e, partition = partition.index, "cannot hand back paused deliveries now; the scheduler will")
            }
        }
    }
    tracing::info!(topic = %sub.topic, subscription = %sub.name, moved, "subscription resumed");
    Ok((StatusCode::OK, Json(sub.to_resource(app.clock.now()))))
}

/// Writes the subscription with `paused` set (over the record it read: a concurrent
/// update keeps its changes, a concurrent delete is not undone); the catalog version
/// rises, so every tier sees it before acting on events published after this returns.
async fn set_paused(app: &App, topic: &str, name: &str, paused: bool) -> Result<Subscription, Refusal> {
    let (sub, _) = change_subscription(app, topic, name, |sub| {
        Ok((sub.paused != paused).then(|| Subscription { paused, ..sub.clone() }))
    })
    .await?;
    Ok(sub)
}
