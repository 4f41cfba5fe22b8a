//! Connections to the deployment's Redis — one server or a Redis Cluster — and the checks
//! every tier makes when it starts.
//!
//! Every connection is multiplexed (concurrent commands share its socket, or one socket
//! per cluster node). The pool exists for commands that block (`XREADGROUP BLOCK`), which
//! would hold up everything queued behind them on a shared socket. Handing out a pooled
//! connection costs no round trip: a connection is dropped from the pool when a command
//! on it failed in a way that may have broken it, not checked with a `PING` on every use.

use crate::error::StoreError;
use crate::keyspace::{DEADLETTER_GROUP, DEPLOYMENTS, Keyspace, LAYOUT_VERSION, SENDERS_GROUP};
use crate::shared_link::SharedLink;
use deadpool::managed::{self, Metrics, Object, RecycleError, RecycleResult};
use redis::aio::ConnectionLike;
use redis::{AsyncCommands, Cmd, Pipeline, RedisError, RedisFuture, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use crate::target::{Credentials, Link, RedisSettings, SentinelSettings, Target, TlsFiles, redact_url};
pub use crate::tracked::{Tracked, breaks_connection};

pub struct Manager {
    target: Target,
}

impl managed::Manager for Manager {
    type Type = Tracked;
    type Error = RedisError;

    async fn create(&self) -> Result<Tracked, RedisError> {
        Ok(Tracked::new(self.target.open().await?))
    }

    async fn recycle(&self, conn: &mut Tracked, _: &Metrics) -> RecycleResult<RedisError> {
        if conn.is_broken() {
            return Err(RecycleError::message("a command failed on this connection"));
        }
        Ok(())
    }
}

pub type Pool = managed::Pool<Manager>;

/// A connection taken from the pool; returned to it when dropped.
pub struct Conn(Object<Manager>);

impl Conn {
    /// Runs `write` (a pipeline of writes to keys of `slot`) and then `WAIT replicas
    /// timeout` in one pipeline on one connection to the slot's primary; returns the
    /// writes' replies and how many replicas hold them. `WAIT` counts a connection's own
    /// writes, so the two must travel together: a `WAIT` sent separately could land on
    /// another connection (a reconnect, a failover) and confirm nothing.
    pub(crate) async fn write_and_wait(
        &mut self,
        slot: u16,
        write: &Pipeline,
        replicas: u16,
        timeout: Duration,
    ) -> Result<(Vec<Value>, u16), RedisError> {
        let mut pipe = write.clone();
        pipe.cmd("WAIT")
            .arg(replicas)
            .arg(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1));
        let sent: Result<Vec<Value>, RedisError> = match &mut self.0.link {
            Link::Single(c) => pipe.query_async(c).await,
            Link::Cluster(c) => {
                let route = redis::cluster_routing::Route::new(slot, redis::cluster_routing::SlotAddr::Master);
                let count = pipe.cmd_iter().count();
                c.route_pipeline(
                    pipe,
                    0,
                    count,
                    redis::cluster_routing::SingleNodeRoutingInfo::SpecificNode(route),
                )
                .await
            }
        };
        // Sent past `Tracked`, so noted here: a connection this broke (a failover, a
        // restart) must not go back into the pool.
        let mut replies = sent.inspect_err(|e| self.0.note(e))?;
        let acked = match replies.pop() {
            Some(value) => redis::from_redis_value(value)?,
            None => 0,
        };
        Ok((replies, acked))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

/// A handle on the deployment's Redis: the pool and the keyspace.
#[derive(Clone)]
pub struct Store {
    pub(crate) pool: Pool,
    /// The connection publish calls share (`crate::shared_link`).
    shared: Arc<SharedLink>,
    pub(crate) keys: Keyspace,
    /// Bounds a readiness check, so `/readyz` answers promptly even when Redis hangs.
    ping_timeout: Duration,
    cluster: bool,
    pub(crate) replica_acks: u16,
    pub(crate) replica_ack_timeout: Duration,
}

impl Store {
    pub fn connect(settings: &RedisSettings) -> Result<Self, StoreError> {
        let target = Target::new(settings)?;
        let cluster = target.is_cluster();
        let timeouts = managed::Timeouts {
            wait: Some(settings.connect_timeout),
            // A little past the connection's own timeout, so that one ends a slow
            // connection attempt first: its error says what went wrong.
            create: Some(settings.connect_timeout + Duration::from_millis(500)),
            recycle: Some(settings.connect_timeout),
        };
        let shared = Arc::new(SharedLink::new(target.clone()));
        let pool = Pool::builder(Manager { target })
            .max_size(settings.pool_size)
            .timeouts(timeouts)
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Layout(format!("cannot build the redis pool: {e}")))?;
        Ok(Self {
            pool,
            shared,
            keys: Keyspace::new(&settings.prefix, settings.partitions),
            ping_timeout: settings.connect_timeout,
            cluster,
            replica_acks: settings.replica_acks,
            replica_ack_timeout: settings.replica_ack_timeout,
        })
    }

    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    pub fn keys(&self) -> &Keyspace {
        &self.keys
    }

    pub(crate) async fn conn(&self) -> Result<Conn, StoreError> {
        Ok(Conn(self.pool.get().await?))
    }

    /// A handle on the connection that non-blocking calls of the publish path share, so
    /// concurrent calls travel together (`crate::shared_link`). Never for a blocking command.
    pub(crate) async fn shared(&self) -> Result<Tracked, StoreError> {
        Ok(self.shared.get().await?)
    }

    /// A pooled connection and a shared handle on it, for running commands concurrently:
    /// each clone of the handle pipelines on the same socket(s). Used where one pipeline
    /// would span several hash tags, which a cluster refuses. Keep the connection until
    /// the commands are done, so the pool does not hand it to a blocking read meanwhile.
    pub(crate) async fn link(&self) -> Result<(Conn, Link), StoreError> {
        let conn = self.conn().await?;
        let link = conn.0.link.clone();
        Ok((conn, link))
    }

    /// Answers whether Redis is reachable now (for `/readyz`), within the connect timeout.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let ping = async {
            let mut conn = self.conn().await?;
            redis::cmd("PING").query_async::<()>(&mut conn).await?;
            Ok(())
        };
        tokio::time::timeout(self.ping_timeout, ping)
            .await
            .map_err(|_| StoreError::Timeout(self.ping_timeout))?
    }

    /// Refuses to start a deployment by mistake: when this Redis holds deployments under
    /// other prefixes ([`DEPLOYMENTS`]) and none under this one, the prefix is most
    /// likely mistyped, and a tier started under it would run, report ready and deliver
    /// nothing. `new_deployment` (`EG__REDIS__NEW_DEPLOYMENT`) says a new prefix is meant.
    /// An empty Redis is a deployment's first start and passes; so does a prefix whose
    /// partition count is recorded.
    pub async fn check_prefix(&self, new_deployment: bool) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let recorded: bool = conn.exists(self.keys.layout()).await?;
        if recorded || new_deployment {
            return Ok(());
        }
        let deployments: BTreeMap<String, String> = conn.hgetall(DEPLOYMENTS).await?;
        let others: Vec<String> = deployments
            .iter()
            .filter(|(prefix, _)| prefix.as_str() != self.keys.prefix())
            .map(|(prefix, partitions)| format!("{prefix:?} ({partitions} partitions)"))
            .collect();
        if others.is_empty() {
            return Ok(());
        }
        Err(StoreError::Layout(format!(
            "this Redis holds no eg deployment under EG__REDIS__PREFIX={:?}, the prefix this process has, \
             but deployments under {}: set EG__REDIS__PREFIX to the prefix of the deployment this tier \
             belongs to (every tier must agree), or, to start a new deployment beside them, start its \
             first tier with EG__REDIS__NEW_DEPLOYMENT=true",
            self.keys.prefix(),
            others.join(", ")
        )))
    }

    /// Records the partition count (and this prefix among the [`DEPLOYMENTS`]) when
    /// missing and refuses to run with another count: a tier reading fewer partitions
    /// than ingress writes would strand deliveries. Every tier calls it at start and on
    /// each heartbeat, so a Redis that lost its data gets the record back while tiers
    /// run, and the next tier to start is checked against it.
    pub async fn check_layout(&self) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let wanted = self.keys.partitions();
        let (stored, layout): (u16, String) = crate::scripts::LAYOUT
            .key(self.keys.layout())
            .key(self.keys.layout_version())
            .arg(wanted)
            .arg(LAYOUT_VERSION)
            .invoke_async(&mut conn)
            .await?;
        if layout != LAYOUT_VERSION {
            return Err(StoreError::Layout(format!(
                "this Redis holds eg data in another key layout ({:?}, this build uses {LAYOUT_VERSION:?}): \
                 drain it with the build that wrote it, or start this one on an empty Redis",
                if layout.is_empty() {
                    "partition tags {eg:pN}"
                } else {
                    layout.as_str()
                }
            )));
        }
        if stored != wanted {
            return Err(StoreError::Layout(format!(
                "this deployment's Redis was set up with {stored} partitions but this process is configured with {wanted}; \
                 set EG__REDIS__PARTITIONS={stored} (every tier must agree)"
            )));
        }
        let _: i64 = conn.hset(DEPLOYMENTS, self.keys.prefix(), wanted).await?;
        Ok(())
    }

    /// Creates the consumer groups (and their streams) that do not exist yet. Safe to
    /// call any time; tiers call it at start and whenever Redis answers `NOGROUP`.
    pub async fn ensure_groups(&self) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        for p in self.keys.all_partitions() {
            for (stream, group) in [(p.ready(), SENDERS_GROUP), (p.deadletter(), DEADLETTER_GROUP)] {
                let created: Result<(), redis::RedisError> = redis::cmd("XGROUP")
                    .arg("CREATE")
                    .arg(&stream)
                    .arg(group)
                    .arg("0")
                    .arg("MKSTREAM")
                    .query_async(&mut conn)
                    .await;
                match created {
                    Ok(()) => {}
                    Err(e) if e.code() == Some("BUSYGROUP") => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }
}
