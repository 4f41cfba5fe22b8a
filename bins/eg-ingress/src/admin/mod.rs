//! The management API under `/admin` (bearer token), in Event Grid's resource layout:
//! topics, their keys, and their event subscriptions. Writes go to the Redis catalog
//! and apply to every publish that starts after the call returns.

use crate::capabilities;
use crate::changes::{CHANGE_TRIES, change_subscription, conflict, find_subscription, subscription_name, topic_name};
use crate::errors::Refusal;
use crate::state::App;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use eg_core::api_error::InvalidField;
use eg_core::capability::Capability;
use eg_core::destination::Target;
use eg_core::json::json_type;
use eg_core::probation::{self, ProbationState};
use eg_core::storage_event;
use eg_core::validation::Provisioning;
use eg_core::{Subscription, Topic};
use eg_store::catalog::{KeyName, PutSubscription, PutTopic};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use subtle::ConstantTimeEq;

mod deadletters;
mod history;
mod pause;
mod queues;
mod replay;
mod validate;

type Reply = Result<(StatusCode, Json<Value>), Refusal>;

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/topics", get(list_topics))
        .route("/topics/{topic}", get(get_topic).put(put_topic).delete(delete_topic))
        .route("/topics/{topic}/listKeys", post(list_keys))
        .route("/topics/{topic}/regenerateKey", post(regenerate_key))
        .route("/topics/{topic}/eventSubscriptions", get(list_subscriptions))
        .route(
            "/topics/{topic}/eventSubscriptions/{name}",
            get(get_subscription).put(put_subscription).delete(delete_subscription),
        )
        .route(
            "/topics/{topic}/eventSubscriptions/{name}/getFullUrl",
            post(get_full_url),
        )
        .route(
            "/topics/{topic}/eventSubscriptions/{name}/deliveryHealth",
            get(delivery_health),
        )
        .route("/topics/{topic}/eventSubscriptions/{name}/pause", post(pause::pause))
        .route("/topics/{topic}/eventSubscriptions/{name}/resume", post(pause::resume))
        .route(
            "/topics/{topic}/eventSubscriptions/{name}/validate",
            post(validate::validate),
        )
        .route(
            "/topics/{topic}/eventSubscriptions/{name}/deadLetters",
            get(deadletters::list),
        )
        .route(
            "/topics/{topic}/eventSubscriptions/{name}/deadLetters/destination",
            get(deadletters::destination),
        )
        .route(
            "/topics/{topic}/eventSubscriptions/{name}/deadLetters/redrive",
            post(deadletters::redrive),
        )
        .route(
            "/topics/{topic}/eventSubscriptions/{name}/deadLetters/purge",
            post(deadletters::purge),
        )
        .route(
            "/topics/{topic}/eventSubscriptions/{name}/deadLetters/{id}",
            get(deadletters::show),
        )
        .route("/topics/{topic}/eventSubscriptions/{name}/replay", post(replay::start))
        .route("/topics/{topic}/eventSubscriptions/{name}/replays", get(replay::list))
        .route(
            "/topics/{topic}/eventSubscriptions/{name}/replays/{id}",
            get(replay::get),
        )
        .route(
            "/topics/{topic}/eventSubscriptions/{name}/replays/{id}/cancel",
            post(replay::cancel),
        )
        .route("/topics/{topic}/events/{event_id}/history", get(history::history))
        .route("/queues", get(queues::queues))
        .layer(middleware::from_fn_with_state(app.clone(), require_token))
        .with_state(app)
}

async fn require_token(State(app): State<Arc<App>>, request: Request, next: Next) -> Result<Response, Refusal> {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let expected = app.admin_token.as_deref().unwrap_or_default();
    if expected.is_empty() || !bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        let (parts, body) = request.into_parts();
        app.discard_body(&parts.headers, body);
        return Err(Refusal::unauthorized("missing or wrong bearer token"));
    }
    Ok(next.run(request).await)
}

