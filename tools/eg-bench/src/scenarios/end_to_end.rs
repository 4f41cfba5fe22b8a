//! `end-to-end` (scenario 2): one subscription, no batching: every event is one HTTP
//! request to the receiver. Publishers are held to a bounded backlog, so the publish
//! rate settles at the delivery rate; the figure is deliveries/s at the receiver.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::{Fsync, Kind};
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::measure::{self, Load};
use crate::report::{Target, thousands};

pub const SCENARIO: Scenario = Scenario {
    name: "end-to-end",
    summary: "2: publish → deliver, one subscription, no batching",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench end-to-end: deliveries/s through ingress, Redis and eg-sender to the receiver,
one subscription, one event per delivery request.

usage: eg-bench end-to-end [options]

  --duration D           measured window (default 15s; quick 4s)
  --concurrency N        EG__SENDER__CONCURRENCY (default 64, eg's default)
  --senders N            eg-sender processes (default 1)
  --backlog N            most deliveries outstanding before publishers wait (default 2000)

";

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let duration = flags.duration("duration", ctx.seconds(15, 4))?;
        let concurrency: usize = flags.number("concurrency", 64)?;
        let senders = flags.number("senders", 1)?;
        let backlog = flags.number("backlog", 2_000)?;
        flags.finish()?;
        let ceiling = Kind::Http { events: 1 };
        let ceiling_value = ctx.ceilings.get(ceiling).await?;
        let xadd = ctx
            .ceilings
            .get(Kind::RedisXadd {
                fsync: Fsync::EverySec,
                pipeline: 1,
            })
            .await?;

        let mut setup = Setup::new(Fsync::EverySec);
        setup.senders = senders;
        if concurrency != 64 {
            setup
                .sender_env
                .push(("EG__SENDER__CONCURRENCY", concurrency.to_string()));
        }
        eprintln!("end-to-end: {senders} sender(s), concurrency {concurrency} …");
        let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
        let load = Load::end_to_end(ctx, 4, backlog, duration);
        let m = measure::steady(&d, &load).await?;
        d.finish(ctx.keep);

        let mut row = measure::row(
            "2 end to end",
            format!("1 subscription, no batching, {senders} sender(s)"),
            &m,
            &load,
            "deliveries/s",
        );
        row.ceiling = Some((ceiling.label(), ceiling_value));
        row.figures.push((
            "Redis round-trip ceiling".into(),
            format!("{} XADD/s without pipelining (everysec)", thousands(xadd)),
        ));
        row.targets.push(Target::at_least(
            "end to end, unbatched",
            m.received_per_second(),
            20_000.0,
            "deliveries/s",
        ));
        row.notes.extend(setup.describe());
        eprintln!("end-to-end: {} deliveries/s", thousands(m.received_per_second()));
        Ok(vec![row])
    })
}
