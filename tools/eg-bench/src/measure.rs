//! One steady-state measurement against a [`Deployment`]: publishers run from before
//! the window (warm-up) to its end; inside the window the bench counts what was
//! published and what the receiver got, records latencies, and reads every process's
//! CPU time at both ends. Afterwards it waits (bounded) for what was published to
//! arrive, so a run also shows whether anything went missing.

use crate::cpu::Usage;
use crate::ctx::Ctx;
use crate::deployment::Deployment;
use crate::histogram::Latency;
use crate::load::{self, Progress, Template, Window};
use crate::receiver::Counts;
use crate::redis_stats::{CommandStats, PerUnit};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Load {
    pub connections: usize,
    pub events_per_request: usize,
    pub event_bytes: usize,
    /// Most deliveries outstanding (published × fan-out − received) before publishers
    /// wait; `None` publishes as fast as ingress answers.
    pub window: Option<u64>,
    /// Deliveries per published event (matching subscriptions).
    pub fanout: u64,
    pub warmup: Duration,
    pub duration: Duration,
    /// How long to wait after the window for every delivery to arrive (0: do not wait).
    pub drain: Duration,
    /// Distinct event subjects (ordering keys); `None`: every event has the same one.
    pub keys: Option<u64>,
}

impl Load {
    /// The end-to-end load most scenarios use: 1 KB events, 100 per request over
    /// `connections`, one delivery each, at most `window` outstanding, a short warm-up and
    /// a drain; a scenario changes what it needs with struct update syntax.
    /// Publishing alone (no sender draining): 1 KB events, 100 per request, unbounded.
    pub fn publish_only(ctx: &Ctx, connections: usize, duration: Duration) -> Self {
        Self {
            connections,
            events_per_request: 100,
            event_bytes: 1024,
            window: None,
            fanout: 1,
            warmup: ctx.seconds(2, 1),
            duration,
            drain: Duration::ZERO,
            keys: None,
        }
    }

