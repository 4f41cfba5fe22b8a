//! `limits`: what `deliveryLimits` costs and how closely it holds its cap
//! (docs/rate-limits.md). Two rows:
//! - cost: end-to-end deliveries/s unlimited and with `requestsPerSecond` far above what
//!   the machine delivers (the gate is asked, never says wait); target ≥ 95 %. Runs of
//!   one setup minutes apart differ by a quarter on a shared machine, so the two setups
//!   alternate (`--rounds`), the row compares their medians and shows the sender's CPU per
//!   delivery, which the machine's other load moves far less.
//! - accuracy: a cap well below the machine's rate, with 1 and with 4 senders, over a
//!   window; the delivered rate against the cap; target within ±10 %.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::compare;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load, Measured};
use crate::report::{Target, thousands};
use serde_json::json;
use std::time::Duration;

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
        let rounds: usize = flags.number("rounds", ctx.sized(3, 1))?;
        flags.finish()?;
        let load = Load::end_to_end(ctx, 4, 2_000, duration);
        let mut rows = Vec::new();
        if only == 0 {
            rows.push(cost_row(ctx, &load, duration, rounds).await?);
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
