//! Publish → fan-out → delivery → retry → dead-letter, through the four binaries.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, System, dead_letter_to, event, eventually, metric, sorted, strings,
    subscription, wait_successes,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Component;
use std::time::{Duration, Instant};

/// `<container>/<SUBSCRIPTION>/YYYY/M/D/H/<uuid>.json`, not zero-padded.
fn assert_dead_letter_path(path: &std::path::Path, container: &str, subscription_upper: &str) {
    let parts: Vec<String> = path
        .components()
        .map(|c| match c {
            Component::Normal(s) => s.to_string_lossy().into_owned(),
            other => panic!("unexpected path component {other:?} in {}", path.display()),
        })
        .collect();
    assert_eq!(parts.len(), 7, "{}", path.display());
    assert_eq!(parts[0], container, "{}", path.display());
    assert_eq!(parts[1], subscription_upper, "{}", path.display());
    let number = |i: usize, range: std::ops::RangeInclusive<u32>| {
        let n: u32 = parts[i]
            .parse()
            .unwrap_or_else(|_| panic!("part {i} of {} is not a number", path.display()));
        assert!(range.contains(&n), "part {i} of {} out of range", path.display());
        assert_eq!(parts[i], n.to_string(), "part {i} of {} is zero-padded", path.display());
    };
    number(2, 2025..=2200);
    number(3, 1..=12);
    number(4, 1..=31);
    number(5, 0..=23);
    let file = parts[6]
        .strip_suffix(".json")
        .unwrap_or_else(|| panic!("{} is not a .json file", path.display()));
    assert_eq!(file.len(), 36, "file name {file} is not a UUID");
    assert!(
        file.chars().all(|c| c.is_ascii_hexdigit() || c == '-'),
        "file name {file} is not a UUID"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_event_is_delivered_once_as_published() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "Billing", subscription(receiver.url(), json!({})))
        .await;

    let data = json!({"orderId": 42, "lines": [{"sku": "a-1", "qty": 2}], "note": "ünïcødé"});
    system
        .publish_ok(
            "orders",
            &json!([event("order-42", "Order.Created", "/orders/42", data.clone())]),
        )
        .await;

    let received = receiver.wait_for(1, DEADLINE).await;
    let request = &received[0];
    assert_eq!(request.path, "/hook");
    let events = request
        .body
        .as_array()
        .unwrap_or_else(|| panic!("the body is not a JSON array: {}", request.raw_body));
    assert_eq!(events.len(), 1, "one event per request: {}", request.raw_body);
    let delivered = &events[0];
    assert_eq!(delivered["id"], "order-42");
    assert_eq!(delivered["eventType"], "Order.Created");
    assert_eq!(delivered["subject"], "/orders/42");
    assert_eq!(delivered["eventTime"], "2026-01-02T03:04:05.678Z");
    assert_eq!(delivered["data"], data);
    assert_eq!(delivered["topic"], "/topics/orders");
    assert_eq!(delivered["metadataVersion"], "1");
    assert_eq!(delivered["dataVersion"], "");
    let fields: BTreeSet<&str> = delivered.as_object().unwrap().keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = [
        "id",
        "topic",
        "subject",
        "eventType",
        "eventTime",
        "data",
        "dataVersion",
        "metadataVersion",
    ]
    .into();
    assert_eq!(fields, expected);

    assert_eq!(request.header("aeg-event-type"), Some("Notification"));
    assert_eq!(request.header("aeg-subscription-name"), Some("BILLING"));
    assert_eq!(request.header("aeg-delivery-count"), Some("0"));
    assert_eq!(request.header("aeg-metadata-version"), Some("1"));
    assert_eq!(request.header("aeg-data-version"), Some(""));
    let content_type = request.header("content-type").unwrap_or_default();
    assert!(
        content_type.starts_with("application/json"),
        "content-type {content_type:?}"
    );

    // Settled as delivered, and delivered once only.
    wait_successes(&system, "orders", 1.0).await;
    assert_eq!(
        receiver.count(),
        1,
        "delivered more than once: {:?}",
        receiver.event_ids()
    );
    assert!(system.dead_letter_records().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_endpoint_gets_max_attempts_then_the_event_is_dead_lettered() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(500)).await;
    system.create_topic("payments").await;
    let body = subscription(
        receiver.url(),
        json!({
            "retryPolicy": {"maxDeliveryAttempts": 3, "eventTimeToLiveInMinutes": 1440},
            "deadLetterDestination": dead_letter_to("dead"),
        }),
    );
    system.create_subscription("payments", "Ledger", body).await;
    let data = json!({"amount": 12.5, "currency": "EUR"});
    system
        .publish_ok(
            "payments",
            &json!([event("pay-1", "Payment.Made", "/payments/1", data.clone())]),
        )
        .await;

    let records = system.wait_dead_letters(1, DEADLINE).await;
    assert_eq!(records.len(), 1, "{records:?}");
    let dead = &records[0];
    assert_dead_letter_path(&dead.path, "dead", "LEDGER");
    let record = &dead.record;
    assert_eq!(record["id"], "pay-1");
    assert_eq!(record["eventType"], "Payment.Made");
    assert_eq!(record["subject"], "/payments/1");
    assert_eq!(record["topic"], "/topics/payments");
    assert_eq!(record["data"], data);
    assert_eq!(record["deadLetterReason"], "MaxDeliveryAttemptsExceeded");
    assert_eq!(record["deliveryAttempts"], 3);
    assert_eq!(record["lastDeliveryOutcome"], "GenericError");
    assert_eq!(record["lastHttpStatusCode"], 500);
    assert!(record["publishTime"].is_string(), "{record}");
    assert!(record["lastDeliveryAttemptTime"].is_string(), "{record}");
    assert!(
        record["publishTime"].as_str().unwrap() <= record["lastDeliveryAttemptTime"].as_str().unwrap(),
        "{record}"
    );

    // Exactly three attempts, counted 0, 1, 2, each about one retry step apart.
    let received = receiver.received();
    let counts: Vec<&str> = received
        .iter()
        .map(|r| r.header("aeg-delivery-count").unwrap_or("?"))
        .collect();
    assert_eq!(counts, ["0", "1", "2"]);
    assert!(received.iter().all(|r| r.event_ids() == ["pay-1"]));
    for pair in received.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_millis(900),
            "retried after {gap:?}; the schedule says 1 s"
        );
    }

    let text = system.sender_metrics().await;
    let labels = [("topic", "payments"), ("subscription", "ledger")];
    assert_eq!(
        metric(
            &text,
            "DeliveryAttemptFailCount",
            &[labels[0], labels[1], ("outcome", "GenericError")]
        ),
        3.0
    );
    assert_eq!(
        metric(
            &text,
            "DeadLetteredCount",
            &[labels[0], labels[1], ("reason", "MaxDeliveryAttemptsExceeded")]
        ),
        1.0
    );
    assert_eq!(metric(&text, "DeliverySuccessCount", &labels), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_is_not_retried_and_is_dead_lettered_at_once() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("signups").await;
    let body = subscription(
        receiver.url(),
        json!({"deadLetterDestination": dead_letter_to("rejected")}),
    );
    system.create_subscription("signups", "Crm", body).await;
    system
        .publish_ok(
            "signups",
            &json!([event("signup-7", "User.SignedUp", "/users/7", json!({"name": "Ada"}))]),
        )
        .await;

    let records = system.wait_dead_letters(1, DEADLINE).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_dead_letter_path(&records[0].path, "rejected", "CRM");
    let record = &records[0].record;
    assert_eq!(record["id"], "signup-7");
    assert_eq!(record["data"], json!({"name": "Ada"}));
    assert_eq!(record["deadLetterReason"], "NonRetriableFailure");
    assert_eq!(record["deliveryAttempts"], 1);
    assert_eq!(record["lastDeliveryOutcome"], "BadRequest");
    assert_eq!(record["lastHttpStatusCode"], 400);
    // Once dead-lettered the delivery is over: it was attempted exactly once.
    assert_eq!(receiver.count(), 1, "a 400 was retried");
    let text = system.sender_metrics().await;
    assert_eq!(
        metric(
            &text,
            "DeadLetteredCount",
            &[("subscription", "crm"), ("reason", "NonRetriableFailure")]
        ),
        1.0
    );
}

