//! Receive: lock up to `maxEvents` events of a queue subscription, across partitions,
//! at once if any are there, otherwise by waiting in the [`ReceiveHub`](super::ReceiveHub).
//!
//! Events whose delivery count went past `maxDeliveryCount` (their last lock expired) or
//! whose time-to-live ended are not handed out: they are dead-lettered (or dropped)
//! under the lock this receive just got, so no other receiver can see them meanwhile.

use super::trace::CallTrace;
use super::{Pull, Target};
use crate::errors::Refusal;
use eg_core::pull::answer::BrokerProperties;
use eg_core::pull::{Action, LockToken, QueueStep, ReceiveAnswer, ReceiveOptions, ReceivedEvent, on_receive};
use eg_core::render::render;
use eg_core::{Delivery, Subscription};
use eg_runtime::pull_tally::Tally;
use eg_store::{LockCheck, QueueEntry, Settle, Settlement, StoreError};
use serde_json::Value;
use std::sync::Arc;

/// One event locked for a receiver: where its lock is, and what it will be shown.
#[derive(Debug)]
pub struct Locked {
    pub entry: QueueEntry,
    pub event: Value,
}

/// The receive handler's work: now, or after waiting.
pub async fn receive(pull: &Arc<Pull>, target: &Target, options: ReceiveOptions) -> Result<ReceiveAnswer, Refusal> {
    let mut trace = CallTrace::begin(Action::Receive);
    let mut locked = receive_now(pull, &target.key, options.max_events as usize).await?;
    if locked.is_empty() {
        locked = pull.hub.wait(&target.key, options.max_events, options.max_wait).await;
    }
    locked.iter().for_each(|l| trace.saw(l.entry.delivery.trace.as_ref()));
    let answer = answer(pull, &target.key, locked);
    trace.received(target, answer.value.len());
    Ok(answer)
}

/// The answer for `locked`, with a signed token per lock.
pub fn answer(pull: &Pull, key: &str, locked: Vec<Locked>) -> ReceiveAnswer {
    ReceiveAnswer {
        value: locked
            .into_iter()
            .filter_map(|l| {
                let count = l.entry.delivery_count();
                let token = LockToken::for_entry(l.entry.partition, &l.entry.entry_id, l.entry.counter)?;
                Some(ReceivedEvent {
                    broker_properties: BrokerProperties {
                        lock_token: token.encode(&pull.key, key),
                        delivery_count: count,
                    },
                    event: l.event,
                })
            })
            .collect(),
    }
}

/// The subscription `key` (`<topic>/<subscription>`) as the catalog has it now, if it
/// still exists and delivers by queue.
fn current(pull: &Pull, key: &str) -> Option<(Arc<Subscription>, std::time::Duration)> {
    let (topic, name) = key.split_once('/')?;
    let snapshot = pull.cache.snapshot();
    let sub = snapshot
        .topic(topic)?
        .subscriptions
        .iter()
        .find(|s| s.name.key() == name)?
        .clone();
    let lock = sub.receive_lock()?;
    Some((sub, lock))
}

/// Locks up to `max` events of `key` now, visiting partitions from a random one; an
/// empty list when there are none.
pub async fn receive_now(pull: &Pull, key: &str, max: usize) -> Result<Vec<Locked>, StoreError> {
    let Some((sub, lock)) = current(pull, key) else {
        return Ok(Vec::new());
    };
    let partitions = pull.store.keys().partitions();
    let first = rand::random_range(0..partitions);
    let mut out = Vec::new();
    for i in 0..partitions {
        if out.len() >= max {
            break;
        }
        let partition = pull.store.keys().partition((first + i) % partitions);
        let entries = pull.store.receive_queue(&partition, key, lock, max - out.len()).await?;
        if entries.is_empty() {
            continue;
        }
        let event_keys: Vec<&str> = entries.iter().map(|e| e.delivery.event_key.as_str()).collect();
        let bodies = pull.store.event_bodies(&partition, &event_keys).await?;
        let now = pull.clock.now();
        let mut ended: Vec<(QueueEntry, Settlement)> = Vec::new();
        let mut tallies = Vec::new();
        for (entry, body) in entries.into_iter().zip(bodies) {
            let count = entry.delivery_count();
            let step = on_receive(count, entry.delivery.published_at, &sub.retry_policy, now);
            let rendered = body
                .as_deref()
                .map(|b| render(b, entry.delivery.format, sub.delivery_schema).map(|r| r.into_value()));
            match (step, rendered) {
                (QueueStep::Deliver, Some(Ok(event))) => out.push(Locked { entry, event }),
                (QueueStep::DeadLetter(reason), _) => {
                    let settlement = end(&sub, &entry.delivery, count, reason, now);
                    ended.push((entry, settlement));
                    tallies.push(Tally::ended(&sub, reason));
                }
                (QueueStep::Deliver, None | Some(Err(_))) => {
                    // Its body is gone or cannot be shown: nobody could ever receive it.
                    tracing::warn!(subscription = %key, event = %entry.delivery.event_id, "dropping a queued event whose stored body is missing or unrenderable");
                    ended.push((entry, Settlement::Done));
                    tallies.push(Tally::Nothing);
                }
            }
        }
        let results = settle_held(pull, &partition, key, lock, ended).await?;
        for (took_effect, tally) in results.into_iter().zip(tallies) {
            if took_effect {
                tally.record(key);
            }
        }
    }
    Ok(out)
}

/// The settlement that ends `delivery` at its `count`-th delivery for `reason`
/// (dead-letter, or drop without a destination), logged.
pub fn end(
    sub: &Subscription,
    delivery: &Delivery,
    count: u32,
    reason: eg_core::DeadLetterReason,
    now: eg_core::UnixMillis,
) -> Settlement {
    let settlement = eg_store::pull::ending(sub, delivery, count, reason, now);
    if matches!(settlement, Settlement::Done) {
        tracing::info!(subscription = %sub.name, event = %delivery.event_id, %reason, "dropped: no dead-letter destination");
    }
    settlement
}

/// Settles entries this process holds the lock of (just received), each at its counter.
pub async fn settle_held(
    pull: &Pull,
    partition: &eg_store::Partition,
    key: &str,
    lock: std::time::Duration,
    items: Vec<(QueueEntry, Settlement)>,
) -> Result<Vec<bool>, StoreError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let counters: Vec<u32> = items.iter().map(|(e, _)| e.counter).collect();
    let settles: Vec<Settle> = items
        .into_iter()
        .map(|(entry, settlement)| Settle {
            entry_id: entry.entry_id,
            delivery: entry.delivery,
            settlement,
            history: None,
            carries_body: false,
            shared: None,
        })
        .collect();
    pull.store
        .settle_queue(
            partition,
            key,
            &settles,
            &counters,
            lock,
            LockCheck::Held,
            &pull.retention,
        )
        .await
}

/// Gives locked events back uncharged (their receiver went away before it got them):
/// requeued with the count they had before this lock.
pub async fn hand_back(pull: &Pull, key: &str, locked: Vec<Locked>) {
    let Some((_, lock)) = current(pull, key) else { return };
    for l in locked {
        let partition = pull.store.keys().partition(l.entry.partition);
        let mut uncharged = l.entry.delivery.clone();
        uncharged.attempts = l.entry.delivery_count().saturating_sub(1);
        let item = vec![(l.entry, Settlement::Requeue { delivery: uncharged })];
        if let Err(error) = settle_held(pull, &partition, key, lock, item).await {
            // The lock expires by itself: the event comes back then, counted.
            tracing::warn!(subscription = %key, %error, "could not hand back a locked event; it returns when its lock expires");
        }
    }
}
