//! System test harness: the four eg binaries as child processes sharing one real Redis,
//! a temporary dead-letter directory, and recording webhook receivers.
//!
//! * [`System::start`] starts `redis-server`, `eg-ingress`, `eg-scheduler`,
//!   `eg-deadletter` and N `eg-sender`s (from `target/<profile>/`, built by
//!   `cargo build --workspace`), each logging to a file of its own, and waits until
//!   every one answers `/healthz` (ingress also `/readyz`).
//! * [`Receiver::start`] is a webhook endpoint that records every request and answers
//!   as told ([`Behaviour`]).
//! * Every child process is killed when the [`System`] is dropped; when the test is
//!   failing, the tail of every log is printed and the logs are kept.
//! * With `EG_TEST_REDIS=cluster` in the environment, the Redis is a 3-primary Redis
//!   Cluster instead of one server (`just test` runs a part of the suite that way); tests
//!   that stop or restart Redis need the single server and are not part of that run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use eg_testkit::tier::{self, Role};
use eg_testkit::{RedisCluster, RedisServer, files_under};
use reqwest::Method;
use serde_json::{Value, json};

pub use eg_testkit::eventually;

pub use eg_testkit::tier::PROXY_VARIABLES;

/// The management API's bearer token in every system.
pub const ADMIN_TOKEN: &str = "system-test-admin-token";

/// The deadline for anything that should happen within a few seconds on an idle
/// machine: generous, because tests run in parallel on small machines.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// How long a tier may take to start and answer `/healthz`.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// Lines of each log printed when a test fails.
const LOG_TAIL_LINES: usize = 60;

/// How a [`System`] is set up. Later `env` values win over the harness defaults.
#[derive(Debug, Clone)]
pub struct Options {
    senders: usize,
    env: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            senders: 1,
            env: Vec::new(),
        }
    }
}

impl Options {
    /// How many `eg-sender` processes to start (0 is fine: start them later).
    pub fn senders(mut self, count: usize) -> Self {
        self.senders = count;
        self
    }

    /// An extra `EG__…` variable for every tier, overriding the harness default.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// `EG__DELIVERY__RETRY_SCHEDULE` (the harness default is `1s`).
    pub fn retry_schedule(self, schedule: &str) -> Self {
        self.env("EG__DELIVERY__RETRY_SCHEDULE", schedule)
    }

    /// `EG__DELIVERY__TIMEOUT` and `EG__DELIVERY__VISIBILITY_TIMEOUT` (defaults `2s`, `10s`).
    pub fn delivery_timeouts(self, timeout: &str, visibility_timeout: &str) -> Self {
        self.env("EG__DELIVERY__TIMEOUT", timeout)
            .env("EG__DELIVERY__VISIBILITY_TIMEOUT", visibility_timeout)
    }
}

/// One tier process of a [`System`], for stopping, restarting and probing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierId {
    Ingress,
    Scheduler,
    DeadLetter,
    Sender(usize),
}

/// A running tier; killed (SIGKILL) when dropped, so nothing leaks even when a test
/// panics half-way through starting a system.
struct Tier {
    child: Child,
    /// `http://127.0.0.1:PORT` of its HTTP listener (ops endpoints; ingress: everything).
    url: String,
}

impl Drop for Tier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What every tier of one system is started with.
struct Launcher {
    bin_dir: PathBuf,
    log_dir: PathBuf,
    env: Vec<(String, String)>,
    http: reqwest::Client,
}

impl Launcher {
    /// Starts `role`, logging to `<log_dir>/<label>.log`, and waits until it is healthy
    /// (on a port it chose: see [`eg_testkit::tier::start`]).
    async fn spawn(&self, role: Role, label: &str) -> Tier {
        let log_path = self.log_dir.join(format!("{label}.log"));
        match tier::start(&self.bin_dir, role, &self.env, &log_path, &self.http, START_DEADLINE).await {
            Ok(started) => Tier {
                child: started.child,
                url: started.url,
            },
            Err(failure) => {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                panic!(
                    "{label} ({}) {failure}; its log:\n{}",
                    self.bin_dir.join(role.binary()).display(),
                    tail(&log, LOG_TAIL_LINES)
                );
            }
        }
    }
}

/// Partitions of every system under test.
const PARTITIONS: u16 = 2;

/// The Redis under a system: one server, or a cluster (`EG_TEST_REDIS=cluster`).
enum Backend {
    Server(RedisServer),
    Cluster(RedisCluster),
}

