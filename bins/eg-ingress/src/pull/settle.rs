//! The four lock operations, each on a list of lock tokens: acknowledge (the event is
//! done), release (receivable again, now or after `releaseDelayInSeconds`; the last
//! allowed delivery or an ended time-to-live dead-letters instead), reject
//! (dead-lettered with `Rejected`, or dropped without a destination) and renewLock (the
//! same token holds the lock for another full lock duration).
//!
//! Tokens are grouped by partition; each group is one `queue_settle.lua` call that
//! checks every lock is still held with the token's delivery counter. A token that
//! cannot be read fails as `BadToken`, a lock no longer held as `TokenLost`; neither
//! fails the others, and the answer is `200` whatever happened.

use super::receive::end;
use super::trace::CallTrace;
use super::{Pull, Target};
use crate::errors::Refusal;
use eg_core::pull::{Action, LockAnswer, LockOutcome, LockToken, ReleaseDelay, ReleaseStep, on_reject, on_release};
use eg_runtime::pull_tally::Tally;
use eg_store::{LockCheck, Settle, Settlement};
use std::collections::BTreeMap;

pub async fn settle(
    pull: &Pull,
    target: &Target,
    action: Action,
    delay: ReleaseDelay,
    tokens: Vec<String>,
) -> Result<LockAnswer, Refusal> {
    let mut trace = CallTrace::begin(action);
    let partitions = pull.store.keys().partitions();
    let mut outcomes: Vec<LockOutcome> = vec![LockOutcome::Lost; tokens.len()];
    // Per partition: (position in the request, the lock).
    let mut groups: BTreeMap<u16, Vec<(usize, LockToken)>> = BTreeMap::new();
    for (at, text) in tokens.iter().enumerate() {
        match LockToken::decode(text, &pull.key, &target.key) {
            Ok(token) if token.partition < partitions => groups.entry(token.partition).or_default().push((at, token)),
            Ok(_) => {
                outcomes[at] = LockOutcome::Bad("the lock token names a partition this deployment does not have".into())
            }
            Err(bad) => outcomes[at] = LockOutcome::Bad(bad.to_string()),
        }
    }
    let sub = &target.subscription;
    for (index, locks) in groups {
        let partition = pull.store.keys().partition(index);
        let ids: Vec<String> = locks.iter().map(|(_, t)| t.entry_id()).collect();
        let deliveries = pull.store.queue_entries(&partition, &target.key, &ids).await?;
        let now = pull.clock.now();
        // Entries gone are lost; the rest are settled in request order.
        let mut positions = Vec::new();
        let mut items = Vec::new();
        let mut counters = Vec::new();
        let mut tallies = Vec::new();
        for ((at, token), delivery) in locks.into_iter().zip(deliveries) {
            let Some(delivery) = delivery else { continue };
            trace.saw(delivery.trace.as_ref());
            let count = delivery.attempts + token.count;
            let (settlement, tally) = match action {
                Action::Acknowledge => (Settlement::Done, Tally::Acknowledged),
                Action::RenewLock => (Settlement::RenewLock, Tally::Nothing),
                Action::Reject => (
                    end(sub, &delivery, count, on_reject(), now),
                    Tally::ended(sub, on_reject()),
                ),
                Action::Release => {
                    let mut released = delivery.clone();
                    released.attempts = count;
                    match on_release(count, delivery.published_at, &sub.retry_policy, delay.duration(), now) {
                        ReleaseStep::Requeue => (Settlement::Requeue { delivery: released }, Tally::Nothing),
                        ReleaseStep::DelayUntil(due) => (
                            Settlement::Retry {
                                delivery: released,
                                due,
                            },
                            Tally::Nothing,
                        ),
                        ReleaseStep::DeadLetter(reason) => {
                            (end(sub, &delivery, count, reason, now), Tally::ended(sub, reason))
                        }
                    }
                }
                Action::Receive => continue,
            };
            tallies.push(tally);
            positions.push(at);
            items.push(Settle {
                entry_id: token.entry_id(),
                delivery,
                settlement,
                history: None,
                carries_body: false,
                shared: None,
            });
            counters.push(token.count);
        }
        let results = pull
            .store
            .settle_queue(
                &partition,
                &target.key,
                &items,
                &counters,
                target.lock,
                LockCheck::Held,
                &pull.retention,
            )
            .await?;
        for ((at, took_effect), tally) in positions.into_iter().zip(results).zip(tallies) {
            if took_effect {
                outcomes[at] = LockOutcome::Succeeded;
                tally.record(&target.key);
            }
        }
        if matches!(action, Action::Release) && items.iter().any(|i| matches!(i.settlement, Settlement::Requeue { .. }))
        {
            // Released events are receivable at once: wake waiting receivers.
            let _ = pull.store.ring(&partition, &[target.key.as_str()]).await;
        }
    }
    trace.settled(target, &outcomes);
    Ok(LockAnswer::new(tokens.into_iter().zip(outcomes)))
}
