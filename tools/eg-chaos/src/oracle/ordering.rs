//! The order check of ordered subscriptions (`orderedDelivery`): events with one key are
//! delivered one at a time in the order eg accepted them, so no event may reach the
//! receiver before an event of its key that eg accepted earlier and had not settled.
//!
//! "Accepted earlier" is what the publisher can know for sure: the earlier event's
//! publish was answered `200` before the later one's request was sent, or both were in
//! one request with the earlier one first in the array. "Settled" is what the receiver
//! and the dead-letter files show: the receiver answered it 2xx no later than the later
//! event first arrived, or it was dead-lettered. Events seen again afterwards are fine
//! (at least once).

use crate::publisher::{Fate, Published};
use crate::receiver::Seen;
use crate::scenario::event_id;
use std::collections::{BTreeMap, HashMap, HashSet};

/// What the check found for one subscription.
#[derive(Debug, Default)]
pub(super) struct OrderFindings {
    /// Keys with at least one delivered event.
    pub keys: usize,
    /// Pairs (earlier, later) of one key where the later event arrived.
    pub pairs_checked: u64,
    /// One line per later event that arrived too early.
    pub early: Vec<String>,
}

/// Whether eg accepted `earlier` before `later`, as far as the publisher knows.
fn accepted_before(earlier: (u64, &Published), later: (u64, &Published)) -> bool {
    let ((i, a), (j, b)) = (earlier, later);
    if a.fate != Fate::Acknowledged || b.sent_at == 0 {
        return false;
    }
    a.answered_at < b.sent_at || (a.request == b.request && i < j)
}

/// Checks one ordered subscription: `owed` are the sequence numbers matching it,
/// `seen` what its receiver recorded, `dead` the sequence numbers dead-lettered for it.
pub(super) fn judge(
    subscription: &str,
    events: &[Published],
    owed: impl Iterator<Item = u64>,
    seen: &HashMap<u64, Seen>,
    dead: &HashSet<u64>,
) -> OrderFindings {
    let mut by_key: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
    for seq in owed {
        if let Some(event) = events.get(seq as usize) {
            by_key.entry(event.facts.key).or_default().push(seq);
        }
    }
    let mut findings = OrderFindings::default();
    for (key, seqs) in &by_key {
        let mut delivered_any = false;
        for &j in seqs {
            let Some(arrived) = seen.get(&j).map(|s| s.first_arrival).filter(|t| *t > 0) else {
                continue;
            };
            delivered_any = true;
            for &i in seqs {
                if i == j || !accepted_before((i, &events[i as usize]), (j, &events[j as usize])) {
                    continue;
                }
                findings.pairs_checked += 1;
                let settled_at = seen.get(&i).map_or(0, |s| s.first_accepted);
                let settled = dead.contains(&i) || (settled_at > 0 && settled_at <= arrived);
                if !settled {
                    findings.early.push(format!(
                        "{} (key k{key}) reached {subscription} at {arrived} before {} was delivered ({}) or dead-lettered",
                        event_id(j),
                        event_id(i),
                        if settled_at == 0 { "never".to_owned() } else { format!("at {settled_at}") },
                    ));
                }
            }
        }
        findings.keys += usize::from(delivered_any);
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::EventFacts;

    fn published(key: u8, request: u64, sent_at: i64, answered_at: i64) -> Published {
        Published {
            facts: EventFacts {
                key,
                ..EventFacts::random(2)
            },
            fate: Fate::Acknowledged,
            refusal: 0,
            answered_at,
            sent_at,
            request,
        }
    }

    fn seen(first_arrival: i64, first_accepted: i64) -> Seen {
        Seen {
            arrivals: 1,
            accepted: u32::from(first_accepted > 0),
            first_arrival,
            first_accepted,
            ..Seen::default()
        }
    }

    /// ev-0 and ev-1 in one request (key 1), ev-2 sent after both were answered (key 1),
    /// ev-3 of key 2 sent at the same time as ev-0 (no order with anything).
    fn events() -> Vec<Published> {
        vec![
            published(1, 0, 100, 110),
            published(1, 0, 100, 110),
            published(1, 2, 120, 130),
            published(2, 3, 100, 110),
        ]
    }

    #[test]
    fn deliveries_in_acceptance_order_pass_and_repeats_of_earlier_events_are_allowed() {
        let events = events();
        let seen = HashMap::from([
            (0, seen(200, 201)),
            (1, seen(202, 203)),
            (2, seen(210, 211)),
            (3, seen(150, 151)),
        ]);
        let findings = judge("sub", &events, 0..4, &seen, &HashSet::new());
        assert!(findings.early.is_empty(), "{:?}", findings.early);
        assert_eq!(findings.pairs_checked, 3);
        assert_eq!(findings.keys, 2);
    }

    #[test]
    fn an_event_delivered_before_an_unsettled_earlier_one_of_its_key_is_caught() {
        let events = events();
        // ev-1 arrives before ev-0 (its predecessor in the same request) was accepted.
        let seen = HashMap::from([(0, seen(200, 205)), (1, seen(203, 204)), (2, seen(210, 211))]);
        let findings = judge("sub", &events, 0..4, &seen, &HashSet::new());
        assert_eq!(findings.early.len(), 1, "{:?}", findings.early);
        assert!(findings.early[0].starts_with("ev-1 (key k1)"), "{}", findings.early[0]);
    }

    #[test]
    fn a_dead_lettered_earlier_event_releases_its_key() {
        let events = events();
        let seen = HashMap::from([(1, seen(203, 204)), (2, seen(210, 211))]);
        let findings = judge("sub", &events, 0..4, &seen, &HashSet::from([0]));
        assert!(findings.early.is_empty(), "{:?}", findings.early);
        let findings = judge("sub", &events, 0..4, &seen, &HashSet::new());
        assert_eq!(findings.early.len(), 2, "{:?}", findings.early);
    }

    #[test]
    fn events_whose_publish_was_not_answered_200_order_nothing() {
        let mut events = events();
        events[0].fate = Fate::NotAcknowledged;
        let seen = HashMap::from([(1, seen(203, 204)), (2, seen(210, 211))]);
        let findings = judge("sub", &events, 1..4, &seen, &HashSet::new());
        assert!(findings.early.is_empty(), "{:?}", findings.early);
    }
}
