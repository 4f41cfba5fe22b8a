//! Hostile endpoints, end to end through the real sender: bodies that never end or are
//! huge, responses and heads that trickle, redirects, TLS that fails, and endpoints at
//! addresses outside the allow-list. Each case is its own topic and subscription (two
//! attempts at most, a dead-letter destination), and must end in the right outcome with
//! every attempt over within the delivery timeout (2 s here) plus a small margin, while
//! eg reads only a bounded part of what the endpoint sends.
//!
//! The endpoints are eg-testkit's raw TCP servers ([`Hostile`]), which record, per
//! connection, when it was accepted, when eg closed it, and how many bytes they managed
//! to write before that (what eg read, plus what the two kernels buffered on the way). Validation is off:
//! these endpoints would not answer a handshake, and what is tested here is delivery.

use eg_system_tests::{
    Behaviour, DEADLINE, DeadLettered, Options, Receiver, System, dead_letter_to, event, eventually, metric,
    subscription, wait_successes,
};
use eg_testkit::hostile::{Act, Conn, Hostile};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The harness's `EG__DELIVERY__TIMEOUT`.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(2);
/// How much later than the delivery timeout an attempt may be seen to end (processes
/// share two cores with parallel tests).
const MARGIN: Duration = Duration::from_secs(2);
/// Attempts per delivery in every case.
const ATTEMPTS: u64 = 2;
/// The most a hostile endpoint may manage to write on one connection before eg closes
/// it: the sender reads 64 KiB (`sender.max_response_bytes`), hyper buffers at most
/// ~400 KiB more, and the kernels buffer a few MiB on loopback. Far below 100 MB.
const WRITTEN_BOUND: u64 = 16 << 20;
/// A body eg must not read through.
const HUGE: u64 = 100_000_000;

/// How often a trickling endpoint writes its next byte.
const TRICKLE_EVERY: Duration = Duration::from_millis(200);

// ----- cases -----

/// Creates topic `name` with subscription `name` to `url`: `ATTEMPTS` attempts, dead
/// letters to container `name`; publishes one event with id `name`.
async fn case(system: &System, name: &str, url: &str) {
    system.create_topic(name).await;
    let extra = json!({
        "retryPolicy": {"maxDeliveryAttempts": ATTEMPTS, "eventTimeToLiveInMinutes": 10},
        "deadLetterDestination": dead_letter_to(name),
    });
    system.create_subscription(name, name, subscription(url, extra)).await;
    system
        .publish_ok(
            name,
            &json!([event(name, "Test.Hostile", "/hostile", json!({"case": name}))]),
        )
        .await;
}

/// The dead-letter record of case `name`, once written.
async fn dead_letter_of(system: &System, name: &str) -> Value {
    eventually(DEADLINE, &format!("the dead-letter record of {name}"), || async {
        let records: Vec<DeadLettered> = system.dead_letter_records();
        records.into_iter().find(|r| r.record["id"] == name).map(|r| r.record)
    })
    .await
}

/// `deadLetterReason`, `lastDeliveryOutcome`, `lastHttpStatusCode` (`None` when absent)
/// and `deliveryAttempts` of a record.
fn outcome_of(record: &Value) -> (String, String, Option<u64>, u64) {
    (
        record["deadLetterReason"].as_str().unwrap_or_default().to_owned(),
        record["lastDeliveryOutcome"].as_str().unwrap_or_default().to_owned(),
        record["lastHttpStatusCode"].as_u64(),
        record["deliveryAttempts"].as_u64().unwrap_or_default(),
    )
}

/// Every attempt the sender made for `topic` took at most 5 s by its own clock
/// (`DestinationProcessingDurationInMs`, bucket `le="5000"`: the 2 s timeout with room
/// for a busy machine; a hostile endpoint would hold an attempt forever); returns how
/// many it made.
async fn assert_attempts_within_timeout(system: &System, topic: &str) -> f64 {
    let text = system.sender_metrics().await;
    let name = "DestinationProcessingDurationInMs";
    let all = metric(&text, &format!("{name}_count"), &[("topic", topic)]);
    let quick = metric(&text, &format!("{name}_bucket"), &[("topic", topic), ("le", "5000")]);
    let sum = metric(&text, &format!("{name}_sum"), &[("topic", topic)]);
    eprintln!("{topic}: {all} attempt(s), {:.0} ms on average", sum / all.max(1.0));
    assert!(all > 0.0, "{topic}: no attempt measured");
    assert_eq!(quick, all, "{topic}: {} of {all} attempts took over 5 s", all - quick);
    all
}

/// Each connection was closed by eg within the delivery timeout (plus the margin) of
/// being accepted, after the endpoint managed to write at most `WRITTEN_BOUND` bytes.
fn assert_closed_in_time(what: &str, conns: &[Arc<Conn>]) {
    for (i, conn) in conns.iter().enumerate() {
        let open = conn.open_for().unwrap();
        eprintln!(
            "{what}: connection {i} closed by eg after {open:?}, {} bytes written",
            conn.written()
        );
        assert!(
            open <= DELIVERY_TIMEOUT + MARGIN,
            "{what}: connection {i} stayed open {open:?}"
        );
        assert!(
            conn.written() <= WRITTEN_BOUND,
            "{what}: connection {i}: the endpoint wrote {} bytes",
            conn.written()
        );
    }
}

