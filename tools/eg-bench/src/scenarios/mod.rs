//! The scenarios eg-bench can run. A scenario is a module with a [`Scenario`] constant:
//! its name on the command line, a one-line summary, its usage text, and a function
//! that takes the run's [`Ctx`] and its own flags, runs, and hands back [`Row`]s (main
//! prints them and writes the JSON). Add one by writing the module and listing it in
//! [`ALL`]; `all` runs every scenario in that order.

use crate::args::Flags;
use crate::ctx::Ctx;
use crate::report::Row;
use std::future::Future;
use std::pin::Pin;

mod all;
mod archive_cost;
mod batched;
mod bearer;
mod ceilings;
mod dead_letters;
mod dedup;
mod destinations;
mod end_to_end;
mod fan_out;
mod ingress;
mod latency;
mod limits;
mod ordering;
mod pull;
mod redis_memory;
mod redis_transport;
mod replay;
mod retry_storm;
mod scheduling;
mod sender_memory;
mod slow_receiver;
mod traces;

pub type Rows<'a> = Pin<Box<dyn Future<Output = anyhow::Result<Vec<Row>>> + 'a>>;
pub type Run = for<'a> fn(&'a mut Ctx, Flags) -> Rows<'a>;

pub struct Scenario {
    pub name: &'static str,
    pub summary: &'static str,
    pub usage: &'static str,
    pub run: Run,
}

/// In the order `all` runs them.
pub const ALL: &[Scenario] = &[
    ceilings::SCENARIO,
    ingress::SCENARIO,
    end_to_end::SCENARIO,
    latency::SCENARIO,
    batched::SCENARIO,
    fan_out::SCENARIO,
    retry_storm::SCENARIO,
    slow_receiver::SCENARIO,
    limits::SCENARIO,
    ordering::SCENARIO,
    bearer::SCENARIO,
    dedup::SCENARIO,
    archive_cost::SCENARIO,
    traces::SCENARIO,
    scheduling::SCENARIO,
    redis_memory::SCENARIO,
    sender_memory::SCENARIO,
    pull::SCENARIO,
    dead_letters::SCENARIO,
    destinations::SCENARIO,
    redis_transport::SCENARIO,
    replay::SCENARIO,
    all::SCENARIO,
];

/// Usage lines every scenario accepts (main takes them before the scenario runs).
pub const COMMON_USAGE: &str = "\
common options:
  --quick                smaller sizes: a smoke check, not figures to quote
  --bin-dir PATH         where eg-ingress, eg-sender, … are (default: next to eg-bench)
  --out PATH             the JSON report (default target/bench/<scenario>.json)
  --doc PATH             also write the report as markdown (as docs/benchmarks.md)
  --note TEXT            a note for the reader of the markdown report
  --keep                 keep each deployment's run directory (tier logs)
  -h, --help             this text
";