/// A management request body: strict JSON ([`eg_core::json`]) holding one object whose
/// fields are all in `fields` (for a resource, its `RESOURCE_FIELDS`). An empty body
/// reads as `{}`.
pub(crate) async fn body_object(
    app: &App,
    headers: &HeaderMap,
    body: Body,
    what: &str,
    fields: &[&str],
) -> Result<Value, Refusal> {
    let bytes = app.read_body(headers, body).await?;
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    let value = eg_core::json::parse(&bytes).map_err(|e| Refusal::bad_request(e.to_string()))?;
    let Value::Object(object) = &value else {
        return Err(Refusal::bad_request(format!(
            "the request body must be a JSON object ({what}), got {}",
            json_type(&value)
        )));
    };
    if let Some(unknown) = object.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(Refusal::bad_request(format!(
            "{unknown}: not a field of {what}; it takes {}",
            fields.join(", ")
        )));
    }
    Ok(value)
}

fn invalid(e: InvalidField) -> Refusal {
    Refusal::bad_request(e.to_string())
}

/// `200` when something was deleted, `204` when there was nothing to delete (as Event Grid).
fn deleted(existed: bool) -> (StatusCode, Json<Value>) {
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::NO_CONTENT
    };
    (status, Json(Value::Null))
}

fn new_key() -> String {
    BASE64.encode(rand::random::<[u8; 32]>())
}

async fn list_topics(State(app): State<Arc<App>>) -> Reply {
    let topics = app.catalog.list_topics().await?;
    let value: Vec<Value> = topics.iter().map(|t| t.to_resource(&app.public_url)).collect();
    Ok((StatusCode::OK, Json(json!({ "value": value }))))
}

async fn get_topic(State(app): State<Arc<App>>, Path(topic): Path<String>) -> Reply {
    let name = topic_name(&topic)?;
    match app.catalog.get_topic(&name).await? {
        Some(t) => Ok((StatusCode::OK, Json(t.to_resource(&app.public_url)))),
        None => Err(Refusal::not_found(format!("topic {topic:?} does not exist"))),
    }
}

async fn put_topic(State(app): State<Arc<App>>, Path(topic): Path<String>, headers: HeaderMap, body: Body) -> Reply {
    // The body first: a refusal before it is read could reset the connection under
    // a client still sending it.
    let body = body_object(&app, &headers, body, "a topic resource", &Topic::RESOURCE_FIELDS).await?;
    let name = topic_name(&topic)?;
    let topic = Topic::from_resource(name, &body).map_err(invalid)?;
    if let Some(archive) = &topic.archive {
        // Only an account or connection the operator configured: the archive's keys stay in eg.
        archive
            .check_configured(&app.connections)
            .map_err(|e| invalid(InvalidField::new(format!("properties.archive.{}", e.field), e.problem)))?;
        // An older ingress would accept the topic's events without archiving them.
        capabilities::check(&app, &[Capability::Archive]).await?;
    }
    let created = match app.catalog.put_topic(&topic, [new_key(), new_key()]).await? {
        PutTopic::Created => true,
        PutTopic::Updated => false,
        PutTopic::Refused(why) => return Err(invalid(why)),
    };
    tracing::info!(topic = %topic.name, created, "topic written");
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(topic.to_resource(&app.public_url))))
}

async fn delete_topic(State(app): State<Arc<App>>, Path(topic): Path<String>) -> Reply {
    let name = topic_name(&topic)?;
    let existed = app.catalog.delete_topic(&name).await?;
    tracing::info!(topic = %name, existed, "topic deleted");
    Ok(deleted(existed))
}

async fn list_keys(State(app): State<Arc<App>>, Path(topic): Path<String>) -> Reply {
    let name = topic_name(&topic)?;
    match app.catalog.topic_keys(&name).await? {
        Some([key1, key2]) => Ok((StatusCode::OK, Json(json!({ "key1": key1, "key2": key2 })))),
        None => Err(Refusal::not_found(format!("topic {topic:?} does not exist"))),
    }
}

