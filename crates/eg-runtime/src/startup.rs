//! How every tier starts and stops, in one place: settings, logs, metrics, a Redis
//! connection that is ready (layout checked, consumer groups present, clock synced and
//! kept in sync), the status-page counts, a heartbeat that lists this process on the
//! status page, this process's consumer name, and its HTTP address with `/healthz`,
//! `/readyz` and `/metrics`. Redis may be down when a tier
//! starts; it waits with backoff instead of exiting.
//!
//! A tier's `main` reads as: [`Startup::tier`] → [`Startup::start`] → its own work →
//! [`Process::finish`] (or [`Process::serve`] for a tier that serves its own router).

use crate::stats::{self, Stats};
use crate::{Settings, Shutdown, metrics, ops, telemetry};
use eg_store::heartbeat::{HEARTBEAT_INTERVAL, LiveCopy};
use eg_store::{Catalog, CatalogCache, Clock, Store};
use metrics_exporter_prometheus::PrometheusHandle;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How long a stopping process waits to remove its heartbeat (Redis may be gone).
const LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the offset to Redis's clock is read again while a tier runs.
const CLOCK_SYNC_INTERVAL: Duration = Duration::from_secs(30);

/// What a tier needs started before its own work: built by [`Startup::tier`], run by
/// [`Startup::start`].
pub struct Startup {
    tier: &'static str,
    listen: fn(&Settings) -> String,
    own_router: bool,
}

impl Startup {
    /// Starts `tier` (its binary's name, e.g. `"eg-sender"`), listening on the address
    /// `listen` picks from the settings, where it serves the ops endpoints.
    pub fn tier(tier: &'static str, listen: fn(&Settings) -> String) -> Self {
        Self {
            tier,
            listen,
            own_router: false,
        }
    }

    /// The tier serves a router of its own on its address (with [`ops::router`] merged
    /// in), through [`Process::serve`], instead of the ops endpoints alone.
    pub fn serving_own_router(mut self) -> Self {
        self.own_router = true;
        self
    }

    /// Reads settings from the command line and environment, sets up telemetry, connects
    /// and waits for Redis, starts the background upkeep (clock re-sync, status-page
    /// counts) and binds the tier's address (logging `listening address=…`).
    pub async fn start(self) -> anyhow::Result<Process> {
        let settings = Settings::from_args(std::env::args())?;
        let log = telemetry::init(&settings.log, self.tier)?;
        let tally = Arc::new(stats::Tally::default());
        let metrics = metrics::install(|prometheus| stats::TallyingRecorder::new(prometheus, tally.clone()))?;
        let shutdown = Shutdown::on_signals(settings.shutdown.grace);
        let store = Store::connect(&settings.redis_settings())?;
        let clock = Clock::default();
        tracing::info!(tier = self.tier, partitions = settings.redis.partitions, "starting");
        let new_deployment = settings.redis.new_deployment;
        until_ready("prepare redis", &shutdown, || prepare(&store, &clock, new_deployment)).await?;
        spawn_clock_sync(store.clone(), clock.clone(), shutdown.clone());
        let stats = Stats::new(&settings.redis_settings())?;
        stats::spawn_flusher(
            stats::Flusher::new(stats.clone(), tally, clock.clone()),
            shutdown.clone(),
        );
        let listener = ops::bind(&(self.listen)(&settings)).await?;
        let consumer = consumer_name(self.tier);
        let heartbeat = spawn_heartbeat(
            store.clone(),
            clock.clone(),
            shutdown.clone(),
            self.tier,
            consumer.clone(),
        );
        let address = listener.local_addr()?;
        let http = if self.own_router {
            Http::Bound(listener)
        } else {
            let router = ops::router(store.clone(), metrics.clone());
            let shutdown = shutdown.clone();
            Http::Ops(tokio::spawn(async move {
                ops::serve_on(listener, router, shutdown, ops::HttpLimits::default()).await
            }))
        };
        Ok(Process {
            _log: log,
            consumer,
            heartbeat,
            settings,
            store,
            clock,
            metrics,
            shutdown,
            stats,
            address,
            tier: self.tier,
            http,
        })
    }
}

/// A started tier: what its own work is built from.
pub struct Process {
    pub settings: Settings,
    pub store: Store,
    pub clock: Clock,
    pub metrics: PrometheusHandle,
    pub shutdown: Shutdown,
    /// The deployment's counts for the status page (this process's are flushed into it).
    pub stats: Stats,
    /// This process's name in Redis consumer groups (see [`consumer_name`]).
    pub consumer: String,
    /// The address bound (the port the OS chose, when `listen` asks for port 0).
    pub address: SocketAddr,
    tier: &'static str,
    http: Http,
    /// Writes this process's heartbeat until shutdown, then removes it.
    heartbeat: JoinHandle<()>,
    /// Writes out the log's last lines when the process is done with it.
    _log: telemetry::LogFlush,
}

/// What listens on the tier's address.
enum Http {
    /// The ops endpoints, served in the background.
    Ops(JoinHandle<anyhow::Result<()>>),
    /// Bound only: the tier serves its own router through [`Process::serve`].
    Bound(TcpListener),
}

