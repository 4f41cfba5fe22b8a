//! Replays of a topic's archive into one subscription (archive.md, "Replay"): start one,
//! list a subscription's, follow one and cancel it (`operations`, shared with the status
//! page). The API only writes and reads the job in Redis; eg-deadletter's copies do the
//! work.

use super::{Reply, body_object};
use crate::operations;
use crate::state::App;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use eg_core::replay::REPLAY_FIELDS;
use serde_json::{Value, json};
use std::sync::Arc;

/// `POST …/eventSubscriptions/{name}/replay` `{"from", "to"?, "filter"?, "maxEventsPerSecond"?}`:
/// answers `202` with the job.
pub async fn start(
    State(app): State<Arc<App>>,
    Path((topic, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let body = body_object(&app, &headers, body, "a replay request", &REPLAY_FIELDS).await?;
    let job = operations::start_replay(&app, &topic, &name, &body).await?;
    Ok((StatusCode::ACCEPTED, Json(job.to_json(app.clock.now()))))
}

/// `GET …/eventSubscriptions/{name}/replays`: the subscription's jobs, newest first
/// (finished ones are kept a week).
pub async fn list(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let (_, jobs) = operations::replays(&app, &topic, &name).await?;
    let now = app.clock.now();
    let value: Vec<Value> = jobs.iter().map(|j| j.to_json(now)).collect();
    Ok((StatusCode::OK, Json(json!({ "value": value }))))
}

/// `GET …/eventSubscriptions/{name}/replays/{id}`: one job, with its progress.
pub async fn get(State(app): State<Arc<App>>, Path((topic, name, id)): Path<(String, String, String)>) -> Reply {
    let job = operations::replay_of(&app, &topic, &name, &id).await?;
    Ok((StatusCode::OK, Json(job.to_json(app.clock.now()))))
}

/// `POST …/eventSubscriptions/{name}/replays/{id}/cancel`: stops a running job (what it
/// enqueued stays enqueued); a job already ended is answered as it is.
pub async fn cancel(State(app): State<Arc<App>>, Path((topic, name, id)): Path<(String, String, String)>) -> Reply {
    let job = operations::cancel_replay(&app, &topic, &name, &id).await?;
    Ok((StatusCode::OK, Json(job.to_json(app.clock.now()))))
}
