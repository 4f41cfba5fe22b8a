//! Bad input, end to end: every kind of malformed, hostile or oversized request to the
//! publish and management APIs is answered with a 4xx in Event Grid's error body naming
//! the problem; the ingress stays healthy and nothing is stored. The cases and answers
//! are listed in docs/bad-input.md.
//!
//! The systems here run without senders, so whatever a publish stored stays in the
//! ready streams, where the tests count it.

use eg_store::codec;
use eg_system_tests::{ADMIN_TOKEN, Options, System, event, subscription};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `EG__INGRESS__MAX_EVENT_BYTES` in these systems, so one event can be too large
/// while its request is not.
const MAX_EVENT_BYTES: usize = 64 * 1024;
/// The default `EG__INGRESS__MAX_REQUEST_BYTES`.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// The ingress's HTTP header read timeout (`eg_runtime::ops::HEADER_READ_TIMEOUT`).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// No senders (what a publish stores stays in the ready streams) and no endpoint
/// validation (every subscription matches at once; nothing is ever delivered).
fn options() -> Options {
    Options::default().senders(0).env("EG__VALIDATION__ENABLED", "false")
}

/// A publish case: its name, topic, key, content type, body and expected answer.
type PublishCase<'a> = (&'a str, &'a str, &'a str, &'a str, Vec<u8>, Expect);

/// What a refused request should get: a status and words the message must contain.
struct Expect {
    status: StatusCode,
    code: &'static str,
    words: Vec<String>,
}

fn expect(status: StatusCode, words: &[&str]) -> Expect {
    let code = match status {
        StatusCode::BAD_REQUEST => "BadRequest",
        StatusCode::NOT_FOUND => "NotFound",
        StatusCode::METHOD_NOT_ALLOWED => "MethodNotAllowed",
        StatusCode::REQUEST_TIMEOUT => "RequestTimeout",
        StatusCode::PAYLOAD_TOO_LARGE => "PayloadTooLarge",
        other => panic!("no expected code for {other}"),
    };
    Expect {
        status,
        code,
        words: words.iter().map(|w| (*w).to_owned()).collect(),
    }
}

/// Checks an answer against `expected`; returns what was wrong, if anything.
fn check(status: StatusCode, body: &str, expected: &Expect) -> Result<(), String> {
    if status != expected.status {
        return Err(format!("status {status}, expected {}: {body}", expected.status));
    }
    let value: Value = serde_json::from_str(body).map_err(|e| format!("the body is not JSON ({e}): {body}"))?;
    if value["error"]["code"] != expected.code {
        return Err(format!("error.code is not {:?}: {body}", expected.code));
    }
    let message = value["error"]["message"]
        .as_str()
        .ok_or_else(|| format!("no error.message: {body}"))?;
    if !value["error"]["details"].is_array() {
        return Err(format!("no error.details: {body}"));
    }
    if message.chars().count() > 1100 {
        return Err(format!("the message is {} characters long", message.chars().count()));
    }
    for word in &expected.words {
        if !message.contains(word.as_str()) {
            return Err(format!("the message does not say {word:?}: {message}"));
        }
    }
    Ok(())
}

/// Panics listing every failed case by name.
fn report(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn good(id: &str) -> Value {
    event(id, "Order.Created", "/orders/1", json!({"n": 1}))
}

/// A valid Event Grid event as text, with `data` spliced in raw.
fn event_with_raw_data(id: &str, raw_data: &str) -> String {
    format!(r#"{{"id":"{id}","subject":"/s","eventType":"T","eventTime":"2026-01-01T00:00:00Z","data":{raw_data}}}"#)
}

/// Number of deliveries in the ready streams and of stored event bodies.
fn stored(system: &System) -> (usize, usize) {
    // An event is stored in its event hash, or in the ready entry of its only delivery.
    const CARRIED: &str = "local n = 0 for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do \
        for j = 1, #e[2], 2 do if e[2][j] == ARGV[1] then n = n + 1 end end end return n";
    let (mut ready, mut carried) = (0, 0);
    for partition in system.keyspace().all_partitions() {
        let len = system.redis_cli(&["XLEN", &partition.ready()]);
        ready += len.parse::<usize>().unwrap_or_else(|_| panic!("XLEN answered {len:?}"));
        let count = system.redis_cli(&["EVAL", CARRIED, "1", &partition.ready(), codec::ENTRY_BODY_FIELD]);
        carried += count
            .parse::<usize>()
            .unwrap_or_else(|_| panic!("the count answered {count:?}"));
    }
    (ready, system.redis_keys("*:event:*").len() + carried)
}

/// The ingress still answers, and a good publish still works (and is stored: the
/// counting above can see a store).
async fn assert_still_healthy(system: &System, topic: &str, key: &str) {
    let health = system
        .http()
        .get(format!("{}/healthz", system.ingress_url()))
        .send()
        .await
        .expect("the ingress answers /healthz after the bad input");
    assert_eq!(health.status(), StatusCode::OK);
    let before = stored(system);
    let response = system
        .publish_raw(topic, Some(key), json!([good("after")]).to_string().into_bytes())
        .await;
    assert_eq!(response.status(), StatusCode::OK, "a good publish after the bad input");
    let after = stored(system);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1, 1),
        "the good publish should store one event and one delivery"
    );
}

