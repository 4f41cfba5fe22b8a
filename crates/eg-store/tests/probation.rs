//! Per-endpoint health and probation against a real Redis: the gate and record scripts,
//! the probe lease under concurrency, key expiry, reads, and the scripts checked step by
//! step against eg-core's pure state machine. Times are passed in, so nothing sleeps.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_core::probation::{
    self, EndpointAttempt, EndpointId, Gate, ProbationChange, ProbationPolicy, ProbationRecord, ProbationState,
};
use eg_core::{OutcomeName, UnixMillis};
use eg_store::Store;
use eg_store::probation::ENDPOINT_KEY_TTL;
use std::time::Duration;

const T0: i64 = 1_700_000_000_000;
const SEC: i64 = 1000;
const LEASE: Duration = Duration::from_secs(30);
const URL: &str = "https://hooks.example.com/orders?code=s3cr3t-token";

fn at(ms: i64) -> UnixMillis {
    UnixMillis(T0 + ms)
}

fn attempt(outcome: OutcomeName, started: i64, finished: i64) -> EndpointAttempt {
    EndpointAttempt {
        outcome,
        started_at: at(started),
        finished_at: at(finished),
    }
}

fn key(id: &EndpointId) -> String {
    format!("{{eg:endpoint:{id}}}")
}

/// Default policy, except probation starts after 3 failures.
fn policy() -> ProbationPolicy {
    ProbationPolicy::parse(3, "", 2, Duration::from_secs(3600)).unwrap()
}

/// Fails `n` attempts at `t` with `outcome`, returning the last change.
async fn fail(
    store: &Store,
    id: &EndpointId,
    policy: &ProbationPolicy,
    outcome: OutcomeName,
    n: u32,
    t: i64,
) -> ProbationChange {
    let mut last = ProbationChange::Ignored;
    for _ in 0..n {
        last = store
            .record_endpoint_result(id, &attempt(outcome, t, t), policy)
            .await
            .unwrap();
    }
    last
}

async fn gate(store: &Store, id: &EndpointId, t: i64) -> Gate {
    store.endpoint_gate(id, at(t), LEASE).await.unwrap()
}

