//! egctl: the operators' command line for eg. It speaks only eg-ingress's public
//! HTTP APIs (management under `/admin` with the bearer token, and the publish API), so
//! it works against any deployment an operator can reach, and depends on no eg crate.
//!
//! Reading order: [`cli`] (the commands), [`config`] (where the URL and token come
//! from), [`api`] (requests and error answers), [`commands`] (one module per command
//! group), [`output`] (tables and JSON), [`destinations`] (dead-letter destinations),
//! [`hints`] (how hints name egctl: `just egctl …` under the justfile).

mod api;
mod cli;
mod commands;
mod config;
mod destinations;
mod endpoints;
mod failure;
mod hints;
mod output;
mod progress;
mod times;
mod webhook_auth;

use clap::Parser;
use std::process::ExitCode;

/// Output for people has its hints spelled the way egctl is run ([`hints`]); `--json`
/// output is the API's, as it came. A failure is one line on stderr starting `egctl:`;
/// a remark that is no failure (a note) starts `note:`.
fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let hints = hints::Hints::new(std::env::var(hints::PREFIX_VARIABLE).ok());
    let json = cli.global.json;
    let shown = |text: &str| {
        if json {
            output::print(text);
        } else {
            output::print(&hints.spell(text));
        }
    };
    match run(cli) {
        Ok((text, notes)) => {
            shown(&text);
            for note in notes {
                eprintln!("note: {}", hints.spell(&note));
            }
            ExitCode::SUCCESS
        }
        Err(failure) => {
            if let Some(text) = failure.shown() {
                shown(text);
            }
            eprintln!("egctl: {}", hints.spell(&failure.to_string()));
            ExitCode::from(failure.exit_code())
        }
    }
}

/// Runs the command: its output and the notes for after it.
fn run(cli: cli::Cli) -> Result<(String, Vec<String>), failure::Failure> {
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
    Ok((text, ctx.take_notes()))
}
