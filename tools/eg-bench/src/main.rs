//! eg-bench: benchmarks of eg as it runs in production — the tiers as processes (built
//! with `--release` for numbers worth quoting) around a real `redis-server` — driven by
//! a load generator and a counting receiver in this process. Each scenario is a module
//! of [`scenarios`]; `all` runs every one. A run prints a table, writes its figures as
//! JSON and, with `--doc`, as markdown (`just bench` writes `docs/benchmarks.md`).
//! Benchmarks are programs that print numbers, not timed assertions: nothing here
//! passes or fails.
//!
//! ```text
//! cargo build --release -p eg-bench -p eg-ingress -p eg-scheduler -p eg-sender -p eg-deadletter
//! target/release/eg-bench all --quick
//! target/release/eg-bench end-to-end --duration 30s
//! target/release/eg-bench pull --consumers 8     # or: just bench-one pull --consumers 8
//! ```

mod args;
mod brokers_ceiling;
mod ceiling;
mod compare;
mod cpu;
mod ctx;
mod deployment;
mod drain;
mod histogram;
mod launcher;
mod load;
mod machine;
mod markdown;
mod measure;
mod memory;
mod pull_api;
mod receiver;
mod redis_stats;
mod report;
mod scenarios;
mod servers;
mod store_ceiling;
mod stream_ceiling;

use anyhow::Context;
use ctx::Ctx;
use scenarios::COMMON_USAGE;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "\
eg-bench: benchmarks of eg's tiers as real processes around a real Redis.

usage: eg-bench <scenario> [options]
       eg-bench <scenario> --help

scenarios:
";

#[tokio::main]
async fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let Some(name) = argv.next().filter(|n| !n.starts_with('-')) else {
        print_usage();
        return ExitCode::from(2);
    };
    let Some(scenario) = scenarios::ALL.iter().find(|s| s.name == name) else {
        eprintln!("eg-bench: no scenario {name:?}\n");
        print_usage();
        return ExitCode::from(2);
    };
    let mut flags = match args::Flags::parse(argv) {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("eg-bench {name}: {e:#}\n\n{}{COMMON_USAGE}", scenario.usage);
            return ExitCode::from(2);
        }
    };
    if flags.help() {
        print!("{}{COMMON_USAGE}", scenario.usage);
        return ExitCode::SUCCESS;
    }
    match run(scenario, &mut flags).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eg-bench {name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(scenario: &scenarios::Scenario, flags: &mut args::Flags) -> anyhow::Result<()> {
    // reqwest is built without a default TLS provider (the workspace picks ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let machine = machine::Machine::describe();
    if let Some(free) = machine.disk_free_gib.filter(|g| *g < 10.0) {
        eprintln!(
            "eg-bench: warning: only {free:.1} GiB free in {}; Redis's append-only files take several GiB in the larger scenarios",
            std::env::temp_dir().display()
        );
    }
    let quick = flags.switch("quick")?;
    let keep = flags.switch("keep")?;
    let bin_dir = match flags.path("bin-dir")? {
        Some(dir) => dir,
        None => launcher::Launcher::default_bin_dir()?,
    };
    let out = match flags.path("out")? {
        Some(out) => out,
        None => default_out(&bin_dir, scenario.name),
    };
    let doc = flags.path("doc")?;
    let note = flags.text("note")?;
    let mut ctx = Ctx {
        quick,
        bin_dir,
        keep,
        ceilings: ceiling::Ceilings::new(quick),
    };
    let started = Instant::now();
    let rows = (scenario.run)(&mut ctx, std::mem::take(flags)).await?;
    let took = started.elapsed();

    report::print(&rows);
    print_ceilings(&ctx);
    let report = markdown::Report {
        scenario: scenario.name,
        quick,
        machine: &machine,
        rows: &rows,
        ceilings: &ctx.ceilings,
        took,
        note,
    };
    write(&out, &serde_json::to_string_pretty(&report.to_json())?)?;
    println!("JSON report: {}", out.display());
    if let Some(doc) = doc {
        write(&doc, &report.to_markdown())?;
        println!("markdown report: {}", doc.display());
    }
    Ok(())
}

fn print_ceilings(ctx: &Ctx) {
    let mut any = false;
    for (kind, value) in ctx.ceilings.all() {
        if !any {
            println!("ceilings measured in this run:");
            any = true;
        }
        println!(
            "    {:<55} {:>12} {}",
            kind.label(),
            report::thousands(value),
            kind.unit()
        );
    }
}

/// `target/bench/<scenario>.json` when the tiers are in `target/release`.
fn default_out(bin_dir: &Path, scenario: &str) -> PathBuf {
    let name = if scenario == "all" { "bench" } else { scenario };
    bin_dir
        .parent()
        .unwrap_or(bin_dir)
        .join("bench")
        .join(format!("{name}.json"))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
}

fn print_usage() {
    eprint!("{USAGE}");
    for s in scenarios::ALL {
        eprintln!("  {:<16} {}", s.name, s.summary);
    }
    eprint!("\n{COMMON_USAGE}");
}
