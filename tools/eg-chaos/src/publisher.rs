//! Publishes at a steady rate through the public publish API, spread over the ingress
//! copies in turn, and writes down every event's fate: answered `200` (owed to every
//! subscription it matches) or not (a refusal or a connection error: not owed, though it
//! may still arrive).

use crate::deployment::Deployment;
use crate::journal::Journal;
use crate::receiver::lock;
use crate::scenario::{EventFacts, Scenario, Schema};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Publish requests in flight at once.
const IN_FLIGHT: usize = 256;
/// Most events per publish request.
const MAX_EVENTS_PER_REQUEST: u64 = 4;
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);

/// [`Published::refusal`] codes that are not HTTP statuses.
pub const TIMEOUT: u16 = 1;
pub const CONNECT: u16 = 2;
pub const CONNECTION_ERROR: u16 = 3;

/// The name of a [`Published::refusal`] code, as in the report.
pub fn refusal_name(code: u16) -> String {
    match code {
        TIMEOUT => "timeout".into(),
        CONNECT => "connect".into(),
        CONNECTION_ERROR => "connection_error".into(),
        status => format!("status_{status}"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    InFlight,
    /// Answered 200.
    Acknowledged,
    /// Anything else: not owed.
    NotAcknowledged,
}

#[derive(Debug, Clone, Copy)]
pub struct Published {
    pub facts: EventFacts,
    pub fate: Fate,
    /// Why it was not acknowledged: an HTTP status, or [`TIMEOUT`], [`CONNECT`],
    /// [`CONNECTION_ERROR`]; 0 when it was.
    pub refusal: u16,
    /// Unix ms when the answer came.
    pub answered_at: i64,
    /// Unix ms when its request was sent: eg accepted it after this.
    pub sent_at: i64,
    /// The sequence number of the first event of its request (its events were accepted
    /// in array order).
    pub request: u64,
}

#[derive(Default)]
pub struct Ledger {
    /// Indexed by sequence number.
    pub events: Mutex<Vec<Published>>,
    pub requests: AtomicU64,
    pub acknowledged_requests: AtomicU64,
    /// Failed requests by kind (`status_503`, `connect`, `timeout`, `connection_error`).
    pub errors: Mutex<BTreeMap<String, u64>>,
    /// The same, counting only requests that failed while Redis was down.
    pub errors_while_redis_down: Mutex<BTreeMap<String, u64>>,
    /// Events the rate asked for but the publisher could not send in time (it was
    /// waiting for answers).
    pub behind: AtomicU64,
}

pub struct Publisher {
    pub scenario: Arc<Scenario>,
    pub keys: Vec<String>,
    pub deployment: Arc<Deployment>,
    pub http: reqwest::Client,
    pub ledger: Arc<Ledger>,
    pub redis_down: Arc<AtomicBool>,
    pub journal: Journal,
}

impl Publisher {
    /// Publishes `rate` events per second until `stop_at`, then waits for every answer.
    pub async fn run(self: Arc<Self>, rate: f64, stop_at: Instant) {
        let started = Instant::now();
        let permits = Arc::new(Semaphore::new(IN_FLIGHT));
        let mut tasks = tokio::task::JoinSet::new();
        let mut sent: u64 = 0;
        let mut turn: usize = 0;
        let mut count = rand::random_range(1..=MAX_EVENTS_PER_REQUEST);
        while Instant::now() < stop_at {
            while tasks.try_join_next().is_some() {}
            let due = (started.elapsed().as_secs_f64() * rate) as u64;
            if sent + count > due {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            let behind = due - sent;
            if behind > (rate as u64).max(10) + count {
                // More than a second behind: do not burst to catch up, count it.
                let skipped = behind - count;
                self.ledger.behind.fetch_add(skipped, Ordering::Relaxed);
                sent += skipped;
            }
            let topic = rand::random_range(0..self.scenario.topics.len());
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break;
            };
            let first = {
                let mut events = lock(&self.ledger.events);
                let first = events.len() as u64;
                for _ in 0..count {
                    events.push(Published {
                        facts: EventFacts::random(topic as u8),
                        fate: Fate::InFlight,
                        refusal: 0,
                        answered_at: 0,
                        sent_at: 0,
                        request: first,
                    });
                }
                first
            };
            sent += count;
            let this_request = count;
            count = rand::random_range(1..=MAX_EVENTS_PER_REQUEST);
            let urls = self.deployment.ingress_urls();
            let url = urls[turn % urls.len()].clone();
            turn += 1;
            let publisher = self.clone();
            tasks.spawn(async move {
                publisher.publish(&url, topic, first, this_request).await;
                drop(permit);
            });
        }
        while tasks.join_next().await.is_some() {}
        self.journal.note(&format!("publisher done: {sent} events"));
    }

    async fn publish(&self, ingress: &str, topic: usize, first: u64, count: u64) {
        let facts: Vec<EventFacts> = {
            let mut events = lock(&self.ledger.events);
            let now = chrono::Utc::now().timestamp_millis();
            (first..first + count)
                .map(|seq| {
                    let event = &mut events[seq as usize];
                    event.sent_at = now;
                    event.facts
                })
                .collect()
        };
        let events: Vec<Value> = facts
            .iter()
            .zip(first..)
            .map(|(facts, seq)| self.scenario.event_json(seq, facts))
            .collect();
        let (content_type, body) = match self.scenario.topics[topic].schema {
            Schema::EventGrid => ("application/json", Value::Array(events)),
            Schema::CloudEvents if events.len() == 1 => (
                "application/cloudevents+json; charset=utf-8",
                events.into_iter().next().unwrap_or_default(),
            ),
            Schema::CloudEvents => (
                "application/cloudevents-batch+json; charset=utf-8",
                Value::Array(events),
            ),
        };
        self.ledger.requests.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .http
            .post(format!(
                "{ingress}/topics/{}/api/events?api-version=2018-01-01",
                self.scenario.topics[topic].name
            ))
            .header("content-type", content_type)
            .header("aeg-sas-key", &self.keys[topic])
            .body(body.to_string())
            .timeout(PUBLISH_TIMEOUT)
            .send()
            .await;
        let refusal = match answer {
            Ok(response) if response.status().as_u16() == 200 => 0,
            Ok(response) => response.status().as_u16(),
            Err(e) if e.is_timeout() => TIMEOUT,
            Err(e) if e.is_connect() => CONNECT,
            Err(_) => CONNECTION_ERROR,
        };
        let failure = (refusal != 0).then(|| refusal_name(refusal));
        let now = chrono::Utc::now().timestamp_millis();
        {
            let mut events = lock(&self.ledger.events);
            for seq in first..first + count {
                let event = &mut events[seq as usize];
                event.answered_at = now;
                event.refusal = refusal;
                event.fate = if failure.is_none() {
                    Fate::Acknowledged
                } else {
                    Fate::NotAcknowledged
                };
            }
        }
        match failure {
            None => {
                self.ledger.acknowledged_requests.fetch_add(1, Ordering::Relaxed);
            }
            Some(kind) => {
                if self.redis_down.load(Ordering::SeqCst) {
                    *lock(&self.ledger.errors_while_redis_down)
                        .entry(kind.clone())
                        .or_default() += 1;
                }
                *lock(&self.ledger.errors).entry(kind).or_default() += 1;
            }
        }
    }
}
