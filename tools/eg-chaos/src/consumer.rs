//! Pull consumers of the scenario's queue-mode subscriptions: tasks that receive batches
//! through Event Grid's namespace data plane (`…:receive`) and misbehave while faults
//! run — they acknowledge most events, acknowledge some late (sometimes after the lock
//! expired, so the acknowledgement fails `TokenLost` and the event must come back),
//! release some (now or after 10 s), reject a few, and now and then crash mid-batch
//! (drop the whole batch on the floor and start over: those events come back when their
//! locks expire). They retry through ingress kills and Redis restarts.
//!
//! What each consumer saw and what each lock operation answered is written into a
//! [`QueueLog`] per subscription, for the oracle. An operation whose answer was lost (the
//! connection broke) may or may not have taken effect: the log keeps it as "uncertain"
//! until the event is received again, which proves it did not.

use crate::deployment::Deployment;
use crate::journal::Journal;
use crate::receiver::lock;
use crate::scenario::{Scenario, event_seq};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const API: &str = "api-version=2024-06-01";
/// Seconds a receive waits for the first event (Event Grid's minimum).
const MAX_WAIT_SECONDS: u64 = 10;
/// Attempts at one lock operation before its outcome is left uncertain.
const SETTLE_ATTEMPTS: u32 = 40;
const RETRY_PAUSE: Duration = Duration::from_millis(300);
/// How long a crashed consumer stays down before it starts over.
const RESTART_PAUSE: Duration = Duration::from_millis(500);

/// What happened to one event on one queue subscription, from the consumers' side.
#[derive(Debug, Default, Clone, Copy)]
pub struct QueueSeen {
    /// Times received.
    pub received: u32,
    /// The highest `deliveryCount` received.
    pub highest_count: u32,
    /// Acknowledgements that succeeded.
    pub acknowledged: u32,
    /// Received again after an acknowledgement succeeded (at least once allows it).
    pub received_after_acknowledged: u32,
    /// A reject of its latest delivery succeeded.
    pub rejected: bool,
    /// A reject was sent for some delivery (whatever came of it).
    pub reject_tried: bool,
    /// Its latest delivery is not settled by a consumer: crashed, released, lock lost.
    pub open: bool,
    /// An acknowledge or reject of its latest delivery whose answer was lost.
    pub uncertain: bool,
}

/// One queue subscription's events as the consumers saw them, by sequence number.
#[derive(Default)]
pub struct QueueLog {
    pub seen: Mutex<HashMap<u64, QueueSeen>>,
    /// Received ids that this run did not publish.
    pub strangers: Mutex<Vec<String>>,
}

/// Counts over every consumer (the report's figures).
#[derive(Default)]
pub struct Figures {
    pub receives: AtomicU64,
    pub receive_errors: AtomicU64,
    pub events_received: AtomicU64,
    pub acknowledged: AtomicU64,
    pub late_acknowledgements: AtomicU64,
    pub token_lost_acknowledgements: AtomicU64,
    pub released: AtomicU64,
    pub rejected: AtomicU64,
    pub crashed_batches: AtomicU64,
    pub events_in_crashed_batches: AtomicU64,
    pub uncertain_operations: AtomicU64,
    pub operation_retries: AtomicU64,
}

impl Figures {
    pub fn to_json(&self) -> Value {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        json!({
            "receives": n(&self.receives),
            "receive_errors": n(&self.receive_errors),
            "events_received": n(&self.events_received),
            "acknowledged": n(&self.acknowledged),
            "late_acknowledgements": n(&self.late_acknowledgements),
            "token_lost_acknowledgements": n(&self.token_lost_acknowledgements),
            "released": n(&self.released),
            "rejected": n(&self.rejected),
            "crashed_batches": n(&self.crashed_batches),
            "events_in_crashed_batches": n(&self.events_in_crashed_batches),
            "operations_with_a_lost_answer": n(&self.uncertain_operations),
            "operation_retries": n(&self.operation_retries),
        })
    }
}

/// What a consumer does with one received event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    Acknowledge,
    /// Acknowledge after this many seconds (past 60: after the lock expired).
    AcknowledgeLate(u64),
    Release(u32),
    Reject,
}

fn choose(calm: bool) -> Choice {
    if calm {
        return Choice::Acknowledge;
    }
    match rand::random_range(0..100) {
        0..80 => Choice::Acknowledge,
        80..88 => Choice::AcknowledgeLate(rand::random_range(1..90)),
        88..96 => Choice::Release(if rand::random_bool(0.5) { 0 } else { 10 }),
        _ => Choice::Reject,
    }
}

