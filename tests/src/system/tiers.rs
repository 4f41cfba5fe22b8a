//! The tier processes of a [`System`]: starting each one from the workspace's binaries
//! (logging to a file of its own, healthy before it counts as started), and the controls
//! a test has over them: probe, signal, kill, restart.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use eg_testkit::tier::{self, Role};

use super::System;
use super::logs::{LOG_TAIL_LINES, tail};

/// How long a tier may take to start and answer `/healthz`.
const START_DEADLINE: Duration = Duration::from_secs(30);

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
pub(super) struct Tier {
    child: Child,
    /// `http://127.0.0.1:PORT` of its HTTP listener (ops endpoints; ingress: everything).
    url: String,
}

impl Tier {
    /// `http://127.0.0.1:PORT` of its HTTP listener.
    pub(super) fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Tier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What every tier of one system is started with.
pub(super) struct Launcher {
    bin_dir: PathBuf,
    log_dir: PathBuf,
    env: Vec<(String, String)>,
    http: reqwest::Client,
}

impl Launcher {
    /// Starts tiers from the workspace's binaries with `env`, logging into `log_dir`.
    pub(super) fn new(log_dir: &Path, env: Vec<(String, String)>, http: reqwest::Client) -> Self {
        Self {
            bin_dir: binary_dir(),
            log_dir: log_dir.to_path_buf(),
            env,
            http,
        }
    }

    /// Starts `role`, logging to `<log_dir>/<label>.log`, and waits until it is healthy
    /// (on a port it chose: see [`eg_testkit::tier::start`]).
    pub(super) async fn spawn(&self, role: Role, label: &str) -> Tier {
        self.spawn_with(role, label, &[]).await
    }

    /// [`Launcher::spawn`] with `extra` settings on top of the system's (later ones win).
    pub(super) async fn spawn_with(&self, role: Role, label: &str, extra: &[(&str, &str)]) -> Tier {
        match self.try_spawn_with(role, label, extra).await {
            Ok(tier) => tier,
            Err((failure, log)) => panic!(
                "{label} ({}) {failure}; its log:\n{}",
                self.bin_dir.join(role.binary()).display(),
                tail(&log, LOG_TAIL_LINES)
            ),
        }
    }

