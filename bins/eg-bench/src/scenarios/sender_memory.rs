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

use super::Scenario;
use crate::args::Flags;
use crate::cluster::{Cluster, PARTITIONS, PREFIX, Role};
use crate::memory::{self, Summary, slope};
use crate::receiver::{Counts, SlowReceiver};
use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const SCENARIO: Scenario = Scenario {
    name: "sender-memory",
    summary: "eg-sender's RSS while a large backlog drains to a slow endpoint",
    usage: USAGE,
    run: |flags| Box::pin(run(flags)),
};

const USAGE: &str = "\
eg-bench sender-memory: eg-sender's memory (VmRSS/VmHWM) while a backlog of events
drains to a slow endpoint.

usage: eg-bench sender-memory [options]

  --backlog N            events published to build the backlog (default 100000)
  --event-bytes N        size of each published event, JSON (default 1024)
  --batch N              events per publish request (default 100)
  --publishers N         publish requests in flight at once (default 4)
  --receiver-delay D     how long the endpoint takes to answer 200 (default 2s)
  --concurrency N        EG__SENDER__CONCURRENCY of the sender (default 64)
  --delivery-timeout D   EG__DELIVERY__TIMEOUT; must exceed the receiver delay
                         (default 30s; the visibility timeout is three times it)
  --idle D               how long the sender is sampled before publishing (default 3s)
  --duration D           how long it is sampled after the backlog is published (default 60s)
  --interval D           sampling interval (default 250ms)
  --scrape-every D       GET the sender's /metrics this often, as Prometheus would
                         (default 0s: never; see the note in the report)
  --sender-env K=V,…     more environment for the sender only (e.g. EG__SENDER__…
                         settings, MALLOC_ARENA_MAX=2)
  --bin-dir PATH         where eg-ingress, eg-sender, … are (default: next to eg-bench)
  --out PATH             the JSON report (default <bin-dir>/../eg-bench/sender-memory.json,
                         i.e. target/eg-bench/sender-memory.json)
  --keep                 keep the run directory (tier logs)
  -h, --help             this text
";

const TOPIC: &str = "bench";
const SUBSCRIPTION: &str = "slow";

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
    bin_dir: PathBuf,
    out: PathBuf,
    keep: bool,
}

