//! The guarded client against endpoints that misbehave on purpose: bodies that never end
//! or are huge, responses and heads that trickle, heads that never end, endless `100
//! Continue`s, and TLS that fails (plain HTTP, garbage, silence, a self-signed
//! certificate). Each request must end within the client's timeout with the outcome the
//! sender would record, and eg must read only a bounded part of what is sent.
//!
//! The endpoints are eg-testkit's raw TCP servers ([`Hostile`]), which do what no HTTP
//! framework would and record, per connection, when it was accepted, when the client
//! closed it and how many bytes they managed to write.

#![allow(clippy::unwrap_used)]

mod common;

use common::client;
use eg_core::AttemptOutcome;
use eg_core::address::AddressPolicy;
use eg_outbound::{Client, Handshake, drain, event_grid_handshake};
use eg_testkit::hostile::{Act, Hostile};
use reqwest::StatusCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// The client's whole-request timeout in these tests: long enough that "ended well
/// before the timeout" (a limit cut it off) and "ended by the timeout" stay apart on a
/// busy 2-core machine running a debug build.
const TIMEOUT: Duration = Duration::from_secs(3);
/// How late after [`TIMEOUT`] a request may still end (a busy 2-core machine).
const MARGIN: Duration = Duration::from_millis(1500);
/// The sender's default `sender.max_response_bytes`.
const LIMIT: usize = 64 * 1024;
/// At most this much may leave a hostile server before eg closes the connection: the
/// read limit, one read buffer of hyper's (≤ 400 KiB) and what the two kernels buffer
/// on loopback. Far below the 100 MB the endpoint wanted to send.
const WRITTEN_BOUND: u64 = 16 << 20;

// ----- helpers -----

/// The endpoint's URL with a secret in its query, which must never travel in the clear
/// nor appear in an error.
fn secret_url(server: &Hostile, scheme: &str) -> String {
    format!("{}?code=SECRET", server.url(scheme))
}

fn hostile_client() -> Client {
    client(AddressPolicy::parse(["127.0.0.1/32"]).unwrap(), TIMEOUT)
}

