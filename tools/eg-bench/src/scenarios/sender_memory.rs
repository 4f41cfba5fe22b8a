//! `sender-memory`: how much memory one eg-sender needs while a large backlog waits for
//! a slow endpoint.
//!
//! One topic, one subscription (batching off) to an in-process receiver that answers
//! every delivery `200` after `--receiver-delay`. The sender is started first and
//! sampled idle; then `--backlog` events (`--event-bytes` each, `--batch` per publish
//! request) are published, and the sender is sampled for `--duration` more while it
//! works through them. Every `--interval` the sampler reads the sender's `VmRSS` and
//! `VmHWM` from `/proc/<pid>/status`, the receiver's counters, and the queue depths
//! straight from Redis (ready, held by senders, waiting for a retry).
//!
//! The sender reads only as many deliveries as it has free attempt slots, so its memory
//! should depend on `--concurrency`, not on the backlog: RSS should level off while
//! draining, whatever the backlog. The figures to look at are the peak (`VmHWM`), the
//! RSS slope while draining, and deliveries/s (at most concurrency ÷ receiver delay).

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::launcher::{PARTITIONS, PREFIX};
use crate::load::{self, Progress, Template};
use crate::memory::{self, Summary, slope};
use crate::receiver::{Behaviour, Counts, Receiver};
use crate::report::{Row, Target};
use anyhow::{Context, bail};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SCENARIO: Scenario = Scenario {
    name: "sender-memory",
    summary: "8: eg-sender's RSS while a 1-million backlog drains to a slow endpoint",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench sender-memory: eg-sender's memory (VmRSS/VmHWM) while a backlog of events
drains to a slow endpoint.

usage: eg-bench sender-memory [options]

  --backlog N            events published to build the backlog (default 1000000;
                         quick 20000)
  --event-bytes N        size of each published event, JSON (default 1024)
  --batch N              events per publish request (default 100)
  --publishers N         publish requests in flight at once (default 8)
  --receiver-delay D     how long the endpoint takes to answer 200 (default 50ms)
  --concurrency N        EG__SENDER__CONCURRENCY of the sender (default 64)
  --delivery-timeout D   EG__DELIVERY__TIMEOUT; must exceed the receiver delay
                         (default 30s; the visibility timeout is three times it)
  --idle D               how long the sender is sampled before publishing (default 3s)
  --duration D           how long it is sampled after the backlog is published
                         (default 30s; quick 5s)
  --interval D           sampling interval (default 250ms)
  --scrape-every D       GET the sender's /metrics this often, as Prometheus would
                         (default 0s: never; see the note in the report)
  --sender-env K=V,…     more environment for the sender only (e.g. EG__SENDER__…
                         settings, MALLOC_ARENA_MAX=2)

";

struct Options {
    backlog: usize,
    event_bytes: usize,
    batch: usize,
    publishers: usize,
    receiver_delay: Duration,
    concurrency: usize,
    delivery_timeout: Duration,
    idle: Duration,
    duration: Duration,
    interval: Duration,
    sender_env: Vec<(String, String)>,
    scrape_every: Duration,
}

impl Options {
    fn parse(mut f: Flags, quick: bool) -> anyhow::Result<Self> {
        let options = Self {
            backlog: f.number("backlog", if quick { 20_000 } else { 1_000_000 })?,
            event_bytes: f.number("event-bytes", 1024)?,
            batch: f.number("batch", 100)?,
            publishers: f.number("publishers", 8)?,
            receiver_delay: f.duration("receiver-delay", Duration::from_millis(50))?,
            concurrency: f.number("concurrency", 64)?,
            delivery_timeout: f.duration("delivery-timeout", Duration::from_secs(30))?,
            idle: f.duration("idle", Duration::from_secs(3))?,
            duration: f.duration("duration", Duration::from_secs(if quick { 5 } else { 30 }))?,
            interval: f.duration("interval", Duration::from_millis(250))?,
            scrape_every: f.duration("scrape-every", Duration::ZERO)?,
            sender_env: match f.text("sender-env")? {
                None => Vec::new(),
                Some(list) => list
                    .split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(|pair| {
                        pair.split_once('=')
                            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                            .with_context(|| format!("--sender-env {pair:?}: not KEY=VALUE"))
                    })
                    .collect::<anyhow::Result<_>>()?,
            },
        };
        f.finish()?;
        if options.delivery_timeout <= options.receiver_delay {
            bail!(
                "--delivery-timeout ({:?}) must exceed --receiver-delay ({:?}), or every attempt times out",
                options.delivery_timeout,
                options.receiver_delay
            );
        }
        if options.batch == 0 || options.publishers == 0 || options.concurrency == 0 || options.interval.is_zero() {
            bail!("--batch, --publishers, --concurrency and --interval must be positive");
        }
        Ok(options)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    Idle = 0,
    Publishing = 1,
    Draining = 2,
}

impl Phase {
    const ALL: [Phase; 3] = [Phase::Idle, Phase::Publishing, Phase::Draining];

    fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Publishing => "publishing",
            Phase::Draining => "draining",
        }
    }

    fn from_u8(raw: u8) -> Self {
        Self::ALL
            .into_iter()
            .find(|p| *p as u8 == raw)
            .unwrap_or(Phase::Draining)
    }
}

