//! The Redis under a [`System`]: one `redis-server`, or a 3-primary Redis Cluster with
//! `EG_TEST_REDIS=cluster` (`just test-cluster` runs the areas that do not stop Redis
//! that way); or, chosen with [`Options::redis`](super::Options::redis), one reached
//! over TLS, a Cluster over TLS, one reached as a restricted ACL user, or a primary
//! and replica behind three sentinels ([`Redis`]). Tests look into it with `redis-cli`, and the outage tests stop and restart
//! the single server.

use eg_testkit::sentinel::MASTER_NAME;
use eg_testkit::tls::TestCa;
use eg_testkit::{RedisCluster, RedisSentinel, RedisServer};

use super::System;

/// Partitions of every system under test.
pub(super) const PARTITIONS: u16 = 2;

/// The password of the ACL user (`Redis::AclUser`) and of Sentinel deployments.
pub const REDIS_PASSWORD: &str = "eg-Test-Pa55word";

/// Which Redis a [`System`] runs on, and how the tiers reach it.
#[derive(Debug, Clone, Default)]
pub enum Redis {
    /// One server, or a Cluster with `EG_TEST_REDIS=cluster`.
    #[default]
    FromEnvironment,
    /// One server reached over TLS (`rediss://`, a CA made for the test in
    /// `EG__REDIS__TLS_CA_FILE`).
    Tls,
    /// A 3-primary Cluster, every node reached over TLS.
    TlsCluster,
    /// One server reached as the ACL user `eg` with exactly `rule` (the arguments of
    /// `ACL SETUSER eg` after the user's name), through `EG__REDIS__USERNAME` / `PASSWORD`.
    AclUser(String),
    /// A primary, a replica and three sentinels, found through the sentinels; the data
    /// nodes and the sentinels each with a password.
    Sentinel,
}

/// The sentinels' own password (`Redis::Sentinel`).
pub const SENTINEL_PASSWORD: &str = "eg-Sentinel-Pa55word";

/// The Redis under a system and the settings that point the tiers at it.
pub(super) struct Backend {
    kind: Kind,
    /// `EG__REDIS__…` for the tiers.
    env: Vec<(&'static str, String)>,
    tls: eg_store::TlsFiles,
    /// The test CA's files, kept while the system runs.
    _files: Option<(tempfile::TempDir, TestCa)>,
}

enum Kind {
    Server(RedisServer),
    Cluster(RedisCluster),
    Sentinel(RedisSentinel),
}

impl Backend {
    pub(super) fn start(redis: &Redis) -> Self {
        match redis {
            Redis::FromEnvironment => match std::env::var("EG_TEST_REDIS").as_deref() {
                Ok("cluster") => Self::plain(Kind::Cluster(RedisCluster::start(3, 0))),
                Ok("server") | Err(_) => Self::plain(Kind::Server(RedisServer::start())),
                Ok(other) => panic!("EG_TEST_REDIS={other:?}: expected `server` or `cluster`"),
            },
            Redis::Tls => {
                let (dir, ca) = test_ca();
                let server = RedisServer::start_tls(&ca, false);
                let env = vec![
                    ("EG__REDIS__URL", server.tls_url()),
                    ("EG__REDIS__TLS_CA_FILE", ca.ca.display().to_string()),
                ];
                Self::with_ca(Kind::Server(server), env, dir, ca)
            }
            Redis::TlsCluster => {
                let (dir, ca) = test_ca();
                let cluster = RedisCluster::start_tls(3, 0, &ca);
                let env = vec![
                    ("EG__REDIS__CLUSTER_NODES", cluster.nodes_setting()),
                    ("EG__REDIS__TLS_CA_FILE", ca.ca.display().to_string()),
                ];
                Self::with_ca(Kind::Cluster(cluster), env, dir, ca)
            }
            Redis::AclUser(rule) => {
                let server = RedisServer::start();
                let mut args = vec!["ACL", "SETUSER", "eg"];
                let password = format!(">{REDIS_PASSWORD}");
                args.extend(rule.split_whitespace().map(
                    |part| {
                        if part.starts_with('>') { password.as_str() } else { part }
                    },
                ));
                eg_testkit::redis_cli(&["-s", &server.socket().display().to_string()], &args);
                let env = vec![
                    ("EG__REDIS__URL", server.url()),
                    ("EG__REDIS__USERNAME", "eg".to_owned()),
                    ("EG__REDIS__PASSWORD", REDIS_PASSWORD.to_owned()),
                ];
                Self {
                    kind: Kind::Server(server),
                    env,
                    tls: eg_store::TlsFiles::default(),
                    _files: None,
                }
            }
            Redis::Sentinel => {
                let sentinel = RedisSentinel::start(REDIS_PASSWORD, SENTINEL_PASSWORD);
                let env = vec![
                    ("EG__REDIS__SENTINEL_NODES", sentinel.nodes_setting()),
                    ("EG__REDIS__SENTINEL_MASTER", MASTER_NAME.to_owned()),
                    ("EG__REDIS__SENTINEL_PASSWORD", SENTINEL_PASSWORD.to_owned()),
                    ("EG__REDIS__PASSWORD", REDIS_PASSWORD.to_owned()),
                ];
                Self {
                    kind: Kind::Sentinel(sentinel),
                    env,
                    tls: eg_store::TlsFiles::default(),
                    _files: None,
                }
            }
        }
    }