impl Backend {
    fn from_environment() -> Self {
        match std::env::var("EG_TEST_REDIS").as_deref() {
            Ok("cluster") => Self::Cluster(RedisCluster::start(3, 0)),
            Ok("server") | Err(_) => Self::Server(RedisServer::start()),
            Ok(other) => panic!("EG_TEST_REDIS={other:?}: expected `server` or `cluster`"),
        }
    }

    /// The setting that points the tiers at it.
    fn setting(&self) -> (&'static str, String) {
        match self {
            Self::Server(server) => ("EG__REDIS__URL", server.url()),
            Self::Cluster(cluster) => ("EG__REDIS__CLUSTER_NODES", cluster.nodes_setting()),
        }
    }

    fn server(&mut self) -> &mut RedisServer {
        match self {
            Self::Server(server) => server,
            Self::Cluster(_) => panic!("this test stops or restarts Redis: it needs one server, not a cluster"),
        }
    }
}

/// A whole eg deployment for one test. Dropping it kills every process.
pub struct System {
    // Declared (so dropped) before `redis`: tiers die before their Redis does.
    ingress: Tier,
    extra_ingress: Vec<Tier>,
    scheduler: Tier,
    deadletter: Tier,
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
        let bin_dir = binary_dir();
        let redis = Backend::from_environment();
        let dead_letter_dir = tempfile::Builder::new()
            .prefix("eg-dead-letters-")
            .tempdir()
            .expect("dead-letter dir");
        let log_dir = tempfile::Builder::new().prefix("eg-logs-").tempdir().expect("log dir");
        let mut env: Vec<(String, String)> = [
            redis.setting(),
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
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        env.extend(options.env);
        let http = http_client();
        let launcher = Launcher {
            bin_dir,
            log_dir: log_dir.path().to_path_buf(),
            env,
            http: http.clone(),
        };
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

    /// Starts one more `eg-sender`; returns its index for [`System::kill_sender`].
    pub async fn start_sender(&mut self) -> usize {
        let label = format!("sender-{}", self.sender_starts);
        self.sender_starts += 1;
        let tier = self.launcher.spawn(Role::Sender, &label).await;
        self.senders.push(Some(tier));
        self.senders.len() - 1
    }

    /// Kills sender `index` with SIGKILL: no chance to settle what it holds.
    pub fn kill_sender(&mut self, index: usize) {
        let tier = self.senders.get_mut(index).and_then(Option::take);
        drop(tier.unwrap_or_else(|| panic!("sender {index} is not running")));
    }

    /// SIGKILLs Redis and starts it again from its append-only file; the tiers are left
    /// running and must reconnect on their own.
    pub fn restart_redis(&mut self) {
        self.redis.server().restart();
    }

    /// SIGKILLs Redis and leaves it down until [`System::start_redis`].
    pub fn stop_redis(&mut self) {
        self.redis.server().kill();
    }

    /// Starts Redis again (from its append-only file) after [`System::stop_redis`].
    pub fn start_redis(&mut self) {
        self.redis.server().start_again();
    }

    /// Starts another `eg-ingress` on the same Redis; returns its URL.
    pub async fn start_extra_ingress(&mut self) -> String {
        let label = format!("ingress-{}", self.extra_ingress.len() + 1);
        let tier = self.launcher.spawn(Role::Ingress, &label).await;
        let url = tier.url.clone();
        self.extra_ingress.push(tier);
        url
    }

    fn tier(&self, which: TierId) -> &Tier {
        match which {
            TierId::Ingress => &self.ingress,
            TierId::Scheduler => &self.scheduler,
            TierId::DeadLetter => &self.deadletter,
            TierId::Sender(i) => self
                .senders
                .get(i)
                .and_then(Option::as_ref)
                .unwrap_or_else(|| panic!("sender {i} is not running")),
        }
    }

    fn tier_mut(&mut self, which: TierId) -> &mut Tier {
        match which {
            TierId::Ingress => &mut self.ingress,
            TierId::Scheduler => &mut self.scheduler,
            TierId::DeadLetter => &mut self.deadletter,
            TierId::Sender(i) => self
                .senders
                .get_mut(i)
                .and_then(Option::as_mut)
                .unwrap_or_else(|| panic!("sender {i} is not running")),
        }
    }

    /// `http://127.0.0.1:PORT` of a tier's HTTP listener.
    pub fn tier_url(&self, which: TierId) -> &str {
        &self.tier(which).url
    }

    /// The status of a tier's `/readyz` (`None`: it did not answer within 5 s).
    pub async fn readyz(&self, which: TierId) -> Option<StatusCode> {
        let url = format!("{}/readyz", self.tier(which).url);
        let answer = self.http.get(url).timeout(Duration::from_secs(5)).send().await;
        answer.ok().map(|r| r.status())
    }

    /// The process id of a running tier.
    pub fn tier_pid(&self, which: TierId) -> u32 {
        self.tier(which).child.id()
    }

    /// Whether the tier's process is still running.
    pub fn is_running(&mut self, which: TierId) -> bool {
        let tier = self.tier_mut(which);
        tier.child.try_wait().expect("poll a child process").is_none()
    }

    /// Sends SIGTERM and waits (at most `within`, else the test fails) for the process to
    /// exit; returns how it exited and how long that took.
    pub async fn terminate(&mut self, which: TierId, within: Duration) -> (std::process::ExitStatus, Duration) {
        let pid = self.tier_pid(which).to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
        assert!(sent.success(), "kill -TERM {pid} failed");
        self.wait_exit(which, within).await
    }

    /// Waits (at most `within`, else the test fails) for a tier's process to exit.
    pub async fn wait_exit(&mut self, which: TierId, within: Duration) -> (std::process::ExitStatus, Duration) {
        let tier = self.tier_mut(which);
        let started = Instant::now();
        loop {
            if let Some(status) = tier.child.try_wait().expect("poll a child process") {
                return (status, started.elapsed());
            }
            assert!(started.elapsed() < within, "{which:?} did not exit within {within:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts a tier again in place of one that exited (or kills it first); the
    /// ingress comes back on a new port, which [`System::ingress_url`] then reports.
    pub async fn restart(&mut self, which: TierId) {
        let (role, label) = match which {
            TierId::Ingress => (Role::Ingress, "ingress".to_owned()),
            TierId::Scheduler => (Role::Scheduler, "scheduler".to_owned()),
            TierId::DeadLetter => (Role::DeadLetter, "deadletter".to_owned()),
            TierId::Sender(i) => (Role::Sender, format!("sender-{i}")),
        };
        let tier = self.launcher.spawn(role, &label).await;
        match which {
            TierId::Sender(i) => self.senders[i] = Some(tier),
            _ => *self.tier_mut(which) = tier,
        }
    }

    /// The text of every tier's log so far, by file name (for scans of what was logged).
    pub fn logs(&self) -> Vec<(String, String)> {
        let Some(dir) = self.log_dir.as_ref() else {
            return Vec::new();
        };
        let mut logs: Vec<(String, String)> = files_under(dir.path())
            .into_iter()
            .map(|path| {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (name, std::fs::read_to_string(&path).unwrap_or_default())
            })
            .collect();
        logs.sort();
        logs
    }

    /// The `/metrics` text of every running tier process.
    pub async fn all_metrics(&self) -> String {
        let mut text = String::new();
        let tiers = [&self.ingress, &self.scheduler, &self.deadletter]
            .into_iter()
            .chain(self.extra_ingress.iter())
            .chain(self.senders.iter().flatten());
        for tier in tiers {
            text.push_str(&self.metrics_of(tier).await);
            text.push('\n');
        }
        text
    }

    /// The single Redis server under this system (tests that signal or restart it).
    pub fn redis(&self) -> &RedisServer {
        match &self.redis {
            Backend::Server(server) => server,
            Backend::Cluster(_) => panic!("this test needs one Redis server, not a cluster"),
        }
    }

    /// The keys eg uses in this system's Redis (same prefix and partition count).
    pub fn keyspace(&self) -> eg_store::Keyspace {
        eg_store::Keyspace::new("eg", PARTITIONS)
    }

    /// Runs one Redis command with `redis-cli` against this system's Redis (for
    /// assertions on queue state, e.g. `["XLEN", &system.keyspace().partition(0).ready()]`;
    /// on a cluster it follows redirects); returns its output, trimmed.
    pub fn redis_cli(&self, args: &[&str]) -> String {
        match &self.redis {
            Backend::Server(server) => eg_testkit::redis_cli(&["-s", &server.socket().display().to_string()], args),
            Backend::Cluster(cluster) => cluster.cli(args),
        }
    }

    /// Every key matching `pattern` (on a cluster, of every node).
    pub fn redis_keys(&self, pattern: &str) -> Vec<String> {
        let listed = match &self.redis {
            Backend::Server(_) => self.redis_cli(&["KEYS", pattern]),
            Backend::Cluster(cluster) => cluster.keys(pattern).join("\n"),
        };
        listed.lines().filter(|k| !k.is_empty()).map(str::to_owned).collect()
    }

    /// `http://127.0.0.1:PORT` of the ingress.
    pub fn ingress_url(&self) -> &str {
        &self.ingress.url
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    pub fn dead_letter_dir(&self) -> &Path {
        self.dead_letter_dir
            .as_ref()
            .map(tempfile::TempDir::path)
            .expect("dead-letter dir")
    }

    /// A management API call with the right bearer token.
    pub async fn admin(&self, method: Method, path: &str, body: Option<&Value>) -> reqwest::Response {
        let mut request = self
            .http
            .request(method, format!("{}/admin{path}", self.ingress.url))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        request.send().await.expect("management API request")
    }

    /// Creates a topic and returns its `key1` (also remembered for [`System::publish`]).
    pub async fn create_topic(&self, topic: &str) -> String {
        let body = json!({"properties": {"inputSchema": "EventGridSchema"}});
        let (status, answer) =
            json_reply(self.admin(Method::PUT, &format!("/topics/{topic}"), Some(&body)).await).await;
        assert!(status.is_success(), "PUT topic {topic}: {status} {answer}");
        let (status, keys) = json_reply(
            self.admin(Method::POST, &format!("/topics/{topic}/listKeys"), None)
                .await,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "listKeys of {topic}: {keys}");
        let key1 = keys["key1"].as_str().expect("key1 in listKeys").to_owned();
        self.keys
            .lock()
            .expect("keys lock")
            .insert(topic.to_owned(), key1.clone());
        key1
    }

    /// Creates (or replaces) a subscription; returns the resource the API answered with.
    pub async fn create_subscription(&self, topic: &str, name: &str, body: Value) -> Value {
        let path = format!("/topics/{topic}/eventSubscriptions/{name}");
        let (status, answer) = json_reply(self.admin(Method::PUT, &path, Some(&body)).await).await;
        assert!(
            status.is_success(),
            "PUT subscription {topic}/{name}: {status} {answer}"
        );
        answer
    }

    /// Publishes `events` (a JSON array) with the topic's `key1`.
    pub async fn publish(&self, topic: &str, events: &Value) -> reqwest::Response {
        let key = self.keys.lock().expect("keys lock").get(topic).cloned();
        let key = key.unwrap_or_else(|| panic!("create_topic({topic:?}) first"));
        self.publish_raw(topic, Some(&key), events.to_string().into_bytes())
            .await
    }

    /// Publishes and insists on `200`.
    pub async fn publish_ok(&self, topic: &str, events: &Value) {
        let (status, body) = text_reply(self.publish(topic, events).await).await;
        assert_eq!(status, StatusCode::OK, "publish to {topic}: {body}");
    }

    /// A publish request with any key (or none) and any body.
    pub async fn publish_raw(&self, topic: &str, key: Option<&str>, body: Vec<u8>) -> reqwest::Response {
        let mut request = self
            .http
            .post(format!(
                "{}/topics/{topic}/api/events?api-version=2018-01-01",
                self.ingress.url
            ))
            .header("content-type", "application/json")
            .body(body);
        if let Some(key) = key {
            request = request.header("aeg-sas-key", key);
        }
        request.send().await.expect("publish request")
    }

    /// The `/metrics` text of every running sender, one after the other (so
    /// [`metric`] sums over senders).
    pub async fn sender_metrics(&self) -> String {
        let mut text = String::new();
        for tier in self.senders.iter().flatten() {
            text.push_str(&self.metrics_of(tier).await);
            text.push('\n');
        }
        text
    }

    pub async fn ingress_metrics(&self) -> String {
        self.metrics_of(&self.ingress).await
    }

    pub async fn scheduler_metrics(&self) -> String {
        self.metrics_of(&self.scheduler).await
    }

    pub async fn deadletter_metrics(&self) -> String {
        self.metrics_of(&self.deadletter).await
    }

    async fn metrics_of(&self, tier: &Tier) -> String {
        match self.http.get(format!("{}/metrics", tier.url)).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Every record of every dead-letter file written so far.
    pub fn dead_letter_records(&self) -> Vec<DeadLettered> {
        let root = self.dead_letter_dir();
        let mut records = Vec::new();
        for path in files_under(root) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue; // a file being written
            }
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            let value: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON ({e}): {text}", path.display()));
            let items = value
                .as_array()
                .unwrap_or_else(|| panic!("{} is not a JSON array: {text}", path.display()));
            let relative = path.strip_prefix(root).expect("under the root").to_path_buf();
            records.extend(items.iter().map(|record| DeadLettered {
                path: relative.clone(),
                record: record.clone(),
            }));
        }
        records
    }

    /// Waits until `count` dead-letter records exist, and returns them.
    pub async fn wait_dead_letters(&self, count: usize, timeout: Duration) -> Vec<DeadLettered> {
        eventually(timeout, &format!("{count} dead-letter record(s)"), || async {
            let records = self.dead_letter_records();
            (records.len() >= count).then_some(records)
        })
        .await
    }
}

impl Drop for System {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        // The test failed: show what the tiers said, and keep it.
        if let Some(dir) = self.log_dir.take() {
            let dir = dir.keep();
            let mut logs = files_under(&dir);
            logs.sort();
            for log in logs {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                eprintln!(
                    "----- {} (last {LOG_TAIL_LINES} lines) -----\n{}",
                    log.display(),
                    tail(&text, LOG_TAIL_LINES)
                );
            }
            eprintln!("----- logs kept in {}", dir.display());
        }
        if let Some(dir) = self.dead_letter_dir.take() {
            eprintln!("----- dead-letter files kept in {}", dir.keep().display());
        }
    }
}

/// One record of a dead-letter file; `path` is relative to the dead-letter root.
#[derive(Debug, Clone)]
pub struct DeadLettered {
    pub path: PathBuf,
    pub record: Value,
}

/// The directory holding the workspace's binaries: the test executable is
/// `target/<profile>/deps/<test>`, the binaries are in `target/<profile>/`.
fn binary_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps")
        .to_path_buf();
    if let Some(binary) = tier::missing_binaries(&dir).first() {
        panic!(
            "{} is missing: run `cargo build --workspace` first (the system tests run the binaries)",
            binary.display()
        );
    }
    dir
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

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The status and JSON body of a response (`Null` when the body is empty or not JSON).
pub async fn json_reply(response: reqwest::Response) -> (StatusCode, Value) {
    let (status, text) = text_reply(response).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub async fn text_reply(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}

/// An Event Grid schema event as a publisher sends it.
pub fn event(id: &str, event_type: &str, subject: &str, data: Value) -> Value {
    json!({
        "id": id,
        "eventType": event_type,
        "subject": subject,
        "eventTime": "2026-01-02T03:04:05.678Z",
        "data": data,
    })
}

/// A WebHook subscription body for `endpoint_url`, with `extra` merged into its
/// `properties` (e.g. `filter`, `retryPolicy`, `deadLetterDestination`).
pub fn subscription(endpoint_url: &str, extra: Value) -> Value {
    let mut properties = json!({
        "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": endpoint_url}},
    });
    if let (Some(target), Value::Object(extra)) = (properties.as_object_mut(), extra) {
        target.extend(extra);
    }
    json!({ "properties": properties })
}

/// `deadLetterDestination` for a container of the dead-letter directory.
pub fn dead_letter_to(container: &str) -> Value {
    json!({"endpointType": "LocalDirectory", "properties": {"containerName": container}})
}

/// The sum of every sample of metric `name` whose labels include all of `labels`
/// (Prometheus text format); 0 when there is none.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(parse_sample)
        .filter(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).is_some_and(|x| x == v)))
        .map(|(_, _, value)| value)
        .sum()
}

