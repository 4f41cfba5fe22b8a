//! `POST …/eventSubscriptions/{name}/validate`: runs the validation handshake again for
//! a subscription that is not `Succeeded`, after its receiver was fixed, without
//! writing the subscription again (`operations::revalidate`, shared with the status
//! page). The answer is the subscription as it now stands; its `provisioningMessage`
//! says what the handshake came to.

use super::Reply;
use crate::operations;
use crate::state::App;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use std::sync::Arc;

/// `POST …/eventSubscriptions/{name}/validate`
pub async fn validate(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let sub = operations::revalidate(&app, &topic, &name).await?;
    Ok((StatusCode::OK, Json(sub.to_resource(app.clock.now()))))
}
