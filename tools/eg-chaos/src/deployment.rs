//! The deployment under test: one `redis-server` (eg-testkit's: append-only file,
//! `appendfsync always`, a unix socket that stays the same across restarts), or with
//! `--sentinel` a primary, a replica and three sentinels (eg-testkit's), and several
//! copies of each tier, every process logging to its own file in the run directory.
//! Processes can be SIGKILLed and started again; a watcher restarts any that exits on
//! its own and counts it.

use crate::journal::Journal;
use anyhow::{Context, bail};
use eg_testkit::sentinel::MASTER_NAME;
pub use eg_testkit::tier::Role;
use eg_testkit::{RedisSentinel, redis_server, tier};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

use crate::receiver::lock;

pub const ADMIN_TOKEN: &str = "eg-chaos-admin-token";
/// The attempt timeout of every sender: receivers answer slowly relative to it.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(1);
pub const PARTITIONS: u16 = 4;
pub const PREFIX: &str = "eg";
/// The password of the data nodes and of the sentinels, with `--sentinel`.
const REDIS_PASSWORD: &str = "eg-chaos-Pa55";

struct Slot {
    role: Role,
    label: String,
    port: u16,
    child: Option<Child>,
}

/// The processes of one chaos run: Redis and the tiers' slots.
pub struct Deployment {
    bin_dir: PathBuf,
    log_dir: PathBuf,
    redis_options: redis_server::Options,
    pub dead_letter_dir: PathBuf,
    env: Vec<(String, String)>,
    slots: Mutex<Vec<Slot>>,
    redis: Mutex<Option<redis_server::Process>>,
    /// With `--sentinel`: the deployment, and the port of a primary killed and not yet
    /// back (as a replica).
    sentinel: Option<Mutex<(RedisSentinel, Option<u16>)>>,
    unexpected_exits: Mutex<BTreeMap<String, u64>>,
    journal: Journal,
    http: reqwest::Client,
}