fn options() -> Options {
    Options::default().env("EG__VALIDATION__ENABLED", "false")
}

// ----- (a), (b) endless and huge bodies -----

/// A `200` whose body never ends, and a `200` announcing (and streaming) 100 MB: both
/// are delivered (the status is what counts), eg reads 64 KiB and closes the
/// connection at once. A `500` announcing 100 MB is a failure like any `500`: retried,
/// then dead-lettered, each connection closed as quickly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_and_huge_bodies_are_read_only_up_to_the_limit() {
    let system = System::start(options()).await;
    let endless = Hostile::start(Act::Endless { status: 200 }).await;
    let huge = Hostile::start(Act::Sized { status: 200, len: HUGE }).await;
    let huge_500 = Hostile::start(Act::Sized { status: 500, len: HUGE }).await;
    let started = Instant::now();
    case(&system, "endless-body", &endless.url("http")).await;
    case(&system, "huge-body", &huge.url("http")).await;
    case(&system, "huge-body-500", &huge_500.url("http")).await;

    wait_successes(&system, "endless-body", 1.0).await;
    wait_successes(&system, "huge-body", 1.0).await;
    eprintln!("endless and huge 200 bodies delivered within {:?}", started.elapsed());
    assert_closed_in_time("endless body", &endless.wait_closed(1, DEADLINE).await);
    assert_closed_in_time("huge body", &huge.wait_closed(1, DEADLINE).await);
    for conn in endless.conns().iter().chain(&huge.conns()) {
        assert!(
            conn.open_for().unwrap() < DELIVERY_TIMEOUT,
            "a 200 with a big body was held open {:?}",
            conn.open_for()
        );
    }

    let record = dead_letter_of(&system, "huge-body-500").await;
    eprintln!("huge 500 body dead-lettered after {:?}", started.elapsed());
    assert_eq!(
        outcome_of(&record),
        (
            "MaxDeliveryAttemptsExceeded".into(),
            "GenericError".into(),
            Some(500),
            ATTEMPTS
        ),
        "{record}"
    );
    let conns = huge_500.wait_closed(ATTEMPTS as usize, DEADLINE).await;
    assert_eq!(conns.len() as u64, ATTEMPTS);
    assert_closed_in_time("huge 500 body", &conns);
    for topic in ["endless-body", "huge-body", "huge-body-500"] {
        assert_attempts_within_timeout(&system, topic).await;
    }
    assert!(
        system
            .dead_letter_records()
            .iter()
            .all(|r| r.record["id"] == "huge-body-500")
    );
}

// ----- (c) trickles -----

/// A `200` head at once and then a body byte every 200 ms, and a head trickled a byte
/// every 200 ms: each attempt times out at the delivery timeout and eg closes the
/// connection then (late-success listening is off here; with it on, the request would
/// be listened to in the background, outside the attempt and its slot). Retried, then
/// dead-lettered as `TimedOut`, with no status: the attempt never had a whole answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickled_responses_time_out_within_the_delivery_timeout() {
    let system = System::start(options().env("EG__SENDER__LATE_SUCCESS_WINDOW", "0s")).await;
    let body = Hostile::start(Act::TrickleBody { every: TRICKLE_EVERY }).await;
    let head = Hostile::start(Act::TrickleHead { every: TRICKLE_EVERY }).await;
    case(&system, "trickled-body", &body.url("http")).await;
    case(&system, "trickled-head", &head.url("http")).await;
    for (name, server) in [("trickled-body", &body), ("trickled-head", &head)] {
        let record = dead_letter_of(&system, name).await;
        assert_eq!(
            outcome_of(&record),
            ("MaxDeliveryAttemptsExceeded".into(), "TimedOut".into(), None, ATTEMPTS),
            "{record}"
        );
        let conns = server.wait_closed(ATTEMPTS as usize, DEADLINE).await;
        assert_eq!(conns.len() as u64, ATTEMPTS, "{name}");
        assert_closed_in_time(name, &conns);
        for conn in &conns {
            assert!(
                conn.open_for().unwrap() >= DELIVERY_TIMEOUT - Duration::from_millis(100),
                "{name}: closed after {:?}, before the delivery timeout",
                conn.open_for()
            );
        }
        assert_attempts_within_timeout(&system, name).await;
    }
}

// ----- (d) redirects -----