/// Queue depths over every partition.
#[derive(Debug, Clone, Copy, Default)]
struct Depths {
    /// In the ready streams, not yet read by a sender.
    ready: u64,
    /// Read by a sender and not yet settled (the pending lists).
    held: u64,
    /// Waiting in the retry sets.
    retry: u64,
}

impl Depths {
    fn remaining(self) -> u64 {
        self.ready + self.held + self.retry
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    phase: Phase,
    at: Duration,
    memory: memory::Memory,
    delivered: u64,
    receiver_in_flight: u64,
    depths: Option<Depths>,
}

fn run(ctx: &mut Ctx, flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let o = Options::parse(flags, ctx.quick)?;
        let report = measure(ctx, &o).await?;
        report.print(&o);
        let mut row = Row::new(
            "8 memory",
            format!(
                "eg-sender RSS, backlog of {} events",
                crate::report::thousands(o.backlog as f64)
            ),
        );
        row.rate = Some((report.peak_rss_mib, "MiB peak RSS"));
        row.figures
            .push(("peak RSS (VmHWM)".into(), format!("{:.1} MiB", report.peak_rss_mib)));
        row.figures.push((
            "RSS while draining".into(),
            format!(
                "first 10 s {} → last 10 s {}; slope {}",
                opt(report.drain_first_10s_mib, "MiB"),
                opt(report.drain_last_10s_mib, "MiB"),
                opt(report.drain_rss_slope, "MiB/min")
            ),
        ));
        row.figures.push((
            "deliveries/s while draining".into(),
            format!(
                "{:.0} (at most concurrency ÷ endpoint delay = {:.0})",
                report.drain_deliveries_per_second,
                o.concurrency as f64 / o.receiver_delay.as_secs_f64().max(1e-9)
            ),
        ));
        row.targets.push(Target::at_most(
            "eg-sender RSS whatever the backlog",
            report.peak_rss_mib,
            100.0,
            "MiB",
            1,
        ));
        row.notes.push(format!(
            "concurrency {}, endpoint answers 200 after {:?}, appendfsync everysec; the backlog is published while the sender runs",
            o.concurrency, o.receiver_delay
        ));
        row.details = report.to_json(&o);
        Ok(vec![row])
    })
}

fn opt(v: Option<f64>, unit: &str) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.1} {unit}"))
}

