//! The load generator: publishes Event Grid events to eg-ingress, the way publishers do
//! (`POST /topics/{t}/api/events` with `aeg-sas-key`), from many connections at once.
//!
//! Bodies are built from a [`Template`] — the JSON array laid out once, with fixed-width
//! slots for each event's id and send time (`data.egBenchSentUs`) patched in place per
//! request — so generating 100 KB of JSON costs a copy, not a serialisation, and the
//! load generator leaves the CPU to the tiers.
//!
//! Three ways to drive: [`closed`] (each connection sends its next request when the last
//! was answered; optionally held back by a [`Window`] so the publish rate settles at the
//! delivery rate), and [`fixed_rate`] (an open loop at a set rate, each request on its
//! own task, so a slow answer never delays the next send).

use crate::histogram::Histogram;
use crate::receiver::{Receiver, STAMP_FIELD, now_micros};
use anyhow::bail;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const ID_DIGITS: usize = 16;
const STAMP_DIGITS: usize = 16;

/// A JSON array of `events` Event Grid events of about `event_bytes` each.
#[derive(Clone)]
pub struct Template {
    bytes: Vec<u8>,
    /// Where each event's id digits and stamp digits start.
    slots: Vec<(usize, usize)>,
    /// Where each event's subject digits start.
    subjects: Vec<usize>,
    /// Subjects cycle over this many values (event id modulo it); `None` leaves every
    /// subject as laid out (all alike).
    subject_keys: Option<u64>,
}

impl Template {
    pub fn new(events: usize, event_bytes: usize) -> Self {
        let one = |pad: &str| {
            format!(
                r#"{{"id":"{id}","eventType":"Bench.Happened","subject":"/bench/{id}","eventTime":"2026-01-01T00:00:00Z","dataVersion":"1","data":{{"{STAMP_FIELD}":{stamp},"pad":"{pad}"}}}}"#,
                id = "0".repeat(ID_DIGITS),
                stamp = "0".repeat(STAMP_DIGITS),
            )
        };
        let pad = "x".repeat(event_bytes.saturating_sub(one("").len()));
        let event = one(&pad);
        let id_at = event.find(&"0".repeat(ID_DIGITS)).unwrap_or(0);
        let stamp_at = event
            .find(&format!("\"{STAMP_FIELD}\":"))
            .map_or(0, |at| at + STAMP_FIELD.len() + 3);
        let subject_at = event.find("/bench/").map_or(0, |at| at + "/bench/".len());
        let mut bytes = Vec::with_capacity(events * (event.len() + 1) + 2);
        let mut slots = Vec::with_capacity(events);
        let mut subjects = Vec::with_capacity(events);
        bytes.push(b'[');
        for i in 0..events {
            if i > 0 {
                bytes.push(b',');
            }
            let base = bytes.len();
            // The subject repeats the id; only the `id` field is patched (subjects need not differ).
            slots.push((base + id_at, base + stamp_at));
            subjects.push(base + subject_at);
            bytes.extend_from_slice(event.as_bytes());
        }
        bytes.push(b']');
        Self {
            bytes,
            slots,
            subjects,
            subject_keys: None,
        }
    }

    /// The same, with subjects `/bench/<id modulo keys>`: `keys` ordering keys when a
    /// subscription orders by subject (the `ordering` scenario).
    pub fn with_subject_keys(mut self, keys: Option<u64>) -> Self {
        self.subject_keys = keys.map(|k| k.max(1));
        self
    }