async fn regenerate_key(
    State(app): State<Arc<App>>,
    Path(topic): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let body = body_object(&app, &headers, body, "a regenerateKey request", &["keyName"]).await?;
    let name = topic_name(&topic)?;
    let which = body
        .get("keyName")
        .and_then(Value::as_str)
        .and_then(KeyName::parse)
        .ok_or_else(|| Refusal::bad_request("keyName: must be \"key1\" or \"key2\""))?;
    if !app.catalog.regenerate_key(&name, which, &new_key()).await? {
        return Err(Refusal::not_found(format!("topic {topic:?} does not exist")));
    }
    tracing::info!(topic = %name, "key regenerated");
    list_keys(State(app), Path(topic)).await
}

async fn list_subscriptions(State(app): State<Arc<App>>, Path(topic): Path<String>) -> Reply {
    let name = topic_name(&topic)?;
    if app.catalog.get_topic(&name).await?.is_none() {
        return Err(Refusal::not_found(format!("topic {topic:?} does not exist")));
    }
    let subs = app.catalog.list_subscriptions(&name).await?;
    let now = app.clock.now();
    let value: Vec<Value> = subs.iter().map(|s| s.to_resource(now)).collect();
    Ok((StatusCode::OK, Json(json!({ "value": value }))))
}

/// A subscription that delivers by push: a queue subscription has no endpoint, so a call
/// about its endpoint is refused saying so rather than answering about an empty URL.
async fn pushed_subscription(app: &App, topic: &str, name: &str, call: &str) -> Result<Target, Refusal> {
    let sub = find_subscription(app, topic, name).await?;
    sub.target().cloned().ok_or_else(|| {
        Refusal::bad_request(format!(
            "subscription {name:?} of topic {topic:?} delivers in queue mode: consumers pull its events, so it has no endpoint for {call}"
        ))
    })
}

async fn get_subscription(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let sub = find_subscription(&app, &topic, &name).await?;
    Ok((StatusCode::OK, Json(sub.to_resource(app.clock.now()))))
}

async fn get_full_url(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let url = match pushed_subscription(&app, &topic, &name, "getFullUrl").await? {
        Target::WebHook(hook) => hook.url,
        // No secret in a queue's or broker's identity: it names eg's configuration.
        other => other.display_name(),
    };
    Ok((StatusCode::OK, Json(json!({ "endpointUrl": url }))))
}

