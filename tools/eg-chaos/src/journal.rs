//! The run's own log (`journal.log` in the run directory): phases, every fault injected
//! and every unexpected exit, with wall-clock UTC times to line up with the tiers' logs.

use crate::receiver::lock;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Clone)]
pub struct Journal {
    file: Arc<Mutex<File>>,
    started: Instant,
}

impl Journal {
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            file: Arc::new(Mutex::new(File::create(path)?)),
            started: Instant::now(),
        })
    }

    /// Written to the journal only.
    pub fn note(&self, text: &str) {
        self.write(text, false);
    }

    /// Written to the journal and to stderr (phases of the run).
    pub fn phase(&self, text: &str) {
        self.write(text, true);
    }

    fn write(&self, text: &str, echo: bool) {
        let line = format!("{} +{:8.3}s {text}", now_utc(), self.started.elapsed().as_secs_f64());
        if echo {
            eprintln!("eg-chaos {line}");
        }
        let _ = writeln!(lock(&self.file), "{line}");
    }
}

pub fn now_utc() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
