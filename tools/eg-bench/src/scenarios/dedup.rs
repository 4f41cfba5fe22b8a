//! `dedup`: what a topic's duplicate window costs (docs/deduplication.md). Publish
//! throughput with no sender (as the `ingress` scenario) to a topic without a window and
//! to one with `duplicateDetectionHistoryTimeWindow` PT10M, alternating rounds compared by
//! their medians (crate::compare), and the Redis bytes each remembered id takes: the seen
//! set's `MEMORY USAGE` over its members after a run. Every event has a new id, so every
//! event is checked and remembered (the cost of the check, not of skipping).

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::compare;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load, Measured};
use crate::report::thousands;
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "dedup",
    summary: "publish throughput with a topic's duplicate window on and off; bytes per id",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench dedup: events/s eg-ingress answers 200, 1 KB events, 100 per request, no sender,
to a topic without and with a duplicate window (PT10M), alternating; and the Redis bytes
per remembered id.

usage: eg-bench dedup [options]

  --connections N        publish requests in flight at once (default 32; quick 16)
  --duration D           each measured window (default 10s; quick 3s)
  --rounds N             rounds of the two setups (default 3; quick 1)

";

const WINDOW: &str = "PT10M";

/// A run's measurement and, with the window on, the seen set's bytes per member.
async fn measure_with(
    ctx: &Ctx,
    window: Option<&'static str>,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<(Measured, Option<f64>)> {
    let mut setup = Setup::new(Fsync::EverySec);
    setup.senders = 0;
    setup.scheduler = false;
    setup.duplicate_window = window;
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let m = measure::steady(&d, &Load::publish_only(ctx, connections, duration)).await?;
    let per_id = match window {
        Some(_) => Some(bytes_per_remembered_id(&d).await?),
        None => None,
    };
    d.finish(ctx.keep);
    Ok((m, per_id))
}

/// The seen sets' memory over their members (one set: the topic's, on its home partition).
async fn bytes_per_remembered_id(d: &Deployment) -> anyhow::Result<f64> {
    let mut redis = d.launcher.redis().await?;
    let keys: Vec<String> = redis::cmd("KEYS").arg("*:seen:*").query_async(&mut redis).await?;
    let (mut bytes, mut members) = (0u64, 0u64);
    for key in &keys {
        let used: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut redis)
            .await?;
        bytes += used.unwrap_or(0);
        members += redis::cmd("ZCARD").arg(key).query_async::<u64>(&mut redis).await?;
    }
    anyhow::ensure!(members > 0, "no remembered id found in Redis (keys {keys:?})");
    Ok(bytes as f64 / members as f64)
}

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let connections: usize = flags.number("connections", ctx.sized(32, 16))?;
        let duration = flags.duration("duration", ctx.seconds(10, 3))?;
        let rounds: usize = flags.number("rounds", ctx.sized(3, 1))?;
        flags.finish()?;
        let ctx = &*ctx;
        let setups = [None, Some(WINDOW)];
        let measured = compare::alternating(rounds, &["no window", "duplicate window PT10M"], |i| {
            measure_with(ctx, setups[i], connections, duration)
        })
        .await?;
        let per_id = compare::median(measured[1].iter().filter_map(|(_, b)| *b));
        let [off, on]: [Vec<&Measured>; 2] = measured
            .iter()
            .map(|runs| runs.iter().map(|(m, _)| m).collect())
            .collect::<Vec<_>>()
            .try_into()
            .map_err(|_| anyhow::anyhow!("two setups measured"))?;
        let (mut row, off_rate, on_rate) = compare::publish_row(
            "dedup",
            format!("duplicate window {WINDOW}, median of {rounds}"),
            ("no window", &off),
            ("with the window", &on),
        )?;
        row.figures.push((
            "Redis per remembered id".into(),
            format!("{per_id:.0} bytes (a 16-character id, MEMORY USAGE over ZCARD)"),
        ));
        row.notes.push(format!(
            "no eg-sender, eg-scheduler or eg-deadletter; one subscription; {connections} connections; every id new; the window's topic publishes to its home partition"
        ));
        eprintln!(
            "dedup: {} events/s with the window, {} without; {per_id:.0} bytes per id",
            thousands(on_rate),
            thousands(off_rate)
        );
        Ok(vec![row])
    })
}