#[tokio::test]
async fn reaching_the_threshold_puts_the_endpoint_on_probation_and_every_gate_waits() {
    let h = Harness::start().await;
    let id = webhook_endpoint(URL);
    let policy = policy();

    assert_eq!(gate(&h.store, &id, 0).await, Gate::Open, "no record: healthy");
    for n in 1..3 {
        let change = fail(&h.store, &id, &policy, OutcomeName::Busy, 1, 0).await;
        assert_eq!(
            change,
            ProbationChange::Failed {
                consecutive_failures: n
            }
        );
        assert_eq!(gate(&h.store, &id, 0).await, Gate::Open, "below the threshold");
    }
    let change = fail(&h.store, &id, &policy, OutcomeName::NotFound, 1, SEC).await;
    let until = at(SEC + 300 * SEC);
    assert_eq!(
        change,
        ProbationChange::ProbationStarted {
            level: 1,
            until,
            length: Duration::from_secs(300),
            consecutive_failures: 3
        }
    );

    for t in [SEC, 2 * SEC, 100 * SEC, 301 * SEC - 1] {
        assert_eq!(gate(&h.store, &id, t).await, Gate::Wait(until), "at +{t} ms");
    }
    let health = h.store.probation_record(&id).await.unwrap().unwrap();
    assert_eq!(
        health,
        ProbationRecord {
            consecutive_failures: 3,
            level: 1,
            probation_until: Some(until),
            probe_lease_until: None,
            last_failure: Some(OutcomeName::NotFound),
            last_failure_at: Some(at(SEC)),
        }
    );
    assert_eq!(health.state(at(2 * SEC)), ProbationState::Probation { until });
    assert_eq!(health.state(until), ProbationState::Probing);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn when_probation_ends_exactly_one_of_many_concurrent_callers_probes() {
    let h = Harness::start().await;
    let id = webhook_endpoint(URL);
    fail(&h.store, &id, &policy(), OutcomeName::Busy, 3, 0).await;
    let until = 10 * SEC;

    let mut callers = tokio::task::JoinSet::new();
    for i in 0..32 {
        let (store, id) = (h.store.clone(), id.clone());
        // Callers' clocks differ slightly; all are past the end of probation.
        callers.spawn(async move { store.endpoint_gate(&id, at(until + i), LEASE).await.unwrap() });
    }
    let gates = callers.join_all().await;
    let probes = gates.iter().filter(|g| **g == Gate::Probe).count();
    assert_eq!(probes, 1, "{gates:?}");
    let health = h.store.probation_record(&id).await.unwrap().unwrap();
    let lease_until = health.probe_lease_until.unwrap();
    assert!(lease_until >= at(until).plus(LEASE) && lease_until <= at(until + 31).plus(LEASE));
    for g in gates.iter().filter(|g| **g != Gate::Probe) {
        assert_eq!(*g, Gate::Wait(lease_until), "the others wait for the probe");
    }
    assert_eq!(health.state(at(until + 100)), ProbationState::Probing);

    // The prober vanished without a result: once its lease ends, the next caller probes.
    assert_eq!(
        gate(&h.store, &id, lease_until.0 - T0 - 1).await,
        Gate::Wait(lease_until)
    );
    assert_eq!(gate(&h.store, &id, lease_until.0 - T0).await, Gate::Probe);
}

#[tokio::test]
async fn a_failed_probe_starts_a_longer_probation_up_to_the_maximum() {
    let h = Harness::start().await;
    let id = webhook_endpoint(URL);
    let policy = policy();
    fail(&h.store, &id, &policy, OutcomeName::TimedOut, 3, 0).await;

    let mut until = 10 * SEC;
    for (level, secs) in [
        (2, 20),
        (3, 40),
        (4, 80),
        (5, 160),
        (6, 320),
        (7, 640),
        (8, 1280),
        (9, 2560),
        (10, 3600),
        (11, 3600),
    ] {
        assert_eq!(gate(&h.store, &id, until - 1).await, Gate::Wait(at(until)));
        let t = until;
        assert_eq!(gate(&h.store, &id, t).await, Gate::Probe);
        let change = h
            .store
            .record_endpoint_result(&id, &attempt(OutcomeName::TimedOut, t, t + 30 * SEC), &policy)
            .await
            .unwrap();
        until = t + 30 * SEC + secs * SEC;
        assert_eq!(
            change,
            ProbationChange::ProbationStarted {
                level,
                until: at(until),
                length: Duration::from_secs(secs as u64),
                consecutive_failures: level + 2
            }
        );
        let health = h.store.probation_record(&id).await.unwrap().unwrap();
        assert_eq!(health.probe_lease_until, None, "the lease ends with the probe");
        assert_eq!(health.level, level);
    }
}

#[tokio::test]
async fn failures_of_attempts_in_flight_when_probation_began_do_not_deepen_it() {
    let h = Harness::start().await;
    let id = webhook_endpoint(URL);
    let policy = policy();
    fail(&h.store, &id, &policy, OutcomeName::Busy, 3, 0).await;
    // Ten concurrent attempts started at 0 time out at 30 s: during probation and after.
    for finished in [5 * SEC, 30 * SEC] {
        let change = h
            .store
            .record_endpoint_result(&id, &attempt(OutcomeName::TimedOut, 0, finished), &policy)
            .await
            .unwrap();
        assert!(
            matches!(change, ProbationChange::FailedOnProbation { until, .. } if until == at(10 * SEC)),
            "{change:?}"
        );
    }
    let health = h.store.probation_record(&id).await.unwrap().unwrap();
    assert_eq!((health.level, health.consecutive_failures), (1, 5));
    assert_eq!(health.probation_until, Some(at(10 * SEC)));
    assert_eq!(
        gate(&h.store, &id, 30 * SEC).await,
        Gate::Probe,
        "still one probe, no deeper probation"
    );
}

#[tokio::test]
async fn a_success_opens_the_gate_and_removes_the_key() {
    let h = Harness::start().await;
    let id = webhook_endpoint(URL);
    let policy = policy();
    let mut redis = h.redis();
    fail(&h.store, &id, &policy, OutcomeName::Busy, 3, 0).await;
    assert_eq!(gate(&h.store, &id, 10 * SEC).await, Gate::Probe);

    let change = h
        .store
        .record_endpoint_result(&id, &attempt(OutcomeName::Succeeded, 10 * SEC, 11 * SEC), &policy)
        .await
        .unwrap();
    assert_eq!(change, ProbationChange::Succeeded { ended_probation: true });
    assert!(!exists(&mut redis, &key(&id)));
    assert_eq!(h.store.probation_record(&id).await.unwrap(), None);
    assert_eq!(gate(&h.store, &id, 11 * SEC).await, Gate::Open);

    // Below the threshold a success resets the count too.
    fail(&h.store, &id, &policy, OutcomeName::Busy, 2, 12 * SEC).await;
    let change = h
        .store
        .record_endpoint_result(&id, &attempt(OutcomeName::Succeeded, 13 * SEC, 13 * SEC), &policy)
        .await
        .unwrap();
    assert_eq!(change, ProbationChange::Succeeded { ended_probation: false });
    assert_eq!(
        fail(&h.store, &id, &policy, OutcomeName::Busy, 1, 14 * SEC).await,
        ProbationChange::Failed {
            consecutive_failures: 1
        }
    );
}

#[tokio::test]
async fn outcomes_that_say_nothing_about_the_endpoint_are_not_recorded() {
    let h = Harness::start().await;
    let id = webhook_endpoint(URL);
    let mut redis = h.redis();
    for outcome in [OutcomeName::Aborted, OutcomeName::Canceled, OutcomeName::Probation] {
        let change = h
            .store
            .record_endpoint_result(&id, &attempt(outcome, 0, 0), &policy())
            .await
            .unwrap();
        assert_eq!(change, ProbationChange::Ignored);
    }
    assert!(!exists(&mut redis, &key(&id)));
}

#[tokio::test]
async fn endpoint_keys_expire_and_every_write_refreshes_the_expiry() {
    let h = Harness::start().await;
    let id = webhook_endpoint(URL);
    let mut redis = h.redis();
    let ttl = i64::try_from(ENDPOINT_KEY_TTL.as_millis()).unwrap();
    let pttl = |redis: &mut redis::Connection| query::<i64>(redis, &["PTTL", &key(&id)]);

    fail(&h.store, &id, &policy(), OutcomeName::Busy, 1, 0).await;
    let first = pttl(&mut redis);
    assert!(first > ttl - 60_000 && first <= ttl, "PTTL {first}");

    query::<()>(&mut redis, &["PEXPIRE", &key(&id), "5000"]);
    fail(&h.store, &id, &policy(), OutcomeName::Busy, 2, 0).await;
    assert!(pttl(&mut redis) > ttl - 60_000, "a failure refreshes the expiry");

    query::<()>(&mut redis, &["PEXPIRE", &key(&id), "5000"]);
    assert_eq!(gate(&h.store, &id, 5 * SEC).await, Gate::Wait(at(10 * SEC)));
    assert!(pttl(&mut redis) <= 5000, "a waiting gate writes nothing");
    assert_eq!(gate(&h.store, &id, 10 * SEC).await, Gate::Probe);
    assert!(
        pttl(&mut redis) > ttl - 60_000,
        "taking the probe lease refreshes the expiry"
    );
}

#[tokio::test]
async fn keys_and_stored_health_never_show_the_url() {
    let h = Harness::start().await;
    let id = webhook_endpoint(URL);
    fail(&h.store, &id, &policy(), OutcomeName::Unauthorized, 3, 0).await;
    gate(&h.store, &id, 300 * SEC).await;

    assert_eq!(id.as_str().len(), 32);
    assert!(id.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
    let mut redis = h.redis();
    let keys: Vec<String> = query(&mut redis, &["KEYS", "*endpoint*"]);
    assert_eq!(keys, [key(&id)]);
    let fields: Vec<String> = query(&mut redis, &["HGETALL", &key(&id)]);
    assert!(!fields.is_empty());
    for text in keys.iter().chain(&fields) {
        for secret in ["hooks", "example.com", "orders", "s3cr3t", "code="] {
            assert!(!text.contains(secret), "{text:?} shows {secret:?}");
        }
    }
}

#[tokio::test]
async fn many_endpoints_are_read_in_one_call_each_with_its_own_health() {
    let h = Harness::start().await;
    let sick = webhook_endpoint("https://a.example.com/hook");
    let failing = webhook_endpoint("https://b.example.com/hook");
    let unknown = webhook_endpoint("https://c.example.com/hook");
    let policy = policy();
    fail(&h.store, &sick, &policy, OutcomeName::SocketError, 3, 0).await;
    fail(&h.store, &failing, &policy, OutcomeName::Busy, 1, 0).await;

    assert_eq!(
        gate(&h.store, &failing, SEC).await,
        Gate::Open,
        "one endpoint's probation is its own"
    );
    let healths = h
        .store
        .probation_records(&[unknown.clone(), sick.clone(), failing.clone()])
        .await
        .unwrap();
    let states: Vec<ProbationState> = healths
        .iter()
        .map(|health| probation::state_of(health.as_ref(), at(SEC)))
        .collect();
    assert_eq!(
        states,
        [
            ProbationState::Healthy,
            ProbationState::Probation { until: at(30 * SEC) },
            ProbationState::Healthy
        ]
    );
    assert_eq!(healths[2].as_ref().unwrap().consecutive_failures, 1);
    assert_eq!(
        h.store.probation_records(&[]).await.unwrap(),
        Vec::<Option<ProbationRecord>>::new()
    );
}

/// A small deterministic generator (no rand dependency in this crate's tests).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// Random sequences of gate calls and results, on a few endpoints, with short lengths so
/// every state is visited often: after each step the scripts' answer and the stored
/// health must equal eg-core's pure machine.
#[tokio::test]
async fn the_scripts_run_the_same_machine_as_eg_core() {
    let h = Harness::start().await;
    let policy = ProbationPolicy::parse(3, "Busy=100ms,NotFound=400ms,*=250ms", 2, Duration::from_secs(1)).unwrap();
    let lease = Duration::from_millis(300);
    let outcomes = [
        OutcomeName::Succeeded,
        OutcomeName::Busy,
        OutcomeName::Busy,
        OutcomeName::NotFound,
        OutcomeName::TimedOut,
        OutcomeName::GenericError,
        OutcomeName::Aborted,
    ];
    let ids: Vec<EndpointId> = (0..3)
        .map(|i| webhook_endpoint(&format!("https://e{i}.example/")))
        .collect();
    let mut models: Vec<Option<ProbationRecord>> = vec![None; ids.len()];
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut now = T0;
    let (mut probes, mut probations, mut stale) = (0, 0, 0);
    for step in 0..3000 {
        now += rng.next(120) as i64;
        let e = rng.next(ids.len() as u64) as usize;
        if rng.next(2) == 0 {
            let expected = probation::gate(&mut models[e], UnixMillis(now), lease);
            let got = h.store.endpoint_gate(&ids[e], UnixMillis(now), lease).await.unwrap();
            assert_eq!(got, expected, "step {step}: gate");
            probes += usize::from(got == Gate::Probe);
        } else {
            let outcome = outcomes[rng.next(outcomes.len() as u64) as usize];
            let report = EndpointAttempt {
                outcome,
                started_at: UnixMillis(now - rng.next(600) as i64),
                finished_at: UnixMillis(now),
            };
            let expected = policy.record(&mut models[e], &report);
            let got = h.store.record_endpoint_result(&ids[e], &report, &policy).await.unwrap();
            assert_eq!(got, expected, "step {step}: record {report:?}");
            probations += usize::from(matches!(got, ProbationChange::ProbationStarted { level: 2.., .. }));
            stale += usize::from(matches!(got, ProbationChange::FailedOnProbation { .. }));
        }
        let stored = h.store.probation_record(&ids[e]).await.unwrap();
        assert_eq!(stored, models[e], "step {step}: stored health");
    }
    assert!(
        probes > 20 && probations > 20 && stale > 20,
        "{probes} probes, {probations} longer probations, {stale} stale failures"
    );
}

/// The probation identity of the webhook at `url`.
fn webhook_endpoint(url: &str) -> eg_core::probation::EndpointId {
    eg_core::destination::Target::WebHook(eg_core::destination::WebHook {
        url: url.to_owned(),
        ..Default::default()
    })
    .endpoint_id()
}

/// Results recorded together in one call change the record exactly as recorded one by
/// one: random runs of results (ignored ones among them), each run one call, against
/// eg-core's machine applied to each in turn.
#[tokio::test]
async fn results_recorded_together_run_the_machine_one_by_one() {
    let h = Harness::start().await;
    let policy = ProbationPolicy::parse(3, "Busy=100ms,*=250ms", 2, Duration::from_secs(1)).unwrap();
    let outcomes = [
        OutcomeName::Succeeded,
        OutcomeName::Busy,
        OutcomeName::TimedOut,
        OutcomeName::TimedOut,
        OutcomeName::GenericError,
        OutcomeName::Aborted,
    ];
    let id = webhook_endpoint("https://together.example/");
    let mut model: Option<ProbationRecord> = None;
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let mut now = T0;
    let (mut probations, mut stale) = (0, 0);
    for call in 0..400 {
        let mut reports = Vec::new();
        for _ in 0..=rng.next(6) {
            now += rng.next(150) as i64;
            reports.push(EndpointAttempt {
                outcome: outcomes[rng.next(outcomes.len() as u64) as usize],
                started_at: UnixMillis(now - rng.next(600) as i64),
                finished_at: UnixMillis(now),
            });
        }
        let expected: Vec<ProbationChange> = reports.iter().map(|r| policy.record(&mut model, r)).collect();
        let got = h.store.record_endpoint_results(&id, &reports, &policy).await.unwrap();
        assert_eq!(got, expected, "call {call}: {reports:?}");
        probations += got
            .iter()
            .filter(|c| matches!(c, ProbationChange::ProbationStarted { .. }))
            .count();
        stale += got
            .iter()
            .filter(|c| matches!(c, ProbationChange::FailedOnProbation { .. }))
            .count();
        assert_eq!(
            h.store.probation_record(&id).await.unwrap(),
            model,
            "call {call}: stored"
        );
    }
    assert!(
        probations > 20 && stale > 20,
        "{probations} probations, {stale} stale failures"
    );
}
