//! The HTTP stack under the guarded [`Client`](crate::Client): hyper's pooled client
//! over hyper-util's connector (resolving through [`GuardedResolver`]) and rustls, the
//! stack reqwest is built on, used directly. A webhook delivery is one request, and
//! reqwest's layers around it (redirect and retry policies that parse the URL again,
//! its own timeouts, a header map merged per request) cost about a fifth of the sender's
//! CPU per delivery (docs/performance.md).

use crate::resolve::{GuardedResolver, causes, refusal_in, resolution_failed_in};
use crate::settings::{BuildError, ClientCertificate, OutboundSettings};
use bytes::Bytes;
use eg_core::AttemptOutcome;
use eg_core::address::AddressPolicy;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::error::Error;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// HTTP/2 receive windows: how much a server may send before eg has read it. hyper's
/// defaults (2 MiB per stream, 5 MiB per connection) would let an endpoint that speaks
/// HTTP/2 push 2 MiB into eg's memory per attempt, however little of the response eg
/// reads ([`drain`](crate::drain) stops at `sender.max_response_bytes`, 64 KiB by
/// default). With the protocol's own default stream window (64 KiB) an attempt holds at
/// most that much unread; webhook answers are small, so nothing is slower.
pub(crate) const H2_STREAM_WINDOW: u32 = 64 * 1024;
pub(crate) const H2_CONNECTION_WINDOW: u32 = 1024 * 1024;

/// A request's body: always whole in memory (a rendered batch).
pub(crate) type Body = Full<Bytes>;

/// The pooled client. Cheap to clone; clones share the pool.
pub(crate) type Http = hyper_util::client::legacy::Client<HttpsConnector<HttpConnector<GuardedResolver>>, Body>;

/// What only tests change.
#[derive(Debug, Default)]
pub(crate) struct ForTests {
    /// Trusted besides the system's roots (a self-signed local endpoint's certificate).
    pub roots: Vec<CertificateDer<'static>>,
    /// hyper's own HTTP/2 receive windows rather than eg's (the control of
    /// `http2_tests`).
    pub hypers_h2_windows: bool,
}

/// The pooled client for `settings`, connecting only where `policy` allows, and
/// presenting `certificate` when given.
pub(crate) fn http(
    settings: &OutboundSettings,
    policy: &Arc<AddressPolicy>,
    certificate: Option<&ClientCertificate>,
    tests: &ForTests,
) -> Result<Http, BuildError> {
    let mut tcp = HttpConnector::new_with_resolver(GuardedResolver::new(Arc::clone(policy)));
    tcp.set_connect_timeout(Some(settings.connect_timeout));
    tcp.set_nodelay(true);
    // A peer that vanished is noticed while an answer is awaited (reqwest's defaults).
    tcp.set_keepalive(Some(Duration::from_secs(15)));
    tcp.set_keepalive_interval(Some(Duration::from_secs(15)));
    tcp.set_keepalive_retries(Some(3));
    // The TLS layer above handles `https`.
    tcp.enforce_http(false);
    let tls = tls_config(settings, certificate, &tests.roots)?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(tcp);
    let mut client = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
    client
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(60));
    if !tests.hypers_h2_windows {
        client
            .http2_initial_stream_window_size(H2_STREAM_WINDOW)
            .http2_initial_connection_window_size(H2_CONNECTION_WINDOW);
    }
    Ok(client.build(connector))
}

/// rustls with the platform's trust roots (and `EG__DELIVERY__TLS_CA_FILE`'s), as
/// reqwest sets it up; ALPN is set by the connector (`h2`, then `http/1.1`).
fn tls_config(
    settings: &OutboundSettings,
    certificate: Option<&ClientCertificate>,
    test_roots: &[CertificateDer<'static>],
) -> Result<rustls::ClientConfig, BuildError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = test_roots.to_vec();
    if let Some(pem) = &settings.extra_roots_pem {
        for root in CertificateDer::pem_slice_iter(pem) {
            roots.push(root.map_err(|e| BuildError::new("a certificate of the trusted CA file", e))?);
        }
    }
    let verifier = if roots.is_empty() {
        rustls_platform_verifier::Verifier::new(Arc::clone(&provider))
    } else {
        rustls_platform_verifier::Verifier::new_with_extra_roots(roots, Arc::clone(&provider))
    }
    .map_err(|e| BuildError::new("the TLS certificate verifier", e))?;
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| BuildError::new("the TLS configuration", e))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    match certificate {
        None => Ok(builder.with_no_client_auth()),
        Some(certificate) => builder
            .with_client_auth_cert(certificate.chain().to_vec(), certificate.key())
            .map_err(|e| BuildError::new("the client certificate", e)),
    }
}

