//! Several senders, a sender killed mid-delivery, Redis killed and restarted: nothing
//! accepted is lost, and nothing is delivered twice when nothing failed.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, System, dead_letter_to, duplicates, event, eventually, ids_of, json_reply,
    metric, numbered_events, subscription,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_senders_deliver_every_event_exactly_once() {
    // Longer timeouts than the defaults: this test is about sharing the work, not about
    // reclaiming deliveries from a sender slowed down by a busy machine.
    let system = System::start(Options::default().senders(2).delivery_timeouts("5s", "20s")).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("load").await;
    system
        .create_subscription("load", "Sink", subscription(receiver.url(), json!({})))
        .await;

    let mut expected = BTreeSet::new();
    for chunk in 0..4 {
        let events = numbered_events("ev", chunk * 50..(chunk + 1) * 50);
        expected.extend(ids_of(&events));
        system.publish_ok("load", &Value::from(events)).await;
    }
    assert_eq!(expected.len(), 200);

    let got: BTreeSet<String> = receiver.wait_for_ids(&expected, DEADLINE).await.into_iter().collect();
    assert_eq!(got, expected, "only the published events delivered");
    eventually(DEADLINE, "200 successful deliveries counted by the senders", || async {
        let text = system.sender_metrics().await;
        (metric(&text, "DeliverySuccessCount", &[("topic", "load")]) >= 200.0).then_some(())
    })
    .await;
    let ids = receiver.event_ids();
    assert_eq!(duplicates(&ids), BTreeMap::new(), "delivered more than once");
    assert_eq!(ids.len(), 200);
    assert!(
        receiver
            .received()
            .iter()
            .all(|r| r.header("aeg-delivery-count") == Some("0"))
    );
    let text = system.sender_metrics().await;
    assert_eq!(metric(&text, "DeliverySuccessCount", &[("topic", "load")]), 200.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_killed_mid_delivery_does_not_lose_the_event() {
    // The endpoint holds the first request 5 s (inside the 10 s delivery timeout); the
    // sender holding it is killed meanwhile. After the 12 s visibility timeout the
    // scheduler takes the delivery back and another sender delivers it.
    let mut system = System::start(Options::default().delivery_timeouts("10s", "12s")).await;
    let receiver = Receiver::start(Behaviour::SlowFirst(Duration::from_secs(5))).await;
    system.create_topic("jobs").await;
    let body = subscription(receiver.url(), json!({"deadLetterDestination": dead_letter_to("dead")}));
    system.create_subscription("jobs", "Worker", body).await;
    system
        .publish_ok(
            "jobs",
            &json!([event("job-1", "Job.Queued", "/jobs/1", json!({"task": "resize"}))]),
        )
        .await;

    let first = receiver.wait_for(1, DEADLINE).await;
    assert_eq!(first[0].header("aeg-delivery-count"), Some("0"));
    system.kill_sender(0);
    system.start_sender().await;

    let received = receiver.wait_for(2, Duration::from_secs(60)).await;
    eventually(
        DEADLINE,
        "the new sender to count the delivery as delivered",
        || async {
            let text = system.sender_metrics().await;
            (metric(
                &text,
                "DeliverySuccessCount",
                &[("topic", "jobs"), ("subscription", "worker")],
            ) == 1.0)
                .then_some(())
        },
    )
    .await;
    let received_now = receiver.received();
    assert!(
        received_now.iter().all(|r| r.event_ids() == ["job-1"]),
        "{received_now:?}"
    );
    let last = received_now.last().unwrap();
    let count: u32 = last.header("aeg-delivery-count").unwrap().parse().unwrap();
    assert!(
        count >= 1,
        "the interrupted attempt should count: aeg-delivery-count {count}"
    );
    assert!(received.len() >= 2);
    let scheduler = system.scheduler_metrics().await;
    assert!(
        metric(&scheduler, "ReclaimedDeliveryCount", &[("topic", "jobs")]) >= 1.0,
        "{scheduler}"
    );
    assert!(
        system.dead_letter_records().is_empty(),
        "{:?}",
        system.dead_letter_records()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarting_redis_loses_nothing_that_was_accepted() {
    // No sender yet: everything published waits in Redis while it is killed.
    let mut system = System::start(Options::default().senders(0)).await;
    // The first deliveries fail, so retries go through the scheduler after the restart;
    // one event is refused by its endpoint, so the dead-letter tier writes after it too.
    let books = Receiver::start(Behaviour::FailFirst {
        failures: 5,
        status: 500,
    })
    .await;
    let rejects = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("ledger").await;
    system
        .create_subscription("ledger", "Books", subscription(books.url(), json!({})))
        .await;
    let rejecting = json!({
        "filter": {"includedEventTypes": ["Ledger.Rejected"]},
        "deadLetterDestination": dead_letter_to("rejects"),
    });
    system
        .create_subscription("ledger", "Rejects", subscription(rejects.url(), rejecting))
        .await;

    let mut expected = BTreeSet::new();
    for chunk in 0..5 {
        let events = numbered_events("before", chunk * 10..(chunk + 1) * 10);
        expected.extend(ids_of(&events));
        system.publish_ok("ledger", &Value::from(events)).await;
    }
    system
        .publish_ok(
            "ledger",
            &json!([event(
                "rejected-1",
                "Ledger.Rejected",
                "/ledger/r",
                json!({"why": "test"})
            )]),
        )
        .await;
    expected.insert("rejected-1".to_owned());

    system.restart_redis();

    // The ingress reconnects on its own: a publish is accepted again (a client retries
    // a 503, which accepted nothing).
    let after = numbered_events("after", 0..10);
    eventually(
        DEADLINE,
        "the ingress to accept a publish after the restart",
        || async {
            let (status, body) = json_reply(system.publish("ledger", &Value::from(after.clone())).await).await;
            match status.as_u16() {
                200 => Some(()),
                503 => None,
                other => panic!("publish after the restart: {other} {body}"),
            }
        },
    )
    .await;
    expected.extend(ids_of(&after));
    assert_eq!(expected.len(), 61);

    system.start_sender().await;
    eventually(DEADLINE, "61 successful deliveries", || async {
        let text = system.sender_metrics().await;
        (metric(&text, "DeliverySuccessCount", &[("topic", "ledger")]) >= 61.0).then_some(())
    })
    .await;
    let delivered = books.delivered_ids();
    assert_eq!(duplicates(&delivered), BTreeMap::new(), "accepted more than once");
    assert_eq!(delivered.into_iter().collect::<BTreeSet<_>>(), expected);
    assert_eq!(books.count(), 61 + 5, "61 events, 5 of them retried once");

    let records = system.wait_dead_letters(1, DEADLINE).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].record["id"], "rejected-1");
    assert_eq!(records[0].record["deadLetterReason"], "NonRetriableFailure");
    assert_eq!(rejects.event_ids(), ["rejected-1"]);
}
