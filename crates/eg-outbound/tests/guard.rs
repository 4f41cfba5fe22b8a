//! The guarded client against real receivers on 127.0.0.1: refused addresses never
//! see a connection, the allow-list opens them, redirects are not followed, and
//! transport failures are classified.

mod common;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use common::{client, guarded_client, loopback_client, spawn};
use eg_core::AttemptOutcome;
use eg_core::address::{AddressCategory, AddressPolicy};
use eg_outbound::{Blocked, SendError, drain};
use eg_testkit::RefusingPort;
use std::time::{Duration, Instant};

fn ok_router() -> Router {
    Router::new().route("/", get(|| async { "hello" }).post(|| async { StatusCode::ACCEPTED }))
}

fn refusal(result: Result<eg_outbound::Response, SendError>) -> AddressCategory {
    match result {
        Err(SendError::Blocked(Blocked::Address(refusal))) => refusal.category(),
        Err(other) => panic!("expected a refusal, got {other:?} ({:?})", other.outcome()),
        Ok(response) => panic!("expected a refusal, got {}", response.status()),
    }
}

#[tokio::test]
async fn loopback_literals_are_refused_before_any_connection() {
    let receiver = spawn(ok_router()).await;
    let port = receiver.port();
    let client = guarded_client();
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f.1:{port}/"),
        format!("http://0177.0.0.1:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::1]:{port}/"),
    ] {
        let result = client.post(&url).body("[]").send().await;
        assert!(
            matches!(&result, Err(e) if e.outcome() == AttemptOutcome::AddressNotAllowed),
            "{url}: {result:?}"
        );
        assert_eq!(refusal(result), AddressCategory::Loopback, "{url}");
    }
    let result = client.post(&format!("http://0.0.0.0:{port}/")).send().await;
    assert_eq!(refusal(result), AddressCategory::Unspecified);
    receiver.assert_untouched_so_far().await;
}

#[tokio::test]
async fn the_allow_list_opens_loopback() {
    let receiver = spawn(ok_router()).await;
    let client = client(AddressPolicy::parse(["127.0.0.1/32"]).unwrap(), Duration::from_secs(5));
    let response = client.post(&receiver.url("/")).body("[]").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let mut response = client
        .request(Method::GET, &format!("http://2130706433:{}/", receiver.port()))
        .send()
        .await
        .unwrap();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    assert_eq!(body, b"hello");
    let seen = receiver.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].method, Method::POST);
    assert_eq!(seen[0].headers[header::USER_AGENT], "eg-outbound-tests");
    // 127.0.0.2 is loopback too, but not on the list.
    let result = client
        .post(&format!("http://127.0.0.2:{}/", receiver.port()))
        .send()
        .await;
    assert_eq!(refusal(result), AddressCategory::Loopback);
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_by_the_resolver() {
    let receiver = spawn(ok_router()).await;
    let url = format!("http://localhost:{}/?code=SECRET", receiver.port());
    let result = guarded_client().post(&url).body("[]").send().await;
    let error = result.as_ref().err().map(|e| (e.outcome(), e.to_string()));
    assert_eq!(refusal(result), AddressCategory::Loopback);
    let (outcome, text) = error.unwrap();
    assert_eq!(outcome, AttemptOutcome::AddressNotAllowed);
    assert!(!text.contains("SECRET") && !text.contains("localhost"), "{text}");
    receiver.assert_untouched_so_far().await;

    // With the allow-list the same name works.
    let response = loopback_client().post(&url).body("[]").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
}

#[tokio::test]
async fn redirects_are_returned_not_followed() {
    let target = spawn(ok_router()).await;
    let location = target.url("/");
    let redirecting = spawn(
        Router::new().route(
            "/",
            get(move || {
                let location = location.clone();
                async move { (StatusCode::FOUND, [(header::LOCATION, location)]) }
            })
            .post(|| async { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, "/elsewhere")]) }),
        ),
    )
    .await;
    let client = loopback_client();
    let response = client.request(Method::GET, &redirecting.url("/")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::FOUND);
    let response = client.post(&redirecting.url("/")).body("[]").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::TEMPORARY_REDIRECT);
    let paths: Vec<String> = redirecting.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(paths, ["/", "/"], "the /elsewhere redirect was followed");
    assert_eq!(target.connections(), 0, "the cross-host redirect was followed");
}

#[tokio::test]
async fn transport_failures_are_classified_and_hide_the_url() {
    // Timed out: the receiver answers after the client gave up.
    let slow = spawn(Router::new().route(
        "/",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "late"
        }),
    ))
    .await;
    let quick = client(AddressPolicy::parse(["127.0.0.1"]).unwrap(), Duration::from_millis(300));
    let started = Instant::now();
    let error = quick
        .request(Method::GET, &slow.url("/?code=SECRET"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(error.outcome(), AttemptOutcome::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(3));
    for text in [error.to_string(), format!("{error:?}")] {
        assert!(!text.contains("SECRET"), "{text}");
    }

    // Connection refused: nothing listens on the port any more.
    let refusing = RefusingPort::new();
    let port = refusing.port();
    let error = loopback_client()
        .post(&format!("http://127.0.0.1:{port}/?code=SECRET"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(error.outcome(), AttemptOutcome::SocketError);
    assert!(!format!("{error} {error:?}").contains("SECRET"));

    // A name that does not resolve (.invalid never does, RFC 6761).
    let error = guarded_client()
        .post("http://eg-outbound-test.invalid/")
        .send()
        .await
        .unwrap_err();
    assert_eq!(error.outcome(), AttemptOutcome::ResolutionError);
}

#[tokio::test]
async fn not_http_is_blocked() {
    let error = guarded_client().post("file:///etc/passwd").send().await.unwrap_err();
    assert!(matches!(error, SendError::Blocked(Blocked::InvalidUrl(_))), "{error:?}");
    assert_eq!(error.outcome(), AttemptOutcome::AddressNotAllowed);
    let error = guarded_client().post("not a url").send().await.unwrap_err();
    assert!(matches!(error, SendError::Blocked(Blocked::InvalidUrl(_))), "{error:?}");
}

/// A body that sends `prefix` bytes and then never ends.
fn endless_body(prefix: usize) -> axum::response::Response {
    let (mut writer, reader) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let _ = writer.write_all(&vec![b'x'; prefix]).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(writer);
    });
    Body::from_stream(tokio_util::io::ReaderStream::new(reader)).into_response()
}

#[tokio::test]
async fn drain_stops_at_its_limit_and_an_unending_body_times_out() {
    let receiver = spawn(Router::new().route("/", get(|| async { endless_body(256 * 1024) }))).await;
    // The timeout is far above what reading 64 KiB takes even on a busy machine, so
    // ending well before it shows the limit, not the timeout, stopped the read.
    let client = client(AddressPolicy::parse(["127.0.0.1"]).unwrap(), Duration::from_secs(8));

    let response = client.request(Method::GET, &receiver.url("/")).send().await.unwrap();
    let started = Instant::now();
    drain(response, 64 * 1024).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(4), "drain read past its limit");

    let response = client.request(Method::GET, &receiver.url("/")).send().await.unwrap();
    let error = drain(response, 1 << 20).await.unwrap_err();
    assert_eq!(error.outcome(), AttemptOutcome::TimedOut);
}
