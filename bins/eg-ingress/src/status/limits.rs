//! A subscription's `deliveryLimits` as the status shows them (docs/rate-limits.md): the
//! limits set, the current rate of requests, and from its shared record in Redis how many
//! deliveries wait for the rate (the backlog), how many requests are in flight and until
//! when an endpoint asked eg to slow down.

use eg_core::UnixMillis;
use eg_core::subscription::Subscription;
use eg_core::throttle::{self, ThrottleId, ThrottleRecord};
use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LimitsStatus {
    pub requests_per_second: Option<f64>,
    pub burst: Option<u32>,
    pub max_concurrent_requests: Option<u32>,
    /// Attempts per second over the last minute (delivered and failed).
    pub current_rate: f64,
    /// Deliveries waiting for the rate now: the turns handed out ahead
    /// (`eg_core::throttle::backlog`, an estimate); 0 without a rate.
    pub backlog: u64,
    /// Requests in flight now (live leases), with `maxConcurrentRequests`.
    pub in_flight: usize,
    /// While the endpoint asked eg to slow down (`429`/`503`): until when.
    pub slowed_until: Option<String>,
}

/// The ids of the subscriptions with limits, in order, to read their records at once.
pub fn limited(subscriptions: &[&Subscription]) -> Vec<ThrottleId> {
    subscriptions
        .iter()
        .filter(|s| s.limits.is_some())
        .map(|s| ThrottleId::of(&s.topic.key(), &s.name.key()))
        .collect()
}

/// The limits of `sub` (if it has any) with its record, as shown; `current_rate` is its
/// attempts per second over the last minute.
pub fn limits_of(
    sub: &Subscription,
    current_rate: f64,
    record: Option<&ThrottleRecord>,
    now: UnixMillis,
) -> Option<LimitsStatus> {
    let limits = sub.limits.as_ref()?;
    let rate = limits.requests_per_second();
    let slowed = record.map_or(0, |r| r.slowed_until);
    Some(LimitsStatus {
        requests_per_second: rate,
        burst: rate.map(|_| limits.burst()),
        max_concurrent_requests: limits.max_concurrent().map(|n| n.get()),
        current_rate,
        backlog: record.map_or(0, |r| throttle::backlog(r, limits, now)),
        in_flight: record.map_or(0, |r| r.leases.values().filter(|expiry| **expiry > now.0).count()),
        slowed_until: (slowed > now.0).then(|| UnixMillis(slowed).to_rfc3339()),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use eg_core::subscription::DeliveryLimits;
    use serde_json::json;

    #[test]
    fn live_leases_and_a_running_slowdown_show_and_others_do_not() {
        let topic =
            eg_core::topic::Topic::from_resource(eg_core::names::TopicName::parse("orders").unwrap(), &json!({}))
                .unwrap();
        let body = json!({"properties": {"destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://h.example/x"}}}});
        let mut sub = Subscription::from_resource(
            &topic,
            eg_core::names::SubscriptionName::parse("billing").unwrap(),
            &body,
            UnixMillis(0),
        )
        .unwrap();
        assert_eq!(limits_of(&sub, 1.0, None, UnixMillis(0)), None);
        sub.limits = Some(DeliveryLimits::parse(&json!({"requestsPerSecond": 5, "maxConcurrentRequests": 2})).unwrap());
        let record = ThrottleRecord {
            // Turns handed out up to 2.4 s at 5/s: 7 ahead of 1 s (1.2 … 2.4 s).
            plan_us: 2_600_000,
            slowed_until: 2_000,
            leases: [("a".to_owned(), 500), ("b".to_owned(), 5_000)].into(),
            ..Default::default()
        };
        let shown = limits_of(&sub, 4.5, Some(&record), UnixMillis(1_000)).unwrap();
        assert_eq!((shown.in_flight, shown.burst, shown.current_rate), (1, Some(5), 4.5));
        assert_eq!(shown.slowed_until.as_deref(), Some("1970-01-01T00:00:02.000Z"));
        let later = limits_of(&sub, 0.0, Some(&record), UnixMillis(3_000)).unwrap();
        assert_eq!(later.slowed_until, None);
        assert_eq!((shown.backlog, later.backlog), (7, 0));
    }
}
