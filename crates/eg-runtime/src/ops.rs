//! `/healthz` (the process runs), `/readyz` (it can reach Redis) and `/metrics`
//! (Prometheus text: eg's metrics and the standard `process_*` ones), served by every tier.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use eg_store::Store;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use metrics_exporter_prometheus::PrometheusHandle;
use std::time::Duration;

#[derive(Clone)]
struct OpsState {
    store: Store,
    metrics: PrometheusHandle,
}

pub fn router(store: Store, metrics: PrometheusHandle) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(render))
        .with_state(OpsState { store, metrics })
}

async fn ready(State(state): State<OpsState>) -> (StatusCode, String) {
    match state.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready".into()),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {e}")),
    }
}

async fn render(State(state): State<OpsState>) -> String {
    crate::metrics::collect_process_metrics();
    state.metrics.render()
}

/// Limits on what one HTTP/1.1 connection may send before its request head is complete.
/// Past them hyper itself answers (`431`, or closes the connection on a timeout), before
/// any handler runs, so its answer has no Event Grid error body.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// How long a client has to send a request's whole head (request line and headers),
    /// counted from when the server starts waiting for it, also between requests on a
    /// kept-alive connection. A client that trickles its headers (slowloris) or sends
    /// nothing is disconnected after it.
    pub header_read_timeout: Duration,
    /// Most bytes of a request head; more is answered `431 Request Header Fields Too Large`.
    pub max_header_bytes: usize,
    /// Most header fields in one request; more is answered `431`.
    pub max_headers: usize,
}

/// Default of [`HttpLimits::header_read_timeout`].
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`HttpLimits::max_header_bytes`]: 32 KiB, far above what a publish needs (a
/// SAS token is a few hundred bytes) and what common proxies forward.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// Default of [`HttpLimits::max_headers`] (hyper's own default).
pub const MAX_HEADERS: usize = 100;

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: HEADER_READ_TIMEOUT,
            max_header_bytes: MAX_HEADER_BYTES,
            max_headers: MAX_HEADERS,
        }
    }
}

/// Binds `listen` and logs the address bound (`listening address=…`): with port `0` the
/// log is where the system tests, and an operator, learn the port.
pub async fn bind(listen: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    tracing::info!(address = %listener.local_addr()?, "listening");
    Ok(listener)
}

/// Serves `router` over HTTP/1.1 on `listener` until `shutdown` fires: then stops
/// accepting, lets each connection finish the request in hand (idle kept-alive
/// connections are closed at once) and returns when all have.
///
/// HTTP/1.1 only (no cleartext HTTP/2): it is what publishers, load balancers and
/// Prometheus speak, and it lets every connection be held to `limits.header_read_timeout`
/// from its first byte (an HTTP/2-or-1 sniffing server waits for the first bytes
/// without any limit).
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: crate::Shutdown,
    limits: HttpLimits,
) -> anyhow::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes)
        .max_headers(limits.max_headers);
    let connections = GracefulShutdown::new();
    let stop = shutdown.requested();
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: back off rather than spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let service = TowerToHyperService::new(router.clone());
        let connection = connections.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                // Client-side trouble (a reset, a header timeout, a malformed head): the
                // client got hyper's answer, if any; nothing for the operator to do.
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
    Ok(())
}

/// Pause after a failed `accept` (e.g. out of file descriptors).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
