//! Rate limits shared by every sender (`deliveryLimits`, docs/rate-limits.md): the cap
//! holds with one and with four senders, requests in flight never exceed the concurrency
//! cap, a `429` with `Retry-After` quiets every sender, waiting is never charged as an
//! attempt, and an event whose time-to-live ends while it waits is dead-lettered
//! `TimeToLiveExceeded` unattempted, and the backlog waiting for the rate shows in the
//! status, egctl and the scheduler's gauge. Only bounds the limiter guarantees are checked (an
//! upper bound on what arrives, whatever the machine's speed); the accuracy figures are
//! the benchmark's (tools/eg-bench).

use crate::egctl::Egctl;
use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, Recorded, Reply, System, dead_letter_to, eventually, metric,
    numbered_events, subscription,
};
use serde_json::{Value, json};
use std::time::Duration;

/// How late a request may reach the receiver after the gate let it go (scheduling and
/// the loopback hop), so arrival times bound gate times.
const SLACK: Duration = Duration::from_millis(300);

fn delivery_count(request: &Recorded) -> u32 {
    request
        .header("aeg-delivery-count")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric aeg-delivery-count: {:?}", request.headers))
}

/// Checks that in every window between two arrivals no more requests came than the
/// GCRA lets through: `burst` at once plus one per interval (with [`SLACK`] each side).
fn assert_within_cap(requests: &[Recorded], per_second: f64, burst: usize) {
    for (i, first) in requests.iter().enumerate() {
        for (j, last) in requests.iter().enumerate().skip(i) {
            let window = (last.at - first.at + SLACK * 2).as_secs_f64();
            let allowed = burst as f64 + per_second * window;
            let came = (j - i + 1) as f64;
            assert!(
                came <= allowed,
                "{came} requests in {window:.2} s (with slack); the cap allows {allowed:.1}"
            );
        }
    }
}

async fn the_cap_holds_with(senders: usize) {
    let system = System::start(Options::default().senders(senders)).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("partner").await;
    let limits = json!({"deliveryLimits": {"requestsPerSecond": 5, "burst": 2}});
    system
        .create_subscription("partner", "quota", subscription(receiver.url(), limits))
        .await;
    let events = numbered_events("q", 0..30);
    system.publish_ok("partner", &json!(events)).await;
    let requests = receiver.wait_for(30, DEADLINE).await;
    assert_within_cap(&requests, 5.0, 2);
    // Waiting for the cap is not an attempt: every event arrived on its first.
    assert!(
        requests.iter().all(|r| delivery_count(r) == 0),
        "a throttled event was charged an attempt"
    );
    let mut ids = receiver.event_ids();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 30, "every event delivered");
    // The status shows the limits and the subscription's current rate.
    let (_, status) = system.get("/status").await;
    let limits = &status["topics"][0]["subscriptions"][0]["limits"];
    assert_eq!(limits["requestsPerSecond"], 5.0, "{status}");
    assert_eq!(limits["burst"], 2, "{status}");
    assert!(limits["currentRate"].as_f64().is_some_and(|r| r > 0.0), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cap_holds_with_one_sender_and_waiting_is_not_an_attempt() {
    the_cap_holds_with(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cap_holds_for_four_senders_together() {
    the_cap_holds_with(4).await;
}

/// Every request is answered 400 ms after it arrives; with `maxConcurrentRequests` 2 and
/// four senders, no three requests are ever in flight together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_never_exceed_the_concurrency_cap() {
    const SLOW: Reply = Reply::status(200).after(Duration::from_millis(400));
    const REPLIES: &[Reply] = &[SLOW; 24];
    let system = System::start(Options::default().senders(4)).await;
    let receiver = Receiver::start(Behaviour::Script(REPLIES)).await;
    system.create_topic("partner").await;
    let limits = json!({"deliveryLimits": {"maxConcurrentRequests": 2}});
    system
        .create_subscription("partner", "slow", subscription(receiver.url(), limits))
        .await;
    system.publish_ok("partner", &json!(numbered_events("c", 0..24))).await;
    let requests = receiver.wait_for(24, DEADLINE).await;
    // Each request is in flight at least from its arrival until its answer.
    let held = Duration::from_millis(400);
    let most = requests
        .iter()
        .map(|r| requests.iter().filter(|o| o.at <= r.at && r.at < o.at + held).count())
        .max()
        .unwrap_or(0);
    assert!(most <= 2, "{most} requests in flight at once; the cap is 2");
    assert!(requests.iter().all(|r| delivery_count(r) == 0), "waiting was charged");
}

/// The first request is answered `429` with `Retry-After: 3`: no sender sends anything
/// to the subscription until then (past the requests already on their way), and the
/// answer is not held against the endpoint (no probation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_quiets_every_sender_for_the_time_asked() {
    const REPLIES: &[Reply] = &[Reply::status(429).retry_after("3")];
    let system = System::start(Options::default().senders(4)).await;
    let receiver = Receiver::start(Behaviour::Script(REPLIES)).await;
    system.create_topic("partner").await;
    let limits = json!({"deliveryLimits": {"requestsPerSecond": 4, "burst": 1}});
    system
        .create_subscription("partner", "busy", subscription(receiver.url(), limits))
        .await;
    system.publish_ok("partner", &json!(numbered_events("r", 0..12))).await;
    let requests = receiver.wait_for(13, DEADLINE).await;
    let busy_at = requests[0].at;
    assert_eq!(requests[0].status, 429);
    let quiet_from = busy_at + SLACK;
    let quiet_until = busy_at + Duration::from_millis(2900);
    let early: Vec<_> = requests
        .iter()
        .filter(|r| r.at > quiet_from && r.at < quiet_until)
        .map(|r| (r.at - busy_at, r.event_ids()))
        .collect();
    assert!(
        early.is_empty(),
        "requests while the endpoint asked for quiet: {early:?}"
    );
    // The rest waited for the end of the slowdown (at 4 a second they would not have).
    let after = requests.iter().filter(|r| r.at >= quiet_until).count();
    assert!(after >= 8, "only {after} requests waited for the slowdown to end");
    // Only the event that got the 429 was attempted twice.
    let retried: Vec<_> = requests.iter().filter(|r| delivery_count(r) > 0).collect();
    assert_eq!(retried.len(), 1, "one retry, of the event answered 429");
    assert_eq!(retried[0].event_ids(), requests[0].event_ids());
    let (_, health) = system
        .get("/topics/partner/eventSubscriptions/busy/deliveryHealth")
        .await;
    assert_eq!(health["state"], "Healthy", "{health}");
}

/// At 0.01 requests per second the second event's turn is 100 s away, past its one
/// minute time-to-live: it is dead-lettered `TimeToLiveExceeded` without an attempt.
/// (A minute is the shortest time-to-live Event Grid allows, so this test takes one.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_whose_ttl_ends_while_throttled_is_dead_lettered_unattempted() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("partner").await;
    let props = json!({
        "deliveryLimits": {"requestsPerSecond": 0.01},
        "retryPolicy": {"maxDeliveryAttempts": 30, "eventTimeToLiveInMinutes": 1},
        "deadLetterDestination": dead_letter_to("slow"),
    });
    system
        .create_subscription("partner", "trickle", subscription(receiver.url(), props))
        .await;
    system.publish_ok("partner", &json!(numbered_events("t", 0..2))).await;
    let records = system.wait_dead_letters(1, Duration::from_secs(100)).await;
    let record = &records[0].record;
    assert_eq!(record["deadLetterReason"], "TimeToLiveExceeded", "{record}");
    assert_eq!(record["deliveryAttempts"], 0, "{record}");
    assert_eq!(receiver.count(), 1, "only the first event was sent");
}

