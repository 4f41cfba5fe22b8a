//! The archived topic's side (docs/archive.md): every event the topic accepted — answered
//! `200`, matched by a subscription or not — must be in the archive's objects once the
//! backlog drained. Objects are read from the local directory the scenario's archive
//! names (gzip JSON lines, one event per line); a line repeated with a distinct stream id
//! (a writer that took over rewrote a batch under another name) is counted, not a
//! violation: the archive is at least once, like delivery.

use super::violations::Violations;
use crate::publisher::{Fate, Published};
use crate::scenario::{ARCHIVE_CONTAINER, Scenario, event_seq};
use eg_testkit::files_under;
use flate2::read::GzDecoder;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::Path;

/// What the archive objects hold, by event.
#[derive(Default)]
struct Archived {
    /// Event sequence number -> the distinct stream ids it was archived under.
    lines: BTreeMap<u64, HashSet<String>>,
    /// Lines of an event this run did not publish.
    strangers: Vec<String>,
    objects: usize,
    /// Objects that are not gzip JSON lines of the documented shape.
    unreadable: Vec<String>,
}

fn read(root: &Path) -> Archived {
    let mut archived = Archived::default();
    for path in files_under(&root.join(ARCHIVE_CONTAINER)) {
        if !path.to_string_lossy().ends_with(".jsonl.gz") {
            continue; // a file being written
        }
        archived.objects += 1;
        let mut text = String::new();
        let read = std::fs::read(&path).map_err(|e| e.to_string()).and_then(|bytes| {
            GzDecoder::new(&bytes[..])
                .read_to_string(&mut text)
                .map_err(|e| e.to_string())
        });
        if let Err(e) = read {
            archived.unreadable.push(format!("{}: {e}", path.display()));
            continue;
        }
        for line in text.lines() {
            let value: Value = serde_json::from_str(line).unwrap_or(Value::Null);
            let id = value["event"]["id"].as_str().unwrap_or_default();
            let stream_id = value["streamId"].as_str().unwrap_or_default().to_owned();
            match event_seq(id) {
                Some(seq) if !stream_id.is_empty() => {
                    archived.lines.entry(seq).or_default().insert(stream_id);
                }
                _ => archived
                    .strangers
                    .push(format!("{}: {}", path.display(), truncate(line))),
            }
        }
    }
    archived
}

/// Checks the archive against the ledger (each accepted event missing is a violation);
/// the JSON for the report, `null` when no topic is archived.
pub(super) fn judge(scenario: &Scenario, events: &[Published], root: &Path, violations: &mut Violations) -> Value {
    let archived_topics: Vec<usize> = (0..scenario.topics.len())
        .filter(|&t| scenario.topics[t].archived)
        .collect();
    if archived_topics.is_empty() {
        return Value::Null;
    }
    let archived = read(root);
    for problem in &archived.unreadable {
        violations.add("unreadable_archive_object", || problem.clone());
    }
    for line in &archived.strangers {
        violations.add("archive_line_of_an_unknown_event", || line.clone());
    }
    let (mut owed, mut missing, mut repeated, mut unowed) = (0u64, 0u64, 0u64, 0u64);
    for (seq, event) in events.iter().enumerate() {
        let seq = seq as u64;
        let of_archived_topic = archived_topics.contains(&usize::from(event.facts.topic));
        let copies = archived.lines.get(&seq).map_or(0, HashSet::len) as u64;
        if !of_archived_topic {
            if copies > 0 {
                violations.add("archived_an_event_of_a_topic_without_an_archive", || {
                    format!("ev-{seq}")
                });
            }
            continue;
        }
        if event.fate == Fate::Acknowledged {
            owed += 1;
            if copies == 0 {
                missing += 1;
                violations.add("accepted_but_not_in_the_archive", || format!("ev-{seq}"));
            }
        } else if copies > 0 {
            // Stored, then the answer was lost (a killed ingress): archived like delivered.
            unowed += 1;
        }
        repeated += copies.saturating_sub(1);
    }
    json!({
        "topics": archived_topics.iter().map(|&t| scenario.topics[t].name.clone()).collect::<Vec<_>>(),
        "objects": archived.objects,
        "accepted_events": owed,
        "missing": missing,
        "archived_more_than_once": repeated,
        "archived_without_a_200": unowed,
    })
}

fn truncate(text: &str) -> String {
    text.chars().take(200).collect()
}
