//! The oracle's violations: counted by kind, with the first few examples of each for
//! the report.

use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Violations of one kind, and a few examples.
#[derive(Debug, Default)]
struct Kind {
    count: u64,
    examples: Vec<String>,
}

#[derive(Default)]
pub(super) struct Violations {
    kinds: BTreeMap<&'static str, Kind>,
    max_examples: usize,
}

impl Violations {
    /// None yet; `max_examples` are kept per kind.
    pub(super) fn new(max_examples: usize) -> Self {
        Self {
            max_examples,
            ..Self::default()
        }
    }

    pub(super) fn add(&mut self, kind: &'static str, example: impl FnOnce() -> String) {
        let entry = self.kinds.entry(kind).or_default();
        entry.count += 1;
        if entry.examples.len() < self.max_examples {
            entry.examples.push(example());
        }
    }

    pub(super) fn total(&self) -> u64 {
        self.kinds.values().map(|k| k.count).sum()
    }

    pub(super) fn to_json(&self) -> Value {
        let kinds: serde_json::Map<String, Value> = self
            .kinds
            .iter()
            .map(|(name, kind)| {
                (
                    (*name).to_owned(),
                    json!({"count": kind.count, "examples": kind.examples}),
                )
            })
            .collect();
        json!({"count": self.total(), "by_kind": kinds})
    }
}
