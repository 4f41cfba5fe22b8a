//! What a settle call is given: what becomes of each held delivery ([`Settlement`],
//! [`Settle`]) and how much history and archive a partition keeps ([`Retention`]).
//! Its own module because both [`crate::queue`] (which settles) and [`crate::codec`]
//! (which lays the call out for `settle.lua`) use these types; `queue` re-exports them.

use eg_core::deadletter::DeadLetterEntry;
use eg_core::history::HistoryEntry;
use eg_core::{Delivery, UnixMillis};
use std::time::Duration;

/// What becomes of a held delivery.
#[derive(Debug, Clone)]
pub enum Settlement {
    /// Delivered, or dropped: the delivery is finished.
    Done,
    /// Try again at `due` (the record carries the attempt just made).
    Retry { delivery: Delivery, due: UnixMillis },
    /// Back into the ready stream now (an abandoned attempt).
    Requeue { delivery: Delivery },
    /// To the dead-letter worker (and the subscription's dead-letter archive).
    DeadLetter { entry: DeadLetterEntry },
    /// The subscription is paused: set aside, uncharged, until it is resumed or until
    /// `until` (the end of its time-to-live), whichever comes first.
    Park { delivery: Delivery, until: UnixMillis },
}

/// How much delivery history and dead-letter archive each partition keeps (bounded, so
/// Redis memory stays bounded whatever the traffic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// How long an event's history is kept after its last step; zero keeps none.
    pub history_for: Duration,
    /// Most event histories per partition; the least recently written go first.
    pub histories_per_partition: u64,
    /// Most steps kept per event history (the latest).
    pub steps_per_history: u32,
    /// Most archived dead-letter records per subscription and partition; the oldest go
    /// first. Zero keeps no archive (dead-letter files are still written).
    pub archived_per_partition: u64,
}

impl Retention {
    /// Keeps no history and no archive.
    pub const NONE: Self = Self {
        history_for: Duration::ZERO,
        histories_per_partition: 0,
        steps_per_history: 0,
        archived_per_partition: 0,
    };
}

/// One hold to settle with [`crate::Store::settle_many`].
#[derive(Debug, Clone, Copy)]
pub struct Settle<'a> {
    pub entry_id: &'a str,
    pub delivery: &'a Delivery,
    pub settlement: &'a Settlement,
    /// The step to append to the event's history (`None`: none).
    pub history: Option<&'a HistoryEntry>,
}
