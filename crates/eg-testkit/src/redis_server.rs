//! The one way eg's tests and tools start a `redis-server`: the test server of
//! [`crate::RedisServer`], each node of [`crate::RedisCluster`] and eg-chaos's Redis are
//! all started here, so they share one set of arguments (an append-only file that
//! survives a SIGKILL, no snapshots) and one readiness wait.
//!
//! A server may also listen for TLS ([`Options::tls`], with the certificates of a
//! [`crate::tls::TestCa`]); a Cluster node then speaks TLS only, also on its cluster bus.
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

/// A TLS port and the files behind it.
#[derive(Debug, Clone)]
pub struct TlsListen {
    pub port: u16,
    /// The server's certificate and key, and the CA clients' certificates are checked with.
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    /// A client certificate the harness itself connects with.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// Whether clients must present a certificate (`--tls-auth-clients yes`).
    pub require_client_cert: bool,
}

impl TlsListen {
    /// Listens for TLS on `port` with `ca`'s server certificate.
    pub fn new(port: u16, ca: &crate::tls::TestCa) -> Self {
        Self {
            port,
            cert: ca.server.cert.clone(),
            key: ca.server.key.clone(),
            ca: ca.ca.clone(),
            client_cert: ca.client.cert.clone(),
            client_key: ca.client.key.clone(),
            require_client_cert: false,
        }
    }

    /// The certificates a harness client connects with.
    pub fn client_certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: std::fs::read(&self.client_cert).expect("read the client certificate"),
                client_key: std::fs::read(&self.client_key).expect("read the client key"),
            }),
            root_cert: Some(std::fs::read(&self.ca).expect("read the CA certificate")),
        }
    }

    /// `redis-cli`'s TLS arguments.
    pub fn cli_args(&self) -> Vec<String> {
        let path = |p: &Path| p.display().to_string();
        vec![
            "--tls".into(),
            "--cacert".into(),
            path(&self.ca),
            "--cert".into(),
            path(&self.client_cert),
            "--key".into(),
            path(&self.client_key),
        ]
    }
}

/// How to start one `redis-server`; [`Options::start`] starts it.
#[derive(Debug, Clone)]
pub struct Options {
    dir: PathBuf,
    listen: Listen,
    tls: Option<TlsListen>,
    /// The default user's password (`requirepass`, and `masterauth` for a replica).
    password: Option<String>,
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
            tls: None,
            password: None,
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

    /// Listens for TLS too. A server on a TCP port then speaks TLS only (on that port);
    /// one on a unix socket keeps the socket (plain) beside the TLS port.
    pub fn tls(mut self, tls: TlsListen) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The TLS settings, when the server listens for TLS.
    pub fn tls_listen(&self) -> Option<&TlsListen> {
        self.tls.as_ref()
    }

    /// Requires `password` of clients (`requirepass`) and uses it with a primary
    /// (`masterauth`); [`Options::url`] then holds it.
    pub fn password(mut self, password: &str) -> Self {
        self.password = Some(password.to_owned());
        self.extra_args
            .extend(["--requirepass", password, "--masterauth", password].map(str::to_owned));
        self
    }

    /// More arguments as they are (`--replicaof 127.0.0.1 6379`).
    pub fn args(mut self, args: &[&str]) -> Self {
        self.extra_args.extend(args.iter().map(|a| (*a).to_owned()));
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

    /// The URL clients and tiers are given: `redis+unix://…`, `redis://127.0.0.1:PORT`
    /// or, for a TCP server with TLS, `rediss://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        let auth = self.password.as_ref().map(|p| format!(":{p}@")).unwrap_or_default();
        match (&self.listen, &self.tls) {
            (Listen::UnixSocket(socket), _) => match &self.password {
                Some(password) => format!("redis+unix://{}?pass={password}", socket.display()),
                None => format!("redis+unix://{}", socket.display()),
            },
            (Listen::Tcp(port), None) => format!("redis://{auth}127.0.0.1:{port}"),
            (Listen::Tcp(_), Some(tls)) => format!("rediss://{auth}127.0.0.1:{}", tls.port),
        }
    }

    /// A client for the harness's own checks (with the test CA when over TLS).
    pub fn client(&self) -> redis::RedisResult<redis::Client> {
        match (&self.listen, &self.tls) {
            (Listen::Tcp(_), Some(tls)) => redis::Client::build_with_tls(self.url(), tls.client_certificates()),
            _ => redis::Client::open(self.url()),
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
                // With TLS, the port given is the TLS port and there is no plain one.
                let plain = if self.tls.is_some() { 0 } else { *port };
                command.args(["--port", &plain.to_string(), "--bind", "127.0.0.1"]);
            }
        }
        if let Some(tls) = &self.tls {
            command
                .args(["--tls-port", &tls.port.to_string()])
                .arg("--tls-cert-file")
                .arg(&tls.cert)
                .arg("--tls-key-file")
                .arg(&tls.key)
                .arg("--tls-ca-cert-file")
                .arg(&tls.ca)
                .args([
                    "--tls-auth-clients",
                    if tls.require_client_cert { "yes" } else { "optional" },
                ]);
            if self.cluster_node_timeout.is_some() {
                command.args(["--tls-cluster", "yes", "--tls-replication", "yes"]);
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
            if self.client().is_ok_and(|client| answers(&client, process.pid())) {
                return Ok(process);
            }
            if Instant::now() >= deadline {
                return Err(StartError::NotReady { within });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether the server `client` connects to answers `PING` and is the process `pid`.
fn answers(client: &redis::Client, pid: u32) -> bool {
    let Ok(mut connection) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
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
        let client = options.client().unwrap();
        assert!(answers(&client, process.pid()));
        let pid = process.pid();
        process.kill();
        assert!(!answers(&client, pid));
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