/// A POST like a delivery's.
async fn post(client: &Client, url: &str) -> Result<eg_outbound::Response, eg_outbound::SendError> {
    client
        .post(url)
        .header("content-type", "application/json; charset=utf-8")
        .body(r#"[{"id":"1"}]"#)
        .send()
        .await
}

/// What the sender does with a response: the status, and the body drained within the
/// bound. The outcome it would record.
async fn attempt(client: &Client, url: &str) -> AttemptOutcome {
    match post(client, url).await {
        Ok(response) => {
            let code = response.status().as_u16();
            match drain(response, LIMIT).await {
                Ok(()) => AttemptOutcome::Status {
                    code,
                    retry_after: None,
                },
                Err(e) => e.outcome(),
            }
        }
        Err(e) => e.outcome(),
    }
}

fn assert_within_timeout(what: &str, took: Duration) {
    eprintln!("{what}: ended after {took:?}");
    assert!(
        took <= TIMEOUT + MARGIN,
        "{what}: took {took:?}, the timeout is {TIMEOUT:?}"
    );
}

/// The connection was closed by eg soon after the request ended, and the server could
/// write only a bounded amount before that.
async fn assert_closed_early(what: &str, server: &Hostile, ended: Instant) {
    let conn = server.closed_conn().await;
    let closed = conn.closed().unwrap();
    let lag = closed.saturating_duration_since(ended);
    eprintln!(
        "{what}: connection closed {:?} after accept, {lag:?} after the request ended; {} bytes written",
        closed - conn.accepted,
        conn.written()
    );
    assert!(lag < MARGIN, "{what}: closed {lag:?} after the request ended");
    assert!(
        conn.written() <= WRITTEN_BOUND,
        "{what}: the endpoint wrote {} bytes before eg closed the connection",
        conn.written()
    );
}

// ----- bodies -----

#[tokio::test]
async fn an_endless_body_is_read_up_to_the_limit_then_the_connection_is_closed() {
    let server = Hostile::start(Act::Endless { status: 200 }).await;
    let client = hostile_client();
    let started = Instant::now();
    let outcome = attempt(&client, &secret_url(&server, "http")).await;
    let ended = Instant::now();
    assert_eq!(outcome.status_code(), Some(200), "{outcome:?}");
    assert!(outcome.is_success());
    assert!(
        ended - started < TIMEOUT / 2,
        "draining {LIMIT} bytes took {:?}",
        ended - started
    );
    assert_closed_early("endless body", &server, ended).await;
}

#[tokio::test]
async fn a_huge_announced_body_is_read_up_to_the_limit_then_the_connection_is_closed() {
    for status in [200, 500] {
        let server = Hostile::start(Act::Sized {
            status,
            len: 100_000_000,
        })
        .await;
        let client = hostile_client();
        let started = Instant::now();
        let outcome = attempt(&client, &secret_url(&server, "http")).await;
        let ended = Instant::now();
        assert_eq!(outcome.status_code(), Some(status), "{outcome:?}");
        assert!(ended - started < TIMEOUT / 2, "took {:?}", ended - started);
        assert_closed_early(&format!("100 MB body, {status}"), &server, ended).await;
    }
}

#[tokio::test]
async fn a_trickled_body_times_out_within_the_timeout() {
    let server = Hostile::start(Act::TrickleBody {
        every: Duration::from_millis(200),
    })
    .await;
    let client = hostile_client();
    let started = Instant::now();
    let response = post(&client, &secret_url(&server, "http")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "the head came at once");
    let error = drain(response, LIMIT).await.unwrap_err();
    let ended = Instant::now();
    assert_eq!(error.outcome(), AttemptOutcome::TimedOut, "{error:?}");
    assert_within_timeout("trickled body", ended - started);
    assert_closed_early("trickled body", &server, ended).await;
}

#[tokio::test]
async fn the_validation_handshake_reads_a_hostile_body_within_bounds() {
    let client = hostile_client();
    let endless = Hostile::start(Act::Endless { status: 200 }).await;
    let started = Instant::now();
    let answer = event_grid_handshake(&client, &secret_url(&endless, "http"), "[]".into(), "code", 4096).await;
    let ended = Instant::now();
    assert!(
        matches!(&answer, Handshake::Refused { reason } if reason.contains("longer than 4096 bytes")),
        "{answer:?}"
    );
    assert!(ended - started < TIMEOUT / 2, "took {:?}", ended - started);
    assert_closed_early("handshake, endless body", &endless, ended).await;

    let trickle = Hostile::start(Act::TrickleBody {
        every: Duration::from_millis(200),
    })
    .await;
    let started = Instant::now();
    let answer = event_grid_handshake(&client, &secret_url(&trickle, "http"), "[]".into(), "code", 4096).await;
    let ended = Instant::now();
    assert!(
        matches!(
            answer,
            Handshake::Unreachable {
                outcome: AttemptOutcome::TimedOut,
                ..
            }
        ),
        "{answer:?}"
    );
    assert_within_timeout("handshake, trickled body", ended - started);
    assert_closed_early("handshake, trickled body", &trickle, ended).await;
}

// ----- redirects -----

/// 301, 302, 307 and 308 are the attempt's answer; the target they name is never
/// contacted.
#[tokio::test]
async fn a_redirect_is_the_answer_and_is_not_followed() {
    let target = Hostile::start(Act::Sized { status: 200, len: 0 }).await;
    let location: &'static str = Box::leak(secret_url(&target, "http").into_boxed_str());
    for status in [301, 302, 307, 308] {
        let server = Hostile::start(Act::Redirect { status, location }).await;
        let client = hostile_client();
        let started = Instant::now();
        let outcome = attempt(&client, &secret_url(&server, "http")).await;
        assert_eq!(outcome.status_code(), Some(status), "{outcome:?}");
        assert!(started.elapsed() < TIMEOUT / 2, "took {:?}", started.elapsed());
    }
    assert!(target.conns().is_empty(), "a redirect was followed");
}

// ----- heads -----

#[tokio::test]
async fn a_trickled_head_times_out_within_the_timeout() {
    let server = Hostile::start(Act::TrickleHead {
        every: Duration::from_millis(200),
    })
    .await;
    let client = hostile_client();
    let started = Instant::now();
    let error = post(&client, &secret_url(&server, "http")).await.unwrap_err();
    let ended = Instant::now();
    assert_eq!(error.outcome(), AttemptOutcome::TimedOut, "{error:?}");
    assert_within_timeout("trickled head", ended - started);
    assert_closed_early("trickled head", &server, ended).await;
}

#[tokio::test]
async fn an_endless_head_fails_after_a_bounded_read() {
    let server = Hostile::start(Act::EndlessHead).await;
    let client = hostile_client();
    let started = Instant::now();
    let error = post(&client, &secret_url(&server, "http")).await.unwrap_err();
    let ended = Instant::now();
    assert_eq!(error.outcome(), AttemptOutcome::SocketError, "{error:?}");
    assert!(ended - started < TIMEOUT, "took {:?}", ended - started);
    assert_closed_early("endless head", &server, ended).await;
}

#[tokio::test]
async fn endless_informational_responses_time_out_within_the_timeout() {
    let server = Hostile::start(Act::EndlessContinue).await;
    let client = hostile_client();
    let started = Instant::now();
    let outcome = attempt(&client, &secret_url(&server, "http")).await;
    let ended = Instant::now();
    // hyper skips informational responses, so only the timeout ends this.
    assert_eq!(outcome, AttemptOutcome::TimedOut);
    assert_within_timeout("endless 100 Continue", ended - started);
    assert_closed_early("endless 100 Continue", &server, ended).await;
}

// ----- TLS -----

/// An `https` URL whose port answers with something other than TLS fails at once as a
/// socket error; nothing of the request (or its secret query) is sent in the clear.
#[tokio::test]
async fn https_to_a_server_that_does_not_speak_tls_is_a_socket_error() {
    for act in [Act::PlainHttp400, Act::Garbage] {
        let server = Hostile::start(act).await;
        let client = hostile_client();
        let started = Instant::now();
        let error = post(&client, &secret_url(&server, "https")).await.unwrap_err();
        let ended = Instant::now();
        assert_eq!(error.outcome(), AttemptOutcome::SocketError, "{act:?}: {error:?}");
        assert!(ended - started < TIMEOUT, "{act:?}: took {:?}", ended - started);
        assert!(!format!("{error} {error:?}").contains("SECRET"));
        let conn = server.closed_conn().await;
        let sent = conn.request();
        assert!(
            !sent.windows(6).any(|w| w == b"SECRET") && !sent.starts_with(b"POST"),
            "{act:?}: the request went out in the clear"
        );
    }
}

/// A server that accepts the connection and never answers the TLS handshake.
#[tokio::test]
async fn https_to_a_silent_server_times_out_within_the_timeout() {
    let server = Hostile::start(Act::Silent).await;
    let client = hostile_client();
    let started = Instant::now();
    let error = post(&client, &secret_url(&server, "https")).await.unwrap_err();
    let ended = Instant::now();
    assert_eq!(error.outcome(), AttemptOutcome::TimedOut, "{error:?}");
    assert_within_timeout("silent TLS server", ended - started);
    assert_closed_early("silent TLS server", &server, ended).await;
}

/// A real TLS server whose certificate no one vouches for: the handshake is refused by
/// eg (a socket error), and the request never reaches it.
#[tokio::test]
async fn https_to_a_self_signed_certificate_is_a_socket_error() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Per connection: what was read after a finished handshake, or why it failed.
    type Handshakes = Arc<Mutex<Vec<Result<Vec<u8>, String>>>>;
    let handshakes: Handshakes = Arc::default();
    let record = Arc::clone(&handshakes);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let result = match acceptor.accept(stream).await {
                Ok(mut tls) => {
                    // Only if eg trusted the certificate: read what it sent.
                    let mut buf = vec![0u8; 4096];
                    let n = tls.read(&mut buf).await.unwrap_or(0);
                    Ok(buf[..n].to_vec())
                }
                Err(e) => Err(e.to_string()),
            };
            record.lock().unwrap().push(result);
        }
    });

    for host in ["127.0.0.1".to_owned(), format!("localhost:{}", addr.port())] {
        let url = if host.contains(':') {
            format!("https://{host}/hook")
        } else {
            format!("https://{host}:{}/hook", addr.port())
        };
        let client = hostile_client();
        let started = Instant::now();
        let error = post(&client, &url).await.unwrap_err();
        assert_eq!(error.outcome(), AttemptOutcome::SocketError, "{url}: {error:?}");
        assert!(started.elapsed() < TIMEOUT, "took {:?}", started.elapsed());
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while handshakes.lock().unwrap().len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let handshakes = handshakes.lock().unwrap().clone();
    assert_eq!(handshakes.len(), 2, "{handshakes:?}");
    for handshake in handshakes {
        let error = handshake.expect_err("eg finished a handshake with an untrusted certificate");
        eprintln!("self-signed server: {error}");
    }
}
