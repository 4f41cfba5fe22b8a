//! The management API and the publish API's refusals, seen from outside.

use eg_system_tests::{
    ADMIN_TOKEN, Behaviour, DEADLINE, Options, Receiver, System, event, eventually, json_reply, metric, subscription,
};
use reqwest::Method;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// An error in Event Grid's shape, with `code`; returns its message.
fn error_message(body: &Value, code: &str) -> String {
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no error.message in {body}"));
    assert!(body["error"]["details"].is_array(), "no error.details in {body}");
    message.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_and_subscriptions_are_managed_as_resources() {
    let system = System::start(Options::default().senders(0)).await;

    let topic_body = json!({"properties": {"inputSchema": "EventGridSchema"}});
    let (status, topic) = json_reply(system.admin(Method::PUT, "/topics/orders", Some(&topic_body)).await).await;
    assert_eq!(status, StatusCode::CREATED, "{topic}");
    let endpoint = format!("{}/topics/orders/api/events", system.ingress_url());
    assert_eq!(topic["properties"]["endpoint"], endpoint.as_str(), "{topic}");
    assert_eq!(topic["name"], "orders");
    assert_eq!(topic["properties"]["inputSchema"], "EventGridSchema");
    let (status, again) = json_reply(system.admin(Method::PUT, "/topics/orders", Some(&topic_body)).await).await;
    assert_eq!(status, StatusCode::OK, "a second PUT updates: {again}");
    let (status, got) = system.get("/topics/orders").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["properties"]["endpoint"], endpoint.as_str());
    let (status, list) = system.get("/topics").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["value"].as_array().map(Vec::len), Some(1), "{list}");
    let (status, keys) = system.post("/topics/orders/listKeys", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        keys["key1"].as_str().is_some_and(|k| !k.is_empty()) && keys["key2"].is_string(),
        "{keys}"
    );
    assert_ne!(keys["key1"], keys["key2"]);

    // The endpoint URL's query may carry a secret: only getFullUrl shows it.
    let full_url = "http://127.0.0.1:9/hook?code=s3cret-value&tenant=x";
    let path = "/topics/orders/eventSubscriptions/Audit";
    let body = subscription(
        full_url,
        json!({"retryPolicy": {"maxDeliveryAttempts": 5, "eventTimeToLiveInMinutes": 60}}),
    );
    let response = system.admin(Method::PUT, path, Some(&body)).await;
    let status = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{text}");
    assert!(!text.contains("s3cret"), "PUT answered with the secret: {text}");

    let response = system.admin(Method::GET, path, None).await;
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    assert!(
        !text.contains("s3cret") && !text.contains("tenant="),
        "GET shows the query: {text}"
    );
    let got: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(got["name"], "Audit");
    assert_eq!(
        got["properties"]["destination"]["properties"]["endpointBaseUrl"], "http://127.0.0.1:9/hook",
        "{got}"
    );
    assert_eq!(got["properties"]["retryPolicy"]["maxDeliveryAttempts"], 5, "{got}");
    assert_eq!(
        got["properties"]["retryPolicy"]["eventTimeToLiveInMinutes"], 60,
        "{got}"
    );

    let response = system
        .admin(Method::GET, "/topics/orders/eventSubscriptions", None)
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    assert!(!text.contains("s3cret"), "the list shows the query: {text}");
    let list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["value"].as_array().map(Vec::len), Some(1), "{list}");

    let (status, full) = system.post(&format!("{path}/getFullUrl"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(full["endpointUrl"], full_url);

    // Out of range: refused, naming the field, and nothing is stored.
    let invalid_path = "/topics/orders/eventSubscriptions/TooMany";
    let invalid = subscription(full_url, json!({"retryPolicy": {"maxDeliveryAttempts": 31}}));
    let (status, refusal) = json_reply(system.admin(Method::PUT, invalid_path, Some(&invalid)).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refusal}");
    let message = error_message(&refusal, "BadRequest");
    assert!(message.contains("maxDeliveryAttempts"), "{message}");
    let (status, _) = system.get(invalid_path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let no_url = json!({"properties": {"destination": {"endpointType": "WebHook", "properties": {}}}});
    let (status, refusal) = json_reply(system.admin(Method::PUT, invalid_path, Some(&no_url)).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refusal}");
    assert!(
        error_message(&refusal, "BadRequest").contains("endpointUrl"),
        "{refusal}"
    );

    let (status, refusal) = json_reply(
        system
            .admin(
                Method::PUT,
                "/topics/nosuchtopic/eventSubscriptions/Sub",
                Some(&subscription(full_url, json!({}))),
            )
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refusal}");
    error_message(&refusal, "NotFound");

    let (status, _) = json_reply(system.admin(Method::DELETE, path, None).await).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = json_reply(system.admin(Method::DELETE, path, None).await).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "deleting what is gone");
    let (status, refusal) = system.get(path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    error_message(&refusal, "NotFound");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_management_api_needs_the_bearer_token() {
    let system = System::start(Options::default().senders(0)).await;
    let url = format!("{}/admin/topics/orders", system.ingress_url());
    let body = json!({"properties": {}}).to_string();
    let attempts = [
        None,
        Some("Bearer wrong-token".to_owned()),
        Some(format!("Bearer {ADMIN_TOKEN}x")),
        Some(format!("Basic {ADMIN_TOKEN}")),
        Some(ADMIN_TOKEN.to_owned()),
    ];
    for authorization in attempts {
        for method in [Method::PUT, Method::GET] {
            let mut request = system.http().request(method.clone(), &url).body(body.clone());
            if let Some(value) = &authorization {
                request = request.header("authorization", value);
            }
            let (status, refusal) = json_reply(request.send().await.unwrap()).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} with {authorization:?}: {refusal}"
            );
            error_message(&refusal, "Unauthorized");
        }
    }
    // Nothing was created by the refused calls.
    let (status, _) = system.get("/topics/orders").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_publishes_store_nothing() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let key1 = system.create_topic("orders").await;
    system
        .create_subscription("orders", "All", subscription(receiver.url(), json!({})))
        .await;
    let good = |id: &str| event(id, "Order.Created", "/orders/1", json!({"n": 1}));
    let body = |events: Value| events.to_string().into_bytes();

    // Wrong key, or none.
    let (status, refusal) = json_reply(
        system
            .publish_raw("orders", Some("bm90LXRoZS1rZXk="), body(json!([good("k1")])))
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refusal}");
    error_message(&refusal, "Unauthorized");
    let (status, refusal) = json_reply(system.publish_raw("orders", None, body(json!([good("k2")]))).await).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refusal}");
    error_message(&refusal, "Unauthorized");

    // Unknown topic.
    let (status, refusal) = json_reply(
        system
            .publish_raw("nosuchtopic", Some(&key1), body(json!([good("t1")])))
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refusal}");
    error_message(&refusal, "NotFound");

    // Over 1 MB.
    let big = json!([event(
        "big",
        "Order.Created",
        "/orders/big",
        json!("x".repeat(1024 * 1024 + 16))
    )]);
    let (status, refusal) = json_reply(system.publish_raw("orders", Some(&key1), body(big)).await).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{refusal}");
    error_message(&refusal, "PayloadTooLarge");

    // A bad event refuses the whole request, naming the event and the field.
    let mut missing_type = good("b2");
    missing_type.as_object_mut().unwrap().remove("eventType");
    let (status, refusal) = json_reply(
        system
            .publish_raw("orders", Some(&key1), body(json!([good("b1"), missing_type])))
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refusal}");
    let message = error_message(&refusal, "BadRequest");
    assert!(message.contains("events[1].eventType"), "{message}");

    let mut bad_time = good("b3");
    bad_time["eventTime"] = json!("yesterday");
    let (status, refusal) = json_reply(system.publish_raw("orders", Some(&key1), body(json!([bad_time]))).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refusal}");
    assert!(
        error_message(&refusal, "BadRequest").contains("events[0].eventTime"),
        "{refusal}"
    );

    let (status, refusal) = json_reply(
        system
            .publish_raw("orders", Some(&key1), b"{\"not\": \"an array\"}".to_vec())
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refusal}");
    error_message(&refusal, "BadRequest");

    // Key2 works as well as key1; only this event is delivered.
    let (_, keys) = system.post("/topics/orders/listKeys", None).await;
    let key2 = keys["key2"].as_str().unwrap();
    let response = system
        .publish_raw("orders", Some(key2), body(json!([good("accepted")])))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.text().await.unwrap(),
        "",
        "a publish is answered with an empty body"
    );
    eventually(DEADLINE, "the accepted event to be delivered", || async {
        let text = system.sender_metrics().await;
        (metric(&text, "DeliverySuccessCount", &[("topic", "orders")]) >= 1.0).then_some(())
    })
    .await;
    assert_eq!(receiver.event_ids(), ["accepted"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_created_just_before_a_publish_gets_the_event() {
    let system = System::start(Options::default()).await;
    let first = Receiver::start(Behaviour::Status(200)).await;
    let second = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("news").await;
    system
        .create_subscription("news", "First", subscription(first.url(), json!({})))
        .await;
    // The ingress has now seen the catalog with one subscription; add another and
    // publish at once.
    system
        .publish_ok("news", &json!([event("n1", "News.Published", "/news/1", json!({}))]))
        .await;
    system
        .create_subscription("news", "Second", subscription(second.url(), json!({})))
        .await;
    system
        .publish_ok("news", &json!([event("n2", "News.Published", "/news/2", json!({}))]))
        .await;

    eventually(DEADLINE, "three deliveries", || async {
        let text = system.sender_metrics().await;
        (metric(&text, "DeliverySuccessCount", &[("topic", "news")]) >= 3.0).then_some(())
    })
    .await;
    let mut ids = first.event_ids();
    ids.sort();
    assert_eq!(ids, ["n1", "n2"]);
    assert_eq!(
        second.event_ids(),
        ["n2"],
        "the new subscription missed the event published right after it"
    );
}

/// During a rolling upgrade a copy of an earlier release would ignore a delivery
/// control: the management API refuses it while such a copy is running, naming it, and
/// takes it once the copy is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_control_is_refused_while_an_older_sender_runs() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("orders").await;
    let store = system.store();
    let now = eg_core::UnixMillis(chrono::Utc::now().timestamp_millis());
    let older = eg_store::heartbeat::LiveCopy {
        tier: "eg-sender".into(),
        instance: "sender-old-1".into(),
        version: "0.0.9".into(),
        started_at: now,
        last_seen: now,
        capabilities: Vec::new(),
    };
    store.beat(&older).await.unwrap();
    let mut limited = subscription(receiver.url(), json!({}));
    limited["properties"]["deliveryLimits"] = json!({"requestsPerSecond": 5});
    let (status, answer) = system.put_subscription("orders", "limited", &limited).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("eg-sender sender-old-1 (version 0.0.9) cannot do rate limits"),
        "{message}"
    );
    // A plain subscription needs nothing of the older copy.
    system
        .create_subscription("orders", "plain", subscription(receiver.url(), json!({})))
        .await;
    store.leave("eg-sender", "sender-old-1").await.unwrap();
    system.create_subscription("orders", "limited", limited).await;
}
