//! `batched` (scenario 3): end to end with `maxEventsPerBatch` 100 (and
//! `preferredBatchSizeInKilobytes` 1024, so 100 events of 1 KB fit one batch): the
//! sender reads what is ready and posts it 100 events per request.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::{Fsync, Kind};
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load};
use crate::report::{Target, thousands};

pub const SCENARIO: Scenario = Scenario {
    name: "batched",
    summary: "3: publish → deliver with maxEventsPerBatch 100",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench batched: events/s delivered with output batching (maxEventsPerBatch 100), one
subscription.

usage: eg-bench batched [options]

  --duration D           measured window (default 15s; quick 4s)
  --backlog N            most deliveries outstanding before publishers wait (default 20000)

";

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let duration = flags.duration("duration", ctx.seconds(15, 4))?;
        let backlog = flags.number("backlog", 20_000)?;
        flags.finish()?;
        let ceiling = Kind::Http { events: 100 };
        let ceiling_value = ctx.ceilings.get(ceiling).await?;
        let mut setup = Setup::new(Fsync::EverySec);
        setup.max_events_per_batch = 100;
        eprintln!("batched: …");
        let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
        let load = Load::end_to_end(ctx, 8, backlog, duration);
        let m = measure::steady(&d, &load).await?;
        d.finish(ctx.keep);
        let mut row = measure::row("3 batched", "maxEventsPerBatch 100", &m, &load, "events/s");
        row.ceiling = Some((ceiling.label(), ceiling_value));
        let requests = m.after_drain.requests.max(1);
        row.figures.push((
            "events per delivery request".into(),
            format!("{:.1} on average", m.after_drain.events as f64 / requests as f64),
        ));
        row.targets.push(Target::at_least(
            "end to end, batched",
            m.received_per_second(),
            200_000.0,
            "events/s",
        ));
        row.notes.extend(setup.describe());
        eprintln!("batched: {} events/s", thousands(m.received_per_second()));
        Ok(vec![row])
    })
}
