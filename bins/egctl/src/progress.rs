//! Progress of long operations (redrive, purge) on stderr, so stdout keeps only the
//! result: one line rewritten in place on a terminal, a line per step otherwise (logs
//! of scripted runs then show how far it got).

use std::io::{IsTerminal, Write};

pub struct Progress {
    verb: &'static str,
    live: bool,
    shown: bool,
}

impl Progress {
    /// `verb` is the past participle shown with the count: `redriven`, `purged`.
    pub fn new(verb: &'static str) -> Self {
        Self {
            verb,
            live: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    /// After each call: `done` so far in total, `remaining` as the API counts them.
    pub fn update(&mut self, done: u64, remaining: u64) {
        let line = format!("{} {done}, {remaining} remaining", self.verb);
        let mut err = std::io::stderr().lock();
        let _ = if self.live {
            write!(err, "\r\x1b[K{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
        self.shown = true;
    }

    /// Ends the live line so what follows starts on a fresh one.
    pub fn finish(self) {
        if self.live && self.shown {
            let _ = writeln!(std::io::stderr());
        }
    }
}
