//! Lists of event ids, as published events, receivers and dead-letter records give
//! them: sorted for comparison, and counted to find what arrived more than once.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The ids of `events` as published (each must have a string `id`).
pub fn ids_of(events: &[Value]) -> BTreeSet<String> {
    events
        .iter()
        .map(|event| event["id"].as_str().expect("an event with a string id").to_owned())
        .collect()
}

/// `ids`, sorted.
pub fn sorted(ids: Vec<String>) -> Vec<String> {
    let mut ids = ids;
    ids.sort();
    ids
}

/// `ids` as owned strings, sorted (what [`sorted`] of a receiver's ids is compared to).
pub fn strings(ids: &[&str]) -> Vec<String> {
    sorted(ids.iter().map(|s| (*s).to_owned()).collect())
}

/// How often each id occurs.
pub fn tally(ids: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for id in ids {
        *counts.entry(id.clone()).or_default() += 1;
    }
    counts
}

/// The ids that occur more than once, with how often.
pub fn duplicates(ids: &[String]) -> BTreeMap<String, usize> {
    let mut counts = tally(ids);
    counts.retain(|_, n| *n > 1);
    counts
}
