//! Client certificates on webhook delivery (mutual TLS, docs/client-certificates.md): an
//! HTTPS receiver that requires a certificate of its CA gets the validation handshake
//! and the deliveries of a subscription naming a configured certificate, and refuses
//! the handshakes of one that names none (retried, not lost). Names eg lacks, and
//! expired certificates, are refused where the subscription is written.

use eg_system_tests::{Behaviour, DEADLINE, Options, Receiver, System, event, eventually, subscription};
use eg_testkit::tls::TestCa;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn naming(endpoint: &str, certificate: Option<&str>) -> Value {
    let mut body = subscription(endpoint, json!({}));
    if let Some(name) = certificate {
        body["properties"]["destination"]["properties"]["clientCertificate"] = json!(name);
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_requires_a_client_certificate_gets_it_and_nothing_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(dir.path(), "hooks");
    let expired = ca.issue_expired("hooks-expired", &["eg-client"]);
    let path = |p: &std::path::Path| p.display().to_string();
    let system = System::start(
        Options::default()
            .retry_schedule("1s")
            .env("EG__DELIVERY__TLS_CA_FILE", &path(&ca.ca))
            .env(
                "EG__CLIENT_CERTIFICATES__PARTNER__CERTIFICATE_FILE",
                &path(&ca.client.cert),
            )
            .env("EG__CLIENT_CERTIFICATES__PARTNER__KEY_FILE", &path(&ca.client.key))
            .env("EG__CLIENT_CERTIFICATES__OLD__CERTIFICATE_FILE", &path(&expired.cert))
            .env("EG__CLIENT_CERTIFICATES__OLD__KEY_FILE", &path(&expired.key)),
    )
    .await;
    let receiver = Receiver::start_mutual_tls(Behaviour::Status(200), &ca.server.cert, &ca.server.key, &ca.ca).await;
    system.create_topic("orders").await;

    // The handshake itself needs the certificate: the subscription is validated over it.
    let created = system
        .create_subscription("orders", "partner", naming(receiver.url(), Some("partner")))
        .await;
    assert_eq!(created["properties"]["provisioningState"], "Succeeded", "{created}");
    assert_eq!(
        created["properties"]["destination"]["properties"]["clientCertificate"], "partner",
        "shown back by name"
    );
    system
        .publish_ok("orders", &json!([event("e1", "Order.Placed", "/orders/1", json!({}))]))
        .await;
    receiver.wait_for_ids(["e1"], DEADLINE).await;
    assert_eq!(receiver.refused_handshakes(), 0);

    // Without the certificate the receiver refuses every handshake: retried, not lost.
    system
        .create_subscription("orders", "partner", naming(receiver.url(), None))
        .await;
    system
        .publish_ok("orders", &json!([event("e2", "Order.Placed", "/orders/2", json!({}))]))
        .await;
    eventually(DEADLINE, "refused handshakes", || async {
        (receiver.refused_handshakes() >= 2).then_some(())
    })
    .await;
    assert!(
        !receiver
            .received()
            .iter()
            .any(|r| r.event_ids().contains(&"e2".to_owned())),
        "nothing reaches the endpoint without the certificate"
    );
    system
        .create_subscription("orders", "partner", naming(receiver.url(), Some("partner")))
        .await;
    receiver.wait_for_ids(["e2"], DEADLINE).await;

    // Names eg lacks and expired certificates are refused where they are written.
    let (status, answer) = system
        .put_subscription("orders", "nobody", &naming(receiver.url(), Some("nobody")))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("clientCertificate"), "{message}");
    assert!(
        message.contains("EG__CLIENT_CERTIFICATES__NOBODY__CERTIFICATE_FILE"),
        "{message}"
    );
    let (status, answer) = system
        .put_subscription("orders", "old", &naming(receiver.url(), Some("old")))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("\"old\" expired at 2020-01-01"), "{message}");

    // The key appears in no answer and no log (the sender logs the expired one by name).
    let key = std::fs::read_to_string(&ca.client.key).unwrap();
    let key_body = key.lines().nth(1).unwrap_or_default().to_owned();
    let got = system
        .admin(reqwest::Method::GET, "/topics/orders/eventSubscriptions/partner", None)
        .await
        .text()
        .await
        .unwrap();
    assert!(!got.contains(&key_body), "{got}");
    let logs = system.logs();
    for (log, text) in &logs {
        assert!(!text.contains(&key_body), "{log} holds the private key");
    }
    assert!(
        logs.iter()
            .any(|(_, text)| text.contains("client certificate expired") && text.contains("certificate=old")),
        "the sender names the expired certificate"
    );
}
