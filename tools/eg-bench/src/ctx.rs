//! The context of one eg-bench run, shared by every scenario and by the loads they
//! measure: how big to run, where the tiers are, and the ceilings measured so far.

use crate::ceiling::Ceilings;
use std::path::PathBuf;
use std::time::Duration;

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