fn parse_sample(line: &str) -> Option<(String, HashMap<String, String>, f64)> {
    let line = line.trim();
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let Some((name, rest)) = series.split_once('{') else {
        return Some((series.to_owned(), HashMap::new(), value));
    };
    let mut labels = HashMap::new();
    let mut rest = rest.strip_suffix('}')?;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut val = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        val.push(if escaped == 'n' { '\n' } else { escaped });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => val.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').trim().to_owned(), val);
        rest = &after[end..];
    }
    Some((name.to_owned(), labels, value))
}

/// How a [`Receiver`] answers.
#[derive(Debug, Clone, Copy)]
pub enum Behaviour {
    /// Always this status.
    Status(u16),
    /// `status` for the first `failures` requests, then 200.
    FailFirst { failures: usize, status: u16 },
    /// Waits this long before answering the first request (200); answers the rest at once.
    SlowFirst(Duration),
    /// Answers request `i` (deliveries only, in arrival order) as `replies[i]` says; every
    /// request after the script ran out gets 200 at once. A `const` slice, e.g.
    /// `const REPLIES: &[Reply] = &[Reply::status(503).retry_after("3")];`.
    Script(&'static [Reply]),
}

/// One scripted answer of a [`Behaviour::Script`] receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    /// The `Retry-After` header to send, verbatim (`"3"`, or an HTTP date).
    pub retry_after: Option<&'static str>,
    /// How long to wait before answering (the request is recorded on arrival).
    pub delay: Duration,
}