/// Unlike `System::publish_raw`: any content type, and the answer read as text whatever it is.
async fn publish_with(
    system: &System,
    topic: &str,
    key: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, String) {
    let response = system
        .http()
        .post(format!("{}/topics/{topic}/api/events", system.ingress_url()))
        .header("content-type", content_type)
        .header("aeg-sas-key", key)
        .body(body)
        .send()
        .await
        .expect("publish request");
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_publishes_get_a_named_4xx_and_store_nothing() {
    let system = System::start(options().env("EG__INGRESS__MAX_EVENT_BYTES", &MAX_EVENT_BYTES.to_string())).await;
    let key = system.create_topic("orders").await;
    system
        .create_subscription("orders", "All", subscription("http://127.0.0.1:9/hook", json!({})))
        .await;
    let cloud_key = system
        .create_topic_with("cloud", json!({"inputSchema": "CloudEventSchemaV1_0"}))
        .await;
    system
        .create_subscription("cloud", "All", subscription("http://127.0.0.1:9/hook", json!({})))
        .await;
    let custom_key = system
        .create_topic_with(
            "custom",
            json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": {
                "inputSchemaMappingType": "Json",
                "properties": {"id": {"sourceField": "orderId"}, "eventType": {"defaultValue": "Order"},
                               "dataVersion": {"sourceField": "version", "defaultValue": "1"}}
            }}),
        )
        .await;
    system
        .create_subscription("custom", "All", subscription("http://127.0.0.1:9/hook", json!({})))
        .await;

    let valid = good("ok").to_string();
    let five_with_third_bad = {
        let mut events: Vec<Value> = (0..5).map(|i| good(&format!("e{i}"))).collect();
        events[2]["eventTime"] = json!("not a time");
        json!(events).to_string()
    };
    let five_with_last_too_large = {
        let mut events: Vec<Value> = (0..5).map(|i| good(&format!("e{i}"))).collect();
        events[4]["data"] = json!("x".repeat(MAX_EVENT_BYTES));
        json!(events).to_string()
    };
    let deep = |levels: usize| {
        format!(
            "[{}]",
            event_with_raw_data("d", &format!("{}{}", "[".repeat(levels), "]".repeat(levels)))
        )
    };
    let cloud_event = json!({"specversion": "1.0", "id": "c1", "source": "/s", "type": "T"});
    // Fields sent as headers (aeg-data-version, a broker message's id): bounded where published.
    let with_field = |field: &str, value: &str| {
        let mut e = good("h");
        e[field] = json!(value);
        json!([good("ok"), e]).to_string()
    };
    let over_a_header = "1".repeat(5000);
    let too_many = format!("[{}]", vec![valid.as_str(); 5001].join(","));

    use StatusCode as S;
    let bytes = |s: &str| s.as_bytes().to_vec();
    // (case, topic, key, content type, body, expected answer)
    let cases: Vec<PublishCase> = vec![
        ("malformed JSON", "orders", &key, "application/json", bytes(r#"[{"id": "1",, }]"#), expect(S::BAD_REQUEST, &["events[0]", "not valid JSON", "line 1 column"])),
        ("truncated JSON", "orders", &key, "application/json", valid.as_bytes()[..valid.len() / 2].to_vec(), expect(S::BAD_REQUEST, &["the request body is not valid JSON: it ends too early (EOF while parsing", "line 1 column"])),
        ("trailing garbage", "orders", &key, "application/json", bytes(&format!("[{valid}] x")), expect(S::BAD_REQUEST, &["trailing characters"])),
        ("empty body", "orders", &key, "application/json", Vec::new(), expect(S::BAD_REQUEST, &["the request body is empty"])),
        ("empty array", "orders", &key, "application/json", bytes("[]"), expect(S::BAD_REQUEST, &["no events"])),
        ("not an array", "orders", &key, "application/json", bytes(&valid), expect(S::BAD_REQUEST, &["must be a JSON array"])),
        ("event not an object", "orders", &key, "application/json", bytes(&format!("[{valid}, 7]")), expect(S::BAD_REQUEST, &["events[1]", "must be a JSON object"])),
        ("wrong type", "orders", &key, "application/json", bytes(&json!([{"id": "1", "subject": 5, "eventType": "T", "eventTime": "2026-01-01T00:00:00Z"}]).to_string()), expect(S::BAD_REQUEST, &["events[0].subject", "must be a string, got a number"])),
        ("missing field", "orders", &key, "application/json", bytes(&json!([{"id": "1", "subject": "", "eventTime": "2026-01-01T00:00:00Z"}]).to_string()), expect(S::BAD_REQUEST, &["events[0].eventType", "is required"])),
        ("extra field", "orders", &key, "application/json", bytes(&json!([{"id": "1", "subject": "", "eventType": "T", "eventTime": "2026-01-01T00:00:00Z", "colour": "red"}]).to_string()), expect(S::BAD_REQUEST, &["events[0].colour", "not a field"])),
        ("invalid UTF-8", "orders", &key, "application/json", [b"[{\"id\":\"".as_slice(), &[0xff, 0xfe], b"\"}]"].concat(), expect(S::BAD_REQUEST, &["not UTF-8", "offset 8"])),
        ("lone surrogate escape", "orders", &key, "application/json", bytes(&format!("[{}]", event_with_raw_data("u", r#""\ud800""#))), expect(S::BAD_REQUEST, &["events[0].data", "hex escape"])),
        ("control character in a string", "orders", &key, "application/json", bytes(&format!("[{}]", event_with_raw_data("c", "\"a\u{1}b\""))), expect(S::BAD_REQUEST, &["events[0].data", "control character"])),
        ("duplicate key in an event", "orders", &key, "application/json", bytes(r#"[{"id":"1","id":"2","subject":"","eventType":"T","eventTime":"2026-01-01T00:00:00Z"}]"#), expect(S::BAD_REQUEST, &["events[0]", "\"id\" twice"])),
        ("duplicate key in data", "orders", &key, "application/json", bytes(&format!("[{valid},{}]", event_with_raw_data("d", r#"{"a":{"b":1,"b":2}}"#))), expect(S::BAD_REQUEST, &["events[1].data.a", "\"b\" twice"])),
        ("nesting over the limit", "orders", &key, "application/json", bytes(&deep(63)), expect(S::BAD_REQUEST, &["events[0].data[0]", "nested too deeply", "64 levels"])),
        ("nesting far over serde_json's limit", "orders", &key, "application/json", bytes(&deep(100_000)), expect(S::BAD_REQUEST, &["nested too deeply"])),
        ("number out of range", "orders", &key, "application/json", bytes(&format!("[{}]", event_with_raw_data("n", r#"{"big": 1e400}"#))), expect(S::BAD_REQUEST, &["events[0].data.big", "number out of range"])),
        ("huge string in a checked field", "orders", &key, "application/json", bytes(&json!([{"id": "1", "subject": "", "eventType": "T", "eventTime": "9".repeat(500_000)}]).to_string()), expect(S::BAD_REQUEST, &["events[0].eventTime", "…"])),
        ("huge key", "orders", &key, "application/json", bytes(&format!("[{}]", event_with_raw_data("k", &format!(r#"{{"{}": 1e999}}"#, "k".repeat(100_000))))), expect(S::BAD_REQUEST, &["events[0].data[\"kkkk", "number out of range"])),
        ("one event too large", "orders", &key, "application/json", bytes(&five_with_last_too_large), expect(S::PAYLOAD_TOO_LARGE, &["events[4]", "at most 65536"])),
        ("too many events", "orders", &key, "application/json", bytes(&too_many), expect(S::BAD_REQUEST, &["5001 events", "at most 5000"])),
        ("body over the limit", "orders", &key, "application/json", vec![b' '; MAX_REQUEST_BYTES + 1], expect(S::PAYLOAD_TOO_LARGE, &["1048576"])),
        ("event 3 of 5 bad", "orders", &key, "application/json", bytes(&five_with_third_bad), expect(S::BAD_REQUEST, &["events[2].eventTime"])),
        ("CloudEvents content type on an Event Grid topic", "orders", &key, "application/cloudevents-batch+json", bytes(&format!("[{valid}]")), expect(S::BAD_REQUEST, &["EventGridSchema"])),
        ("CloudEvent with a duplicate attribute", "cloud", &cloud_key, "application/cloudevents+json", bytes(r#"{"specversion":"1.0","id":"1","source":"/s","type":"T","type":"U"}"#), expect(S::BAD_REQUEST, &["events[0]", "\"type\" twice"])),
        ("CloudEvent batch, third of five bad", "cloud", &cloud_key, "application/cloudevents-batch+json", bytes(&json!([cloud_event, cloud_event, {"specversion": "1.0", "id": "x", "source": "/s"}, cloud_event, cloud_event]).to_string()), expect(S::BAD_REQUEST, &["events[2].type", "is required"])),
        ("CloudEvent extension of the wrong type", "cloud", &cloud_key, "application/cloudevents+json", bytes(&json!({"specversion": "1.0", "id": "1", "source": "/s", "type": "T", "ext": [1]}).to_string()), expect(S::BAD_REQUEST, &["events[0].ext", "string, number or boolean"])),
        ("CloudEvents binary mode", "cloud", &cloud_key, "application/cloudevents+xml", bytes("<x/>"), expect(S::BAD_REQUEST, &["not supported"])),
        ("custom event without its mapped id", "custom", &custom_key, "application/json", bytes(r#"[{"orderId": "1"}, {"kind": "no id"}]"#), expect(S::BAD_REQUEST, &["events[1].orderId", "is required"])),
        ("dataVersion too long for a header", "orders", &key, "application/json", bytes(&with_field("dataVersion", &over_a_header)), expect(S::BAD_REQUEST, &["events[1].dataVersion", "is 5000 bytes", "at most 4096", "aeg-data-version"])),
        ("dataVersion with NUL", "orders", &key, "application/json", bytes(&with_field("dataVersion", "1\u{0}")), expect(S::BAD_REQUEST, &["events[1].dataVersion", "control character U+0000"])),
        ("dataVersion with DEL", "orders", &key, "application/json", bytes(&with_field("dataVersion", "1\u{7f}")), expect(S::BAD_REQUEST, &["events[1].dataVersion", "control character U+007F"])),
        ("dataVersion with a line break", "orders", &key, "application/json", bytes(&with_field("dataVersion", "1\r\nX-Injected: yes")), expect(S::BAD_REQUEST, &["events[1].dataVersion", "control character U+000D"])),
        ("id with a control character", "orders", &key, "application/json", bytes(&with_field("id", "a\u{1}")), expect(S::BAD_REQUEST, &["events[1].id", "control character U+0001"])),
        ("CloudEvent id too long for a header", "cloud", &cloud_key, "application/cloudevents+json", bytes(&json!({"specversion": "1.0", "id": over_a_header, "source": "/s", "type": "T"}).to_string()), expect(S::BAD_REQUEST, &["events[0].id", "is 5000 bytes"])),
        ("custom event with a mapped dataVersion too long", "custom", &custom_key, "application/json", bytes(&json!([{"orderId": "1", "version": over_a_header}]).to_string()), expect(S::BAD_REQUEST, &["events[0].version", "is 5000 bytes", "mapped to dataVersion"])),
        ("custom event with a nested duplicate", "custom", &custom_key, "application/json", bytes(r#"[{"orderId": "1", "x": {"y": 1, "y": 1}}]"#), expect(S::BAD_REQUEST, &["events[0].x", "\"y\" twice"])),
    ];

    let mut failures = Vec::new();
    for (name, topic, key, content_type, body, expected) in cases {
        let (status, text) = publish_with(&system, topic, key, content_type, body).await;
        if let Err(problem) = check(status, &text, &expected) {
            failures.push(format!("{name}: {problem}"));
        }
        if stored(&system) != (0, 0) {
            failures.push(format!("{name}: something was stored: {:?}", stored(&system)));
        }
    }

    // Neither a key nor the path can get a 5xx either.
    let not_utf8_path = system
        .http()
        .post(format!("{}/topics/%FF%FE/api/events", system.ingress_url()))
        .header("aeg-sas-key", &key)
        .body("[]")
        .send()
        .await
        .unwrap();
    let status = not_utf8_path.status();
    let text = not_utf8_path.text().await.unwrap();
    if let Err(problem) = check(status, &text, &expect(S::BAD_REQUEST, &["UTF-8"])) {
        failures.push(format!("topic name not UTF-8: {problem}"));
    }
    let get = system
        .http()
        .get(format!("{}/topics/orders/api/events", system.ingress_url()))
        .send()
        .await
        .unwrap();
    let status = get.status();
    let allow = get.headers().get("allow").map(|v| v.to_str().unwrap().to_owned());
    let text = get.text().await.unwrap();
    if let Err(problem) = check(status, &text, &expect(S::METHOD_NOT_ALLOWED, &["GET is not allowed"])) {
        failures.push(format!("wrong method: {problem}"));
    }
    if allow.as_deref() != Some("POST") {
        failures.push(format!("wrong method: Allow is {allow:?}"));
    }
    let unknown = system
        .http()
        .post(format!(
            "{}/topics/orders/api/nothing?aeg-sas-key=secret",
            system.ingress_url()
        ))
        .send()
        .await
        .unwrap();
    let status = unknown.status();
    let text = unknown.text().await.unwrap();
    if let Err(problem) = check(status, &text, &expect(S::NOT_FOUND, &["/topics/orders/api/nothing"])) {
        failures.push(format!("unknown route: {problem}"));
    }
    if text.contains("secret") {
        failures.push(format!("unknown route: the answer quotes the query: {text}"));
    }
    report(failures);

    assert_eq!(stored(&system), (0, 0), "nothing was stored by the refused publishes");
    assert_still_healthy(&system, "orders", &key).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_management_requests_get_a_named_4xx_and_change_nothing() {
    let system = System::start(options()).await;
    let key = system.create_topic("orders").await;
    let hook = "http://127.0.0.1:9/hook";
    let with_retry = |retry: Value| subscription(hook, json!({ "retryPolicy": retry }));
    let with_destination = |properties: Value| json!({"properties": {"destination": {"endpointType": "WebHook", "properties": properties}}});
    let raw = |s: &str| s.as_bytes().to_vec();
    let json_bytes = |v: Value| v.to_string().into_bytes();
    let too_deep = format!(
        r#"{{"properties": {{}}, "tags": {}{}}}"#,
        "[".repeat(80),
        "]".repeat(80)
    );

    use StatusCode as S;
    // (case, method, path, body, expected answer)
    let topic = "/topics/fresh";
    let sub = "/topics/orders/eventSubscriptions/Refused";
    let cases: Vec<(&str, Method, &str, Vec<u8>, Expect)> = vec![
        (
            "topic: malformed JSON",
            Method::PUT,
            topic,
            raw(r#"{"properties": {,}}"#),
            expect(S::BAD_REQUEST, &["properties", "not valid JSON"]),
        ),
        (
            "topic: truncated JSON",
            Method::PUT,
            topic,
            raw(r#"{"properties": {"inputSchema": "Event"#),
            expect(S::BAD_REQUEST, &["properties.inputSchema", "EOF"]),
        ),
        (
            "topic: not an object",
            Method::PUT,
            topic,
            raw("5"),
            expect(S::BAD_REQUEST, &["must be a JSON object", "got a number"]),
        ),
        (
            "topic: an array",
            Method::PUT,
            topic,
            raw("[]"),
            expect(S::BAD_REQUEST, &["must be a JSON object", "got an array"]),
        ),
        (
            "topic: misspelt top-level field",
            Method::PUT,
            topic,
            raw(r#"{"propertes": {}}"#),
            expect(S::BAD_REQUEST, &["propertes: not a field of a topic resource"]),
        ),
        (
            "topic: properties of the wrong type",
            Method::PUT,
            topic,
            raw(r#"{"properties": []}"#),
            expect(S::BAD_REQUEST, &["properties", "must be an object"]),
        ),
        (
            "topic: inputSchema of the wrong type",
            Method::PUT,
            topic,
            json_bytes(json!({"properties": {"inputSchema": 5}})),
            expect(S::BAD_REQUEST, &["properties.inputSchema", "must be a string"]),
        ),
        (
            "topic: unknown property",
            Method::PUT,
            topic,
            json_bytes(json!({"properties": {"colour": "red"}})),
            expect(S::BAD_REQUEST, &["properties.colour"]),
        ),
        (
            "topic: duplicate key",
            Method::PUT,
            topic,
            raw(r#"{"properties": {"inputSchema": "EventGridSchema", "inputSchema": "CustomEventSchema"}}"#),
            expect(S::BAD_REQUEST, &["properties", "\"inputSchema\" twice"]),
        ),
        (
            "topic: nesting over the limit",
            Method::PUT,
            topic,
            raw(&too_deep),
            expect(S::BAD_REQUEST, &["tags", "nested too deeply"]),
        ),
        (
            "topic: invalid UTF-8",
            Method::PUT,
            topic,
            [b"{\"tags\": \"".as_slice(), &[0xc3, 0x28], b"\"}"].concat(),
            expect(S::BAD_REQUEST, &["not UTF-8"]),
        ),
        (
            "topic: body over the limit",
            Method::PUT,
            topic,
            vec![b' '; MAX_REQUEST_BYTES + 1],
            expect(S::PAYLOAD_TOO_LARGE, &["1048576"]),
        ),
        (
            "topic: bad name",
            Method::PUT,
            "/topics/no_underscores",
            raw("{}"),
            expect(S::BAD_REQUEST, &["topic name may hold only"]),
        ),
        (
            "regenerateKey: unknown key name",
            Method::POST,
            "/topics/orders/regenerateKey",
            json_bytes(json!({"keyName": "key3"})),
            expect(S::BAD_REQUEST, &["keyName"]),
        ),
        (
            "regenerateKey: wrong type",
            Method::POST,
            "/topics/orders/regenerateKey",
            json_bytes(json!({"keyName": 1})),
            expect(S::BAD_REQUEST, &["keyName"]),
        ),
        (
            "regenerateKey: extra field",
            Method::POST,
            "/topics/orders/regenerateKey",
            json_bytes(json!({"keyName": "key1", "force": true})),
            expect(S::BAD_REQUEST, &["force: not a field"]),
        ),
        (
            "subscription: not an object",
            Method::PUT,
            sub,
            raw(r#""WebHook""#),
            expect(S::BAD_REQUEST, &["must be a JSON object", "got a string"]),
        ),
        (
            "subscription: misspelt top-level field",
            Method::PUT,
            sub,
            json_bytes(json!({"properties": {}, "filter": {}})),
            expect(S::BAD_REQUEST, &["filter: not a field of a subscription resource"]),
        ),
        (
            "subscription: no destination",
            Method::PUT,
            sub,
            json_bytes(json!({"properties": {}})),
            expect(S::BAD_REQUEST, &["properties.destination", "is required"]),
        ),
        (
            "subscription: unknown property",
            Method::PUT,
            sub,
            json_bytes({
                let mut s = subscription(hook, json!({}));
                s["properties"]["colour"] = json!(1);
                s
            }),
            expect(S::BAD_REQUEST, &["properties.colour"]),
        ),
        (
            "subscription: endpointUrl of the wrong type",
            Method::PUT,
            sub,
            json_bytes(with_destination(json!({"endpointUrl": 5}))),
            expect(S::BAD_REQUEST, &["endpointUrl", "must be a string"]),
        ),
        (
            "subscription: endpointUrl not a URL",
            Method::PUT,
            sub,
            json_bytes(with_destination(json!({"endpointUrl": "not a url"}))),
            expect(S::BAD_REQUEST, &["endpointUrl", "absolute URL"]),
        ),
        (
            "subscription: endpointUrl with port 0",
            Method::PUT,
            sub,
            json_bytes(with_destination(json!({"endpointUrl": "http://127.0.0.1:0/hook"}))),
            expect(
                S::BAD_REQUEST,
                &["properties.destination.properties.endpointUrl", "port 0"],
            ),
        ),
        (
            "subscription: static delivery property with NUL",
            Method::PUT,
            sub,
            json_bytes(with_destination(
                json!({"endpointUrl": hook, "deliveryAttributeMappings": [
                {"name": "x-ok", "type": "Static", "properties": {"value": "fine"}},
                {"name": "authorization", "type": "Static", "properties": {"value": "Bearer a\u{0}b", "isSecret": true}}]}),
            )),
            expect(
                S::BAD_REQUEST,
                &[
                    "properties.destination.properties.deliveryAttributeMappings[1].properties.value",
                    "U+0000",
                ],
            ),
        ),
        (
            "subscription: static delivery property with U+0001",
            Method::PUT,
            sub,
            json_bytes(with_destination(
                json!({"endpointUrl": hook, "deliveryAttributeMappings": [
                {"name": "x-a", "type": "Static", "properties": {"value": "\u{1}"}}]}),
            )),
            expect(
                S::BAD_REQUEST,
                &["deliveryAttributeMappings[0].properties.value", "U+0001"],
            ),
        ),
        (
            "subscription: static delivery property with DEL",
            Method::PUT,
            sub,
            json_bytes(with_destination(
                json!({"endpointUrl": hook, "deliveryAttributeMappings": [
                {"name": "x-a", "type": "Static", "properties": {"value": "a\u{7f}"}}]}),
            )),
            expect(
                S::BAD_REQUEST,
                &["deliveryAttributeMappings[0].properties.value", "U+007F"],
            ),
        ),
        (
            "subscription: delivery property name not a header name",
            Method::PUT,
            sub,
            json_bytes(with_destination(
                json!({"endpointUrl": hook, "deliveryAttributeMappings": [
                {"name": "x-a\u{0}", "type": "Static", "properties": {"value": "v"}}]}),
            )),
            expect(S::BAD_REQUEST, &["deliveryAttributeMappings[0].name", "header name"]),
        ),
        (
            "subscription: RabbitMQ exchange with a line break",
            Method::PUT,
            sub,
            json_bytes(
                json!({"properties": {"destination": {"endpointType": "RabbitMQ", "properties":
                {"connection": "main", "exchange": "events\r\n", "routingKey": "k"}}}}),
            ),
            expect(S::BAD_REQUEST, &["properties.destination.properties.exchange", "'\\r'"]),
        ),
        (
            "subscription: RabbitMQ exchange with NUL",
            Method::PUT,
            sub,
            json_bytes(
                json!({"properties": {"destination": {"endpointType": "RabbitMQ", "properties":
                {"connection": "main", "exchange": "ev\u{0}", "routingKey": "k"}}}}),
            ),
            expect(
                S::BAD_REQUEST,
                &["properties.destination.properties.exchange", "letters, digits"],
            ),
        ),
        (
            "subscription: RabbitMQ routing key with a line break",
            Method::PUT,
            sub,
            json_bytes(
                json!({"properties": {"destination": {"endpointType": "RabbitMQ", "properties":
                {"connection": "main", "exchange": "events", "routingKey": "a\nb"}}}}),
            ),
            expect(
                S::BAD_REQUEST,
                &["properties.destination.properties.routingKey", "U+000A"],
            ),
        ),
        (
            "subscription: S3 bucket named like an IP address",
            Method::PUT,
            sub,
            json_bytes(subscription(
                hook,
                json!({"deadLetterDestination": {"endpointType": "S3", "properties":
                {"bucket": "192.168.1.10", "connection": "main"}}}),
            )),
            expect(
                S::BAD_REQUEST,
                &["properties.deadLetterDestination.properties.bucket", "IP address"],
            ),
        ),
        (
            "subscription: S3 endpointUrl with port 0",
            Method::PUT,
            sub,
            json_bytes(subscription(
                hook,
                json!({"deadLetterDestination": {"endpointType": "S3", "properties":
                {"bucket": "dead", "connection": "main", "endpointUrl": "http://127.0.0.1:0"}}}),
            )),
            expect(
                S::BAD_REQUEST,
                &["properties.deadLetterDestination.properties.endpointUrl", "port 0"],
            ),
        ),
        (
            "topic: custom dataVersion default with a line break",
            Method::PUT,
            topic,
            json_bytes(
                json!({"properties": {"inputSchema": "CustomEventSchema", "inputSchemaMapping": {
                "inputSchemaMappingType": "Json",
                "properties": {"eventType": {"defaultValue": "T"}, "dataVersion": {"defaultValue": "1\n"}}}}}),
            ),
            expect(
                S::BAD_REQUEST,
                &[
                    "properties.inputSchemaMapping.properties.dataVersion.defaultValue",
                    "U+000A",
                ],
            ),
        ),
        (
            "subscription: maxDeliveryAttempts 0",
            Method::PUT,
            sub,
            json_bytes(with_retry(json!({"maxDeliveryAttempts": 0}))),
            expect(
                S::BAD_REQUEST,
                &["properties.retryPolicy.maxDeliveryAttempts", "between 1 and 30"],
            ),
        ),
        (
            "subscription: maxDeliveryAttempts 1e9",
            Method::PUT,
            sub,
            json_bytes(with_retry(json!({"maxDeliveryAttempts": 1e9}))),
            expect(S::BAD_REQUEST, &["maxDeliveryAttempts", "between 1 and 30"]),
        ),
        (
            "subscription: maxDeliveryAttempts beyond u64",
            Method::PUT,
            sub,
            raw(&with_retry(json!({})).to_string().replace(
                r#""retryPolicy":{}"#,
                r#""retryPolicy":{"maxDeliveryAttempts":18446744073709551616}"#,
            )),
            expect(S::BAD_REQUEST, &["maxDeliveryAttempts", "between 1 and 30"]),
        ),
        (
            "subscription: maxDeliveryAttempts -1",
            Method::PUT,
            sub,
            json_bytes(with_retry(json!({"maxDeliveryAttempts": -1}))),
            expect(S::BAD_REQUEST, &["maxDeliveryAttempts", "between 1 and 30"]),
        ),
        (
            "subscription: maxDeliveryAttempts 2.5",
            Method::PUT,
            sub,
            json_bytes(with_retry(json!({"maxDeliveryAttempts": 2.5}))),
            expect(S::BAD_REQUEST, &["maxDeliveryAttempts", "integer"]),
        ),
        (
            "subscription: maxDeliveryAttempts a string",
            Method::PUT,
            sub,
            json_bytes(with_retry(json!({"maxDeliveryAttempts": "5"}))),
            expect(S::BAD_REQUEST, &["maxDeliveryAttempts", "integer"]),
        ),
        (
            "subscription: maxDeliveryAttempts 1e400",
            Method::PUT,
            sub,
            raw(&with_retry(json!({}))
                .to_string()
                .replace(r#""retryPolicy":{}"#, r#""retryPolicy":{"maxDeliveryAttempts":1e400}"#)),
            expect(
                S::BAD_REQUEST,
                &["properties.retryPolicy.maxDeliveryAttempts", "number out of range"],
            ),
        ),
        (
            "subscription: time to live 0",
            Method::PUT,
            sub,
            json_bytes(with_retry(json!({"eventTimeToLiveInMinutes": 0}))),
            expect(S::BAD_REQUEST, &["eventTimeToLiveInMinutes", "between 1 and 1440"]),
        ),
        (
            "subscription: maxEventsPerBatch 0",
            Method::PUT,
            sub,
            json_bytes(with_destination(json!({"endpointUrl": hook, "maxEventsPerBatch": 0}))),
            expect(S::BAD_REQUEST, &["maxEventsPerBatch", "between 1 and 5000"]),
        ),
        (
            "subscription: preferredBatchSizeInKilobytes 1e9",
            Method::PUT,
            sub,
            json_bytes(with_destination(
                json!({"endpointUrl": hook, "preferredBatchSizeInKilobytes": 1e9}),
            )),
            expect(S::BAD_REQUEST, &["preferredBatchSizeInKilobytes", "between 1 and 1024"]),
        ),
        (
            "subscription: includedEventTypes a string",
            Method::PUT,
            sub,
            json_bytes(subscription(
                hook,
                json!({"filter": {"includedEventTypes": "Order.Created"}}),
            )),
            expect(S::BAD_REQUEST, &["properties.filter.includedEventTypes"]),
        ),
        (
            "subscription: unknown advanced filter operator",
            Method::PUT,
            sub,
            json_bytes(subscription(
                hook,
                json!({"filter": {"advancedFilters": [{"operatorType": "Sounds", "key": "data.n", "value": 1}]}}),
            )),
            expect(S::BAD_REQUEST, &["properties.filter.advancedFilters[0]"]),
        ),
        (
            "subscription: advanced filter value out of range",
            Method::PUT,
            sub,
            raw(&subscription(
                hook,
                json!({"filter": {"advancedFilters": [{"operatorType": "NumberIn", "key": "data.n", "values": [0]}]}}),
            )
            .to_string()
            .replace("[0]", "[1e400]")),
            expect(S::BAD_REQUEST, &["advancedFilters[0].values[0]", "number out of range"]),
        ),
        (
            "subscription: expirationTimeUtc a number",
            Method::PUT,
            sub,
            json_bytes(subscription(hook, json!({"expirationTimeUtc": 5}))),
            expect(S::BAD_REQUEST, &["properties.expirationTimeUtc", "must be a string"]),
        ),
        (
            "subscription: duplicate key",
            Method::PUT,
            sub,
            raw(&subscription(hook, json!({}))
                .to_string()
                .replacen('{', r#"{"properties":{},"#, 1)),
            expect(S::BAD_REQUEST, &["\"properties\" twice"]),
        ),
        (
            "subscription: body over the limit",
            Method::PUT,
            sub,
            vec![b' '; MAX_REQUEST_BYTES + 1],
            expect(S::PAYLOAD_TOO_LARGE, &["1048576"]),
        ),
        (
            "subscription: bad name",
            Method::PUT,
            "/topics/orders/eventSubscriptions/a",
            json_bytes(subscription(hook, json!({}))),
            expect(S::BAD_REQUEST, &["subscription name must be"]),
        ),
        (
            "unknown route",
            Method::GET,
            "/topics/orders/nothing",
            Vec::new(),
            expect(S::NOT_FOUND, &["/admin/topics/orders/nothing"]),
        ),
        (
            "wrong method",
            Method::PATCH,
            "/topics/orders",
            Vec::new(),
            expect(S::METHOD_NOT_ALLOWED, &["PATCH is not allowed"]),
        ),
    ];

    let mut failures = Vec::new();
    for (name, method, path, body, expected) in cases {
        let response = system
            .http()
            .request(method, format!("{}/admin{path}", system.ingress_url()))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        if let Err(problem) = check(status, &text, &expected) {
            failures.push(format!("{name}: {problem}"));
        }
    }
    report(failures);

    // Nothing was created or changed by the refused calls.
    let (status, topics) = system.get("/topics").await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = topics["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["orders"], "{topics}");
    let (status, subs) = system.get("/topics/orders/eventSubscriptions").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(subs["value"], json!([]), "{subs}");
    let (_, keys) = system.post("/topics/orders/listKeys", None).await;
    assert_eq!(keys["key1"], key.as_str(), "a refused regenerateKey changed key1");

    // The management API still works.
    system
        .create_subscription("orders", "All", subscription(hook, json!({})))
        .await;
    assert_still_healthy(&system, "orders", &key).await;
}

/// A raw HTTP/1.1 exchange, for what reqwest will not send (trickled bytes, huge or
/// many headers, a lying Content-Length).
struct Raw {
    stream: TcpStream,
}

/// What came back on a raw connection.
#[derive(Debug)]
enum Answer {
    Response {
        status: u16,
        body: String,
    },
    /// Closed (or reset) without a response.
    Closed,
}

impl Raw {
    async fn connect(system: &System) -> Self {
        let address = system.ingress_url().trim_start_matches("http://").to_owned();
        let stream = TcpStream::connect(address).await.expect("connect to the ingress");
        Self { stream }
    }

    /// Writes, ignoring errors: the server may refuse and close half-way.
    async fn send(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).await.is_ok()
    }

    /// Reads one response (head + Content-Length body), or how the connection ended.
    async fn answer(&mut self, within: Duration) -> Answer {
        let mut buffer = Vec::new();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buffer[..end]).to_string();
                let status = head
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("not an HTTP response: {head}"));
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse().ok())?
                    })
                    .unwrap_or(0usize);
                if buffer.len() >= end + 4 + length {
                    let body = String::from_utf8_lossy(&buffer[end + 4..end + 4 + length]).to_string();
                    return Answer::Response { status, body };
                }
            }
            let mut chunk = [0u8; 8192];
            match tokio::time::timeout_at(deadline, self.stream.read(&mut chunk)).await {
                Err(_) => panic!(
                    "no answer within {within:?}; got so far: {}",
                    String::from_utf8_lossy(&buffer)
                ),
                Ok(Ok(0)) | Ok(Err(_)) if buffer.is_empty() => return Answer::Closed,
                Ok(Ok(0)) | Ok(Err(_)) => panic!("closed mid-response: {}", String::from_utf8_lossy(&buffer)),
                Ok(Ok(n)) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

fn publish_head(key: &str, extra: &str) -> String {
    format!(
        "POST /topics/orders/api/events HTTP/1.1\r\nhost: eg\r\ncontent-type: application/json\r\naeg-sas-key: {key}\r\n{extra}\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_slow_and_header_heavy_requests_are_cut_off() {
    let system = System::start(options().env("EG__INGRESS__BODY_READ_TIMEOUT", "1s")).await;
    let key = system.create_topic("orders").await;
    system
        .create_subscription("orders", "All", subscription("http://127.0.0.1:9/hook", json!({})))
        .await;
    let mut failures = Vec::new();
    let mut expect_answer = |name: &str, answer: Answer, expected: Expect| match answer {
        Answer::Response { status, body } => {
            if let Err(problem) = check(StatusCode::from_u16(status).unwrap(), &body, &expected) {
                failures.push(format!("{name}: {problem}"));
            }
        }
        Answer::Closed => failures.push(format!("{name}: closed without an answer")),
    };

    // A Content-Length over the limit is refused before any of the body is sent.
    let mut raw = Raw::connect(&system).await;
    raw.send(publish_head(&key, "content-length: 1000000000\r\n").as_bytes())
        .await;
    let started = Instant::now();
    let answer = raw.answer(Duration::from_secs(5)).await;
    expect_answer(
        "Content-Length over the limit",
        answer,
        expect(StatusCode::PAYLOAD_TOO_LARGE, &["1000000000 bytes", "at most 1048576"]),
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the refusal waited for the body"
    );

    // A chunked body is refused once it grows past the limit, while it streams.
    let mut raw = Raw::connect(&system).await;
    raw.send(publish_head(&key, "transfer-encoding: chunked\r\n").as_bytes())
        .await;
    let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, " ".repeat(64 * 1024));
    let mut sent = 0;
    while sent < 4 * MAX_REQUEST_BYTES && raw.send(chunk.as_bytes()).await {
        sent += 64 * 1024;
    }
    expect_answer(
        "chunked body over the limit",
        raw.answer(Duration::from_secs(5)).await,
        expect(StatusCode::PAYLOAD_TOO_LARGE, &["over 1048576 bytes"]),
    );

    // A body that stops coming, and one that trickles in: 408 after the body timeout.
    let body = json!([good("slow")]).to_string();
    let mut raw = Raw::connect(&system).await;
    raw.send(publish_head(&key, &format!("content-length: {}\r\n", body.len())).as_bytes())
        .await;
    raw.send(&body.as_bytes()[..10]).await;
    expect_answer(
        "body that stops",
        raw.answer(Duration::from_secs(5)).await,
        expect(
            StatusCode::REQUEST_TIMEOUT,
            &["did not arrive within 1s", "nothing was accepted"],
        ),
    );
    let mut raw = Raw::connect(&system).await;
    raw.send(publish_head(&key, &format!("content-length: {}\r\n", body.len())).as_bytes())
        .await;
    let started = Instant::now();
    let trickle = async {
        for byte in body.as_bytes() {
            if !raw.send(&[*byte]).await {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    // The trickle would take ~10 s; the answer must come after ~1 s.
    tokio::select! {
        () = trickle => {}
        () = tokio::time::sleep(Duration::from_secs(3)) => {}
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    expect_answer(
        "body that trickles",
        raw.answer(Duration::from_secs(5)).await,
        expect(StatusCode::REQUEST_TIMEOUT, &["did not arrive within 1s"]),
    );

    // The same on the management API.
    let subscription_body = subscription("http://127.0.0.1:9/hook", json!({})).to_string();
    let mut raw = Raw::connect(&system).await;
    raw.send(
        format!(
            "PUT /admin/topics/orders/eventSubscriptions/Slow HTTP/1.1\r\nhost: eg\r\nauthorization: Bearer {ADMIN_TOKEN}\r\ncontent-length: {}\r\n\r\n",
            subscription_body.len()
        )
        .as_bytes(),
    )
    .await;
    raw.send(&subscription_body.as_bytes()[..10]).await;
    expect_answer(
        "management body that stops",
        raw.answer(Duration::from_secs(5)).await,
        expect(StatusCode::REQUEST_TIMEOUT, &["did not arrive within 1s"]),
    );

    // Header limits are hyper's: 431 with no Event Grid body (documented).
    for (name, extra) in [
        ("one huge header", format!("x-big: {}\r\n", "a".repeat(40 * 1024))),
        (
            "too many headers",
            (0..150).map(|i| format!("x-h{i}: v\r\n")).collect::<String>(),
        ),
    ] {
        let mut raw = Raw::connect(&system).await;
        raw.send(publish_head(&key, &format!("{extra}content-length: 2\r\n")).as_bytes())
            .await;
        raw.send(b"[]").await;
        match raw.answer(Duration::from_secs(5)).await {
            Answer::Response { status: 431, .. } => {}
            other => failures.push(format!("{name}: expected 431, got {other:?}")),
        }
    }

    // Headers that never finish: the connection is closed after the header read
    // timeout, without an answer (hyper's behaviour, documented).
    let mut raw = Raw::connect(&system).await;
    raw.send(b"POST /topics/orders/api/events HTTP/1.1\r\nhost: eg\r\n")
        .await;
    let started = Instant::now();
    match raw.answer(HEADER_READ_TIMEOUT + Duration::from_secs(10)).await {
        Answer::Closed => {
            let waited = started.elapsed();
            if waited + Duration::from_millis(500) < HEADER_READ_TIMEOUT {
                failures.push(format!("unfinished headers: closed after only {waited:?}"));
            }
        }
        other => failures.push(format!(
            "unfinished headers: expected the connection closed, got {other:?}"
        )),
    }
    report(failures);

    assert_eq!(stored(&system), (0, 0), "nothing was stored by the cut-off requests");
    let (status, _) = system.get("/topics/orders/eventSubscriptions/Slow").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "the slow subscription PUT created it anyway"
    );
    assert_still_healthy(&system, "orders", &key).await;
}
