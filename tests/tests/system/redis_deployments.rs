//! The tiers on the Redis platform teams run: one server over TLS, a Cluster over TLS,
//! a server reached as an ACL user holding exactly the rule `docs/operations.md` gives.
//! Each runs the whole pipeline (publish, delivery, a retry, dead-letter, redrive, pause
//! and resume, the status page); a certificate the tiers must not trust is refused with
//! an error naming the setting; no password reaches a log or the status page.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, REDIS_PASSWORD, Receiver, Redis, System, check_dead_letter_operations,
    dead_letter_to, event, eventually, refusing_three_times, subscription,
};
use eg_testkit::tier::Role;
use eg_testkit::tls::TestCa;
use reqwest::StatusCode;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The whole pipeline on `system`: delivery, a retry, dead-letter and redrive, pause and
/// resume, the status page.
async fn run_the_pipeline(system: &System) {
    let ok = Receiver::start(Behaviour::FailFirst {
        failures: 1,
        status: 503,
    })
    .await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "Shipping", subscription(ok.url(), json!({})))
        .await;
    let refusing = refusing_three_times().await;
    system.create_topic("invoices").await;
    let body = subscription(
        refusing.url(),
        json!({"deadLetterDestination": dead_letter_to("dead"),
               "retryPolicy": {"maxDeliveryAttempts": 1, "eventTimeToLiveInMinutes": 1440}}),
    );
    system.create_subscription("invoices", "Billing", body).await;

    // Delivered after one retry (the first attempt gets 503).
    system
        .publish_ok(
            "orders",
            &json!([event("o-1", "Order.Created", "/orders/1", json!({"n": 1}))]),
        )
        .await;
    let got = ok.wait_for(2, DEADLINE).await;
    assert!(got.iter().all(|r| r.body[0]["id"] == "o-1"), "{got:?}");

    // Dead-lettered, listed, shown, redriven, purged.
    check_dead_letter_operations(system, &refusing, "invoices", "Billing").await;

    // Paused: held back; resumed: delivered.
    let (status, answer) = system
        .post("/topics/orders/eventSubscriptions/Shipping/pause", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    system
        .publish_ok(
            "orders",
            &json!([event("o-2", "Order.Created", "/orders/2", json!({"n": 2}))]),
        )
        .await;
    let (_, status_page) = system.get("/status").await;
    assert!(status_page.to_string().contains("Shipping"), "{status_page}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(ok.count(), 2, "a paused subscription got a delivery");
    let (status, answer) = system
        .post("/topics/orders/eventSubscriptions/Shipping/resume", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    ok.wait_for(3, DEADLINE).await;

    // The status page reads its counts (written by every tier) back.
    let (status, page) = eventually(DEADLINE, "the status page counts the deliveries", || async {
        let (status, page) = system.get("/status").await;
        (status == StatusCode::OK && page.to_string().contains("orders")).then_some((status, page))
    })
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_no_password_in(system, &page.to_string());
}

/// No log of any tier, and not `shown`, holds the Redis password.
fn assert_no_password_in(system: &System, shown: &str) {
    assert!(!shown.contains(REDIS_PASSWORD), "the password is shown: {shown}");
    for (name, log) in system.logs() {
        assert!(!log.contains(REDIS_PASSWORD), "the password is in {name}:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_runs_over_tls_to_one_server() {
    let system = System::start(tls_options(Redis::Tls)).await;
    run_the_pipeline(&system).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_runs_over_tls_to_a_cluster() {
    let system = System::start(tls_options(Redis::TlsCluster)).await;
    run_the_pipeline(&system).await;
}

/// Over TLS, the first connections (a handshake per node; redis-rs reads the system's
/// trust roots for each) take longer than the default storage timeout of 1 s on a busy
/// machine running debug builds: a management call would be answered 503.
fn tls_options(redis: Redis) -> Options {
    Options::default()
        .redis(redis)
        .env("EG__INGRESS__STORAGE_TIMEOUT", "5s")
}

/// The arguments of `ACL SETUSER eg` in docs/operations.md ("The ACL user eg needs").
fn documented_acl_rule() -> String {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operations.md"))
        .expect("read docs/operations.md");
    let line = docs
        .lines()
        .find(|line| line.starts_with("ACL SETUSER eg "))
        .expect("docs/operations.md gives the ACL rule as `ACL SETUSER eg …`");
    line["ACL SETUSER eg ".len()..].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_runs_as_the_documented_acl_user() {
    let rule = documented_acl_rule();
    let system = System::start(Options::default().redis(Redis::AclUser(rule))).await;
    run_the_pipeline(&system).await;
    // Anything Redis refused the user, even where a tier retried past it, is a rule that
    // forgot a command or a key.
    let refused = system.redis_cli(&["ACL", "LOG"]);
    assert!(refused.is_empty(), "Redis refused eg's ACL user:\n{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_missing_a_command_fails() {
    // The check above can fail: without XACK the pipeline stalls and ACL LOG says why.
    let rule = documented_acl_rule().replace(" +xack", "");
    let system = System::start(Options::default().redis(Redis::AclUser(rule))).await;
    let ok = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "Shipping", subscription(ok.url(), json!({})))
        .await;
    system
        .publish_ok(
            "orders",
            &json!([event("o-1", "Order.Created", "/orders/1", json!({}))]),
        )
        .await;
    let refused = eventually(DEADLINE, "Redis refuses XACK", || async {
        let log = system.redis_cli(&["ACL", "LOG"]);
        log.to_lowercase().contains("xack").then_some(log)
    })
    .await;
    assert!(refused.contains("eg"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused_naming_the_setting() {
    let system = System::start(Options::default().redis(Redis::Tls)).await;
    let dir = tempfile::tempdir().unwrap();
    let other = TestCa::generate(dir.path(), "someone-else");
    let other_ca = other.ca.display().to_string();
    let log = system
        .start_unhealthy(
            Role::Sender,
            &[("EG__REDIS__TLS_CA_FILE", other_ca.as_str())],
            Duration::from_secs(5),
        )
        .await;
    assert!(log.contains("EG__REDIS__TLS_CA_FILE"), "{log}");
    assert!(log.contains("not signed by a CA eg trusts"), "{log}");

    // With the password in the URL, an error still does not show it.
    let url = system_tls_url_with_password(&system);
    let log = system
        .start_unhealthy(
            Role::Scheduler,
            &[
                ("EG__REDIS__URL", url.as_str()),
                ("EG__REDIS__TLS_CA_FILE", other_ca.as_str()),
            ],
            Duration::from_secs(5),
        )
        .await;
    assert!(log.contains("EG__REDIS__TLS_CA_FILE"), "{log}");
    assert!(!log.contains(REDIS_PASSWORD), "{log}");
}

/// The system's TLS URL with the password in it.
fn system_tls_url_with_password(system: &System) -> String {
    let url = system.redis_tier_setting("EG__REDIS__URL");
    url.replacen("rediss://", &format!("rediss://:{REDIS_PASSWORD}@"), 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tiers_follow_a_sentinel_failover_and_lose_no_acknowledged_event() {
    let options = Options::default()
        .redis(Redis::Sentinel)
        .env("EG__REDIS__REPLICA_ACKS", "1")
        .env("EG__INGRESS__STORAGE_TIMEOUT", "3s");
    let mut system = System::start(options).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "Shipping", subscription(receiver.url(), json!({})))
        .await;

    // Publishes one event after another, remembering those answered 200, until stopped.
    let acknowledged: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = {
        let (acknowledged, stop) = (acknowledged.clone(), stop.clone());
        let (http, url, key) = system.publisher("orders");
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let id = format!("e-{n}");
                let body = json!([event(&id, "Order.Created", "/orders", json!({"n": n}))]);
                let answer = http
                    .post(&url)
                    .header("aeg-sas-key", &key)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await;
                match answer {
                    Ok(answer) if answer.status() == StatusCode::OK => acknowledged.lock().unwrap().push(id),
                    _ => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        })
    };
    let count = || acknowledged.lock().unwrap().len();
    eventually(DEADLINE, "publishes are answered 200", || async {
        (count() >= 20).then_some(())
    })
    .await;

    let old = tokio::task::block_in_place(|| {
        let sentinel = system.sentinel();
        let old = sentinel.kill_primary();
        sentinel.wait_for_failover(old);
        // The old primary comes back as the new one's replica: replica acks work again.
        sentinel.restart(old);
        old
    });
    let before = count();
    eventually(Duration::from_secs(60), "publishes are answered 200 again", || async {
        (count() >= before + 20).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    publisher.await.unwrap();

    let ids = acknowledged.lock().unwrap().clone();
    receiver
        .wait_for_ids(ids.iter().cloned(), Duration::from_secs(60))
        .await;
    assert_ne!(system.sentinel().primary_port(), Some(old));
    for (name, log) in system.logs() {
        assert!(!log.contains(REDIS_PASSWORD), "the password is in {name}");
    }
}
