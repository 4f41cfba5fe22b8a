//! Probation results gathered per endpoint. Every attempt that says something about its
//! endpoint is recorded in the endpoint's probation record (`endpoint_record.lua`), and
//! an endpoint that fails often is recorded after every attempt. While one call for an
//! endpoint is in flight, the results of that endpoint finishing meanwhile gather and go
//! out together as the next call, each recorded in order as if alone
//! (`Store::record_endpoint_results`): one round trip and one script start for all of
//! them. When idle a result goes out at once, alone (no timer, no added wait).
//!
//! The first result of a quiet endpoint starts a task that sends it, then what gathered
//! behind it, call after call, until nothing did; each caller is answered as soon as its
//! own call returns.

use eg_core::probation::{EndpointAttempt, EndpointId, ProbationChange, ProbationPolicy};
use eg_store::{Store, StoreError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// Why a result was not recorded. A failed call fails every result it carried, so the
/// store's error is kept as its message (shared by all of them).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RecordError {
    #[error("{0}")]
    Call(String),
    #[error("the call carrying this result was dropped")]
    Dropped,
}

impl From<StoreError> for RecordError {
    fn from(e: StoreError) -> Self {
        Self::Call(e.to_string())
    }
}

struct Waiting {
    attempt: EndpointAttempt,
    policy: ProbationPolicy,
    reply: oneshot::Sender<Result<ProbationChange, RecordError>>,
}

/// The results gathering per endpoint; an endpoint is in the map while a call of its is
/// in flight.
#[derive(Clone)]
pub struct EndpointRecords {
    store: Store,
    gathering: Arc<Mutex<HashMap<EndpointId, Vec<Waiting>>>>,
}

impl EndpointRecords {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            gathering: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<EndpointId, Vec<Waiting>>> {
        // A panic elsewhere while holding it leaves the map usable.
        self.gathering.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records `attempt` in `endpoint`'s probation record: alone when no call of that
    /// endpoint is in flight, else with the results gathering for the next one. The
    /// calls are made by a task, so a caller that stops waiting strands no one.
    pub async fn record(
        &self,
        endpoint: &EndpointId,
        attempt: &EndpointAttempt,
        policy: &ProbationPolicy,
    ) -> Result<ProbationChange, RecordError> {
        let (reply, answer) = oneshot::channel();
        let waiting = Waiting {
            attempt: *attempt,
            policy: policy.clone(),
            reply,
        };
        let lead = {
            let mut gathering = self.lock();
            match gathering.get_mut(endpoint) {
                Some(gathered) => {
                    gathered.push(waiting);
                    None
                }
                None => {
                    gathering.insert(endpoint.clone(), Vec::new());
                    Some(waiting)
                }
            }
        };
        if let Some(first) = lead {
            let records = self.clone();
            let endpoint = endpoint.clone();
            tokio::spawn(async move { records.send_gathered(&endpoint, vec![first]).await });
        }
        answer.await.unwrap_or(Err(RecordError::Dropped))
    }

    /// What gathered for `endpoint` since the last call, or `None` (and the endpoint is
    /// quiet again) when nothing did.
    fn take_or_finish(&self, endpoint: &EndpointId) -> Option<Vec<Waiting>> {
        let mut gathering = self.lock();
        match gathering.get_mut(endpoint) {
            Some(waiting) if !waiting.is_empty() => Some(std::mem::take(waiting)),
            _ => {
                gathering.remove(endpoint);
                None
            }
        }
    }

