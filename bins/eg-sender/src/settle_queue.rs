//! The settle queue: settles gathered per partition. Every step hands its settle to its
//! partition's queue, and one task per partition sends what has gathered as one
//! `settle.lua` call (up to [`MOST_PER_CALL`]). While a call is in flight the next ones gather, so under
//! load a call settles many attempts for one round trip and one script start; when idle
//! a settle goes out at once, alone (no timer, no added wait).
//!
//! The one exception: the deliveries of a shared entry (a fan-out's, one per
//! subscription, or a batch's, one per event; read together) wait up to
//! [`SIBLING_WAIT`] for each other and go out together, as one parcel that no call
//! splits, so their entry is settled by one call (`settle.lua` then writes nothing to
//! track which of them are settled, and their history steps share one record).

use eg_store::{Partition, Retention, Settle, Settled, Store, StoreError};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, mpsc, oneshot};

/// Most settles in one script call (bounds the script's run, which blocks Redis), unless
/// one parcel of siblings alone holds more.
const MOST_PER_CALL: usize = 256;

/// Longest the first settled delivery of a shared entry waits for its siblings.
const SIBLING_WAIT: Duration = Duration::from_millis(10);

/// Why a settle failed. A failed call fails every settle it carried, so the store's
/// error is kept as its message (shared by all of them).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SettleError {
    #[error("no settle queue for partition {0}")]
    NoQueue(u16),
    #[error("the settle queue has stopped")]
    Stopped,
    #[error("the settle queue dropped the settle")]
    Dropped,
    #[error("the settle call answered nothing for this settle")]
    NoAnswer,
    #[error("the settle call failed: {0}")]
    Call(String),
}

struct Queued {
    settle: Settle,
    reply: oneshot::Sender<Result<Settled, SettleError>>,
}

/// What a partition's queue carries: one settle, or a shared entry's siblings, which go
/// into one call together.
type Parcel = Vec<Queued>;

/// The per-partition settle queues of one sender process.
pub struct SettleQueue {
    queues: Vec<mpsc::UnboundedSender<Parcel>>,
    siblings: Arc<Siblings>,
}

/// Settles of fan-out entries' deliveries gathering, by partition and entry id.
#[derive(Default)]
struct Siblings(Mutex<HashMap<(u16, String), Gathering>>);

struct Gathering {
    settles: Vec<Queued>,
    /// Told when the last sibling arrives.
    complete: Arc<Notify>,
}

impl Siblings {
    fn lock(&self) -> MutexGuard<'_, HashMap<(u16, String), Gathering>> {
        // A panic elsewhere while holding it leaves the map usable.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds `queued` to its entry's gathering. The first to arrive leads: it is given
    /// the signal that all have arrived, waits for it (or [`SIBLING_WAIT`]) and sends
    /// the gathering (see [`Siblings::take`]).
    fn join(&self, key: &(u16, String), of: usize, queued: Queued) -> Option<Arc<Notify>> {
        let mut gathering = self.lock();
        match gathering.entry(key.clone()) {
            Entry::Occupied(mut waiting) => {
                let waiting = waiting.get_mut();
                waiting.settles.push(queued);
                if waiting.settles.len() >= of {
                    waiting.complete.notify_one();
                }
                None
            }
            Entry::Vacant(first) => {
                let complete = Arc::new(Notify::new());
                first.insert(Gathering {
                    settles: vec![queued],
                    complete: complete.clone(),
                });
                Some(complete)
            }
        }
    }

    /// What gathered for `key`, now gone from here (a sibling arriving later starts a
    /// new gathering).
    fn take(&self, key: &(u16, String)) -> Vec<Queued> {
        self.lock().remove(key).map(|g| g.settles).unwrap_or_default()
    }
}

impl SettleQueue {
    /// Starts one settling task per partition of `store`.
    pub fn start(store: &Store, retention: Retention) -> Self {
        let queues = store
            .keys()
            .all_partitions()
            .map(|partition| {
                let (queue, gathered) = mpsc::unbounded_channel();
                tokio::spawn(send_gathered(store.clone(), partition, retention, gathered));
                queue
            })
            .collect();
        Self {
            queues,
            siblings: Arc::default(),
        }
    }

