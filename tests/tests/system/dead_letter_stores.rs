//! Dead letters in object storage: subscriptions whose dead-letter destination is a
//! container of an Azure storage account (Azurite, Microsoft's emulator) or a bucket
//! through an S3 connection (moto's S3 server, with signatures checked). Each test starts
//! its own emulators; the tiers get the `[storage]` settings through the environment, as
//! an operator would give them.

use eg_system_tests::{Behaviour, json_reply};
use eg_system_tests::{
    DEADLINE, DeadLettered, Options, Receiver, System, TierId, assert_subscription_refused, azure_dead_letter_to,
    azurite_container, check_dead_letter_operations, create_container, event, eventually, metric, numbered_events,
    object_layout, object_records, refusing_three_times, s3_bucket, s3_dead_letter_to, subscription,
    wait_object_records,
};
use eg_testkit::{Azurite, S3Server};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The S3 connection's name in the tests' `[storage]` settings.
const MOTO: &str = "moto";
/// The key prefix the S3 subscriptions use.
const PREFIX: &str = "eg/dead";
const CLOUD_EVENTS: &str = "application/cloudevents-batch+json; charset=utf-8";

/// Azurite and the S3 server, started side by side (each takes a few seconds).
async fn start_stores() -> (Azurite, S3Server) {
    let azurite = tokio::task::spawn_blocking(Azurite::start);
    let s3 = tokio::task::spawn_blocking(S3Server::start);
    (azurite.await.unwrap(), s3.await.unwrap())
}

/// The harness's options with dead letters written at once and retried soon, and
/// failing endpoints not slowed down by probation (their events are to die quickly).
fn quick(retry_interval: &str) -> Options {
    Options::default()
        .env("EG__PROBATION__ENABLED", "false")
        .env("EG__DEADLETTER__DELAY", "0s")
        .env("EG__DEADLETTER__INTERVAL", "100ms")
        .env("EG__DEADLETTER__RETRY_INTERVAL", retry_interval)
}

/// A subscription of `receiver` dead-lettering to `destination` after one attempt.
fn dying(receiver: &Receiver, destination: Value, extra: Value) -> Value {
    let mut properties = json!({
        "retryPolicy": {"maxDeliveryAttempts": 1, "eventTimeToLiveInMinutes": 1440},
        "deadLetterDestination": destination,
    });
    for (k, v) in extra.as_object().unwrap() {
        properties[k] = v.clone();
    }
    subscription(receiver.url(), properties)
}

/// Publishes CloudEvents (a batch) to a CloudEvents topic with its key.
async fn publish_cloud_events(system: &System, topic: &str, key: &str, events: &Value) {
    let response = system
        .http()
        .post(format!(
            "{}/topics/{topic}/api/events?api-version=2018-01-01",
            system.ingress_url()
        ))
        .header("content-type", CLOUD_EVENTS)
        .header("aeg-sas-key", key)
        .body(events.to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = json_reply(response).await;
    assert_eq!(status, StatusCode::OK, "publish to {topic}: {body}");
}

/// Records by subscription folder; the layout of every object checked on the way.
fn by_subscription(records: &[DeadLettered], container: &str, key_prefix: &str) -> BTreeMap<String, Vec<Value>> {
    let mut found: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for r in records {
        let (in_container, folder) = object_layout(&r.path, key_prefix);
        assert_eq!(in_container, container, "{}", r.path.display());
        found.entry(folder).or_default().push(r.record.clone());
    }
    found
}

fn only<'a>(found: &'a BTreeMap<String, Vec<Value>>, folder: &str) -> &'a Value {
    let records = found
        .get(folder)
        .unwrap_or_else(|| panic!("no record for {folder}: {found:?}"));
    assert_eq!(records.len(), 1, "one record for {folder}: {records:?}");
    &records[0]
}

