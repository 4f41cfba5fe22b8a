//! What an operator does to a subscription, without HTTP: pause, resume, redrive dead
//! letters and run the validation handshake again. The management API (`admin::pause`,
//! `admin::deadletters`, `admin::validate`) and the status page's actions both call these, so the two
//! cannot drift apart; each caller shapes its own answer.

use crate::changes::{change_subscription, subscription_name, topic_name};
use crate::errors::Refusal;
use crate::state::App;
use eg_core::deadletter::RedriveTarget;
use eg_core::replay::{ReplaySpec, ReplayState, ReplayView};
use eg_core::{Subscription, SubscriptionName, Topic};
use eg_runtime::metrics as m;
use eg_store::Progress;
use eg_store::replay::ReplayJob;
use eg_store::{Selection, TimeRange};

/// Most set-aside deliveries moved back per script call when resuming.
const UNPARK_BATCH: usize = 1_000;

/// The `<topic>/<subscription>` key the store files a subscription's records under.
pub fn subscription_key(sub: &Subscription) -> String {
    format!("{}/{}", sub.topic.key(), sub.name.key())
}

/// Pauses the subscription (written over the record it read: a concurrent update keeps
/// its changes, a concurrent delete is not undone); the catalog version rises, so every
/// tier sees it before acting on events published after this returns.
pub async fn pause(app: &App, topic: &str, name: &str) -> Result<Subscription, Refusal> {
    let sub = set_paused(app, topic, name, true).await?;
    tracing::info!(topic = %sub.topic, subscription = %sub.name, "subscription paused");
    Ok(sub)
}

/// Resumes the subscription and hands its set-aside deliveries straight back to the
/// senders; answers the subscription and how many deliveries were handed back now.
pub async fn resume(app: &App, topic: &str, name: &str) -> Result<(Subscription, u64), Refusal> {
    let sub = set_paused(app, topic, name, false).await?;
    let key = subscription_key(&sub);
    let mut moved = 0;
    for partition in app.store.keys().all_partitions() {
        match app.store.unpark_all(&partition, &key, None, UNPARK_BATCH).await {
            Ok(n) => moved += n,
            // The schedulers hand back what is left on their next pass.
            Err(e) => {
                tracing::warn!(error = %e, partition = partition.index, "cannot hand back paused deliveries now; the scheduler will")
            }
        }
    }
    tracing::info!(topic = %sub.topic, subscription = %sub.name, moved, "subscription resumed");
    Ok((sub, moved))
}

/// Pausing holds back what the senders push; a queue subscription's consumers receive
/// when they choose to, so there is nothing to hold back.
fn queue_not_pausable(topic: &str, name: &str) -> Refusal {
    Refusal::bad_request(format!(
        "subscription {name:?} of topic {topic:?} is a queue subscription: pause holds back push deliveries \
         only; stop its consumers instead (its events wait in its queue, their time-to-live still counting)"
    ))
}

async fn set_paused(app: &App, topic: &str, name: &str, paused: bool) -> Result<Subscription, Refusal> {
    let (sub, _) = change_subscription(app, topic, name, |sub| {
        if paused && !sub.is_push() {
            return Err(queue_not_pausable(topic, name));
        }
        Ok((sub.paused != paused).then(|| Subscription { paused, ..sub.clone() }))
    })
    .await?;
    Ok(sub)
}

/// Every selection's records not redriven yet, in one call's chunk.
pub fn everything() -> Selection {
    Selection::Range(TimeRange::default())
}

/// Sends up to `limit` of the selected dead letters not redriven yet back into delivery
/// with fresh attempts, keeping the events' ids (each record at most once).
pub async fn redrive(app: &App, sub: &Subscription, selection: &Selection, limit: u64) -> Result<Progress, Refusal> {
    let version = app.catalog.version().await?;
    let now = app.clock.now();
    let (topic_key, subscription_key) = (sub.topic.key(), sub.name.key());
    let progress = app
        .store
        .redrive_dead_letters(&format!("{topic_key}/{subscription_key}"), selection, limit, |record| {
            let (delivery_id, event_key) = (new_id(), new_id());
            let target = RedriveTarget {
                topic_key: &topic_key,
                subscription_key: &subscription_key,
                delivery_id: &delivery_id,
                event_key: &event_key,
            };
            record.entry.redelivery(target, record.event_id(), now, version)
        })
        .await?;
    metrics::counter!(m::REDRIVEN_EVENT_COUNT, "topic" => topic_key.clone(), "subscription" => subscription_key.clone())
        .increment(progress.done);
    tracing::info!(topic = %topic_key, subscription = %subscription_key, redriven = progress.done, remaining = progress.remaining, "dead letters redriven");
    Ok(progress)
}

fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Runs the validation handshake again for a subscription that is not `Succeeded` and
/// writes its outcome; a `Succeeded` one is left as it is. Answers the subscription as
/// it now stands (its provisioning message says what the handshake came to), or the
/// handshake's refusal.
pub async fn revalidate(app: &App, topic: &str, name: &str) -> Result<Subscription, Refusal> {
    let t = topic_name(topic)?;
    let n = SubscriptionName::parse(name).map_err(|e| Refusal::bad_request(e.problem))?;
    let missing = || Refusal::not_found(format!("subscription {name:?} of topic {topic:?} does not exist"));
    let basis = app.catalog.subscription_basis(&t, &n).await?.ok_or_else(missing)?;
    let tried = basis.previous.as_ref().ok_or_else(missing)?;
    if tried.provisioning.is_active() {
        return Ok(tried.clone());
    }
    let provisioning = app.validator.validate(&basis.topic, tried, app.clock.now()).await?;
    // Written over what is stored then, unless a write in between settled it: a new
    // endpoint or schema had a handshake of its own, and a consent (a GET on the
    // validationUrl) is not taken back.
    let (sub, changed) = change_subscription(app, topic, name, |stored| {
        let same_endpoint =
            stored.webhook_url() == tried.webhook_url() && stored.delivery_schema == tried.delivery_schema;
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
    Ok(sub)
}

/// Starts a replay of the topic's archive into the subscription from a request body
/// (`eg_core::replay::ReplaySpec::from_request`); answers the job as stored.
pub async fn start_replay(app: &App, topic: &str, name: &str, body: &serde_json::Value) -> Result<ReplayView, Refusal> {
    let (topic, sub) = topic_and_subscription(app, topic, name).await?;
    replayable(&topic, &sub)?;
    let spec = ReplaySpec::from_request(body, &topic.name.key(), &sub.name.key(), app.clock.now())
        .map_err(|e| Refusal::bad_request(e.to_string()))?;
    let id = new_id();
    let keys = app.store.keys();
    // Jobs spread over the partitions: each enqueues on its own.
    let partition = keys.partition(rand::random_range(0..keys.partitions()));
    app.store.create_replay(&id, &spec, &partition).await?;
    tracing::info!(job = %id, topic = %spec.topic, subscription = %spec.subscription, from = %spec.from.to_rfc3339(), to = %spec.to.to_rfc3339(), "replay started");
    // Answered as written: nothing has worked the job yet.
    Ok(ReplayView {
        id,
        spec,
        state: ReplayState::Running,
        read: 0,
        replayed: 0,
        filtered: 0,
        problem: None,
        updated_at: None,
        finished_at: None,
    })
}

/// Cancels a running replay; one already ended is answered as it ended.
pub async fn cancel_replay(app: &App, topic: &str, name: &str, id: &str) -> Result<ReplayView, Refusal> {
    let job = replay_job_of(app, topic, name, id).await?;
    let state = app
        .store
        .finish_replay(id, job.partition, ReplayState::Cancelled, None, app.clock.now())
        .await?;
    tracing::info!(job = %id, state = ?state, "replay cancel asked");
    let after = app.store.replay_job_on(id, job.partition).await?;
    // Gone in between only if it expired: answered as last read.
    Ok(after.map_or(job.view, |j| j.view))
}

/// The subscription's replays, newest first, and whether its topic is archived (so a
/// replay can be started).
pub async fn replays(app: &App, topic: &str, name: &str) -> Result<(bool, Vec<ReplayView>), Refusal> {
    let (topic, sub) = topic_and_subscription(app, topic, name).await?;
    replays_for(app, &topic, &sub).await
}

/// `replays` of a subscription already read.
pub async fn replays_for(app: &App, topic: &Topic, sub: &Subscription) -> Result<(bool, Vec<ReplayView>), Refusal> {
    let key = format!("{}/{}", topic.name.key(), sub.name.key());
    let jobs = app.store.replay_jobs(Some(&key)).await?;
    Ok((topic.archive.is_some(), jobs.into_iter().map(|j| j.view).collect()))
}

/// One replay of the subscription; `404` for a job of another (or none).
pub async fn replay_of(app: &App, topic: &str, name: &str, id: &str) -> Result<ReplayView, Refusal> {
    Ok(replay_job_of(app, topic, name, id).await?.view)
}

/// The job behind `replay_of`, with where it lives.
async fn replay_job_of(app: &App, topic: &str, name: &str, id: &str) -> Result<ReplayJob, Refusal> {
    let (topic, sub) = topic_and_subscription(app, topic, name).await?;
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
    Ok(job)
}

/// The subscription and its topic, as the catalog holds them; `404` when either is missing.
pub(crate) async fn topic_and_subscription(
    app: &App,
    topic: &str,
    name: &str,
) -> Result<(Topic, Subscription), Refusal> {
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
            "subscription {:?} delivers in order per key (properties.orderedDelivery); a replay cannot keep that \
             order, so it is refused: replay into an unordered subscription of the same endpoint",
            sub.name.as_str()
        )));
    }
    Ok(())
}
