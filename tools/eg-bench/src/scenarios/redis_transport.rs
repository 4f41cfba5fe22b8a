//! `redis-transport`: what TLS to Redis costs. The ingress row (scenario 1, everysec)
//! and the end-to-end row (scenario 2) measured in one run with the tiers reaching the
//! same kind of Redis over a unix socket, plain TCP and TLS, so the rows sit side by
//! side on the same machine state.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::launcher::Transport;
use crate::measure::{self, Load};
use crate::report::{Row, thousands};
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "redis-transport",
    summary: "ingress and end to end with the tiers reaching Redis over a unix socket, TCP and TLS",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench redis-transport: the ingress row (1 KB events, 100 per request, no sender,
appendfsync everysec) and the end-to-end row (one subscription, no batching) with the
tiers reaching Redis over a unix socket, plain TCP and TLS (a CA made for the run,
EG__REDIS__TLS_CA_FILE), one after the other in one run.

usage: eg-bench redis-transport [options]

  --duration D           measured window of each row (default 10s; quick 3s)
  --transports LIST      comma-separated: unix, tcp, tls (default all three)

";

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let duration = flags.duration("duration", ctx.seconds(10, 3))?;
        let transports = match flags.text("transports")? {
            None => vec![Transport::UnixSocket, Transport::Tcp, Transport::Tls],
            Some(list) => list.split(',').map(parse_transport).collect::<anyhow::Result<_>>()?,
        };
        flags.finish()?;
        let mut rows = Vec::new();
        for &transport in &transports {
            rows.push(ingress(ctx, transport, duration).await?);
        }
        for &transport in &transports {
            rows.push(end_to_end(ctx, transport, duration).await?);
        }
        Ok(rows)
    })
}

fn parse_transport(name: &str) -> anyhow::Result<Transport> {
    match name.trim() {
        "unix" => Ok(Transport::UnixSocket),
        "tcp" => Ok(Transport::Tcp),
        "tls" => Ok(Transport::Tls),
        other => anyhow::bail!("--transports: {other:?} is not unix, tcp or tls"),
    }
}

async fn ingress(ctx: &Ctx, transport: Transport, duration: Duration) -> anyhow::Result<Row> {
    let mut setup = Setup::new(Fsync::EverySec);
    setup.transport = transport;
    eprintln!("redis-transport: ingress over {} …", transport.name());
    let variant = format!("Redis over {}", transport.name());
    let (mut row, m) = super::ingress::publish_only(ctx, setup.clone(), ctx.sized(32, 16), duration, variant).await?;
    let rate = m.published_per_second();
    row.figures.push(("Redis per event".into(), m.redis.brief(6)));
    row.notes.push("no eg-sender running; one subscription".into());
    row.notes.extend(setup.describe());
    row.details = m.to_json();
    eprintln!(
        "redis-transport: ingress over {}: {} events/s",
        transport.name(),
        thousands(rate)
    );
    Ok(row)
}

async fn end_to_end(ctx: &Ctx, transport: Transport, duration: Duration) -> anyhow::Result<Row> {
    let mut setup = Setup::new(Fsync::EverySec);
    setup.transport = transport;
    eprintln!("redis-transport: end to end over {} …", transport.name());
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;
    let load = Load::end_to_end(ctx, 4, 2_000, duration);
    let m = measure::steady(&d, &load).await?;
    d.finish(ctx.keep);

    let mut row = measure::row(
        "2 end to end",
        format!("Redis over {}", transport.name()),
        &m,
        &load,
        "deliveries/s",
    );
    row.notes.extend(setup.describe());
    eprintln!(
        "redis-transport: end to end over {}: {} deliveries/s",
        transport.name(),
        thousands(m.received_per_second())
    );
    Ok(row)
}
