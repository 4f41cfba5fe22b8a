//! One multiplexed connection that concurrent publish calls share.
//!
//! A pooled connection is taken by one caller at a time, so under load each of the pool's
//! connections carries one script call per round trip: a write and a read on both ends
//! for every publish request. Publish calls never block Redis, so they can share one
//! socket instead. Then the commands of concurrent requests leave in one write, and Redis
//! reads them, runs them and answers them together. Commands that block
//! (`XREADGROUP BLOCK`) stay on the pool, where they hold up nobody.
//!
//! A command that fails in a way that may have broken the connection marks it (as the
//! pool's do), and the next caller opens a new one.

use crate::target::Target;
use crate::tracked::Tracked;
use redis::RedisError;
use tokio::sync::Mutex;

pub(crate) struct SharedLink {
    target: Target,
    current: Mutex<Option<Tracked>>,
}

impl SharedLink {
    pub(crate) fn new(target: Target) -> Self {
        Self {
            target,
            current: Mutex::new(None),
        }
    }

    /// A handle on the shared connection, opened first when there is none or the last
    /// one broke. Callers that arrive while it opens wait for it rather than open their own.
    pub(crate) async fn get(&self) -> Result<Tracked, RedisError> {
        let mut current = self.current.lock().await;
        if let Some(link) = current.as_ref().filter(|link| !link.is_broken()) {
            return Ok(link.clone());
        }
        let link = Tracked::new(self.target.open().await?);
        *current = Some(link.clone());
        Ok(link)
    }
}
