//! Redis Sentinel for tests, as the common Helm charts deploy it: a primary and a replica
//! (`redis-server`, started by [`crate::redis_server`], both with a password) and three
//! `redis-sentinel` processes (with a password of their own) watching the primary as
//! [`MASTER_NAME`], all on free loopback ports in one temp dir. A primary that stops
//! answering for a second is failed over to the replica within seconds.

use crate::ports::free_port;
use crate::redis_server::{Options, Process};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The name the sentinels monitor the primary under (`EG__REDIS__SENTINEL_MASTER`).
pub const MASTER_NAME: &str = "egprimary";

/// How long the primary may not answer before the sentinels fail it over.
const DOWN_AFTER: Duration = Duration::from_secs(1);

struct DataNode {
    port: u16,
    options: Options,
    process: Option<Process>,
}

struct SentinelProcess {
    port: u16,
    child: Child,
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct RedisSentinel {
    // Before `dir`: processes are killed before their files are removed.
    sentinels: Vec<SentinelProcess>,
    data: Vec<DataNode>,
    password: String,
    sentinel_password: String,
    dir: tempfile::TempDir,
}

impl RedisSentinel {
    /// A primary, one replica and three sentinels, the replica in sync and every sentinel
    /// knowing the replica and the other sentinels (so a failover can be agreed on).
    pub fn start(password: &str, sentinel_password: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("eg-redis-sentinel-")
            .tempdir()
            .expect("temp dir for sentinel");
        let primary_port = free_port();
        let primary = data_node(dir.path(), primary_port, password, None);
        let replica_port = free_port();
        let replica = data_node(dir.path(), replica_port, password, Some(primary_port));
        let mut this = Self {
            sentinels: Vec::new(),
            data: vec![primary, replica],
            password: password.to_owned(),
            sentinel_password: sentinel_password.to_owned(),
            dir,
        };
        this.wait_until("the replica is in sync", Duration::from_secs(20), |s| {
            s.replicas_in_sync()
        });
        for _ in 0..3 {
            let sentinel = this.start_sentinel(primary_port);
            this.sentinels.push(sentinel);
        }
        this.wait_until(
            "every sentinel knows the replica and the two other sentinels",
            Duration::from_secs(30),
            |s| {
                s.sentinels.iter().all(|sentinel| {
                    s.sentinel_count(sentinel.port, "SENTINELS") == Some(2)
                        && s.sentinel_count(sentinel.port, "REPLICAS") == Some(1)
                })
            },
        );
        this
    }

