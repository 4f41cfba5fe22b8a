//! Queue depths per partition and in total: what waits for each tier. Ready and in
//! flight are the senders' work, retry and paused the scheduler's, the dead-letter
//! backlog the dead-letter workers'.

use super::Reply;
use crate::state::App;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
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
        let mut row = depths(&d);
        row["partition"] = json!(p.index);
        partitions.push(row);
    }
    Ok((
        StatusCode::OK,
        Json(json!({ "partitions": partitions, "total": depths(&total) })),
    ))
}

fn depths(d: &Depths) -> Value {
    json!({
        "ready": d.ready,
        "inFlight": d.in_flight,
        "retry": d.retry,
        "paused": d.paused,
        "deadLetterBacklog": d.deadletter_backlog,
    })
}
