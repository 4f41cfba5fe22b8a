//! `ceilings`: measures every ceiling the other scenarios are compared with (Redis XADD
//! with and without pipelining for both `appendfsync` settings; the bench's HTTP client
//! to its receiver with 1 and 100 events per request), so `all` measures them up front,
//! on a machine not yet warmed by a deployment.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::{Fsync, Kind};
use crate::ctx::Ctx;
use crate::report::Row;

pub const SCENARIO: Scenario = Scenario {
    name: "ceilings",
    summary: "what Redis and the bench's HTTP client/receiver do with nothing of eg in between",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench ceilings: redis-benchmark XADD (1 KB field, 50 connections, with and without
-P 100, appendfsync everysec and always) and the bench's HTTP client posting to its own
receiver (1 and 100 events per request).

usage: eg-bench ceilings [common options]

";

pub const KINDS: [Kind; 6] = [
    Kind::RedisXadd {
        fsync: Fsync::EverySec,
        pipeline: 1,
    },
    Kind::RedisXadd {
        fsync: Fsync::EverySec,
        pipeline: 100,
    },
    Kind::RedisXadd {
        fsync: Fsync::Always,
        pipeline: 1,
    },
    Kind::RedisXadd {
        fsync: Fsync::Always,
        pipeline: 100,
    },
    Kind::Http { events: 1 },
    Kind::Http { events: 100 },
];

fn run(ctx: &mut Ctx, flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        flags.finish()?;
        let mut rows = Vec::new();
        for kind in KINDS {
            let value = ctx.ceilings.get(kind).await?;
            let mut row = Row::new("0 ceiling", kind.label());
            row.rate = Some((value, kind.unit()));
            rows.push(row);
        }
        Ok(rows)
    })
}