async fn measure(ctx: &Ctx, o: &Options) -> anyhow::Result<Report> {
    let mut setup = Setup::new(Fsync::EverySec);
    setup.senders = 0;
    setup.receiver = Behaviour {
        delay: o.receiver_delay,
        fail_every: 0,
        refuse_all: false,
    };
    setup.env = vec![
        (
            "EG__DELIVERY__TIMEOUT",
            humantime::format_duration(o.delivery_timeout).to_string(),
        ),
        (
            "EG__DELIVERY__VISIBILITY_TIMEOUT",
            humantime::format_duration(o.delivery_timeout * 3).to_string(),
        ),
    ];
    let mut d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    eprintln!("sender-memory: logs in {}", d.launcher.run_dir().display());
    let mut sender_env = vec![("EG__SENDER__CONCURRENCY", o.concurrency.to_string())];
    sender_env.extend(o.sender_env.iter().map(|(k, v)| (k.as_str(), v.clone())));
    d.add_sender(&sender_env).await?;
    let sender = d.senders.first().context("no sender")?;
    let pid = sender.pid();
    let started = Instant::now();
    let phase = Arc::new(AtomicU8::new(Phase::Idle as u8));
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let sampler = tokio::spawn(sample(
        pid,
        o.interval,
        started,
        Arc::clone(&phase),
        Arc::clone(&samples),
        d.launcher.redis_url(),
        Arc::clone(&d.receiver),
    ));

    let scraper = (!o.scrape_every.is_zero()).then(|| {
        let (http, url, every) = (
            d.launcher.http().clone(),
            format!("{}/metrics", sender.url),
            o.scrape_every,
        );
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                if let Ok(response) = http.get(&url).send().await {
                    let _ = response.bytes().await;
                }
            }
        })
    });

    tokio::time::sleep(o.idle).await;
    phase.store(Phase::Publishing as u8, Ordering::SeqCst);
    let publish_started = Instant::now();
    let progress = Arc::new(Progress::default());
    let template = Template::new(o.batch, o.event_bytes);
    let tasks = load::closed(
        &d.target,
        &template,
        o.publishers,
        Some(o.backlog as u64),
        None,
        &progress,
    );
    load::join(tasks).await?;
    let published = progress.published() as usize;
    let publish_took = publish_started.elapsed();
    eprintln!(
        "sender-memory: published {published} events in {publish_took:.1?} ({:.0}/s); sampling for {:?}",
        published as f64 / publish_took.as_secs_f64(),
        o.duration
    );
    phase.store(Phase::Draining as u8, Ordering::SeqCst);
    let drain_started = started.elapsed();
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    tick.tick().await;
    let drain_until = Instant::now() + o.duration;
    while Instant::now() < drain_until {
        tokio::select! {
            _ = tick.tick() => print_progress(&samples),
            _ = tokio::time::sleep_until(drain_until.into()) => {}
        }
    }
    sampler.abort();
    if let Some(scraper) = scraper {
        scraper.abort();
    }
    let final_memory = memory::read(pid).context("the sender is gone")?;
    let samples = samples.lock().map(|s| s.clone()).unwrap_or_default();
    let counts = d.receiver.counts();
    d.finish(ctx.keep);
    Ok(Report::new(
        samples,
        final_memory,
        counts,
        published,
        publish_took,
        drain_started,
    ))
}

async fn sample(
    pid: u32,
    interval: Duration,
    started: Instant,
    phase: Arc<AtomicU8>,
    samples: Arc<Mutex<Vec<Sample>>>,
    redis_url: String,
    receiver: Arc<Receiver>,
) {
    let keys = eg_store::Keyspace::new(PREFIX, PARTITIONS);
    let mut redis = match redis::Client::open(redis_url) {
        Ok(client) => client.get_multiplexed_async_connection().await.ok(),
        Err(_) => None,
    };
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Ok(memory) = memory::read(pid) else { return };
        let depths = match redis.as_mut() {
            Some(conn) => depths(conn, &keys).await.ok(),
            None => None,
        };
        let counts = receiver.counts();
        let sample = Sample {
            phase: Phase::from_u8(phase.load(Ordering::SeqCst)),
            at: started.elapsed(),
            memory,
            delivered: counts.events,
            receiver_in_flight: counts.in_flight,
            depths,
        };
        if let Ok(mut list) = samples.lock() {
            list.push(sample);
        }
    }
}

