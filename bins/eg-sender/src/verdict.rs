//! A step's verdict on one delivery: the settlement (the state change in Redis) with the
//! step's history entry and what it counts. Built from eg-core's [`Decision`] (or for a
//! hold, a pause, a hand-back, a drop), settled through the settle queue, and counted
//! and logged only once its settle took effect (a settle that finds the delivery taken
//! back counts nothing and records no history). The words in order:
//! docs/architecture.md#an-attempts-result-word-by-word.

use crate::destination::Sent;
use eg_core::deadletter::DeadLetterEntry;
use eg_core::fate::DropReason;
use eg_core::history::{DeliveryState, HistoryEntry, Hold, HoldReason};
use eg_core::subscription::Subscription;
use eg_core::{DeadLetterReason, Decision, Delivery, UnixMillis};
use eg_runtime::metrics as m;
use eg_store::Settlement;

/// A settlement with what it means for the metrics and the delivery's history.
pub struct Verdict {
    pub settlement: Settlement,
    pub history: HistoryEntry,
    tally: Tally,
    delivery: Delivery,
}

/// What a settlement counts once it took effect.
enum Tally {
    Delivered,
    /// Counts nothing: a retry, or a delivery held back, set aside or handed back.
    Nothing,
    DeadLettered(DeadLetterReason),
    Dropped(DropReason),
    /// Handed back by the subscription's delivery limits, for this reason: no attempt,
    /// no history step.
    Throttled(&'static str),
}

impl Verdict {
    /// The verdict for `decision` about `delivery` (already carrying the attempt made).
    pub fn decided(decision: Decision, delivery: &Delivery, subscription: &Subscription, now: UnixMillis) -> Self {
        let (settlement, tally) = match decision {
            Decision::Delivered => (Settlement::Done, Tally::Delivered),
            Decision::RetryAt(due) => (
                Settlement::Retry {
                    delivery: delivery.clone(),
                    due,
                },
                Tally::Nothing,
            ),
            Decision::DeadLetter(reason) => match reason.dead_letter_to(subscription.dead_letter.as_ref()) {
                Ok(destination) => (
                    Settlement::DeadLetter {
                        entry: DeadLetterEntry::for_delivery(delivery, subscription, destination, reason, now),
                    },
                    Tally::DeadLettered(reason),
                ),
                Err(dropped) => (Settlement::Done, Tally::Dropped(dropped)),
            },
        };
        let (state, next, reason) = match (&settlement, &tally) {
            (Settlement::Retry { due, .. }, _) => (DeliveryState::Retrying, Some(*due), None),
            (_, Tally::Delivered) => (DeliveryState::Delivered, None, None),
            (_, Tally::DeadLettered(reason)) => (DeliveryState::DeadLettered, None, Some(reason.to_string())),
            (_, Tally::Dropped(reason)) => (DeliveryState::Dropped, None, Some(reason.to_string())),
            (_, Tally::Nothing | Tally::Throttled(_)) => (DeliveryState::Retrying, None, None),
        };
        Self {
            history: step(delivery, now, state, next, reason),
            settlement,
            tally,
            delivery: delivery.clone(),
        }
    }

    /// A delivery held back uncharged until `due`, for `hold` (endpoint probation, or
    /// awaiting consent).
    pub fn held_back(delivery: Delivery, hold: Hold, due: UnixMillis, now: UnixMillis) -> Self {
        Self {
            history: HistoryEntry {
                hold: Some(hold),
                ..step(&delivery, now, DeliveryState::HeldBack, Some(due), None)
            },
            settlement: Settlement::Retry {
                delivery: delivery.clone(),
                due,
            },
            tally: Tally::Nothing,
            delivery,
        }
    }

    /// A delivery read ahead that found no free slot in time: back into the ready stream
    /// as it was (uncharged, its last attempt untouched), for any sender to take.
    pub fn handed_back(delivery: &Delivery, now: UnixMillis) -> Self {
        let hold = Hold {
            reason: HoldReason::NoFreeSlot,
            until: now,
        };
        Self {
            history: HistoryEntry {
                hold: Some(hold),
                ..step(delivery, now, DeliveryState::HeldBack, Some(now), None)
            },
            settlement: Settlement::Requeue {
                delivery: delivery.clone(),
            },
            tally: Tally::Nothing,
            delivery: delivery.clone(),
        }
    }

    /// A delivery over its subscription's `deliveryLimits`: back in the retry set
    /// unchanged until `due` (no attempt counted, its last attempt untouched), with no
    /// history step, since waiting for the limit is not something that happened to it.
    pub fn throttled(delivery: &Delivery, due: UnixMillis, reason: &'static str, now: UnixMillis) -> Self {
        Self {
            history: step(delivery, now, DeliveryState::HeldBack, Some(due), None),
            settlement: Settlement::Retry {
                delivery: delivery.clone(),
                due,
            },
            tally: Tally::Throttled(reason),
            delivery: delivery.clone(),
        }
    }

    /// The history step to record with the settlement (`None` for a throttled delivery).
    pub fn history_step(&self) -> Option<HistoryEntry> {
        (!matches!(self.tally, Tally::Throttled(_))).then(|| self.history.clone())
    }

