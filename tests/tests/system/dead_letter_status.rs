//! What operators see of a subscription's dead-letter destination: where its dead
//! letters go, and when writing them fails, everywhere they look — `egctl subscriptions
//! show` and `egctl status`, the management API and the status page. The failure is
//! recorded here as the dead-letter worker records it (`eg_store::dead_letter_health`),
//! so this area needs no object store; writing to real ones is tested with them.

use crate::egctl::Egctl;
use eg_store::{DestinationProblem, RedisSettings, Store};
use eg_system_tests::{ADMIN_TOKEN, Behaviour, Options, Receiver, System};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// An Azure account eg is configured for. Its endpoint refuses connections: nothing here
/// writes to it, and its key must never show anywhere.
const ACCOUNT_KEY: &str = "c3lzdGVtLXRlc3Qtc3RvcmFnZS1hY2NvdW50LWtleQ==";

fn configured_account() -> String {
    format!(
        "DefaultEndpointsProtocol=http;AccountName=deadletters1;AccountKey={ACCOUNT_KEY};\
         BlobEndpoint=http://127.0.0.1:9/deadletters1"
    )
}

/// A handle on the system's Redis as the dead-letter worker has it.
pub(crate) fn store_of(system: &System) -> Store {
    let keys = system.keyspace();
    Store::connect(&RedisSettings {
        url: system.redis().url(),
        cluster_nodes: Vec::new(),
        sentinel: None,
        credentials: Default::default(),
        tls: Default::default(),
        prefix: "eg".into(),
        partitions: keys.partitions(),
        pool_size: 2,
        command_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        replica_acks: 0,
        replica_ack_timeout: Duration::from_secs(1),
    })
    .unwrap()
}

/// What the dead-letter worker records when the account refuses its key.
fn refused_key() -> DestinationProblem {
    serde_json::from_value(json!({
        "store": "azure:deadletters1",
        "container": "dead",
        "kind": "Unauthenticated",
        "message": "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly.",
        // 2026-11-25T16:00:00Z and a minute later.
        "since": 1_795_622_400_000_i64,
        "last": 1_795_622_460_000_i64,
    }))
    .unwrap()
}

/// A status page as HTML, with the admin token.
async fn page(system: &System, path: &str) -> String {
    let response = system
        .http()
        .get(format!("{}{path}", system.ingress_url()))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    response.text().await.unwrap()
}

