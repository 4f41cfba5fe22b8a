//! The OpenAPI document as a platform team's tooling reads it: a client generated from
//! what a running ingress serves at `GET /openapi.yaml`, by a standard generator
//! (`@hey-api/openapi-ts`), creates a topic and a webhook subscription, publishes, and
//! reads the history, queues and status back, each answer checked against the
//! document's schema for it (tests/openapi-client/main.ts). A document whose schema no
//! longer matches what eg answers makes that same run fail.

use eg_system_tests::{ADMIN_TOKEN, Behaviour, DEADLINE, Options, Receiver, System, run_generated_client};
use serde_json::Value;

/// The document the ingress serves, as served.
async fn served_document(system: &System) -> String {
    let answer = system
        .http()
        .get(format!("{}/openapi.yaml", system.ingress_url()))
        .send()
        .await
        .expect("GET /openapi.yaml");
    assert_eq!(answer.status(), 200, "GET /openapi.yaml");
    answer.text().await.expect("the document's text")
}

#[tokio::test]
async fn a_client_generated_from_the_served_document_publishes_and_reads_typed_answers() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let document = served_document(&system).await;

    let run = run_generated_client(
        &document,
        &[
            system.ingress_url(),
            ADMIN_TOKEN,
            receiver.url(),
            "generated-client",
            "generated-1",
        ],
    )
    .await;
    assert!(
        run.success,
        "the generated client's program failed:\n{}\n{}",
        run.stderr, run.stdout
    );
    receiver.wait_for_ids(["generated-1"], DEADLINE).await;
    let seen: Value = serde_json::from_str(run.stdout.trim()).expect("the program prints one JSON line");
    assert_eq!(seen["delivered"], true, "{seen}");
    assert_eq!(seen["health"], "Healthy", "{seen}");

    // The same run against a document that says the history answer has a field eg does
    // not send: the program must notice, or it would notice no drift at all.
    let drifted = document.replacen(
        "required: [topic, eventId, value]",
        "required: [topic, eventId, value, sentBy]",
        1,
    );
    assert_ne!(
        drifted, document,
        "the History schema's required list moved: update this test"
    );
    let run = run_generated_client(
        &drifted,
        &[
            system.ingress_url(),
            ADMIN_TOKEN,
            receiver.url(),
            "generated-drift",
            "generated-2",
        ],
    )
    .await;
    assert!(
        !run.success,
        "a document that no longer matches the answers passed:\n{}",
        run.stdout
    );
    assert!(
        run.stderr
            .contains("eventHistory: the answer does not match docs/openapi.yaml")
            && run.stderr.contains("sentBy"),
        "{}",
        run.stderr
    );
}