    /// [`Launcher::spawn_with`], answering why the tier did not start, with its log.
    async fn try_spawn_with(
        &self,
        role: Role,
        label: &str,
        extra: &[(&str, &str)],
    ) -> Result<Tier, (tier::StartFailure, String)> {
        let log_path = self.log_dir.join(format!("{label}.log"));
        let mut env = self.env.clone();
        env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        match tier::start(&self.bin_dir, role, &env, &log_path, &self.http, START_DEADLINE).await {
            Ok(started) => Ok(Tier {
                child: started.child,
                url: started.url,
            }),
            Err(failure) => Err((failure, std::fs::read_to_string(&log_path).unwrap_or_default())),
        }
    }
}

impl Launcher {
    /// Starts `role` with `extra` settings expecting it never to become healthy within
    /// `within`; returns its log (the process is killed).
    async fn spawn_unhealthy(&self, role: Role, label: &str, extra: &[(&str, &str)], within: Duration) -> String {
        let log_path = self.log_dir.join(format!("{label}.log"));
        let mut env = self.env.clone();
        env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        match tier::start(&self.bin_dir, role, &env, &log_path, &self.http, within).await {
            Ok(mut started) => {
                let _ = started.child.kill();
                let _ = started.child.wait();
                panic!("{label} became healthy with {extra:?}");
            }
            Err(_) => std::fs::read_to_string(&log_path).unwrap_or_default(),
        }
    }
}

impl System {
    /// Starts one more copy of `role` with `settings` on top of the system's, which must
    /// not become healthy within `within` (a setting that cannot work); returns its log.
    pub async fn start_unhealthy(&self, role: Role, settings: &[(&str, &str)], within: Duration) -> String {
        let label = format!("unhealthy-{}", role.name());
        self.launcher.spawn_unhealthy(role, &label, settings, within).await
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

    /// Starts another `eg-ingress` on the same Redis; returns its URL.
    pub async fn start_extra_ingress(&mut self) -> String {
        let label = format!("ingress-{}", self.extra_ingress.len() + 1);
        let tier = self.launcher.spawn(Role::Ingress, &label).await;
        let url = tier.url.clone();
        self.extra_ingress.push(tier);
        url
    }

    /// Starts another `eg-deadletter` on the same Redis (several workers, one store).
    pub async fn start_extra_dead_letter_worker(&mut self) {
        let label = format!("deadletter-{}", self.extra_deadletter.len() + 1);
        let tier = self.launcher.spawn(Role::DeadLetter, &label).await;
        self.extra_deadletter.push(tier);
    }

    /// Starts one more `role` with `settings` on top of the system's, which must refuse
    /// to start: exit before it is healthy (the test fails if it starts, or hangs
    /// unhealthy). Returns its log.
    pub async fn start_refused(&self, role: Role, label: &str, settings: &[(&str, &str)]) -> String {
        match self.launcher.try_spawn_with(role, label, settings).await {
            Ok(_started) => panic!("{label} started with {settings:?}; it should have refused"),
            Err((tier::StartFailure::Exited(_), log)) => log,
            Err((failure, log)) => panic!(
                "{label} {failure} instead of refusing to start; its log:\n{}",
                tail(&log, LOG_TAIL_LINES)
            ),
        }
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
        let pid = self.tier_pid(which);
        sigterm(pid);
        self.wait_exit(which, within).await
    }

    /// Waits (at most `within`, else the test fails) for a tier's process to exit.
    pub async fn wait_exit(&mut self, which: TierId, within: Duration) -> (std::process::ExitStatus, Duration) {
        let tier = self.tier_mut(which);
        wait_child_exit(&mut tier.child, &format!("{which:?}"), within).await
    }

    /// Starts one more `role` whose stdout and stderr are `stdout` and `stderr` instead
    /// of a log file (a pipe nobody reads, say), and waits until it is healthy. It listens
    /// on a port chosen here: its log, where a tier tells the port it bound, may be
    /// unreadable.
    pub async fn start_with_output(&self, role: Role, stdout: Stdio, stderr: Stdio) -> UnloggedTier {
        let url = format!("http://127.0.0.1:{}", eg_testkit::ports::free_port());
        let listen = url.trim_start_matches("http://");
        let mut command = tier::hermetic_command(&self.launcher.bin_dir, role, listen, &self.launcher.env);
        let child = command.stdout(stdout).stderr(stderr).spawn().expect("start a tier");
        let mut tier = UnloggedTier { child };
        let started = Instant::now();
        loop {
            if let Some(status) = tier.child.try_wait().expect("poll a child process") {
                panic!("{} exited during start-up ({status})", role.binary());
            }
            let answer = self
                .http
                .get(format!("{url}/healthz"))
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                return tier;
            }
            assert!(
                started.elapsed() < START_DEADLINE,
                "{} was not healthy within {START_DEADLINE:?}",
                role.binary()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts a tier again in place of one that exited (or kills it first); the
    /// ingress comes back on a new port, which [`System::ingress_url`] then reports.
    pub async fn restart(&mut self, which: TierId) {
        self.restart_with(which, &[]).await;
    }

    /// [`System::restart`] with `settings` on top of the system's: a configuration
    /// change (the tier is killed first if it runs).
    pub async fn restart_with(&mut self, which: TierId, settings: &[(&str, &str)]) {
        let (role, label) = match which {
            TierId::Ingress => (Role::Ingress, "ingress".to_owned()),
            TierId::Scheduler => (Role::Scheduler, "scheduler".to_owned()),
            TierId::DeadLetter => (Role::DeadLetter, "deadletter".to_owned()),
            TierId::Sender(i) => (Role::Sender, format!("sender-{i}")),
        };
        let tier = self.launcher.spawn_with(role, &label, settings).await;
        match which {
            TierId::Sender(i) => self.senders[i] = Some(tier),
            _ => *self.tier_mut(which) = tier,
        }
    }

    /// `http://127.0.0.1:PORT` of the ingress.
    pub fn ingress_url(&self) -> &str {
        &self.ingress.url
    }

    /// Every running tier process, the extra ingress copies and senders included.
    pub(super) fn running_tiers(&self) -> impl Iterator<Item = &Tier> {
        [&self.ingress, &self.scheduler, &self.deadletter]
            .into_iter()
            .chain(self.extra_ingress.iter())
            .chain(self.extra_deadletter.iter())
            .chain(self.senders.iter().flatten())
    }
}

/// A tier started by [`System::start_with_output`]; killed (SIGKILL) when dropped.
pub struct UnloggedTier {
    child: Child,
}

impl UnloggedTier {
    /// Sends SIGTERM and waits (at most `within`, else the test fails) for the process
    /// to exit; returns how it exited and how long that took.
    pub async fn terminate(&mut self, within: Duration) -> (std::process::ExitStatus, Duration) {
        sigterm(self.child.id());
        wait_child_exit(&mut self.child, "the tier", within).await
    }
}

impl Drop for UnloggedTier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sigterm(pid: u32) {
    let pid = pid.to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
    assert!(sent.success(), "kill -TERM {pid} failed");
}

/// Waits (at most `within`, else the test fails) for `child` to exit.
async fn wait_child_exit(child: &mut Child, what: &str, within: Duration) -> (std::process::ExitStatus, Duration) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("poll a child process") {
            return (status, started.elapsed());
        }
        assert!(started.elapsed() < within, "{what} did not exit within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
