//! eg's Redis layer: the keyspace, the Lua scripts, the wire forms of stored records
//! (`codec`), the topic/subscription catalog, the delivery queues and the status page's
//! counts (`stats`). Tiers talk to each other only through what this crate writes, and
//! no other crate builds a Redis key, ships a script or spells a stored field.
//!
//! Every change that touches several keys is one Lua script (in `scripts/`) whose keys
//! share one hash tag, so the same code runs on a single Redis and on Redis Cluster.
//! This crate owns *how* things are stored; *what* to do (retry when, dead-letter why)
//! is decided by `eg-core` and handed in.

pub mod archive;
pub mod cache;
pub mod catalog;
pub mod clock;
pub mod codec;
pub mod connection;
pub mod error;
pub mod history;
pub mod keyspace;
pub mod paused;
pub mod probation;
pub mod queue;
mod scripts;
mod settlement;
pub mod snapshot;
pub mod stats;

pub use archive::{ArchivedRecord, Cursor, DeadLetterCounts, Progress, Selection, TimeRange};
pub use cache::CatalogCache;
pub use catalog::{Catalog, PutTopic};
pub use clock::Clock;
pub use connection::{RedisSettings, Store};
pub use error::StoreError;
pub use keyspace::{Keyspace, Partition};
pub use queue::{DeadLetterItem, Depths, Promoted, PublishOutcome, ReadyDelivery};
pub use settlement::{OwnedSettle, Retention, Settle, Settled, Settlement};
pub use snapshot::{CatalogSnapshot, TopicEntry};
pub use stats::StatsStore;
