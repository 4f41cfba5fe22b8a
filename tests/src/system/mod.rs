//! A whole eg deployment for one test: the four tiers as child processes (see [`tiers`])
//! on one real Redis or a Redis Cluster (see [`redis`]), a temporary dead-letter
//! directory and a log file per tier. What a test does with it is spread over the
//! submodules by job: the management and publish APIs ([`admin`]), the tiers' metrics
//! ([`metrics`]), dead-letter files ([`dead_letters`]) and logs ([`logs`]).

mod admin;
mod dead_letters;
mod logs;
mod metrics;
mod options;
mod redis;
mod tiers;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use eg_testkit::tier::Role;

pub use admin::{ADMIN_TOKEN, assert_subscription_refused};
pub use dead_letters::DeadLettered;
pub use options::Options;
use redis::{Backend, PARTITIONS};
pub use redis::{REDIS_PASSWORD, Redis};
use tiers::{Launcher, Tier};
pub use tiers::{TierId, UnloggedTier};

/// A whole eg deployment for one test. Dropping it kills every process.
pub struct System {
    // Declared (so dropped) before `redis`: tiers die before their Redis does.
    ingress: Tier,
    extra_ingress: Vec<Tier>,
    scheduler: Tier,
    deadletter: Tier,
    extra_deadletter: Vec<Tier>,
    senders: Vec<Option<Tier>>,
    sender_starts: usize,
    launcher: Launcher,
    redis: Backend,
    dead_letter_dir: Option<tempfile::TempDir>,
    log_dir: Option<tempfile::TempDir>,
    http: reqwest::Client,
    keys: Mutex<HashMap<String, String>>,
}

impl System {
    /// Redis, a dead-letter directory and the four tiers, all healthy.
    pub async fn start(options: Options) -> Self {
        let redis = Backend::start(&options.redis);
        let dead_letter_dir = tempfile::Builder::new()
            .prefix("eg-dead-letters-")
            .tempdir()
            .expect("dead-letter dir");
        let log_dir = tempfile::Builder::new().prefix("eg-logs-").tempdir().expect("log dir");
        let mut env: Vec<(String, String)> = redis
            .settings()
            .into_iter()
            .chain([
                ("EG__REDIS__PARTITIONS", PARTITIONS.to_string()),
                ("EG__ADMIN__TOKEN", ADMIN_TOKEN.into()),
                ("EG__DELIVERY__RETRY_SCHEDULE", "1s".into()),
                ("EG__DELIVERY__RETRY_MINIMUMS", "*=0s".into()),
                ("EG__DELIVERY__MAX_JITTER", "100ms".into()),
                ("EG__DELIVERY__TIMEOUT", "2s".into()),
                // Well past the timeout: a sender stalled a few seconds by a busy machine
                // must not have its deliveries reclaimed (and duplicated) under a test
                // counting exact deliveries. Reclaim tests set their own.
                ("EG__DELIVERY__VISIBILITY_TIMEOUT", "10s".into()),
                ("EG__SCHEDULER__INTERVAL", "100ms".into()),
                ("EG__SCHEDULER__RECLAIM_INTERVAL", "500ms".into()),
                ("EG__DEADLETTER__DELAY", "1s".into()),
                ("EG__DEADLETTER__INTERVAL", "200ms".into()),
                ("EG__DEADLETTER__DIR", dead_letter_dir.path().display().to_string()),
                ("EG__CATALOG__REFRESH_INTERVAL", "500ms".into()),
                ("EG__LOG__LEVEL", "info".into()),
                ("EG__DELIVERY__ALLOWED_NETWORKS", "127.0.0.1/32".into()),
            ])
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        env.extend(options.env);
        let http = http_client();
        let launcher = Launcher::new(log_dir.path(), env, http.clone());
        let (ingress, scheduler, deadletter) = tokio::join!(
            launcher.spawn(Role::Ingress, "ingress"),
            launcher.spawn(Role::Scheduler, "scheduler"),
            launcher.spawn(Role::DeadLetter, "deadletter"),
        );
        let mut system = Self {
            ingress,
            extra_ingress: Vec::new(),
            scheduler,
            deadletter,
            extra_deadletter: Vec::new(),
            senders: Vec::new(),
            sender_starts: 0,
            launcher,
            redis,
            dead_letter_dir: Some(dead_letter_dir),
            log_dir: Some(log_dir),
            http,
            keys: Mutex::default(),
        };
        for _ in 0..options.senders {
            system.start_sender().await;
        }
        system
    }

    /// The HTTP client the harness calls eg with (no proxy, 20 s timeout).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }
}

impl Drop for System {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.keep_evidence();
        }
    }
}

fn http_client() -> reqwest::Client {
    // reqwest is built without a default TLS crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .no_proxy()
        .build()
        .expect("an HTTP client")
}
