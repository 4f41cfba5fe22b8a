//! Secrets and access: every management and publish route refuses missing or wrong
//! credentials; a regenerated key stops working at once, on every ingress copy; keys,
//! SAS tokens, secret header values and endpoint query strings never show up in logs,
//! metrics, error bodies or dead-letter records.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use eg_system_tests::{
    ADMIN_TOKEN, Behaviour, DEADLINE, Options, Receiver, System, dead_letter_to, event, in_an_hour, json_reply,
    percent_encode, sas_token, subscription, text_reply,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// Every management route, with a body where the route takes one.
fn management_routes() -> Vec<(Method, &'static str)> {
    vec![
        (Method::GET, "/admin/topics"),
        (Method::GET, "/admin/topics/orders"),
        (Method::PUT, "/admin/topics/orders"),
        (Method::DELETE, "/admin/topics/orders"),
        (Method::POST, "/admin/topics/orders/listKeys"),
        (Method::POST, "/admin/topics/orders/regenerateKey"),
        (Method::GET, "/admin/topics/orders/eventSubscriptions"),
        (Method::GET, "/admin/topics/orders/eventSubscriptions/audit"),
        (Method::PUT, "/admin/topics/orders/eventSubscriptions/audit"),
        (Method::DELETE, "/admin/topics/orders/eventSubscriptions/audit"),
        (Method::POST, "/admin/topics/orders/eventSubscriptions/audit/getFullUrl"),
        (
            Method::GET,
            "/admin/topics/orders/eventSubscriptions/audit/deliveryHealth",
        ),
    ]
}

fn one_event(id: &str) -> Value {
    json!([event(id, "Access.Tested", "/access", json!({"n": 1}))])
}

/// Unlike `System::publish_raw`: any ingress copy's URL and any credential header (key or SAS token).
async fn publish_with(system: &System, url: &str, topic: &str, auth: Option<(&str, &str)>) -> (StatusCode, Value) {
    let mut request = system
        .http()
        .post(format!("{url}/topics/{topic}/api/events"))
        .header("content-type", "application/json")
        .body(one_event("e-1").to_string());
    if let Some((name, value)) = auth {
        request = request.header(name, value);
    }
    json_reply(request.send().await.unwrap()).await
}