fn never_the_key(what: &str, text: &str) {
    assert!(!text.contains(ACCOUNT_KEY), "{what} shows the account key: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_destination_is_seen_in_egctl_the_api_and_the_status_page_until_it_clears() {
    let system = System::start(Options::default().env(
        "EG__STORAGE__ACCOUNTS__DEADLETTERS1__CONNECTION_STRING",
        &configured_account(),
    ))
    .await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let ctl = Egctl::for_system(&system);
    system.create_topic("orders").await;

    // Created from flags in Event Grid's StorageBlob form; an account eg does not know is
    // refused by the API (exit 1), saying how to configure it.
    let created = ctl
        .run(&[
            "subscriptions",
            "create",
            "orders",
            "audit",
            "--endpoint",
            receiver.url(),
            "--dead-letter-blob",
            "deadletters1/dead",
        ])
        .await;
    assert!(
        created.ok().contains("subscription orders/audit created"),
        "{created:?}"
    );
    let unknown = ctl
        .run(&[
            "subscriptions",
            "create",
            "orders",
            "other",
            "--endpoint",
            receiver.url(),
            "--dead-letter-blob",
            "elsewhere/dead",
        ])
        .await;
    assert_eq!(unknown.code, 1, "{unknown:?}");
    assert!(
        unknown
            .stderr
            .contains("EG__STORAGE__ACCOUNTS__ELSEWHERE__CONNECTION_STRING"),
        "{unknown:?}"
    );

    // Healthy: the destination is named, nothing warns.
    let shown = ctl.run(&["subscriptions", "show", "orders", "audit"]).await;
    let text = shown.ok();
    assert!(
        text.lines()
            .any(|l| l.starts_with("deadLetterDestination:") && l.ends_with("azure:deadletters1 / dead")),
        "{shown:?}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("deadLetterState:") && l.ends_with("Healthy")),
        "{shown:?}"
    );
    assert!(!text.contains("WARNING"), "{shown:?}");
    let (status, listed) = system.get("/topics/orders/eventSubscriptions/audit/deadLetters").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(
        listed["destination"],
        json!({"store": "azure:deadletters1", "container": "dead"})
    );

    // The worker's record of a refused key…
    let store = store_of(&system);
    store
        .record_dead_letter_problem("orders", "audit", refused_key())
        .await
        .unwrap();

    // …in egctl, above everything else, with exit 0 (the show itself worked),
    let shown = ctl.run(&["subscriptions", "show", "orders", "audit"]).await;
    assert!(
        shown.ok().starts_with(
            "WARNING: dead letters are not being written: Unauthenticated at azure:deadletters1 / dead \
             since 2026-11-25T16:00:00.000Z (latest 2026-11-25T16:01:00.000Z)\n  Server failed to authenticate"
        ),
        "{shown:?}"
    );
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.starts_with("deadLetterState:") && l.ends_with("Failing"))
    );
    let status = ctl.run(&["status"]).await;
    let text = status.ok();
    assert!(
        text.contains("dead letters not being written (1 subscription;"),
        "{status:?}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("orders") && l.contains("Unauthenticated"))
        .unwrap_or_else(|| panic!("no failing row: {status:?}"));
    assert!(
        row.contains("audit") && row.contains("azure:deadletters1 / dead") && row.contains("2026-11-25T16:00:00.000Z"),
        "{row}"
    );

    // in the management API,
    let (code, answer) = system
        .get("/topics/orders/eventSubscriptions/audit/deadLetters/destination")
        .await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    assert_eq!(answer["state"], "Failing");
    assert_eq!(answer["destination"]["store"], "azure:deadletters1");
    assert_eq!(answer["problem"]["kind"], "Unauthenticated");
    assert_eq!(answer["problem"]["failingSince"], "2026-11-25T16:00:00.000Z");
    let (_, overview) = system.get("/status").await;
    assert_eq!(overview["failingDeadLetterDestinations"][0]["subscription"], "audit");
    let audit = overview["topics"][0]["subscriptions"]
        .as_array()
        .and_then(|subs| subs.iter().find(|s| s["name"] == "audit"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(audit["deadLetterFailure"]["kind"], "Unauthenticated", "{overview}");
    assert_eq!(audit["deadLetterDestination"]["container"], "dead", "{overview}");

    // and on the status page: a warning on the subscription's page, an alarm on the overview.
    let subscription_page = page(&system, "/status/topics/orders/subscriptions/audit").await;
    for needle in [
        "id=\"dead-letter-failure\"",
        "<code data-field=\"destination\">azure:deadletters1 / dead</code>",
        ">Unauthenticated</span>",
        "Server failed to authenticate the request.",
        "<code data-field=\"store\">azure:deadletters1</code> container <code data-field=\"container\">dead</code>",
    ] {
        assert!(
            subscription_page.contains(needle),
            "missing {needle:?} in\n{subscription_page}"
        );
    }
    let overview_page = page(&system, "/status").await;
    assert!(
        overview_page.contains("<tr data-dead-letter-failing=\"orders/audit\">"),
        "{overview_page}"
    );
    assert!(
        overview_page.contains("data-field=\"dead-letter-failing\""),
        "the row is flagged"
    );
    for (what, text) in [
        ("the subscription's page", &subscription_page),
        ("the overview", &overview_page),
        ("egctl status", &status.stdout),
        ("egctl subscriptions show", &shown.stdout),
        ("the API", &answer.to_string()),
        ("GET /admin/status", &overview.to_string()),
    ] {
        never_the_key(what, text);
    }

    // A write that succeeds clears it everywhere.
    store.clear_dead_letter_problem("orders", "audit").await.unwrap();
    let shown = ctl.run(&["subscriptions", "show", "orders", "audit"]).await;
    assert!(!shown.ok().contains("WARNING"), "{shown:?}");
    assert!(
        !ctl.run(&["status"])
            .await
            .ok()
            .contains("dead letters not being written")
    );
    let (_, answer) = system
        .get("/topics/orders/eventSubscriptions/audit/deadLetters/destination")
        .await;
    assert_eq!(answer["state"], "Healthy", "{answer}");
    assert!(
        !page(&system, "/status/topics/orders/subscriptions/audit")
            .await
            .contains("dead-letter-failure")
    );
    assert!(!page(&system, "/status").await.contains("data-dead-letter-failing"));
}