impl Options {
    fn parse(mut f: Flags) -> anyhow::Result<Self> {
        let bin_dir = match f.path("bin-dir")? {
            Some(dir) => dir,
            None => Cluster::default_bin_dir()?,
        };
        let options = Self {
            backlog: f.number("backlog", 100_000)?,
            event_bytes: f.number("event-bytes", 1024)?,
            batch: f.number("batch", 100)?,
            publishers: f.number("publishers", 4)?,
            receiver_delay: f.duration("receiver-delay", Duration::from_secs(2))?,
            concurrency: f.number("concurrency", 64)?,
            delivery_timeout: f.duration("delivery-timeout", Duration::from_secs(30))?,
            idle: f.duration("idle", Duration::from_secs(3))?,
            duration: f.duration("duration", Duration::from_secs(60))?,
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
            out: match f.path("out")? {
                Some(out) => out,
                None => bin_dir
                    .parent()
                    .unwrap_or(&bin_dir)
                    .join("eg-bench")
                    .join("sender-memory.json"),
            },
            keep: f.switch("keep")?,
            bin_dir,
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

async fn run(flags: Flags) -> anyhow::Result<()> {
    let o = Options::parse(flags)?;
    let timeout = humantime::format_duration(o.delivery_timeout).to_string();
    let visibility = humantime::format_duration(o.delivery_timeout * 3).to_string();
    let cluster = Cluster::new(
        o.bin_dir.clone(),
        &[
            ("EG__DELIVERY__TIMEOUT", timeout),
            ("EG__DELIVERY__VISIBILITY_TIMEOUT", visibility),
        ],
    )?;
    eprintln!(
        "sender-memory: tiers from {}, logs in {}",
        cluster.bin_dir().display(),
        cluster.run_dir().display()
    );
    let (ingress, scheduler, deadletter) = tokio::join!(
        cluster.start(Role::Ingress, "ingress", &[]),
        cluster.start(Role::Scheduler, "scheduler", &[]),
        cluster.start(Role::DeadLetter, "deadletter", &[]),
    );
    let (ingress, _scheduler, _deadletter) = (ingress?, scheduler?, deadletter?);
    let receiver = Arc::new(SlowReceiver::start(o.receiver_delay).await?);

    cluster
        .admin(
            &ingress,
            Method::PUT,
            &format!("/topics/{TOPIC}"),
            Some(&json!({"properties": {"inputSchema": "EventGridSchema"}})),
        )
        .await?;
    let keys = cluster
        .admin(&ingress, Method::POST, &format!("/topics/{TOPIC}/listKeys"), None)
        .await?;
    let key = keys["key1"].as_str().context("no key1 in listKeys")?.to_owned();
    let subscription = json!({"properties": {
        "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": receiver.url()}},
    }});
    let created = cluster
        .admin(
            &ingress,
            Method::PUT,
            &format!("/topics/{TOPIC}/eventSubscriptions/{SUBSCRIPTION}"),
            Some(&subscription),
        )
        .await?;
    let state = created["properties"]["provisioningState"].as_str().unwrap_or_default();
    if state != "Succeeded" {
        bail!("the subscription is {state:?}, not Succeeded: {created}");
    }

    let mut sender_env = vec![("EG__SENDER__CONCURRENCY", o.concurrency.to_string())];
    sender_env.extend(o.sender_env.iter().map(|(k, v)| (k.as_str(), v.clone())));
    let sender = cluster.start(Role::Sender, "sender", &sender_env).await?;
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
        cluster.redis_url(),
        Arc::clone(&receiver),
    ));

    let scraper = (!o.scrape_every.is_zero()).then(|| {
        let (http, url, every) = (
            cluster.http().clone(),
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
    let published = publish(cluster.http(), &ingress.url, &key, &o).await?;
    let publish_took = publish_started.elapsed();
    eprintln!(
        "sender-memory: published {published} events in {publish_took:.1?} ({:.0}/s); sampling for {:?}",
        published as f64 / publish_took.as_secs_f64(),
        o.duration
    );
    phase.store(Phase::Draining as u8, Ordering::SeqCst);
    let drain_started = started.elapsed();
    let mut progress = tokio::time::interval(Duration::from_secs(5));
    progress.tick().await;
    let drain_until = Instant::now() + o.duration;
    while Instant::now() < drain_until {
        tokio::select! {
            _ = progress.tick() => print_progress(&samples),
            _ = tokio::time::sleep_until(drain_until.into()) => {}
        }
    }
    sampler.abort();
    if let Some(scraper) = scraper {
        scraper.abort();
    }
    let final_memory = memory::read(pid).context("the sender is gone")?;
    let samples = samples.lock().map(|s| s.clone()).unwrap_or_default();
    let counts = receiver.counts();

    let report = Report::new(samples, final_memory, counts, published, publish_took, drain_started);
    report.print(&o);
    let json = report.to_json(&o, cluster.settings());
    if let Some(dir) = o.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&o.out, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("write {}", o.out.display()))?;
    println!("JSON report: {}", o.out.display());
    drop(sender);
    if o.keep {
        println!("logs kept in {}", cluster.keep_run_dir().display());
    }
    Ok(())
}

/// Builds the backlog: `--backlog` events in requests of `--batch`, `--publishers` at a
/// time; a `503` (Redis slow to answer) is retried. Returns the events accepted.
async fn publish(http: &reqwest::Client, ingress: &str, key: &str, o: &Options) -> anyhow::Result<usize> {
    let requests = o.backlog.div_ceil(o.batch);
    let next = Arc::new(AtomicUsize::new(0));
    let url = format!("{ingress}/topics/{TOPIC}/api/events?api-version=2018-01-01");
    let pad = padding(o.event_bytes);
    let mut tasks = Vec::new();
    for _ in 0..o.publishers {
        let (http, url, key, next, pad) = (
            http.clone(),
            url.clone(),
            key.to_owned(),
            Arc::clone(&next),
            pad.clone(),
        );
        let (batch, backlog) = (o.batch, o.backlog);
        tasks.push(tokio::spawn(async move {
            let mut accepted = 0usize;
            loop {
                let request = next.fetch_add(1, Ordering::Relaxed);
                if request >= requests {
                    return Ok::<usize, anyhow::Error>(accepted);
                }
                let first = request * batch;
                let ids = first..(first + batch).min(backlog);
                let count = ids.len();
                let body: Vec<Value> = ids.map(|i| event(i, &pad)).collect();
                let body = serde_json::to_vec(&body)?;
                let mut backoff = Duration::from_millis(50);
                loop {
                    let response = http
                        .post(&url)
                        .header("content-type", "application/json")
                        .header("aeg-sas-key", &key)
                        .body(body.clone())
                        .send()
                        .await?;
                    let status = response.status();
                    if status.is_success() {
                        break;
                    }
                    let text = response.text().await.unwrap_or_default();
                    if status.as_u16() != 503 {
                        bail!("publish request {request}: {status} {text}");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
                accepted += count;
            }
        }));
    }
    let mut accepted = 0;
    for task in tasks {
        accepted += task.await??;
    }
    Ok(accepted)
}

/// The `data.pad` that makes an event serialise to about `event_bytes` bytes.
fn padding(event_bytes: usize) -> String {
    let bare = serde_json::to_vec(&event(0, "")).map_or(200, |v| v.len());
    "x".repeat(event_bytes.saturating_sub(bare + 4))
}

fn event(i: usize, pad: &str) -> Value {
    json!({
        "id": format!("bench-{i:07}"),
        "eventType": "Bench.Happened",
        "subject": format!("/bench/{i:07}"),
        "eventTime": "2026-01-01T00:00:00Z",
        "dataVersion": "1",
        "data": {"pad": pad},
    })
}

async fn sample(
    pid: u32,
    interval: Duration,
    started: Instant,
    phase: Arc<AtomicU8>,
    samples: Arc<Mutex<Vec<Sample>>>,
    redis_url: String,
    receiver: Arc<SlowReceiver>,
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

    fn to_json(&self, o: &Options, settings: &[(String, String)]) -> Value {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let settings: serde_json::Map<String, Value> = settings
            .iter()
            .filter(|(k, _)| k != "EG__ADMIN__TOKEN")
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let depths = |d: Option<Depths>| {
            d.map_or(
                Value::Null,
                |d| json!({"remaining": d.remaining(), "ready": d.ready, "held": d.held, "retry": d.retry}),
            )
        };
        json!({
            "scenario": "sender-memory",
            "finishedAtUnixSeconds": now,
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
                "binDir": o.bin_dir.display().to_string(),
            },
            "tierSettings": settings,
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
    fn events_have_about_the_asked_size() -> anyhow::Result<()> {
        for size in [512, 1024, 4096] {
            let bytes = serde_json::to_vec(&event(1234, &padding(size)))?.len();
            assert!(bytes.abs_diff(size) <= 8, "{size}: {bytes}");
        }
        Ok(())
    }

    #[test]
    fn options_refuse_a_timeout_the_receiver_always_exceeds() -> anyhow::Result<()> {
        let flags = |args: &[&str]| Flags::parse(args.iter().map(|s| (*s).to_owned()));
        let o = Options::parse(flags(&[
            "--bin-dir",
            "/x",
            "--backlog",
            "10",
            "--sender-env",
            "A=1,B=x=y",
        ])?)?;
        assert_eq!(
            o.sender_env,
            [("A".to_owned(), "1".to_owned()), ("B".to_owned(), "x=y".to_owned())]
        );
        assert!(Options::parse(flags(&["--sender-env", "A"])?).is_err());
        assert_eq!((o.backlog, o.concurrency, o.batch), (10, 64, 100));
        assert_eq!(o.out, PathBuf::from("/eg-bench/sender-memory.json"));
        assert!(Options::parse(flags(&["--receiver-delay", "40s"])?).is_err());
        assert!(Options::parse(flags(&["--nonsense", "1"])?).is_err());
        Ok(())
    }
}