    pub fn events(&self) -> usize {
        self.slots.len()
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// A body whose events have ids `first_id…` and the send time `stamp_us`.
    pub fn body(&self, first_id: u64, stamp_us: u64) -> Vec<u8> {
        let mut body = self.bytes.clone();
        let stamp = format!("{stamp_us:0STAMP_DIGITS$}");
        for (i, (id_at, stamp_at)) in self.slots.iter().enumerate() {
            let id = format!("{:0ID_DIGITS$x}", first_id + i as u64);
            body[*id_at..*id_at + ID_DIGITS].copy_from_slice(&id.as_bytes()[..ID_DIGITS]);
            body[*stamp_at..*stamp_at + STAMP_DIGITS].copy_from_slice(&stamp.as_bytes()[..STAMP_DIGITS]);
            if let Some(keys) = self.subject_keys {
                let at = self.subjects[i];
                let key = format!("{:0ID_DIGITS$x}", (first_id + i as u64) % keys);
                body[at..at + ID_DIGITS].copy_from_slice(&key.as_bytes()[..ID_DIGITS]);
            }
        }
        body
    }
}

/// Where to publish.
#[derive(Clone)]
pub struct Target {
    pub http: reqwest::Client,
    pub url: String,
    pub key: String,
}

impl Target {
    pub fn new(http: reqwest::Client, ingress_url: &str, topic: &str, key: &str) -> Self {
        Self {
            http,
            url: format!("{ingress_url}/topics/{topic}/api/events?api-version=2018-01-01"),
            key: key.to_owned(),
        }
    }

    /// Sends one body; a `503` (Redis slow to answer) is retried after a pause. Returns
    /// how many 503s were met.
    pub async fn send(&self, body: Vec<u8>) -> anyhow::Result<u64> {
        let mut refused = 0;
        let mut backoff = Duration::from_millis(20);
        loop {
            let response = self
                .http
                .post(&self.url)
                .header("content-type", "application/json")
                .header("aeg-sas-key", &self.key)
                .body(body.clone())
                .send()
                .await?;
            let status = response.status();
            if status.is_success() {
                return Ok(refused);
            }
            let text = response.text().await.unwrap_or_default();
            if status.as_u16() != 503 {
                bail!("publish: {status} {text}");
            }
            refused += 1;
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }
}

/// Holds publishers back while more than `limit` deliveries are outstanding (published
/// × `fanout` − received since the window opened): the publish rate then settles at the
/// rate eg delivers, and the backlog — hence latency — stays bounded. What an earlier
/// window left outstanding counts as received when it arrives, so for a while after a
/// window opens the backlog may exceed `limit` by that much (at most another `limit`).
pub struct Window {
    limit: u64,
    fanout: u64,
    receiver: Arc<Receiver>,
    /// Events the receiver had counted when the window opened.
    received_before: u64,
}

impl Window {
    pub fn new(limit: u64, fanout: u64, receiver: Arc<Receiver>) -> Self {
        Self {
            limit,
            fanout,
            received_before: receiver.events(),
            receiver,
        }
    }

