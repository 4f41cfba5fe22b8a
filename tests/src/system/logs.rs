//! The tiers' logs: one file per tier process, readable while the test runs, and printed
//! (their tails) and kept when the test fails.

use eg_testkit::files_under;

use super::System;

/// Lines of each log printed when a test fails.
pub(super) const LOG_TAIL_LINES: usize = 60;

impl System {
    /// The text of every tier's log so far, by file name (for scans of what was logged).
    pub fn logs(&self) -> Vec<(String, String)> {
        let Some(dir) = self.log_dir.as_ref() else {
            return Vec::new();
        };
        let mut logs: Vec<(String, String)> = files_under(dir.path())
            .into_iter()
            .map(|path| {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (name, std::fs::read_to_string(&path).unwrap_or_default())
            })
            .collect();
        logs.sort();
        logs
    }

    /// The test failed: shows the tail of every tier's log, and keeps the logs and
    /// dead-letter files where they are.
    pub(super) fn keep_evidence(&mut self) {
        if let Some(dir) = self.log_dir.take() {
            let dir = dir.keep();
            let mut logs = files_under(&dir);
            logs.sort();
            for log in logs {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                eprintln!(
                    "----- {} (last {LOG_TAIL_LINES} lines) -----\n{}",
                    log.display(),
                    tail(&text, LOG_TAIL_LINES)
                );
            }
            eprintln!("----- logs kept in {}", dir.display());
        }
        if let Some(dir) = self.dead_letter_dir.take() {
            eprintln!("----- dead-letter files kept in {}", dir.keep().display());
        }
    }
}

/// The last `lines` lines of `text`.
pub(super) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
