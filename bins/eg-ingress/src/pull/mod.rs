//! Pull delivery's data plane (Event Grid namespaces' queue mode):
//! `POST /topics/{topic}/eventsubscriptions/{subscription}:{action}` with action
//! `receive`, `acknowledge`, `release`, `reject` or `renewLock`. axum cannot route a
//! `:` suffix, so the last path segment is taken whole and split at its last `:`.
//!
//! Every request is authenticated like a publish (the topic's keys or a SAS token for
//! `/topics/<t>/eventsubscriptions/<s>`), needs `api-version`, and works on a queue-mode
//! subscription only. Locks live in Redis (see `eg_store::pull`), and a lock token says
//! where, so any ingress copy serves any request: nothing is sticky.
//!
//! - `receive`: locks up to `maxEvents` events now, or waits up to `maxWaitTime` for
//!   some without holding a Redis connection ([`hub`]).
//! - the four lock operations: [`settle`].
//! - each call's span, when its events carry a trace context: [`trace`].

mod hub;
mod receive;
mod settle;
mod trace;

pub use hub::ReceiveHub;

use crate::auth::authenticate;
use crate::errors::Refusal;
use crate::state::App;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use eg_core::publisher_auth::Resource;
use eg_core::pull::{self as core_pull, Action, TokenKey};
use eg_core::{Subscription, SubscriptionName, TopicName};
use eg_store::{CatalogCache, Clock, Retention, Store};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How often a receive waiting in the hub looks again without a signal: expired locks
/// and due delayed releases ring no bell (until the scheduler promotes the latter).
pub const RECEIVE_RECHECK: Duration = Duration::from_secs(1);

/// What pull delivery needs besides the request: the store, the catalog, the clock, the
/// token key every copy shares, what a dead-letter keeps, and the waiting receivers.
pub struct Pull {
    pub store: Store,
    pub cache: Arc<CatalogCache>,
    pub clock: Clock,
    pub key: TokenKey,
    pub retention: Retention,
    pub hub: Arc<ReceiveHub>,
}

impl Pull {
    /// Reads (or, on a first start, creates) the deployment's lock secret and starts the
    /// receive hub's signal readers.
    pub async fn start(
        store: Store,
        cache: Arc<CatalogCache>,
        clock: Clock,
        retention: Retention,
        recheck: Duration,
    ) -> Result<Arc<Self>, eg_store::StoreError> {
        let candidate: [u8; 32] = rand::random();
        let secret = store.lock_secret(&candidate).await?;
        let pull = Arc::new_cyclic(|weak| Self {
            hub: ReceiveHub::new(weak.clone(), recheck),
            store,
            cache,
            clock,
            key: TokenKey::new(secret),
            retention,
        });
        pull.hub.start_doorbells(&pull.store);
        Ok(pull)
    }
}

impl Pull {
    /// [`Pull::start`] for the ingress's process, retrying until Redis answers.
    pub async fn start_for(process: &eg_runtime::Process, cache: Arc<CatalogCache>) -> anyhow::Result<Arc<Self>> {
        let retention = process.settings.retention();
        eg_runtime::startup::until_ready("read the lock secret", &process.shutdown, || {
            Self::start(
                process.store.clone(),
                cache.clone(),
                process.clock.clone(),
                retention,
                RECEIVE_RECHECK,
            )
        })
        .await
    }
}

/// The state the handler is routed with: the ingress's shared state and pull delivery's.
pub type PullState = (Arc<App>, Arc<Pull>);

