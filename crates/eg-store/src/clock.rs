//! One clock for the whole deployment: Redis's. Processes on different hosts compute
//! due times and TTL deadlines that scripts compare against the server's `TIME`, so
//! each process keeps the offset between its own clock and Redis's and applies it.

use crate::connection::Store;
use crate::error::StoreError;
use eg_core::UnixMillis;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

#[derive(Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    /// This host's time corrected to Redis's (uncorrected until the first [`Clock::sync`]).
    pub fn now(&self) -> UnixMillis {
        UnixMillis(host_millis() + self.offset_ms.load(Ordering::Relaxed))
    }

    /// Measures the offset to Redis's clock (half the round trip is credited to each way).
    pub async fn sync(&self, store: &Store) -> Result<(), StoreError> {
        let mut conn = store.conn().await?;
        let before = host_millis();
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await?;
        let after = host_millis();
        let server = secs * 1000 + micros / 1000;
        self.offset_ms.store(server - (before + after) / 2, Ordering::Relaxed);
        Ok(())
    }
}

/// This host's own clock: the only place eg reads it (eg-core takes time as an argument).
fn host_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
