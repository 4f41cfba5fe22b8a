//! One module per command group. Each command makes its API calls and returns the text
//! to print: the API's JSON with `--json`, a table otherwise.

mod deadletters;
mod history;
mod publish;
mod queues;
mod replays;
mod status;
mod subscriptions;
mod topics;

use crate::api::Api;
use crate::cli::Command;
use crate::failure::Failure;
use crate::output;
use serde_json::Value;
use std::cell::RefCell;
use std::io::Read;
use std::path::Path;

/// What every command works with.
pub struct Ctx {
    pub api: Api,
    pub json: bool,
    /// Remarks for stderr (`note: …`), printed after the output so they follow it on a
    /// terminal; never failures.
    notes: RefCell<Vec<String>>,
}

impl Ctx {
    pub fn new(api: Api, json: bool) -> Self {
        Self {
            api,
            json,
            notes: RefCell::default(),
        }
    }

    /// A remark for the operator (stderr, after the output), never part of the output.
    pub fn note(&self, text: impl Into<String>) {
        self.notes.borrow_mut().push(text.into());
    }

    pub fn take_notes(&self) -> Vec<String> {
        self.notes.take()
    }

    /// `value` as JSON with `--json`, else as `human` renders it.
    pub fn show(&self, value: &Value, human: impl FnOnce(&Value) -> String) -> String {
        if self.json { output::json(value) } else { human(value) }
    }
}

pub async fn run(command: Command, ctx: &Ctx) -> Result<String, Failure> {
    match command {
        Command::Topics(command) => topics::run(command, ctx).await,
        Command::Subscriptions(command) => subscriptions::run(command, ctx).await,
        Command::Publish(args) => publish::run(args, ctx).await,
        Command::Queues => queues::run(ctx).await,
        Command::Status => status::run(ctx).await,
        Command::DeadLetters(command) => deadletters::run(command, ctx).await,
        Command::History(args) => history::run(args, ctx).await,
        Command::Replays(command) => replays::run(command, ctx).await,
    }
}

/// The bytes of an input file, `-` meaning stdin.
fn read_input(path: &Path) -> Result<Vec<u8>, Failure> {
    if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| Failure::usage(format!("cannot read stdin: {e}")))?;
        return Ok(bytes);
    }
    std::fs::read(path).map_err(|e| Failure::usage(format!("cannot read {}: {e}", path.display())))
}

/// An input file that must hold one JSON object (a resource).
fn read_resource(path: &Path) -> Result<Value, Failure> {
    let bytes = read_input(path)?;
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| Failure::usage(format!("{}: not JSON ({e})", path.display())))?;
    if !value.is_object() {
        return Err(Failure::usage(format!(
            "{}: must hold a JSON object such as {{\"properties\":{{…}}}}",
            path.display()
        )));
    }
    Ok(value)
}

/// A count with its noun, singular or plural.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
