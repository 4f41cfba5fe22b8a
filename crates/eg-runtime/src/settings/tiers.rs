//! The sections one tier reads for itself: `[ingress]` and `[admin]` (the publish and
//! management APIs), `[sender]`, `[scheduler]` and `[deadletter]`.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngressSection {
    /// Publish API, management API and ops endpoints.
    pub listen: String,
    /// Base URL publishers reach this ingress at (shown as each topic's `endpoint`).
    pub public_url: Option<String>,
    pub max_request_bytes: usize,
    pub max_event_bytes: usize,
    pub max_events_per_request: usize,
    pub max_subscriptions_per_topic: u32,
    /// Longest a publish waits on Redis before answering `503` with `Retry-After`
    /// (nothing was accepted), so publishers never hang during an outage.
    #[serde(with = "humantime_serde")]
    pub storage_timeout: Duration,
    /// Longest the body of a publish or management request may take to arrive, from
    /// its first byte being asked for to its last; a slower client is answered `408`.
    #[serde(with = "humantime_serde")]
    pub body_read_timeout: Duration,
}

impl Default for IngressSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            public_url: None,
            max_request_bytes: 1024 * 1024,
            max_event_bytes: 1024 * 1024,
            max_events_per_request: 5000,
            max_subscriptions_per_topic: 500,
            storage_timeout: Duration::from_secs(1),
            body_read_timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSection {
    /// Bearer token of the management API; without one the API is off.
    pub token: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SenderSection {
    /// Ops endpoints (`/healthz`, `/readyz`, `/metrics`).
    pub listen: String,
    /// Attempts in flight at once in this process.
    pub concurrency: usize,
    /// How much of a response body is read (the rest is discarded).
    pub max_response_bytes: usize,
    /// How long an attempt that timed out is still listened to: a late success cancels
    /// its queued retry (behaviour.md#retry-schedule-and-policy). Zero turns this off.
    #[serde(with = "humantime_serde")]
    pub late_success_window: Duration,
    /// Most timed-out attempts listened to at once.
    pub max_late_listeners: usize,
}

impl Default for SenderSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9091".into(),
            concurrency: 64,
            max_response_bytes: 64 * 1024,
            late_success_window: Duration::from_secs(180),
            max_late_listeners: 256,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerSection {
    pub listen: String,
    /// Longest a scheduler sleeps between looks for due retries: it wakes for the earliest
    /// one left, so this bounds only how late it notices a retry written since its last look.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Most retries moved per partition per script call.
    pub batch: usize,
    /// How often abandoned deliveries are looked for.
    #[serde(with = "humantime_serde")]
    pub reclaim_interval: Duration,
    /// How often each partition's ordering lines are swept for a head Redis lost
    /// (docs/ordered-delivery.md#stuck-lines). A lost head is swept on the second pass
    /// that finds it, so within about twice this.
    #[serde(with = "humantime_serde")]
    pub line_sweep_interval: Duration,
}

impl Default for SchedulerSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9092".into(),
            interval: Duration::from_millis(200),
            batch: 500,
            reclaim_interval: Duration::from_secs(5),
            line_sweep_interval: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeadLetterSection {
    pub listen: String,
    /// Root of the dead-letter directory destination.
    pub dir: PathBuf,
    /// How long a record waits before it is written (records written together share files).
    #[serde(with = "humantime_serde")]
    pub delay: Duration,
    /// How long to keep trying an unavailable destination before dropping the record.
    #[serde(with = "humantime_serde")]
    pub give_up_after: Duration,
    /// How long before a record whose write failed is tried again.
    #[serde(with = "humantime_serde")]
    pub retry_interval: Duration,
    /// How often to look for records to write.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Most records read at once.
    pub batch: usize,
    /// Most dead-letter records kept in Redis per subscription for listing and redrive
    /// (the oldest go first; the files are not affected). 0 keeps none.
    pub archive_max: u64,
    /// The topic on which eg announces every dead-letter object it writes, as a
    /// `Microsoft.Storage.BlobCreated` event; eg-deadletter creates it (Event Grid
    /// schema) when missing. Empty: no announcements.
    pub notify_topic: String,
}

impl DeadLetterSection {
    /// The notify topic's name, `None` when announcements are off.
    pub fn notify_topic_name(&self) -> Result<Option<eg_core::TopicName>, String> {
        let name = self.notify_topic.trim();
        if name.is_empty() {
            return Ok(None);
        }
        eg_core::TopicName::parse(name)
            .map(Some)
            .map_err(|e| format!("deadletter.notify_topic: {:?} is not a topic name: {}", name, e.problem))
    }
}

impl Default for DeadLetterSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9093".into(),
            dir: PathBuf::from("deadletters"),
            delay: Duration::from_secs(300),
            give_up_after: Duration::from_secs(4 * 3600),
            retry_interval: Duration::from_secs(30),
            interval: Duration::from_secs(1),
            batch: 500,
            archive_max: 100_000,
            notify_topic: String::new(),
        }
    }
}
