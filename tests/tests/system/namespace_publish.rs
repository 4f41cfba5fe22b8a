//! Namespace publish: `POST /topics/{topic}:publish?api-version=…` as Event Grid's
//! namespace data plane and its official SDKs speak it. One event and a batch, with every
//! credential form (the SDKs' `Authorization: SharedAccessKey`, `aeg-sas-key`, SAS tokens
//! at namespace-root and topic scope), stored and delivered; every refusal in Event
//! Grid's error body with an `x-ms-error-code` header; and Azure's own Python publisher
//! (`EventGridPublisherClient(…, namespace_topic=…)`) working against eg unchanged.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, System, eventually, in_an_hour, percent_encode, run_python_sdk, sas_token,
    subscription,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

const ONE: &str = "application/cloudevents+json; charset=utf-8";
const BATCH: &str = "application/cloudevents-batch+json; charset=utf-8";
const API_VERSION: &str = "api-version=2024-06-01";

// ----- helpers -----

/// A CloudEvent as a namespace publisher sends it.
fn cloud_event(id: &str) -> Value {
    json!({"specversion": "1.0", "id": id, "source": "/orders", "type": "Order.Created", "data": {"id": id}})
}

/// A namespace publish request and what came back.
struct Publish<'a> {
    system: &'a System,
    /// The last path segment, `<topic>:publish` normally.
    segment: String,
    query: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// What eg answered: status, the headers a namespace client reads, and the body.
struct Answer {
    status: StatusCode,
    content_type: Option<String>,
    error_code_header: Option<String>,
    text: String,
    body: Value,
}

impl<'a> Publish<'a> {
    /// `events` (an object or an array) to `<topic>:publish?api-version=2024-06-01`,
    /// with the content type that fits it and no credential yet.
    fn of(system: &'a System, topic: &str, events: &Value) -> Self {
        let content_type = if events.is_array() { BATCH } else { ONE };
        Self {
            system,
            segment: format!("{topic}:publish"),
            query: API_VERSION.to_owned(),
            headers: vec![("content-type".to_owned(), content_type.to_owned())],
            body: events.to_string().into_bytes(),
        }
    }

    fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn without_header(mut self, name: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self
    }

    /// `Authorization: SharedAccessKey <key>`, what every namespace SDK sends.
    fn key(self, key: &str) -> Self {
        self.header("authorization", &format!("SharedAccessKey {key}"))
    }

    async fn send(self) -> Answer {
        let url = format!("{}/topics/{}?{}", self.system.ingress_url(), self.segment, self.query);
        let mut request = self.system.http().post(url).body(self.body);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let (status, content_type, error_code_header) =
            (response.status(), header("content-type"), header("x-ms-error-code"));
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Answer {
            status,
            content_type,
            error_code_header,
            text,
            body,
        }
    }
}

impl Answer {
    /// Event Grid's `PublishResult`: `200`, `application/json`, `{}`.
    fn assert_published(&self, what: &str) {
        assert_eq!(self.status, StatusCode::OK, "{what}: {}", self.text);
        assert_eq!(self.content_type.as_deref(), Some("application/json"), "{what}");
        assert_eq!(self.text, "{}", "{what}: the Python SDK parses the body as JSON");
        assert_eq!(self.error_code_header, None, "{what}");
    }

    /// A refusal with `status`, Event Grid's error body and the same code in
    /// `x-ms-error-code`; returns the message.
    fn assert_refused(&self, status: StatusCode, code: &str, what: &str) -> String {
        assert_eq!(self.status, status, "{what}: {}", self.text);
        assert_eq!(self.body["error"]["code"], code, "{what}: {}", self.text);
        assert_eq!(self.error_code_header.as_deref(), Some(code), "{what}: x-ms-error-code");
        self.body["error"]["message"].as_str().unwrap_or_default().to_owned()
    }
}

/// The CloudEvents a receiver got (one per request, or batched), in arrival order.
fn delivered_events(receiver: &Receiver) -> Vec<Value> {
    receiver
        .received()
        .into_iter()
        .flat_map(|r| match r.body {
            Value::Array(events) => events,
            event => vec![event],
        })
        .collect()
}

/// A CloudEvents topic with a push subscription to `receiver`; returns the topic's key.
async fn cloud_events_topic(system: &System, topic: &str, receiver: &Receiver) -> String {
    let key = system
        .create_topic_with(topic, json!({"inputSchema": "CloudEventSchemaV1_0"}))
        .await;
    system
        .create_subscription(topic, "consumer", subscription(receiver.url(), json!({})))
        .await;
    key
}

