//! `redis-memory` (scenario 8, Redis's part): bytes Redis holds per pending delivery.
//! N events of 1 KB are published with no sender running, to a topic with 1 and then
//! (in a fresh deployment) 10 matching subscriptions; `INFO memory`'s `used_memory`
//! before and after gives bytes per event and per delivery. `MEMORY USAGE` of one stored
//! event and of the ready streams shows where the bytes are.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::launcher::{PARTITIONS, PREFIX};
use crate::load::{self, Progress, Template};
use crate::report::{Row, Target, thousands};
use anyhow::Context;
use eg_store::Keyspace;
use redis::aio::MultiplexedConnection;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "redis-memory",
    summary: "8: Redis bytes per pending delivery, 1 and 10 matching subscriptions",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench redis-memory: Redis memory per pending delivery (1 KB events, no sender), with
1 and with 10 matching subscriptions.

usage: eg-bench redis-memory [options]

  --events N             events published per measurement (default 100000; quick 10000)

";

const EVENT_BYTES: usize = 1024;

struct Sample {
    subscriptions: usize,
    bytes: f64,
    event_hash: u64,
    stream_per_entry: f64,
    /// Ready entries in all partitions (a fan-out is one entry until it is read).
    entries: u64,
    events: u64,
}

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let events: u64 = flags.number("events", ctx.sized(100_000, 10_000))?;
        flags.finish()?;
        let one = measure(ctx, 1, events).await?;
        let ten = measure(ctx, 10, events).await?;
        let payload = Template::new(1, EVENT_BYTES).len() as f64 - 2.0;

        let per_delivery = one.bytes / one.events as f64;
        let mut row = Row::new("8 memory", "Redis per pending delivery, 1 subscription");
        row.rate = Some((per_delivery, "B per delivery"));
        row.figures.push((
            "bytes per pending delivery".into(),
            format!("{per_delivery:.0} B (payload {payload:.0} B)"),
        ));
        row.figures.push(describe(&one));
        row.targets.push(Target::at_most(
            "Redis per pending delivery (payload + 300 B)",
            per_delivery,
            payload + 300.0,
            "B",
            0,
        ));
        row.details = to_json(&one);
        let mut rows = vec![row];

        let ratio = ten.bytes / one.bytes;
        let mut row = Row::new("8 memory", "Redis per event, 10 subscriptions");
        row.rate = Some((ten.bytes / ten.events as f64, "B per event"));
        row.figures.push((
            "bytes per event".into(),
            format!(
                "{:.0} B = {:.0} B per delivery; {ratio:.2}× one subscription's",
                ten.bytes / ten.events as f64,
                ten.bytes / (ten.events * 10) as f64
            ),
        ));
        row.figures.push(describe(&ten));
        row.targets.push(Target::at_most(
            "10-way fan-out memory vs 1 subscription",
            ratio,
            1.2,
            "×",
            2,
        ));
        row.details = to_json(&ten);
        rows.push(row);
        for r in &mut rows {
            r.notes.push(format!(
                "{} events of {EVENT_BYTES} B published (100 per request) with no sender running; used_memory after − before",
                thousands(events as f64)
            ));
        }
        eprintln!("redis-memory: {per_delivery:.0} B per delivery; 10-way {ratio:.2}×");
        Ok(rows)
    })
}

fn describe(s: &Sample) -> (String, String) {
    (
        "where it is (MEMORY USAGE)".into(),
        format!(
            "{}; ready streams {:.0} B per entry ({:.1} entries per event)",
            match s.event_hash {
                0 => "no event hash (the entry carries the body)".to_owned(),
                bytes => format!("one stored event hash {bytes} B"),
            },
            s.stream_per_entry,
            s.entries as f64 / s.events.max(1) as f64
        ),
    )
}

fn to_json(s: &Sample) -> serde_json::Value {
    json!({
        "subscriptions": s.subscriptions, "events": s.events, "usedMemoryGrowth": s.bytes,
        "bytesPerEvent": s.bytes / s.events as f64, "eventHashBytes": s.event_hash,
        "readyStreamBytesPerEntry": s.stream_per_entry,
    })
}

async fn measure(ctx: &Ctx, subscriptions: usize, events: u64) -> anyhow::Result<Sample> {
    let mut setup = Setup::new(Fsync::EverySec);
    setup.senders = 0;
    setup.scheduler = false;
    setup.subscriptions = subscriptions;
    eprintln!(
        "redis-memory: {subscriptions} subscription(s), {} events …",
        thousands(events as f64)
    );
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let mut conn = d.launcher.redis().await?;
    let before = used_memory(&mut conn).await?;
    let progress = Arc::new(Progress::default());
    let template = Template::new(100, EVENT_BYTES);
    let tasks = load::closed(&d.target, &template, 8, Some(events), None, &progress);
    load::join(tasks).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = used_memory(&mut conn).await?;
    let keys = Keyspace::new(PREFIX, PARTITIONS);
    let (event_hash, stream_per_entry, entries) = usage(&mut conn, &keys).await?;
    d.finish(ctx.keep);
    Ok(Sample {
        subscriptions,
        bytes: after as f64 - before as f64,
        event_hash,
        stream_per_entry,
        entries,
        events: progress.published(),
    })
}

async fn used_memory(conn: &mut MultiplexedConnection) -> anyhow::Result<u64> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")
}

/// `MEMORY USAGE` of one stored event, of the ready streams per entry, and their entries.
async fn usage(conn: &mut MultiplexedConnection, keys: &Keyspace) -> anyhow::Result<(u64, f64, u64)> {
    let p = keys.partition(0);
    let pattern = p.event("*");
    let (_, found): (String, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg(&pattern)
        .arg("COUNT")
        .arg(1000)
        .query_async(conn)
        .await?;
    let event_hash: u64 = match found.first() {
        Some(key) => redis::cmd("MEMORY").arg("USAGE").arg(key).query_async(conn).await?,
        None => 0,
    };
    let (mut bytes, mut entries) = (0u64, 0u64);
    for p in keys.all_partitions() {
        let b: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(p.ready())
            .arg("SAMPLES")
            .arg(0)
            .query_async(conn)
            .await?;
        let n: u64 = redis::cmd("XLEN").arg(p.ready()).query_async(conn).await?;
        bytes += b.unwrap_or(0);
        entries += n;
    }
    Ok((event_hash, bytes as f64 / entries.max(1) as f64, entries))
}
