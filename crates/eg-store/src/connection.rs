//! The connection pool and the checks every tier makes when it starts.

use crate::error::StoreError;
use crate::keyspace::{DEADLETTER_GROUP, Keyspace, SENDERS_GROUP};
use deadpool_redis::{Manager, Pool, Runtime};
use redis::AsyncConnectionConfig;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RedisSettings {
    pub url: String,
    pub prefix: String,
    pub partitions: u16,
    pub pool_size: usize,
    /// How long a command may take before it fails; must exceed the longest `BLOCK`.
    pub command_timeout: Duration,
    /// How long to wait for a connection (from the pool, or a new one) before failing.
    pub connect_timeout: Duration,
}

/// A handle on the deployment's Redis: the pool and the keyspace.
#[derive(Clone)]
pub struct Store {
    pub(crate) pool: Pool,
    pub(crate) keys: Keyspace,
    /// Bounds a readiness check, so `/readyz` answers promptly even when Redis hangs.
    ping_timeout: Duration,
}

impl Store {
    pub fn connect(settings: &RedisSettings) -> Result<Self, StoreError> {
        let connection = AsyncConnectionConfig::new()
            .set_response_timeout(Some(settings.command_timeout))
            .set_connection_timeout(Some(settings.connect_timeout));
        let manager = Manager::new_with_config(settings.url.as_str(), connection)?;
        let timeouts = deadpool_redis::Timeouts {
            wait: Some(settings.connect_timeout),
            create: Some(settings.connect_timeout),
            recycle: Some(settings.connect_timeout),
        };
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size)
            .timeouts(timeouts)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Layout(format!("cannot build the redis pool: {e}")))?;
        Ok(Self {
            pool,
            keys: Keyspace::new(&settings.prefix, settings.partitions),
            ping_timeout: settings.connect_timeout,
        })
    }

    pub fn keys(&self) -> &Keyspace {
        &self.keys
    }

    pub(crate) async fn conn(&self) -> Result<deadpool_redis::Connection, StoreError> {
        Ok(self.pool.get().await?)
    }

    /// Answers whether Redis is reachable now (for `/readyz`), within the connect timeout.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let ping = async {
            let mut conn = self.conn().await?;
            redis::cmd("PING").query_async::<()>(&mut *conn).await?;
            Ok(())
        };
        tokio::time::timeout(self.ping_timeout, ping)
            .await
            .map_err(|_| StoreError::Timeout(self.ping_timeout))?
    }

    /// Records the partition count on first start and refuses to run with another one:
    /// a tier reading fewer partitions than ingress writes would strand deliveries.
    pub async fn check_layout(&self) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let key = self.keys.layout();
        let wanted = self.keys.partitions();
        let _: bool = redis::cmd("SET")
            .arg(&key)
            .arg(wanted)
            .arg("NX")
            .query_async(&mut *conn)
            .await
            .map(|v: Option<String>| v.is_some())?;
        let stored: u16 = redis::cmd("GET").arg(&key).query_async(&mut *conn).await?;
        if stored != wanted {
            return Err(StoreError::Layout(format!(
                "this deployment's Redis was set up with {stored} partitions but this process is configured with {wanted}; \
                 set EG__REDIS__PARTITIONS={stored} (every tier must agree)"
            )));
        }
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
                    .query_async(&mut *conn)
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
