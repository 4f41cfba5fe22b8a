//! Which tier processes are running: every process writes a heartbeat every
//! [`HEARTBEAT_INTERVAL`] (`heartbeat.lua`, which also forgets copies gone for
//! [`FORGET_AFTER`]) and removes it when it stops; the status page lists the copies
//! heard from within [`LIVE_WITHIN`]. One hash for the whole deployment: there are
//! few processes, and one key needs no script across slots.

use crate::codec::heartbeat::{decode_heartbeat, encode_heartbeat, encode_heartbeat_field};
use crate::connection::Store;
use crate::error::StoreError;
use crate::scripts;
use eg_core::UnixMillis;
use redis::AsyncCommands;
use std::collections::HashMap;
use std::time::Duration;

pub use crate::codec::heartbeat::LiveCopy;

/// How often a process writes its heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// A copy heard from within this long is running: three heartbeats may be missed (a
/// slow Redis, a busy process) before it is no longer listed.
pub const LIVE_WITHIN: Duration = Duration::from_secs(20);
/// A copy not heard from for this long is deleted (it was killed without leaving).
pub const FORGET_AFTER: Duration = Duration::from_secs(600);

impl Store {
    /// Writes `copy`'s heartbeat (its `last_seen` is now).
    pub async fn beat(&self, copy: &LiveCopy) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let cutoff = copy.last_seen.0.saturating_sub(millis(FORGET_AFTER));
        let _: i64 = scripts::HEARTBEAT
            .key(self.keys.heartbeats())
            .arg(encode_heartbeat_field(&copy.tier, &copy.instance))
            .arg(encode_heartbeat(copy))
            .arg(cutoff)
            .invoke_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Removes a stopping process's heartbeat, so it leaves the list at once.
    pub async fn leave(&self, tier: &str, instance: &str) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let _: i64 = conn
            .hdel(self.keys.heartbeats(), encode_heartbeat_field(tier, instance))
            .await?;
        Ok(())
    }

    /// The copies heard from within [`LIVE_WITHIN`] of `now`, by tier, oldest first.
    pub async fn live_copies(&self, now: UnixMillis) -> Result<Vec<LiveCopy>, StoreError> {
        let key = self.keys.heartbeats();
        let mut conn = self.conn().await?;
        let all: HashMap<String, String> = conn.hgetall(&key).await?;
        let oldest = now.0.saturating_sub(millis(LIVE_WITHIN));
        let mut copies = Vec::with_capacity(all.len());
        for (field, value) in &all {
            let copy = decode_heartbeat(field, value).map_err(|why| StoreError::corrupt(&key, why))?;
            if copy.last_seen.0 >= oldest {
                copies.push(copy);
            }
        }
        copies.sort_by(|a, b| (&a.tier, a.started_at, &a.instance).cmp(&(&b.tier, b.started_at, &b.instance)));
        Ok(copies)
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