impl Deployment {
    /// `outside_env`: the settings naming the servers outside eg (storage account,
    /// brokers), added to every tier's.
    pub fn new(
        bin_dir: PathBuf,
        run_dir: &Path,
        outside_env: Vec<(String, String)>,
        sentinel: bool,
        journal: Journal,
        http: reqwest::Client,
    ) -> anyhow::Result<Self> {
        if let Some(binary) = tier::missing_binaries(&bin_dir).first() {
            bail!(
                "{} is missing: build the tiers first (`cargo build -p eg-ingress -p eg-scheduler -p eg-sender -p eg-deadletter`; `just chaos` does), or point --bin-dir at them",
                binary.display()
            );
        }
        let log_dir = run_dir.join("logs");
        let redis_dir = run_dir.join("redis");
        let dead_letter_dir = run_dir.join("deadletters");
        for dir in [&log_dir, &redis_dir, &dead_letter_dir] {
            std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        }
        let redis_options = redis_server::Options::unix_socket(&redis_dir).log(log_dir.join("redis.log"));
        let sentinel =
            sentinel.then(|| tokio::task::block_in_place(|| RedisSentinel::start(REDIS_PASSWORD, REDIS_PASSWORD)));
        let redis_env: Vec<(&str, String)> = match &sentinel {
            None => vec![("EG__REDIS__URL", redis_options.url())],
            Some(sentinel) => vec![
                ("EG__REDIS__SENTINEL_NODES", sentinel.nodes_setting()),
                ("EG__REDIS__SENTINEL_MASTER", MASTER_NAME.to_owned()),
                ("EG__REDIS__SENTINEL_PASSWORD", REDIS_PASSWORD.to_owned()),
                ("EG__REDIS__PASSWORD", REDIS_PASSWORD.to_owned()),
                ("EG__REDIS__REPLICA_ACKS", "1".to_owned()),
                ("EG__INGRESS__STORAGE_TIMEOUT", "3s".to_owned()),
            ],
        };
        let env = redis_env
            .into_iter()
            .chain([
                ("EG__REDIS__PREFIX", PREFIX.into()),
                ("EG__REDIS__PARTITIONS", PARTITIONS.to_string()),
                ("EG__REDIS__CONNECT_TIMEOUT", "1s".into()),
                ("EG__REDIS__COMMAND_TIMEOUT", "5s".into()),
                ("EG__ADMIN__TOKEN", ADMIN_TOKEN.into()),
                ("EG__DELIVERY__RETRY_SCHEDULE", "1s,2s".into()),
                ("EG__DELIVERY__RETRY_MINIMUMS", "*=0s".into()),
                ("EG__DELIVERY__MAX_JITTER", "200ms".into()),
                ("EG__DELIVERY__MAX_RETRY_AFTER", "3s".into()),
                (
                    "EG__DELIVERY__TIMEOUT",
                    humantime::format_duration(DELIVERY_TIMEOUT).to_string(),
                ),
                ("EG__DELIVERY__VISIBILITY_TIMEOUT", "4s".into()),
                ("EG__DELIVERY__ALLOWED_NETWORKS", "127.0.0.1/32".into()),
                ("EG__SENDER__LATE_SUCCESS_WINDOW", "5s".into()),
                ("EG__SCHEDULER__INTERVAL", "100ms".into()),
                ("EG__SCHEDULER__RECLAIM_INTERVAL", "500ms".into()),
                ("EG__DEADLETTER__DIR", dead_letter_dir.display().to_string()),
                ("EG__DEADLETTER__DELAY", "2s".into()),
                ("EG__DEADLETTER__INTERVAL", "200ms".into()),
                ("EG__DEADLETTER__RETRY_INTERVAL", "3s".into()),
                ("EG__CATALOG__REFRESH_INTERVAL", "1s".into()),
                ("EG__PROBATION__LENGTHS", "*=2s".into()),
                ("EG__PROBATION__MAX", "8s".into()),
                ("EG__LOG__LEVEL", "info".into()),
            ])
            .map(|(k, v)| (k.to_owned(), v))
            .chain(outside_env)
            .collect();
        Ok(Self {
            bin_dir,
            log_dir,
            redis_options,
            dead_letter_dir,
            env,
            slots: Mutex::default(),
            redis: Mutex::default(),
            sentinel: sentinel.map(|s| Mutex::new((s, None))),
            unexpected_exits: Mutex::default(),
            journal,
            http,
        })
    }

    /// The URL of Redis (with Sentinel: of the primary now).
    pub fn redis_url(&self) -> String {
        match &self.sentinel {
            None => self.redis_options.url(),
            Some(sentinel) => {
                let port = lock(sentinel).0.primary_port().unwrap_or_default();
                format!("redis://:{REDIS_PASSWORD}@127.0.0.1:{port}")
            }
        }
    }

    /// The settings every tier gets, for the report.
    pub fn settings(&self) -> BTreeMap<String, String> {
        self.env.iter().cloned().collect()
    }

    // ----- Redis -----

    /// Starts redis-server from its directory (and append-only file) and waits until it
    /// answers; loading a large append-only file may take a while.
    pub async fn start_redis(&self) -> anyhow::Result<()> {
        if let Some(sentinel) = &self.sentinel {
            // A killed primary: wait for the failover, then start it again (a replica now).
            tokio::task::block_in_place(|| {
                let mut sentinel = lock(sentinel);
                if let Some(old) = sentinel.1.take() {
                    sentinel.0.wait_for_failover(old);
                    sentinel.0.restart(old);
                }
            });
            return Ok(());
        }
        let options = self.redis_options.clone();
        let process = tokio::task::spawn_blocking(move || options.start(Duration::from_secs(60))).await??;
        *lock(&self.redis) = Some(process);
        Ok(())
    }

