//! `latency` (with scenario 2): publish→receipt latency at a fixed, moderate load —
//! 1,000 events/s, one event per publish request, one subscription, no batching — the
//! delay a publisher's event sees when eg is not saturated. Redis flushes every write
//! before answering (`appendfsync always`, what the target names and eg deploys) unless
//! `--everysec` is given.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::load::{self, Progress, Template};
use crate::report::{Row, Target};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const SCENARIO: Scenario = Scenario {
    name: "latency",
    summary: "2: publish→receipt latency at a fixed 1,000 events/s",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench latency: publish→receipt latency at a fixed rate, one event per request, one
subscription, no batching.

usage: eg-bench latency [options]

  --rate N               events (= requests) per second (default 1000)
  --duration D           measured window (default 10s; quick 3s)
  --everysec             appendfsync everysec instead of always

";

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let rate: f64 = flags.number("rate", 1000.0)?;
        let duration = flags.duration("duration", ctx.seconds(10, 3))?;
        let fsync = if flags.switch("everysec")? {
            Fsync::EverySec
        } else {
            Fsync::Always
        };
        flags.finish()?;
        let setup = Setup::new(fsync);
        eprintln!("latency: {rate} events/s …");
        let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
        let template = Template::new(1, 1024);
        let warmup = Arc::new(Progress::default());
        load::fixed_rate(&d.target, &template, rate, ctx.seconds(2, 1), &warmup).await?;

        let progress = Arc::new(Progress::default());
        let processes = d.processes();
        d.receiver.latency().reset();
        let (before, received_before) = (processes.sample(), d.receiver.events());
        let started = Instant::now();
        load::fixed_rate(&d.target, &template, rate, duration, &progress).await?;
        let owed = received_before + progress.published();
        let until = Instant::now() + Duration::from_secs(5);
        while d.receiver.events() < owed && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let seconds = started.elapsed().as_secs_f64();
        let cpu = processes.sample().since(&before);
        let latency = d.receiver.latency().latency();
        let received = d.receiver.events() - received_before;
        let request = progress.request_latency.latency();
        d.finish(ctx.keep);

        let mut row = Row::new(
            "2 latency",
            format!(
                "fixed {rate:.0} events/s, 1 event per request, appendfsync {}",
                fsync.name()
            ),
        );
        row.rate = Some((received as f64 / seconds, "events/s"));
        row.latency = Some(latency);
        row.cpu = Some((cpu, seconds));
        row.figures.push((
            "publish request round trip".into(),
            format!(
                "p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms",
                request.p50_ms, request.p99_ms, request.max_ms
            ),
        ));
        row.figures.push((
            "received".into(),
            format!("{received} of {} published", progress.published()),
        ));
        row.targets.push(Target::at_most(
            "latency p50 at 1,000 events/s",
            latency.p50_ms,
            2.0,
            "ms",
            2,
        ));
        row.targets.push(Target::at_most(
            "latency p99 at 1,000 events/s",
            latency.p99_ms,
            10.0,
            "ms",
            2,
        ));
        row.notes.extend(setup.describe());
        row.details = serde_json::json!({
            "publishToReceipt": latency.to_json(), "publishRequest": request.to_json(),
            "published": progress.published(), "received": received,
        });
        eprintln!("latency: p50 {:.2} ms, p99 {:.2} ms", latency.p50_ms, latency.p99_ms);
        Ok(vec![row])
    })
}
