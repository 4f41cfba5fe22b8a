//! The scenarios eg-bench can run. A scenario is a module with a [`Scenario`] constant:
//! its name on the command line, a one-line summary, its usage text, and a function
//! that takes its flags, runs, prints a table and writes its JSON. Add one by writing
//! the module and listing it in [`ALL`].

use crate::args::Flags;
use std::future::Future;
use std::pin::Pin;

mod sender_memory;

pub type Run = fn(Flags) -> Pin<Box<dyn Future<Output = anyhow::Result<()>>>>;

pub struct Scenario {
    pub name: &'static str,
    pub summary: &'static str,
    pub usage: &'static str,
    pub run: Run,
}

pub const ALL: &[Scenario] = &[sender_memory::SCENARIO];
