//! `POST …/eventSubscriptions/{name}/validate`: runs the validation handshake again for
//! a subscription that is not `Succeeded`, after its receiver was fixed, without
//! writing the subscription again. The answer is the subscription as it now stands;
//! its `provisioningMessage` says what the handshake came to.

use super::{Reply, change_subscription, subscription_name, topic_name};
use crate::errors::Refusal;
use crate::state::App;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use eg_core::Subscription;
use std::sync::Arc;

/// `POST …/eventSubscriptions/{name}/validate`
pub async fn validate(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let (t, n) = (topic_name(&topic)?, subscription_name(&name)?);
    let missing = || Refusal::not_found(format!("subscription {name:?} of topic {topic:?} does not exist"));
    let basis = app.catalog.subscription_basis(&t, &n).await?.ok_or_else(missing)?;
    let tried = basis.previous.as_ref().ok_or_else(missing)?;
    if tried.provisioning.is_active() {
        return Ok((StatusCode::OK, Json(tried.to_resource(app.clock.now()))));
    }
    let provisioning = app.validator.validate(&basis.topic, tried, app.clock.now()).await?;
    // Written over what is stored then, unless a write in between settled it: a new
    // endpoint or schema had a handshake of its own, and a consent (a GET on the
    // validationUrl) is not taken back.
    let (sub, changed) = change_subscription(&app, &topic, &name, |stored| {
        let same_endpoint =
            stored.endpoint_url == tried.endpoint_url && stored.delivery_schema == tried.delivery_schema;
        if stored.provisioning.is_active() || !same_endpoint {
            return Ok(None);
        }
        Ok(Some(Subscription {
            provisioning: provisioning.clone(),
            ..stored.clone()
        }))
    })
    .await?;
    let state = sub.provisioning.state_at(app.clock.now());
    tracing::info!(topic = %sub.topic, subscription = %sub.name, changed, %state, "validation handshake run again");
    Ok((StatusCode::OK, Json(sub.to_resource(app.clock.now()))))
}
