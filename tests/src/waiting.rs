//! Waiting for what eg does in the background, always with a deadline: a condition is
//! polled until it holds, and the test fails with what it waited for when time runs out.
//! Never a bare `sleep`.

use std::time::Duration;

pub use eg_testkit::eventually;

use crate::{System, metric};

/// The deadline for anything that should happen within a few seconds on an idle
/// machine: generous, because tests run in parallel on small machines.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Waits until the senders count exactly `expected` successful deliveries for `topic`
/// (failing at once if there are more).
pub async fn wait_successes(system: &System, topic: &str, expected: f64) {
    let what = format!("{expected} successful deliveries for {topic}");
    wait_success_count(system, &[("topic", topic)], &what, expected).await;
}

/// Waits until the senders count exactly `expected` successful deliveries for one
/// subscription (failing at once if there are more).
pub async fn wait_subscription_successes(system: &System, topic: &str, subscription: &str, expected: f64) {
    let what = format!("{expected} successful deliveries to {topic}/{subscription}");
    let labels = [("topic", topic), ("subscription", subscription)];
    wait_success_count(system, &labels, &what, expected).await;
}

/// Waits until `DeliverySuccessCount` summed over the senders' samples with `labels`
/// is `expected`; a count past it fails the test at once, since it can only grow.
async fn wait_success_count(system: &System, labels: &[(&str, &str)], what: &str, expected: f64) {
    eventually(DEADLINE, what, || async {
        let count = metric(&system.sender_metrics().await, "DeliverySuccessCount", labels);
        assert!(count <= expected, "{count} counted, past {what}");
        (count == expected).then_some(())
    })
    .await;
}