    fn outstanding(&self, published: u64) -> u64 {
        let received = self.receiver.events().saturating_sub(self.received_before);
        (published * self.fanout).saturating_sub(received)
    }
}

/// What the publishers did (counters shared with the caller while they run).
#[derive(Default)]
pub struct Progress {
    /// Events accepted (answered 200).
    pub published: AtomicU64,
    pub requests: AtomicU64,
    /// 503s met and retried.
    pub refused: AtomicU64,
    /// Publish request round trips (send → 200), µs.
    pub request_latency: Histogram,
    next_id: AtomicU64,
    stop: AtomicBool,
}

impl Progress {
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `connections` publishers, each sending its next request when the last was answered,
/// until [`Progress::stop`] (or until `total` events, if given). Returns the tasks.
pub fn closed(
    target: &Target,
    template: &Template,
    connections: usize,
    total: Option<u64>,
    window: Option<Arc<Window>>,
    progress: &Arc<Progress>,
) -> Vec<tokio::task::JoinHandle<anyhow::Result<()>>> {
    (0..connections)
        .map(|_| {
            let (target, template, window, progress) =
                (target.clone(), template.clone(), window.clone(), Arc::clone(progress));
            tokio::spawn(async move {
                let per_request = template.events() as u64;
                while !progress.stop.load(Ordering::Relaxed) {
                    if let Some(w) = &window {
                        while w.outstanding(progress.published()) > w.limit {
                            if progress.stop.load(Ordering::Relaxed) {
                                return Ok(());
                            }
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                    let first = progress.next_id.fetch_add(per_request, Ordering::Relaxed);
                    if total.is_some_and(|t| first >= t) {
                        return Ok(());
                    }
                    let sent = Instant::now();
                    let refused = target.send(template.body(first, now_micros())).await?;
                    progress.request_latency.record(sent.elapsed().as_micros() as u64);
                    progress.refused.fetch_add(refused, Ordering::Relaxed);
                    progress.requests.fetch_add(1, Ordering::Relaxed);
                    progress.published.fetch_add(per_request, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect()
}

/// Publishes `rate` requests per second (each of the template's events) for `duration`,
/// each request on its own task at its scheduled time. Returns when every request was
/// answered; a failed request fails the run.
pub async fn fixed_rate(
    target: &Target,
    template: &Template,
    rate: f64,
    duration: Duration,
    progress: &Arc<Progress>,
) -> anyhow::Result<()> {
    let period = Duration::from_secs_f64(1.0 / rate.max(1e-3));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let until = Instant::now() + duration;
    let mut tasks = tokio::task::JoinSet::new();
    let per_request = template.events() as u64;
    while Instant::now() < until {
        tick.tick().await;
        let (target, progress) = (target.clone(), Arc::clone(progress));
        let first = progress.next_id.fetch_add(per_request, Ordering::Relaxed);
        let body = template.body(first, now_micros());
        tasks.spawn(async move {
            let sent = Instant::now();
            let refused = target.send(body).await?;
            progress.request_latency.record(sent.elapsed().as_micros() as u64);
            progress.refused.fetch_add(refused, Ordering::Relaxed);
            progress.requests.fetch_add(1, Ordering::Relaxed);
            progress.published.fetch_add(per_request, Ordering::Relaxed);
            Ok::<(), anyhow::Error>(())
        });
        while let Some(done) = tasks.try_join_next() {
            done??;
        }
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

/// Waits for publisher tasks; the first error wins.
pub async fn join(tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>) -> anyhow::Result<()> {
    let mut first = Ok(());
    for t in tasks {
        let result = t.await.map_err(anyhow::Error::from).and_then(|r| r);
        if first.is_ok() {
            first = result;
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::stamps;

    #[test]
    fn bodies_are_valid_json_with_patched_ids_and_stamps() -> anyhow::Result<()> {
        let t = Template::new(3, 1024);
        let body = t.body(0xabc, 1_700_000_000_123_456);
        let parsed: serde_json::Value = serde_json::from_slice(&body)?;
        let events = parsed.as_array().map(Vec::len);
        assert_eq!(events, Some(3));
        assert_eq!(parsed[1]["id"], "0000000000000abd");
        assert_eq!(parsed[2]["data"][STAMP_FIELD], 1_700_000_000_123_456u64);
        let one = serde_json::to_vec(&parsed[0])?.len();
        assert!(one.abs_diff(1024) <= 2, "{one}");
        assert_eq!(stamps(&body).collect::<Vec<_>>(), [1_700_000_000_123_456; 3]);
        assert_eq!(t.events(), 3);
        assert!(t.len() > 3 * 1024);
        Ok(())
    }

    #[test]
    fn subjects_cycle_over_the_keys_asked_for_and_are_alike_otherwise() -> anyhow::Result<()> {
        let subjects = |t: &Template| -> anyhow::Result<Vec<String>> {
            let parsed: serde_json::Value = serde_json::from_slice(&t.body(2, 1_700_000_000_123_456))?;
            Ok((0..4)
                .map(|i| parsed[i]["subject"].as_str().unwrap_or_default().to_owned())
                .collect())
        };
        let keyed = subjects(&Template::new(4, 1024).with_subject_keys(Some(3)))?;
        let tail = |n: u64| format!("/bench/{n:016x}");
        assert_eq!(keyed, [tail(2), tail(0), tail(1), tail(2)]);
        let alike = subjects(&Template::new(4, 1024))?;
        assert!(alike.iter().all(|s| *s == alike[0]), "{alike:?}");
        Ok(())
    }
}
