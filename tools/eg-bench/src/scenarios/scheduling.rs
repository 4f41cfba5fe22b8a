//! `scheduling` (scenario 7): how punctually eg-scheduler moves due retries into the
//! ready streams with a million pending. Retries are seeded straight into the retry
//! sorted sets, in the format senders write (a delivery record after one failed attempt,
//! scored by its due time), due evenly over a window; no sender runs, so every moved
//! retry stays in its ready stream. The stream entry's auto-generated id carries the
//! millisecond the scheduler's script added it, so lateness = entry id's time − due
//! time, for every retry. A second phase makes a backlog due at one instant and
//! measures how fast the scheduler drains it.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::{Fsync, Kind};
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup, TOPIC};
use crate::histogram::Histogram;
use crate::launcher::{PARTITIONS, PREFIX};
use crate::report::{Row, Target, thousands};
use anyhow::{Context, bail};
use eg_core::{Delivery, LastAttempt, OutcomeName, UnixMillis};
use eg_store::Keyspace;
use redis::aio::MultiplexedConnection;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub const SCENARIO: Scenario = Scenario {
    name: "scheduling",
    summary: "7: how late 1 million retries are moved to ready, and how fast",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench scheduling: seeds retries straight into the retry sets, due evenly over a
window, and measures how late eg-scheduler moves each one (and then how fast it drains a
backlog that falls due at once), with eg's scheduler interval (200ms) and with 50ms.

usage: eg-bench scheduling [options]

  --retries N            retries due over the window (default 1000000; quick 100000)
  --window D             the window they fall due in (default 20s; quick 5s)
  --burst N              retries due at one instant afterwards (default 200000; quick 20000)
  --intervals LIST       EG__SCHEDULER__INTERVAL values, one deployment each
                         (default: default,50ms — eg's 200ms, then 50ms)

";

/// Retries per ZADD, and ZADDs per pipeline, when seeding.
const PER_ZADD: usize = 1000;
const ZADDS_PER_PIPELINE: usize = 10;

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let retries: u64 = flags.number("retries", ctx.sized(1_000_000, 100_000))?;
        let window = flags.duration("window", ctx.seconds(20, 5))?;
        let burst: u64 = flags.number("burst", ctx.sized(200_000, 20_000))?;
        let intervals: Vec<Option<String>> = match flags.text("intervals")? {
            None => vec![None, Some("50ms".into())],
            Some(list) => list
                .split(',')
                .map(|i| (i.trim() != "default").then(|| i.trim().to_owned()))
                .collect(),
        };
        flags.finish()?;
        let ceiling = Kind::RedisXadd {
            fsync: Fsync::EverySec,
            pipeline: 100,
        };
        let ceiling_value = ctx.ceilings.get(ceiling).await?;
        let mut rows = Vec::new();
        for interval in intervals {
            let mut setup = Setup::new(Fsync::EverySec);
            setup.senders = 0;
            let name = match &interval {
                Some(i) => format!("scheduler interval {i}"),
                None => "scheduler interval 200ms (default)".to_owned(),
            };
            if let Some(interval) = interval {
                setup.env.push(("EG__SCHEDULER__INTERVAL", interval));
            }
            let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
            let phases = Phases {
                conn: d.launcher.redis().await?,
                keys: Keyspace::new(PREFIX, PARTITIONS),
                processes: d.processes(),
            };
            let mut spread = phases.spread(retries, window).await?;
            spread.variant = format!(
                "{}, {} due over {} s",
                name,
                thousands(retries as f64),
                window.as_secs()
            );
            spread.ceiling = Some((ceiling.label(), ceiling_value));
            spread.notes.extend(setup.describe());
            rows.push(spread);
            if burst > 0 {
                let mut row = phases.burst(burst, retries).await?;
                row.variant = format!("{}, {} due at one instant", name, thousands(burst as f64));
                row.ceiling = Some((ceiling.label(), ceiling_value));
                rows.push(row);
            }
            d.finish(ctx.keep);
        }
        Ok(rows)
    })
}

const LATE: &str = "how late each retry was moved to ready (entry id time − due time)";
/// Retries seeded per second, at least (checked: seeding must end before the first is due).
const SEED_RATE_GUESS: f64 = 100_000.0;

struct Phases {
    conn: MultiplexedConnection,
    keys: Keyspace,
    processes: crate::cpu::Processes,
}