fn assert_unauthorized(status: StatusCode, body: &Value, what: &str) {
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
    assert_eq!(
        body["error"]["code"], "Unauthorized",
        "{what}: Event Grid's error body, got {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_missing_and_wrong_credentials() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let system = System::start(Options::default()).await;
    let key = system.create_topic("orders").await;
    system
        .create_subscription("orders", "audit", subscription(receiver.url(), json!({})))
        .await;
    let url = system.ingress_url().to_owned();

    let wrong_tokens: [Option<String>; 5] = [
        None,
        Some("Bearer".into()),
        Some("Bearer wrong-token".into()),
        Some(format!("Bearer {ADMIN_TOKEN}x")),
        Some(format!("Basic {}", BASE64.encode(format!("admin:{ADMIN_TOKEN}")))),
    ];
    for (method, path) in management_routes() {
        for token in &wrong_tokens {
            let mut request = system.http().request(method.clone(), format!("{url}{path}"));
            if let Some(token) = token {
                request = request.header("authorization", token);
            }
            if method == Method::PUT {
                request = request
                    .header("content-type", "application/json")
                    .body(json!({"properties": {}}).to_string());
            }
            let (status, body) = json_reply(request.send().await.unwrap()).await;
            assert_unauthorized(status, &body, &format!("{method} {path} with {token:?}"));
        }
    }
    // Nothing changed: the topic and its subscription are still there, keys unchanged.
    let (status, keys) = system.post("/topics/orders/listKeys", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(keys["key1"], key.as_str());

    let resource = format!("{url}/topics/orders/api/events");
    let other_key = BASE64.encode([7u8; 32]);
    let refused: Vec<(&str, Option<(&str, String)>)> = vec![
        ("no credential", None),
        ("wrong key", Some(("aeg-sas-key", other_key.clone()))),
        ("empty key", Some(("aeg-sas-key", String::new()))),
        ("key of another length", Some(("aeg-sas-key", format!("{key}x")))),
        (
            "token signed with another key",
            Some(("aeg-sas-token", sas_token(&resource, in_an_hour(), &other_key))),
        ),
        (
            "expired token",
            Some(("aeg-sas-token", sas_token(&resource, in_an_hour() - 7200, &key))),
        ),
        (
            "token for another topic",
            Some((
                "aeg-sas-token",
                sas_token(&format!("{url}/topics/other/api/events"), in_an_hour(), &key),
            )),
        ),
        ("garbage token", Some(("aeg-sas-token", "r=x&e=y&s=z".into()))),
        (
            "authorization header with a bad token",
            Some((
                "authorization",
                format!(
                    "SharedAccessSignature {}",
                    sas_token(&resource, in_an_hour(), &other_key)
                ),
            )),
        ),
    ];
    for (what, auth) in &refused {
        let (status, body) = publish_with(&system, &url, "orders", auth.as_ref().map(|(n, v)| (*n, v.as_str()))).await;
        assert_unauthorized(status, &body, &format!("publish with {what}"));
    }
    let wrong_query = system
        .http()
        .post(format!(
            "{url}/topics/orders/api/events?aeg-sas-key={}",
            percent_encode(&other_key)
        ))
        .header("content-type", "application/json")
        .body(one_event("e-q").to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = json_reply(wrong_query).await;
    assert_unauthorized(status, &body, "publish with a wrong key in the query");

    // And the right credentials do work, each way.
    let good: Vec<(&str, String)> = vec![
        ("aeg-sas-key", key.clone()),
        ("aeg-sas-token", sas_token(&resource, in_an_hour(), &key)),
        (
            "authorization",
            format!("SharedAccessSignature {}", sas_token(&resource, in_an_hour(), &key)),
        ),
    ];
    for (name, value) in &good {
        let (status, body) = publish_with(&system, &url, "orders", Some((name, value))).await;
        assert_eq!(status, StatusCode::OK, "publish with a good {name}: {body}");
    }
    receiver.wait_for(3, DEADLINE).await;
    assert_eq!(receiver.count(), 3, "only the authenticated publishes were delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regenerated_key_stops_working_at_once_on_every_ingress() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    // Catalog copies refresh only once a minute: only read-your-writes can pass this.
    let mut system = System::start(Options::default().env("EG__CATALOG__REFRESH_INTERVAL", "60s")).await;
    let old_key = system.create_topic("orders").await;
    system
        .create_subscription("orders", "audit", subscription(receiver.url(), json!({})))
        .await;
    // A topic with no subscriptions: its publishes match nothing and store nothing.
    let old_quiet_key = system.create_topic("quiet").await;
    let other = system.start_extra_ingress().await;
    let resource = format!("{other}/topics/orders/api/events");
    let old_token = sas_token(&resource, in_an_hour(), &old_key);
    // Both copies have the topics cached and accept the keys.
    let first = system.ingress_url().to_owned();
    for url in [&first, &other] {
        for (topic, key) in [("orders", &old_key), ("quiet", &old_quiet_key)] {
            let (status, body) = publish_with(&system, url, topic, Some(("aeg-sas-key", key))).await;
            assert_eq!(status, StatusCode::OK, "publish to {topic} through {url}: {body}");
        }
    }

    for topic in ["orders", "quiet"] {
        let (status, body) = system
            .post(
                &format!("/topics/{topic}/regenerateKey"),
                Some(&json!({"keyName": "key1"})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "regenerate {topic} key1: {body}");
    }
    // The new key works at once, although the copy's cached catalog still holds the old
    // one (the first copy: a management write does not refresh its cache).
    let (status, keys) = system.post("/topics/quiet/listKeys", None).await;
    assert_eq!(status, StatusCode::OK);
    let new_quiet_key = keys["key1"].as_str().unwrap().to_owned();
    assert_ne!(new_quiet_key, old_quiet_key);
    let (status, body) = publish_with(&system, &first, "quiet", Some(("aeg-sas-key", &new_quiet_key))).await;
    assert_eq!(status, StatusCode::OK, "the new key1 of quiet at once: {body}");
    // The old keys are refused at once through the copy that did not serve the
    // regeneration. The quiet topic first: a refused publish to the other topic would
    // refresh this copy's catalog.
    for (topic, key) in [("quiet", &old_quiet_key), ("orders", &old_key)] {
        let (status, body) = publish_with(&system, &other, topic, Some(("aeg-sas-key", key))).await;
        assert_unauthorized(status, &body, &format!("old key1 of {topic} on the second ingress"));
    }
    let (status, body) = publish_with(&system, &other, "orders", Some(("aeg-sas-token", &old_token))).await;
    assert_unauthorized(status, &body, "a SAS token signed with the old key1");
    let (status, keys) = system.post("/topics/orders/listKeys", None).await;
    assert_eq!(status, StatusCode::OK);
    let new_key = keys["key1"].as_str().unwrap();
    assert_ne!(new_key, old_key);
    let (status, body) = publish_with(&system, &other, "orders", Some(("aeg-sas-key", new_key))).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the new key1 works on the second ingress: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_logs_metrics_error_bodies_or_dead_letters() {
    const QUERY_SECRET: &str = "endpoint-query-secret-3f9a";
    const HEADER_SECRET: &str = "secret-header-value-71c2";
    const SIGNING_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    let healthy = Receiver::start(Behaviour::Status(200)).await;
    let failing = Receiver::start(Behaviour::Status(503)).await;
    let refusing = Receiver::start(Behaviour::Status(400)).await;
    // Debug logging: the most a deployment would ever log.
    let system = System::start(Options::default().env("EG__LOG__LEVEL", "debug")).await;
    let key = system.create_topic("orders").await;
    let secret_header = json!({"deliveryAttributeMappings": [{
        "name": "x-api-key", "type": "Static",
        "properties": {"value": HEADER_SECRET, "isSecret": true}
    }]});
    let mut secrets = vec![
        key.clone(),
        ADMIN_TOKEN.to_owned(),
        QUERY_SECRET.to_owned(),
        HEADER_SECRET.to_owned(),
        // The signing key itself (what follows `whsec_`).
        SIGNING_SECRET["whsec_".len()..].to_owned(),
    ];
    for (name, receiver) in [("healthy", &healthy), ("failing", &failing), ("refusing", &refusing)] {
        let mut body = subscription(
            &format!("{}?code={QUERY_SECRET}", receiver.url()),
            json!({"deadLetterDestination": dead_letter_to("dead")}),
        );
        body["properties"]["destination"]["properties"]["signingSecrets"] = json!([SIGNING_SECRET]);
        body["properties"]["destination"]["properties"]["deliveryAttributeMappings"] =
            secret_header["deliveryAttributeMappings"].clone();
        body["properties"]["retryPolicy"] = json!({"maxDeliveryAttempts": 2, "eventTimeToLiveInMinutes": 5});
        let answer = system.create_subscription("orders", name, body).await;
        let shown = answer.to_string();
        assert!(
            secrets[2..].iter().all(|secret| !shown.contains(secret.as_str())),
            "PUT answer shows a secret: {shown}"
        );
    }
    let (_, keys) = system.post("/topics/orders/listKeys", None).await;
    secrets.push(keys["key2"].as_str().unwrap().to_owned());

    let url = system.ingress_url().to_owned();
    let resource = format!("{url}/topics/orders/api/events");
    let token = sas_token(&resource, in_an_hour(), &key);
    let signature = token.rsplit_once("&s=").unwrap().1.to_owned();
    secrets.push(signature);
    let mut error_bodies = Vec::new();
    let by_query = system
        .http()
        .post(format!("{resource}?aeg-sas-key={}", percent_encode(&key)))
        .header("content-type", "application/json")
        .body(one_event("by-query").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(by_query.status(), StatusCode::OK);
    let (status, _) = publish_with(&system, &url, "orders", Some(("aeg-sas-token", &token))).await;
    assert_eq!(status, StatusCode::OK);
    // Refusals that carry secrets in the request: wrong token with the right key's
    // signature on another resource, malformed bodies with a good key, unknown routes.
    let foreign = sas_token(&format!("{url}/topics/other/api/events"), in_an_hour(), &key);
    let (_, body) = publish_with(&system, &url, "orders", Some(("aeg-sas-token", &foreign))).await;
    error_bodies.push(body.to_string());
    let bad = system.publish_raw("orders", Some(&key), b"{not json".to_vec()).await;
    error_bodies.push(text_reply(bad).await.1);
    let unknown = system
        .http()
        .get(format!(
            "{url}/admin/topics/orders/eventSubscriptions/healthy/getFullUrl"
        ))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    error_bodies.push(text_reply(unknown).await.1);

    healthy.wait_for(2, DEADLINE).await;
    system.wait_dead_letters(4, DEADLINE).await;
    // The endpoint URL with its query is only ever handed out by getFullUrl.
    let (status, full) = system
        .post("/topics/orders/eventSubscriptions/healthy/getFullUrl", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(full["endpointUrl"].as_str().unwrap().contains(QUERY_SECRET), "{full}");
    for (path, answer) in [
        (
            "/topics/orders/eventSubscriptions",
            system
                .admin(Method::GET, "/topics/orders/eventSubscriptions", None)
                .await,
        ),
        (
            "/topics/orders",
            system.admin(Method::GET, "/topics/orders", None).await,
        ),
    ] {
        let text = text_reply(answer).await.1;
        error_bodies.push(format!("GET {path}: {text}"));
    }

    let mut places: Vec<(String, String)> = system.logs();
    places.push(("metrics".into(), system.all_metrics().await));
    for record in system.dead_letter_records() {
        places.push((
            format!("dead letter {}", record.path.display()),
            record.record.to_string(),
        ));
    }
    for (i, body) in error_bodies.into_iter().enumerate() {
        places.push((format!("API answer #{i}"), body));
    }
    assert!(
        places.iter().any(|(name, _)| name.ends_with(".log")),
        "the logs were read"
    );
    let logged: usize = places.iter().map(|(_, text)| text.len()).sum();
    assert!(logged > 10_000, "suspiciously little to scan ({logged} bytes)");
    for (place, text) in &places {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a secret ({}…) shows up in {place}",
                &secret[..4]
            );
        }
    }
}