impl Reply {
    /// `status` at once, no extra headers.
    pub const fn status(status: u16) -> Self {
        Self {
            status,
            retry_after: None,
            delay: Duration::ZERO,
        }
    }

    /// The same answer with `Retry-After: value`.
    pub const fn retry_after(self, value: &'static str) -> Self {
        Self {
            retry_after: Some(value),
            ..self
        }
    }

    /// The same answer, sent `delay` after the request arrived.
    pub const fn after(self, delay: Duration) -> Self {
        Self { delay, ..self }
    }
}

/// How a [`Receiver`] answers validation handshakes (spec §8). Handshake requests are
/// recorded apart from deliveries ([`Receiver::validations`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validation {
    /// Echo the Event Grid validation code; allow any origin for CloudEvents.
    Consent,
    /// Answer 200 with no body and no `WebHook-Allowed-Origin` (no consent).
    Ignore,
    /// Consent as [`Validation::Consent`], after this long.
    SlowConsent(Duration),
}

/// One request a [`Receiver`] got.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    /// The body as JSON (`Null` if it was not JSON).
    pub body: Value,
    pub raw_body: String,
    pub at: Instant,
    /// The status the receiver answered (or is about to answer) with.
    pub status: u16,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }

    /// The ids of the events in the body.
    pub fn event_ids(&self) -> Vec<String> {
        self.body
            .as_array()
            .map(|events| {
                events
                    .iter()
                    .filter_map(|e| e["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

struct ReceiverState {
    behaviour: Behaviour,
    validation: Validation,
    requests: Mutex<Vec<Recorded>>,
    validations: Mutex<Vec<Recorded>>,
}

/// A recording webhook endpoint on `127.0.0.1:<free port>`, served on the test's runtime.
pub struct Receiver {
    address: std::net::SocketAddr,
    url: String,
    state: Arc<ReceiverState>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub async fn start(behaviour: Behaviour) -> Self {
        Self::start_with(behaviour, Validation::Consent).await
    }

    pub async fn start_with(behaviour: Behaviour, validation: Validation) -> Self {
        let state = Arc::new(ReceiverState {
            behaviour,
            validation,
            requests: Mutex::default(),
            validations: Mutex::default(),
        });
        let app = Router::new().fallback(receive).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let address = listener.local_addr().expect("receiver address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            address,
            url: format!("http://{address}/hook"),
            state,
            task,
        }
    }

    /// Stops listening, and keeps the port so that connecting to it is refused for as
    /// long as the returned port lives (a port merely freed could be handed to another
    /// test's server, which would answer instead).
    pub async fn close_refusing(mut self) -> eg_testkit::RefusingPort {
        self.task.abort();
        // The listener is dropped with the task: wait for that before binding its port.
        let _ = (&mut self.task).await;
        eg_testkit::RefusingPort::hold(self.address)
    }

    /// The endpoint URL to subscribe (`http://127.0.0.1:PORT/hook`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every request so far, in arrival order.
    pub fn received(&self) -> Vec<Recorded> {
        self.state.requests.lock().expect("receiver lock").clone()
    }

    pub fn count(&self) -> usize {
        self.state.requests.lock().expect("receiver lock").len()
    }

    /// The validation handshake requests (Event Grid POSTs and CloudEvents OPTIONS).
    pub fn validations(&self) -> Vec<Recorded> {
        self.state.validations.lock().expect("receiver lock").clone()
    }

    /// The ids of every event received, in arrival order, duplicates included.
    pub fn event_ids(&self) -> Vec<String> {
        self.received().iter().flat_map(Recorded::event_ids).collect()
    }

    /// The ids of the events the receiver accepted (answered 2xx), duplicates included.
    pub fn delivered_ids(&self) -> Vec<String> {
        self.received()
            .iter()
            .filter(|r| (200..300).contains(&r.status))
            .flat_map(Recorded::event_ids)
            .collect()
    }

    /// Waits until at least `count` requests have arrived; returns them all.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<Recorded> {
        eventually(timeout, &format!("{count} request(s) at {}", self.url), || async {
            let received = self.received();
            (received.len() >= count).then_some(received)
        })
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn record(uri: &Uri, headers: &HeaderMap, raw_body: String, status: u16) -> Recorded {
    Recorded {
        path: uri.path().to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
        raw_body,
        at: Instant::now(),
        status,
    }
}

/// Answers a validation handshake, if this request is one.
fn handshake(
    state: &ReceiverState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    raw_body: &str,
) -> Option<Response> {
    let is_event_grid = headers
        .get("aeg-event-type")
        .is_some_and(|v| v.as_bytes() == b"SubscriptionValidation");
    if *method != Method::OPTIONS && !is_event_grid {
        return None;
    }
    state
        .validations
        .lock()
        .expect("receiver lock")
        .push(record(uri, headers, raw_body.to_owned(), 200));
    let consent = matches!(state.validation, Validation::Consent | Validation::SlowConsent(_));
    if *method == Method::OPTIONS {
        let mut response = StatusCode::OK.into_response();
        if consent {
            response
                .headers_mut()
                .insert("webhook-allowed-origin", axum::http::HeaderValue::from_static("*"));
        }
        return Some(response);
    }
    let body: Value = serde_json::from_str(raw_body).unwrap_or(Value::Null);
    let code = body[0]["data"]["validationCode"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Some(if consent {
        axum::Json(json!({ "validationResponse": code })).into_response()
    } else {
        StatusCode::OK.into_response()
    })
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw_body = String::from_utf8_lossy(&body).into_owned();
    if let Some(response) = handshake(&state, &method, &uri, &headers, &raw_body) {
        if let Validation::SlowConsent(delay) = state.validation {
            tokio::time::sleep(delay).await;
        }
        return response;
    }
    let reply = {
        let mut requests = state.requests.lock().expect("receiver lock");
        let seen_before = requests.len();
        let reply = match state.behaviour {
            Behaviour::Status(code) => Reply::status(code),
            Behaviour::FailFirst { failures, status } => {
                Reply::status(if seen_before < failures { status } else { 200 })
            }
            Behaviour::SlowFirst(delay) if seen_before == 0 => Reply::status(200).after(delay),
            Behaviour::SlowFirst(_) => Reply::status(200),
            Behaviour::Script(replies) => replies.get(seen_before).copied().unwrap_or(Reply::status(200)),
        };
        requests.push(record(&uri, &headers, raw_body, reply.status));
        reply
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut response = StatusCode::from_u16(reply.status)
        .expect("a valid status code")
        .into_response();
    if let Some(value) = reply.retry_after {
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static(value),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_prometheus_samples_by_label() {
        let text = "# TYPE DroppedEventCount counter\n\
            DroppedEventCount{topic=\"t\",subscription=\"s\",reason=\"NonRetriableFailure\"} 1\n\
            DroppedEventCount{topic=\"t\",subscription=\"s2\",reason=\"NonRetriableFailure\"} 2\n\
            DroppedEventCount{topic=\"t\",subscription=\"s\",reason=\"TimeToLiveExceeded\"} 4\n\
            Other 7\n";
        assert_eq!(metric(text, "DroppedEventCount", &[("subscription", "s")]), 5.0);
        assert_eq!(
            metric(text, "DroppedEventCount", &[("reason", "NonRetriableFailure")]),
            3.0
        );
        assert_eq!(metric(text, "DroppedEventCount", &[("subscription", "x")]), 0.0);
        assert_eq!(metric(text, "Other", &[]), 7.0);
        assert_eq!(metric(text, "Missing", &[]), 0.0);
    }

    #[test]
    fn merges_subscription_properties() {
        let body = subscription("http://h/x", json!({"retryPolicy": {"maxDeliveryAttempts": 3}}));
        assert_eq!(
            body["properties"]["destination"]["properties"]["endpointUrl"],
            "http://h/x"
        );
        assert_eq!(body["properties"]["retryPolicy"]["maxDeliveryAttempts"], 3);
    }
}