async fn depths(conn: &mut redis::aio::MultiplexedConnection, keys: &eg_store::Keyspace) -> anyhow::Result<Depths> {
    let mut total = Depths::default();
    for partition in keys.all_partitions() {
        let mut pipe = redis::pipe();
        pipe.xlen(partition.ready())
            .cmd("XPENDING")
            .arg(partition.ready())
            .arg(eg_store::keyspace::SENDERS_GROUP)
            .zcard(partition.retry());
        let (length, pending, retry): (u64, redis::Value, u64) = pipe.query_async(conn).await?;
        let held = match pending {
            redis::Value::Array(items) => items
                .first()
                .and_then(|v| redis::from_redis_value_ref::<u64>(v).ok())
                .unwrap_or(0),
            _ => 0,
        };
        total.ready += length.saturating_sub(held);
        total.held += held;
        total.retry += retry;
    }
    Ok(total)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn print_progress(samples: &Mutex<Vec<Sample>>) {
    let Ok(list) = samples.lock() else { return };
    let Some(last) = list.last() else { return };
    let remaining = last.depths.map_or("?".to_owned(), |d| d.remaining().to_string());
    let held = last.depths.map_or("?".to_owned(), |d| d.held.to_string());
    eprintln!(
        "  t={:>6.1}s  RSS {:>7.1} MiB  HWM {:>7.1} MiB  delivered {:>7}  held by the sender {:>5}  backlog {:>7}",
        last.at.as_secs_f64(),
        mib(last.memory.rss_kib),
        mib(last.memory.hwm_kib),
        last.delivered,
        held,
        remaining,
    );
}

struct PhaseFigures {
    phase: Phase,
    seconds: f64,
    rss_mib: Option<Summary>,
    delivered: u64,
}

struct Report {
    samples: Vec<Sample>,
    phases: Vec<PhaseFigures>,
    peak_rss_mib: f64,
    final_rss_mib: f64,
    published: usize,
    publish_seconds: f64,
    /// From the end of publishing until the backlog was empty (or sampling ended).
    drain_seconds: f64,
    drain_deliveries_per_second: f64,
    /// RSS slope while draining, MiB per minute.
    drain_rss_slope: Option<f64>,
    drain_first_10s_mib: Option<f64>,
    drain_last_10s_mib: Option<f64>,
    remaining: Option<Depths>,
    most_held: u64,
    /// The receiver's counters at the end.
    receiver: Counts,
}

impl Report {
    fn new(
        samples: Vec<Sample>,
        final_memory: memory::Memory,
        counts: Counts,
        published: usize,
        publish_took: Duration,
        drain_started: Duration,
    ) -> Self {
        let of = |phase: Phase| samples.iter().filter(move |s| s.phase == phase);
        let phases = Phase::ALL
            .into_iter()
            .map(|phase| {
                let list: Vec<&Sample> = of(phase).collect();
                let rss: Vec<f64> = list.iter().map(|s| mib(s.memory.rss_kib)).collect();
                let seconds = match (list.first(), list.last()) {
                    (Some(a), Some(b)) => (b.at - a.at).as_secs_f64(),
                    _ => 0.0,
                };
                let delivered = match (list.first(), list.last()) {
                    (Some(a), Some(b)) => b.delivered - a.delivered,
                    _ => 0,
                };
                PhaseFigures {
                    phase,
                    seconds,
                    rss_mib: Summary::of(&rss),
                    delivered,
                }
            })
            .collect();
        let draining: Vec<&Sample> = of(Phase::Draining).collect();
        let points: Vec<(f64, f64)> = draining
            .iter()
            .map(|s| (s.at.as_secs_f64() / 60.0, mib(s.memory.rss_kib)))
            .collect();
        let window_mean = |from: f64, to: f64| {
            let values: Vec<f64> = draining
                .iter()
                .filter(|s| (from..to).contains(&s.at.as_secs_f64()))
                .map(|s| mib(s.memory.rss_kib))
                .collect();
            Summary::of(&values).map(|s| s.mean)
        };
        let drain_start = drain_started.as_secs_f64();
        let drain_end = draining.last().map_or(drain_start, |s| s.at.as_secs_f64());
        let delivered_at_start = draining.first().map_or(0, |s| s.delivered);
        // Deliveries/s count only while there was a backlog: up to the first sample that
        // saw it empty (the last one if it never emptied).
        let busy_until = draining
            .iter()
            .find(|s| s.depths.is_some_and(|d| d.remaining() == 0))
            .or(draining.last());
        let delivered_at_end = busy_until.map_or(0, |s| s.delivered);
        let busy_end = busy_until.map_or(drain_start, |s| s.at.as_secs_f64());
        let drain_seconds = busy_end - draining.first().map_or(drain_start, |s| s.at.as_secs_f64());
        let peak_sampled = samples.iter().map(|s| s.memory.rss_kib).max().unwrap_or(0);
        Self {
            phases,
            peak_rss_mib: mib(final_memory.hwm_kib.max(peak_sampled)),
            final_rss_mib: mib(final_memory.rss_kib),
            published,
            publish_seconds: publish_took.as_secs_f64(),
            drain_seconds,
            drain_deliveries_per_second: if drain_seconds > 0.0 {
                (delivered_at_end - delivered_at_start) as f64 / drain_seconds
            } else {
                0.0
            },
            drain_rss_slope: slope(&points),
            drain_first_10s_mib: window_mean(drain_start, drain_start + 10.0),
            drain_last_10s_mib: window_mean(drain_end - 10.0, drain_end + 1.0),
            remaining: samples.iter().rev().find_map(|s| s.depths),
            most_held: samples
                .iter()
                .filter_map(|s| s.depths.map(|d| d.held))
                .max()
                .unwrap_or(0),
            receiver: counts,
            samples,
        }
    }

    fn print(&self, o: &Options) {
        println!();
        println!(
            "sender-memory: backlog {} events of {} B ({} per request), receiver delay {:?}, sender concurrency {}, delivery timeout {:?}",
            o.backlog, o.event_bytes, o.batch, o.receiver_delay, o.concurrency, o.delivery_timeout
        );
        if o.scrape_every.is_zero() {
            println!("the sender's /metrics is never scraped");
        } else {
            println!("the sender's /metrics is scraped every {:?}", o.scrape_every);
        }
        if !o.sender_env.is_empty() {
            let env: Vec<String> = o.sender_env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("sender environment: {}", env.join(" "));
        }
        println!();
        println!(
            "{:<11} {:>8} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "phase", "seconds", "samples", "RSS min", "RSS p50", "RSS p95", "RSS max", "delivered"
        );
        for p in &self.phases {
            let cell = |f: fn(&Summary) -> f64| p.rss_mib.as_ref().map_or("-".to_owned(), |s| format!("{:.1}", f(s)));
            println!(
                "{:<11} {:>8.1} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
                p.phase.name(),
                p.seconds,
                p.rss_mib.map_or(0, |s| s.count),
                cell(|s| s.min),
                cell(|s| s.p50),
                cell(|s| s.p95),
                cell(|s| s.max),
                p.delivered
            );
        }
        println!("(RSS in MiB)");
        println!();
        let opt = |v: Option<f64>, unit: &str| v.map_or("-".to_owned(), |v| format!("{v:.1} {unit}"));
        println!("peak RSS (VmHWM)                 {:.1} MiB", self.peak_rss_mib);
        println!("RSS at the end                   {:.1} MiB", self.final_rss_mib);
        println!(
            "RSS while draining               first 10 s {} → last 10 s {}; slope {}",
            opt(self.drain_first_10s_mib, "MiB"),
            opt(self.drain_last_10s_mib, "MiB"),
            opt(self.drain_rss_slope, "MiB/min")
        );
        println!(
            "published                        {} events in {:.1} s ({:.0}/s)",
            self.published,
            self.publish_seconds,
            self.published as f64 / self.publish_seconds.max(1e-9)
        );
        println!(
            "deliveries/s while draining      {:.1} over {:.0} s with a backlog (at most concurrency ÷ delay = {:.1})",
            self.drain_deliveries_per_second,
            self.drain_seconds,
            o.concurrency as f64 / o.receiver_delay.as_secs_f64().max(1e-9)
        );
        println!(
            "most deliveries held by sender   {} (pending in Redis); most requests at the receiver at once {}",
            self.most_held, self.receiver.most_in_flight
        );
        match self.remaining {
            Some(d) => println!(
                "backlog remaining                {} (ready {}, held {}, retry {})",
                d.remaining(),
                d.ready,
                d.held,
                d.retry
            ),
            None => println!("backlog remaining                unknown (Redis not sampled)"),
        }
    }

    fn to_json(&self, o: &Options) -> Value {
        let depths = |d: Option<Depths>| {
            d.map_or(
                Value::Null,
                |d| json!({"remaining": d.remaining(), "ready": d.ready, "held": d.held, "retry": d.retry}),
            )
        };
        json!({
            "options": {
                "backlog": o.backlog,
                "eventBytes": o.event_bytes,
                "eventsPerRequest": o.batch,
                "publishers": o.publishers,
                "receiverDelayMs": o.receiver_delay.as_millis() as u64,
                "concurrency": o.concurrency,
                "deliveryTimeoutMs": o.delivery_timeout.as_millis() as u64,
                "durationMs": o.duration.as_millis() as u64,
                "intervalMs": o.interval.as_millis() as u64,
                "scrapeEveryMs": o.scrape_every.as_millis() as u64,
                "senderEnv": o.sender_env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            },
            "results": {
                "peakRssMiB": self.peak_rss_mib,
                "finalRssMiB": self.final_rss_mib,
                "phases": self.phases.iter().map(|p| json!({
                    "phase": p.phase.name(),
                    "seconds": p.seconds,
                    "rssMiB": p.rss_mib.map_or(Value::Null, Summary::to_json),
                    "delivered": p.delivered,
                })).collect::<Vec<_>>(),
                "drainRssSlopeMiBPerMinute": self.drain_rss_slope,
                "drainRssFirst10sMiB": self.drain_first_10s_mib,
                "drainRssLast10sMiB": self.drain_last_10s_mib,
                "published": self.published,
                "publishSeconds": self.publish_seconds,
                "drainSeconds": self.drain_seconds,
                "deliveriesPerSecond": self.drain_deliveries_per_second,
                "mostHeldBySender": self.most_held,
                "receiver": {
                    "requests": self.receiver.requests,
                    "events": self.receiver.events,
                    "mostInFlight": self.receiver.most_in_flight,
                },
                "backlogRemaining": depths(self.remaining),
            },
            "samples": self.samples.iter().map(|s| json!({
                "tMs": s.at.as_millis() as u64,
                "phase": s.phase.name(),
                "rssKiB": s.memory.rss_kib,
                "hwmKiB": s.memory.hwm_kib,
                "delivered": s.delivered,
                "receiverInFlight": s.receiver_in_flight,
                "backlog": depths(s.depths),
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_refuse_a_timeout_the_receiver_always_exceeds() -> anyhow::Result<()> {
        let flags = |args: &[&str]| Flags::parse(args.iter().map(|s| (*s).to_owned()));
        let o = Options::parse(flags(&["--backlog", "10", "--sender-env", "A=1,B=x=y"])?, false)?;
        assert_eq!(
            o.sender_env,
            [("A".to_owned(), "1".to_owned()), ("B".to_owned(), "x=y".to_owned())]
        );
        assert!(Options::parse(flags(&["--sender-env", "A"])?, false).is_err());
        assert_eq!((o.backlog, o.concurrency, o.batch), (10, 64, 100));
        assert_eq!(Options::parse(flags(&[])?, true)?.backlog, 20_000);
        assert!(Options::parse(flags(&["--receiver-delay", "40s"])?, false).is_err());
        assert!(Options::parse(flags(&["--nonsense", "1"])?, false).is_err());
        Ok(())
    }
}