async fn put_subscription(
    State(app): State<Arc<App>>,
    Path((topic, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let body = body_object(
        &app,
        &headers,
        body,
        "a subscription resource",
        &Subscription::RESOURCE_FIELDS,
    )
    .await?;
    let (t, n) = (topic_name(&topic)?, subscription_name(&name)?);
    let no_topic = || Refusal::not_found(format!("topic {topic:?} does not exist"));
    // Decided from the topic and the subscription as stored, and written only if they
    // are still stored so: a change in between (a pause, another write, the topic
    // replaced) is not undone; this write is decided again on top of it.
    for _ in 0..CHANGE_TRIES {
        let basis = app.catalog.subscription_basis(&t, &n).await?.ok_or_else(no_topic)?;
        let mut sub = Subscription::from_resource(&basis.topic, n.clone(), &body, app.clock.now()).map_err(invalid)?;
        sub.check_connections(&app.connections).map_err(invalid)?;
        capabilities::check(&app, &sub.capabilities_needed()).await?;
        storage_event::check_subscription(&sub, app.notify_topic.as_ref()).map_err(invalid)?;
        let previous = basis.previous.as_ref();
        if let Some(previous) = previous {
            sub.may_replace(previous).map_err(invalid)?;
        }
        // An update that does not say keeps the subscription paused or running as it was.
        if body["properties"].get("paused").is_none()
            && let Some(previous) = previous
        {
            sub.paused = previous.paused;
        }
        // Only a webhook is asked for consent
        // (behaviour.md#protecting-endpoints-and-the-system): consumers pull from a
        // queue-mode subscription, and a queue or broker connection is the operator's
        // configuration.
        if sub.webhook_url().is_some() {
            sub.provisioning = app
                .validator
                .provision(&basis.topic, &sub, previous, app.clock.now())
                .await?;
        }
        let created = match app
            .catalog
            .put_subscription_over(&sub, app.max_subscriptions_per_topic, &basis)
            .await?
        {
            PutSubscription::Changed => continue,
            PutSubscription::NoTopic => return Err(no_topic()),
            PutSubscription::LimitReached => {
                return Err(Refusal::bad_request(format!(
                    "topic {topic:?} already has {} subscriptions, the most allowed",
                    app.max_subscriptions_per_topic
                )));
            }
            PutSubscription::Created => true,
            PutSubscription::Updated => false,
        };
        let state = sub.provisioning.state_at(app.clock.now());
        tracing::info!(topic = %sub.topic, subscription = %sub.name, created, %state, "subscription written");
        return Ok((
            if created { StatusCode::CREATED } else { StatusCode::OK },
            Json(sub.to_resource(app.clock.now())),
        ));
    }
    Err(conflict())
}

async fn delete_subscription(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let (t, n) = (topic_name(&topic)?, subscription_name(&name)?);
    let existed = app.catalog.delete_subscription(&t, &n).await?;
    tracing::info!(topic = %t, subscription = %n, existed, "subscription deleted");
    Ok(deleted(existed))
}

/// `GET /validation/topics/{topic}/eventSubscriptions/{name}?code=…`: the manual half of
/// the validation handshake. Unauthenticated: the code, sent only to the endpoint, is
/// the proof of consent. Without the right code it tells nothing: a missing topic or
/// subscription, one validated already and one awaiting another code all get the same
/// answer ([`no_validation_awaits`]), so the URL cannot be used to list subscriptions.
pub async fn manual_validation(
    State(app): State<Arc<App>>,
    Path((topic, name)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<(StatusCode, Json<Value>), Refusal> {
    let code = query.get("code").map(String::as_str).unwrap_or_default();
    let now = app.clock.now();
    let validated = change_subscription(&app, &topic, &name, |sub| {
        if !sub.provisioning.accepts_manual(code, now) {
            return Err(no_validation_awaits());
        }
        Ok(Some(Subscription {
            provisioning: Provisioning::Succeeded,
            ..sub.clone()
        }))
    })
    .await;
    match validated {
        Ok((sub, _)) => {
            tracing::info!(topic = %sub.topic, subscription = %sub.name, "endpoint validated by a GET on its validation URL");
            Ok((StatusCode::OK, Json(json!({"provisioningState": "Succeeded"}))))
        }
        // A name that is not one, or no such topic or subscription: the same answer as a
        // wrong code. What is left (Redis unavailable, a write conflict) says nothing of
        // the subscription.
        Err(refusal) if matches!(refusal.status(), StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND) => {
            Err(no_validation_awaits())
        }
        Err(refusal) => Err(refusal),
    }
}

/// The one answer to a validation URL without the right code, whatever is or is not
/// behind it.
fn no_validation_awaits() -> Refusal {
    Refusal::not_found(
        "no subscription awaits validation with this code: the code is wrong or was sent for an earlier \
         handshake, its validation window is over, or the subscription is validated already or does not exist \
         (`egctl subscriptions validate <topic> <subscription>` runs the handshake again)",
    )
}

/// The subscription endpoint's probation record as every sender sees it (the API calls it `deliveryHealth`, as before).
async fn delivery_health(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let target = pushed_subscription(&app, &topic, &name, "deliveryHealth").await?;
    let record = app.store.probation_record(&target.endpoint_id()).await?;
    let now = app.clock.now();
    let state = probation::state_of(record.as_ref(), now);
    let record = record.unwrap_or_default();
    let mut body = json!({
        "endpointBaseUrl": target.display_name(),
        "state": state.as_str(),
        "consecutiveFailures": record.consecutive_failures,
        "probationLevel": record.level,
    });
    if let ProbationState::Probation { until } = state {
        body["probationUntil"] = json!(until.to_rfc3339());
    }
    if let Some(outcome) = record.last_failure {
        body["lastFailureOutcome"] = json!(outcome.as_str());
    }
    if let Some(at) = record.last_failure_at {
        body["lastFailureTime"] = json!(at.to_rfc3339());
    }
    Ok((StatusCode::OK, Json(body)))
}