    /// SIGKILL: nothing but the append-only file survives.
    pub async fn kill_redis(&self) {
        if let Some(sentinel) = &self.sentinel {
            let mut sentinel = lock(sentinel);
            // A replica still catching up (the last killed primary, back) cannot be
            // promoted: kill only a primary whose replica could take over.
            tokio::task::block_in_place(|| sentinel.0.wait_replicas_in_sync());
            let killed = sentinel.0.kill_primary();
            sentinel.1 = Some(killed);
            return;
        }
        let process = lock(&self.redis).take();
        if let Some(process) = process {
            let _ = tokio::task::spawn_blocking(move || process.kill()).await;
        }
    }

    /// SIGSTOPs redis-server (with Sentinel: the primary now) and answers its process
    /// id, for [`Deployment::resume_redis`]; `None` if it is not running.
    pub fn freeze_redis(&self) -> Option<u32> {
        let pid = match &self.sentinel {
            Some(sentinel) => lock(sentinel).0.primary_pid(),
            None => lock(&self.redis).as_ref().map(redis_server::Process::pid),
        }?;
        send_signal(pid, "STOP").then_some(pid)
    }

    /// SIGCONTs the process [`Deployment::freeze_redis`] stopped: the very process, since
    /// with Sentinel the freeze may have caused a failover and the primary now is another.
    pub fn resume_redis(&self, pid: u32) -> bool {
        send_signal(pid, "CONT")
    }

    // ----- tiers -----

    /// Adds `count` copies of `role` and starts them (not waiting for health).
    pub fn add(&self, role: Role, count: usize) -> anyhow::Result<()> {
        for i in 0..count {
            let index = {
                let mut slots = lock(&self.slots);
                let taken: Vec<u16> = slots.iter().map(|s| s.port).collect();
                slots.push(Slot {
                    role,
                    label: format!("{}-{i}", role.name()),
                    port: free_port(&taken)?,
                    child: None,
                });
                slots.len() - 1
            };
            self.start(index)?;
        }
        Ok(())
    }

    fn start(&self, index: usize) -> anyhow::Result<()> {
        let mut slots = lock(&self.slots);
        let slot = &mut slots[index];
        let log_path = self.log_dir.join(format!("{}.log", slot.label));
        let mut log = File::options().create(true).append(true).open(&log_path)?;
        use std::io::Write;
        writeln!(
            log,
            "===== eg-chaos: starting {} on 127.0.0.1:{} at {} =====",
            slot.label,
            slot.port,
            crate::journal::now_utc()
        )?;
        let listen = format!("127.0.0.1:{}", slot.port);
        let mut command = Command::from(tier::command(&self.bin_dir, slot.role, &listen, &self.env, log)?);
        command.kill_on_drop(true);
        let child = command
            .spawn()
            .with_context(|| format!("start {}", slot.role.binary()))?;
        slot.child = Some(child);
        Ok(())
    }

