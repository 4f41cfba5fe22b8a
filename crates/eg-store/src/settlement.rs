//! The vocabulary of settling: what becomes of a held delivery ([`Settlement`]), one
//! hold to settle ([`Settle`]), how much history and archive a partition keeps
//! ([`Retention`]), and what became of the settle ([`Settled`]). Its own module because both [`crate::queue`] (which
//! settles) and [`crate::codec`] (which lays the call out for `settle.lua`) use these
//! types; `queue` re-exports them.

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
    /// Back into the ready stream now, uncharged: an abandoned attempt taken back, or a
    /// delivery a sender read ahead and hands back because no slot freed for it in time.
    Requeue { delivery: Delivery },
    /// To the dead-letter worker (and the subscription's dead-letter archive).
    DeadLetter { entry: DeadLetterEntry },
    /// The subscription is paused: set aside, uncharged, until it is resumed or until
    /// `until` (the end of its time-to-live), whichever comes first.
    Park { delivery: Delivery, until: UnixMillis },
    /// Pull delivery only (`queue_settle.lua`): the lock is renewed for another full
    /// lock duration; the delivery stays where it is.
    RenewLock,
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

/// One hold to settle with [`crate::Store::settle_many`] (or
/// [`crate::Store::settle_queue`]). It owns what it settles: the sender hands it to its
/// settle queue, another task, before the call is made, and the other callers build it
/// for the call anyway.
#[derive(Debug, Clone)]
pub struct Settle {
    pub entry_id: String,
    pub delivery: Delivery,
    pub settlement: Settlement,
    /// The step to append to the event's history (`None`: none).
    pub history: Option<HistoryEntry>,
    /// The held entry carries the event's body (`ReadyDelivery::carries_body`): there is
    /// no event hash to count down, and a delivery that lives on takes the body along.
    pub carries_body: bool,
    /// The held entry is a fan-out or batch entry this delivery shares with its siblings
    /// (`ReadyDelivery::shared`): it goes when the last of them is settled.
    pub shared: Option<SharedHold>,
}

/// Which of a shared entry's deliveries a hold is: its index in the entry (from 0) and
/// how many the entry has. A fan-out entry is delivered from itself, one delivery per
/// subscription, and a batch entry one per event; each stays held until every one of
/// them is settled (`settle.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedHold {
    pub index: usize,
    pub of: usize,
}

/// What became of one settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// False when the entry was no longer held (reclaimed or settled by someone else):
    /// nothing changed.
    pub took_effect: bool,
    /// Old records evicted from the dead-letter archive to stay within its bound.
    pub archive_evicted: u64,
}
