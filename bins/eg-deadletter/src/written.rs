//! What the worker knows about a dead-letter object it has just written, handed to the
//! notification (a `Microsoft.Storage.BlobCreated`-shaped event on the configured system
//! topic, `notify`) before the records leave Redis.

use eg_core::subscription::DeadLetterStore;

/// A dead-letter object the store confirmed (or had already: a repeated attempt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenObject {
    pub store: DeadLetterStore,
    /// The container or bucket.
    pub container: String,
    /// The object's path inside the container (`[prefix/]SUB/YYYY/M/D/H/<guid>.json`).
    pub path: String,
    /// Where the object is (`https://acct.blob.core.windows.net/c/…`, `file:///…`).
    pub url: String,
    pub content_length: u64,
    /// `None` when the object already existed (written by an earlier attempt).
    pub etag: Option<String>,
    /// How many records the object holds.
    pub records: usize,
    /// The dead-lettering subscription.
    pub topic: String,
    pub subscription: String,
}
