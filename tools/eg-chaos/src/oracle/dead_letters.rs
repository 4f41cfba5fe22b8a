//! The dead-letter records the oracle reads: files from the dead-letter directory and
//! blobs read back from Azurite, each record checked for carrying the event its id names
//! and filed under its subscription (push) or queue subscription (pull).

use super::Oracle;
use crate::blob_reader::Blob;
use crate::scenario::{DeadLetterTo, event_seq};
use eg_testkit::files_under;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

#[derive(Debug, Clone)]
pub(super) struct DeadRecord {
    /// Relative to the dead-letter root.
    pub(super) path: PathBuf,
    pub(super) sub: usize,
    pub(super) seq: u64,
    pub(super) reason: String,
    pub(super) attempts: Option<u64>,
    pub(super) last_status: Option<i64>,
    pub(super) publish_time: Option<chrono::DateTime<chrono::Utc>>,
    pub(super) written_at: SystemTime,
    /// Read from Azurite, not from the dead-letter directory.
    pub(super) from_blob: bool,
}

impl Oracle {
    /// Takes the dead-letter blobs read from Azurite since the last call, or why they
    /// could not be read (a violation if the last read of the run fails).
    pub fn take_blobs(&mut self, read: anyhow::Result<Vec<Blob>>) {
        match read {
            Ok(blobs) => {
                self.blob_store_problem = None;
                for blob in blobs {
                    let relative = PathBuf::from(&blob.path);
                    if let Err(problem) = self.read_text(&relative, &blob.text, blob.written_at, true) {
                        self.file_problems.push(("unreadable_dead_letter_blob", problem));
                    }
                }
            }
            Err(e) => self.blob_store_problem = Some(format!("{e:#}")),
        }
    }

    /// Reads dead-letter files written since the last call.
    pub fn scan(&mut self) {
        for path in files_under(&self.root) {
            if self.parsed.contains(&path) {
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue; // a file being written
            }
            match self.read_file(&path) {
                Ok(()) => {
                    self.unreadable.remove(&path);
                    self.parsed.insert(path);
                }
                Err(problem) => {
                    self.unreadable.insert(path, problem);
                }
            }
        }
    }

    fn read_file(&mut self, path: &Path) -> Result<(), String> {
        let relative = path.strip_prefix(&self.root).unwrap_or(path).to_path_buf();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", relative.display()))?;
        let written_at = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .unwrap_or_else(|_| SystemTime::now());
        self.read_text(&relative, &text, written_at, false)
    }

    /// The records of one dead-letter file or blob, `relative` being
    /// `<container>/<SUBSCRIPTION>/…`.
    fn read_text(
        &mut self,
        relative: &Path,
        text: &str,
        written_at: SystemTime,
        from_blob: bool,
    ) -> Result<(), String> {
        let relative = relative.to_path_buf();
        let value: Value = serde_json::from_str(text).map_err(|e| format!("{}: not JSON ({e})", relative.display()))?;
        let Some(items) = value.as_array() else {
            return Err(format!("{}: not a JSON array", relative.display()));
        };
        let mut parts = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        let (container, folder) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
        if let Some(queue) = self.scenario.queue_by_folder(&container, &folder) {
            self.read_queue_records(queue, &relative, items, written_at);
            return Ok(());
        }
        let Some(sub) = self.scenario.subscription_by_folder(&container, &folder) else {
            self.file_problems
                .push(("dead_letter_in_unknown_folder", relative.display().to_string()));
            return Ok(());
        };
        let blob_expected = self.scenario.subscriptions[sub].dead_letter_to == DeadLetterTo::AzureBlob;
        if blob_expected != from_blob {
            self.file_problems.push((
                "dead_letter_in_another_store_than_its_subscription_names",
                format!(
                    "{} ({})",
                    relative.display(),
                    if from_blob { "in Azurite" } else { "in the directory" }
                ),
            ));
        }
        for record in items {
            // Event Grid and custom envelopes use camelCase, CloudEvents lower case.
            let field = |camel: &str| {
                record
                    .get(camel)
                    .or_else(|| record.get(camel.to_ascii_lowercase().as_str()))
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            let Some(id) = record["id"].as_str() else {
                self.file_problems.push((
                    "dead_letter_record_without_id",
                    format!("{}: {}", relative.display(), truncate(&record.to_string())),
                ));
                continue;
            };
            let Some(seq) = event_seq(id) else {
                self.file_problems
                    .push(("dead_letter_of_a_stranger", format!("{id} in {}", relative.display())));
                continue;
            };
            // The record must carry the event the id names.
            let subject = record["subject"].as_str().unwrap_or_default();
            if record["data"]["seq"].as_u64() != Some(seq) || !subject.ends_with(&format!("/{seq}")) {
                self.file_problems.push((
                    "dead_letter_record_with_another_events_body",
                    format!("{}: {}", relative.display(), truncate(&record.to_string())),
                ));
            }
            self.records.push(DeadRecord {
                path: relative.clone(),
                sub,
                seq,
                reason: field("deadLetterReason").as_str().unwrap_or("(none)").to_owned(),
                attempts: field("deliveryAttempts").as_u64(),
                last_status: field("lastHttpStatusCode").as_i64(),
                publish_time: field("publishTime")
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.with_timezone(&chrono::Utc)),
                written_at,
                from_blob,
            });
        }
        Ok(())
    }

    /// Namespace dead-letter records (`{"deadLetterProperties": {…}, "event": {…}}`) of
    /// queue subscription `queue`.
    fn read_queue_records(&mut self, queue: usize, relative: &Path, items: &[Value], written_at: SystemTime) {
        for record in items {
            let properties = &record["deadLetterProperties"];
            let event = &record["event"];
            let Some(seq) = event["id"].as_str().and_then(event_seq) else {
                self.file_problems.push((
                    "queue_dead_letter_record_without_one_of_our_events",
                    format!("{}: {}", relative.display(), truncate(&record.to_string())),
                ));
                continue;
            };
            if event["data"]["seq"].as_u64() != Some(seq) {
                self.file_problems.push((
                    "dead_letter_record_with_another_events_body",
                    format!("{}: {}", relative.display(), truncate(&record.to_string())),
                ));
            }
            self.queue_records.push(DeadRecord {
                path: relative.to_path_buf(),
                sub: queue,
                seq,
                reason: properties["deadletterreason"].as_str().unwrap_or("(none)").to_owned(),
                attempts: properties["deliveryattempts"].as_u64(),
                last_status: None,
                publish_time: None,
                written_at,
                from_blob: false,
            });
        }
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(300).collect()
}
