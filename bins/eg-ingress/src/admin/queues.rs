//! Queue depths per partition and in total: what waits for each tier. Ready and in
//! flight are the senders' work, retry and paused the scheduler's, the dead-letter
//! backlog the dead-letter workers'. Then each queue-mode subscription's queue (pull
//! delivery), summed over the partitions: what waits for its consumers. Then each ordered
//! subscription's deliveries waiting behind their key's head.

use super::Reply;
use crate::operations::subscription_key;
use crate::state::App;
use crate::status::queues_figures;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use eg_core::Subscription;
use eg_store::Depths;
use serde_json::{Value, json};
use std::sync::Arc;

/// `GET /admin/queues`
pub async fn queues(State(app): State<Arc<App>>) -> Reply {
    let mut partitions = Vec::new();
    let mut total = Depths::default();
    for p in app.store.keys().all_partitions() {
        let d = app.store.depths(&p).await?;
        total.ready += d.ready;
        total.in_flight += d.in_flight;
        total.retry += d.retry;
        total.paused += d.paused;
        total.deadletter_backlog += d.deadletter_backlog;
        total.waiting_in_lines += d.waiting_in_lines;
        let mut row = depths(&d);
        row["partition"] = json!(p.index);
        partitions.push(row);
    }
    Ok((
        StatusCode::OK,
        Json(json!({
            "partitions": partitions,
            "total": depths(&total),
            "subscriptionQueues": subscription_queues(&app).await?,
            "orderedSubscriptions": ordered_subscriptions(&app).await?,
        })),
    ))
}

/// Every queue-mode subscription's queue, by topic and subscription name.
async fn subscription_queues(app: &App) -> Result<Vec<Value>, eg_store::StoreError> {
    // A subscription created a moment ago is listed: the catalog is read fresh.
    let catalog = app.cache.refresh().await?;
    let mut subscriptions: Vec<_> = catalog
        .topics
        .values()
        .flat_map(|entry| entry.subscriptions.iter())
        .filter(|s| !s.is_push())
        .collect();
    subscriptions.sort_by_key(|s| (s.topic.key(), s.name.key()));
    let plain: Vec<&Subscription> = subscriptions.iter().map(|s| s.as_ref()).collect();
    let mut figures = queues_figures(app, &plain, app.clock.now()).await?;
    let mut rows = Vec::with_capacity(subscriptions.len());
    for sub in plain {
        let q = figures.remove(&subscription_key(sub)).unwrap_or_default();
        rows.push(json!({
            "topic": sub.topic.as_str(),
            "subscription": sub.name.as_str(),
            "available": q.available,
            "locked": q.locked,
            "delayed": q.delayed,
            "oldestUnacknowledgedSeconds": q.oldest_unacknowledged_seconds,
        }));
    }
    Ok(rows)
}

/// Every ordered subscription with its deliveries waiting in lines (0 when none).
async fn ordered_subscriptions(app: &App) -> Result<Vec<Value>, eg_store::StoreError> {
    let catalog = app.cache.refresh().await?;
    let mut ordered: Vec<&Subscription> = catalog
        .topics
        .values()
        .flat_map(|entry| entry.subscriptions.iter())
        .filter(|s| s.ordering.is_some())
        .map(|s| s.as_ref())
        .collect();
    ordered.sort_by_key(|s| (s.topic.key(), s.name.key()));
    let waiting = app.store.waiting_in_lines().await?;
    Ok(ordered
        .into_iter()
        .map(|sub| {
            json!({
                "topic": sub.topic.as_str(),
                "subscription": sub.name.as_str(),
                "waitingInLines": waiting.get(&subscription_key(sub)).copied().unwrap_or(0),
            })
        })
        .collect())
}

fn depths(d: &Depths) -> Value {
    json!({
        "ready": d.ready,
        "inFlight": d.in_flight,
        "retry": d.retry,
        "paused": d.paused,
        "deadLetterBacklog": d.deadletter_backlog,
        "waitingInLines": d.waiting_in_lines,
    })
}
