//! The Redis under a [`System`]: one `redis-server`, or a 3-primary Redis Cluster with
//! `EG_TEST_REDIS=cluster` (`just test-cluster` runs the areas that do not stop Redis
//! that way). Tests look into it with `redis-cli`, and the outage tests stop and restart
//! the single server.

use eg_testkit::{RedisCluster, RedisServer};

use super::System;

/// Partitions of every system under test.
pub(super) const PARTITIONS: u16 = 2;

/// The Redis under a system: one server, or a cluster (`EG_TEST_REDIS=cluster`).
pub(super) enum Backend {
    Server(RedisServer),
    Cluster(RedisCluster),
}

impl Backend {
    pub(super) fn from_environment() -> Self {
        match std::env::var("EG_TEST_REDIS").as_deref() {
            Ok("cluster") => Self::Cluster(RedisCluster::start(3, 0)),
            Ok("server") | Err(_) => Self::Server(RedisServer::start()),
            Ok(other) => panic!("EG_TEST_REDIS={other:?}: expected `server` or `cluster`"),
        }
    }

    /// The setting that points the tiers at it.
    pub(super) fn setting(&self) -> (&'static str, String) {
        match self {
            Self::Server(server) => ("EG__REDIS__URL", server.url()),
            Self::Cluster(cluster) => ("EG__REDIS__CLUSTER_NODES", cluster.nodes_setting()),
        }
    }

    /// How eg's own store connects to it (to read what eg keeps there, as egctl would).
    pub(super) fn store_settings(&self) -> eg_store::RedisSettings {
        let (url, cluster_nodes) = match self {
            Self::Server(server) => (server.url(), Vec::new()),
            Self::Cluster(cluster) => (String::new(), cluster.urls()),
        };
        eg_store::RedisSettings {
            url,
            cluster_nodes,
            prefix: "eg".into(),
            partitions: PARTITIONS,
            pool_size: 2,
            command_timeout: std::time::Duration::from_secs(5),
            connect_timeout: std::time::Duration::from_secs(5),
            replica_acks: 0,
            replica_ack_timeout: std::time::Duration::from_secs(1),
        }
    }

    fn server(&mut self) -> &mut RedisServer {
        match self {
            Self::Server(server) => server,
            Self::Cluster(_) => panic!("this test stops or restarts Redis: it needs one server, not a cluster"),
        }
    }
}

impl System {
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

    /// Empties Redis (`FLUSHALL` on the server, or on every primary of the cluster) with
    /// the tiers left running: Redis lost its data.
    pub fn flush_redis(&self) {
        match &self.redis {
            Backend::Server(_) => {
                self.redis_cli(&["FLUSHALL"]);
            }
            Backend::Cluster(cluster) => {
                for url in cluster.urls() {
                    let port = url
                        .rsplit(':')
                        .next()
                        .and_then(|p| p.parse().ok())
                        .expect("a node's port");
                    if cluster.node_cli(port, &["ROLE"]).starts_with("master") {
                        cluster.node_cli(port, &["FLUSHALL"]);
                    }
                }
            }
        }
    }

    /// The single Redis server under this system (tests that signal or restart it).
    pub fn redis(&self) -> &RedisServer {
        match &self.redis {
            Backend::Server(server) => server,
            Backend::Cluster(_) => panic!("this test needs one Redis server, not a cluster"),
        }
    }

    /// eg's store on this system's Redis, for what the tiers keep there (dead-letter
    /// destination problems, say).
    pub fn store(&self) -> eg_store::Store {
        eg_store::Store::connect(&self.redis.store_settings()).expect("connect to the system's Redis")
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
}
