//! The scenarios eg-bench can run. A scenario is a module with a [`Scenario`] constant:
//! its name on the command line, a one-line summary, its usage text, and a function
//! that takes the run's [`Ctx`] and its own flags, runs, and hands back [`Row`]s (main
//! prints them and writes the JSON). Add one by writing the module and listing it in
//! [`ALL`]; `all` runs every scenario in that order.

use crate::args::Flags;
use crate::ceiling::Ceilings;
use crate::report::Row;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

mod all;
mod batched;
mod ceilings;
mod end_to_end;
mod fan_out;
mod ingress;
mod latency;
mod redis_memory;
mod retry_storm;
mod scheduling;
mod sender_memory;
mod slow_receiver;

/// What every scenario shares in one run.
pub struct Ctx {
    /// Smaller sizes: a smoke check, not figures to quote.
    pub quick: bool,
    /// Where eg-ingress, eg-sender, … are.
    pub bin_dir: PathBuf,
    /// Keep each deployment's run directory (tier logs).
    pub keep: bool,
    /// Ceilings measured so far in this run.
    pub ceilings: Ceilings,
}

impl Ctx {
    /// `full`, or `quick` in a quick run.
    pub fn sized<T>(&self, full: T, quick: T) -> T {
        if self.quick { quick } else { full }
    }

    pub fn seconds(&self, full: u64, quick: u64) -> Duration {
        Duration::from_secs(self.sized(full, quick))
    }
}

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
    scheduling::SCENARIO,
    redis_memory::SCENARIO,
    sender_memory::SCENARIO,
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