    /// A delivery of a paused subscription, set aside until the resume or `until` (the end
    /// of its time-to-live).
    pub fn paused(delivery: &Delivery, until: UnixMillis, now: UnixMillis) -> Self {
        Self {
            history: step(delivery, now, DeliveryState::Paused, Some(until), None),
            settlement: Settlement::Park {
                delivery: delivery.clone(),
                until,
            },
            tally: Tally::Nothing,
            delivery: delivery.clone(),
        }
    }

    /// A delivery that ends without reaching anyone, for `reason`.
    pub fn dropped(delivery: &Delivery, reason: DropReason, now: UnixMillis) -> Self {
        Self {
            history: step(delivery, now, DeliveryState::Dropped, None, Some(reason.to_string())),
            settlement: Settlement::Done,
            tally: Tally::Dropped(reason),
            delivery: delivery.clone(),
        }
    }
}

/// A history entry for a step that made no attempt (the attempt's details are added by
/// [`Verdict::attempted`]).
fn step(
    delivery: &Delivery,
    now: UnixMillis,
    state: DeliveryState,
    next: Option<UnixMillis>,
    reason: Option<String>,
) -> HistoryEntry {
    HistoryEntry {
        subscription: delivery.subscription.clone(),
        attempt: delivery.attempts,
        at: now,
        outcome: None,
        http_status: None,
        duration_ms: None,
        next,
        state,
        reason,
        hold: None,
        error: None,
    }
}

impl Verdict {
    /// The step was the attempt `sent`: its outcome and status (the delivery's last
    /// attempt), how long it took and what the destination said go into the history
    /// entry.
    pub fn attempted(mut self, sent: &Sent) -> Self {
        if let Some(last) = self.delivery.last {
            self.history.outcome = Some(last.outcome);
            self.history.http_status = last.status;
        }
        self.history.duration_ms = Some(sent.took.as_millis() as u64);
        self.history.error.clone_from(&sent.error);
        self
    }

    /// Counts and logs the verdict; call once its settle took effect.
    pub fn record(&self) {
        let d = &self.delivery;
        let (topic, subscription) = (d.topic.clone(), d.subscription.clone());
        match &self.tally {
            Tally::Delivered => {
                metrics::counter!(m::DELIVERY_SUCCESS_COUNT, "topic" => topic, "subscription" => subscription)
                    .increment(1);
            }
            Tally::Nothing => {}
            Tally::Throttled(reason) => {
                metrics::counter!(m::DELIVERY_THROTTLED_COUNT, "topic" => topic, "subscription" => subscription, "reason" => *reason)
                    .increment(1);
            }
            Tally::DeadLettered(reason) => {
                metrics::counter!(m::DEAD_LETTERED_COUNT, "topic" => topic, "subscription" => subscription, "reason" => reason.as_str())
                    .increment(1);
                tracing::info!(topic = %d.topic, subscription = %d.subscription, delivery = %d.id, attempts = d.attempts, %reason, last_error = self.history.error.as_deref(), "dead-lettered");
            }
            Tally::Dropped(reason) => {
                metrics::counter!(m::DROPPED_EVENT_COUNT, "topic" => topic, "subscription" => subscription, "reason" => reason.as_str())
                    .increment(1);
                tracing::warn!(topic = %d.topic, subscription = %d.subscription, delivery = %d.id, attempts = d.attempts, %reason, last_error = self.history.error.as_deref(), "dropped");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// The files of `module` of `krate` (`eg-core`, `eg-sender`, ...): `module.rs`, or
    /// every file under `module/`.
    fn module_files(root: &Path, krate: &str, module: &str) -> Vec<PathBuf> {
        let src = ["crates", "bins"]
            .iter()
            .map(|dir| root.join(dir).join(krate).join("src"))
            .find(|src| src.is_dir())
            .unwrap_or_else(|| panic!("no crate {krate}"));
        let file = src.join(format!("{module}.rs"));
        let mut files: Vec<PathBuf> = file.is_file().then_some(file).into_iter().collect();
        let mut dirs = vec![src.join(module)];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.push(path);
                }
            }
        }
        files
    }

    // The vocabulary is a hand-kept list: it fails here when a word is renamed, moved or
    // removed without the docs.
    #[test]
    fn every_word_of_the_attempt_vocabulary_is_a_type_where_the_docs_say() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let docs = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
        let section = docs
            .split("### An attempt's result, word by word")
            .nth(1)
            .and_then(|rest| rest.split("\n#").next())
            .expect("docs/architecture.md has the vocabulary section");
        let mut words = 0;
        for item in section.split("\n- ").skip(1) {
            // "**`Word`**, **`Other`** (eg-crate `module`...": the words, then where.
            let (names, place) = item.split_once(" (").expect("a word says where it lives");
            let (krate, rest) = place.split_once(" `").expect("crate and module");
            let module = rest.split('`').next().unwrap_or_default();
            let sources: String = module_files(&root, krate, module)
                .iter()
                .map(|f| std::fs::read_to_string(f).unwrap())
                .collect();
            for name in names.split("**`").skip(1).filter_map(|n| n.split('`').next()) {
                let defined = ["struct", "enum", "trait"].iter().any(|kind| {
                    sources.contains(&format!("{kind} {name} ")) || sources.contains(&format!("{kind} {name}<"))
                });
                assert!(defined, "{name} is not a type in {krate}'s `{module}`");
                words += 1;
            }
        }
        assert!(words >= 10, "only {words} words read: has the list's form changed?");
    }
}