/// 301, 302, 307 and 308 pointing at a receiver that would answer 200: the redirect is
/// the attempt's answer (a failure, retried like any), never followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_failed_attempts_and_never_followed() {
    let system = System::start(options()).await;
    let target = Receiver::start(Behaviour::Status(200)).await;
    let location: &'static str = Box::leak(target.url().to_owned().into_boxed_str());
    let mut servers = Vec::new();
    for status in [301, 302, 307, 308] {
        let server = Hostile::start(Act::Redirect { status, location }).await;
        let name = format!("redirect-{status}");
        case(&system, &name, &server.url("http")).await;
        servers.push((status, name, server));
    }
    for (status, name, server) in &servers {
        let record = dead_letter_of(&system, name).await;
        assert_eq!(
            outcome_of(&record),
            (
                "MaxDeliveryAttemptsExceeded".into(),
                "GenericError".into(),
                Some(u64::from(*status)),
                ATTEMPTS
            ),
            "{record}"
        );
        assert_eq!(
            server.conns().len() as u64,
            ATTEMPTS,
            "{name}: one connection per attempt"
        );
        assert_attempts_within_timeout(&system, name).await;
    }
    assert_eq!(target.count(), 0, "a redirect was followed");
}

// ----- (e) TLS -----

/// An `https` endpoint whose port speaks plain HTTP, and one that writes garbage: the
/// TLS handshake fails at once (`SocketError`, retried, then dead-lettered), nothing is
/// sent in the clear. One that accepts and never answers the handshake times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_tls_is_a_socket_error_and_a_silent_handshake_times_out() {
    let system = System::start(options()).await;
    let plain = Receiver::start(Behaviour::Status(200)).await;
    let garbage = Hostile::start(Act::Garbage).await;
    let silent = Hostile::start(Act::Silent).await;
    let plain_https = plain.url().replacen("http://", "https://", 1);
    case(&system, "tls-plain-http", &plain_https).await;
    case(&system, "tls-garbage", &garbage.url("https")).await;
    case(&system, "tls-silent", &silent.url("https")).await;

    for name in ["tls-plain-http", "tls-garbage"] {
        let record = dead_letter_of(&system, name).await;
        assert_eq!(
            outcome_of(&record),
            (
                "MaxDeliveryAttemptsExceeded".into(),
                "SocketError".into(),
                None,
                ATTEMPTS
            ),
            "{record}"
        );
        assert_attempts_within_timeout(&system, name).await;
    }
    assert_eq!(plain.count(), 0, "a request reached the plain HTTP port");
    let conns = garbage.wait_closed(ATTEMPTS as usize, DEADLINE).await;
    for conn in &conns {
        assert!(
            conn.open_for().unwrap() < DELIVERY_TIMEOUT,
            "the garbage TLS connection stayed open {:?}",
            conn.open_for()
        );
    }

    let record = dead_letter_of(&system, "tls-silent").await;
    assert_eq!(
        outcome_of(&record),
        ("MaxDeliveryAttemptsExceeded".into(), "TimedOut".into(), None, ATTEMPTS),
        "{record}"
    );
    assert_attempts_within_timeout(&system, "tls-silent").await;
}

// ----- (f) refused addresses -----

/// With the harness allow-list (`127.0.0.1/32`), an endpoint on `127.0.0.2` (loopback,
/// but not on the list) is refused before any connection: dead-lettered after one
/// attempt as `AddressNotAllowed`, not retried. (`localhost` would be let through here:
/// it resolves to 127.0.0.1, which the list covers.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_outside_the_allow_list_is_refused_unsent() {
    let system = System::start(options()).await;
    let outside = Hostile::start_on("127.0.0.2", Act::Ok).await;
    let started = Instant::now();
    case(&system, "refused-literal", &outside.url("http")).await;
    let record = dead_letter_of(&system, "refused-literal").await;
    eprintln!("127.0.0.2 dead-lettered after {:?}", started.elapsed());
    assert_eq!(
        outcome_of(&record),
        ("NonRetriableFailure".into(), "AddressNotAllowed".into(), None, 1),
        "{record}"
    );
    assert!(outside.conns().is_empty(), "127.0.0.2 was connected to");
    assert_attempts_within_timeout(&system, "refused-literal").await;
}

/// With the allow-list `127.0.0.2/32`, a name that resolves only to refused addresses
/// (`localhost`: 127.0.0.1, maybe ::1) is refused by the resolver, and so is the
/// literal 127.0.0.1, while an endpoint on 127.0.0.2 is delivered to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_resolving_outside_the_allow_list_is_refused_unsent() {
    let system = System::start(options().env("EG__DELIVERY__ALLOWED_NETWORKS", "127.0.0.2/32")).await;
    let inside = Hostile::start_on("127.0.0.2", Act::Ok).await;
    let refused = Hostile::start(Act::Ok).await;
    let by_name = format!("http://localhost:{}/hook", refused.addr().port());
    case(&system, "refused-name", &by_name).await;
    case(&system, "refused-loopback", &refused.url("http")).await;
    case(&system, "allowed-127-0-0-2", &inside.url("http")).await;
    for name in ["refused-name", "refused-loopback"] {
        let record = dead_letter_of(&system, name).await;
        assert_eq!(
            outcome_of(&record),
            ("NonRetriableFailure".into(), "AddressNotAllowed".into(), None, 1),
            "{record}"
        );
    }
    wait_successes(&system, "allowed-127-0-0-2", 1.0).await;
    assert_eq!(inside.conns().len(), 1);
    assert!(refused.conns().is_empty(), "a refused address was connected to");
}