    /// Sends gathered results, a call per run of one policy (a sender has one), until
    /// none gathered behind them.
    async fn send_gathered(&self, endpoint: &EndpointId, mut next: Vec<Waiting>) {
        let _unstuck = Unstuck {
            records: self,
            endpoint,
        };
        loop {
            while !next.is_empty() {
                let same = next.iter().take_while(|w| w.policy == next[0].policy).count();
                let run: Vec<Waiting> = next.drain(..same).collect();
                let attempts: Vec<EndpointAttempt> = run.iter().map(|w| w.attempt).collect();
                match self
                    .store
                    .record_endpoint_results(endpoint, &attempts, &run[0].policy)
                    .await
                {
                    // One change per result (the store checks): a result left without one
                    // is answered `Dropped` by its closed channel.
                    Ok(changes) => {
                        for (waiting, change) in run.into_iter().zip(changes) {
                            let _ = waiting.reply.send(Ok(change));
                        }
                    }
                    Err(e) => {
                        let e = RecordError::from(e);
                        for waiting in run {
                            let _ = waiting.reply.send(Err(e.clone()));
                        }
                    }
                }
            }
            match self.take_or_finish(endpoint) {
                Some(more) => next = more,
                None => return,
            }
        }
    }
}

/// Should sending panic, forgets the endpoint's gathering (its waiters are answered
/// `Dropped`), so results that come later are not left waiting for a call that never
/// comes.
struct Unstuck<'a> {
    records: &'a EndpointRecords,
    endpoint: &'a EndpointId,
}

impl Drop for Unstuck<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.records.lock().remove(self.endpoint);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::test_redis::script_calls;
    use eg_core::UnixMillis;
    use eg_core::destination::{Target, WebHook};
    use eg_core::outcome::OutcomeName;
    use eg_store::RedisSettings;
    use eg_testkit::RedisServer;

    fn failure(at: i64) -> EndpointAttempt {
        EndpointAttempt {
            outcome: OutcomeName::Busy,
            started_at: UnixMillis(at),
            finished_at: UnixMillis(at),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn results_of_one_endpoint_finishing_together_are_recorded_in_few_calls() {
        let server = RedisServer::start();
        let store = Store::connect(&RedisSettings::for_url(server.url())).unwrap();
        let records = EndpointRecords::new(store.clone());
        let endpoint = Target::WebHook(WebHook {
            url: "https://busy.example/hook".into(),
            ..Default::default()
        })
        .endpoint_id();
        let other = Target::WebHook(WebHook {
            url: "https://quiet.example/hook".into(),
            ..Default::default()
        })
        .endpoint_id();
        // A threshold no run reaches: every failure is answered with its count.
        let policy = ProbationPolicy::parse(1_000, "*=10s", 2, std::time::Duration::from_secs(60)).unwrap();
        let before = script_calls(&server);

        let recorded = (0..200).map(|i| {
            let (records, endpoint, policy) = (records.clone(), endpoint.clone(), policy.clone());
            tokio::spawn(async move { records.record(&endpoint, &failure(1_000 + i), &policy).await })
        });
        let mut counts = Vec::new();
        for record in recorded.collect::<Vec<_>>() {
            match record.await.unwrap().unwrap() {
                ProbationChange::Failed { consecutive_failures } => counts.push(consecutive_failures),
                change => panic!("unexpected {change:?}"),
            }
        }
        let calls = script_calls(&server) - before;
        counts.sort_unstable();
        assert_eq!(
            counts,
            (1..=200).collect::<Vec<u32>>(),
            "each counted once, in some order"
        );
        assert!(calls < 50, "200 concurrent results took {calls} script calls");
        let stored = store.probation_record(&endpoint).await.unwrap().unwrap();
        assert_eq!(stored.consecutive_failures, 200);

        // Another endpoint is its own record, and a quiet endpoint's result goes at once.
        let change = records.record(&other, &failure(5_000), &policy).await.unwrap();
        assert_eq!(
            change,
            ProbationChange::Failed {
                consecutive_failures: 1
            }
        );
        // The task answers before it looks for more, so the map empties a moment later.
        eg_testkit::eventually(std::time::Duration::from_secs(5), "nothing left gathering", || async {
            records.lock().is_empty().then_some(())
        })
        .await;
    }
}
