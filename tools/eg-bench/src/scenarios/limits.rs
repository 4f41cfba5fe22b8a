//! `limits`: what `deliveryLimits` costs and how closely it holds its cap
//! (docs/rate-limits.md). Its rows:
//! - cost: end-to-end deliveries/s unlimited and with `requestsPerSecond` far above what
//!   the machine delivers (the gate is asked, never says wait); target ≥ 95 %. Runs of
//!   one setup minutes apart differ by a quarter on a shared machine, so the two setups
//!   alternate (`--rounds`) and the row compares their medians.
//! - cost at a fixed load: the sender's CPU per delivery, unlimited and with that cap, at
//!   a publish rate below the machine's (`--fixed-rate`); target ≤ 5 % more. A saturated
//!   sender's CPU per delivery follows its throughput (fewer deliveries per read at a
//!   lower rate); at one fixed rate it differs only by the limiter's work.
//! - accuracy: a cap well below the machine's rate, with 1 and with 4 senders, over a
//!   window; the delivered rate against the cap; target within ±10 %.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::compare;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::load::{self, Progress, Template};
use crate::measure::{self, Load, Measured};
use crate::report::{Row, Target, thousands};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

pub const SCENARIO: Scenario = Scenario {
    name: "limits",
    summary: "deliveryLimits: the limiter's cost, and its accuracy with 1 and 4 senders",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench limits: end-to-end deliveries/s unlimited and with a cap far above the machine's
rate (the limiter's cost), then a cap below it with 1 and 4 senders (its accuracy).

usage: eg-bench limits [options]

  --duration D           cost: each measured window (default 15s; quick 4s)
  --rounds N             cost: rounds of unlimited and limited runs, alternating (default 3; quick 1)
  --fixed-rate N         cost at a fixed load: deliveries/s published (default 2000)
  --accuracy-duration D  accuracy: each measured window (default 60s; quick 8s)
  --cap N                accuracy: requestsPerSecond (default 200)
  --senders N            accuracy alone, with N senders (no cost row; default: cost,
                         then 1 and 4 senders)

";

async fn measure_with(
    ctx: &Ctx,
    senders: usize,
    limits: Option<serde_json::Value>,
    duration: Duration,
) -> anyhow::Result<Measured> {
    let mut setup = Setup::new(Fsync::EverySec);
    setup.senders = senders;
    setup.delivery_limits = limits;
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let load = Load::end_to_end(ctx, 4, 2_000, duration);
    let m = measure::steady(&d, &load).await?;
    d.finish(ctx.keep);
    Ok(m)
}

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let duration = flags.duration("duration", ctx.seconds(15, 4))?;
        let accuracy_duration = flags.duration("accuracy-duration", ctx.seconds(60, 8))?;
        let cap: f64 = flags.number("cap", 200.0)?;
        let only: usize = flags.number("senders", 0)?;
        let fixed_rate: f64 = flags.number("fixed-rate", 2000.0)?;
        let rounds: usize = flags.number("rounds", ctx.sized(3, 1))?;
        flags.finish()?;
        let load = Load::end_to_end(ctx, 4, 2_000, duration);
        let mut rows = Vec::new();
        if only == 0 {
            rows.push(cost_row(ctx, &load, duration, rounds).await?);
            rows.push(fixed_load_row(ctx, fixed_rate, duration, rounds).await?);
        }
        let senders_list = if only == 0 { vec![1, 4] } else { vec![only] };
        for senders in senders_list {
            eprintln!("limits: cap {cap}/s, {senders} sender(s) …");
            rows.push(accuracy_row(ctx, cap, senders, accuracy_duration).await?);
        }
        Ok(rows)
    })
}

/// The limiter's cost: a cap far above the machine's rate against no cap at all, in
/// alternating runs; medians compared.
async fn cost_row(ctx: &Ctx, load: &Load, duration: Duration, rounds: usize) -> anyhow::Result<crate::report::Row> {
    let capped_limits = json!({"requestsPerSecond": 100_000});
    let runs = compare::alternating(rounds, &["unlimited", "requestsPerSecond 100000"], |i| {
        measure_with(ctx, 1, (i == 1).then(|| capped_limits.clone()), duration)
    })
    .await?;
    let open = compare::summarise(&runs[0])?;
    let capped = compare::summarise(&runs[1])?;
    let share = capped.rate / open.rate.max(1.0);
    let mut cost = measure::row(
        "limits cost",
        format!("requestsPerSecond 100000 (above the machine's rate), 1 sender, median of {rounds}"),
        capped.typical,
        load,
        "deliveries/s",
    );
    cost.rate = Some((capped.rate, "deliveries/s"));
    cost.figures.push((
        "unlimited".into(),
        format!("{} deliveries/s (median; runs {})", thousands(open.rate), open.each),
    ));
    cost.figures
        .push(("limited runs".into(), format!("{} deliveries/s", capped.each)));
    cost.figures.push((
        "sender CPU per delivery".into(),
        format!(
            "{:.0} µs limited, {:.0} µs unlimited (medians)",
            capped.sender_micros, open.sender_micros
        ),
    ));
    cost.targets
        .push(Target::at_least("share of unlimited", share * 100.0, 95.0, "%"));
    eprintln!("limits: {:.1} % of unlimited", share * 100.0);
    Ok(cost)
}

