//! Signed deliveries (Standard Webhooks, beyond Event Grid), seen from the receiving end:
//! every signature is checked here independently of eg-core, with hmac/sha2/base64.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, Recorded, System, event, eventually, json_reply, subscription,
};
use hmac::{Hmac, Mac};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Sha256;
use std::time::{SystemTime, UNIX_EPOCH};

/// 24-byte keys, as `whsec_` + base64.
const SECRET_OLD: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const SECRET_NEW: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The base64 part of each, as it must never appear in an API answer.
const KEY_OLD: &str = "C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const KEY_NEW: &str = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` under `secret`, computed here.
fn expected_signature(secret: &str, id: &str, timestamp: &str, body: &str) -> String {
    let key = BASE64.decode(secret.strip_prefix("whsec_").unwrap()).unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

/// The `v1,…` entries of a request's `webhook-signature`.
fn signatures(request: &Recorded) -> Vec<String> {
    request
        .header("webhook-signature")
        .unwrap_or_else(|| panic!("no webhook-signature in {:?}", request.headers))
        .split(' ')
        .map(str::to_owned)
        .collect()
}

/// Whether one of the request's signatures is `secret`'s, over the bytes received.
fn signed_by(request: &Recorded, secret: &str) -> bool {
    let id = request.header("webhook-id").unwrap();
    let timestamp = request.header("webhook-timestamp").unwrap();
    let expected = expected_signature(secret, id, timestamp, &request.raw_body);
    signatures(request).contains(&expected)
}

/// Asserts the timestamp is Unix seconds close to now.
fn assert_recent_timestamp(request: &Recorded) {
    let timestamp: u64 = request
        .header("webhook-timestamp")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("webhook-timestamp not integer seconds: {:?}", request.headers));
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    assert!(
        now.abs_diff(timestamp) <= 60,
        "webhook-timestamp {timestamp}, now {now}"
    );
}

