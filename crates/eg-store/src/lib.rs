//! eg's Redis layer. Tiers talk to each other only through what this crate writes, and
//! this crate owns every part of how it is written:
//!
//! - the keyspace (`keyspace`): every Redis key, with the hash tags that keep one
//!   script's keys in one slot;
//! - the Lua scripts (`scripts/`): every change that touches several keys is one script,
//!   so the same code runs on a single Redis and on Redis Cluster;
//! - the stored forms (`codec`): delivery, dead-letter and event records, the settle
//!   call, probation records and the status page's bucket fields, each spelled once;
//! - the connections (`connection`; where they go and how they are secured — TLS, ACL
//!   user, Sentinel — `target`) and the Redis-corrected clock (`clock`) that every
//!   stored time is read from, so all processes agree with the scripts;
//! - what is stored: the topic/subscription catalog (`catalog`, `snapshot`, `cache`),
//!   the delivery queues (`queue`, `settlement`), pull delivery's queues and locks
//!   (`pull`), paused subscriptions' deliveries (`paused`), ordering lines' stuck-line sweep
//!   (`lines`), delivery history (`history`;
//!   a subscription's recent deliveries read from it, `recent`), the dead-letter archive (`archive`), the names of dead-letter objects
//!   (`dead_letter_objects`),
//!   per-endpoint probation records (`probation`), the status page's counts
//!   (`stats`) and the running processes' heartbeats (`heartbeat`).
//!
//! What it must not do: decide delivery policy. *What* to do (retry when, dead-letter
//! why, probation how long) is decided by `eg-core` and handed in; this crate only
//! stores it. And it must not be bypassed: no other crate builds a Redis key, ships a
//! script or spells a stored field (`tools/check-layout.py` checks the first two).

pub mod archive;
pub mod archive_backlog;
pub mod cache;
pub mod catalog;
pub mod clock;
pub mod codec;
pub mod connection;
pub mod dead_letter_health;
pub mod dead_letter_objects;
pub mod error;
pub mod heartbeat;
pub mod history;
pub mod identity_health;
pub mod keyspace;
mod lease;
pub mod lines;
pub mod paused;
pub mod probation;
pub mod pull;
pub mod queue;
mod ready_entries;
pub mod recent;
pub mod replay;
mod scripts;
mod settlement;
mod shared_link;
pub mod snapshot;
pub mod stats;
mod target;
pub mod throttle;
mod tracked;

pub use archive::{ArchivedRecord, Cursor, DeadLetterCounts, Progress, Selection, TimeRange};
pub use cache::CatalogCache;
pub use catalog::{Catalog, PutTopic};
pub use clock::Clock;
pub use connection::{Credentials, RedisSettings, SentinelSettings, Store, TlsFiles, redact_url};
pub use dead_letter_health::{DestinationProblem, FailingDestination};
pub use dead_letter_objects::NamedObject;
pub use error::StoreError;
pub use identity_health::{FailingIdentity, IDENTITY_PROBLEM_TTL, IdentityProblem};
pub use keyspace::{Keyspace, Partition};
pub use lines::{Census, LineSweep, SweepAction, SweepBounds, SweptLine};
pub use pull::{LockCheck, QueueDepth, QueueEntry};
pub use queue::{DeadLetterItem, Depths, Promoted, PublishOutcome, ReadyDelivery, Routes};
pub use settlement::{Retention, Settle, Settled, Settlement, SharedHold};
pub use snapshot::{CatalogSnapshot, TopicEntry};
pub use stats::StatsStore;
