//! Subscriptions and rendered batches for the broker destinations' tests.

use crate::destination::RenderedBatch;
use eg_core::render::DeliveryBody;
use eg_core::subscription::{Subscription, resolve_headers};
use eg_core::{SubscriptionName, Topic, TopicName, UnixMillis};
use serde_json::{Value, json};

/// Subscription `billing` of topic `orders` delivering to `destination` (the
/// `destination` JSON of the management API), in the Event Grid schema.
pub fn subscription_with(destination: Value) -> Subscription {
    let topic = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
    let resource = json!({"properties": {"destination": destination}});
    Subscription::from_resource(
        &topic,
        SubscriptionName::parse("billing").unwrap(),
        &resource,
        UnixMillis(0),
    )
    .unwrap()
}

/// A batch of `body` (rendered events) at its fourth attempt; `data_version` marks an
/// Event Grid schema delivery, as the renderer does.
pub fn batch_of<'a>(subscription: &'a Subscription, body: &str, data_version: Option<&str>) -> RenderedBatch<'a> {
    let first_event = match serde_json::from_str::<Value>(body) {
        Ok(Value::Array(events)) => events.into_iter().next().unwrap_or(Value::Null),
        Ok(one) => one,
        Err(_) => Value::Null,
    };
    let delivery_headers = resolve_headers(&subscription.delivery_headers, &first_event.to_string()).headers;
    RenderedBatch {
        subscription,
        target: subscription.target().expect("a push subscription"),
        body: DeliveryBody {
            body: body.to_owned(),
            content_type: "application/json; charset=utf-8",
            data_version: data_version.map(str::to_owned),
        },
        delivery_headers,
        delivery_count: 3,
        batch_id: "msg_1".into(),
        sent_at: UnixMillis(0),
        trace: None,
        replay_job: None,
    }
}