    fn plain(kind: Kind) -> Self {
        let env = match &kind {
            Kind::Server(server) => vec![("EG__REDIS__URL", server.url())],
            Kind::Cluster(cluster) => vec![("EG__REDIS__CLUSTER_NODES", cluster.nodes_setting())],
            Kind::Sentinel(sentinel) => vec![("EG__REDIS__SENTINEL_NODES", sentinel.nodes_setting())],
        };
        Self {
            kind,
            env,
            tls: eg_store::TlsFiles::default(),
            _files: None,
        }
    }

    fn with_ca(kind: Kind, env: Vec<(&'static str, String)>, dir: tempfile::TempDir, ca: TestCa) -> Self {
        Self {
            kind,
            env,
            tls: eg_store::TlsFiles {
                ca_file: Some(ca.ca.clone()),
                ..eg_store::TlsFiles::default()
            },
            _files: Some((dir, ca)),
        }
    }

    /// The settings that point the tiers at it.
    pub(super) fn settings(&self) -> Vec<(&'static str, String)> {
        self.env.clone()
    }

    /// How eg's own store connects to it (to read what eg keeps there, as egctl would):
    /// a single server through its unix socket, as its default user.
    pub(super) fn store_settings(&self) -> eg_store::RedisSettings {
        let (url, cluster_nodes) = match &self.kind {
            Kind::Server(server) => (server.url(), Vec::new()),
            Kind::Cluster(cluster) => (String::new(), cluster.urls()),
            Kind::Sentinel(_) => (String::new(), Vec::new()),
        };
        let tls = match &self.kind {
            Kind::Server(_) | Kind::Sentinel(_) => eg_store::TlsFiles::default(),
            Kind::Cluster(_) => self.tls.clone(),
        };
        let (sentinel, credentials) = match &self.kind {
            Kind::Sentinel(sentinel) => (
                Some(eg_store::SentinelSettings {
                    nodes: sentinel.nodes_setting().split(',').map(str::to_owned).collect(),
                    master_name: MASTER_NAME.to_owned(),
                    credentials: eg_store::Credentials {
                        username: None,
                        password: Some(SENTINEL_PASSWORD.to_owned()),
                    },
                }),
                eg_store::Credentials {
                    username: None,
                    password: Some(REDIS_PASSWORD.to_owned()),
                },
            ),
            _ => (None, eg_store::Credentials::default()),
        };
        eg_store::RedisSettings {
            url,
            cluster_nodes,
            sentinel,
            credentials,
            tls,
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
        match &mut self.kind {
            Kind::Server(server) => server,
            _ => panic!("this test stops or restarts Redis: it needs one server"),
        }
    }
}

fn test_ca() -> (tempfile::TempDir, TestCa) {
    let dir = tempfile::Builder::new()
        .prefix("eg-test-ca-")
        .tempdir()
        .expect("CA dir");
    let ca = TestCa::generate(dir.path(), "eg-test");
    (dir, ca)
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
        match &self.redis.kind {
            Kind::Server(_) => {
                self.redis_cli(&["FLUSHALL"]);
            }
            Kind::Cluster(cluster) => {
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
            Kind::Sentinel(_) => panic!("flush_redis needs one Redis server or a cluster"),
        }
    }

    /// The single Redis server under this system (tests that signal or restart it).
    pub fn redis(&self) -> &RedisServer {
        match &self.redis.kind {
            Kind::Server(server) => server,
            _ => panic!("this test needs one Redis server"),
        }
    }

    /// The Sentinel deployment under this system (tests that fail its primary over).
    pub fn sentinel(&mut self) -> &mut RedisSentinel {
        match &mut self.redis.kind {
            Kind::Sentinel(sentinel) => sentinel,
            _ => panic!("this test needs a Sentinel deployment (Redis::Sentinel)"),
        }
    }

    /// The value of `setting` (`EG__REDIS__URL`, …) the tiers were given for this
    /// system's Redis.
    pub fn redis_tier_setting(&self, setting: &str) -> String {
        self.redis
            .env
            .iter()
            .find(|(name, _)| *name == setting)
            .map(|(_, value)| value.clone())
            .unwrap_or_else(|| panic!("the tiers were not given {setting}"))
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
        match &self.redis.kind {
            Kind::Server(server) => eg_testkit::redis_cli(&["-s", &server.socket().display().to_string()], args),
            Kind::Cluster(cluster) => cluster.cli(args),
            Kind::Sentinel(sentinel) => sentinel.cli(args),
        }
    }

    /// Every key matching `pattern` (on a cluster, of every node).
    pub fn redis_keys(&self, pattern: &str) -> Vec<String> {
        let listed = match &self.redis.kind {
            Kind::Server(_) | Kind::Sentinel(_) => self.redis_cli(&["KEYS", pattern]),
            Kind::Cluster(cluster) => cluster.keys(pattern).join("\n"),
        };
        listed.lines().filter(|k| !k.is_empty()).map(str::to_owned).collect()
    }
}
