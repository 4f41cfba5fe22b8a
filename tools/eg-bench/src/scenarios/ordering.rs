//! `ordering`: what ordered delivery per key costs (docs/ordered-delivery.md). Three rows,
//! end to end with one sender:
//! - unordered: the same subscription without `orderedDelivery`, the reference;
//! - 1,000 keys (`orderedDelivery` by subject, subjects cycling over 1,000 values): the
//!   cost of lines, publish into the home partition and advancing on settle; target
//!   ≥ 50 % of unordered;
//! - 4 keys: head-of-line cost made visible, at most four deliveries in flight at once
//!   (one per key), so the rate is bounded by the round trip, not by eg's throughput.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load, Measured};
use crate::report::{Row, Target, thousands};
use serde_json::json;
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "ordering",
    summary: "orderedDelivery: 1,000 keys against unordered, and 4 keys (head-of-line)",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench ordering: end-to-end deliveries/s of one subscription unordered, then ordered
by subject over many keys (target: at least half the unordered rate), then over a few
keys (head-of-line: one delivery in flight per key).

usage: eg-bench ordering [options]

  --duration D           each measured window (default 15s; quick 4s)
  --keys N               keys of the many-keys row (default 1000)
  --few-keys N           keys of the few-keys row (default 4)

";

async fn measure_with(ctx: &Ctx, keys: Option<u64>, duration: Duration) -> anyhow::Result<(Measured, Load)> {
    let mut setup = Setup::new(Fsync::EverySec);
    setup.ordered_delivery = keys.map(|_| json!({"key": "subject"}));
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let load = Load {
        keys,
        ..Load::end_to_end(ctx, 4, 2_000, duration)
    };
    let m = measure::steady(&d, &load).await?;
    d.finish(ctx.keep);
    Ok((m, load))
}

fn ordered_row(variant: String, m: &Measured, load: &Load, unordered: &Measured) -> (Row, f64) {
    let share = m.received_per_second() / unordered.received_per_second().max(1.0);
    let mut row = measure::row("ordering", variant, m, load, "deliveries/s");
    row.figures.push((
        "unordered".into(),
        format!("{} deliveries/s", thousands(unordered.received_per_second())),
    ));
    row.figures
        .push(("share of unordered".into(), format!("{:.1} %", share * 100.0)));
    (row, share)
}

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let duration = flags.duration("duration", ctx.seconds(15, 4))?;
        let keys: u64 = flags.number("keys", 1_000)?;
        let few: u64 = flags.number("few-keys", 4)?;
        flags.finish()?;

        eprintln!("ordering: unordered …");
        let (open, open_load) = measure_with(ctx, None, duration).await?;
        let mut rows = vec![measure::row(
            "ordering",
            "unordered, 1 sender",
            &open,
            &open_load,
            "deliveries/s",
        )];

        eprintln!("ordering: {keys} keys …");
        let (many, load) = measure_with(ctx, Some(keys), duration).await?;
        let (mut row, share) = ordered_row(
            format!("ordered by subject, {keys} keys, 1 sender"),
            &many,
            &load,
            &open,
        );
        row.targets
            .push(Target::at_least("share of unordered", share * 100.0, 50.0, "%"));
        eprintln!("ordering: {keys} keys: {:.1} % of unordered", share * 100.0);
        rows.push(row);

        eprintln!("ordering: {few} keys …");
        let (head_of_line, load) = measure_with(ctx, Some(few), duration).await?;
        let (row, share) = ordered_row(
            format!("ordered by subject, {few} keys (head-of-line), 1 sender"),
            &head_of_line,
            &load,
            &open,
        );
        eprintln!("ordering: {few} keys: {:.1} % of unordered", share * 100.0);
        rows.push(row);
        Ok(rows)
    })
}
