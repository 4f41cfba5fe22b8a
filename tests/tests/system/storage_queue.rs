//! The Storage Queue destination against Azurite's queue service: each event arrives as
//! one base64 message holding the event alone, in the subscription's delivery schema and
//! with its message time-to-live; the queue service's refusals become Event Grid's
//! outcomes (a missing queue retried until it exists, a wrong key and a message over
//! 64 KiB not retried and dead-lettered); an outage of the service is retried through;
//! a dead letter is redriven into the queue; a subscription naming an account eg has no
//! configuration for is refused with a 400.
//!
//! The queue is read back with the queue service's own REST API ([`Queues`], signed with
//! the account key as any Azure client does), so what is checked is what a consumer
//! such as an Azure Functions queue trigger would get.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use eg_system_tests::{DEADLINE, Options, System, assert_refused, dead_letter_to, event, eventually, metric};
use eg_testkit::azurite::{ACCOUNT, ACCOUNT_KEY};
use eg_testkit::{Azurite, http};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

/// The account's setting for every tier: Azurite's connection string.
const ACCOUNT_SETTING: &str = "EG__STORAGE__ACCOUNTS__DEVSTOREACCOUNT1__CONNECTION_STRING";

/// A started Azurite (its start blocks for about 2 s: off the test's runtime).
async fn azurite() -> Azurite {
    tokio::task::spawn_blocking(Azurite::start).await.unwrap()
}

/// An eg deployment with Azurite's account configured, signing with `key`.
async fn system_with_account(azurite: &Azurite, key: &str) -> System {
    system_with(azurite, key, Options::default()).await
}

async fn system_with(azurite: &Azurite, key: &str, options: Options) -> System {
    let connection_string = azurite.connection_string().replace(ACCOUNT_KEY, key);
    System::start(options.env(ACCOUNT_SETTING, &connection_string).retry_schedule("1s")).await
}

