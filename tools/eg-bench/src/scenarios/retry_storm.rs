//! `retry-storm` (scenario 5): the receiver answers `503` to every other request, so
//! half the attempts fail and are retried through the retry sets and the scheduler
//! (with a short retry schedule, so retries come back within the run). The figure is
//! successful deliveries/s; attempts/s shows the extra work.
//!
//! The load generator holds at most [`WINDOW`] deliveries outstanding, so by Little's
//! law the figure is at most that over the mean time from publish to receipt, which is
//! at least the mean retry wait ([`window_bound`]): the row shows that bound beside the
//! figure, so a figure near it reads as bound by the bench, not by eg.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::{Fsync, Kind};
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load};
use crate::receiver::Behaviour;
use crate::report::thousands;
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "retry-storm",
    summary: "5: the receiver fails every other request (503); retries scheduled",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench retry-storm: deliveries/s when the endpoint answers 503 to every other request
(retry schedule 1s, no 503 minimum, jitter 100ms).

usage: eg-bench retry-storm [options]

  --duration D           measured window (default 15s; quick 4s)
  --fail-every N         answer 503 to one request in N (default 2)

";

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let duration = flags.duration("duration", ctx.seconds(15, 4))?;
        let fail_every = flags.number("fail-every", 2)?;
        flags.finish()?;
        let ceiling = Kind::Http { events: 1 };
        let ceiling_value = ctx.ceilings.get(ceiling).await?;
        let mut setup = Setup::new(Fsync::EverySec);
        setup.receiver = Behaviour {
            fail_every,
            ..Behaviour::default()
        };
        // Event Grid's schedule starts at 10 s, and 503s wait at least 30 s: shortened so
        // retries come back within the window.
        setup.env = vec![
            ("EG__DELIVERY__RETRY_SCHEDULE", format!("{}ms", RETRY.as_millis())),
            ("EG__DELIVERY__RETRY_MINIMUMS", "*=0s".into()),
            ("EG__DELIVERY__MAX_JITTER", format!("{}ms", JITTER.as_millis())),
        ];
        eprintln!("retry-storm: 503 on 1 request in {fail_every} …");
        let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
        let load = Load {
            warmup: ctx.seconds(5, 3),
            drain: ctx.seconds(60, 20),
            ..Load::end_to_end(ctx, 4, WINDOW, duration)
        };
        let m = measure::steady(&d, &load).await?;
        d.finish(ctx.keep);
        let mut row = measure::row(
            "5 retry storm",
            format!("503 on 1 request in {fail_every}"),
            &m,
            &load,
            "deliveries/s",
        );
        row.ceiling = Some((ceiling.label(), ceiling_value));
        let attempts = (m.at_end.requests + m.at_end.failed) - (m.at_start.requests + m.at_start.failed);
        row.figures.push((
            "attempts/s".into(),
            format!(
                "{} ({} answered 503)",
                thousands(attempts as f64 / m.seconds),
                thousands((m.at_end.failed - m.at_start.failed) as f64 / m.seconds)
            ),
        ));
        if let Some(bound) = window_bound(fail_every) {
            row.figures.push((
                "the window's bound".into(),
                format!(
                    "≤ {} deliveries/s ({} outstanding ÷ a mean retry wait of {:.2} s)",
                    thousands(bound),
                    thousands(WINDOW as f64),
                    WINDOW as f64 / bound
                ),
            ));
        }
        row.notes.extend(setup.describe());
        eprintln!("retry-storm: {} deliveries/s", thousands(m.received_per_second()));
        Ok(vec![row])
    })
}

/// Deliveries the load generator keeps outstanding.
const WINDOW: u64 = 5_000;
/// The retry schedule's one step, and the most jitter added to it.
const RETRY: Duration = Duration::from_secs(1);
const JITTER: Duration = Duration::from_millis(100);

/// The most deliveries/s the window allows when one request in `fail_every` fails: a
/// delivery's attempts fail independently with p = 1/`fail_every`, so it waits on
/// average p / (1 − p) retries of [`RETRY`] plus half of [`JITTER`] each, and the window
/// over that mean wait bounds the rate (Little's law). `None` when nothing fails.
fn window_bound(fail_every: u64) -> Option<f64> {
    if fail_every < 2 {
        return None;
    }
    let p = 1.0 / fail_every as f64;
    let mean_wait = p / (1.0 - p) * (RETRY + JITTER / 2).as_secs_f64();
    Some(WINDOW as f64 / mean_wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_bounds_the_rate_by_the_mean_retry_wait() {
        // Every other request fails: one retry of 1.05 s on average.
        let bound = window_bound(2).unwrap_or_default();
        assert!((bound - 5_000.0 / 1.05).abs() < 1.0, "{bound}");
        // One in four: a third of a retry on average.
        let bound = window_bound(4).unwrap_or_default();
        assert!((bound - 5_000.0 / (1.05 / 3.0)).abs() < 1.0, "{bound}");
        assert_eq!(window_bound(0), None, "nothing fails, no retry wait");
    }
}