/// The limiter's cost at a fixed load below the machine's rate: the sender's CPU per
/// delivery with and without a (never reached) cap. At one delivered rate both senders
/// read, send and settle alike, so what differs is the limiter's own work — a figure the
/// machine's other load moves far less than a saturated run's throughput.
async fn fixed_load_row(ctx: &Ctx, rate: f64, duration: Duration, rounds: usize) -> anyhow::Result<Row> {
    let capped_limits = json!({"requestsPerSecond": 100_000});
    let runs = compare::alternating(
        rounds,
        &["unlimited, fixed load", "requestsPerSecond 100000, fixed load"],
        |i| fixed_load(ctx, (i == 1).then(|| capped_limits.clone()), rate, duration),
    )
    .await?;
    let micros = |runs: &[(f64, f64)]| compare::median(runs.iter().map(|(us, _)| *us));
    let (open, capped) = (micros(&runs[0]), micros(&runs[1]));
    let delivered = compare::median(runs.iter().flatten().map(|(_, rate)| *rate));
    let each = |runs: &[(f64, f64)]| {
        runs.iter()
            .map(|(us, _)| format!("{us:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let extra = (capped / open.max(1e-9) - 1.0) * 100.0;
    let mut row = Row::new(
        "limits cost",
        format!("fixed load {rate:.0} deliveries/s, requestsPerSecond 100000, 1 sender, median of {rounds}"),
    );
    row.rate = Some((delivered, "deliveries/s"));
    row.figures.push((
        "sender CPU per delivery".into(),
        format!(
            "{capped:.1} µs limited (runs {}), {open:.1} µs unlimited (runs {})",
            each(&runs[1]),
            each(&runs[0])
        ),
    ));
    row.figures.push((
        "limiter's share".into(),
        format!("{extra:+.1} % sender CPU per delivery"),
    ));
    row.targets.push(Target::at_most(
        "sender CPU added by the limiter",
        extra.max(0.0),
        5.0,
        "%",
        1,
    ));
    eprintln!("limits: fixed load: {capped:.1} µs limited, {open:.1} µs unlimited per delivery ({extra:+.1} %)");
    Ok(row)
}

/// Publishes `rate` deliveries/s (100 events per request) for `duration` and answers the
/// sender's CPU µs per delivery received in that time, and the rate received.
async fn fixed_load(
    ctx: &Ctx,
    limits: Option<serde_json::Value>,
    rate: f64,
    duration: Duration,
) -> anyhow::Result<(f64, f64)> {
    let mut setup = Setup::new(Fsync::EverySec);
    setup.delivery_limits = limits;
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let template = Template::new(100, 1024);
    let requests = rate / 100.0;
    load::fixed_rate(
        &d.target,
        &template,
        requests,
        ctx.seconds(3, 1),
        &Arc::new(Progress::default()),
    )
    .await?;
    let processes = d.processes();
    let (before, received_before) = (processes.sample(), d.receiver.events());
    let started = Instant::now();
    load::fixed_rate(&d.target, &template, requests, duration, &Arc::new(Progress::default())).await?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu = processes.sample().since(&before);
    let received = d.receiver.events() - received_before;
    d.finish(ctx.keep);
    let sender = cpu
        .seconds
        .iter()
        .find(|(label, _)| label == "sender")
        .map_or(0.0, |(_, s)| *s);
    anyhow::ensure!(received > 0, "nothing was delivered at a fixed {rate} deliveries/s");
    Ok((sender * 1e6 / received as f64, received as f64 / seconds))
}

/// The limiter's accuracy: the delivered rate against a cap below the machine's rate.
async fn accuracy_row(
    ctx: &Ctx,
    cap: f64,
    senders: usize,
    accuracy_duration: Duration,
) -> anyhow::Result<crate::report::Row> {
    let limits = json!({"requestsPerSecond": cap, "burst": (cap / 10.0).ceil().max(1.0) as u64});
    let m = measure_with(ctx, senders, Some(limits), accuracy_duration).await?;
    let load = Load::end_to_end(ctx, 4, 2_000, accuracy_duration);
    let mut row = measure::row(
        "limits accuracy",
        format!("requestsPerSecond {cap}, {senders} sender(s)"),
        &m,
        &load,
        "deliveries/s",
    );
    let error = (m.received_per_second() - cap) / cap * 100.0;
    row.figures.push(("error".into(), format!("{error:+.1} % of the cap")));
    row.targets
        .push(Target::at_most("error from the cap", error.abs(), 10.0, "%", 1));
    eprintln!(
        "limits: {senders} sender(s): {:.1}/s, {error:+.1} %",
        m.received_per_second()
    );
    Ok(row)
}