    fn start_sentinel(&self, primary_port: u16) -> SentinelProcess {
        let port = free_port();
        let config = self.dir.path().join(format!("sentinel-{port}.conf"));
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndir {dir}\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2\n\
             sentinel auth-pass {MASTER_NAME} {password}\n\
             sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
             sentinel failover-timeout {MASTER_NAME} 10000\n\
             requirepass {sentinel_password}\nsentinel sentinel-pass {sentinel_password}\n",
            dir = self.dir.path().display(),
            password = self.password,
            down = DOWN_AFTER.as_millis(),
            sentinel_password = self.sentinel_password,
        );
        std::fs::write(&config, text).expect("write the sentinel config");
        let log = std::fs::File::create(self.dir.path().join(format!("sentinel-{port}.log"))).expect("sentinel log");
        // redis-server in sentinel mode is redis-sentinel: Debian's redis-server package
        // is enough, with no redis-sentinel package to install.
        let child = Command::new("redis-server")
            .arg(&config)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("sentinel log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run redis-server --sentinel ({e}); install it (apt-get install redis-server)")
            });
        let sentinel = SentinelProcess { port, child };
        self.wait_until("a sentinel answers", Duration::from_secs(10), |s| {
            s.sentinel_count(port, "REPLICAS").is_some()
        });
        sentinel
    }

    /// `redis://127.0.0.1:PORT` of every sentinel, comma-separated: `EG__REDIS__SENTINEL_NODES`.
    pub fn nodes_setting(&self) -> String {
        self.sentinels
            .iter()
            .map(|s| format!("redis://127.0.0.1:{}", s.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The port of the primary, as the sentinels name it now.
    pub fn primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let mut conn = self.sentinel_connection(s.port)?;
            let (_, port): (String, u16) = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query(&mut conn)
                .ok()?;
            Some(port)
        })
    }

    /// The process id of the primary, while it runs.
    pub fn primary_pid(&self) -> Option<u32> {
        let port = self.primary_port()?;
        let node = self.data.iter().find(|n| n.port == port)?;
        node.process.as_ref().map(Process::pid)
    }

    /// SIGKILLs the primary; returns its port.
    pub fn kill_primary(&mut self) -> u16 {
        let port = self.primary_port().expect("the sentinels name a primary");
        let node = self
            .data
            .iter_mut()
            .find(|n| n.port == port)
            .expect("the primary is ours");
        if let Some(process) = node.process.take() {
            process.kill();
        }
        port
    }

    /// Waits until the sentinels name a primary other than `old`; returns its port.
    pub fn wait_for_failover(&self, old: u16) -> u16 {
        let mut new = None;
        self.wait_until("the sentinels promote the replica", Duration::from_secs(60), |s| {
            new = s.primary_port().filter(|port| *port != old);
            new.is_some()
        });
        new.expect("a new primary")
    }

    /// Starts the killed data node on `port` again, from its append-only file: the
    /// sentinels turn it into a replica of the new primary.
    pub fn restart(&mut self, port: u16) {
        let node = self
            .data
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a data node on that port");
        if node.process.is_none() {
            node.process = Some(
                node.options
                    // Loading a long append-only file on a busy machine takes a while.
                    .start(Duration::from_secs(60))
                    .unwrap_or_else(|e| panic!("{e}")),
            );
        }
    }

    /// Waits until every running data node other than the primary replicates from it.
    pub fn wait_replicas_in_sync(&self) {
        self.wait_until("the replicas are in sync", Duration::from_secs(60), |s| {
            s.replicas_in_sync()
        });
    }

    fn replicas_in_sync(&self) -> bool {
        self.data.iter().filter(|n| n.process.is_some()).all(|n| {
            self.data_cli(n.port, &["INFO", "replication"]).is_some_and(|info| {
                info.contains("role:master")
                    || (info.contains("master_link_status:up") && !info.contains("master_sync_in_progress:1"))
            })
        })
    }

    /// Runs one command on the primary (as the default user, with the password).
    pub fn cli(&self, args: &[&str]) -> String {
        let port = self.primary_port().expect("a primary");
        self.data_cli(port, args)
            .unwrap_or_else(|| panic!("redis-cli -p {port} {args:?} failed"))
    }

    fn data_cli(&self, port: u16, args: &[&str]) -> Option<String> {
        let auth = ["--no-auth-warning".to_owned(), "-a".to_owned(), self.password.clone()];
        crate::cluster::cli(&auth, port, args)
    }

    fn sentinel_connection(&self, port: u16) -> Option<redis::Connection> {
        let url = format!("redis://:{}@127.0.0.1:{port}", self.sentinel_password);
        let conn = redis::Client::open(url)
            .ok()?
            .get_connection_with_timeout(Duration::from_millis(500))
            .ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        Some(conn)
    }

    /// How many replicas or sentinels (`what`) the sentinel on `port` knows.
    fn sentinel_count(&self, port: u16, what: &str) -> Option<usize> {
        let mut conn = self.sentinel_connection(port)?;
        let known: Vec<redis::Value> = redis::cmd("SENTINEL")
            .arg(what)
            .arg(MASTER_NAME)
            .query(&mut conn)
            .ok()?;
        Some(known.len())
    }

    /// The last lines of every sentinel's and data node's log: the directory is removed
    /// with the deployment, so a timeout's message carries what explains it.
    fn log_tails(&self) -> String {
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return String::new();
        };
        let mut logs: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        let mut out = String::new();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("== {}\n", log.display()));
            for line in &lines[lines.len().saturating_sub(12)..] {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    fn wait_until(&self, what: &str, timeout: Duration, mut done: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + timeout;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting until {what}; the logs' last lines:\n{}",
                self.log_tails()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn data_node(dir: &Path, port: u16, password: &str, primary: Option<u16>) -> DataNode {
    // As docs/operations.md advises for Sentinel: a primary takes no write while no
    // replica is in sync, so a replica still loading or resyncing (which Sentinel may
    // promote when the primary stops answering) lacks nothing that was written.
    let mut options = Options::tcp(dir.join(port.to_string()), port)
        .password(password)
        .args(&["--min-replicas-to-write", "1", "--min-replicas-max-lag", "10"])
        .log(dir.join(format!("redis-{port}.log")));
    if let Some(primary) = primary {
        options = options.args(&["--replicaof", "127.0.0.1", &primary.to_string()]);
    }
    let process = options.start(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    DataNode {
        port,
        options,
        process: Some(process),
    }
}
