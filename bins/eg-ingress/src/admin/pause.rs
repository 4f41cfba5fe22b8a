//! Pause and resume a subscription. Paused, its events still match and accumulate (and
//! their time-to-live still counts), but senders set its deliveries aside instead of
//! attempting them. Resuming hands them straight back to the senders.

use super::Reply;
use crate::operations;
use crate::state::App;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use std::sync::Arc;

/// `POST …/eventSubscriptions/{name}/pause`
pub async fn pause(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let sub = operations::pause(&app, &topic, &name).await?;
    Ok((StatusCode::OK, Json(sub.to_resource(app.clock.now()))))
}

/// `POST …/eventSubscriptions/{name}/resume`
pub async fn resume(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let (sub, _) = operations::resume(&app, &topic, &name).await?;
    Ok((StatusCode::OK, Json(sub.to_resource(app.clock.now()))))
}
