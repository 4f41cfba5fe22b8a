//! egctl: the operators' command line for eg. It speaks only eg-ingress's public
//! HTTP APIs (management under `/admin` with the bearer token, and the publish API), so
//! it works against any deployment an operator can reach, and depends on no eg crate.
//!
//! Reading order: [`cli`] (the commands), [`config`] (where the URL and token come
//! from), [`api`] (requests and error answers), [`commands`] (one module per command
//! group), [`output`] (tables and JSON), [`destinations`] (dead-letter destinations).

mod api;
mod cli;
mod commands;
mod config;
mod destinations;
mod endpoints;
mod failure;
mod output;
mod progress;
mod times;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if let Some(shown) = failure.shown() {
                output::print(shown);
            }
            eprintln!("egctl: {failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}

fn run(cli: cli::Cli) -> Result<(), failure::Failure> {
    let flags = config::Flags {
        url: cli.global.url,
        token: cli.global.token,
        token_file: cli.global.token_file,
        config: cli.global.config,
    };
    let target = config::resolve(&flags, &|name| std::env::var(name).ok())?;
    let ctx = commands::Ctx::new(api::Api::new(target, cli.global.timeout)?, cli.global.json);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failure::Failure::other(format!("cannot start the async runtime: {e}")))?;
    let text = runtime.block_on(commands::run(cli.command, &ctx))?;
    output::print(&text);
    for note in ctx.take_notes() {
        eprintln!("egctl: {note}");
    }
    Ok(())
}
