//! Sets up `tracing` once per process: text or JSON lines on stderr.

use crate::settings::LogSection;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

pub fn init(log: &LogSection) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&log.level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal: log files and collectors get plain text.
        .with_ansi(std::io::stderr().is_terminal());
    let result = if log.format == "json" {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
    if let Err(e) = result {
        eprintln!("logging was already set up: {e}");
    }
}
