//! The deployment under measurement: one `redis-server` (eg-testkit's: temp dir, unix
//! socket, append-only file; `appendfsync` as the scenario asks) and the tiers
//! as child processes, with production settings (eg-runtime's defaults) except where a
//! scenario overrides one. Every process logs to its own file in
//! the run directory and is SIGKILLed when the [`Cluster`] is dropped.

use crate::ceiling::{Fsync, set_fsync};
use anyhow::{Context, bail};
use eg_testkit::RedisServer;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ADMIN_TOKEN: &str = "eg-bench-admin-token";
pub const PREFIX: &str = "eg";
/// eg's default partition count.
pub const PARTITIONS: u16 = 4;

/// How long a tier may take to start and answer `/healthz`.
const START_DEADLINE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Ingress,
    Scheduler,
    Sender,
    DeadLetter,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Ingress, Role::Scheduler, Role::Sender, Role::DeadLetter];

    pub fn binary(self) -> &'static str {
        match self {
            Role::Ingress => "eg-ingress",
            Role::Scheduler => "eg-scheduler",
            Role::Sender => "eg-sender",
            Role::DeadLetter => "eg-deadletter",
        }
    }

    fn listen_variable(self) -> &'static str {
        match self {
            Role::Ingress => "EG__INGRESS__LISTEN",
            Role::Scheduler => "EG__SCHEDULER__LISTEN",
            Role::Sender => "EG__SENDER__LISTEN",
            Role::DeadLetter => "EG__DEADLETTER__LISTEN",
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

pub struct Cluster {
    bin_dir: PathBuf,
    run_dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    http: reqwest::Client,
    // Declared last, so dropped after every tier that uses it.
    redis: RedisServer,
}

impl Cluster {
    /// Starts Redis with `fsync`; `overrides` replace harness settings for every tier.
    pub fn new(bin_dir: PathBuf, fsync: Fsync, overrides: &[(&str, String)]) -> anyhow::Result<Self> {
        for role in Role::ALL {
            let binary = bin_dir.join(role.binary());
            if !binary.is_file() {
                bail!(
                    "{} is missing: build the tiers first, e.g. `cargo build --release -p eg-ingress -p eg-scheduler -p eg-sender -p eg-deadletter`, or point --bin-dir at them",
                    binary.display()
                );
            }
        }
        let run_dir = tempfile::Builder::new().prefix("eg-bench-").tempdir()?;
        let dead_letters = run_dir.path().join("deadletters");
        std::fs::create_dir_all(&dead_letters)?;
        let redis = RedisServer::start();
        set_fsync(&redis.url(), fsync)?;
        // Production settings (the defaults of eg-runtime's settings), except what a
        // machine-local run needs: where Redis and the dead-letter directory are, an admin
        // token, and permission to deliver to the receiver on 127.0.0.1.
        let mut env: Vec<(String, String)> = [
            ("EG__REDIS__URL", redis.url()),
            ("EG__REDIS__PREFIX", PREFIX.into()),
            ("EG__REDIS__PARTITIONS", PARTITIONS.to_string()),
            ("EG__ADMIN__TOKEN", ADMIN_TOKEN.into()),
            ("EG__DEADLETTER__DIR", dead_letters.display().to_string()),
            ("EG__DELIVERY__ALLOWED_NETWORKS", "127.0.0.1/32".into()),
        ]
        .into_iter()
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
        for _ in 0..5 {
            let port = free_port()?;
            let log = File::options().create(true).append(true).open(&log_path)?;
            let mut command = Command::new(self.bin_dir.join(role.binary()));
            for (key, _) in std::env::vars() {
                if key.starts_with("EG__") || key == "RUST_LOG" || key.to_ascii_lowercase().ends_with("_proxy") {
                    command.env_remove(key);
                }
            }
            command
                .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
                .env(role.listen_variable(), format!("127.0.0.1:{port}"))
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log);
            let child = command
                .spawn()
                .with_context(|| format!("cannot start {}", role.binary()))?;
            let mut tier = Tier {
                child,
                url: format!("http://127.0.0.1:{port}"),
            };
            match self.wait_healthy(&mut tier, role).await? {
                None => return Ok(tier),
                Some(exit) => {
                    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                    if log.contains("cannot listen") {
                        continue; // the port was taken meanwhile
                    }
                    bail!("{label} exited during start-up ({exit}); see {}", log_path.display());
                }
            }
        }
        bail!("{label} could not find a free port to listen on")
    }

    /// `Some(exit status)` if the process exited before it was healthy.
    async fn wait_healthy(&self, tier: &mut Tier, role: Role) -> anyhow::Result<Option<String>> {
        let deadline = Instant::now() + START_DEADLINE;
        let paths: &[&str] = if role == Role::Ingress {
            &["/healthz", "/readyz"]
        } else {
            &["/healthz"]
        };
        loop {
            if let Some(status) = tier.child.try_wait()? {
                return Ok(Some(status.to_string()));
            }
            let mut healthy = true;
            for path in paths {
                let answer = self
                    .http
                    .get(format!("{}{path}", tier.url))
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await;
                healthy &= answer.is_ok_and(|r| r.status().is_success());
            }
            if healthy {
                return Ok(None);
            }
            if Instant::now() >= deadline {
                bail!("{} did not become healthy within {START_DEADLINE:?}", role.binary());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
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

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