impl Phases {
    /// `retries` due evenly over `window`, the first once seeding is surely done.
    async fn spread(&self, retries: u64, window: Duration) -> anyhow::Result<Row> {
        let mut conn = self.conn.clone();
        let lead = Duration::from_secs_f64(retries as f64 / SEED_RATE_GUESS + 3.0);
        let first_due = now_ms() + lead.as_millis() as i64;
        let step = window.as_millis() as f64 / retries.max(1) as f64;
        eprintln!(
            "scheduling: seeding {} retries due over {window:?} …",
            thousands(retries as f64)
        );
        let seeded_at = Instant::now();
        seed(&mut conn, &self.keys, retries, 0, |i| {
            first_due + (i as f64 * step) as i64
        })
        .await?;
        let seed_seconds = seeded_at.elapsed().as_secs_f64();
        let pending_at_first_due = pending(&mut conn, &self.keys).await?;
        if now_ms() >= first_due {
            bail!("seeding took {seed_seconds:.1} s, past the first due time: lower --retries");
        }
        let (cpu_before, cpu_from) = (self.processes.sample(), Instant::now());
        let window_end = first_due + window.as_millis() as i64;
        wait_until_moved(&mut conn, &self.keys, window_end, Duration::from_secs(60)).await?;
        let cpu = self.processes.sample().since(&cpu_before);
        let cpu_seconds = cpu_from.elapsed().as_secs_f64();
        let spread = lateness(&mut conn, &self.keys).await?;
        trim_ready(&mut conn, &self.keys).await?;

        let mut row = Row::new("7 scheduling", "");
        row.rate = Some((spread.moved as f64 / window.as_secs_f64(), "retries moved/s"));
        row.latency_label = Some(LATE);
        row.latency = Some(spread.latency);
        row.cpu = Some((cpu, cpu_seconds));
        row.counted = Some(spread.moved as f64);
        row.figures.push((
            "pending when the first fell due".into(),
            thousands(pending_at_first_due as f64),
        ));
        row.figures.push((
            "seeded".into(),
            format!(
                "{} retries in {seed_seconds:.1} s ({PER_ZADD} per ZADD, pipelined)",
                thousands(retries as f64),
            ),
        ));
        row.figures.push((
            "busiest second".into(),
            format!("{} moved", thousands(spread.busiest_second as f64)),
        ));
        if spread.early > 0 {
            row.figures
                .push(("moved before due (clock)".into(), spread.early.to_string()));
        }
        row.targets.push(Target::at_most(
            "retries fire on time with 1M pending (p99 late)",
            spread.latency.p99_ms,
            100.0,
            "ms",
            0,
        ));
        row.notes
            .push("no eg-sender runs: moved retries stay in the ready streams, where their entry ids are read".into());
        eprintln!(
            "scheduling: late p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            spread.latency.p50_ms, spread.latency.p99_ms, spread.latency.max_ms
        );
        Ok(row)
    }

    /// `burst` retries due at one instant: how fast the scheduler drains them.
    async fn burst(&self, burst: u64, first_seq: u64) -> anyhow::Result<Row> {
        let mut conn = self.conn.clone();
        let due = now_ms() + (burst as f64 / SEED_RATE_GUESS * 1000.0) as i64 + 2000;
        eprintln!(
            "scheduling: seeding {} retries due at one instant …",
            thousands(burst as f64)
        );
        seed(&mut conn, &self.keys, burst, first_seq, |_| due).await?;
        if now_ms() >= due {
            bail!("seeding the burst took past its due time: lower --burst");
        }
        let (cpu_before, cpu_from) = (self.processes.sample(), Instant::now());
        wait_until_moved(&mut conn, &self.keys, due, Duration::from_secs(120)).await?;
        let cpu = self.processes.sample().since(&cpu_before);
        let cpu_seconds = cpu_from.elapsed().as_secs_f64();
        let b = lateness(&mut conn, &self.keys).await?;
        trim_ready(&mut conn, &self.keys).await?;
        let span = (b.last_moved - b.first_moved + 1) as f64 / 1000.0;
        let mut row = Row::new("7 scheduling", "");
        row.rate = Some((b.moved as f64 / span, "retries moved/s"));
        row.latency_label = Some(LATE);
        row.latency = Some(b.latency);
        row.cpu = Some((cpu, cpu_seconds));
        row.counted = Some(b.moved as f64);
        row.figures.push((
            "moved".into(),
            format!(
                "all {} in {span:.3} s, the first {} ms after their due time",
                thousands(b.moved as f64),
                b.first_moved - due
            ),
        ));
        row.notes
            .push("rate = retries ÷ time from the first moved to the last".into());
        eprintln!("scheduling: burst moved in {span:.3} s");
        Ok(row)
    }
}

fn now_ms() -> i64 {
    eg_store::Clock::default().now().0
}

/// The retry record a sender writes after a first attempt answered 503. The delivery id
/// carries the due time and a sequence number (32 hex digits, like eg's own ids).
fn record(due: i64, seq: u64) -> String {
    let published = UnixMillis(due - 10_000);
    let delivery = Delivery::new(
        format!("{due:016x}{seq:016x}"),
        format!("{seq:032x}"),
        TOPIC.into(),
        "sub0".into(),
        published,
    )
    .for_event(format!("bench-{seq}"))
    .matched_at(1)
    .after_attempt(LastAttempt {
        outcome: OutcomeName::Busy,
        status: Some(503),
        at: published,
    });
    eg_store::codec::encode_delivery(&delivery)
}

