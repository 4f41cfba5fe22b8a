//! The sections every tier reads alike: how often the catalog is reread, how much
//! delivery history is kept, the shutdown grace and the logs.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Delivery history (`GET …/events/{id}/history`): bounded by time and by count, so
/// Redis memory stays bounded whatever the traffic.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistorySection {
    /// How long an event's history is kept after its last step; 0s keeps none.
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// Most events whose history is kept (the least recently active go first).
    pub max_events: u64,
    /// Most steps kept per event (the latest).
    pub max_steps_per_event: u32,
}

impl Default for HistorySection {
    fn default() -> Self {
        Self {
            retention: Duration::from_secs(24 * 3600),
            max_events: 100_000,
            max_steps_per_event: 20,
        }
    }
}

/// The topic archive's backlog (archive.md): how many accepted events of archived topics
/// may wait in Redis per partition for the writer, and what a publish does at the bound.
/// Read by every tier that publishes (the ingress, and eg-deadletter's notifications).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArchiveSection {
    /// Most entries waiting per partition.
    pub max_backlog: u64,
    /// `refuse` (503, nothing stored) or `drop-oldest` (stored, oldest waiting dropped, counted).
    pub when_full: eg_store::queue::WhenFull,
    /// How often eg-deadletter deletes archive objects past their topic's retention.
    #[serde(with = "humantime_serde")]
    pub sweep_interval: Duration,
}

impl Default for ArchiveSection {
    fn default() -> Self {
        Self {
            max_backlog: 1_000_000,
            when_full: eg_store::queue::WhenFull::Refuse,
            sweep_interval: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogSection {
    /// How often tiers check the catalog for changes.
    #[serde(with = "humantime_serde")]
    pub refresh_interval: Duration,
}

impl Default for CatalogSection {
    fn default() -> Self {
        Self {
            refresh_interval: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownSection {
    /// After SIGTERM, how long a process may finish the work in hand before it exits
    /// anyway (what it still holds is then reclaimed after the visibility timeout).
    /// Keep it above `delivery.timeout` so senders can settle attempts in flight.
    #[serde(with = "humantime_serde")]
    pub grace: Duration,
}

impl Default for ShutdownSection {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(40),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSection {
    /// `text` or `json`.
    pub format: String,
    /// A `tracing` filter such as `info` or `eg_sender=debug,info`.
    pub level: String,
}

impl Default for LogSection {
    fn default() -> Self {
        Self {
            format: "text".into(),
            level: "info".into(),
        }
    }
}
