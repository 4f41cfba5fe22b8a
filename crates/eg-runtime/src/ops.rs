//! `/healthz` (the process runs), `/readyz` (it can reach Redis) and `/metrics`
//! (Prometheus text), served by every tier.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use eg_store::Store;
use metrics_exporter_prometheus::PrometheusHandle;

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
    state.metrics.render()
}

/// Serves `router` on `listen` until `shutdown` fires.
pub async fn serve(listen: &str, router: Router, shutdown: crate::Shutdown) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    tracing::info!(address = %listener.local_addr()?, "listening");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.requested().await })
        .await?;
    Ok(())
}
