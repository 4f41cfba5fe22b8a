//! The oracle's judgement of pull delivery: for every event answered `200` and every
//! queue subscription of its topic, the event must have been acknowledged at least once,
//! or dead-lettered with a fitting reason (subscriptions with a dead-letter destination),
//! or dropped with a reason (those without one), never lost.
//!
//! Dead-letter records are the dead-letter tier's files. A drop leaves no record, so it
//! is told from what the consumers saw: a reject that succeeded (reason `Rejected`), or a
//! last delivery at `maxDeliveryCount` that no consumer settled (`MaxDeliveryCountExceeded`).
//! An acknowledge or reject whose answer was lost and whose event never came back counts
//! as settled by it ("unconfirmed"): had it not taken effect, the lock would have expired
//! and the event been received again. That inference holds once the queues are empty,
//! which the drain waits for.
//!
//! Dead-letter reasons accepted: `Rejected` only for an event a consumer tried to reject;
//! `MaxDeliveryCountExceeded` only with at least `maxDeliveryCount` attempts. Anything
//! else is a violation. Receiving an event again after its acknowledgement succeeded is a
//! duplicate, counted, not a violation (at least once).

use crate::consumer::{Consumers, QueueSeen};
use crate::publisher::{Fate, Published};
use crate::receiver::lock;
use crate::scenario::Scenario;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// A queue subscription's dead-letter record, as the oracle read it.
pub struct DeadLetter {
    pub queue: usize,
    pub seq: u64,
    pub reason: String,
    pub attempts: Option<u64>,
    pub path: String,
}

pub struct QueueVerdict {
    /// (event, queue subscription) pairs owed and not resolved yet.
    pub open: u64,
    pub lost: u64,
    pub owed: u64,
    pub json: Value,
    /// (kind, example) for every violation.
    pub violations: Vec<(&'static str, String)>,
}

/// How one owed (event, queue subscription) pair ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Acknowledged,
    DeadLettered,
    DroppedRejected,
    DroppedMaxDeliveryCount,
    /// An acknowledge or reject whose answer was lost, and the event never came back.
    SettledUnconfirmed,
    Open,
}

fn end(s: &QueueSeen, dead_lettered: bool, has_destination: bool, max_count: u32) -> End {
    if s.acknowledged > 0 {
        End::Acknowledged
    } else if dead_lettered {
        End::DeadLettered
    } else if s.uncertain {
        End::SettledUnconfirmed
    } else if has_destination {
        // Rejected or past its count: its record is on its way (dead-letter delay).
        End::Open
    } else if s.rejected {
        End::DroppedRejected
    } else if s.open && s.highest_count >= max_count {
        End::DroppedMaxDeliveryCount
    } else {
        End::Open
    }
}