    pub fn end_to_end(ctx: &Ctx, connections: usize, window: u64, duration: Duration) -> Self {
        Self {
            connections,
            events_per_request: 100,
            event_bytes: 1024,
            window: Some(window),
            fanout: 1,
            warmup: ctx.seconds(3, 2),
            duration,
            drain: ctx.seconds(30, 10),
            keys: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Measured {
    pub seconds: f64,
    /// Events accepted by ingress in the window.
    pub published: u64,
    /// Events received (answered 2xx) in the window.
    pub received: u64,
    pub latency: Latency,
    /// Publish request round trips in the window.
    pub request_latency: Latency,
    pub cpu: Usage,
    /// The receiver's counters at both ends of the window and after draining.
    pub at_start: Counts,
    pub at_end: Counts,
    pub after_drain: Counts,
    /// Deliveries still missing when draining stopped (published × fan-out − received).
    pub missing: u64,
    pub refused: u64,
    /// Redis commands per event received (per event published when nothing is received).
    pub redis: PerUnit,
}

impl Measured {
    pub fn published_per_second(&self) -> f64 {
        self.published as f64 / self.seconds
    }

    pub fn received_per_second(&self) -> f64 {
        self.received as f64 / self.seconds
    }

    pub fn to_json(&self) -> Value {
        json!({
            "windowSeconds": self.seconds,
            "publishedInWindow": self.published,
            "receivedInWindow": self.received,
            "publishedPerSecond": self.published_per_second().round(),
            "receivedPerSecond": self.received_per_second().round(),
            "publishToReceipt": self.latency.to_json(),
            "publishRequest": self.request_latency.to_json(),
            "cpuSeconds": self.cpu.to_json(),
            "receiver": {
                "requests": self.after_drain.requests, "failedOnPurpose": self.after_drain.failed,
                "events": self.after_drain.events, "mostInFlight": self.after_drain.most_in_flight,
            },
            "missingAfterDrain": self.missing,
            "publishRefused503": self.refused,
            "redisCommandsPerUnit": self.redis.to_json(),
        })
    }
}

pub async fn steady(d: &Deployment, load: &Load) -> anyhow::Result<Measured> {
    let template = Template::new(load.events_per_request, load.event_bytes).with_subject_keys(load.keys);
    let progress = Arc::new(Progress::default());
    let window = load
        .window
        .map(|limit| Arc::new(Window::new(limit, load.fanout, Arc::clone(&d.receiver))));
    let received_at_start_of_run = d.receiver.events();
    let tasks = load::closed(&d.target, &template, load.connections, None, window, &progress);
    let processes = d.processes();
    let mut redis = d.launcher.redis().await?;
    tokio::time::sleep(load.warmup).await;

    d.receiver.latency().reset();
    progress.request_latency.reset();
    let (cpu_before, published_before, received_before, refused_before) = (
        processes.sample(),
        progress.published(),
        d.receiver.events(),
        progress.refused.load(Ordering::Relaxed),
    );
    let at_start = d.receiver.counts();
    let commands_before = CommandStats::read(&mut redis).await?;
    let started = Instant::now();
    tokio::time::sleep(load.duration).await;
    let (cpu_after, published_after, received_after, seconds) = (
        processes.sample(),
        progress.published(),
        d.receiver.events(),
        started.elapsed().as_secs_f64(),
    );
    let commands_after = CommandStats::read(&mut redis).await?;
    let latency = d.receiver.latency().latency();
    let request_latency = progress.request_latency.latency();
    let at_end = d.receiver.counts();
    progress.stop();
    load::join(tasks).await?;

    // What this measurement owes on top of what the receiver had before it began.
    let owed = received_at_start_of_run + progress.published() * load.fanout;
    let drain_until = Instant::now() + load.drain;
    while d.receiver.events() < owed && Instant::now() < drain_until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after_drain = d.receiver.counts();
    let (published, received) = (published_after - published_before, received_after - received_before);
    let units = if received > 0 { received } else { published };
    Ok(Measured {
        redis: commands_after.per_unit_since(&commands_before, units.max(1) as f64),
        seconds,
        published,
        received,
        latency,
        request_latency,
        cpu: cpu_after.since(&cpu_before),
        at_start,
        at_end,
        after_drain,
        missing: if load.drain.is_zero() {
            0
        } else {
            owed.saturating_sub(after_drain.events)
        },
        refused: progress.refused.load(Ordering::Relaxed) - refused_before,
    })
}

/// The row of an end-to-end measurement: the receiver's rate (events, or deliveries when
/// `unit` says so), publish→receipt latency, CPU per process, and what a reader needs
/// to judge the run (publish rate, backlog bound, anything missing after the drain).
pub fn row(
    scenario: &str,
    variant: impl Into<String>,
    m: &Measured,
    load: &Load,
    unit: &'static str,
) -> crate::report::Row {
    use crate::report::thousands;
    let mut row = crate::report::Row::new(scenario, variant);
    row.rate = Some((m.received_per_second(), unit));
    row.latency = Some(m.latency);
    row.cpu = Some((m.cpu.clone(), m.seconds));
    row.figures.push((
        "published".into(),
        format!(
            "{} events/s ({} per request, {} connections)",
            thousands(m.published_per_second()),
            load.events_per_request,
            load.connections
        ),
    ));
    if let Some(limit) = load.window {
        row.figures.push((
            "backlog bound".into(),
            format!(
                "publishers wait while more than {} deliveries are outstanding",
                thousands(limit as f64)
            ),
        ));
    }
    row.figures.push((
        "publish request round trip".into(),
        format!(
            "p50 {:.1} ms, p99 {:.1} ms",
            m.request_latency.p50_ms, m.request_latency.p99_ms
        ),
    ));
    if !load.drain.is_zero() {
        row.figures.push((
            "after the window".into(),
            if m.missing == 0 {
                "every delivery owed arrived".to_owned()
            } else {
                format!(
                    "{} deliveries had not arrived {:?} after publishing stopped",
                    thousands(m.missing as f64),
                    load.drain
                )
            },
        ));
    }
    if m.refused > 0 {
        row.figures.push(("publish 503s retried".into(), m.refused.to_string()));
    }
    row.figures
        .push((format!("Redis per {}", unit_name(unit)), m.redis.brief(6)));
    row.details = m.to_json();
    row
}

/// `delivery` for `deliveries/s`.
pub fn unit_name(unit: &str) -> &str {
    match unit.trim_end_matches("/s") {
        "deliveries" => "delivery",
        "events" => "event",
        "records" => "record",
        "retries moved" => "retry moved",
        other => other,
    }
}