/// A received event: its place in the log and its lock.
#[derive(Debug, Clone)]
struct Item {
    seq: u64,
    count: u32,
    token: String,
}

pub struct Consumers {
    pub scenario: Arc<Scenario>,
    /// Each topic's key, by topic index.
    pub keys: Vec<String>,
    pub deployment: Arc<Deployment>,
    pub http: reqwest::Client,
    pub journal: Journal,
    /// One per queue subscription, by index.
    pub logs: Vec<QueueLog>,
    pub figures: Figures,
    /// Once set, consumers acknowledge everything at once (the drain).
    pub calm: AtomicBool,
    pub stop: AtomicBool,
    /// Share of batches a consumer crashes on while faults run.
    pub crash_rate: f64,
}

impl Consumers {
    /// `per_queue` consumer tasks on every queue subscription.
    pub fn start(self: &Arc<Self>, per_queue: usize) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = Vec::new();
        for queue in 0..self.scenario.queues.len() {
            for _ in 0..per_queue {
                tasks.push(tokio::spawn(self.clone().consume(queue)));
            }
        }
        tasks
    }

    pub fn calm_down(&self) {
        self.calm.store(true, Ordering::Relaxed);
    }

    async fn consume(self: Arc<Self>, queue: usize) {
        while !self.stop.load(Ordering::Relaxed) {
            let max_events = rand::random_range(1..=100u32);
            let batch = match self.receive(queue, max_events).await {
                Ok(batch) => batch,
                Err(e) => {
                    self.figures.receive_errors.fetch_add(1, Ordering::Relaxed);
                    self.journal
                        .note(&format!("consumer of {}: {e:#}", self.scenario.queues[queue].name));
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
            };
            if batch.is_empty() {
                continue;
            }
            let calm = self.calm.load(Ordering::Relaxed);
            if !calm && rand::random_bool(self.crash_rate) {
                // Crash mid-batch: the locks are held until they expire.
                self.figures.crashed_batches.fetch_add(1, Ordering::Relaxed);
                self.figures
                    .events_in_crashed_batches
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                tokio::time::sleep(RESTART_PAUSE).await;
                continue;
            }
            let mut now: HashMap<&'static str, Vec<Item>> = HashMap::new();
            let mut delayed_release = Vec::new();
            for item in batch {
                match choose(calm) {
                    Choice::Acknowledge => now.entry("acknowledge").or_default().push(item),
                    Choice::Release(0) => now.entry("release").or_default().push(item),
                    Choice::Release(_) => delayed_release.push(item),
                    Choice::Reject => now.entry("reject").or_default().push(item),
                    Choice::AcknowledgeLate(seconds) => {
                        self.figures.late_acknowledgements.fetch_add(1, Ordering::Relaxed);
                        let this = self.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_secs(seconds)).await;
                            this.settle(queue, "acknowledge", "", vec![item]).await;
                        });
                    }
                }
            }
            for (action, items) in now {
                self.settle(queue, action, "", items).await;
            }
            if !delayed_release.is_empty() {
                self.settle(queue, "release", "&releaseDelayInSeconds=10", delayed_release)
                    .await;
            }
        }
    }

    fn url(&self, queue: usize, action: &str, query: &str) -> (String, &str) {
        let spec = &self.scenario.queues[queue];
        let urls = self.deployment.ingress_urls();
        let base = &urls[rand::random_range(0..urls.len())];
        let topic = &self.scenario.topics[spec.topic].name;
        (
            format!(
                "{base}/topics/{topic}/eventsubscriptions/{}:{action}?{API}{query}",
                spec.name
            ),
            &self.keys[spec.topic],
        )
    }

    /// One receive; what came is written into the log before it is acted on.
    async fn receive(&self, queue: usize, max_events: u32) -> anyhow::Result<Vec<Item>> {
        let (url, key) = self.url(
            queue,
            "receive",
            &format!("&maxEvents={max_events}&maxWaitTime={MAX_WAIT_SECONDS}"),
        );
        self.figures.receives.fetch_add(1, Ordering::Relaxed);
        let response = self
            .http
            .post(url)
            .header("authorization", format!("SharedAccessKey {key}"))
            .timeout(Duration::from_secs(MAX_WAIT_SECONDS + 10))
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        anyhow::ensure!(status.is_success(), "receive answered {status}: {answer}");
        let Some(values) = answer["value"].as_array() else {
            anyhow::bail!("receive answered without value: {answer}");
        };
        let log = &self.logs[queue];
        let mut items = Vec::new();
        for value in values {
            let id = value["event"]["id"].as_str().unwrap_or_default();
            let token = value["brokerProperties"]["lockToken"].as_str();
            let count = value["brokerProperties"]["deliveryCount"].as_u64();
            let (Some(seq), Some(token), Some(count)) = (event_seq(id), token, count) else {
                lock(&log.strangers).push(value.to_string().chars().take(300).collect());
                continue;
            };
            let count = u32::try_from(count).unwrap_or(u32::MAX);
            let mut seen = lock(&log.seen);
            let s = seen.entry(seq).or_default();
            s.received += 1;
            if s.acknowledged > 0 {
                s.received_after_acknowledged += 1;
            }
            // Received again: whatever was sent for an earlier delivery did not end it.
            if count >= s.highest_count {
                s.highest_count = count;
                s.open = true;
                s.uncertain = false;
                s.rejected = false;
            }
            items.push(Item {
                seq,
                count,
                token: token.to_owned(),
            });
        }
        self.figures
            .events_received
            .fetch_add(items.len() as u64, Ordering::Relaxed);
        Ok(items)
    }

    /// Sends `action` for `items`, on another ingress copy after a connection error or
    /// a 5xx, and writes each token's outcome into the log.
    async fn settle(&self, queue: usize, action: &str, query: &str, items: Vec<Item>) {
        let tokens: Vec<&str> = items.iter().map(|i| i.token.as_str()).collect();
        let body = json!({ "lockTokens": tokens }).to_string();
        // Set once an attempt may have taken effect without its answer arriving.
        let mut answer_lost = false;
        let mut answered = None;
        for attempt in 0..SETTLE_ATTEMPTS {
            if attempt > 0 {
                self.figures.operation_retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            let (url, key) = self.url(queue, action, query);
            let sent = self
                .http
                .post(url)
                .header("authorization", format!("SharedAccessKey {key}"))
                .header("content-type", "application/json")
                .timeout(Duration::from_secs(10))
                .body(body.clone())
                .send()
                .await;
            let response = match sent {
                Ok(response) => response,
                Err(e) => {
                    // A refused connection never reached a server.
                    answer_lost |= !e.is_connect();
                    continue;
                }
            };
            let status = response.status();
            let answer = match response.text().await {
                Ok(text) => serde_json::from_str::<Value>(&text).map_err(|_| ()),
                Err(_) => Err(()),
            };
            match answer {
                Ok(answer) if status.is_success() => {
                    answered = Some(answer);
                    break;
                }
                Ok(answer) => {
                    self.journal.note(&format!("{action} answered {status}: {answer}"));
                    if !status.is_server_error() {
                        break; // refused: sending it again changes nothing
                    }
                    // A 5xx may come from an ingress whose Redis call took effect.
                    answer_lost = true;
                }
                Err(_) => answer_lost = true,
            }
        }
        let succeeded: Vec<String> = answered
            .as_ref()
            .and_then(|a| a["succeededLockTokens"].as_array())
            .map(|tokens| tokens.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let log = &self.logs[queue];
        let mut seen = lock(&log.seen);
        for item in &items {
            let ok = succeeded.contains(&item.token);
            let s = seen.entry(item.seq).or_default();
            let latest = item.count == s.highest_count;
            if action == "reject" {
                s.reject_tried = true;
            }
            match (action, ok) {
                ("acknowledge", true) => {
                    s.acknowledged += 1;
                    self.figures.acknowledged.fetch_add(1, Ordering::Relaxed);
                    if latest {
                        s.open = false;
                    }
                }
                ("reject", true) => {
                    self.figures.rejected.fetch_add(1, Ordering::Relaxed);
                    if latest {
                        s.rejected = true;
                        s.open = false;
                    }
                }
                ("release", true) => {
                    self.figures.released.fetch_add(1, Ordering::Relaxed);
                }
                (_, false) if answer_lost && latest && action != "release" => {
                    // Failed now, perhaps because a lost attempt already did it.
                    s.uncertain = true;
                    self.figures.uncertain_operations.fetch_add(1, Ordering::Relaxed);
                }
                ("acknowledge", false) => {
                    // The lock was lost (expired, or received again): it comes back.
                    self.figures.token_lost_acknowledgements.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
        }
    }
}
