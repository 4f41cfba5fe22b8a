//! Long-poll receives without a Redis connection per waiting client. Per process:
//!
//! - **waiters**: per subscription, a FIFO of receivers that found nothing, each only a
//!   oneshot sender (and its `maxEvents`); the HTTP request awaits the oneshot within
//!   its `maxWaitTime`;
//! - **one fetch task per subscription with waiters**: it serves the head waiter with
//!   one receive (the same atomic script every receive uses), hands what it got over,
//!   and goes on with the next; finding nothing, it sleeps until woken. A waiter gone
//!   before the hand-over (timed out, disconnected) gets nothing: what was locked for
//!   it goes back uncharged. The task ends when its FIFO is empty;
//! - **wake-ups**: one signal reader per partition (a plain `XREAD BLOCK` on the
//!   partition's signal stream, which publish, release and promotion write to) wakes
//!   the fetch tasks of the subscriptions named; and a recheck timer, because expired
//!   locks ring no bell.
//!
//! Copies of the ingress compete only through the receive script, which gives each
//! lock to one caller: a copy that loses a race finds nothing and sleeps again.

use super::Pull;
use super::receive::{Locked, hand_back, receive_now};
use eg_store::Store;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};

/// How long a signal read blocks before it is issued again.
const SIGNAL_BLOCK: Duration = Duration::from_secs(5);
/// Pause after a failed signal read or receive, so an outage is not a busy loop.
const BACKOFF: Duration = Duration::from_secs(1);

struct Waiter {
    max_events: u32,
    tx: oneshot::Sender<Vec<Locked>>,
}

#[derive(Default)]
struct Waiters {
    queue: Mutex<VecDeque<Waiter>>,
    wake: Notify,
}

pub struct ReceiveHub {
    pull: Weak<Pull>,
    /// How often a fetch task with waiters looks again without a signal (expired locks
    /// and due delayed releases ring no bell until the scheduler promotes them).
    recheck: Duration,
    subscriptions: Mutex<HashMap<String, Arc<Waiters>>>,
}

impl ReceiveHub {
    pub fn new(pull: Weak<Pull>, recheck: Duration) -> Arc<Self> {
        Arc::new(Self {
            pull,
            recheck,
            subscriptions: Mutex::new(HashMap::new()),
        })
    }

    /// Waits up to `max_wait` for up to `max_events` events of `key`; empty if none came.
    pub async fn wait(self: &Arc<Self>, key: &str, max_events: u32, max_wait: Duration) -> Vec<Locked> {
        let (tx, rx) = oneshot::channel();
        let started = {
            let mut subscriptions = lock(&self.subscriptions);
            let waiters = subscriptions.entry(key.to_owned()).or_default().clone();
            let mut queue = lock(&waiters.queue);
            let first = queue.is_empty();
            queue.push_back(Waiter { max_events, tx });
            drop(queue);
            waiters.wake.notify_one();
            first.then_some(waiters)
        };
        if let Some(waiters) = started {
            tokio::spawn(fetch(self.clone(), key.to_owned(), waiters));
        }
        match tokio::time::timeout(max_wait, rx).await {
            Ok(Ok(locked)) => locked,
            _ => Vec::new(),
        }
    }

    /// Wakes the fetch task of `key`, if it has waiters in this process.
    fn ring(&self, key: &str) {
        if let Some(waiters) = lock(&self.subscriptions).get(key) {
            waiters.wake.notify_one();
        }
    }

    /// One signal reader per partition, for the life of the process.
    pub fn start_doorbells(self: &Arc<Self>, store: &Store) {
        for partition in store.keys().all_partitions() {
            let hub = Arc::downgrade(self);
            let store = store.clone();
            tokio::spawn(async move {
                let mut after = "$".to_owned();
                loop {
                    match store.read_signals(&partition, &after, SIGNAL_BLOCK).await {
                        Ok((last, named)) => {
                            after = last;
                            let Some(hub) = hub.upgrade() else { return };
                            for key in named {
                                hub.ring(&key);
                            }
                        }
                        Err(error) => {
                            tracing::warn!(partition = partition.index, %error, "reading queue signals failed; retrying");
                            tokio::time::sleep(BACKOFF).await;
                        }
                    }
                }
            });
        }
    }
}

/// Serves `key`'s waiters in order until there are none.
async fn fetch(hub: Arc<ReceiveHub>, key: String, waiters: Arc<Waiters>) {
    loop {
        let Some(pull) = hub.pull.upgrade() else { return };
        // The head waiter still waiting, or the end of this task.
        let max_events = {
            let mut subscriptions = lock(&hub.subscriptions);
            let mut queue = lock(&waiters.queue);
            while queue.front().is_some_and(|w| w.tx.is_closed()) {
                queue.pop_front();
            }
            match queue.front() {
                Some(head) => head.max_events,
                None => {
                    drop(queue);
                    subscriptions.remove(&key);
                    return;
                }
            }
        };
        let locked = match receive_now(&pull, &key, max_events as usize).await {
            Ok(locked) => locked,
            Err(error) => {
                tracing::warn!(subscription = %key, %error, "receive for waiting clients failed; retrying");
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        if locked.is_empty() {
            drop(pull);
            tokio::select! {
                () = waiters.wake.notified() => {}
                () = tokio::time::sleep(hub.recheck) => {}
            }
            continue;
        }
        let head = lock(&waiters.queue).pop_front();
        let undelivered = match head {
            Some(waiter) => waiter.tx.send(locked).err(),
            None => Some(locked),
        };
        if let Some(locked) = undelivered {
            hand_back(&pull, &key, locked).await;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding it cannot leave a FIFO half-changed: take it anyway.
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
