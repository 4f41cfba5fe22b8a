//! A real Redis Cluster for tests: `redis-server` processes on loopback ports (started by
//! [`crate::redis_server`]; each is SIGKILLed when the cluster is dropped), joined by
//! `redis-cli --cluster create` (contiguous equal slot ranges, as in production), with a
//! short node timeout so a killed primary's replica takes over within seconds. Started
//! with [`RedisCluster::start_tls`], every node speaks TLS only (clients, cluster bus and
//! replication) with the certificates of a [`crate::tls::TestCa`].

use crate::redis_server::{self, Process, StartError, TlsListen};
use crate::tls::TestCa;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a node may be unreachable before the cluster fails it over.
const NODE_TIMEOUT: Duration = Duration::from_secs(1);

struct Node {
    port: u16,
    process: Option<Process>,
}

pub struct RedisCluster {
    // Before `dir`: the nodes are killed before their files are removed.
    nodes: Vec<Node>,
    /// TLS of every node (its port aside), when the cluster speaks TLS.
    tls: Option<TlsListen>,
    dir: tempfile::TempDir,
}

impl RedisCluster {
    /// Starts `primaries` primaries with `replicas` replicas each, joined and serving
    /// every slot.
    pub fn start(primaries: usize, replicas: usize) -> Self {
        Self::start_with(primaries, replicas, None)
    }

    /// As [`RedisCluster::start`], every node speaking TLS only with `ca`'s certificates.
    pub fn start_tls(primaries: usize, replicas: usize, ca: &TestCa) -> Self {
        Self::start_with(primaries, replicas, Some(TlsListen::new(0, ca)))
    }

