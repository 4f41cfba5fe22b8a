//! A connection that remembers whether a command on it failed in a way that may have
//! broken it, for the pool (`connection`) and the shared publish connection
//! (`shared_link`) alike.

use crate::target::Link;
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether an error may have left the connection unusable (rather than being an answer).
/// `READONLY` counts: the server was demoted to a replica (a Sentinel failover), so the
/// next connection must be resolved again, to the new primary.
pub fn breaks_connection(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_timeout()
        || error.is_connection_dropped()
        || error.is_unrecoverable_error()
        || error.code() == Some("READONLY")
        || error.to_string().contains("READONLY")
}

/// A pooled [`Link`] that remembers whether a command on it failed in a way that may have
/// broken it; the pool drops such a connection instead of handing it out again. Clones
/// share the socket and the mark (the shared publish connection hands out clones).
#[derive(Clone)]
pub struct Tracked {
    pub(crate) link: Link,
    broken: Arc<AtomicBool>,
}

impl Tracked {
    pub(crate) fn new(link: Link) -> Self {
        Self {
            link,
            broken: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether a command on it failed in a way that may have broken it.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    pub(crate) fn note(&self, error: &RedisError) {
        if breaks_connection(error) {
            self.broken.store(true, Ordering::Relaxed);
        }
    }
}

impl ConnectionLike for Tracked {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let reply = self.link.req_packed_command(cmd).await;
            if let Err(e) = &reply {
                self.note(e);
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let reply = self.link.req_packed_commands(cmd, offset, count).await;
            if let Err(e) = &reply {
                self.note(e);
            }
            reply
        })
    }

    fn get_db(&self) -> i64 {
        self.link.get_db()
    }
}
