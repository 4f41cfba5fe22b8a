//! eg-bench: benchmarks of eg as it runs in production — the tiers as processes (built
//! with `--release` for numbers worth quoting) around a real `redis-server` — against
//! in-process receivers. Each scenario is a module of [`scenarios`]; it prints a table
//! and writes its figures as JSON. Benchmarks are programs that print numbers, not timed
//! assertions: nothing here passes or fails.
//!
//! ```text
//! cargo build --release -p eg-bench -p eg-ingress -p eg-scheduler -p eg-sender -p eg-deadletter
//! target/release/eg-bench sender-memory --backlog 100000 --receiver-delay 2s --concurrency 64
//! ```

mod args;
mod cluster;
mod memory;
mod receiver;
mod scenarios;

use std::process::ExitCode;

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
    let flags = match args::Flags::parse(argv) {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("eg-bench {name}: {e:#}\n\n{}", scenario.usage);
            return ExitCode::from(2);
        }
    };
    if flags.help() {
        print!("{}", scenario.usage);
        return ExitCode::SUCCESS;
    }
    match (scenario.run)(flags).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eg-bench {name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn print_usage() {
    eprint!("{USAGE}");
    for s in scenarios::ALL {
        eprintln!("  {:<16} {}", s.name, s.summary);
    }
}