/// The value of `DeadLetterWriteFailCount` for `store` and `kind` on the dead-letter tier.
async fn write_failures(system: &System, store: &str, kind: &str) -> f64 {
    metric(
        &system.deadletter_metrics().await,
        "DeadLetterWriteFailCount",
        &[("store", store), ("kind", kind)],
    )
}

/// Waits until `topic/subscription`'s dead letters are recorded as failing with `kind`.
async fn wait_problem(system: &System, topic: &str, subscription: &str, kind: &str) -> eg_store::DestinationProblem {
    let store = system.store();
    eventually(
        DEADLINE,
        &format!("{topic}/{subscription} failing with {kind}"),
        || async {
            let problem = store.dead_letter_problem(topic, subscription).await.unwrap();
            problem.filter(|p| p.kind == kind)
        },
    )
    .await
}

/// Waits until no dead-letter record is left in Redis: then no worker holds one to write.
async fn wait_all_finished(system: &System) {
    eventually(DEADLINE, "every dead-letter record finished", || async {
        let keys = system.keyspace();
        let left: u64 = (0..keys.partitions())
            .map(|p| {
                let stream = keys.partition(p).deadletter();
                system.redis_cli(&["XLEN", &stream]).parse::<u64>().unwrap()
            })
            .sum();
        (left == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_form_and_reason_reaches_azurite_and_s3_in_the_blob_layout() {
    let (azurite, s3) = start_stores().await;
    create_container(&azurite, "dead");
    s3.create_bucket("dead");
    let system = System::start(quick("2s").azurite(&azurite).s3_server(&s3, MOTO)).await;
    let failing = Receiver::start(Behaviour::Status(500)).await;
    let rejecting = Receiver::start(Behaviour::Status(400)).await;
    let azure = || azure_dead_letter_to("dead");
    let s3_dest = || s3_dead_letter_to(MOTO, "dead", PREFIX);

    // Event Grid schema, delivered as Event Grid events and as CloudEvents.
    system.create_topic("orders").await;
    for (name, receiver, destination, schema) in [
        ("EgAzure", &failing, azure(), "EventGridSchema"),
        ("EgS3", &rejecting, s3_dest(), "EventGridSchema"),
        ("CeAzure", &rejecting, azure(), "CloudEventSchemaV1_0"),
        ("CeS3", &failing, s3_dest(), "CloudEventSchemaV1_0"),
    ] {
        let body = dying(receiver, destination, json!({"eventDeliverySchema": schema}));
        system.create_subscription("orders", name, body).await;
    }
    // A custom input schema, delivered as published.
    system
        .create_topic_with(
            "shop",
            json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": {
                "inputSchemaMappingType": "Json",
                "properties": {"id": {"sourceField": "orderNumber"}, "eventType": {"defaultValue": "Order.Placed"},
                               "subject": {"defaultValue": "/orders"}, "dataVersion": {"defaultValue": "1.0"}}
            }}),
        )
        .await;
    for (name, receiver, destination) in [("CuAzure", &failing, azure()), ("CuS3", &rejecting, s3_dest())] {
        let body = dying(
            receiver,
            destination,
            json!({"eventDeliverySchema": "CustomInputSchema"}),
        );
        system.create_subscription("shop", name, body).await;
    }
    // A namespace topic: pushed (its own form) and pulled (a consumer rejects).
    let ns_key = system
        .create_topic_with(
            "ns-orders",
            json!({"inputSchema": "CloudEventSchemaV1_0", "deliveryProfile": "NamespaceTopic"}),
        )
        .await;
    for (name, receiver, destination) in [("NsAzure", &rejecting, azure()), ("NsS3", &failing, s3_dest())] {
        let body = subscription(
            receiver.url(),
            json!({"retryPolicy": {"maxDeliveryCount": 1, "eventTimeToLive": "P1D"}, "deadLetterDestination": destination}),
        );
        system.create_subscription("ns-orders", name, body).await;
    }
    for (name, destination) in [("PullAzure", azure()), ("PullS3", s3_dest())] {
        let body = json!({"properties": {
            "deliveryConfiguration": {"deliveryMode": "Queue", "queue": {
                "receiveLockDurationInSeconds": 60, "maxDeliveryCount": 10, "eventTimeToLive": "P1D",
                "deadLetterDestinationWithResourceIdentity": {"deadLetterDestination": destination}}},
            "eventDeliverySchema": "CloudEventSchemaV1_0",
        }});
        let (status, answer) = system.put_subscription("ns-orders", name, &body).await;
        assert!(status.is_success(), "PUT {name}: {status} {answer}");
    }

    system
        .publish_ok(
            "orders",
            &json!([eg_system_tests::event(
                "eg-1",
                "Order.Placed",
                "/orders/1",
                json!({"n": 1})
            )]),
        )
        .await;
    system
        .publish_ok("shop", &json!([{"orderNumber": "cu-1", "total": 5}]))
        .await;
    let ns_event =
        json!({"specversion": "1.0", "id": "ns-1", "source": "/ns", "type": "Ns.Happened", "data": {"n": 1}});
    publish_cloud_events(&system, "ns-orders", &ns_key, &json!([ns_event])).await;
    for name in ["PullAzure", "PullS3"] {
        reject_one(&system, &ns_key, name).await;
    }

    let azure_store = azurite_container(&azurite, "dead");
    let s3_store = s3_bucket(&s3, "dead");
    let in_azure = by_subscription(
        &wait_object_records(azure_store.as_ref(), "dead", 5, DEADLINE).await,
        "dead",
        "",
    );
    let in_s3 = by_subscription(
        &wait_object_records(s3_store.as_ref(), "dead", 5, DEADLINE).await,
        "dead",
        PREFIX,
    );

    // Event Grid form.
    let record = only(&in_azure, "EGAZURE");
    assert_eq!(
        (record["id"].as_str(), record["data"]["n"].as_u64()),
        (Some("eg-1"), Some(1))
    );
    assert_eq!(record["deadLetterReason"], "MaxDeliveryAttemptsExceeded", "{record}");
    assert_eq!(record["lastHttpStatusCode"], 500);
    let record = only(&in_s3, "EGS3");
    assert_eq!(record["id"], "eg-1");
    assert_eq!(record["deadLetterReason"], "NonRetriableFailure", "{record}");
    // CloudEvents form: lower-case names beside the event's attributes.
    let record = only(&in_azure, "CEAZURE");
    assert_eq!(
        (record["specversion"].as_str(), record["id"].as_str()),
        (Some("1.0"), Some("eg-1"))
    );
    assert_eq!(record["deadletterreason"], "NonRetriableFailure", "{record}");
    let record = only(&in_s3, "CES3");
    assert_eq!(record["deadletterreason"], "MaxDeliveryAttemptsExceeded", "{record}");
    // Custom form: the envelope with the published object in `data`.
    for (found, folder, reason) in [
        (&in_azure, "CUAZURE", "MaxDeliveryAttemptsExceeded"),
        (&in_s3, "CUS3", "NonRetriableFailure"),
    ] {
        let record = only(found, folder);
        assert_eq!(record["data"], json!({"orderNumber": "cu-1", "total": 5}), "{record}");
        assert_eq!(record["deadLetterReason"], reason, "{record}");
    }
    // Namespace form: {"deadLetterProperties", "event"}, pushed and pulled.
    for (found, folder, reason) in [
        (&in_azure, "NSAZURE", "NonRetriableFailure"),
        (&in_s3, "NSS3", "MaxDeliveryAttemptsExceeded"),
        (&in_azure, "PULLAZURE", "Rejected"),
        (&in_s3, "PULLS3", "Rejected"),
    ] {
        let record = only(found, folder);
        assert_eq!(record["event"], ns_event, "{record}");
        assert_eq!(record["deadLetterProperties"]["deadletterreason"], reason, "{record}");
    }
    assert_eq!(in_azure.values().map(Vec::len).sum::<usize>(), 5, "{in_azure:?}");
    assert_eq!(in_s3.values().map(Vec::len).sum::<usize>(), 5, "{in_s3:?}");
    // Nothing went to the local directory.
    assert!(
        system.dead_letter_records().is_empty(),
        "{:?}",
        system.dead_letter_records()
    );
}

/// Receives the one event of the queue subscription `name` and rejects it.
async fn reject_one(system: &System, key: &str, name: &str) {
    lock_one(system, key, name, "reject").await;
}

/// Receives the one event of the queue subscription `name` and settles its lock with
/// `operation` (`reject`, `release`).
async fn lock_one(system: &System, key: &str, name: &str, operation: &str) {
    let api = "api-version=2024-06-01";
    let base = format!("{}/topics/ns-orders/eventsubscriptions/{name}", system.ingress_url());
    let item = eventually(DEADLINE, &format!("an event to receive from {name}"), || async {
        let response = system
            .http()
            .post(format!("{base}:receive?{api}&maxEvents=1&maxWaitTime=10"))
            .header("aeg-sas-key", key)
            .send()
            .await
            .unwrap();
        let (status, answer) = json_reply(response).await;
        assert_eq!(status, StatusCode::OK, "receive: {answer}");
        answer["value"].as_array().and_then(|v| v.first()).cloned()
    })
    .await;
    let token = item["brokerProperties"]["lockToken"].as_str().unwrap();
    let response = system
        .http()
        .post(format!("{base}:{operation}?{api}"))
        .header("aeg-sas-key", key)
        .header("content-type", "application/json")
        .body(json!({"lockTokens": [token]}).to_string())
        .send()
        .await
        .unwrap();
    let (status, answer) = json_reply(response).await;
    assert_eq!(status, StatusCode::OK, "{operation}: {answer}");
    assert_eq!(answer["succeededLockTokens"], json!([token]), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_eg_has_no_configuration_for_is_refused_naming_the_field() {
    let system = System::start(Options::default()).await;
    system.create_topic("orders").await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let body = subscription(
        receiver.url(),
        json!({"deadLetterDestination": azure_dead_letter_to("dead")}),
    );
    assert_subscription_refused(
        &system,
        "orders",
        "Billing",
        &body,
        "properties.deadLetterDestination.properties.resourceId",
    )
    .await;
    let body = subscription(
        receiver.url(),
        json!({"deadLetterDestination": s3_dead_letter_to(MOTO, "dead", "")}),
    );
    assert_subscription_refused(
        &system,
        "orders",
        "Billing",
        &body,
        "properties.deadLetterDestination.properties.connection",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_is_down_keeps_the_records_until_it_is_back() {
    // Azurite: moto's restart replays its setup, and a request arriving meanwhile changes
    // the access key it hands out, so it cannot stand for a store that comes back as it was.
    let mut azurite = tokio::task::spawn_blocking(Azurite::start).await.unwrap();
    create_container(&azurite, "dead");
    let mut system = System::start(quick("1s").azurite(&azurite)).await;
    // Two workers: records whose write failed are claimed again by either.
    system.start_extra_dead_letter_worker().await;
    let rejecting = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("orders").await;
    let to_azure = dying(&rejecting, azure_dead_letter_to("dead"), json!({}));
    system.create_subscription("orders", "Billing", to_azure).await;

    // Down (Azurite saves its data first, as a real account keeps what it acknowledged).
    azurite.stop();
    system
        .publish_ok("orders", &json!(numbered_events("down", 0..20)))
        .await;
    eventually(DEADLINE, "failed writes", || async {
        let failed = write_failures(&system, "azure:devstoreaccount1", "Unavailable").await;
        (failed >= 1.0).then_some(())
    })
    .await;
    let problem = wait_problem(&system, "orders", "Billing", "Unavailable").await;
    assert_eq!(
        (problem.store.as_str(), problem.container.as_str()),
        ("azure:devstoreaccount1", "dead")
    );

    // Back: every record written, each once, and nothing dropped.
    let azurite = tokio::task::spawn_blocking(move || {
        azurite.start_again();
        azurite
    })
    .await
    .unwrap();
    let store = azurite_container(&azurite, "dead");
    wait_object_records(store.as_ref(), "dead", 20, DEADLINE * 2).await;
    wait_all_finished(&system).await;
    let mut ids: Vec<String> = object_records(store.as_ref(), "dead")
        .await
        .iter()
        .map(|r| {
            object_layout(&r.path, "");
            r.record["id"].as_str().unwrap().to_owned()
        })
        .collect();
    ids.sort();
    let mut expected: Vec<String> = (0..20).map(|n| format!("down-{n}")).collect();
    expected.sort();
    assert_eq!(ids, expected, "each record once");
    let dropped = metric(&system.deadletter_metrics().await, "DroppedEventCount", &[]);
    assert_eq!(dropped, 0.0);
    assert_eq!(
        system.store().dead_letter_problem("orders", "Billing").await.unwrap(),
        None,
        "cleared"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_a_store_down_past_give_up_after_are_dropped_counted_and_gone_from_redis() {
    let mut azurite = tokio::task::spawn_blocking(Azurite::start).await.unwrap();
    create_container(&azurite, "dead");
    let options = quick("1s").azurite(&azurite).env("EG__DEADLETTER__GIVE_UP_AFTER", "2s");
    let system = System::start(options).await;
    let rejecting = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("orders").await;
    let to_azure = dying(&rejecting, azure_dead_letter_to("dead"), json!({}));
    system.create_subscription("orders", "Billing", to_azure).await;

    azurite.stop();
    system.publish_ok("orders", &json!(numbered_events("lost", 0..3))).await;
    let reason = [("reason", "DeadLetterDestinationUnavailable")];
    eventually(DEADLINE, "three records dropped", || async {
        let dropped = metric(&system.deadletter_metrics().await, "DroppedEventCount", &reason);
        (dropped >= 3.0).then_some(())
    })
    .await;
    let page = system.deadletter_metrics().await;
    let labels = [("topic", "orders"), ("subscription", "billing"), reason[0]];
    assert_eq!(metric(&page, "DroppedEventCount", &labels), 3.0, "each record once");
    assert!(write_failures(&system, "azure:devstoreaccount1", "Unavailable").await >= 1.0);
    wait_all_finished(&system).await;
    assert_eq!(
        system.redis_keys("*deadletter:object*"),
        Vec::<String>::new(),
        "no object name outlives its records"
    );

    // Dropped, not written late: the store back, nothing arrives.
    let azurite = tokio::task::spawn_blocking(move || {
        azurite.start_again();
        azurite
    })
    .await
    .unwrap();
    let store = azurite_container(&azurite, "dead");
    assert_eq!(object_records(store.as_ref(), "dead").await.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_and_missing_containers_are_seen_and_written_once_fixed() {
    let (azurite, s3) = start_stores().await;
    create_container(&azurite, "dead");
    s3.create_bucket("dead");
    let wrong_key = "d3JvbmcgYWNjb3VudCBrZXkgZm9yIHRoZSBlZyB0ZXN0cw==";
    let options = quick("1s")
        .azurite_with_key(&azurite, wrong_key)
        .s3_server(&s3, MOTO)
        .s3_server_with_secret(&s3, "moto_wrong", "not-the-secret-of-the-eg-test-user-0000");
    let mut system = System::start(options).await;
    let rejecting = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("orders").await;
    for (name, destination) in [
        ("WrongKey", azure_dead_letter_to("dead")),
        ("NoContainer", azure_dead_letter_to("later")),
        ("NoBucket", s3_dead_letter_to(MOTO, "absent", "")),
        ("WrongSecret", s3_dead_letter_to("moto_wrong", "dead", "")),
    ] {
        let body = dying(&rejecting, destination, json!({}));
        system.create_subscription("orders", name, body).await;
    }
    system.publish_ok("orders", &json!(numbered_events("cfg", 0..3))).await;

    // Seen: the metric by store and kind, and each subscription's problem. A refused key
    // or secret is `Unauthenticated`, though both stores answer it with a 403.
    for (subscription, kind) in [
        ("WrongKey", "Unauthenticated"),
        ("NoContainer", "Unauthenticated"),
        ("NoBucket", "ContainerNotFound"),
        ("WrongSecret", "Unauthenticated"),
    ] {
        wait_problem(&system, "orders", subscription, kind).await;
    }
    assert!(write_failures(&system, "azure:devstoreaccount1", "Unauthenticated").await >= 1.0);
    assert!(write_failures(&system, "s3:moto", "ContainerNotFound").await >= 1.0);
    assert!(write_failures(&system, "s3:moto_wrong", "Unauthenticated").await >= 1.0);
    assert_eq!(write_failures(&system, "s3:moto_wrong", "PermissionDenied").await, 0.0);
    // The problem quotes what the store said, with its status and code.
    let refused_key = wait_problem(&system, "orders", "WrongKey", "Unauthenticated").await;
    assert!(
        refused_key
            .message
            .starts_with("Server failed to authenticate the request.")
            && refused_key.message.ends_with("(403 AuthorizationFailure)"),
        "{}",
        refused_key.message
    );
    let wrong_secret = wait_problem(&system, "orders", "WrongSecret", "Unauthenticated").await;
    assert!(
        wrong_secret.message.ends_with("(403 SignatureDoesNotMatch)"),
        "{}",
        wrong_secret.message
    );
    let problem = wait_problem(&system, "orders", "NoBucket", "ContainerNotFound").await;
    assert_eq!(
        (problem.store.as_str(), problem.container.as_str()),
        ("s3:moto", "absent")
    );
    assert!(!problem.message.contains(&s3.credentials().secret_access_key));
    // The log names the subscription, the store and the container, never a key.
    let logs = system.logs();
    let warned = logs
        .iter()
        .filter(|(file, _)| file.starts_with("deadletter"))
        .flat_map(|(_, text)| text.lines())
        .any(|line| line.contains("NoBucket") && line.contains("s3:moto") && line.contains("absent"));
    assert!(warned, "no warning naming NoBucket, s3:moto and absent");
    assert!(
        logs.iter()
            .all(|(_, text)| !text.contains(wrong_key) && !text.contains("GMGw==")),
        "a key was logged"
    );

    // Fixed: the right key and secret (a configuration change), the missing bucket made.
    s3.create_bucket("absent");
    let right_key = azurite.connection_string();
    let right_secret = s3.credentials().secret_access_key;
    system
        .restart_with(
            TierId::DeadLetter,
            &[
                ("EG__STORAGE__ACCOUNTS__DEVSTOREACCOUNT1__CONNECTION_STRING", &right_key),
                ("EG__STORAGE__S3__MOTO_WRONG__SECRET_ACCESS_KEY", &right_secret),
            ],
        )
        .await;
    // Now the account's key is right, the missing container shows as such; then made.
    wait_problem(&system, "orders", "NoContainer", "ContainerNotFound").await;
    create_container(&azurite, "later");

    for (store, container, count) in [
        (azurite_container(&azurite, "dead"), "dead", 3),
        (azurite_container(&azurite, "later"), "later", 3),
        (s3_bucket(&s3, "absent"), "absent", 3),
        (s3_bucket(&s3, "dead"), "dead", 3),
    ] {
        let records = wait_object_records(store.as_ref(), container, count, DEADLINE * 2).await;
        assert_eq!(records.len(), count, "{container}: {records:?}");
    }
    let store = system.store();
    eventually(DEADLINE, "every problem cleared", || async {
        store.dead_letter_problems().await.unwrap().is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_in_azurite_and_s3_are_listed_shown_redriven_and_purged_as_local_ones() {
    let (azurite, s3) = start_stores().await;
    create_container(&azurite, "dead");
    s3.create_bucket("dead");
    let system = System::start(quick("1s").azurite(&azurite).s3_server(&s3, MOTO)).await;
    let to_azure = refusing_three_times().await;
    let to_s3 = refusing_three_times().await;
    for (topic, receiver, destination) in [
        ("orders", &to_azure, azure_dead_letter_to("dead")),
        ("invoices", &to_s3, s3_dead_letter_to(MOTO, "dead", PREFIX)),
    ] {
        system.create_topic(topic).await;
        let body = subscription(receiver.url(), json!({"deadLetterDestination": destination}));
        system.create_subscription(topic, "Billing", body).await;
    }

    check_dead_letter_operations(&system, &to_azure, "orders", "Billing").await;
    check_dead_letter_operations(&system, &to_s3, "invoices", "Billing").await;

    // The objects were written, and stay: a purge forgets eg's copy, not the store's.
    for (store, key_prefix) in [
        (azurite_container(&azurite, "dead"), ""),
        (s3_bucket(&s3, "dead"), PREFIX),
    ] {
        let records = wait_object_records(store.as_ref(), "dead", 3, DEADLINE).await;
        let found = by_subscription(&records, "dead", key_prefix);
        let mut ids: Vec<&str> = found["BILLING"].iter().filter_map(|r| r["id"].as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["a", "b", "c"], "{key_prefix:?}: {records:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_write_every_record_to_exactly_one_object() {
    let azurite = tokio::task::spawn_blocking(Azurite::start).await.unwrap();
    create_container(&azurite, "dead");
    let mut system = System::start(quick("2s").azurite(&azurite)).await;
    system.start_extra_dead_letter_worker().await;
    let rejecting = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("orders").await;
    let body = dying(&rejecting, azure_dead_letter_to("dead"), json!({}));
    system.create_subscription("orders", "Billing", body).await;
    for batch in 0..4 {
        let events = numbered_events(&format!("two-{batch}"), 0..50);
        system.publish_ok("orders", &json!(events)).await;
    }

    let store = azurite_container(&azurite, "dead");
    let records = wait_object_records(store.as_ref(), "dead", 200, DEADLINE * 2).await;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for r in &records {
        object_layout(&r.path, "");
        *seen.entry(r.record["id"].as_str().unwrap().to_owned()).or_default() += 1;
    }
    assert_eq!(seen.len(), 200, "every record");
    // Once no record is left in Redis, no worker holds one to write: count again.
    wait_all_finished(&system).await;
    let records = object_records(store.as_ref(), "dead").await;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for r in &records {
        *seen.entry(r.record["id"].as_str().unwrap().to_owned()).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "records in more than one object: {twice:?}");
    assert_eq!(records.len(), 200, "every record once");
}

/// An S3 connection configured without keys takes them as AWS's chain does: here from the
/// profile `AWS_PROFILE` names in the shared files, with that profile's region.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_connection_without_keys_signs_with_the_aws_profile_of_the_environment() {
    let s3 = tokio::task::spawn_blocking(S3Server::start).await.unwrap();
    s3.create_bucket("profile-dead");
    let credentials = s3.credentials();
    let dir = tempfile::tempdir().unwrap();
    let (credentials_file, config_file) = (dir.path().join("credentials"), dir.path().join("config"));
    std::fs::write(
        &credentials_file,
        format!(
            "[default]\naws_access_key_id = AKIAWRONGDEFAULT\naws_secret_access_key = wrong\n\n[deadletters]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            credentials.access_key_id, credentials.secret_access_key
        ),
    )
    .unwrap();
    std::fs::write(
        &config_file,
        format!("[profile deadletters]\nregion = {}\n", s3.region()),
    )
    .unwrap();
    let options = quick("2s")
        .env("EG__STORAGE__S3__PROFILED__ENDPOINT_URL", &s3.endpoint())
        .env("AWS_SHARED_CREDENTIALS_FILE", &credentials_file.display().to_string())
        .env("AWS_CONFIG_FILE", &config_file.display().to_string())
        .env("AWS_PROFILE", "deadletters");
    let system = System::start(options).await;
    let rejecting = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("orders").await;
    let body = dying(&rejecting, s3_dead_letter_to("profiled", "profile-dead", ""), json!({}));
    system.create_subscription("orders", "Billing", body).await;
    system
        .publish_ok(
            "orders",
            &json!([event("profiled-1", "Test.Happened", "/things/1", json!({}))]),
        )
        .await;

    let store = s3_bucket(&s3, "profile-dead");
    let records = wait_object_records(store.as_ref(), "profile-dead", 1, DEADLINE).await;
    assert_eq!(records[0].record["id"], "profiled-1", "{records:?}");
}

/// The reasons that take a count or a time: `MaxDeliveryCountExceeded` (a pulled event
/// released once with `maxDeliveryCount` 1) reaches S3, and `TimeToLiveExceeded` (a
/// pushed event failing until its one-minute time-to-live ends) reaches Azure Blob.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_count_and_time_reasons_reach_the_stores_too() {
    let (azurite, s3) = start_stores().await;
    create_container(&azurite, "dead");
    s3.create_bucket("dead");
    // Retries far apart, so the time-to-live ends before the attempts do.
    let options = quick("2s").azurite(&azurite).s3_server(&s3, MOTO).retry_schedule("25s");
    let system = System::start(options).await;
    let failing = Receiver::start(Behaviour::Status(500)).await;
    system.create_topic("orders").await;
    let body = subscription(
        failing.url(),
        json!({"retryPolicy": {"maxDeliveryAttempts": 30, "eventTimeToLiveInMinutes": 1},
               "deadLetterDestination": azure_dead_letter_to("dead")}),
    );
    system.create_subscription("orders", "Expiring", body).await;
    let ns_key = system
        .create_topic_with(
            "ns-orders",
            json!({"inputSchema": "CloudEventSchemaV1_0", "deliveryProfile": "NamespaceTopic"}),
        )
        .await;
    let body = json!({"properties": {
        "deliveryConfiguration": {"deliveryMode": "Queue", "queue": {
            "receiveLockDurationInSeconds": 60, "maxDeliveryCount": 1, "eventTimeToLive": "P1D",
            "deadLetterDestinationWithResourceIdentity": {"deadLetterDestination": s3_dead_letter_to(MOTO, "dead", PREFIX)}}},
        "eventDeliverySchema": "CloudEventSchemaV1_0",
    }});
    let (status, answer) = system.put_subscription("ns-orders", "Counted", &body).await;
    assert!(status.is_success(), "PUT: {status} {answer}");

    let published = eg_system_tests::event("ttl-1", "Order.Placed", "/orders/1", json!({"n": 1}));
    system.publish_ok("orders", &json!([published])).await;
    let ns_event = json!({"specversion": "1.0", "id": "count-1", "source": "/ns", "type": "Ns.Happened"});
    publish_cloud_events(&system, "ns-orders", &ns_key, &json!([ns_event])).await;
    release_one(&system, &ns_key, "Counted").await;

    let in_s3 = wait_object_records(s3_bucket(&s3, "dead").as_ref(), "dead", 1, DEADLINE).await;
    let record = &in_s3[0].record;
    assert_eq!(record["event"]["id"], "count-1", "{record}");
    assert_eq!(
        record["deadLetterProperties"]["deadletterreason"], "MaxDeliveryCountExceeded",
        "{record}"
    );
    // The time-to-live is a minute: allow it and the dead-letter write.
    let in_azure = wait_object_records(azurite_container(&azurite, "dead").as_ref(), "dead", 1, DEADLINE * 3).await;
    let record = &in_azure[0].record;
    assert_eq!(record["id"], "ttl-1", "{record}");
    assert_eq!(record["deadLetterReason"], "TimeToLiveExceeded", "{record}");
}

/// Receives the one event of the queue subscription `name` and releases it.
async fn release_one(system: &System, key: &str, name: &str) {
    lock_one(system, key, name, "release").await;
}
