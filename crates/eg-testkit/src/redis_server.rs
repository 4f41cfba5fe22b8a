//! The one way eg's tests and tools start a `redis-server`: the test server of
//! [`crate::RedisServer`], each node of [`crate::RedisCluster`] and eg-chaos's Redis are
//! all started here, so they share one set of arguments (an append-only file that
//! survives a SIGKILL, no snapshots) and one readiness wait.
//!
//! A server counts as started when it answers `PING` and names its own process id in
//! `INFO server`: a TCP port picked free may be bound by another process meanwhile, and
//! that process must not pass for the new server.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `stream-node-max-bytes`, as eg's deployments set it.
pub const STREAM_NODE_MAX_BYTES: &str = "16384";

/// How often the append-only file is flushed to disk (`--appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appendfsync {
    /// After every write: what eg's tests and the chaos run use, so an acknowledged
    /// write survives a SIGKILL.
    Always,
    /// Once a second.
    EverySec,
}

impl Appendfsync {
    fn as_arg(self) -> &'static str {
        match self {
            Appendfsync::Always => "always",
            Appendfsync::EverySec => "everysec",
        }
    }
}

#[derive(Debug, Clone)]
enum Listen {
    /// A unix socket (file mode 700) and no TCP port.
    UnixSocket(PathBuf),
    /// A TCP port on 127.0.0.1.
    Tcp(u16),
}

/// How to start one `redis-server`; [`Options::start`] starts it.
#[derive(Debug, Clone)]
pub struct Options {
    dir: PathBuf,
    listen: Listen,
    appendfsync: Appendfsync,
    cluster_node_timeout: Option<Duration>,
    extra_args: Vec<String>,
    log: Option<PathBuf>,
}

impl Options {
    /// A server listening only on `<dir>/redis.sock`, its files in `dir`.
    pub fn unix_socket(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Self::new(Listen::UnixSocket(dir.join("redis.sock")), dir)
    }

    /// A server listening on `127.0.0.1:port`, its files in `dir`.
    pub fn tcp(dir: impl Into<PathBuf>, port: u16) -> Self {
        Self::new(Listen::Tcp(port), dir.into())
    }

    fn new(listen: Listen, dir: PathBuf) -> Self {
        Self {
            dir,
            listen,
            appendfsync: Appendfsync::Always,
            cluster_node_timeout: None,
            extra_args: Vec::new(),
            log: None,
        }
    }

    /// `--appendfsync` (default [`Appendfsync::Always`]).
    pub fn appendfsync(mut self, appendfsync: Appendfsync) -> Self {
        self.appendfsync = appendfsync;
        self
    }

    /// Starts the server as a Redis Cluster node (its `nodes.conf` in its directory),
    /// failed over after `node_timeout` without an answer.
    pub fn cluster(mut self, node_timeout: Duration) -> Self {
        self.cluster_node_timeout = Some(node_timeout);
        self
    }

