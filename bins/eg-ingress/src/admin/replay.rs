//! Replays of a topic's archive into one subscription (archive.md, "Replay"): start one,
//! list a subscription's, follow one and cancel it. The API only writes and reads the
//! job in Redis; eg-deadletter's copies do the work.

use super::{Reply, body_object};
use crate::changes::{subscription_name, topic_name};
use crate::errors::Refusal;
use crate::state::App;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use eg_core::replay::{REPLAY_FIELDS, ReplaySpec, ReplayState};
use eg_core::{Subscription, Topic};
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
    let (topic, sub) = find(&app, &topic, &name).await?;
    replayable(&topic, &sub)?;
    let now = app.clock.now();
    let spec = ReplaySpec::from_request(&body, &topic.name.key(), &sub.name.key(), now)
        .map_err(|e| Refusal::bad_request(e.to_string()))?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let keys = app.store.keys();
    let partition = keys.partition(rand::random_range(0..keys.partitions()));
    app.store.create_replay(&id, &spec, &partition).await?;
    tracing::info!(job = %id, topic = %spec.topic, subscription = %spec.subscription, from = %spec.from.to_rfc3339(), to = %spec.to.to_rfc3339(), "replay started");
    Ok((StatusCode::ACCEPTED, Json(show(&app, &id).await?)))
}

/// `GET …/eventSubscriptions/{name}/replays`: the subscription's jobs, newest first
/// (finished ones are kept a week).
pub async fn list(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let (topic, sub) = find(&app, &topic, &name).await?;
    let key = format!("{}/{}", topic.name.key(), sub.name.key());
    let now = app.clock.now();
    let jobs = app.store.replay_jobs(Some(&key)).await?;
    let value: Vec<Value> = jobs.iter().map(|j| j.view.to_json(now)).collect();
    Ok((StatusCode::OK, Json(json!({ "value": value }))))
}

/// `GET …/eventSubscriptions/{name}/replays/{id}`: one job, with its progress.
pub async fn get(State(app): State<Arc<App>>, Path((topic, name, id)): Path<(String, String, String)>) -> Reply {
    let (topic, sub) = find(&app, &topic, &name).await?;
    let job = job_of(&app, &topic, &sub, &id).await?;
    Ok((StatusCode::OK, Json(job)))
}

/// `POST …/eventSubscriptions/{name}/replays/{id}/cancel`: stops a running job (what it
/// enqueued stays enqueued); a job already ended is answered as it is.
pub async fn cancel(State(app): State<Arc<App>>, Path((topic, name, id)): Path<(String, String, String)>) -> Reply {
    let (topic, sub) = find(&app, &topic, &name).await?;
    job_of(&app, &topic, &sub, &id).await?;
    let state = app
        .store
        .finish_replay(&id, ReplayState::Cancelled, None, app.clock.now())
        .await?;
    tracing::info!(job = %id, state = ?state, "replay cancel asked");
    Ok((StatusCode::OK, Json(show(&app, &id).await?)))
}

async fn find(app: &App, topic: &str, name: &str) -> Result<(Topic, Subscription), Refusal> {
    let (t, n) = (topic_name(topic)?, subscription_name(name)?);
    let missing = || Refusal::not_found(format!("subscription {name:?} of topic {topic:?} does not exist"));
    let basis = app.catalog.subscription_basis(&t, &n).await?.ok_or_else(missing)?;
    let sub = basis.previous.ok_or_else(missing)?;
    Ok((basis.topic, sub))
}

/// A replay reads the topic's archive, and cannot keep an ordered subscription's order
/// (its events would enter no ordering line).
fn replayable(topic: &Topic, sub: &Subscription) -> Result<(), Refusal> {
    if topic.archive.is_none() {
        return Err(Refusal::bad_request(format!(
            "topic {:?} is not archived, so there is nothing to replay: set properties.archive on the topic \
             (docs/archive.md); a replay covers what was accepted after that",
            topic.name.as_str()
        )));
    }
    if sub.ordering.is_some() && sub.is_push() {
        return Err(Refusal::bad_request(format!(
            "subscription {:?} delivers in order per key (properties.deliveryOrder); a replay cannot keep that \
             order, so it is refused: replay into an unordered subscription of the same endpoint",
            sub.name.as_str()
        )));
    }
    Ok(())
}

async fn job_of(app: &App, topic: &Topic, sub: &Subscription, id: &str) -> Result<Value, Refusal> {
    let missing = || {
        Refusal::not_found(format!(
            "replay {id:?} of subscription {:?} does not exist (finished replays are kept a week)",
            sub.name.as_str()
        ))
    };
    let job = app.store.replay_job(id).await?.ok_or_else(missing)?;
    if job.view.spec.topic != topic.name.key() || job.view.spec.subscription != sub.name.key() {
        return Err(missing());
    }
    Ok(job.view.to_json(app.clock.now()))
}

async fn show(app: &App, id: &str) -> Result<Value, Refusal> {
    let job = app
        .store
        .replay_job(id)
        .await?
        .ok_or_else(|| Refusal::not_found(format!("replay {id:?} does not exist")))?;
    Ok(job.view.to_json(app.clock.now()))
}
