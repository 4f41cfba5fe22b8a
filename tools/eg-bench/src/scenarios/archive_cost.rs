//! `archive`: what archiving a topic costs its publishers (docs/archive.md). Publish
//! throughput with no sender (as the `ingress` scenario) to a topic without an archive and
//! to one archived to the local directory, alternating rounds compared by their medians
//! (crate::compare). eg-deadletter runs in both, so the archived rounds include its writer
//! taking the backlog away as it grows; after each archived round the bench waits until
//! the backlog is written and says how long that took, and what a waiting entry held in
//! Redis at the window's end (`MEMORY USAGE` over `XLEN`, when enough waited to say).

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::compare;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::launcher::{PARTITIONS, PREFIX};
use crate::measure::{self, Load, Measured};
use crate::report::thousands;
use serde_json::json;
use std::time::{Duration, Instant};

pub const SCENARIO: Scenario = Scenario {
    name: "archive",
    summary: "publish throughput with a topic archived and not; the writer keeping up",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench archive: events/s eg-ingress answers 200, 1 KB events, 100 per request, no
sender, to a topic without and with an archive (local directory), alternating; how long
the archive writer took to write what waited at the window's end, and the Redis bytes per
waiting entry.

usage: eg-bench archive [options]

  --connections N        publish requests in flight at once (default 32; quick 16)
  --duration D           each measured window (default 10s; quick 3s)
  --rounds N             rounds of the two setups (default 3; quick 1)

";

/// How long the writer may take to write what waited before the run is called failed.
const WRITE_LIMIT: Duration = Duration::from_secs(300);

/// What the archive writer left behind a measured window.
#[derive(Debug, Clone, Copy)]
struct Backlog {
    /// Entries waiting when the window ended.
    waiting: u64,
    /// Redis bytes per waiting entry then, when at least 1,000 waited.
    bytes_per_entry: Option<f64>,
    /// From the window's end until nothing waited.
    written_after: Duration,
}

async fn measure_with(
    ctx: &Ctx,
    archived: bool,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<(Measured, Option<Backlog>)> {
    let mut setup = Setup::new(Fsync::EverySec);
    setup.senders = 0;
    if archived {
        setup.archive = Some(json!({
            "destination": {"endpointType": "LocalDirectory", "properties": {"containerName": "archive-bench"}},
            "retentionDays": 1,
        }));
    }
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let m = measure::steady(&d, &Load::publish_only(ctx, connections, duration)).await?;
    let backlog = match archived {
        true => Some(wait_for_the_writer(&d).await?),
        false => None,
    };
    d.finish(ctx.keep);
    Ok((m, backlog))
}

/// Waits until every partition's archive backlog is written; what waited first.
async fn wait_for_the_writer(d: &Deployment) -> anyhow::Result<Backlog> {
    let mut redis = d.launcher.redis().await?;
    let keys = eg_store::Keyspace::new(PREFIX, PARTITIONS);
    let streams: Vec<String> = keys.all_partitions().map(|p| p.archive_backlog()).collect();
    let (mut waiting, mut bytes) = (0u64, 0u64);
    for stream in &streams {
        waiting += redis::cmd("XLEN").arg(stream).query_async::<u64>(&mut redis).await?;
        let used: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(stream)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut redis)
            .await?;
        bytes += used.unwrap_or(0);
    }
    let bytes_per_entry = (waiting >= 1000).then(|| bytes as f64 / waiting as f64);
    let started = Instant::now();
    loop {
        let mut left = 0u64;
        for stream in &streams {
            left += redis::cmd("XLEN").arg(stream).query_async::<u64>(&mut redis).await?;
        }
        if left == 0 {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < WRITE_LIMIT,
            "the archive writer still had {left} entries to write after {WRITE_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Backlog {
        waiting,
        bytes_per_entry,
        written_after: started.elapsed(),
    })
}

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let connections: usize = flags.number("connections", ctx.sized(32, 16))?;
        let duration = flags.duration("duration", ctx.seconds(10, 3))?;
        let rounds: usize = flags.number("rounds", ctx.sized(3, 1))?;
        flags.finish()?;
        let ctx = &*ctx;
        let measured = compare::alternating(rounds, &["not archived", "archived (local directory)"], |i| {
            measure_with(ctx, i == 1, connections, duration)
        })
        .await?;
        let [off, on]: [Vec<&Measured>; 2] = measured
            .iter()
            .map(|runs| runs.iter().map(|(m, _)| m).collect())
            .collect::<Vec<_>>()
            .try_into()
            .map_err(|_| anyhow::anyhow!("two setups measured"))?;
        let backlogs: Vec<Backlog> = measured[1].iter().filter_map(|(_, b)| *b).collect();
        let (mut row, off_rate, on_rate) = compare::publish_row(
            "archive",
            format!("topic archived to the local directory, median of {rounds}"),
            ("not archived", &off),
            ("archived", &on),
        )?;
        row.figures.push((
            "waiting at the window's end, then written in".into(),
            backlogs
                .iter()
                .map(|b| {
                    format!(
                        "{} entries, {:.1} s",
                        thousands(b.waiting as f64),
                        b.written_after.as_secs_f64()
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        ));
        let per_entry: Vec<f64> = backlogs.iter().filter_map(|b| b.bytes_per_entry).collect();
        if !per_entry.is_empty() {
            let bytes = compare::median(per_entry.into_iter());
            row.figures.push((
                "Redis per waiting entry".into(),
                format!("{bytes:.0} bytes (a 1 KB event; MEMORY USAGE over XLEN at the window's end)"),
            ));
        }
        row.notes.push(format!(
            "no eg-sender; eg-scheduler and eg-deadletter run in both setups (the archive writer is eg-deadletter's); one subscription; {connections} connections"
        ));
        eprintln!(
            "archive: {} events/s archived, {} not ({:.1} %)",
            thousands(on_rate),
            thousands(off_rate),
            on_rate / off_rate.max(1.0) * 100.0
        );
        Ok(vec![row])
    })
}
