//! Changes to a subscription decided from what is stored: the names a path gives, and
//! the write that lands only over the record it was decided from (`change_subscription`),
//! so a concurrent update or delete is never undone. Shared by the management API and
//! the operator's actions (`operations`), below both.

use crate::errors::Refusal;
use crate::state::App;
use axum::http::StatusCode;
use eg_core::{Subscription, SubscriptionName, TopicName};
use eg_store::catalog::PutSubscription;

pub(crate) fn topic_name(raw: &str) -> Result<TopicName, Refusal> {
    TopicName::parse(raw).map_err(|e| Refusal::bad_request(e.problem))
}

pub(crate) fn subscription_name(raw: &str) -> Result<SubscriptionName, Refusal> {
    SubscriptionName::parse(raw).map_err(|e| Refusal::bad_request(e.problem))
}

/// The subscription a path names, or `404` saying which is missing.
pub(crate) async fn find_subscription(app: &App, topic: &str, name: &str) -> Result<Subscription, Refusal> {
    let (t, n) = (topic_name(topic)?, subscription_name(name)?);
    app.catalog
        .get_subscription(&t, &n)
        .await?
        .ok_or_else(|| Refusal::not_found(format!("subscription {name:?} of topic {topic:?} does not exist")))
}

/// How often a change is decided again after the subscription changed under it.
pub(crate) const CHANGE_TRIES: usize = 5;

/// Applies a change decided from the subscription as stored (`decide` answers the new
/// subscription, or `None` to leave it as it is), written only over the record it was
/// decided from: an update or delete that comes in between wins, and the change is
/// decided again on what is stored then. Returns the subscription as it now stands and
/// whether this call changed it.
pub(crate) async fn change_subscription(
    app: &App,
    topic: &str,
    name: &str,
    decide: impl Fn(&Subscription) -> Result<Option<Subscription>, Refusal>,
) -> Result<(Subscription, bool), Refusal> {
    let (t, n) = (topic_name(topic)?, subscription_name(name)?);
    let missing = || Refusal::not_found(format!("subscription {name:?} of topic {topic:?} does not exist"));
    for _ in 0..CHANGE_TRIES {
        let basis = app.catalog.subscription_basis(&t, &n).await?.ok_or_else(missing)?;
        let current = basis.previous.as_ref().ok_or_else(missing)?;
        let Some(changed) = decide(current)? else {
            return Ok((current.clone(), false));
        };
        match app
            .catalog
            .put_subscription_over(&changed, app.max_subscriptions_per_topic, &basis)
            .await?
        {
            PutSubscription::Created | PutSubscription::Updated => return Ok((changed, true)),
            PutSubscription::NoTopic | PutSubscription::LimitReached | PutSubscription::Changed => continue,
        }
    }
    Err(conflict())
}

/// The answer when a subscription kept changing under a write decided from it.
pub(crate) fn conflict() -> Refusal {
    Refusal::new(
        StatusCode::CONFLICT,
        "Conflict",
        "the subscription kept changing while this change was being made; nothing was changed, retry",
    )
}
