//! `slow-receiver` (scenario 6): every delivery takes the endpoint 50 ms, so a sender
//! can do at most concurrency ÷ 50 ms deliveries/s; more sender processes should add
//! throughput in proportion. Measured with 1, 2 and 4 eg-sender processes (senders are
//! added to the same deployment between windows).

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load};
use crate::receiver::Behaviour;
use crate::report::{Target, thousands};
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "slow-receiver",
    summary: "6: 50 ms endpoint, 1, 2 and 4 eg-sender processes",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench slow-receiver: deliveries/s to an endpoint that takes 50 ms per request, with
1, 2 and 4 eg-sender processes (concurrency 64 each, eg's default).

usage: eg-bench slow-receiver [options]

  --delay D              the endpoint's time per request (default 50ms)
  --duration D           measured window per sender count (default 10s; quick 3s)

";

const CONCURRENCY: f64 = 64.0;

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let delay = flags.duration("delay", Duration::from_millis(50))?;
        let duration = flags.duration("duration", ctx.seconds(10, 3))?;
        flags.finish()?;
        let mut setup = Setup::new(Fsync::EverySec);
        setup.receiver = Behaviour {
            delay,
            ..Behaviour::default()
        };
        eprintln!("slow-receiver: {delay:?} per request …");
        let mut d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
        let mut rows = Vec::new();
        let mut one = None;
        for senders in [1usize, 2, 4] {
            while d.senders.len() < senders {
                d.add_sender(&[]).await?;
            }
            let load = Load {
                drain: Duration::ZERO,
                ..Load::end_to_end(ctx, 2, 2_000, duration)
            };
            let m = measure::steady(&d, &load).await?;
            let rate = m.received_per_second();
            let bound = senders as f64 * CONCURRENCY / delay.as_secs_f64();
            let mut row = measure::row(
                "6 slow receiver",
                format!("{senders} sender(s), {} ms endpoint", delay.as_millis()),
                &m,
                &load,
                "deliveries/s",
            );
            row.ceiling = Some((format!("{senders} × concurrency 64 ÷ {} ms", delay.as_millis()), bound));
            row.figures.push((
                "most requests at the endpoint at once".into(),
                m.at_end.most_in_flight.to_string(),
            ));
            let base = *one.get_or_insert(rate);
            if senders > 1 {
                row.figures
                    .push(("speed-up over 1 sender".into(), format!("{:.2}×", rate / base)));
            }
            if senders == 4 {
                row.targets.push(Target {
                    what: "4 senders vs 1".into(),
                    wanted: "≥ 3.5×".into(),
                    measured: format!("{:.2}×", rate / base),
                    met: rate / base >= 3.5,
                });
            }
            row.notes.extend(setup.describe());
            eprintln!("slow-receiver: {senders} sender(s): {} deliveries/s", thousands(rate));
            rows.push(row);
        }
        d.finish(ctx.keep);
        Ok(rows)
    })
}