    /// Waits until every tier answers `/healthz` (ingress also `/readyz`).
    pub async fn wait_healthy(&self, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let targets: Vec<(String, Role, u16)> = lock(&self.slots)
                .iter()
                .map(|s| (s.label.clone(), s.role, s.port))
                .collect();
            let mut sick = Vec::new();
            for (label, role, port) in targets {
                for path in role.health_paths() {
                    let answer = self
                        .http
                        .get(format!("http://127.0.0.1:{port}{path}"))
                        .timeout(Duration::from_secs(2))
                        .send()
                        .await;
                    if !answer.is_ok_and(|r| r.status().is_success()) {
                        sick.push(format!("{label}{path}"));
                    }
                }
            }
            if sick.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "not healthy within {}: {}",
                    humantime::format_duration(within),
                    sick.join(", ")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The labels of the tier processes, in slot order.
    pub fn labels(&self) -> Vec<(usize, Role, String)> {
        lock(&self.slots)
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.role, s.label.clone()))
            .collect()
    }

    /// `http://127.0.0.1:PORT` of every ingress copy (running or not).
    pub fn ingress_urls(&self) -> Vec<String> {
        self.urls(Role::Ingress)
    }

    /// `http://127.0.0.1:PORT` of every copy of `role` (running or not).
    pub fn urls(&self, role: Role) -> Vec<String> {
        lock(&self.slots)
            .iter()
            .filter(|s| s.role == role)
            .map(|s| format!("http://127.0.0.1:{}", s.port))
            .collect()
    }

    /// SIGKILLs slot `index` if it runs; false if it was not running.
    pub async fn kill(&self, index: usize) -> bool {
        let child = {
            let mut slots = lock(&self.slots);
            slots[index].child.take()
        };
        match child {
            Some(mut child) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                true
            }
            None => false,
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to slot `index`'s process; returns its pid, or
    /// `None` if it is not running (or is no longer the process `expected_pid`).
    pub fn signal(&self, index: usize, signal: &str, expected_pid: Option<u32>) -> Option<u32> {
        let pid = lock(&self.slots)[index].child.as_ref().and_then(Child::id)?;
        if expected_pid.is_some_and(|expected| expected != pid) {
            return None;
        }
        send_signal(pid, signal).then_some(pid)
    }

    /// Starts slot `index` again (same port) unless it is running.
    pub fn restart(&self, index: usize) -> anyhow::Result<()> {
        if lock(&self.slots)[index].child.is_some() {
            return Ok(());
        }
        self.start(index)
    }

    /// Restarts every slot that is down (after the faults stopped).
    pub fn restart_all(&self) -> anyhow::Result<()> {
        let down: Vec<usize> = lock(&self.slots)
            .iter()
            .enumerate()
            .filter(|(_, s)| s.child.is_none())
            .map(|(i, _)| i)
            .collect();
        for index in down {
            self.start(index)?;
        }
        Ok(())
    }

    /// Notices processes that exited on their own, counts them, and starts them again
    /// (on a new port if the old one was taken).
    pub async fn watch(&self) {
        let mut exited = Vec::new();
        {
            let mut slots = lock(&self.slots);
            for (index, slot) in slots.iter_mut().enumerate() {
                let Some(child) = slot.child.as_mut() else { continue };
                if let Ok(Some(status)) = child.try_wait() {
                    slot.child = None;
                    exited.push((index, slot.label.clone(), status.to_string()));
                }
            }
        }
        for (index, label, status) in exited {
            let log = std::fs::read_to_string(self.log_dir.join(format!("{label}.log"))).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            let port_taken = tail.iter().any(|l| l.contains("cannot listen"));
            self.journal.note(&format!(
                "UNEXPECTED EXIT of {label} ({status}){}; restarting",
                if port_taken { ", its port was taken" } else { "" }
            ));
            *lock(&self.unexpected_exits).entry(label).or_default() += 1;
            if port_taken {
                let mut slots = lock(&self.slots);
                let taken: Vec<u16> = slots.iter().map(|s| s.port).collect();
                if let Ok(port) = free_port(&taken) {
                    slots[index].port = port;
                }
            }
            if let Err(e) = self.start(index) {
                self.journal.note(&format!("cannot restart: {e:#}"));
            }
        }
    }

    pub fn unexpected_exits(&self) -> BTreeMap<String, u64> {
        lock(&self.unexpected_exits).clone()
    }

    /// Kills everything (tiers first, then Redis).
    pub async fn stop(&self) {
        let children: Vec<Child> = lock(&self.slots).iter_mut().filter_map(|s| s.child.take()).collect();
        for mut child in children {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        self.kill_redis().await;
    }
}

/// `kill -<signal> <pid>` (the workspace forbids `unsafe`, so no direct `kill(2)`).
fn send_signal(pid: u32, signal: &str) -> bool {
    std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A free loopback port none of `taken` (the other tiers' ports, which a tier that is
/// down at the moment leaves unbound but will listen on again).
fn free_port(taken: &[u16]) -> anyhow::Result<u16> {
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        if !taken.contains(&port) {
            return Ok(port);
        }
    }
}
