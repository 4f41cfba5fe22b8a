//! `replay` (scenario 13, issue 30): events a replay job reads from a topic's archive and
//! enqueues per second, from each store the archive may be in — the local directory,
//! Azure Blob (Azurite) and S3 (moto's server).
//!
//! Per store: an archived topic with no subscription takes the events (each is archived
//! and stored nowhere else), the bench waits until the archive writer has written them
//! all, then creates a subscription and starts a replay of the whole window with the
//! highest rate a request may ask for. No sender runs: what is measured is eg-deadletter
//! listing, reading and un-gzipping the objects, filtering and enqueueing, through the
//! job's own progress (`replayed`).

use super::dead_letters::{Store, start_store, store_process_label};
use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup, TOPIC};
use crate::drain;
use crate::launcher::{PARTITIONS, PREFIX};
use crate::load::{self, Progress, Template};
use crate::report::{Row, thousands};
use anyhow::Context;
use reqwest::Method;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const SCENARIO: Scenario = Scenario {
    name: "replay",
    summary: "13: archived events replayed/s from the local directory, Azurite and S3",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench replay: archived events a replay job reads and enqueues per second, from a
topic archived in each store (local directory, Azure Blob on Azurite, S3 on moto's
server). Azurite and moto come from target/test-tools (deploy/local/ensure-test-tools.sh).

usage: eg-bench replay [options]

  --events N             events archived and replayed per store (default 100000; quick 3000)
  --stores LIST          local,azure,s3 (default all three)

";

/// The most a replay request may ask for: the job is not paced below what it can do.
const MAX_RATE: u32 = 100_000;
/// Anything longer is a stuck run, not a slow one.
const LIMIT: Duration = Duration::from_secs(300);

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let events: u64 = flags.number("events", ctx.sized(100_000, 3_000))?;
        let stores = flags
            .text("stores")?
            .unwrap_or_else(|| "local,azure,s3".into())
            .split(',')
            .map(Store::parse)
            .collect::<anyhow::Result<Vec<_>>>()?;
        flags.finish()?;
        let mut rows = Vec::new();
        for store in stores {
            eprintln!("replay: {} …", store.label());
            match one_store(ctx, store, events).await {
                Ok(row) => rows.push(row),
                Err(e) => rows.push(Row::failed("13 replay", store.label(), &e)),
            }
        }
        Ok(rows)
    })
}

async fn one_store(ctx: &Ctx, store: Store, events: u64) -> anyhow::Result<Row> {
    let (server, destination, env) = start_store(store).await?;
    let mut setup = Setup::new(Fsync::EverySec);
    setup.senders = 0;
    setup.subscriptions = 0;
    setup.archive = Some(json!({"destination": destination, "retentionDays": 1}));
    setup.env = env;
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let from = chrono::Utc::now() - chrono::Duration::seconds(5);

    let template = Template::new(100, 1024);
    let progress = Arc::new(Progress::default());
    let publishers = load::closed(&d.target, &template, 4, Some(events), None, &progress);
    load::join(publishers).await?;
    let published = progress.published();
    let mut redis = d.launcher.redis().await?;
    let keys = eg_store::Keyspace::new(PREFIX, PARTITIONS);
    let until = Instant::now() + LIMIT;
    while backlog(&mut redis, &keys).await? > 0 {
        anyhow::ensure!(
            Instant::now() < until,
            "the archive writer had not written {published} events after {LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let to = chrono::Utc::now();

    let subscription = json!({"properties": {"destination": {"endpointType": "WebHook",
        "properties": {"endpointUrl": format!("{}/0", d.receiver.url())}}}});
    let base = format!("/topics/{TOPIC}/eventSubscriptions/replayed");
    d.launcher
        .admin(&d.ingress, Method::PUT, &base, Some(&subscription))
        .await?;
    let request = json!({
        "from": from.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "to": to.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "maxEventsPerSecond": MAX_RATE,
    });
    let job = d
        .launcher
        .admin(&d.ingress, Method::POST, &format!("{base}/replay"), Some(&request))
        .await?;
    let id = job["id"].as_str().context("no id in the replay's answer")?.to_owned();
    let job_path = format!("{base}/replays/{id}");

    let mut processes = d.processes();
    if let Some(pid) = server.pid() {
        processes.add_with_children(store_process_label(store), pid);
    }
    let drained = drain::measure(published, &processes, LIMIT, || {
        let (d, path) = (&d, &job_path);
        async move {
            let job = d.launcher.admin(&d.ingress, Method::GET, path, None).await?;
            anyhow::ensure!(job["state"] != "Failed", "the replay failed: {job}");
            Ok(job["progress"]["replayed"].as_u64().unwrap_or(0))
        }
    })
    .await?;
    let job = d.launcher.admin(&d.ingress, Method::GET, &job_path, None).await?;
    d.finish(ctx.keep);
    drop(server);

    let mut row = Row::new("13 replay", store.label());
    row.rate = Some((drained.per_second(), "events/s"));
    row.cpu = Some((drained.cpu.clone(), drained.seconds));
    row.counted = Some(drained.counted as f64);
    row.figures.push((
        "replay".into(),
        format!(
            "{published} archived events of 1 KB replayed in {:.1} s from the job's start (rate taken between 10 % and 90 % done); the job ended {}",
            drained.total_seconds,
            job["state"].as_str().unwrap_or("?")
        ),
    ));
    row.notes.push(format!(
        "one eg-deadletter, maxEventsPerSecond {MAX_RATE}, no sender (what is measured is reading the archive and enqueueing), {PARTITIONS} partitions, appendfsync everysec"
    ));
    row.details = json!({
        "events": published, "secondsMeasured": drained.seconds, "secondsTotal": drained.total_seconds,
        "cpuSeconds": drained.cpu.to_json(), "job": job,
    });
    eprintln!(
        "replay: {}: {} events/s",
        store.label(),
        thousands(drained.per_second())
    );
    Ok(row)
}

/// Entries still in the archive backlog, over every partition.
async fn backlog(redis: &mut redis::aio::MultiplexedConnection, keys: &eg_store::Keyspace) -> anyhow::Result<u64> {
    let mut pipe = redis::pipe();
    for partition in keys.all_partitions() {
        pipe.xlen(partition.archive_backlog());
    }
    let counts: Vec<u64> = pipe.query_async(redis).await?;
    Ok(counts.iter().sum())
}
