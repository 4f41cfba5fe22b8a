//! Starting eg's tier binaries as processes, for the system tests, eg-bench and
//! eg-chaos: one hermetic command line, and a start that lets the tier choose its port.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Proxy variables a developer's shell may set; tiers and test clients must ignore them
/// (every address in a test is on loopback).
pub const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

    /// `ingress`, `scheduler`, `sender`, `deadletter`: for labels and log names.
    pub fn name(self) -> &'static str {
        match self {
            Role::Ingress => "ingress",
            Role::Scheduler => "scheduler",
            Role::Sender => "sender",
            Role::DeadLetter => "deadletter",
        }
    }

    /// The setting naming the address the tier's HTTP listener binds.
    pub fn listen_variable(self) -> &'static str {
        match self {
            Role::Ingress => "EG__INGRESS__LISTEN",
            Role::Scheduler => "EG__SCHEDULER__LISTEN",
            Role::Sender => "EG__SENDER__LISTEN",
            Role::DeadLetter => "EG__DEADLETTER__LISTEN",
        }
    }

    /// What answers `200` once the tier is up: the ingress also `/readyz`, since it
    /// must reach Redis before it can take a publish.
    pub fn health_paths(self) -> &'static [&'static str] {
        match self {
            Role::Ingress => &["/healthz", "/readyz"],
            _ => &["/healthz"],
        }
    }
}

/// The tier binaries missing from `bin_dir`.
pub fn missing_binaries(bin_dir: &Path) -> Vec<PathBuf> {
    Role::ALL
        .iter()
        .map(|role| bin_dir.join(role.binary()))
        .filter(|binary| !binary.is_file())
        .collect()
}

/// `role`'s binary in `bin_dir` with `env`, listening on `listen`, its output appended
/// to `log`. Hermetic: no `EG__` setting, `RUST_LOG` or proxy variable of the caller's
/// environment reaches the tier.
pub fn command(
    bin_dir: &Path,
    role: Role,
    listen: &str,
    env: &[(String, String)],
    log: File,
) -> std::io::Result<Command> {
    let mut command = hermetic_command(bin_dir, role, listen, env);
    command.stdout(log.try_clone()?).stderr(log);
    Ok(command)
}

/// [`command`] with stdin closed and the output not set yet (a test that gives the
/// tier a pipe nobody reads, say).
pub fn hermetic_command(bin_dir: &Path, role: Role, listen: &str, env: &[(String, String)]) -> Command {
    let mut command = Command::new(bin_dir.join(role.binary()));
    for (key, _) in std::env::vars() {
        // A developer's own OTEL_* settings must not send a test's traces anywhere.
        if key.starts_with("EG__") || key.starts_with("OTEL_") {
            command.env_remove(key);
        }
    }
    // NO_COLOR is removed too: a tier must write plain text to a log file by itself (it
    // colours only a terminal), and every test that reads a log relies on that.
    for key in PROXY_VARIABLES.iter().chain(&["RUST_LOG", "NO_COLOR"]) {
        command.env_remove(key);
    }
    command
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env(role.listen_variable(), listen)
        .stdin(Stdio::null());
    command
}

/// A tier that started and answers its health checks.
pub struct Started {
    pub child: Child,
    /// `http://ADDRESS` of its HTTP listener.
    pub url: String,
}

/// Why a tier did not start.
#[derive(Debug)]
pub enum StartFailure {
    /// It could not be run at all.
    Spawn(std::io::Error),
    /// It exited (its exit status) before it was healthy.
    Exited(String),
    /// It ran but was not healthy within the deadline (it has been killed).
    Unhealthy,
}

impl std::fmt::Display for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartFailure::Spawn(e) => write!(f, "cannot be run: {e}"),
            StartFailure::Exited(status) => write!(f, "exited during start-up ({status})"),
            StartFailure::Unhealthy => write!(f, "was not healthy in time"),
        }
    }
}

/// Starts `role` on `127.0.0.1:0` with `env`, logging to `log_path` (appended), and
/// waits until it is healthy, at most `within`.
///
/// The tier binds port 0 and the address is read from its `listening address=…` log
/// line: a port chosen here and bound there could be taken meanwhile by another process
/// (another tier started at the same moment), which would then answer this tier's
/// health checks.
pub async fn start(
    bin_dir: &Path,
    role: Role,
    env: &[(String, String)],
    log_path: &Path,
    http: &reqwest::Client,
    within: Duration,
) -> Result<Started, StartFailure> {
    let log = File::options()
        .create(true)
        .append(true)
        .open(log_path)
        .map_err(StartFailure::Spawn)?;
    // A restarted tier appends to the same log: only what this process writes counts.
    let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
    let mut child = command(bin_dir, role, "127.0.0.1:0", env, log)
        .and_then(|mut command| command.spawn())
        .map_err(StartFailure::Spawn)?;
    let deadline = Instant::now() + within;
    let mut url = None;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(StartFailure::Exited(status.to_string()));
        }
        if url.is_none() {
            url = logged_listen_address(log_path, log_start).map(|address| format!("http://{address}"));
        }
        if let Some(url) = &url
            && healthy(http, url, role).await
        {
            return Ok(Started {
                child,
                url: url.clone(),
            });
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(StartFailure::Unhealthy);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn healthy(http: &reqwest::Client, url: &str, role: Role) -> bool {
    for path in role.health_paths() {
        let answer = http
            .get(format!("{url}{path}"))
            .timeout(Duration::from_secs(2))
            .send()
            .await;
        if !answer.is_ok_and(|r| r.status().is_success()) {
            return false;
        }
    }
    true
}

/// The address in a tier's `listening address=…` log line (eg_runtime::ops), among the
/// complete lines logged from byte `from` on (a line may be caught half-written).
pub fn logged_listen_address(log_path: &Path, from: u64) -> Option<SocketAddr> {
    let log = std::fs::read(log_path).ok()?;
    let written = log.get(usize::try_from(from).ok()?..)?;
    let complete = &written[..written.iter().rposition(|b| *b == b'\n')? + 1];
    String::from_utf8_lossy(complete).lines().find_map(|line| {
        let (_, rest) = line.split_once(" listening address=")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listen_address_is_read_from_complete_lines_written_since_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tier.log");
        let old = "2026-01-01T00:00:00Z  INFO eg_runtime::ops: listening address=127.0.0.1:1111\n";
        std::fs::write(&path, old).unwrap();
        let from = old.len() as u64;
        assert_eq!(logged_listen_address(&path, from), None);

        let mut log = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        use std::io::Write;
        write!(
            log,
            "2026-01-01T00:00:01Z  INFO eg_runtime::ops: listening address=127.0.0.1:22"
        )
        .unwrap();
        assert_eq!(logged_listen_address(&path, from), None, "a half-written line");
        writeln!(log, "22").unwrap();
        assert_eq!(
            logged_listen_address(&path, from),
            Some("127.0.0.1:2222".parse().unwrap())
        );
        assert_eq!(logged_listen_address(&path, 0), Some("127.0.0.1:1111".parse().unwrap()));
    }
}
