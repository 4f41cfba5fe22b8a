//! Test support shared by the Redis-layer, outbound and system tests, eg-bench and
//! eg-chaos: a real `redis-server` per test (own temp dir, unix socket, append-only file
//! with `appendfsync always`) or a real Redis Cluster, both started by [`redis_server`];
//! a server or cluster over TLS with a CA made per test run ([`tls`]); a primary, a
//! replica and three sentinels ([`sentinel`]); the tier
//! launcher ([`tier`]); waiting for a condition with a deadline instead of a
//! bare sleep; hostile endpoints ([`hostile`]) and ports that refuse connections.
//!
//! The outside servers of the object-storage and broker tests are started the same way,
//! one per test on free loopback ports in a temp dir, killed when dropped, with `kill`
//! and `restart` for outages (and `pause`/`resume` for a broker that stops answering):
//! Azurite ([`azurite`]), an S3-compatible server
//! ([`s3_server`], moto, whose SQS the [`sqs`] helpers create queues in and read),
//! RabbitMQ ([`rabbitmq`]), NATS with JetStream ([`nats`]) and a Kafka-protocol broker
//! ([`tansu`], with a SASL PLAIN front for the Event Hubs tests: [`kafka_sasl_front`]).
//! What receives eg's traces is in-process: an OTLP/HTTP receiver ([`otlp_receiver`]).
//! `deploy/local/ensure-test-tools.sh` installs them.
//!
//! It must never be a dependency of anything deployed (the tiers and `egctl`), only a
//! dev-dependency of them: tests and the project's tools use it.

pub mod azurite;
mod cluster;
pub mod hostile;
pub mod http;
pub mod kafka_sasl_front;
pub mod nats;
pub mod oauth_server;
pub mod otlp_receiver;
pub mod ports;
pub mod rabbitmq;
pub mod redis_server;
mod refusing;
pub mod s3_server;
pub mod sentinel;
pub mod server_process;
pub mod shared_key;
pub mod sigv4;
pub mod sqs;
pub mod tansu;
pub mod tier;
pub mod tls;

pub use azurite::Azurite;
pub use cluster::RedisCluster;
pub use nats::Nats;
pub use oauth_server::OAuthServer;
pub use otlp_receiver::OtlpReceiver;
pub use rabbitmq::RabbitMq;
pub use refusing::RefusingPort;
pub use s3_server::S3Server;
pub use sentinel::RedisSentinel;
pub use tansu::Tansu;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A fresh `redis-server` in its own temp dir, on a unix socket, with an append-only
/// file written with `appendfsync always`.
pub struct RedisServer {
    options: redis_server::Options,
    process: Option<redis_server::Process>,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a fresh server and waits until it answers.
    pub fn start() -> Self {
        Self::start_with(|options| options)
    }

    /// Starts a fresh server that also listens for TLS on a free port, with `ca`'s server
    /// certificate (clients need not present one unless `require_client_cert`); the unix
    /// socket stays, for the harness's own checks. [`RedisServer::tls_url`] is the TLS URL.
    pub fn start_tls(ca: &tls::TestCa, require_client_cert: bool) -> Self {
        let mut last = String::new();
        // The port is free when chosen but not held: another test may take it first.
        for _ in 0..5 {
            let listen = redis_server::TlsListen {
                require_client_cert,
                ..redis_server::TlsListen::new(ports::free_port(), ca)
            };
            match Self::try_start_with(|options| options.tls(listen.clone())) {
                Ok(server) => return server,
                Err(e) => last = e.to_string(),
            }
        }
        panic!("no TLS redis-server could be started on a free port: {last}");
    }

    /// Starts a fresh server with `configure` applied to its options.
    pub fn start_with(configure: impl FnOnce(redis_server::Options) -> redis_server::Options) -> Self {
        Self::try_start_with(configure).unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_start_with(
        configure: impl FnOnce(redis_server::Options) -> redis_server::Options,
    ) -> Result<Self, redis_server::StartError> {
        let dir = tempfile::Builder::new()
            .prefix("eg-redis-")
            .tempdir()
            .expect("temp dir for redis");
        let options = configure(redis_server::Options::unix_socket(dir.path()));
        let process = options.start(Duration::from_secs(10))?;
        Ok(Self {
            options,
            process: Some(process),
            dir,
        })
    }

    /// `rediss://127.0.0.1:PORT` of a server started with [`RedisServer::start_tls`].
    pub fn tls_url(&self) -> String {
        let tls = self.options.tls_listen().expect("a server started with start_tls");
        format!("rediss://127.0.0.1:{}", tls.port)
    }

    pub fn socket(&self) -> PathBuf {
        self.options
            .socket()
            .expect("the test server listens on a unix socket")
            .to_path_buf()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The URL every client and tier is given.
    pub fn url(&self) -> String {
        self.options.url()
    }

    fn spawn(&mut self) {
        let process = self
            .options
            .start(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{e}"));
        self.process = Some(process);
    }

    /// Kills the server with SIGKILL (no shutdown save: only the append-only file survives).
    pub fn kill(&mut self) {
        if let Some(process) = self.process.take() {
            process.kill();
        }
        let _ = std::fs::remove_file(self.socket());
    }

    /// SIGKILL, then start again from the same directory and append-only file.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// The server's process id while it runs (to pause it with SIGSTOP, say).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(redis_server::Process::pid)
    }

    /// Starts a killed server again from its append-only file (same socket); a no-op
    /// while it runs. With [`RedisServer::kill`], this leaves Redis down for a while.
    pub fn start_again(&mut self) {
        if self.process.is_none() {
            self.spawn();
        }
    }

    /// A synchronous connection for assertions.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to the test redis")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `redis-cli <connection> <args>` and returns its output, trimmed; fails the test
/// when it cannot run or reports an error.
pub fn redis_cli(connection: &[&str], args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(connection)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run redis-cli ({e}); install it with redis-server"));
    assert!(
        output.status.success(),
        "redis-cli {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Polls `check` until it yields `Some`, failing the test with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every file below `root`, at any depth (unreadable directories are skipped).
pub fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}
