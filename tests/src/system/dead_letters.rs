//! The dead-letter directory of a [`System`] (eg-deadletter's `LocalDirectory`
//! destination) and the records written into it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use eg_testkit::{eventually, files_under};
use serde_json::Value;

use super::System;

/// One record of a dead-letter file; `path` is relative to the dead-letter root.
#[derive(Debug, Clone)]
pub struct DeadLettered {
    pub path: PathBuf,
    pub record: Value,
}

impl System {
    pub fn dead_letter_dir(&self) -> &Path {
        self.dead_letter_dir
            .as_ref()
            .map(tempfile::TempDir::path)
            .expect("dead-letter dir")
    }

    /// Every record of every dead-letter file written so far.
    pub fn dead_letter_records(&self) -> Vec<DeadLettered> {
        let root = self.dead_letter_dir();
        let mut records = Vec::new();
        for path in files_under(root) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue; // a file being written
            }
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            let value: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON ({e}): {text}", path.display()));
            let items = value
                .as_array()
                .unwrap_or_else(|| panic!("{} is not a JSON array: {text}", path.display()));
            let relative = path.strip_prefix(root).expect("under the root").to_path_buf();
            records.extend(items.iter().map(|record| DeadLettered {
                path: relative.clone(),
                record: record.clone(),
            }));
        }
        records
    }

    /// Waits until `count` dead-letter records exist, and returns them.
    pub async fn wait_dead_letters(&self, count: usize, timeout: Duration) -> Vec<DeadLettered> {
        eventually(timeout, &format!("{count} dead-letter record(s)"), || async {
            let records = self.dead_letter_records();
            (records.len() >= count).then_some(records)
        })
        .await
    }
}