fn with_secrets(endpoint: &str, secrets: Value) -> Value {
    let mut body = subscription(endpoint, json!({}));
    body["properties"]["destination"]["properties"]["signingSecrets"] = secrets;
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_deliveries_verify_and_retries_keep_their_webhook_id() {
    let system = System::start(Options::default().retry_schedule("1s")).await;
    let signed = Receiver::start(Behaviour::FailFirst {
        failures: 2,
        status: 503,
    })
    .await;
    let plain = Receiver::start(Behaviour::Status(200)).await;
    let batched = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "signed", with_secrets(signed.url(), json!([SECRET_OLD])))
        .await;
    system
        .create_subscription("orders", "plain", subscription(plain.url(), json!({})))
        .await;
    system.create_topic("bulk").await;
    let mut batch_body = with_secrets(batched.url(), json!([SECRET_OLD]));
    batch_body["properties"]["destination"]["properties"]["maxEventsPerBatch"] = json!(10);
    system.create_subscription("bulk", "batched", batch_body).await;

    system
        .publish_ok(
            "orders",
            &json!([event("e1", "Order.Placed", "/orders/1", json!({"n": 1}))]),
        )
        .await;

    // Two failed attempts and the successful one: the same delivery three times.
    let attempts = signed.wait_for(3, DEADLINE).await;
    assert_eq!(attempts.iter().map(|r| r.status).collect::<Vec<_>>(), [503, 503, 200]);
    let id = attempts[0].header("webhook-id").unwrap().to_owned();
    assert!(!id.is_empty() && !id.starts_with("batch_"), "{id}");
    for attempt in &attempts {
        assert_eq!(attempt.event_ids(), ["e1"]);
        assert_eq!(attempt.header("webhook-id"), Some(id.as_str()), "retries keep the id");
        assert_recent_timestamp(attempt);
        assert_eq!(signatures(attempt).len(), 1, "{:?}", attempt.headers);
        assert!(signed_by(attempt, SECRET_OLD), "{:?}", attempt.headers);
        assert!(!signed_by(attempt, SECRET_NEW));
    }
    // Each attempt is signed at its own time: the retries came at least a second later.
    let first: u64 = attempts[0].header("webhook-timestamp").unwrap().parse().unwrap();
    let last: u64 = attempts[2].header("webhook-timestamp").unwrap().parse().unwrap();
    assert!(last > first, "timestamps {first} then {last}");
    // A tampered body does not verify (the check above is not vacuous).
    let mut tampered = attempts[2].clone();
    tampered.raw_body = tampered.raw_body.replace("\"n\":1", "\"n\":2");
    assert_ne!(tampered.raw_body, attempts[2].raw_body);
    assert!(!signed_by(&tampered, SECRET_OLD));

    // The unsigned subscription of the same topic gets no webhook-* header at all.
    let unsigned = plain.wait_for(1, DEADLINE).await;
    assert_eq!(unsigned[0].event_ids(), ["e1"]);
    let webhook_headers: Vec<&String> = unsigned[0]
        .headers
        .keys()
        .filter(|name| name.starts_with("webhook-"))
        .collect();
    assert!(webhook_headers.is_empty(), "{webhook_headers:?}");

    // A batch is signed as one message under a batch id; each single delivery has its own id.
    system
        .publish_ok(
            "bulk",
            &json!([
                event("b1", "Bulk", "/b", json!({})),
                event("b2", "Bulk", "/b", json!({})),
                event("b3", "Bulk", "/b", json!({})),
            ]),
        )
        .await;
    let batches = eventually(DEADLINE, "b1, b2 and b3 at the batched receiver", || async {
        let received = batched.received();
        (received.iter().map(|r| r.event_ids().len()).sum::<usize>() >= 3).then_some(received)
    })
    .await;
    for request in &batches {
        assert!(signed_by(request, SECRET_OLD), "{:?}", request.headers);
        let id = request.header("webhook-id").unwrap();
        assert_eq!(id.starts_with("batch_"), request.event_ids().len() > 1, "{id}");
    }
    assert!(
        batches.iter().any(|r| r.event_ids().len() == 3),
        "one publish of three events is read at once and sent as one batch: {:?}",
        batches.iter().map(Recorded::event_ids).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_rotate_without_ever_being_shown() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("orders").await;
    let path = "/topics/orders/eventSubscriptions/signed";

    // Invalid secrets are refused naming the field, without repeating the value.
    let refusals = [
        (json!([SECRET_OLD, "whsec_c2hvcnQ="]), "signingSecrets[1]"),
        (json!([KEY_OLD]), "signingSecrets[0]"),
        (json!([SECRET_OLD, SECRET_NEW, "whsec_AAAA"]), "signingSecrets"),
        (json!(SECRET_OLD), "signingSecrets"),
    ];
    for (secrets, field) in refusals {
        let body = with_secrets(receiver.url(), secrets.clone());
        let (status, answer) = json_reply(system.admin(Method::PUT, path, Some(&body)).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{secrets}: {answer}");
        assert_eq!(answer["error"]["code"], "BadRequest", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("properties.destination.properties.{field}")),
            "{secrets}: {message}"
        );
        assert!(!answer.to_string().contains(KEY_OLD), "{answer}");
    }
    let (status, _) = system.get(path).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a refused PUT stores nothing");

    // Created with one secret: neither the PUT's answer, GET nor the list shows it.
    let created = system
        .create_subscription("orders", "signed", with_secrets(receiver.url(), json!([SECRET_OLD])))
        .await;
    let (_, got) = system.get(path).await;
    let (_, list) = system.get("/topics/orders/eventSubscriptions").await;
    for shown in [&created, &got, &list] {
        let text = shown.to_string();
        assert!(!text.contains(KEY_OLD), "{text}");
    }
    let fingerprints = &got["properties"]["destination"]["properties"]["signingSecrets"];
    let old_fingerprint = fingerprints[0].as_str().unwrap().to_owned();
    assert!(old_fingerprint.starts_with("whsec_…"), "{got}");
    assert_eq!(fingerprints.as_array().unwrap().len(), 1, "{got}");

    // Rotation, step 1: the new secret first, the old one still valid.
    let rotating = system
        .create_subscription(
            "orders",
            "signed",
            with_secrets(receiver.url(), json!([SECRET_NEW, SECRET_OLD])),
        )
        .await;
    let shown = &rotating["properties"]["destination"]["properties"]["signingSecrets"];
    assert_eq!(shown.as_array().unwrap().len(), 2, "{rotating}");
    assert_eq!(shown[1], old_fingerprint.as_str(), "{rotating}");
    assert_ne!(shown[0], old_fingerprint.as_str(), "{rotating}");
    assert!(!rotating.to_string().contains(KEY_NEW), "{rotating}");
    let both = delivery_where(&system, &receiver, "two signatures", |r| {
        r.header("webhook-signature").is_some_and(|s| s.split(' ').count() == 2)
    })
    .await;
    assert!(signed_by(&both, SECRET_NEW), "{:?}", both.headers);
    assert!(signed_by(&both, SECRET_OLD), "{:?}", both.headers);
    let new_first = expected_signature(
        SECRET_NEW,
        both.header("webhook-id").unwrap(),
        both.header("webhook-timestamp").unwrap(),
        &both.raw_body,
    );
    assert_eq!(signatures(&both)[0], new_first, "the subscription's order");

    // Step 2: the old secret retired.
    system
        .create_subscription("orders", "signed", with_secrets(receiver.url(), json!([SECRET_NEW])))
        .await;
    let only_new = delivery_where(&system, &receiver, "one signature, by the new secret", |r| {
        r.header("webhook-signature").is_some_and(|s| !s.contains(' ')) && signed_by(r, SECRET_NEW)
    })
    .await;
    assert!(!signed_by(&only_new, SECRET_OLD), "{:?}", only_new.headers);

    // A PUT without the field turns signing off.
    system
        .create_subscription("orders", "signed", subscription(receiver.url(), json!({})))
        .await;
    let (_, got) = system.get(path).await;
    assert!(
        got["properties"]["destination"]["properties"]
            .get("signingSecrets")
            .is_none(),
        "{got}"
    );
    delivery_where(&system, &receiver, "an unsigned delivery", |r| {
        r.headers.keys().all(|name| !name.starts_with("webhook-"))
    })
    .await;

    // Every request this receiver ever got was signed by a secret it was given, or unsigned.
    for request in receiver.received() {
        if request.header("webhook-signature").is_some() {
            assert!(
                signed_by(&request, SECRET_NEW) || signed_by(&request, SECRET_OLD),
                "{:?}",
                request.headers
            );
        }
    }
}

/// Publishes events one at a time until the receiver gets one for which `wanted` holds
/// (a subscription change reaches the senders within the catalog refresh interval) and
/// returns that request.
async fn delivery_where(
    system: &System,
    receiver: &Receiver,
    what: &str,
    wanted: impl Fn(&Recorded) -> bool,
) -> Recorded {
    let wanted = &wanted;
    let mut sent = 0usize;
    eventually(DEADLINE, what, || {
        sent += 1;
        let id = format!("probe-{sent}");
        async move {
            system
                .publish_ok("orders", &json!([event(&id, "Probe", "/p", json!({}))]))
                .await;
            let request = eventually(DEADLINE, &format!("{id} delivered"), || async {
                receiver.received().into_iter().find(|r| r.event_ids() == [id.as_str()])
            })
            .await;
            wanted(&request).then_some(request)
        }
    })
    .await
}