    /// Settles `settle` in `partition`, together with whatever else is waiting there.
    pub async fn settle(&self, partition: &Partition, settle: Settle) -> Result<Settled, SettleError> {
        let (reply, answer) = oneshot::channel();
        let queue = self
            .queues
            .get(usize::from(partition.index))
            .ok_or(SettleError::NoQueue(partition.index))?;
        let queued = Queued { settle, reply };
        match queued.settle.shared {
            Some(shared) if shared.of > 1 => {
                let key = (partition.index, queued.settle.entry_id.clone());
                if let Some(complete) = self.siblings.join(&key, shared.of, queued) {
                    // In a task of its own, so the gathering is sent even if this
                    // caller stops waiting.
                    let (siblings, queue) = (self.siblings.clone(), queue.clone());
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(SIBLING_WAIT, complete.notified()).await;
                        // One parcel, so the queue's task takes them into one call. A
                        // stopped queue drops them: each caller's answer says so.
                        let _ = queue.send(siblings.take(&key));
                    });
                }
            }
            _ => queue.send(vec![queued]).map_err(|_| SettleError::Stopped)?,
        }
        answer.await.map_err(|_| SettleError::Dropped)?
    }
}

/// One partition's task: sends what has gathered, one call at a time.
async fn send_gathered(
    store: Store,
    partition: Partition,
    retention: Retention,
    mut gathered: mpsc::UnboundedReceiver<Parcel>,
) {
    // A parcel that did not fit the previous call: the next one starts with it.
    let mut next: Option<Parcel> = None;
    loop {
        let mut call = match next.take() {
            Some(parcel) => parcel,
            None => match gathered.recv().await {
                Some(parcel) => parcel,
                None => return,
            },
        };
        while call.len() < MOST_PER_CALL {
            match gathered.try_recv() {
                Ok(parcel) if call.len() + parcel.len() <= MOST_PER_CALL => call.extend(parcel),
                Ok(parcel) => {
                    next = Some(parcel);
                    break;
                }
                Err(_) => break,
            }
        }
        let (settles, replies): (Vec<Settle>, Vec<_>) = call.into_iter().map(|q| (q.settle, q.reply)).unzip();
        match store.settle_many(&partition, &settles, &retention).await {
            Ok(settled) => {
                for (reply, settled) in replies.into_iter().zip(settled) {
                    let _ = reply.send(Ok(settled));
                }
            }
            // Redis refused the call itself (a script error at one item, a record that
            // does not encode): settle each alone, so one bad item cannot fail the others
            // again and again. The call had ended every hold, but an entry stays in the
            // stream until its settle deletes it, and that is what a settle of it now
            // goes by: the others settle; the bad one is refused again, alone.
            Err(e) if !is_transport(&e) => {
                tracing::warn!(error = %e, items = settles.len(), "a settle call failed; settling its items one by one");
                for (settle, reply) in settles.iter().zip(replies) {
                    let alone = store
                        .settle_many(&partition, std::slice::from_ref(settle), &retention)
                        .await;
                    let answer = alone
                        .map_err(|e| SettleError::Call(e.to_string()))
                        .and_then(|mut settled| settled.pop().ok_or(SettleError::NoAnswer));
                    let _ = reply.send(answer);
                }
            }
            Err(e) => {
                let error = SettleError::Call(e.to_string());
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }
}

/// Whether the call may not have reached Redis (every item is then retried by its caller).
fn is_transport(error: &StoreError) -> bool {
    match error {
        StoreError::Redis(e) => eg_store::connection::breaks_connection(e),
        StoreError::Pool(_) | StoreError::Timeout(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_redis::{command_calls, script_calls};
    use eg_core::history::{DeliveryState, HistoryEntry};
    use eg_core::{Delivery, UnixMillis};
    use eg_store::Settlement;
    use eg_store::queue::EventToStore;
    use eg_store::{Catalog, RedisSettings};
    use eg_testkit::RedisServer;
    use std::time::Duration;

    fn done(ready: &eg_store::ReadyDelivery) -> Settle {
        Settle {
            entry_id: ready.entry_id.clone(),
            delivery: ready.delivery.clone(),
            settlement: Settlement::Done,
            history: Some(HistoryEntry {
                subscription: "billing".into(),
                attempt: 1,
                at: UnixMillis(2),
                outcome: None,
                http_status: None,
                duration_ms: None,
                next: None,
                state: DeliveryState::Delivered,
                reason: None,
                hold: None,
                error: None,
            }),
            carries_body: ready.carries_body,
            shared: None,
        }
    }

    /// [`done`], as if the event were in the event hash (where [`corrupt_event_record`]
    /// breaks it).
    fn settled_through_the_hash(ready: &eg_store::ReadyDelivery) -> Settle {
        Settle {
            carries_body: false,
            shared: None,
            ..done(ready)
        }
    }

    async fn connect(server: &RedisServer) -> Store {
        let store = Store::connect(&RedisSettings {
            url: server.url(),
            cluster_nodes: Vec::new(),
            sentinel: None,
            credentials: Default::default(),
            tls: Default::default(),
            prefix: "eg".into(),
            partitions: 1,
            pool_size: 4,
            command_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            replica_acks: 0,
            replica_ack_timeout: Duration::from_secs(1),
        })
        .unwrap();
        store.check_layout().await.unwrap();
        store.ensure_groups().await.unwrap();
        store
    }

    /// Publishes `n` events with a delivery each to partition 0 and reads them all.
    async fn publish_and_read(store: &Store, n: usize) -> Vec<eg_store::ReadyDelivery> {
        let p0 = store.keys().partition(0);
        let version = Catalog::new(store.clone()).version().await.unwrap();
        let events: Vec<EventToStore> = (0..n)
            .map(|i| EventToStore {
                event_key: format!("e{i}"),
                body: "{}".into(),
                deliveries: vec![Delivery::new(
                    format!("d{i}"),
                    format!("e{i}"),
                    "orders".into(),
                    "billing".into(),
                    UnixMillis(1),
                )],
            })
            .collect();
        store.publish(&p0, version, &events).await.unwrap();
        let held = store
            .read_ready(&p0, "c", 500, Duration::from_millis(50))
            .await
            .unwrap();
        assert_eq!(held.len(), n);
        held
    }

    // One thread: every spawned settle is queued before the gathering task runs again,
    // so how many calls they take does not depend on how two threads interleave.
    #[tokio::test]
    async fn concurrent_settles_of_a_partition_go_out_as_few_calls_each_with_its_own_answer() {
        let server = RedisServer::start();
        let store = connect(&server).await;
        let p0 = store.keys().partition(0);
        let held = publish_and_read(&store, 200).await;

        let queue = std::sync::Arc::new(SettleQueue::start(&store, Retention::NONE));
        let before = script_calls(&server);
        let settles = held.iter().map(|ready| {
            let (queue, p0) = (queue.clone(), p0.clone());
            let item = done(ready);
            tokio::spawn(async move { queue.settle(&p0, item).await })
        });
        let mut took_effect = 0;
        for settle in settles.collect::<Vec<_>>() {
            took_effect += usize::from(settle.await.unwrap().unwrap().took_effect);
        }
        let calls = script_calls(&server) - before;
        assert_eq!(took_effect, 200);
        assert!(calls < 20, "200 concurrent settles took {calls} script calls");

        // Settled already: each is answered, as not taking effect.
        let again = queue.settle(&p0, done(&held[0])).await.unwrap();
        assert!(!again.took_effect);
        assert_eq!(store.depths(&p0).await.unwrap().in_flight, 0);
    }

    /// Breaks the stored event's reference count, so `settle.lua` fails at it (after it
    /// ended the delivery's hold) when the delivery is settled as one whose event is in
    /// the event hash ([`settled_through_the_hash`]): these events' only deliveries
    /// carry their bodies, which never touch a hash.
    fn corrupt_event_record(server: &RedisServer, partition: &Partition, event_key: &str) {
        let _: () = redis::cmd("HSET")
            .arg(partition.event(event_key))
            .arg(eg_store::codec::EVENT_OUTSTANDING_FIELD)
            .arg("not a number")
            .query(&mut server.client())
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_item_redis_refuses_alone_is_answered_with_the_refusal() {
        let server = RedisServer::start();
        let store = connect(&server).await;
        let p0 = store.keys().partition(0);
        let held = publish_and_read(&store, 1).await;
        corrupt_event_record(&server, &p0, "e0");
        let queue = SettleQueue::start(&store, Retention::NONE);
        let answer = queue.settle(&p0, settled_through_the_hash(&held[0])).await;
        // The same answer as when it fails among others (refused again, alone); the
        // script ended the hold before it stopped at the bad record.
        assert!(matches!(answer, Err(SettleError::Call(_))), "{answer:?}");
        assert_eq!(store.depths(&p0).await.unwrap().in_flight, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_item_redis_refuses_does_not_fail_the_others_settled_with_it() {
        let server = RedisServer::start();
        let store = connect(&server).await;
        let p0 = store.keys().partition(0);
        let held = publish_and_read(&store, 3).await;
        // The third event's record is corrupt: its settle fails inside the script.
        corrupt_event_record(&server, &p0, "e2");
        let queue = std::sync::Arc::new(SettleQueue::start(&store, Retention::NONE));
        let settles: Vec<_> = held
            .iter()
            .map(|ready| {
                let (queue, p0, item) = (queue.clone(), p0.clone(), settled_through_the_hash(ready));
                tokio::spawn(async move { queue.settle(&p0, item).await })
            })
            .collect();
        let mut answers = Vec::new();
        for settle in settles {
            answers.push(settle.await.unwrap());
        }
        // Every caller is answered at once (none is failed again and again with the bad
        // item): the good items take effect, settled again alone if they went out with
        // the bad one (still in the stream, so still theirs); the bad one is refused.
        let took: Vec<Option<bool>> = answers.iter().map(|a| a.as_ref().ok().map(|s| s.took_effect)).collect();
        assert_eq!(took, [Some(true), Some(true), None], "{answers:?}");
        assert_eq!(store.depths(&p0).await.unwrap().in_flight, 0, "every hold ended");
    }

    /// Publishes one event to `subscriptions` push subscriptions (one fan-out entry) and
    /// reads its deliveries.
    async fn publish_fan_out(store: &Store, subscriptions: usize) -> Vec<eg_store::ReadyDelivery> {
        let p0 = store.keys().partition(0);
        let version = Catalog::new(store.clone()).version().await.unwrap();
        let event = EventToStore {
            event_key: "e0".into(),
            body: "{}".into(),
            deliveries: (0..subscriptions)
                .map(|i| {
                    Delivery::new(
                        eg_store::codec::fan_out_delivery_id("e0", i),
                        "e0".into(),
                        "orders".into(),
                        format!("s{i}"),
                        UnixMillis(1),
                    )
                })
                .collect(),
        };
        store.publish(&p0, version, &[event]).await.unwrap();
        let held = store.read_ready(&p0, "c", 10, Duration::from_millis(50)).await.unwrap();
        assert_eq!(held.len(), subscriptions);
        held
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_deliveries_of_a_fan_out_entry_settle_in_one_call() {
        let server = RedisServer::start();
        let store = connect(&server).await;
        let p0 = store.keys().partition(0);
        let held = publish_fan_out(&store, 3).await;
        let queue = std::sync::Arc::new(SettleQueue::start(&store, Retention::NONE));
        let before = script_calls(&server);
        // They finish a moment apart, as attempts to different endpoints do.
        let settles: Vec<_> = held
            .iter()
            .enumerate()
            .map(|(i, ready)| {
                let (queue, p0, item) = (
                    queue.clone(),
                    p0.clone(),
                    Settle {
                        shared: ready.shared,
                        ..done(ready)
                    },
                );
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(2 * i as u64)).await;
                    queue.settle(&p0, item).await
                })
            })
            .collect();
        for settle in settles {
            assert!(settle.await.unwrap().unwrap().took_effect);
        }
        // The first call of a script is answered NOSCRIPT and sent again: up to two.
        assert!(script_calls(&server) - before <= 2, "one call for the three");
        assert_eq!(command_calls(&server, "sadd"), 0, "none was settled alone");
        assert_eq!(store.depths(&p0).await.unwrap().in_flight, 0);
        let marks: u64 = redis::cmd("EXISTS")
            .arg(format!("{}:shared:{}", p0.ready(), held[0].entry_id))
            .query(&mut server.client())
            .unwrap();
        assert_eq!(marks, 0, "settled together: nothing tracked");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fan_out_delivery_does_not_wait_long_for_a_sibling_that_never_settles() {
        let server = RedisServer::start();
        let store = connect(&server).await;
        let p0 = store.keys().partition(0);
        let held = publish_fan_out(&store, 3).await;
        let queue = SettleQueue::start(&store, Retention::NONE);
        let first = Settle {
            shared: held[0].shared,
            ..done(&held[0])
        };
        let answer = tokio::time::timeout(Duration::from_secs(5), queue.settle(&p0, first))
            .await
            .expect("answered after the sibling wait");
        assert!(answer.unwrap().took_effect);
        // The entry stays held for the two not settled.
        assert_eq!(store.depths(&p0).await.unwrap().in_flight, 1);
    }
}
