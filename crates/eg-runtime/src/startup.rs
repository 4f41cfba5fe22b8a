//! What every tier does first: settings, logs, metrics, and a Redis connection that is
//! ready (layout checked, consumer groups present, clock synced). Redis may be down
//! when a tier starts; it waits with backoff instead of exiting.

use crate::stats::{self, Stats};
use crate::{Settings, Shutdown, metrics, telemetry};
use eg_store::{CatalogCache, Clock, Store};
use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Arc;
use std::time::Duration;

pub struct Process {
    pub settings: Settings,
    pub store: Store,
    pub clock: Clock,
    pub metrics: PrometheusHandle,
    pub shutdown: Shutdown,
    /// The deployment's counts for the status page (this process's are flushed into it).
    pub stats: Stats,
}

/// Reads settings from the command line and environment, sets up telemetry and connects.
pub async fn start(tier: &'static str) -> anyhow::Result<Process> {
    let settings = Settings::from_args(std::env::args())?;
    telemetry::init(&settings.log);
    let (metrics, tally) = metrics::install()?;
    let shutdown = Shutdown::on_signals(settings.shutdown.grace);
    let store = Store::connect(&settings.redis_settings())?;
    let clock = Clock::default();
    tracing::info!(tier, partitions = settings.redis.partitions, "starting");
    until_ready("prepare redis", &shutdown, || prepare(&store, &clock)).await?;
    let stats = Stats::new(&settings.redis_settings())?;
    stats::spawn_flusher(
        stats::Flusher::new(stats.clone(), tally, clock.clone()),
        shutdown.clone(),
    );
    Ok(Process {
        settings,
        store,
        clock,
        metrics,
        shutdown,
        stats,
    })
}

/// Runs a start-up step that needs Redis until it succeeds, backing off up to 5 s
/// between tries: Redis may be down when a tier starts, or vanish between two steps
/// (a tier must wait, not exit). A layout mismatch is fatal: retrying cannot fix it.
pub async fn until_ready<T, F, Fut>(what: &str, shutdown: &Shutdown, mut step: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, eg_store::StoreError>>,
{
    let mut backoff = Duration::from_millis(100);
    loop {
        match step().await {
            Ok(value) => return Ok(value),
            Err(e @ eg_store::StoreError::Layout(_)) => return Err(e.into()),
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "cannot {what} yet; redis is not ready");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.requested() => anyhow::bail!("shut down before redis was ready"),
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

async fn prepare(store: &Store, clock: &Clock) -> Result<(), eg_store::StoreError> {
    store.check_layout().await?;
    store.ensure_groups().await?;
    clock.sync(store).await
}

/// Keeps the clock offset fresh while the process runs.
pub fn spawn_clock_sync(store: Store, clock: Clock, shutdown: Shutdown) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let Err(e) = clock.sync(&store).await {
                        tracing::warn!(error = %e, "cannot read redis time");
                    }
                }
                _ = shutdown.requested() => return,
            }
        }
    });
}

/// Keeps a catalog copy fresh: a cheap version check every `every`, a reload when it moved.
pub fn spawn_catalog_refresh(cache: Arc<CatalogCache>, every: Duration, shutdown: Shutdown) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let Err(e) = cache.refresh().await {
                        tracing::warn!(error = %e, "cannot refresh the catalog");
                    }
                }
                _ = shutdown.requested() => return,
            }
        }
    });
}
