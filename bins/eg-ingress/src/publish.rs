//! `POST /topics/{topic}/api/events`: authenticate, parse, match, and store the events
//! with their deliveries in one atomic step. `200` only once all of it is durable.

use crate::auth::authenticate;
use crate::errors::Refusal;
use crate::state::App;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use eg_core::event::AcceptedEvent;
use eg_core::publish::PublishedBatch;
use eg_core::{Delivery, TopicName, UnixMillis};
use eg_runtime::metrics as m;
use eg_store::queue::EventToStore;
use eg_store::{CatalogSnapshot, PublishOutcome, TopicEntry};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// A stale catalog copy is refreshed and the publish re-matched at most this often.
const STALE_CATALOG_RETRIES: usize = 3;

pub async fn publish(
    State(app): State<Arc<App>>,
    Path(topic): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, Refusal> {
    let started = Instant::now();
    let result = accept(&app, &topic, &query, &headers, body).await;
    let label = topic.to_ascii_lowercase();
    match &result {
        Ok(count) => {
            metrics::counter!(m::PUBLISH_SUCCESS_COUNT, "topic" => label).increment(*count as u64);
            metrics::histogram!(m::PUBLISH_SUCCESS_LATENCY_MS).record(started.elapsed().as_secs_f64() * 1000.0);
        }
        Err(refusal) => {
            // Only known topics get their own label, so strangers cannot grow the label set.
            let known = app.cache.snapshot().topic(&label).is_some();
            let error = refusal.status().as_str().to_owned();
            let topic = if known { label } else { "unknown".to_owned() };
            metrics::counter!(m::PUBLISH_FAIL_COUNT, "topic" => topic, "error" => error).increment(1);
        }
    }
    result.map(|_| StatusCode::OK)
}

/// Returns how many events were accepted.
async fn accept(
    app: &App,
    topic: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<usize, Refusal> {
    let (name, snapshot, resource_path) = match admit(app, topic, query, headers).await {
        Ok(admitted) => admitted,
        Err(refusal) => {
            app.discard_body(headers, body);
            return Err(refusal);
        }
    };
    let entry = topic_entry(&snapshot, &name)?;
    let bytes = app.read_body(headers, body).await?;
    let content_type = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let batch =
        PublishedBatch::parse(&bytes, content_type, &entry.topic, app.clock.now(), app.limits).map_err(|e| {
            if e.is_too_large() {
                Refusal::too_large(e.to_string())
            } else {
                Refusal::bad_request(e.to_string())
            }
        })?;
    within_bound(
        app,
        store(app, &name, snapshot, &batch.events, query, headers, &resource_path),
    )
    .await?
}

/// The checks made before the body is read: the topic exists and the publisher holds
/// one of its keys. Returns the topic's name, the catalog it was found in, and the
/// resource path SAS tokens are checked against.
async fn admit(
    app: &App,
    topic: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<(TopicName, Arc<CatalogSnapshot>, String), Refusal> {
    let name = TopicName::parse(topic).map_err(|_| Refusal::not_found(format!("topic {topic:?} does not exist")))?;
    let resource_path = format!("/topics/{topic}/api/events");
    let mut snapshot = app.cache.snapshot();
    if snapshot.topic(&name.key()).is_none() {
        // Created through another ingress copy a moment ago?
        // (Reloads only if the catalog moved: unknown names cannot make every request reload it.)
        snapshot = within_bound(app, app.cache.refresh()).await??;
    }
    if let Err(refused) = authenticate(
        topic_entry(&snapshot, &name)?,
        query,
        headers,
        &resource_path,
        app.clock.now(),
    ) {
        // A key regenerated a moment ago (through any copy) is not in this copy's cached
        // catalog yet: check against the current one before refusing. Costs a refused
        // publisher one GET; a reload only if the catalog moved.
        let current = within_bound(app, app.cache.refresh()).await??;
        if current.version == snapshot.version {
            return Err(refused);
        }
        snapshot = current;
        authenticate(
            topic_entry(&snapshot, &name)?,
            query,
            headers,
            &resource_path,
            app.clock.now(),
        )?;
    }
    Ok((name, snapshot, resource_path))
}

/// Bounds how long a publish waits on Redis: during an outage publishers get a prompt
/// `503` with `Retry-After` instead of a hanging request.
async fn within_bound<T>(app: &App, step: impl Future<Output = T>) -> Result<T, Refusal> {
    tokio::time::timeout(app.storage_timeout, step).await.map_err(|_| {
        tracing::warn!(bound = ?app.storage_timeout, "storage did not answer in time");
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "storage did not answer in time; retry later (a retried publish may deliver an event twice, never lose it)",
        )
    })
}

/// Matches the events against the topic's subscriptions and stores them with their
/// deliveries; re-matches when the catalog copy turns out to be stale.
async fn store(
    app: &App,
    name: &TopicName,
    mut snapshot: Arc<CatalogSnapshot>,
    events: &[AcceptedEvent],
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    resource_path: &str,
) -> Result<usize, Refusal> {
    let count = events.len();
    let partition = app
        .store
        .keys()
        .partition(rand::random_range(0..app.store.keys().partitions()));

    for _ in 0..STALE_CATALOG_RETRIES {
        let entry = topic_entry(&snapshot, name)?;
        let now = app.clock.now();
        let to_store = fan_out(entry, events, now, snapshot.version);
        if to_store.is_empty() {
            // No script will check the catalog version, so check it here: a key regenerated
            // or a subscription created a moment ago through another copy must apply.
            let current = app.cache.refresh().await?;
            if current.version != snapshot.version {
                snapshot = current;
                authenticate(
                    topic_entry(&snapshot, name)?,
                    query,
                    headers,
                    resource_path,
                    app.clock.now(),
                )?;
                continue;
            }
            metrics::counter!(m::UNMATCHED_EVENT_COUNT, "topic" => name.key()).increment(count as u64);
            return Ok(count);
        }
        let queued = queue_subscriptions(entry);
        match app
            .store
            .publish_routed(&partition, snapshot.version, &to_store, &queued)
            .await?
        {
            PublishOutcome::Stored => {
                let matched: usize = to_store.iter().map(|e| e.deliveries.len()).sum();
                metrics::counter!(m::MATCHED_EVENT_COUNT, "topic" => name.key()).increment(matched as u64);
                metrics::counter!(m::UNMATCHED_EVENT_COUNT, "topic" => name.key())
                    .increment((count - to_store.len()) as u64);
                tracing::debug!(topic = %name, events = count, deliveries = matched, "accepted");
                return Ok(count);
            }
            PublishOutcome::StaleCatalog(version) => {
                tracing::debug!(topic = %name, cached = snapshot.version, current = version, "catalog changed; re-matching");
                snapshot = app.cache.reload().await?;
                // The key presented may have been regenerated since.
                authenticate(
                    topic_entry(&snapshot, name)?,
                    query,
                    headers,
                    resource_path,
                    app.clock.now(),
                )?;
            }
        }
    }
    Err(Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        "the topic's subscriptions are changing too fast to publish; nothing was accepted, retry",
    ))
}

fn topic_entry<'a>(snapshot: &'a CatalogSnapshot, name: &TopicName) -> Result<&'a TopicEntry, Refusal> {
    snapshot
        .topic(&name.key())
        .ok_or_else(|| Refusal::not_found(format!("topic {:?} does not exist", name.as_str())))
}