/// A StorageQueue destination in Event Grid's JSON, with `extra` merged into its
/// subscription's `properties`.
fn queue_subscription(queue: &str, ttl: Option<i64>, extra: Value) -> Value {
    let mut destination = json!({"endpointType": "StorageQueue", "properties": {
        "resourceId": format!("/subscriptions/0/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/{ACCOUNT}"),
        "queueName": queue}});
    if let Some(ttl) = ttl {
        destination["properties"]["queueMessageTimeToLiveInSeconds"] = json!(ttl);
    }
    let mut properties = json!({"destination": destination});
    if let (Some(target), Value::Object(extra)) = (properties.as_object_mut(), extra) {
        target.extend(extra);
    }
    json!({ "properties": properties })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_is_one_base64_message_in_the_delivery_schema_with_its_time_to_live() {
    let azurite = azurite().await;
    let queues = Queues::of(&azurite);
    for queue in ["orders", "orders-ce", "big"] {
        queues.create(queue);
    }
    let system = system_with_account(&azurite, ACCOUNT_KEY).await;
    system.create_topic("shop").await;
    let orders_only = json!({"includedEventTypes": ["Order.Placed"]});
    system
        .create_subscription(
            "shop",
            "queue",
            queue_subscription("orders", Some(3600), json!({"filter": orders_only})),
        )
        .await;
    system
        .create_subscription(
            "shop",
            "cloudevents",
            queue_subscription(
                "orders-ce",
                Some(-1),
                json!({"filter": orders_only, "eventDeliverySchema": "CloudEventSchemaV1_0"}),
            ),
        )
        .await;
    system
        .create_subscription(
            "shop",
            "big",
            queue_subscription(
                "big",
                None,
                json!({"filter": {"includedEventTypes": ["Order.Huge"]}, "deadLetterDestination": dead_letter_to("dead")}),
            ),
        )
        .await;

    let published = [
        event(
            "o-1",
            "Order.Placed",
            "/orders/1",
            json!({"total": 12.5, "note": "<b>&é</b>"}),
        ),
        event("o-2", "Order.Placed", "/orders/2", json!({"total": 3})),
    ];
    system.publish_ok("shop", &json!(published)).await;

    // Event Grid schema: each message is one event object, as published. Two attempts
    // may run at once, so the queue's order is not the publish order.
    let mut messages = queues.wait_for("orders", 2).await;
    messages.sort_by_key(|m| m.event["id"].as_str().unwrap_or_default().to_owned());
    let ids: Vec<&str> = messages
        .iter()
        .map(|m| m.event["id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, ["o-1", "o-2"], "one message each");
    for (message, published) in messages.iter().zip(&published) {
        for field in ["id", "eventType", "subject", "eventTime", "data"] {
            assert_eq!(message.event[field], published[field], "{field} of {}", message.event);
        }
        assert_eq!(message.event["topic"], "/topics/shop");
        assert_eq!(
            message.lifetime_seconds(),
            Some(3600),
            "queueMessageTimeToLiveInSeconds"
        );
    }

    // CloudEvents delivery: the output conversion applies to each message.
    let mut messages = queues.wait_for("orders-ce", 2).await;
    messages.sort_by_key(|m| m.event["id"].as_str().unwrap_or_default().to_owned());
    let first = &messages[0].event;
    assert_eq!(first["specversion"], "1.0", "{first}");
    assert_eq!(first["id"], "o-1");
    assert_eq!(first["type"], "Order.Placed");
    assert_eq!(first["data"], published[0]["data"]);
    assert_eq!(
        messages[0].expiration, "Fri, 31 Dec 9999 23:59:59 GMT",
        "-1: never expires"
    );

    // Over the queue service's 64 KiB: PayloadTooLarge, not retried, dead-lettered.
    let huge = event("o-3", "Order.Huge", "/orders/3", json!({"blob": "x".repeat(60 * 1024)}));
    system.publish_ok("shop", &json!([huge])).await;
    let records = system.wait_dead_letters(1, DEADLINE).await;
    let record = &records[0].record;
    assert_eq!(record["id"], "o-3");
    assert_eq!(record["deadLetterReason"], "NonRetriableFailure", "{record}");
    assert_eq!(record["lastDeliveryOutcome"], "PayloadTooLarge", "{record}");
    assert_eq!(record["deliveryAttempts"], 1, "{record}");
    assert!(queues.peek("big").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_queue_is_retried_until_it_exists_and_a_dead_letter_is_redriven_into_it() {
    let azurite = azurite().await;
    let queues = Queues::of(&azurite);
    // A missing queue goes on probation (5 min for NotFound) after ten failures in a row,
    // as a webhook URL would; a slow machine must not reach them before the queue exists.
    let options = Options::default().env("EG__PROBATION__FAILURE_THRESHOLD", "1000");
    let system = system_with(&azurite, ACCOUNT_KEY, options).await;
    system.create_topic("shop").await;
    system
        .create_subscription("shop", "patient", queue_subscription("later", None, json!({})))
        .await;
    system
        .create_subscription(
            "shop",
            "brief",
            queue_subscription(
                "gone",
                None,
                json!({"retryPolicy": {"maxDeliveryAttempts": 2}, "deadLetterDestination": dead_letter_to("dead")}),
            ),
        )
        .await;
    system
        .publish_ok("shop", &json!([event("e-1", "Order.Placed", "/orders/1", json!({}))]))
        .await;

    // The brief subscription gives up after its two attempts: NotFound both times.
    let records = system.wait_dead_letters(1, DEADLINE).await;
    let record = &records[0].record;
    assert_eq!(record["deadLetterReason"], "MaxDeliveryAttemptsExceeded", "{record}");
    assert_eq!(record["lastDeliveryOutcome"], "NotFound", "{record}");
    assert_eq!(record["deliveryAttempts"], 2, "{record}");
    // The patient one is still being retried, NotFound each time.
    eventually(DEADLINE, "a second NotFound attempt to the missing queue", || async {
        let labels = [("subscription", "patient"), ("outcome", "NotFound")];
        (metric(&system.sender_metrics().await, "DeliveryAttemptFailCount", &labels) >= 2.0).then_some(())
    })
    .await;

    queues.create("later");
    let delivered = queues.wait_for("later", 1).await;
    assert_eq!(
        delivered[0].event["id"], "e-1",
        "delivered by a retry once the queue exists"
    );

    queues.create("gone");
    let answer = system.redrive_all("shop", "brief").await;
    assert_eq!(answer["redriven"], 1, "{answer}");
    let redriven = queues.wait_for("gone", 1).await;
    assert_eq!(redriven[0].event["id"], "e-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_account_key_is_not_retried_and_an_unknown_account_is_refused() {
    let azurite = azurite().await;
    let queues = Queues::of(&azurite);
    queues.create("orders");
    let wrong_key = STANDARD.encode(b"not the account key of devstoreaccount1");
    let system = system_with_account(&azurite, &wrong_key).await;
    system.create_topic("shop").await;

    let mut unknown = queue_subscription("orders", None, json!({}));
    unknown["properties"]["destination"]["properties"]["resourceId"] =
        json!("/subscriptions/0/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/nosuchaccount");
    let (status, answer) = system.put_subscription("shop", "unknown", &unknown).await;
    let message = assert_refused(status, &answer, "properties.destination.properties.resourceId");
    assert!(
        message.contains("EG__STORAGE__ACCOUNTS__NOSUCHACCOUNT__CONNECTION_STRING"),
        "{message}"
    );

    system
        .create_subscription(
            "shop",
            "queue",
            queue_subscription(
                "orders",
                None,
                json!({"retryPolicy": {"maxDeliveryAttempts": 5}, "deadLetterDestination": dead_letter_to("dead")}),
            ),
        )
        .await;
    system
        .publish_ok("shop", &json!([event("e-1", "Order.Placed", "/orders/1", json!({}))]))
        .await;
    let records = system.wait_dead_letters(1, DEADLINE).await;
    let record = &records[0].record;
    assert_eq!(record["deadLetterReason"], "NonRetriableFailure", "{record}");
    assert_eq!(record["lastDeliveryOutcome"], "Unauthorized", "{record}");
    assert_eq!(record["deliveryAttempts"], 1, "not retried: {record}");
    assert!(queues.peek("orders").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_during_an_outage_of_the_queue_service_arrive_after_it() {
    let mut azurite = azurite().await;
    let queues = Queues::of(&azurite);
    queues.create("orders");
    let system = system_with_account(&azurite, ACCOUNT_KEY).await;
    system.create_topic("shop").await;
    system
        .create_subscription("shop", "queue", queue_subscription("orders", None, json!({})))
        .await;

    // Stopped, not killed: Azurite saves its metadata every 5 s, and a SIGKILL could
    // lose the queue just created, which a real account never does.
    tokio::task::block_in_place(|| azurite.stop());
    system
        .publish_ok("shop", &json!([event("e-1", "Order.Placed", "/orders/1", json!({}))]))
        .await;
    eventually(DEADLINE, "an attempt failing with SocketError", || async {
        let labels = [("subscription", "queue"), ("outcome", "SocketError")];
        (metric(&system.sender_metrics().await, "DeliveryAttemptFailCount", &labels) >= 1.0).then_some(())
    })
    .await;
    tokio::task::block_in_place(|| azurite.start_again());

    let delivered = queues.wait_for("orders", 1).await;
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].event["id"], "e-1");
}

/// The queue service of an Azurite, through its REST API signed with the account key:
/// a test's view of the queues, independent of eg's client.
struct Queues {
    port: u16,
}

/// A message peeked from a queue: its event, decoded from base64, and its times.
#[derive(Debug)]
struct Peeked {
    event: Value,
    insertion: String,
    expiration: String,
}

impl Peeked {
    /// Seconds from insertion to expiration (`None` if either is not a date).
    fn lifetime_seconds(&self) -> Option<i64> {
        let at = |t: &str| chrono::DateTime::parse_from_rfc2822(t).ok();
        Some((at(&self.expiration)? - at(&self.insertion)?).num_seconds())
    }
}

impl Queues {
    fn of(azurite: &Azurite) -> Self {
        Self {
            port: azurite.queue_port(),
        }
    }

    fn create(&self, queue: &str) {
        let created = self.signed("PUT", &format!("/{ACCOUNT}/{queue}"), &[]);
        assert_eq!(created.status, 201, "create queue {queue}: {created:?}");
    }

    /// Up to 32 messages, oldest first, left in the queue.
    fn peek(&self, queue: &str) -> Vec<Peeked> {
        let answer = self.signed(
            "GET",
            &format!("/{ACCOUNT}/{queue}/messages"),
            &[("numofmessages", "32"), ("peekonly", "true")],
        );
        assert_eq!(answer.status, 200, "peek {queue}: {answer:?}");
        answer
            .body
            .split("<QueueMessage>")
            .skip(1)
            .map(|message| {
                let text = element(message, "MessageText");
                let json = STANDARD
                    .decode(text)
                    .unwrap_or_else(|e| panic!("a message that is not base64 ({e}): {text}"));
                Peeked {
                    event: serde_json::from_slice(&json)
                        .unwrap_or_else(|e| panic!("a message that is not one JSON event ({e}): {text}")),
                    insertion: element(message, "InsertionTime").to_owned(),
                    expiration: element(message, "ExpirationTime").to_owned(),
                }
            })
            .collect()
    }

    /// Waits until `queue` holds `count` messages, and returns them.
    async fn wait_for(&self, queue: &str, count: usize) -> Vec<Peeked> {
        eventually(DEADLINE, &format!("{count} message(s) in queue {queue}"), || async {
            let messages = self.peek(queue);
            assert!(messages.len() <= count, "more than {count} messages: {messages:?}");
            (messages.len() == count).then_some(messages)
        })
        .await
    }

    /// A request signed with Shared Key (Azure's "Authorize with Shared Key").
    fn signed(&self, method: &str, path: &str, query: &[(&str, &str)]) -> http::Response {
        let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        let version = "2021-12-02";
        let mut sorted = query.to_vec();
        sorted.sort();
        let resource: String = sorted.iter().map(|(n, v)| format!("\n{n}:{v}")).collect();
        let string_to_sign = format!(
            "{method}\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{version}\n/{ACCOUNT}{path}{resource}"
        );
        let mut mac = Hmac::<Sha256>::new_from_slice(&STANDARD.decode(ACCOUNT_KEY).unwrap()).unwrap();
        mac.update(string_to_sign.as_bytes());
        let authorization = format!("SharedKey {ACCOUNT}:{}", STANDARD.encode(mac.finalize().into_bytes()));
        let query: Vec<String> = query.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let target = if query.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{}", query.join("&"))
        };
        let headers = [
            ("x-ms-date", date.as_str()),
            ("x-ms-version", version),
            ("Authorization", authorization.as_str()),
        ];
        http::request(self.port, method, &target, &headers, b"").unwrap()
    }
}

/// The text of the first `<name>` element in `xml`.
fn element<'a>(xml: &'a str, name: &str) -> &'a str {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    xml.split_once(&open)
        .and_then(|(_, rest)| rest.split_once(&close))
        .map_or("", |(text, _)| text)
}