/// Slow: the smallest time-to-live is one minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_past_its_time_to_live_is_dead_lettered() {
    let system = System::start(Options::default().retry_schedule("5s")).await;
    let receiver = Receiver::start(Behaviour::Status(503)).await;
    system.create_topic("telemetry").await;
    let body = subscription(
        receiver.url(),
        json!({
            "retryPolicy": {"maxDeliveryAttempts": 30, "eventTimeToLiveInMinutes": 1},
            "deadLetterDestination": dead_letter_to("expired"),
        }),
    );
    system.create_subscription("telemetry", "Archive", body).await;
    let published = Instant::now();
    system
        .publish_ok(
            "telemetry",
            &json!([event(
                "reading-1",
                "Sensor.Reading",
                "/sensors/1",
                json!({"celsius": 21})
            )]),
        )
        .await;

    let records = system.wait_dead_letters(1, Duration::from_secs(120)).await;
    let elapsed = published.elapsed();
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(
        elapsed >= Duration::from_secs(59),
        "dead-lettered after {elapsed:?}, before the 1 minute time-to-live"
    );
    // At the deadline, not at some later scheduled attempt (plus the 1 s batching delay).
    assert!(
        elapsed <= Duration::from_secs(75),
        "dead-lettered {elapsed:?} after publishing, long past the time-to-live"
    );
    assert_dead_letter_path(&records[0].path, "expired", "ARCHIVE");
    let record = &records[0].record;
    assert_eq!(record["id"], "reading-1");
    assert_eq!(record["deadLetterReason"], "TimeToLiveExceeded");
    assert_eq!(record["lastDeliveryOutcome"], "Busy");
    assert_eq!(record["lastHttpStatusCode"], 503);

    let received = receiver.received();
    let attempts = record["deliveryAttempts"].as_u64().unwrap();
    assert_eq!(
        attempts as usize,
        received.len(),
        "deliveryAttempts should count every request the endpoint saw"
    );
    // Every 5 s for a minute: about 12 attempts, far from the 30 allowed.
    assert!(
        (8..30).contains(&attempts),
        "{attempts} attempts in a minute with a 5 s schedule"
    );
    for (i, request) in received.iter().enumerate() {
        assert_eq!(request.header("aeg-delivery-count"), Some(i.to_string().as_str()));
        let since = request.at - published;
        assert!(
            since < Duration::from_secs(61),
            "attempt {i} was made {since:?} after publishing, past the time-to-live"
        );
    }
    for pair in received.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_millis(4800),
            "retried after {gap:?}; the schedule says 5 s"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_dead_letter_destination_a_failed_event_is_dropped_and_counted() {
    let system = System::start(Options::default()).await;
    let dropping = Receiver::start(Behaviour::Status(400)).await;
    let witness = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("alerts").await;
    system
        .create_subscription("alerts", "NoDeadLetter", subscription(dropping.url(), json!({})))
        .await;
    // The same event to a subscription that does dead-letter: once its record is on disk,
    // a record for the other one would be too.
    let witness_body = subscription(
        witness.url(),
        json!({"deadLetterDestination": dead_letter_to("witness")}),
    );
    system.create_subscription("alerts", "Witness", witness_body).await;
    system
        .publish_ok(
            "alerts",
            &json!([event("alert-1", "Alert.Raised", "/alerts/1", json!({"level": "high"}))]),
        )
        .await;

    eventually(
        DEADLINE,
        "DroppedEventCount for the subscription without a destination",
        || async {
            let text = system.sender_metrics().await;
            let labels = [
                ("topic", "alerts"),
                ("subscription", "nodeadletter"),
                ("reason", "NonRetriableFailure"),
            ];
            (metric(&text, "DroppedEventCount", &labels) >= 1.0).then_some(())
        },
    )
    .await;
    let records = system.wait_dead_letters(1, DEADLINE).await;
    assert_eq!(records.len(), 1, "only the witness's record: {records:?}");
    assert_dead_letter_path(&records[0].path, "witness", "WITNESS");
    assert_eq!(records[0].record["id"], "alert-1");

    let text = system.sender_metrics().await;
    let labels = [("topic", "alerts"), ("subscription", "nodeadletter")];
    assert_eq!(
        metric(
            &text,
            "DroppedEventCount",
            &[labels[0], labels[1], ("reason", "NonRetriableFailure")]
        ),
        1.0
    );
    assert_eq!(metric(&text, "DroppedEventCount", &labels), 1.0);
    assert_eq!(metric(&text, "DeadLetteredCount", &labels), 0.0);
    assert_eq!(dropping.count(), 1, "a 400 was retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_subscription_gets_exactly_the_events_its_filter_matches() {
    let system = System::start(Options::default()).await;
    let created = Receiver::start(Behaviour::Status(200)).await;
    let europe = Receiver::start(Behaviour::Status(200)).await;
    let all = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("shop").await;
    let by_type = json!({"filter": {"includedEventTypes": ["Order.Created", "Order.Paid"]}});
    system
        .create_subscription("shop", "Created", subscription(created.url(), by_type))
        .await;
    let by_subject = json!({"filter": {"subjectBeginsWith": "/eu/"}});
    system
        .create_subscription("shop", "Europe", subscription(europe.url(), by_subject))
        .await;
    system
        .create_subscription("shop", "All", subscription(all.url(), json!({})))
        .await;

    system
        .publish_ok(
            "shop",
            &json!([
                event("e1", "Order.Created", "/eu/orders/1", json!(1)),
                event("e2", "Order.Created", "/us/orders/2", json!(2)),
                event("e3", "Order.Shipped", "/eu/orders/3", json!(3)),
            ]),
        )
        .await;
    system
        .publish_ok(
            "shop",
            &json!([
                event("e4", "Order.Shipped", "/us/orders/4", json!(4)),
                // Event types and (by default) subjects compare case-insensitively.
                event("e5", "order.created", "/EU/orders/5", json!(5)),
                // Neither a listed type nor the subject prefix "/eu/".
                event("e6", "Order.CreatedLater", "/europe/6", Value::Null),
                event("e7", "Order.Paid", "/eu", json!({"x": 7})),
            ]),
        )
        .await;

    let expected_created = strings(&["e1", "e2", "e5", "e7"]);
    let expected_europe = strings(&["e1", "e3", "e5"]);
    let expected_all = strings(&["e1", "e2", "e3", "e4", "e5", "e6", "e7"]);
    let deliveries = (expected_created.len() + expected_europe.len() + expected_all.len()) as f64;

    // Every delivery fan-out created has been settled as delivered...
    wait_successes(&system, "shop", deliveries).await;
    let ingress = system.ingress_metrics().await;
    assert_eq!(
        metric(&ingress, "MatchedEventCount", &[("topic", "shop")]),
        deliveries,
        "{ingress}"
    );
    // ...and each endpoint got exactly its matching events, each once.
    assert_eq!(sorted(created.event_ids()), expected_created);
    assert_eq!(sorted(europe.event_ids()), expected_europe);
    assert_eq!(sorted(all.event_ids()), expected_all);
    for (receiver, name) in [(&created, "CREATED"), (&europe, "EUROPE"), (&all, "ALL")] {
        for request in receiver.received() {
            assert_eq!(request.header("aeg-subscription-name"), Some(name));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_change_applies_to_the_next_publish_in_every_tier() {
    // Catalog copies refresh only once a minute: only read-your-writes can pass this.
    let system = System::start(Options::default().env("EG__CATALOG__REFRESH_INTERVAL", "60s")).await;
    let before = Receiver::start(Behaviour::Status(200)).await;
    let after = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "audit", subscription(before.url(), json!({})))
        .await;
    system
        .publish_ok("orders", &json!([event("e-1", "Order.Created", "/o/1", json!({}))]))
        .await;
    before.wait_for(1, DEADLINE).await;

    // The sender knows the old endpoint; the change must reach it before the next delivery.
    system
        .create_subscription("orders", "audit", subscription(after.url(), json!({})))
        .await;
    system
        .publish_ok("orders", &json!([event("e-2", "Order.Created", "/o/2", json!({}))]))
        .await;
    after.wait_for(1, DEADLINE).await;
    assert_eq!(after.event_ids(), ["e-2"]);
    assert_eq!(
        before.event_ids(),
        ["e-1"],
        "nothing went to the endpoint the subscription left"
    );
}
