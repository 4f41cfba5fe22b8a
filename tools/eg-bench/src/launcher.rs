//! The processes of one measurement: one `redis-server` (eg-testkit's: temp dir, unix
//! socket, append-only file; `appendfsync` as the scenario asks; the tiers reach it over
//! the [`Transport`] the scenario names), and the tiers started
//! as child processes on demand, with production settings (eg-runtime's defaults) except
//! where a scenario overrides one. Every process logs to its own file in the run
//! directory; the tiers are SIGKILLed when their [`Tier`] is dropped, Redis when the
//! [`Launcher`] is.

use crate::ceiling::{Fsync, set_fsync};
use anyhow::{Context, bail};
use eg_testkit::RedisServer;
use eg_testkit::tier;
pub use eg_testkit::tier::Role;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

pub const ADMIN_TOKEN: &str = "eg-bench-admin-token";
pub const PREFIX: &str = "eg";
/// eg's default partition count.
pub const PARTITIONS: u16 = 4;

/// How long a tier may take to start and answer `/healthz`.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// How the tiers reach Redis. The bench's own reads (command statistics, seeding) always
/// use the unix socket, so only the tiers' traffic changes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `redis+unix://`: the default, and what the other scenarios measure.
    UnixSocket,
    /// `redis://127.0.0.1:PORT`.
    Tcp,
    /// `rediss://127.0.0.1:PORT` with a CA made for the run (`EG__REDIS__TLS_CA_FILE`).
    Tls,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Self::UnixSocket => "unix socket",
            Self::Tcp => "TCP",
            Self::Tls => "TLS",
        }
    }
}

/// A running tier; SIGKILLed when dropped.
pub struct Tier {
    child: Child,
    /// `http://127.0.0.1:PORT` of its HTTP listener.
    pub url: String,
}

impl Tier {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Tier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Owns Redis and the run directory, and starts tiers against them.
pub struct Launcher {
    bin_dir: PathBuf,
    run_dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    http: reqwest::Client,
    // Declared last, so dropped after every tier that uses it.
    redis: RedisServer,
}

impl Launcher {
    /// Starts Redis with `fsync`, reached by the tiers over `transport`; `overrides`
    /// replace harness settings for every tier.
    pub fn new(
        bin_dir: PathBuf,
        fsync: Fsync,
        transport: Transport,
        overrides: &[(&str, String)],
    ) -> anyhow::Result<Self> {
        if let Some(binary) = tier::missing_binaries(&bin_dir).first() {
            bail!(
                "{} is missing: build the tiers first, e.g. `cargo build --release -p eg-ingress -p eg-scheduler -p eg-sender -p eg-deadletter`, or point --bin-dir at them",
                binary.display()
            );
        }
        let run_dir = tempfile::Builder::new().prefix("eg-bench-").tempdir()?;
        let dead_letters = run_dir.path().join("deadletters");
        std::fs::create_dir_all(&dead_letters)?;
        let (redis, transport_env) = start_redis(transport, run_dir.path())?;
        set_fsync(&redis.url(), fsync)?;
        // Production settings (the defaults of eg-runtime's settings), except what a
        // machine-local run needs: where Redis and the dead-letter directory are, an admin
        // token, and permission to deliver to the receiver on 127.0.0.1.
        let mut env: Vec<(String, String)> = transport_env
            .into_iter()
            .chain([
                ("EG__REDIS__PREFIX", PREFIX.into()),
                ("EG__REDIS__PARTITIONS", PARTITIONS.to_string()),
                ("EG__ADMIN__TOKEN", ADMIN_TOKEN.into()),
                ("EG__DEADLETTER__DIR", dead_letters.display().to_string()),
                ("EG__DELIVERY__ALLOWED_NETWORKS", "127.0.0.1/32".into()),
            ])
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        for (key, value) in overrides {
            env.retain(|(k, _)| k != key);
            env.push(((*key).to_owned(), value.clone()));
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .no_proxy()
            .build()?;
        Ok(Self {
            bin_dir,
            run_dir,
            env,
            http,
            redis,
        })
    }

    /// The directory the tiers were found in: `--bin-dir`, or the one this program runs
    /// from (`target/release` or `target/debug`).
    pub fn default_bin_dir() -> anyhow::Result<PathBuf> {
        let exe = std::env::current_exe().context("the path of eg-bench")?;
        exe.parent()
            .map(Path::to_path_buf)
            .context("eg-bench has no parent directory")
    }

    pub fn run_dir(&self) -> &Path {
        self.run_dir.path()
    }

    /// Keeps the run directory (logs) after the run; returns where it is.
    pub fn keep_run_dir(self) -> PathBuf {
        let Self { run_dir, .. } = self;
        run_dir.keep()
    }

    /// The unix socket's URL, whatever the tiers' transport.
    pub fn redis_url(&self) -> String {
        self.redis.url()
    }

    pub fn redis_pid(&self) -> Option<u32> {
        self.redis.pid()
    }

    /// A connection for reading and seeding Redis directly.
    pub async fn redis(&self) -> anyhow::Result<redis::aio::MultiplexedConnection> {
        Ok(redis::Client::open(self.redis.url())?
            .get_multiplexed_async_connection()
            .await?)
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Starts `role` with `extra` settings on top, logging to `<run dir>/<label>.log`,
    /// and waits until it is healthy (ingress: also ready).
    pub async fn start(&self, role: Role, label: &str, extra: &[(&str, String)]) -> anyhow::Result<Tier> {
        let log_path = self.run_dir.path().join(format!("{label}.log"));
        let mut env = self.env.clone();
        env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        let started = tier::start(&self.bin_dir, role, &env, &log_path, &self.http, START_DEADLINE)
            .await
            .map_err(|failure| anyhow::anyhow!("{label} {failure}; see {}", log_path.display()))?;
        Ok(Tier {
            child: started.child,
            url: started.url,
        })
    }

    /// A management API call; fails unless it answers 2xx. Returns the JSON answer.
    pub async fn admin(
        &self,
        ingress: &Tier,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> anyhow::Result<serde_json::Value> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}/admin{path}", ingress.url))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.with_context(|| format!("{method} {path}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            bail!("{method} {path}: {status} {text}");
        }
        Ok(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null))
    }
}

/// Starts the server for `transport` and answers the settings that point the tiers at it.
/// The unix socket is always there too, for the bench's own reads.
fn start_redis(transport: Transport, run_dir: &Path) -> anyhow::Result<(RedisServer, Vec<(&'static str, String)>)> {
    Ok(match transport {
        Transport::UnixSocket => {
            let redis = RedisServer::start();
            let url = redis.url();
            (redis, vec![("EG__REDIS__URL", url)])
        }
        Transport::Tcp => {
            let port = eg_testkit::ports::free_port();
            let redis =
                RedisServer::start_with(|options| options.args(&["--port", &port.to_string(), "--bind", "127.0.0.1"]));
            (redis, vec![("EG__REDIS__URL", format!("redis://127.0.0.1:{port}"))])
        }
        Transport::Tls => {
            let ca = eg_testkit::tls::TestCa::generate(&run_dir.join("tls"), "eg-bench");
            let redis = RedisServer::start_tls(&ca, false);
            let url = redis.tls_url();
            (
                redis,
                vec![
                    ("EG__REDIS__URL", url),
                    ("EG__REDIS__TLS_CA_FILE", ca.ca.display().to_string()),
                ],
            )
        }
    })
}