/// `count` retries, numbered from `first_seq`, spread over the partitions in turn.
async fn seed(
    conn: &mut MultiplexedConnection,
    keys: &Keyspace,
    count: u64,
    first_seq: u64,
    due: impl Fn(u64) -> i64,
) -> anyhow::Result<()> {
    let partitions: Vec<String> = keys.all_partitions().map(|p| p.retry()).collect();
    let mut i = 0u64;
    while i < count {
        let mut pipe = redis::pipe();
        for _ in 0..ZADDS_PER_PIPELINE {
            if i >= count {
                break;
            }
            let key = &partitions[(i / PER_ZADD as u64) as usize % partitions.len()];
            let mut members = Vec::with_capacity(PER_ZADD);
            for _ in 0..PER_ZADD {
                if i >= count {
                    break;
                }
                let d = due(i);
                members.push((d, record(d, first_seq + i)));
                i += 1;
            }
            pipe.zadd_multiple(key, &members).ignore();
        }
        pipe.query_async::<()>(conn).await?;
    }
    Ok(())
}

async fn pending(conn: &mut MultiplexedConnection, keys: &Keyspace) -> anyhow::Result<u64> {
    let mut pipe = redis::pipe();
    for p in keys.all_partitions() {
        pipe.zcard(p.retry());
    }
    let counts: Vec<u64> = pipe.query_async(conn).await?;
    Ok(counts.iter().sum())
}

/// Waits until `until` has passed and every retry set is empty (at most `patience` more).
async fn wait_until_moved(
    conn: &mut MultiplexedConnection,
    keys: &Keyspace,
    until: i64,
    patience: Duration,
) -> anyhow::Result<()> {
    let give_up = Instant::now() + Duration::from_millis((until - now_ms()).max(0) as u64) + patience;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if now_ms() >= until && pending(conn, keys).await? == 0 {
            return Ok(());
        }
        if Instant::now() >= give_up {
            bail!(
                "{} retries still pending {patience:?} after the last fell due",
                pending(conn, keys).await?
            );
        }
    }
}

struct Lateness {
    moved: u64,
    /// When the first and the last were moved (ms).
    first_moved: i64,
    last_moved: i64,
    latency: crate::histogram::Latency,
    busiest_second: u64,
    early: u64,
}

/// Reads every ready stream: each entry's id time against the due time in its record.
async fn lateness(conn: &mut MultiplexedConnection, keys: &Keyspace) -> anyhow::Result<Lateness> {
    let histogram = Histogram::default();
    let mut per_second: BTreeMap<i64, u64> = BTreeMap::new();
    let (mut moved, mut early) = (0u64, 0u64);
    let (mut first_moved, mut last_moved) = (i64::MAX, i64::MIN);
    for p in keys.all_partitions() {
        let mut from = "-".to_owned();
        loop {
            let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                .arg(p.ready())
                .arg(&from)
                .arg("+")
                .arg("COUNT")
                .arg(10_000)
                .query_async(conn)
                .await?;
            let Some(last) = reply.ids.last() else { break };
            from = format!("({}", last.id);
            for entry in &reply.ids {
                let moved_ms: i64 = entry
                    .id
                    .split_once('-')
                    .and_then(|(ms, _)| ms.parse().ok())
                    .with_context(|| format!("stream id {:?}", entry.id))?;
                let raw: String = entry
                    .get(eg_store::codec::DELIVERY_FIELD)
                    .context("a ready entry without its record")?;
                let delivery = eg_store::codec::decode_delivery(&raw)?;
                let due = i64::from_str_radix(delivery.id.get(..16).unwrap_or_default(), 16)
                    .with_context(|| format!("delivery id {:?}", delivery.id))?;
                let late = moved_ms - due;
                if late < 0 {
                    early += 1;
                }
                histogram.record(late.max(0) as u64 * 1000);
                *per_second.entry(moved_ms / 1000).or_default() += 1;
                first_moved = first_moved.min(moved_ms);
                last_moved = last_moved.max(moved_ms);
                moved += 1;
            }
        }
    }
    if moved == 0 {
        bail!("no retry was moved to a ready stream");
    }
    Ok(Lateness {
        moved,
        first_moved,
        last_moved,
        latency: histogram.latency(),
        busiest_second: per_second.values().copied().max().unwrap_or(0),
        early,
    })
}

/// Empties the ready streams (no sender will read them) so the next phase reads only its own.
async fn trim_ready(conn: &mut MultiplexedConnection, keys: &Keyspace) -> anyhow::Result<()> {
    let mut pipe = redis::pipe();
    for p in keys.all_partitions() {
        pipe.cmd("XTRIM").arg(p.ready()).arg("MAXLEN").arg(0).ignore();
    }
    pipe.query_async::<()>(conn).await?;
    Ok(())
}