pub fn judge(scenario: &Scenario, events: &[Published], consumers: &Consumers, records: &[DeadLetter]) -> QueueVerdict {
    let mut violations = Vec::new();
    let mut by_queue = serde_json::Map::new();
    let (mut open_total, mut lost_total, mut owed_total) = (0u64, 0u64, 0u64);
    for (queue, spec) in scenario.queues.iter().enumerate() {
        let log = &consumers.logs[queue];
        let seen: HashMap<u64, QueueSeen> = lock(&log.seen).clone();
        for stranger in lock(&log.strangers).iter() {
            violations.push(("queue_received_an_unknown_event", format!("{}: {stranger}", spec.name)));
        }
        let mut dead: HashMap<u64, Vec<&DeadLetter>> = HashMap::new();
        for record in records.iter().filter(|r| r.queue == queue) {
            dead.entry(record.seq).or_default().push(record);
        }
        // The dead-letter records themselves.
        let mut by_reason: BTreeMap<String, u64> = BTreeMap::new();
        let mut duplicate_records = 0u64;
        for (seq, list) in &dead {
            duplicate_records += list.len() as u64 - 1;
            let s = seen.get(seq).copied().unwrap_or_default();
            let owed = events
                .get(*seq as usize)
                .is_some_and(|e| usize::from(e.facts.topic) == spec.topic);
            for record in list {
                *by_reason.entry(record.reason.clone()).or_default() += 1;
                let example = || {
                    format!(
                        "ev-{seq} for {}: {} after {:?} deliveries; consumers received it {}x (highest count {}), \
                         tried to reject it: {} ({})",
                        spec.name,
                        record.reason,
                        record.attempts,
                        s.received,
                        s.highest_count,
                        s.reject_tried,
                        record.path
                    )
                };
                if !owed {
                    violations.push(("queue_dead_letter_of_an_event_not_published_to_its_topic", example()));
                }
                match record.reason.as_str() {
                    "Rejected" if !s.reject_tried => violations.push(("queue_rejected_without_a_reject", example())),
                    "Rejected" => {}
                    "MaxDeliveryCountExceeded"
                        if record.attempts.is_none_or(|a| a < u64::from(spec.max_delivery_count)) =>
                    {
                        violations.push(("queue_max_delivery_count_before_the_count", example()));
                    }
                    "MaxDeliveryCountExceeded" => {}
                    _ => violations.push(("queue_unexpected_dead_letter_reason", example())),
                }
            }
        }
        // What was owed.
        let mut ends: BTreeMap<&'static str, u64> = BTreeMap::new();
        let (mut owed, mut open, mut duplicates) = (0u64, 0u64, 0u64);
        let mut lost_here = Vec::new();
        for (seq, event) in events.iter().enumerate() {
            if event.fate != Fate::Acknowledged || usize::from(event.facts.topic) != spec.topic {
                continue;
            }
            let seq = seq as u64;
            owed += 1;
            let s = seen.get(&seq).copied().unwrap_or_default();
            duplicates += u64::from(s.received_after_acknowledged);
            let ended = end(
                &s,
                dead.contains_key(&seq),
                spec.container.is_some(),
                spec.max_delivery_count,
            );
            let name = match ended {
                End::Acknowledged => "acknowledged",
                End::DeadLettered => "dead_lettered",
                End::DroppedRejected => "dropped_Rejected",
                End::DroppedMaxDeliveryCount => "dropped_MaxDeliveryCountExceeded",
                End::SettledUnconfirmed => "settled_by_an_operation_whose_answer_was_lost",
                End::Open => "lost",
            };
            *ends.entry(name).or_default() += 1;
            if ended == End::Open {
                open += 1;
                lost_here.push(format!(
                    "ev-{seq} for {}: received {}x, highest count {}, acknowledged {}x, rejected {}, open {}",
                    spec.name, s.received, s.highest_count, s.acknowledged, s.rejected, s.open
                ));
            }
        }
        let received_events = seen.len();
        by_queue.insert(
            spec.name.clone(),
            json!({
                "max_delivery_count": spec.max_delivery_count,
                "dead_letter_destination": spec.container,
                "owed": owed,
                "ends": ends,
                "events_received": received_events,
                "received_after_acknowledged": duplicates,
                "dead_letter_records_by_reason": by_reason,
                "duplicate_dead_letter_records": duplicate_records,
            }),
        );
        open_total += open;
        owed_total += owed;
        lost_total += open;
        for example in lost_here {
            violations.push(("queue_lost", example));
        }
    }
    QueueVerdict {
        open: open_total,
        lost: lost_total,
        owed: owed_total,
        json: json!({"subscriptions": by_queue, "consumers": consumers.figures.to_json()}),
        violations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(f: impl FnOnce(&mut QueueSeen)) -> QueueSeen {
        let mut s = QueueSeen::default();
        f(&mut s);
        s
    }

    #[test]
    fn ends_are_told_from_what_the_consumers_saw() {
        let acked = seen(|s| s.acknowledged = 1);
        assert_eq!(end(&acked, false, false, 10), End::Acknowledged);
        let crashed_at_max = seen(|s| {
            s.open = true;
            s.highest_count = 10;
        });
        assert_eq!(end(&crashed_at_max, false, false, 10), End::DroppedMaxDeliveryCount);
        // With a destination, only a record ends it.
        assert_eq!(end(&crashed_at_max, false, true, 10), End::Open);
        assert_eq!(end(&crashed_at_max, true, true, 10), End::DeadLettered);
        let crashed_early = seen(|s| {
            s.open = true;
            s.highest_count = 3;
        });
        assert_eq!(end(&crashed_early, false, false, 10), End::Open);
        let rejected = seen(|s| s.rejected = true);
        assert_eq!(end(&rejected, false, false, 10), End::DroppedRejected);
        assert_eq!(end(&QueueSeen::default(), false, false, 10), End::Open);
    }
}
