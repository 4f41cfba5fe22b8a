//! The process side of the outside servers the tests start (Azurite, moto, RabbitMQ,
//! NATS): where their programs are found, starting one in its own process group with its
//! output appended to a log file, waiting for it with a deadline, and killing the whole
//! group — RabbitMQ is a shell script that starts the Erlang VM and its helpers, and a
//! kill of the script alone would leave them running.
//!
//! A [`ServerProcess`] is killed when dropped, also when a test panics (unwinding runs
//! the drop). A test binary killed outright runs no drop, and a Ctrl-C does not reach a
//! server in a group of its own: so a watchdog joins each server's group and kills the
//! group once the test process is gone (checked every second).

use std::fs::File;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server's program: from `variable` if set, else `default` (relative: to the
/// workspace, where `deploy/local/ensure-test-tools.sh` installs it) if it exists, else
/// `name` on `PATH`. Fails the test, saying how to install it, when none of them exists.
pub fn find_program(variable: &str, default: Option<&str>, name: &str, how_to_install: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{variable}={} is not a file. {how_to_install}",
            path.display()
        );
        return path;
    }
    let installed = default.map(|default| workspace_root().join(default));
    if let Some(installed) = installed.as_ref().filter(|path| path.is_file()) {
        return installed.clone();
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "no {name}: ${variable} is not set, {}and no {name} on PATH. {how_to_install}",
            installed
                .map(|path| format!("none at {}, ", path.display()))
                .unwrap_or_default()
        )
    })
}

/// The workspace root: the nearest directory above this crate that has `Cargo.lock`.
pub fn workspace_root() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .unwrap_or(crate_dir)
        .to_path_buf()
}

/// A running server: the leader of its own process group, its output appended to a log.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    /// In the server's group: kills it if the test process dies without dropping this.
    watchdog: Option<Child>,
    name: &'static str,
    log: PathBuf,
    /// The log's length when this process started: what it wrote comes after.
    log_start: u64,
    /// Set once the group was killed and the leader reaped: the group id may be reused.
    gone: bool,
}

impl ServerProcess {
    /// Spawns `command` (stdin closed, stdout and stderr appended to `log`) in a process
    /// group of its own.
    pub fn spawn(name: &'static str, mut command: Command, log: &Path) -> Self {
        let file = File::options()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("cannot open the {name} log {}: {e}", log.display()));
        let log_start = file.metadata().map(|m| m.len()).unwrap_or(0);
        let stderr = file.try_clone().expect("clone the log file handle");
        let child = command
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {name} ({:?}): {e}", command.get_program()));
        let watchdog = spawn_watchdog(child.id());
        Self {
            child,
            watchdog,
            name,
            log: log.to_path_buf(),
            log_start,
            gone: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the process wrote to its log since it started.
    pub fn output(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log) {
            let mut bytes = Vec::new();
            let _ = file.read_to_end(&mut bytes);
            let start = usize::try_from(self.log_start).unwrap_or(0).min(bytes.len());
            text = String::from_utf8_lossy(&bytes[start..]).into_owned();
        }
        text
    }

    /// Waits until `ready` holds, at most `within`. An error, with the server's output,
    /// when the process exits first or the time runs out (then it is killed).
    pub fn wait_until_ready(&mut self, within: Duration, mut ready: impl FnMut(&Self) -> bool) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{} exited during start-up ({status}); its output ({}):\n{}",
                    self.name,
                    self.log.display(),
                    self.output()
                ));
            }
            if ready(self) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(format!(
                    "{} did not become ready within {within:?}; its output ({}):\n{}",
                    self.name,
                    self.log.display(),
                    self.output()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILLs the whole process group and reaps the leader.
    pub fn kill(&mut self) {
        if self.gone {
            return;
        }
        self.gone = true;
        let group = self.child.id();
        signal_group(group, "KILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        // The leader is reaped, the rest of the group (the Erlang VM under RabbitMQ's
        // script) may still be dying, holding its ports: wait until the group is gone.
        let deadline = Instant::now() + Duration::from_secs(10);
        while signal_group(group, "0") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGSTOPs the whole group: the server keeps its connections open and answers
    /// nothing, the outage a timeout is for (a kill is one a closed socket shows).
    /// The watchdog is continued at once, so it still cleans up if the test dies.
    pub fn pause(&self) {
        if self.gone {
            return;
        }
        signal_group(self.child.id(), "STOP");
        if let Some(watchdog) = &self.watchdog {
            signal_process(watchdog.id(), "CONT");
        }
    }

    /// SIGCONTs the whole group after [`ServerProcess::pause`].
    pub fn resume(&self) {
        if !self.gone {
            signal_group(self.child.id(), "CONT");
        }
    }

    /// SIGTERMs the group and waits up to `within` for the leader to exit (the server
    /// saves what it keeps in memory), then SIGKILLs whatever is left.
    pub fn stop(&mut self, within: Duration) {
        if self.gone {
            return;
        }
        let _ = signal_group(self.child.id(), "TERM");
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A shell in the process group `group` that SIGKILLs the group once this test process
/// has exited; `None` if it cannot be started (the server then only dies with its drop).
fn spawn_watchdog(group: u32) -> Option<Child> {
    let script = format!(
        "while kill -0 {test} 2>/dev/null; do sleep 1; done; kill -9 -{group}",
        test = std::process::id()
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(i32::try_from(group).ok()?)
        .spawn()
        .ok()
}

/// Sends `signal` to every process of the group `pgid` (`kill` the command: this crate
/// has no unsafe code, so no libc call).
/// Whether the group still existed.
fn signal_group(pgid: u32, signal: &str) -> bool {
    Command::new("kill")
        .args([&format!("-{signal}"), "--", &format!("-{pgid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Sends `signal` to the process `pid` alone; whether it existed.
fn signal_process(pid: u32, signal: &str) -> bool {
    Command::new("kill")
        .args([&format!("-{signal}"), "--", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Whether something accepts TCP connections on `127.0.0.1:port`.
pub fn accepts(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .is_ok()
}