/// Waits until `receiver` has every one of `ids` and checks that each came once, as published.
async fn assert_delivered_once(receiver: &Receiver, published: &[Value]) {
    let ids: Vec<&str> = published.iter().map(|e| e["id"].as_str().unwrap()).collect();
    wait_for_cloud_events(receiver, &ids).await;
    let delivered = delivered_events(receiver);
    for sent in published {
        let copies: Vec<&Value> = delivered.iter().filter(|e| e["id"] == sent["id"]).collect();
        assert_eq!(copies.len(), 1, "{} delivered {} times", sent["id"], copies.len());
        for (name, value) in sent.as_object().unwrap() {
            assert_eq!(&copies[0][name], value, "attribute {name} of {}", sent["id"]);
        }
    }
}

/// Waits until `receiver` has got a CloudEvent with each of `ids`.
async fn wait_for_cloud_events(receiver: &Receiver, ids: &[&str]) {
    let what = format!("{} CloudEvents at {}", ids.len(), receiver.url());
    eventually(DEADLINE, &what, || async {
        let got = delivered_events(receiver);
        ids.iter().all(|id| got.iter().any(|e| e["id"] == *id)).then_some(())
    })
    .await;
}

// ----- tests -----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_event_and_batches_are_stored_and_delivered_with_every_credential_form() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let system = System::start(Options::default()).await;
    let key = cloud_events_topic(&system, "orders", &receiver).await;
    let url = system.ingress_url().to_owned();
    let mut published = Vec::new();

    // One event, as the Go SDK's Send and REST users send it, with the SDKs' header.
    let one = cloud_event("one-shared-access-key");
    Publish::of(&system, "orders", &one)
        .key(&key)
        .send()
        .await
        .assert_published("one event, Authorization: SharedAccessKey");
    published.push(one);

    // A batch, as the Python SDK sends it (always, even for one event).
    let batch = json!([cloud_event("batch-0"), cloud_event("batch-1")]);
    Publish::of(&system, "orders", &batch)
        .header("aeg-sas-key", &key)
        .send()
        .await
        .assert_published("a batch, aeg-sas-key header");
    published.extend(batch.as_array().unwrap().iter().cloned());

    // The scheme in another case; the key in the query, as Event Grid's docs show it.
    let lower = cloud_event("lower-case-scheme");
    Publish::of(&system, "orders", &lower)
        .header("authorization", &format!("sharedaccesskey {key}"))
        .send()
        .await
        .assert_published("sharedaccesskey in lower case");
    published.push(lower);
    let mut in_query = Publish::of(&system, "orders", &cloud_event("key-in-query"));
    in_query.query = format!("{API_VERSION}&aeg-sas-key={}", percent_encode(&key));
    in_query.send().await.assert_published("?aeg-sas-key=");
    published.push(cloud_event("key-in-query"));

    // SAS tokens for the namespace root (eg's base URL) and for the topic, in both headers.
    let root = cloud_event("sas-namespace-root");
    Publish::of(&system, "orders", &root)
        .header("aeg-sas-token", &sas_token(&url, in_an_hour(), &key))
        .send()
        .await
        .assert_published("a SAS token for the namespace root");
    published.push(root);
    let topic_scope = json!([cloud_event("sas-topic")]);
    let token = sas_token(&format!("{url}/topics/orders"), in_an_hour(), &key);
    Publish::of(&system, "orders", &topic_scope)
        .header("authorization", &format!("SharedAccessSignature {token}"))
        .send()
        .await
        .assert_published("a SAS token for the topic");
    published.push(cloud_event("sas-topic"));

    // `:` percent-encoded is the same path.
    let mut encoded = Publish::of(&system, "orders", &cloud_event("encoded-colon")).key(&key);
    encoded.segment = "orders%3Apublish".to_owned();
    encoded.send().await.assert_published("orders%3Apublish");
    published.push(cloud_event("encoded-colon"));

    // The custom-topic route takes the SDKs' header too.
    let classic = cloud_event("api-events-shared-access-key");
    let response = system
        .http()
        .post(format!("{url}/topics/orders/api/events?api-version=2018-01-01"))
        .header("content-type", ONE)
        .header("authorization", format!("SharedAccessKey {key}"))
        .body(classic.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "/api/events with SharedAccessKey");
    published.push(classic);

    assert_delivered_once(&receiver, &published).await;
    assert_eq!(system.matched_events("orders").await, published.len() as f64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_say_what_was_wrong_in_event_grids_error_body_and_header() {
    let system = System::start(Options::default()).await;
    let key = system
        .create_topic_with("orders", json!({"inputSchema": "CloudEventSchemaV1_0"}))
        .await;
    let plain_key = system
        .create_topic_with("plain", json!({"inputSchema": "EventGridSchema"}))
        .await;
    let url = system.ingress_url().to_owned();
    let one = cloud_event("refused");
    let publish = || Publish::of(&system, "orders", &one);

    // Credentials.
    let message = publish()
        .send()
        .await
        .assert_refused(StatusCode::UNAUTHORIZED, "Unauthorized", "no credential");
    assert!(message.contains("SharedAccessKey"), "{message}");
    publish().key(&plain_key).send().await.assert_refused(
        StatusCode::UNAUTHORIZED,
        "Unauthorized",
        "another topic's key",
    );
    publish().header("aeg-sas-key", "wrong").send().await.assert_refused(
        StatusCode::UNAUTHORIZED,
        "Unauthorized",
        "a wrong aeg-sas-key",
    );
    for (resource, what) in [
        (format!("{url}/topics/other"), "a token for another topic"),
        (
            format!("{url}/topics/ord"),
            "a token for a prefix inside the topic's name",
        ),
        (
            format!("{url}/topics/orders/eventsubscriptions/audit"),
            "a token for a subscription below the topic",
        ),
    ] {
        publish()
            .header("aeg-sas-token", &sas_token(&resource, in_an_hour(), &key))
            .send()
            .await
            .assert_refused(StatusCode::UNAUTHORIZED, "Unauthorized", what);
    }
    publish()
        .header("aeg-sas-token", &sas_token(&url, in_an_hour(), &plain_key))
        .send()
        .await
        .assert_refused(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "a namespace-root token signed with another topic's key",
        );

    // The request's form.
    let mut unversioned = publish().key(&key);
    unversioned.query = String::new();
    let message = unversioned
        .send()
        .await
        .assert_refused(StatusCode::BAD_REQUEST, "BadRequest", "no api-version");
    assert!(message.starts_with("api-version: is required"), "{message}");
    let mut misversioned = publish().key(&key);
    misversioned.query = "api-version=latest".to_owned();
    let message = misversioned
        .send()
        .await
        .assert_refused(StatusCode::BAD_REQUEST, "BadRequest", "api-version=latest");
    assert!(message.contains("YYYY-MM-DD"), "{message}");
    let message = publish()
        .key(&key)
        .header("content-type", "application/json")
        .send()
        .await
        .assert_refused(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            "application/json",
        );
    assert!(message.contains("application/cloudevents+json"), "{message}");
    let message = publish()
        .key(&key)
        .without_header("content-type")
        .send()
        .await
        .assert_refused(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            "no content type",
        );
    assert!(message.starts_with("the request has no Content-Type"), "{message}");
    // Binary content mode, as the Go SDK sends it with BinaryMode.
    let mut binary = publish()
        .key(&key)
        .header("content-type", "text/plain")
        .header("ce-specversion", "1.0")
        .header("ce-id", "binary-1")
        .header("ce-source", "/orders")
        .header("ce-type", "Order.Created");
    binary.body = b"hello".to_vec();
    let message = binary.send().await.assert_refused(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UnsupportedMediaType",
        "binary content mode",
    );
    assert!(
        message.starts_with("binary content mode is not supported; send application/cloudevents+json"),
        "{message}"
    );

    // Limits: 1,000 events a request, 1 MB.
    let thousand: Vec<Value> = (0..1_000).map(|n| cloud_event(&format!("bulk-{n}"))).collect();
    Publish::of(&system, "orders", &json!(thousand))
        .key(&key)
        .send()
        .await
        .assert_published("1,000 events");
    let too_many: Vec<Value> = (0..1_001).map(|n| cloud_event(&format!("bulk-{n}"))).collect();
    let message = Publish::of(&system, "orders", &json!(too_many))
        .key(&key)
        .send()
        .await
        .assert_refused(StatusCode::BAD_REQUEST, "BadRequest", "1,001 events");
    assert_eq!(message, "the request holds 1001 events; at most 1000 are allowed");
    let mut big = cloud_event("big");
    big["data"] = json!("x".repeat(1024 * 1024));
    Publish::of(&system, "orders", &big)
        .key(&key)
        .send()
        .await
        .assert_refused(StatusCode::PAYLOAD_TOO_LARGE, "PayloadTooLarge", "an event over 1 MB");

    // The body: named by event and attribute, as on /api/events.
    let mut no_source = cloud_event("no-source");
    no_source.as_object_mut().unwrap().remove("source");
    let message = Publish::of(&system, "orders", &json!([cloud_event("fine"), no_source]))
        .key(&key)
        .send()
        .await
        .assert_refused(StatusCode::BAD_REQUEST, "BadRequest", "an event without source");
    assert!(message.starts_with("events[1].source:"), "{message}");

    // What is not there.
    let message = Publish::of(&system, "nowhere", &one)
        .key(&key)
        .send()
        .await
        .assert_refused(StatusCode::NOT_FOUND, "NotFound", "an unknown topic");
    assert!(message.contains("\"nowhere\""), "{message}");
    for segment in ["orders:receive", "orders:Publish", "orders"] {
        let mut request = publish().key(&key);
        request.segment = segment.to_owned();
        request
            .send()
            .await
            .assert_refused(StatusCode::NOT_FOUND, "NotFound", segment);
    }

    // A topic of another schema says where it takes events.
    let message = Publish::of(&system, "plain", &one)
        .key(&plain_key)
        .send()
        .await
        .assert_refused(StatusCode::BAD_REQUEST, "BadRequest", "an Event Grid schema topic");
    assert_eq!(
        message,
        "topic \"plain\" takes EventGridSchema events, and :publish takes CloudEvents only: \
         publish to it with POST /topics/plain/api/events"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_publisher_sends_one_event_and_a_list() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let system = System::start(Options::default()).await;
    let key = cloud_events_topic(&system, "orders", &receiver).await;
    let plain_key = system
        .create_topic_with("plain", json!({"inputSchema": "EventGridSchema"}))
        .await;
    let endpoint = system.ingress_url().to_owned();
    let spec = |id: &str| json!({"id": id, "source": "/orders", "type": "Order.Created", "subject": "/o/1", "data": {"id": id}});

    let one = spec("python-one");
    let output = run_python_sdk("publish.py", &[&endpoint, &key, "orders", &one.to_string()]).await;
    assert_eq!(output.stdout_of_success().trim(), r#"{"sent": 1}"#);
    let list = json!([spec("python-list-0"), spec("python-list-1"), spec("python-list-2")]);
    let output = run_python_sdk("publish.py", &[&endpoint, &key, "orders", &list.to_string()]).await;
    assert_eq!(output.stdout_of_success().trim(), r#"{"sent": 3}"#);

    let mut published = vec![one];
    published.extend(list.as_array().unwrap().iter().cloned());
    assert_delivered_once(&receiver, &published).await;
    for event in delivered_events(&receiver) {
        assert_eq!(event["specversion"], "1.0", "{event}");
        assert!(event["time"].is_string(), "the SDK stamps time: {event}");
    }

    // The SDK's own errors for what eg refuses.
    let output = run_python_sdk(
        "publish.py",
        &[&endpoint, "wrong-key", "orders", &spec("x").to_string()],
    )
    .await;
    assert!(!output.success);
    assert!(output.stderr.contains("ClientAuthenticationError"), "{}", output.stderr);
    let output = run_python_sdk("publish.py", &[&endpoint, &key, "nowhere", &spec("x").to_string()]).await;
    assert!(!output.success);
    assert!(output.stderr.contains("ResourceNotFoundError"), "{}", output.stderr);
    assert!(output.stderr.contains("Resource not found"), "{}", output.stderr);
    let output = run_python_sdk("publish.py", &[&endpoint, &plain_key, "plain", &spec("x").to_string()]).await;
    assert!(!output.success);
    assert!(output.stderr.contains("HttpResponseError"), "{}", output.stderr);
    assert!(output.stderr.contains("(BadRequest)"), "{}", output.stderr);
    assert!(
        output.stderr.contains("POST /topics/plain/api/events"),
        "{}",
        output.stderr
    );
    assert_eq!(
        system.matched_events("orders").await,
        4.0,
        "only the four events published"
    );
}
