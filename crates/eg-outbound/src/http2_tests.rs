//! The guarded client against a hostile HTTP/2 endpoint (TLS, ALPN `h2`) that answers
//! `200` with a body that never ends: eg reads 64 KiB and resets the stream, and the
//! endpoint can have sent at most that plus one receive window. Here (not in `tests/`)
//! because the client must trust the endpoint's self-signed certificate, which only a
//! crate-internal constructor allows.

#![allow(clippy::unwrap_used)]

use crate::client::Client;
use crate::drain;
use crate::settings::OutboundSettings;
use crate::transport::{ForTests, H2_STREAM_WINDOW};
use eg_core::address::AddressPolicy;
use rustls::pki_types::CertificateDer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What the sender reads of a response (`sender.max_response_bytes`' default).
const LIMIT: usize = 64 * 1024;
/// The largest DATA frame (SETTINGS_MAX_FRAME_SIZE's default): the most `drain` reads
/// past its limit, and the most the endpoint sends at once.
const FRAME: u64 = 16 * 1024;

/// An HTTP/2 endpoint that answers its first request with an endless body, as fast as
/// flow control lets it; `sent` counts the body bytes sent before the stream was reset.
struct Endless {
    addr: SocketAddr,
    root: CertificateDer<'static>,
    sent: Arc<AtomicU64>,
    finished: tokio::sync::oneshot::Receiver<()>,
}

async fn endless_h2_endpoint() -> Endless {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let root = cert.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&sent);
    let (done, finished) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let tls = acceptor.accept(tcp).await.unwrap();
        let mut connection = h2::server::handshake(tls).await.unwrap();
        let (_request, mut respond) = connection.accept().await.unwrap().unwrap();
        // The connection makes progress only while polled.
        tokio::spawn(async move { while connection.accept().await.is_some() {} });
        let mut stream = respond.send_response(http::Response::new(()), false).unwrap();
        loop {
            stream.reserve_capacity(FRAME as usize);
            match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
                Some(Ok(n)) if n > 0 => {
                    if stream.send_data(bytes::Bytes::from(vec![b'x'; n]), false).is_err() {
                        break;
                    }
                    counter.fetch_add(n as u64, Ordering::SeqCst);
                }
                Some(Ok(_)) => {}
                // Reset by the client, or the connection is gone.
                _ => break,
            }
        }
        let _ = done.send(());
    });
    Endless {
        addr,
        root,
        sent,
        finished,
    }
}

fn settings() -> OutboundSettings {
    OutboundSettings {
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        policy: AddressPolicy::parse(["127.0.0.1/32"]).unwrap(),
        user_agent: "eg-outbound-tests".into(),
        extra_roots_pem: None,
    }
}

/// The body bytes the endpoint managed to send while eg read `LIMIT` bytes with the
/// client `build` makes.
async fn sent_while_draining(build: impl FnOnce(CertificateDer<'static>) -> Client) -> u64 {
    let endpoint = endless_h2_endpoint().await;
    let client = build(endpoint.root.clone());
    let url = format!("https://localhost:{}/hook", endpoint.addr.port());
    let response = client.post(&url).body("[]").send().await.unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.status(), http::StatusCode::OK);
    drain(response, LIMIT).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), endpoint.finished)
        .await
        .expect("the stream was not reset after the body was dropped")
        .unwrap();
    endpoint.sent.load(Ordering::SeqCst)
}

#[tokio::test]
async fn an_endless_http2_body_is_buffered_at_most_one_small_window_past_the_limit() {
    let sent = sent_while_draining(|root| {
        let tests = ForTests {
            roots: vec![root],
            hypers_h2_windows: false,
        };
        Client::build(settings(), None, &tests).unwrap()
    })
    .await;
    let bound = LIMIT as u64 + FRAME + u64::from(H2_STREAM_WINDOW) + FRAME;
    eprintln!("HTTP/2, eg's windows: the endpoint sent {sent} bytes (bound {bound})");
    assert!(sent >= LIMIT as u64, "only {sent} bytes were sent");
    assert!(sent <= bound, "the endpoint sent {sent} bytes while eg read {LIMIT}");

    // The control: with hyper's default windows the same endpoint gets about 2 MiB into
    // memory, which is what the window settings prevent (and shows this test can fail).
    let sent = sent_while_draining(|root| {
        let tests = ForTests {
            roots: vec![root],
            hypers_h2_windows: true,
        };
        Client::build(settings(), None, &tests).unwrap()
    })
    .await;
    eprintln!("HTTP/2, hyper's default windows: the endpoint sent {sent} bytes");
    assert!(
        sent > 2 * bound,
        "{sent} bytes with hyper's default windows (eg's bound {bound})"
    );
}
