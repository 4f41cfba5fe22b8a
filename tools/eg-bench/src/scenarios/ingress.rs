//! `ingress` (scenario 1): how many events per second eg-ingress makes durable. 1 KB
//! Event Grid events, 100 per request, from many connections, to a topic with one
//! subscription (so every event is stored with one delivery) and no sender running.
//! Measured with Redis's `appendfsync everysec` and, separately, `always`.
//! `--events-per-request 1` measures the cost of a request itself (issue 31): each row
//! then also shows the ingress's and Redis's CPU per request.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::{Fsync, Kind};
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load, Measured};
use crate::report::{Row, Target, thousands};
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "ingress",
    summary: "1: publish throughput, no sender (appendfsync everysec and always)",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench ingress: events/s eg-ingress answers 200 (stored durably with their
deliveries), 1 KB events, 100 per request, no sender running.

usage: eg-bench ingress [options]

  --connections N        publish requests in flight at once (default 32; quick 16)
  --duration D           measured window (default 10s; quick 3s)
  --fsync MODE           everysec, always or both (default both)
  --events-per-request N events in each publish request (default 100)

";

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let connections = flags.number("connections", ctx.sized(32, 16))?;
        let duration = flags.duration("duration", ctx.seconds(10, 3))?;
        let per_request: usize = flags.number("events-per-request", 100)?;
        anyhow::ensure!(per_request > 0, "--events-per-request: at least 1");
        let modes = match flags.text("fsync")?.as_deref() {
            None | Some("both") => vec![Fsync::EverySec, Fsync::Always],
            Some("everysec") => vec![Fsync::EverySec],
            Some("always") => vec![Fsync::Always],
            Some(other) => anyhow::bail!("--fsync {other:?}: everysec, always or both"),
        };
        flags.finish()?;
        let mut rows = Vec::new();
        for fsync in modes {
            let ceiling = Kind::RedisXadd { fsync, pipeline: 100 };
            let ceiling_value = ctx.ceilings.get(ceiling).await?;
            eprintln!("ingress: appendfsync {} …", fsync.name());
            let load = Load {
                events_per_request: per_request,
                ..Load::publish_only(ctx, connections, duration)
            };
            let variant = match per_request {
                100 => format!("appendfsync {}", fsync.name()),
                n => format!("appendfsync {}, {n} per request", fsync.name()),
            };
            let (mut row, m) = publish_with(ctx, Setup::new(fsync), &load, variant).await?;
            let rate = m.published_per_second();
            let requests = rate / per_request as f64;
            row.ceiling = Some((ceiling.label(), ceiling_value));
            row.figures.push((
                "requests/s".into(),
                format!("{requests:.0} from {connections} connections"),
            ));
            row.figures
                .push(("CPU per request".into(), per_request_cpu(&m, requests)));
            if m.refused > 0 {
                row.figures.push(("503s retried".into(), m.refused.to_string()));
            }
            row.figures.push(("Redis per event".into(), m.redis.brief(6)));
            if fsync == Fsync::EverySec {
                row.targets
                    .push(Target::at_least("durable ingress", rate, 100_000.0, "events/s"));
            }
            row.notes.push(format!(
                "no eg-sender, eg-scheduler or eg-deadletter running; one subscription, so each event is stored with one delivery; appendfsync {}",
                fsync.name()
            ));
            row.details = m.to_json();
            eprintln!("ingress: appendfsync {}: {} events/s", fsync.name(), thousands(rate));
            rows.push(row);
        }
        Ok(rows)
    })
}

/// Publishes 1 KB events, 100 per request, from `connections` connections for
/// `duration` to `setup` with no eg-sender, eg-scheduler or eg-deadletter running, and
/// answers the measurement and the row `variant` with what every ingress row shows.
pub(super) async fn publish_only(
    ctx: &Ctx,
    setup: Setup,
    connections: usize,
    duration: Duration,
    variant: String,
) -> anyhow::Result<(Row, Measured)> {
    publish_with(ctx, setup, &Load::publish_only(ctx, connections, duration), variant).await
}

/// [`publish_only`] with any publish-only `load` (events per request, size).
async fn publish_with(ctx: &Ctx, mut setup: Setup, load: &Load, variant: String) -> anyhow::Result<(Row, Measured)> {
    setup.senders = 0;
    setup.scheduler = false;
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let m = measure::steady(&d, load).await?;
    d.finish(ctx.keep);

    let mut row = Row::new("1 ingress", variant);
    row.rate = Some((m.published_per_second(), "events/s"));
    row.latency_label = Some(match load.events_per_request {
        100 => "publish request (100 events) → 200, round trip",
        1 => "publish request (1 event) → 200, round trip",
        _ => "publish request → 200, round trip",
    });
    row.latency = Some(m.request_latency);
    row.cpu = Some((m.cpu.clone(), m.seconds));
    Ok((row, m))
}

/// Each process's CPU µs per request, `requests` a second over the window: steadier on a
/// shared machine than the rate itself.
fn per_request_cpu(m: &Measured, requests: f64) -> String {
    ["ingress", "redis", "bench"]
        .iter()
        .filter_map(|label| {
            let seconds = m.cpu.get(label)?;
            Some(format!("{label} {:.1} µs", seconds * 1e6 / (requests * m.seconds)))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
