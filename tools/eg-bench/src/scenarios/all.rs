//! `all`: every scenario in turn, with the ceilings measured first — what `just bench`
//! runs. Each scenario gets only the common options (sizes follow `--quick`).

use super::{ALL, Rows, Scenario};
use crate::args::Flags;
use crate::ctx::Ctx;

pub const SCENARIO: Scenario = Scenario {
    name: "all",
    summary: "every scenario above, ceilings first (what `just bench` runs)",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench all: runs every scenario with its default sizes (smaller with --quick),
measuring the ceilings first; prints one table and writes one JSON report
(target/bench/bench.json) and, with --doc, the markdown report.

usage: eg-bench all [common options] [--only a,b,…]

  --only LIST            run only these scenarios (comma-separated names)

";

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let only: Option<Vec<String>> = flags
            .text("only")?
            .map(|list| list.split(',').map(|s| s.trim().to_owned()).collect());
        flags.finish()?;
        if let Some(names) = &only
            && let Some(unknown) = names.iter().find(|n| !ALL.iter().any(|s| s.name == n.as_str()))
        {
            anyhow::bail!("--only: no scenario {unknown:?}");
        }
        let mut rows = Vec::new();
        for scenario in ALL.iter().filter(|s| s.name != SCENARIO.name) {
            if only
                .as_ref()
                .is_some_and(|names| !names.iter().any(|n| n == scenario.name))
            {
                continue;
            }
            eprintln!("\n== {} ==", scenario.name);
            let found = (scenario.run)(ctx, Flags::default()).await;
            match found {
                // The ceilings have their own table in the report.
                Ok(found) => rows.extend(found.into_iter().filter(|r| !r.scenario.starts_with("0 "))),
                // One scenario failing does not lose the others' figures.
                Err(e) => {
                    eprintln!("eg-bench all: {} failed: {e:#}", scenario.name);
                    let mut row = crate::report::Row::new(scenario.name, "FAILED");
                    row.notes.push(format!("{e:#}"));
                    rows.push(row);
                }
            }
        }
        Ok(rows)
    })
}