impl Process {
    /// Loads the catalog, waiting for Redis like the rest of start-up.
    pub async fn load_catalog(&self) -> anyhow::Result<CatalogCache> {
        let catalog = Catalog::new(self.store.clone());
        until_ready("load the catalog", &self.shutdown, || {
            CatalogCache::load(catalog.clone())
        })
        .await
    }

    /// Keeps `cache` fresh until shutdown: a cheap version check every
    /// `catalog.refresh_interval`, a reload when it moved.
    pub fn keep_catalog_fresh(&self, cache: Arc<CatalogCache>) {
        let every = self.settings.catalog.refresh_interval;
        let shutdown = self.shutdown.clone();
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

    /// Serves `router` on the tier's address until shutdown (a tier started with
    /// [`Startup::serving_own_router`]; `router` includes [`ops::router`]), then stops.
    pub async fn serve(self, router: axum::Router) -> anyhow::Result<()> {
        match self.http {
            Http::Bound(listener) => {
                ops::serve_on(listener, router, self.shutdown.clone(), ops::HttpLimits::default()).await?
            }
            Http::Ops(_) => anyhow::bail!("{} serves the ops endpoints alone, not a router of its own", self.tier),
        }
        self.shutdown.trigger();
        leave(self.heartbeat).await;
        tracing::info!("stopped");
        Ok(())
    }

    /// Ends the process once its work returned: shutdown fires (if no signal fired it),
    /// the ops endpoints finish the requests in hand, then `stopped` is logged.
    pub async fn finish(self) -> anyhow::Result<()> {
        self.shutdown.trigger();
        if let Http::Ops(server) = self.http {
            match server.await {
                Ok(served) => served?,
                Err(e) => tracing::warn!(error = %e, "the ops endpoints ended abnormally"),
            }
        }
        leave(self.heartbeat).await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// This process's name in Redis consumer groups, e.g. `sender-<HOSTNAME>-<pid>-<random>`:
/// the tier, then the host (`HOSTNAME`: the pod in Kubernetes), the process id and a
/// random suffix, since a restarted container gets the same host name and often the
/// same pid (1), and its name must not be mistaken for its predecessor's.
fn consumer_name(tier: &str) -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "local".into());
    let random = uuid::Uuid::new_v4().as_fields().1;
    format!(
        "{}-{host}-{}-{random:04x}",
        tier.trim_start_matches("eg-"),
        std::process::id()
    )
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

async fn prepare(store: &Store, clock: &Clock, new_deployment: bool) -> Result<(), eg_store::StoreError> {
    store.check_prefix(new_deployment).await?;
    store.check_layout().await?;
    store.ensure_groups().await?;
    clock.sync(store).await
}

/// Announces this process every [`HEARTBEAT_INTERVAL`] until shutdown, then removes
/// its heartbeat. A failed beat is logged and tried again at the next tick: the status
/// page only shows the copy as gone after several. Each beat also records the
/// deployment's layout again ([`Store::check_layout`]): a Redis that lost its data would
/// otherwise hold no partition count, and the next tier to start would be checked
/// against nothing.
fn spawn_heartbeat(
    store: Store,
    clock: Clock,
    shutdown: Shutdown,
    tier: &'static str,
    instance: String,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut copy = LiveCopy {
            tier: tier.to_owned(),
            instance,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: clock.now(),
            last_seen: clock.now(),
            capabilities: eg_core::capability::Capability::ALL.to_vec(),
        };
        let mut tick = tokio::time::interval(HEARTBEAT_INTERVAL);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    copy.last_seen = clock.now();
                    beat(&store, &copy).await;
                }
                _ = shutdown.requested() => break,
            }
        }
        match tokio::time::timeout(LEAVE_TIMEOUT, store.leave(&copy.tier, &copy.instance)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot remove this process's heartbeat; it lapses on its own"),
            Err(_) => tracing::warn!("removing this process's heartbeat timed out; it lapses on its own"),
        }
    })
}

/// One heartbeat: this process's, then the deployment's layout. A layout that no longer
/// matches (Redis lost its data and a tier configured otherwise recorded its own first)
/// is an error the operator must fix; this process keeps running on its own settings.
async fn beat(store: &Store, copy: &LiveCopy) {
    if let Err(e) = store.beat(copy).await {
        tracing::warn!(error = %e, "cannot write this process's heartbeat");
        return;
    }
    match store.check_layout().await {
        Ok(()) => {}
        Err(e @ eg_store::StoreError::Layout(_)) => tracing::error!(error = %e, "the deployment's layout changed"),
        Err(e) => tracing::warn!(error = %e, "cannot record the deployment's layout"),
    }
}

/// Waits for the heartbeat task to remove this process's heartbeat (shutdown has fired).
async fn leave(heartbeat: JoinHandle<()>) {
    if let Err(e) = heartbeat.await {
        tracing::warn!(error = %e, "the heartbeat task ended abnormally");
    }
}

/// Keeps the clock offset fresh while the process runs (it was just synced by
/// [`prepare`], so the first re-sync is one interval away).
fn spawn_clock_sync(store: Store, clock: Clock, shutdown: Shutdown) {
    tokio::spawn(async move {
        let start = tokio::time::Instant::now() + CLOCK_SYNC_INTERVAL;
        let mut tick = tokio::time::interval_at(start, CLOCK_SYNC_INTERVAL);
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