/// The backlog waiting for a slow rate (60 events at 5/s) shows as `backlog` in the
/// status's limits, in `egctl subscriptions show` and as the scheduler's gauge for that
/// subscription alone; once every event is through it is 0 again. Only that it shows and
/// drains is checked: its size depends on the machine's speed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backlog_waiting_for_the_rate_shows_and_drains() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("partner").await;
    let limits = json!({"deliveryLimits": {"requestsPerSecond": 5, "burst": 1}});
    system
        .create_subscription("partner", "quota", subscription(receiver.url(), limits))
        .await;
    system
        .create_subscription("partner", "open", subscription(receiver.url(), json!({})))
        .await;
    system.publish_ok("partner", &json!(numbered_events("b", 0..60))).await;

    let backlog_of = |status: &Value, name: &str| {
        let rows = status["topics"][0]["subscriptions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        rows.iter()
            .find(|s| s["name"] == name)
            .map(|s| s["limits"]["backlog"].clone())
            .unwrap_or(Value::Null)
    };
    let waiting = eventually(DEADLINE, "a backlog in the status's limits", || async {
        let (_, status) = system.get("/status").await;
        backlog_of(&status, "quota").as_u64().filter(|n| *n > 0)
    })
    .await;
    assert!(waiting <= 60, "{waiting} waiting of 60 events");
    let shown = Egctl::for_system(&system)
        .run(&["subscriptions", "show", "partner", "quota"])
        .await;
    let line = shown
        .ok()
        .lines()
        .find(|l| l.starts_with("backlog:"))
        .map(str::to_owned);
    let shown_backlog = line
        .as_deref()
        .and_then(|l| l.trim_start_matches("backlog:").trim().parse::<u64>().ok());
    assert!(shown_backlog.is_some(), "egctl shows no backlog: {shown:?}");
    let labels = [("topic", "partner"), ("subscription", "quota")];
    eventually(
        DEADLINE,
        "DeliveryThrottledBacklog above 0 on the scheduler",
        || async {
            let text = system.scheduler_metrics().await;
            (metric(&text, "DeliveryThrottledBacklog", &labels) > 0.0).then_some(())
        },
    )
    .await;
    // The unlimited subscription has no limits object and no gauge.
    let (_, status) = system.get("/status").await;
    assert_eq!(backlog_of(&status, "open"), Value::Null, "{status}");
    let text = system.scheduler_metrics().await;
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("DeliveryThrottledBacklog{") && l.contains("subscription=\"open\"")),
        "{text}"
    );

    // Every event through: nothing waits.
    receiver.wait_for(120, DEADLINE).await;
    eventually(DEADLINE, "the backlog back to 0", || async {
        let (_, status) = system.get("/status").await;
        (backlog_of(&status, "quota") == json!(0)).then_some(())
    })
    .await;
}