/// The `<topic>/<subscription>` keys of the topic's queue-mode subscriptions: their
/// deliveries go into their queue for pull receivers, not to the senders.
fn queue_subscriptions(entry: &TopicEntry) -> std::collections::HashSet<String> {
    entry
        .subscriptions
        .iter()
        .filter(|s| !s.delivery_mode.is_push())
        .map(|s| format!("{}/{}", entry.topic.name.key(), s.name.key()))
        .collect()
}

/// One stored event per event that matched something, with one delivery per match
/// (each remembers the catalog version it was matched against).
fn fan_out(entry: &TopicEntry, events: &[AcceptedEvent], now: UnixMillis, version: u64) -> Vec<EventToStore> {
    let format = entry.topic.input_schema.stored_format();
    events
        .iter()
        .filter_map(|accepted| {
            let event_key = uuid::Uuid::new_v4().simple().to_string();
            let deliveries: Vec<Delivery> = entry
                .subscriptions
                .iter()
                .filter(|s| s.matches(&accepted.routing(), now))
                .map(|s| {
                    Delivery::new(
                        uuid::Uuid::new_v4().simple().to_string(),
                        event_key.clone(),
                        entry.topic.name.key(),
                        s.name.key(),
                        now,
                    )
                    .with_format(format)
                    .matched_at(version)
                    .for_event(accepted.id())
                })
                .collect();
            (!deliveries.is_empty()).then(|| EventToStore {
                event_key,
                body: accepted.json.clone(),
                deliveries,
            })
        })
        .collect()
}
