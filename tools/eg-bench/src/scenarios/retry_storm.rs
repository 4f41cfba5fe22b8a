//! `retry-storm` (scenario 5): the receiver answers `503` to every other request, so
//! half the attempts fail and are retried through the retry sets and the scheduler
//! (with a short retry schedule, so retries come back within the run). The figure is
//! successful deliveries/s; attempts/s shows the extra work.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::{Fsync, Kind};
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load};
use crate::receiver::Behaviour;
use crate::report::thousands;

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
            ("EG__DELIVERY__RETRY_SCHEDULE", "1s".into()),
            ("EG__DELIVERY__RETRY_MINIMUMS", "*=0s".into()),
            ("EG__DELIVERY__MAX_JITTER", "100ms".into()),
        ];
        eprintln!("retry-storm: 503 on 1 request in {fail_every} …");
        let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
        let load = Load {
            warmup: ctx.seconds(5, 3),
            drain: ctx.seconds(60, 20),
            ..Load::end_to_end(ctx, 4, 5_000, duration)
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
        row.notes.extend(setup.describe());
        eprintln!("retry-storm: {} deliveries/s", thousands(m.received_per_second()));
        Ok(vec![row])
    })
}