/// The `POST /topics/{topic}/eventsubscriptions/{segment}` handler.
pub async fn operate(
    State((app, pull)): State<PullState>,
    Path((topic, segment)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // Refusals carry `x-ms-error-code` beside the error body, as on the publish route.
    crate::namespace::answer(operation(app, pull, topic, segment, query, headers, body).await)
}

async fn operation(
    app: Arc<App>,
    pull: Arc<Pull>,
    topic: String,
    segment: String,
    query: HashMap<String, String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Refusal> {
    let (subscription, action) = core_pull::parse_action(&segment).map_err(Refusal::not_found)?;
    crate::namespace::require_api_version(&query)?;
    let target = find(&app, &topic, subscription, &query, &headers).await?;
    match action {
        Action::Receive => {
            app.discard_body(&headers, body);
            let options = core_pull::ReceiveOptions::parse(
                query.get("maxEvents").map(String::as_str),
                query.get("maxWaitTime").map(String::as_str),
            )
            .map_err(|e| Refusal::bad_request(e.to_string()))?;
            let answer = receive::receive(&pull, &target, options).await?;
            Ok(Json(answer).into_response())
        }
        _ => {
            let delay = core_pull::ReleaseDelay::parse(query.get("releaseDelayInSeconds").map(String::as_str))
                .map_err(|e| Refusal::bad_request(e.to_string()))?;
            let bytes = app.read_body(&headers, body).await?;
            let tokens = core_pull::lock_tokens(&bytes).map_err(|e| Refusal::bad_request(e.to_string()))?;
            let answer = settle::settle(&pull, &target, action, delay, tokens).await?;
            Ok(Json(answer).into_response())
        }
    }
}

/// A queue subscription a request is for: its key (`<topic>/<subscription>`) and its
/// settings as the catalog has them now.
#[derive(Clone)]
pub struct Target {
    pub key: String,
    pub subscription: Arc<Subscription>,
    pub lock: Duration,
}

/// Finds the topic and the subscription, authenticates the request for it, and insists
/// it delivers by queue.
async fn find(
    app: &App,
    topic: &str,
    subscription: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<Target, Refusal> {
    let missing_topic = || Refusal::not_found(format!("topic {topic:?} does not exist"));
    let missing_sub = || {
        Refusal::not_found(format!(
            "event subscription {subscription:?} of topic {topic:?} does not exist"
        ))
    };
    let topic_name = TopicName::parse(topic).map_err(|_| missing_topic())?;
    let sub_name = SubscriptionName::parse(subscription).map_err(|_| missing_sub())?;
    let resource_path = format!("/topics/{topic}/eventsubscriptions/{subscription}");
    let mut snapshot = app.cache.snapshot();
    let known = |s: &eg_store::CatalogSnapshot| {
        s.topic(&topic_name.key())
            .is_some_and(|e| e.subscriptions.iter().any(|x| x.name.key() == sub_name.key()))
    };
    if !known(&snapshot) {
        // Created through another copy a moment ago?
        snapshot = app.cache.refresh().await?;
    }
    let entry = snapshot.topic(&topic_name.key()).ok_or_else(missing_topic)?;
    if let Err(refused) = authenticate(
        entry,
        query,
        headers,
        Resource::OrAbove(&resource_path),
        app.clock.now(),
    ) {
        // A key regenerated through another copy a moment ago?
        let current = app.cache.refresh().await?;
        if current.version == snapshot.version {
            return Err(refused);
        }
        snapshot = current;
        let entry = snapshot.topic(&topic_name.key()).ok_or_else(missing_topic)?;
        authenticate(
            entry,
            query,
            headers,
            Resource::OrAbove(&resource_path),
            app.clock.now(),
        )?;
    }
    let entry = snapshot.topic(&topic_name.key()).ok_or_else(missing_topic)?;
    let found = entry
        .subscriptions
        .iter()
        .find(|s| s.name.key() == sub_name.key())
        .ok_or_else(missing_sub)?;
    let Some(lock) = found.receive_lock() else {
        return Err(Refusal::bad_request(format!(
            "event subscription {subscription:?} delivers by push; receive, acknowledge, release, reject \
             and renewLock work only on subscriptions with deliveryMode Queue"
        )));
    };
    Ok(Target {
        key: format!("{}/{}", topic_name.key(), sub_name.key()),
        subscription: found.clone(),
        lock,
    })
}