    fn start_with(primaries: usize, replicas: usize, tls: Option<TlsListen>) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("eg-redis-cluster-")
            .tempdir()
            .expect("temp dir for the cluster");
        let count = primaries * (1 + replicas);
        let mut nodes: Vec<Node> = Vec::with_capacity(count);
        while nodes.len() < count {
            let taken: Vec<u16> = nodes.iter().map(|n| n.port).collect();
            nodes.push(start_node(dir.path(), &taken, tls.as_ref()));
        }
        let cluster = Self { nodes, tls, dir };
        let mut create = Command::new("redis-cli");
        create.args(cluster.tls_args()).arg("--cluster").arg("create");
        for node in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        let output = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            output.status.success(),
            "redis-cli --cluster create: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        cluster.wait_until_healthy(replicas);
        cluster
    }

    fn wait_until_healthy(&self, replicas: usize) {
        for node in &self.nodes {
            wait_until(
                Duration::from_secs(20),
                &format!("node {} sees the cluster ok", node.port),
                || {
                    self.node(node.port, &["CLUSTER", "INFO"])
                        .is_some_and(|info| info.contains("cluster_state:ok"))
                },
            );
        }
        if replicas > 0 {
            wait_until(Duration::from_secs(20), "every replica is in sync", || {
                self.nodes.iter().all(|node| {
                    self.node(node.port, &["INFO", "replication"])
                        .is_some_and(|info| info.contains("role:master") || info.contains("master_link_status:up"))
                })
            });
        }
    }

    /// `redis://127.0.0.1:PORT` of every node, comma-separated: `EG__REDIS__CLUSTER_NODES`.
    pub fn nodes_setting(&self) -> String {
        self.urls().join(",")
    }

    /// `redis://127.0.0.1:PORT` (`rediss://` with TLS) of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| self.url_of(n.port)).collect()
    }

    fn url_of(&self, port: u16) -> String {
        let scheme = if self.tls.is_some() { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{port}")
    }

    /// `redis-cli`'s TLS arguments (none without TLS).
    fn tls_args(&self) -> Vec<String> {
        self.tls.as_ref().map(TlsListen::cli_args).unwrap_or_default()
    }

    /// Runs one command on the node on `port` itself; `None` when it fails.
    fn node(&self, port: u16, args: &[&str]) -> Option<String> {
        cli(&self.tls_args(), port, args)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs one command with `redis-cli -c` (following redirects) through a live node.
    pub fn cli(&self, args: &[&str]) -> String {
        let node = self
            .nodes
            .iter()
            .find(|n| n.process.is_some())
            .expect("a running cluster node");
        let port = node.port.to_string();
        let tls = self.tls_args();
        let mut connection: Vec<&str> = tls.iter().map(String::as_str).collect();
        connection.extend(["-c", "-p", port.as_str()]);
        crate::redis_cli(&connection, args)
    }

    /// Every key matching `pattern`, from every running node.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.process.is_some())
            .filter_map(|n| self.node(n.port, &["KEYS", pattern]))
            .flat_map(|listed| listed.lines().map(str::to_owned).collect::<Vec<_>>())
            .filter(|k| !k.is_empty())
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// Runs one command on the node on `port` itself (no redirects).
    pub fn node_cli(&self, port: u16, args: &[&str]) -> String {
        self.node(port, args)
            .unwrap_or_else(|| panic!("redis-cli -p {port} {args:?} failed"))
    }

    /// A synchronous cluster connection for assertions, seeded only with running nodes
    /// (a killed node's port may already serve another test's Redis).
    pub fn client(&self) -> redis::cluster::ClusterConnection {
        let running: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.process.is_some())
            .map(|n| self.url_of(n.port))
            .collect();
        let mut builder = redis::cluster::ClusterClientBuilder::new(running);
        if let Some(tls) = &self.tls {
            builder = builder.certs(tls.client_certificates());
        }
        builder
            .build()
            .and_then(|c| c.get_connection())
            .expect("connect to the test cluster")
    }

    /// The port of the primary serving `slot` now.
    pub fn primary_of(&self, slot: u16) -> u16 {
        self.try_primary_of(slot)
            .unwrap_or_else(|| panic!("no primary serves slot {slot}:\n{}", self.cli(&["CLUSTER", "NODES"])))
    }

    /// The port of the primary serving `slot`, if a healthy one does.
    fn try_primary_of(&self, slot: u16) -> Option<u16> {
        let nodes = self.cli(&["CLUSTER", "NODES"]);
        nodes
            .lines()
            .filter(|line| line.contains("master") && !line.contains("fail"))
            .find_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let port: u16 = fields.get(1)?.split(['@', ':']).nth(1)?.parse().ok()?;
                let serves = fields.iter().skip(8).any(|range| match range.split_once('-') {
                    Some((low, high)) => {
                        low.parse::<u16>().is_ok_and(|l| l <= slot) && high.parse::<u16>().is_ok_and(|h| slot <= h)
                    }
                    None => range.parse::<u16>().is_ok_and(|s| s == slot),
                });
                serves.then_some(port)
            })
    }

    /// The port of a replica of the primary on `primary`.
    pub fn replica_of(&self, primary: u16) -> u16 {
        let nodes = self.cli(&["CLUSTER", "NODES"]);
        let lines: Vec<Vec<&str>> = nodes.lines().map(|l| l.split_whitespace().collect()).collect();
        let port_of = |fields: &Vec<&str>| -> Option<u16> { fields.get(1)?.split(['@', ':']).nth(1)?.parse().ok() };
        let primary_id = lines
            .iter()
            .find(|f| port_of(f) == Some(primary))
            .and_then(|f| f.first().copied())
            .unwrap_or_else(|| panic!("no node on port {primary}:\n{nodes}"));
        lines
            .iter()
            .find(|f| f.get(3) == Some(&primary_id))
            .and_then(port_of)
            .unwrap_or_else(|| panic!("the primary on port {primary} has no replica:\n{nodes}"))
    }

    /// SIGSTOPs (`true`) or SIGCONTs (`false`) the node on `port`: a stopped replica
    /// falls behind its primary without the cluster noticing at once.
    pub fn freeze(&self, port: u16, frozen: bool) {
        let node = self.nodes.iter().find(|n| n.port == port).expect("a node on that port");
        let pid = node.process.as_ref().expect("a running node").pid().to_string();
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let status = Command::new("kill").args([signal, &pid]).status().expect("run kill");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// SIGKILLs the node on `port` (no shutdown save).
    pub fn kill(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("no node on port {port}"));
        if let Some(process) = node.process.take() {
            process.kill();
        }
    }

    /// Waits until a primary other than `old` serves `slot` and the cluster is ok again.
    pub fn wait_for_failover(&self, slot: u16, old: u16) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = self.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok");
            if let Some(port) = self.try_primary_of(slot).filter(|port| *port != old && ok) {
                return port;
            }
            assert!(
                Instant::now() < deadline,
                "no replica took over slot {slot} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `redis-cli` against one node, `options` first (TLS files, a password); `None` when it
/// fails or outlasts 10 s.
pub(crate) fn cli(options: &[String], port: u16, args: &[&str]) -> Option<String> {
    // Under coreutils' `timeout`: a port held by something that accepts and never
    // answers must not hang the test (redis-cli 7.0 has no timeout of its own).
    let output = Command::new("timeout")
        .args(["10", "redis-cli"])
        .args(options)
        .args(["-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn wait_until(timeout: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts one node on a free loopback port (its bus port, port + 10000, free too). The
/// port is free when chosen but not held: a parallel test may bind it first, so a node
/// that exits, or does not answer as itself, is retried on another port.
fn start_node(dir: &Path, taken: &[u16], tls: Option<&TlsListen>) -> Node {
    for _ in 0..10 {
        let port = free_cluster_port(taken);
        let mut options = redis_server::Options::tcp(dir.join(port.to_string()), port).cluster(NODE_TIMEOUT);
        if let Some(tls) = tls {
            options = options.tls(TlsListen { port, ..tls.clone() });
        }
        let node = options.start(Duration::from_secs(10));
        match node {
            Ok(process) => {
                return Node {
                    port,
                    process: Some(process),
                };
            }
            Err(StartError::Exited { .. } | StartError::NotReady { .. }) => continue,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("no cluster node could be started on a free port (10 tries)");
}

/// A loopback port that is free, as is its cluster bus port (port + 10000).
fn free_cluster_port(taken: &[u16]) -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        let port = listener.local_addr().expect("local address").port();
        if port > 55_000 || taken.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}
