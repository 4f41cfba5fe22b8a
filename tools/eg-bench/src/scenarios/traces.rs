//! `traces`: what OpenTelemetry export costs (docs/traces.md). End-to-end deliveries/s with
//! export off, then with every tier exporting over OTLP/HTTP to a receiver in this process
//! (`eg_testkit::OtlpReceiver`, decoding every span as a collector would) at 10 % and at
//! 100 % sampling of new traces. The publishers send no `traceparent`, so the sampler
//! alone decides: a sampled publish request traces its 100 events' deliveries.
//! Setups alternate and medians are compared (crate::compare); each row also shows the
//! spans that reached the receiver per delivery.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::compare;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load, Measured};
use crate::report::{Row, thousands};
use eg_testkit::OtlpReceiver;
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "traces",
    summary: "deliveries/s with trace export off, at 10 % and at 100 % sampling",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench traces: end-to-end deliveries/s with OpenTelemetry export off, then exporting
over OTLP/HTTP to a receiver in this process at 10 % and 100 % sampling, alternating.

usage: eg-bench traces [options]

  --duration D           each measured window (default 15s; quick 4s)
  --rounds N             rounds of the three setups (default 3; quick 1)

";

/// The setups: a name, and the sampler (none: export off).
const SETUPS: [(&str, Option<&str>); 3] = [
    ("export off", None),
    ("10 % sampled", Some("0.1")),
    ("100 % sampled", Some("1.0")),
];

async fn measure_with(
    ctx: &Ctx,
    receiver: &OtlpReceiver,
    ratio: Option<&str>,
    duration: Duration,
) -> anyhow::Result<(Measured, usize)> {
    let mut setup = Setup::new(Fsync::EverySec);
    if let Some(ratio) = ratio {
        setup.env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()));
        setup
            .env
            .push(("OTEL_TRACES_SAMPLER", "parentbased_traceidratio".into()));
        setup.env.push(("OTEL_TRACES_SAMPLER_ARG", ratio.into()));
    }
    let before = receiver.span_count();
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let load = Load::end_to_end(ctx, 4, 2_000, duration);
    let m = measure::steady(&d, &load).await?;
    d.finish(ctx.keep);
    Ok((m, receiver.span_count() - before))
}

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let duration = flags.duration("duration", ctx.seconds(15, 4))?;
        let rounds: usize = flags.number("rounds", ctx.sized(3, 1))?;
        flags.finish()?;
        let load = Load::end_to_end(ctx, 4, 2_000, duration);
        let receiver = OtlpReceiver::start().await;
        let names = SETUPS.map(|(name, _)| name);
        let ctx = &*ctx;
        let measured =
            compare::alternating(rounds, &names, |i| measure_with(ctx, &receiver, SETUPS[i].1, duration)).await?;
        // Spans per delivery over each whole run, drain included.
        let spans: Vec<Vec<f64>> = measured
            .iter()
            .map(|runs| {
                runs.iter()
                    .map(|(m, exported)| *exported as f64 / m.after_drain.requests.max(1) as f64)
                    .collect()
            })
            .collect();
        let runs: Vec<Vec<Measured>> = measured
            .into_iter()
            .map(|runs| runs.into_iter().map(|(m, _)| m).collect())
            .collect();
        let off = compare::summarise(&runs[0])?;
        let mut rows = Vec::new();
        for (i, (name, _)) in SETUPS.iter().enumerate() {
            let s = compare::summarise(&runs[i])?;
            let mut row: Row = measure::row(
                "traces",
                format!("{name}, 1 sender, median of {rounds}"),
                s.typical,
                &load,
                "deliveries/s",
            );
            row.rate = Some((s.rate, "deliveries/s"));
            row.figures.push(("runs".into(), format!("{} deliveries/s", s.each)));
            row.figures.push((
                "sender CPU per delivery".into(),
                format!("{:.0} µs (median)", s.sender_micros),
            ));
            let share = s.rate / off.rate.max(1.0) * 100.0;
            if i > 0 {
                row.figures.push((
                    "spans received per delivery".into(),
                    format!("{:.2} (median)", compare::median(spans[i].iter().copied())),
                ));
                row.figures
                    .push(("share of export off".into(), format!("{share:.1} %")));
            }
            eprintln!(
                "traces: {name}: {} deliveries/s, {share:.1} % of export off",
                thousands(s.rate)
            );
            rows.push(row);
        }
        Ok(rows)
    })
}