/// Why a request got no (complete) answer. Never names the URL.
#[derive(Debug, thiserror::Error)]
pub struct TransportError {
    kind: Failure,
    #[source]
    source: Option<Box<dyn Error + Send + Sync>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// The request's time ran out (connecting, waiting for the head, or reading the body).
    TimedOut,
    /// No connection was made: resolution, refusal, TCP or TLS.
    Connect,
    /// The request could not be built (a header hyper refused).
    Request,
    /// The connection broke, or the answer was not HTTP.
    Exchange,
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            Failure::TimedOut => "the request timed out",
            Failure::Connect => "no connection could be made",
            Failure::Request => "the request could not be built",
            Failure::Exchange => "the exchange failed",
        };
        match &self.source {
            Some(source) => write!(f, "{what}: {source}"),
            None => f.write_str(what),
        }
    }
}

impl TransportError {
    pub(crate) fn timed_out() -> Self {
        Self {
            kind: Failure::TimedOut,
            source: None,
        }
    }

    pub(crate) fn request(source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self {
            kind: Failure::Request,
            source: Some(source.into()),
        }
    }

    pub(crate) fn from_client(error: hyper_util::client::legacy::Error) -> Self {
        let kind = if error.is_connect() {
            Failure::Connect
        } else {
            Failure::Exchange
        };
        Self {
            kind,
            source: Some(Box::new(error)),
        }
    }

    fn from_body(error: hyper::Error) -> Self {
        let kind = if error.is_timeout() {
            Failure::TimedOut
        } else {
            Failure::Exchange
        };
        Self {
            kind,
            source: Some(Box::new(error)),
        }
    }

    /// Whether no connection was made (nothing was sent).
    pub fn is_connect(&self) -> bool {
        self.kind == Failure::Connect
    }

    /// Whether the endpoint refused the TCP connection (nothing listens there).
    pub fn is_connection_refused(&self) -> bool {
        self.has_io_cause(std::io::ErrorKind::ConnectionRefused)
    }

    /// The attempt outcome this failure stands for.
    pub fn outcome(&self) -> AttemptOutcome {
        if refusal_in(self).is_some() {
            AttemptOutcome::AddressNotAllowed
        } else if self.kind == Failure::TimedOut || self.connect_timed_out() {
            AttemptOutcome::TimedOut
        } else if resolution_failed_in(self) {
            AttemptOutcome::ResolutionError
        } else {
            AttemptOutcome::SocketError
        }
    }

    /// hyper-util reports its connect timeout as an `io::Error` of kind `TimedOut`.
    fn connect_timed_out(&self) -> bool {
        self.kind == Failure::Connect && self.has_io_cause(std::io::ErrorKind::TimedOut)
    }

    /// Whether an I/O error of `kind` is among the causes.
    fn has_io_cause(&self, kind: std::io::ErrorKind) -> bool {
        causes(self).any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == kind))
    }
}

/// An answer: its head, and its body to be read by the same deadline as the request.
#[derive(Debug)]
pub struct Response {
    head: http::response::Parts,
    body: Incoming,
    deadline: Instant,
}

impl Response {
    pub(crate) fn new(response: http::Response<Incoming>, deadline: Instant) -> Self {
        let (head, body) = response.into_parts();
        Self { head, body, deadline }
    }

    pub fn version(&self) -> http::Version {
        self.head.version
    }

    pub fn status(&self) -> http::StatusCode {
        self.head.status
    }

    pub fn headers(&self) -> &http::HeaderMap {
        &self.head.headers
    }

    /// The next piece of the body; `None` at its end. Fails once the request's time is
    /// up. Dropping the response before the end closes the connection.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, TransportError> {
        loop {
            let frame = tokio::time::timeout_at(self.deadline, self.body.frame())
                .await
                .map_err(|_| TransportError::timed_out())?;
            match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(TransportError::from_body(e)),
                // Trailers carry nothing eg reads.
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }
}