    /// One more `--name value` setting.
    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.extra_args.extend([name.to_owned(), value.to_owned()]);
        self
    }

    /// Appends the server's output to `path` (by default it is discarded).
    pub fn log(mut self, path: impl Into<PathBuf>) -> Self {
        self.log = Some(path.into());
        self
    }

    /// The URL clients and tiers are given: `redis+unix://…` or `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        match &self.listen {
            Listen::UnixSocket(socket) => format!("redis+unix://{}", socket.display()),
            Listen::Tcp(port) => format!("redis://127.0.0.1:{port}"),
        }
    }

    /// The unix socket, for a server started with [`Options::unix_socket`].
    pub fn socket(&self) -> Option<&Path> {
        match &self.listen {
            Listen::UnixSocket(socket) => Some(socket),
            Listen::Tcp(_) => None,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `redis-server` command line, output not yet redirected.
    fn command(&self) -> Command {
        let mut command = Command::new("redis-server");
        match &self.listen {
            Listen::UnixSocket(socket) => {
                command
                    .args(["--port", "0", "--unixsocket"])
                    .arg(socket)
                    .args(["--unixsocketperm", "700"]);
            }
            Listen::Tcp(port) => {
                command.args(["--port", &port.to_string(), "--bind", "127.0.0.1"]);
            }
        }
        command.arg("--dir").arg(&self.dir);
        if let Some(timeout) = self.cluster_node_timeout {
            command
                .args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
                .args(["--cluster-node-timeout", &timeout.as_millis().to_string()]);
        }
        command
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                self.appendfsync.as_arg(),
                "--save",
                "",
                // As eg's deployments configure Redis: stream nodes of 16 KB hold ~13 ready
                // entries of 1 KB events instead of 3, so far less of each node is lost to
                // the allocator's rounding (deploy/README.md).
                "--stream-node-max-bytes",
                STREAM_NODE_MAX_BYTES,
            ])
            .args(&self.extra_args)
            .stdin(Stdio::null());
        command
    }

    /// Starts the server (creating its directory) and waits until it answers, at most
    /// `within`; a server that does not is killed. Blocks the calling thread.
    pub fn start(&self, within: Duration) -> Result<Process, StartError> {
        std::fs::create_dir_all(&self.dir).map_err(StartError::Dir)?;
        if let Some(socket) = self.socket() {
            // A socket file left by a killed server.
            let _ = std::fs::remove_file(socket);
        }
        let mut command = self.command();
        match &self.log {
            Some(path) => {
                let log = File::options()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(StartError::Log)?;
                command.stdout(log.try_clone().map_err(StartError::Log)?).stderr(log);
            }
            None => {
                command.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        let child = command.spawn().map_err(StartError::Spawn)?;
        let mut process = Process { child };
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = process.child.try_wait() {
                return Err(StartError::Exited {
                    status: status.to_string(),
                    log: self.log.clone(),
                });
            }
            if answers(&self.url(), process.pid()) {
                return Ok(process);
            }
            if Instant::now() >= deadline {
                return Err(StartError::NotReady { within });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether the server at `url` answers `PING` and is the process `pid`.
fn answers(url: &str, pid: u32) -> bool {
    let Ok(mut connection) =
        redis::Client::open(url).and_then(|client| client.get_connection_with_timeout(Duration::from_millis(200)))
    else {
        return false;
    };
    // Something that accepts and never answers must not hang the wait.
    if connection
        .set_read_timeout(Some(Duration::from_secs(1)))
        .and_then(|()| connection.set_write_timeout(Some(Duration::from_secs(1))))
        .is_err()
    {
        return false;
    }
    let pong = redis::cmd("PING").query::<String>(&mut connection);
    let info = redis::cmd("INFO").arg("server").query::<String>(&mut connection);
    let own_pid = format!("process_id:{pid}");
    pong.is_ok() && info.is_ok_and(|info| info.lines().any(|line| line.trim() == own_pid))
}

/// A running `redis-server`, SIGKILLed when dropped (no shutdown save: only the
/// append-only file survives).
#[derive(Debug)]
pub struct Process {
    child: Child,
}

impl Process {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILLs the server and waits for it to exit.
    pub fn kill(self) {
        drop(self);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why a `redis-server` did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot run redis-server ({0}); install it, e.g. `apt-get install redis-server`")]
    Spawn(#[source] std::io::Error),
    #[error("cannot create the redis-server directory: {0}")]
    Dir(#[source] std::io::Error),
    #[error("cannot open the redis-server log: {0}")]
    Log(#[source] std::io::Error),
    #[error("redis-server exited during start-up ({status}){}", log_hint(.log.as_deref()))]
    Exited { status: String, log: Option<PathBuf> },
    #[error("redis-server did not answer within {within:?}")]
    NotReady { within: Duration },
}

fn log_hint(log: Option<&Path>) -> String {
    log.map(|path| format!("; see {}", path.display())).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_on_a_unix_socket_answers_and_is_gone_when_killed() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::unix_socket(dir.path().join("redis"));
        let process = options.start(Duration::from_secs(10)).unwrap();
        assert!(answers(&options.url(), process.pid()));
        let pid = process.pid();
        process.kill();
        assert!(!answers(&options.url(), pid));
    }

    #[test]
    fn a_port_answered_by_another_server_does_not_count_as_started() {
        let dir = tempfile::tempdir().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let first = Options::tcp(dir.path().join("first"), port)
            .start(Duration::from_secs(10))
            .unwrap();
        let second = Options::tcp(dir.path().join("second"), port).start(Duration::from_secs(10));
        assert!(matches!(second, Err(StartError::Exited { .. })), "{second:?}");
        drop(first);
    }

    #[test]
    fn settings_reach_the_server() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::unix_socket(dir.path())
            .appendfsync(Appendfsync::EverySec)
            .arg("--maxmemory", "64mb");
        let _process = options.start(Duration::from_secs(10)).unwrap();
        let mut connection = redis::Client::open(options.url())
            .and_then(|c| c.get_connection())
            .unwrap();
        let fsync: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("appendfsync")
            .query(&mut connection)
            .unwrap();
        assert_eq!(fsync, ["appendfsync", "everysec"]);
        let maxmemory: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory")
            .query(&mut connection)
            .unwrap();
        assert_eq!(maxmemory, ["maxmemory", (64 * 1024 * 1024).to_string().as_str()]);
    }
}
