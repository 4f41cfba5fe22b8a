//! `fan-out` (scenario 4): every event matches 10 subscriptions (10 endpoints on the
//! receiver), no batching: one stored body, ten deliveries per event.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::{Fsync, Kind};
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load};
use crate::report::thousands;

pub const SCENARIO: Scenario = Scenario {
    name: "fan-out",
    summary: "4: every event matches 10 subscriptions",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench fan-out: deliveries/s when every event matches 10 subscriptions, no batching.

usage: eg-bench fan-out [options]

  --subscriptions N      matching subscriptions (default 10)
  --duration D           measured window (default 15s; quick 4s)

";

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let subscriptions: usize = flags.number("subscriptions", 10)?;
        let duration = flags.duration("duration", ctx.seconds(15, 4))?;
        flags.finish()?;
        let ceiling = Kind::Http { events: 1 };
        let ceiling_value = ctx.ceilings.get(ceiling).await?;
        let mut setup = Setup::new(Fsync::EverySec);
        setup.subscriptions = subscriptions;
        eprintln!("fan-out: {subscriptions} subscriptions …");
        let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
        let load = Load {
            fanout: subscriptions as u64,
            ..Load::end_to_end(ctx, 4, 5_000, duration)
        };
        let m = measure::steady(&d, &load).await?;
        d.finish(ctx.keep);
        let mut row = measure::row(
            "4 fan-out",
            format!("{subscriptions} subscriptions, no batching"),
            &m,
            &load,
            "deliveries/s",
        );
        row.ceiling = Some((ceiling.label(), ceiling_value));
        row.figures.push((
            "events/s".into(),
            format!(
                "{} (each delivered {subscriptions} times)",
                thousands(m.received_per_second() / subscriptions as f64)
            ),
        ));
        row.notes.extend(setup.describe());
        eprintln!("fan-out: {} deliveries/s", thousands(m.received_per_second()));
        Ok(vec![row])
    })
}
