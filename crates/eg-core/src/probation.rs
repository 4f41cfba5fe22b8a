//! Per-endpoint probation (behaviour.md#protecting-endpoints-and-the-system, "delayed
//! delivery"): when an endpoint keeps failing, deliveries to it wait instead of hammering
//! it, for a time that depends on how it failed and grows while it keeps failing; one
//! success ends it.
//!
//! This module is the policy, pure: who an endpoint is ([`EndpointId`]), which outcomes
//! say something about the endpoint, how long each probation lasts ([`ProbationPolicy::ladder`]),
//! and the state machine itself ([`gate`], [`ProbationPolicy::record`]) over an
//! [`ProbationRecord`], with time passed in. eg-store keeps the same state in one Redis hash
//! per endpoint and runs the same machine in two Lua scripts, so every sender agrees;
//! its tests check the scripts against the functions here.
//!
//! The machine:
//! - **Clear** (shown as `Healthy`): attempts go ahead (`Gate::Open`); each failure counts, a success resets.
//! - **Probation** (after `failure_threshold` consecutive failures): no attempt is made
//!   until it ends (`Gate::Wait(until)`); a waiting delivery is not charged an attempt.
//! - **Probing** (probation over, no success seen yet): one caller at a time gets
//!   `Gate::Probe` and a lease for one attempt; the others wait for the lease to end. A
//!   failed probe starts the next, longer probation; a success clears the record.
//!
//! Failures of attempts that started before the current probation ended (in flight when
//! it began) are counted but change nothing: ten concurrent timeouts put an endpoint on
//! probation once, not ten levels deep.

use crate::outcome::OutcomeName;
use crate::time::UnixMillis;
use sha2::{Digest, Sha256};
use std::fmt;
use std::time::Duration;

/// An endpoint's identity for probation: the first 16 bytes of the SHA-256 of a webhook's
/// URL or another destination's identity (`rabbitmq://main/events`), in hex. Made only
/// by `Target::endpoint_id`, so it always means one kind of thing. The URL is normalised
/// first (host case, default port), so subscriptions to the same endpoint share one
/// probation record. The id reveals nothing of the URL, whose query string may carry a
/// secret, so it is safe in Redis keys, logs and metric labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId(String);

impl EndpointId {
    pub(crate) fn of(identity: &str) -> Self {
        let normalised = url::Url::parse(identity);
        let text = match &normalised {
            Ok(url) => url.as_str(),
            Err(_) => identity,
        };
        Self(hex(&Sha256::digest(text.as_bytes())[..16]))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `bytes` in lower-case hex, built in one allocation (the ids of endpoints and of
/// subscriptions' limits are computed for every attempt).
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

impl fmt::Display for EndpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What an attempt's outcome says about its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The endpoint answered with success: the record resets.
    Success,
    /// The endpoint failed: counts toward (or lengthens) probation.
    Failure,
    /// Nothing about the endpoint: `Probation` (no attempt was made), `Aborted` (the
    /// sender vanished), `Canceled` (the sender gave up, e.g. at shutdown).
    Ignored,
}

impl Signal {
    pub fn of(outcome: OutcomeName) -> Self {
        match outcome {
            OutcomeName::Succeeded => Self::Success,
            // A refused address says nothing about the endpoint: nothing was sent.
            // Nor does a missing token: the identity provider failed, not the endpoint.
            OutcomeName::Probation
            | OutcomeName::Aborted
            | OutcomeName::Canceled
            | OutcomeName::AddressNotAllowed
            | OutcomeName::TokenUnavailable => Self::Ignored,
            _ => Self::Failure,
        }
    }
}

/// One finished attempt, as reported for its endpoint's probation record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointAttempt {
    pub outcome: OutcomeName,
    /// When the attempt began: at or after the `now` its gate call was given.
    pub started_at: UnixMillis,
    /// When its outcome was known.
    pub finished_at: UnixMillis,
}

/// What a sender may do before an attempt to an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Attempt as usual.
    Open,
    /// Attempt: this caller holds the probe lease (probation is over, no success seen yet).
    /// Report the result with `record`; a crashed prober's lease simply runs out.
    Probe,
    /// Do not attempt before this time (the delivery is not charged an attempt).
    Wait(UnixMillis),
}

/// An endpoint's probation record as stored (one Redis hash). No record means clear: not on probation, no failure counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbationRecord {
    /// Failures since the last success (every failure, including ones during probation).
    pub consecutive_failures: u32,
    /// Probations since the last success: the step of the ladder the last one used.
    pub level: u32,
    /// End of the current or last probation; stays set until a success.
    pub probation_until: Option<UnixMillis>,
    /// While probing: until when the current prober holds its lease.
    pub probe_lease_until: Option<UnixMillis>,
    pub last_failure: Option<OutcomeName>,
    pub last_failure_at: Option<UnixMillis>,
}

/// An endpoint's probation state for display (management API `deliveryHealth`, metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbationState {
    /// Off probation: attempts go ahead (there may be failures below the threshold).
    /// `Healthy` is the management API's name for it.
    Healthy,
    /// No attempts before `until`.
    Probation { until: UnixMillis },
    /// Probation is over; waiting for one probe to succeed.
    Probing,
}

impl ProbationState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "Healthy",
            Self::Probation { .. } => "Probation",
            Self::Probing => "Probing",
        }
    }
}

impl ProbationRecord {
    pub fn state(&self, now: UnixMillis) -> ProbationState {
        match self.probation_until {
            None => ProbationState::Healthy,
            Some(until) if until > now => ProbationState::Probation { until },
            Some(_) => ProbationState::Probing,
        }
    }
}

/// The state of an endpoint that has no probation record.
pub fn state_of(record: Option<&ProbationRecord>, now: UnixMillis) -> ProbationState {
    record.map_or(ProbationState::Healthy, |h| h.state(now))
}

/// What recording one attempt changed, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbationChange {
    /// The outcome says nothing about the endpoint ([`Signal::Ignored`]); nothing recorded.
    Ignored,
    /// A success: the record is gone. `ended_probation` when the endpoint had been on
    /// probation or probing (it has recovered).
    Succeeded { ended_probation: bool },
    /// A failure below the threshold.
    Failed { consecutive_failures: u32 },
    /// A failure put the endpoint on probation (`level` 1) or a failed probe lengthened
    /// it (`level` > 1): no attempts for `length`, until `until`.
    ProbationStarted {
        level: u32,
        until: UnixMillis,
        length: Duration,
        consecutive_failures: u32,
    },
    /// A failure of an attempt that started before the current probation ended: counted,
    /// nothing else changes.
    FailedOnProbation {
        until: UnixMillis,
        consecutive_failures: u32,
    },
}

/// The gate, as a pure function of the stored probation record (the gate script does the same):
/// `Open` when not on probation, `Wait(until)` during it, and once it is over one `Probe`
/// at a time: a caller finding no live lease takes one until `now + probe_lease`, the
/// others `Wait` for it to end.
pub fn gate(record: &mut Option<ProbationRecord>, now: UnixMillis, probe_lease: Duration) -> Gate {
    let Some(h) = record else {
        return Gate::Open;
    };
    match h.probation_until {
        None => Gate::Open,
        Some(until) if until > now => Gate::Wait(until),
        Some(_) => match h.probe_lease_until {
            Some(lease) if lease > now => Gate::Wait(lease),
            _ => {
                h.probe_lease_until = Some(now.plus(probe_lease));
                Gate::Probe
            }
        },
    }
}

/// Probation lengths grow by the growth factor from the outcome's base to the maximum;
/// a ladder never has more steps than this.
pub(crate) const MAX_LADDER_STEPS: usize = 32;

/// How endpoints are put on probation (behaviour.md#protecting-endpoints-and-the-system).
/// The base lengths per outcome are data, so a deployment can change them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbationPolicy {
    failure_threshold: u32,
    bases: Vec<(OutcomeName, Duration)>,
    other_base: Duration,
    growth: u32,
    max: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting} {input:?}: {problem}")]
pub struct ProbationPolicyError {
    setting: &'static str,
    input: String,
    problem: String,
}

impl Default for ProbationPolicy {
    /// 10 consecutive failures; Busy, Full (a queue at its limit) and TimedOut 10 s,
    /// SocketError 30 s, NotFound, ResolutionError, Unauthorized, Forbidden and Disabled
    /// 5 min, any other failure 10 s; each
    /// further probation twice as long, at most 1 h.
    fn default() -> Self {
        let secs = Duration::from_secs;
        Self {
            failure_threshold: 10,
            bases: vec![
                (OutcomeName::Busy, secs(10)),
                (OutcomeName::Full, secs(10)),
                (OutcomeName::TimedOut, secs(10)),
                (OutcomeName::SocketError, secs(30)),
                (OutcomeName::NotFound, secs(300)),
                (OutcomeName::ResolutionError, secs(300)),
                (OutcomeName::Unauthorized, secs(300)),
                (OutcomeName::Forbidden, secs(300)),
                (OutcomeName::Disabled, secs(300)),
            ],
            other_base: secs(10),
            growth: 2,
            max: secs(3600),
        }
    }
}

impl ProbationPolicy {
    /// Builds a policy from its settings. `bases` changes the default base lengths, e.g.
    /// `NotFound=1m,Busy=5s,*=20s` (`*` = any other failure); empty keeps the defaults.
    /// `failure_threshold` and `growth` are at least 1, every length more than zero.
    pub fn parse(
        failure_threshold: u32,
        bases: &str,
        growth: u32,
        max: Duration,
    ) -> Result<Self, ProbationPolicyError> {
        let err = |setting, input: &str, problem: &str| ProbationPolicyError {
            setting,
            input: input.to_owned(),
            problem: problem.to_owned(),
        };
        if failure_threshold == 0 {
            return Err(err("failure_threshold", "0", "must be at least 1"));
        }
        if growth == 0 {
            return Err(err("growth", "0", "must be at least 1 (1 = lengths do not grow)"));
        }
        if max.is_zero() {
            return Err(err("max", "0s", "must be more than zero"));
        }
        let mut policy = Self {
            failure_threshold,
            growth,
            max,
            ..Self::default()
        };
        for rule in bases.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, length) = rule
                .split_once('=')
                .ok_or_else(|| err("bases", rule, "expected OUTCOME=DURATION"))?;
            let length = humantime::parse_duration(length.trim()).map_err(|e| err("bases", rule, &e.to_string()))?;
            if length.is_zero() {
                return Err(err("bases", rule, "a probation must last more than zero"));
            }
            match name.trim() {
                "*" => policy.other_base = length,
                name => {
                    let outcome = parse_outcome(name)
                        .filter(|o| Signal::of(*o) == Signal::Failure)
                        .ok_or_else(|| err("bases", rule, "not the name of a failure outcome"))?;
                    policy.bases.retain(|(o, _)| *o != outcome);
                    policy.bases.push((outcome, length));
                }
            }
        }
        Ok(policy)
    }

    /// Consecutive failures that put an endpoint with a clear record on probation.
    pub fn failure_threshold(&self) -> u32 {
        self.failure_threshold
    }

    /// The longest probation.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The first probation's length after this outcome (before the maximum applies).
    pub fn base(&self, outcome: OutcomeName) -> Duration {
        self.bases
            .iter()
            .find(|(o, _)| *o == outcome)
            .map_or(self.other_base, |(_, d)| *d)
    }

    /// The lengths of successive probations after this outcome: the base, then each step
    /// `growth` times the one before, up to the maximum, which is the last step (it
    /// repeats). Strictly increasing, never empty, at most [`MAX_LADDER_STEPS`] long.
    pub fn ladder(&self, outcome: OutcomeName) -> Vec<Duration> {
        let mut step = self.base(outcome).min(self.max);
        let mut ladder = vec![step];
        while ladder.len() < MAX_LADDER_STEPS {
            let next = step.saturating_mul(self.growth).min(self.max);
            if next <= step {
                break;
            }
            ladder.push(next);
            step = next;
        }
        ladder
    }

    /// The length of the `level`-th probation (1-based) after this outcome.
    pub(crate) fn probation_length(&self, outcome: OutcomeName, level: u32) -> Duration {
        let ladder = self.ladder(outcome);
        let index = usize::try_from(level.saturating_sub(1)).unwrap_or(usize::MAX);
        ladder[index.min(ladder.len() - 1)]
    }

    /// Records one finished attempt in an endpoint's probation record, as a pure function (the
    /// record script does the same). `None` is an endpoint with no record.
    ///
    /// - success: the record goes (the record resets, probation ends);
    /// - failure: counted; if the endpoint is not on probation and the count reaches the
    ///   threshold, or the attempt started after the last probation ended (a probe),
    ///   probation starts at the next level: `finished_at` + the ladder's step for this
    ///   outcome, and any probe lease ends. A failure of an attempt that started before
    ///   the probation ended changes nothing else.
    pub fn record(&self, record: &mut Option<ProbationRecord>, attempt: &EndpointAttempt) -> ProbationChange {
        match Signal::of(attempt.outcome) {
            Signal::Ignored => ProbationChange::Ignored,
            Signal::Success => ProbationChange::Succeeded {
                ended_probation: record.take().is_some_and(|h| h.probation_until.is_some()),
            },
            Signal::Failure => {
                let h = record.get_or_insert_with(ProbationRecord::default);
                h.consecutive_failures = h.consecutive_failures.saturating_add(1);
                h.last_failure = Some(attempt.outcome);
                h.last_failure_at = Some(attempt.finished_at);
                match h.probation_until {
                    Some(until) if attempt.started_at < until => {
                        return ProbationChange::FailedOnProbation {
                            until,
                            consecutive_failures: h.consecutive_failures,
                        };
                    }
                    None if h.consecutive_failures < self.failure_threshold => {
                        return ProbationChange::Failed {
                            consecutive_failures: h.consecutive_failures,
                        };
                    }
                    _ => {}
                }
                h.level = h.level.saturating_add(1);
                let length = self.probation_length(attempt.outcome, h.level);
                let until = attempt.finished_at.plus(length);
                h.probation_until = Some(until);
                h.probe_lease_until = None;
                ProbationChange::ProbationStarted {
                    level: h.level,
                    until,
                    length,
                    consecutive_failures: h.consecutive_failures,
                }
            }
        }
    }
}

/// An outcome by its `lastDeliveryOutcome` name.
pub fn parse_outcome(name: &str) -> Option<OutcomeName> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    const SEC: i64 = 1000;

    fn failure(outcome: OutcomeName, started: i64, finished: i64) -> EndpointAttempt {
        EndpointAttempt {
            outcome,
            started_at: UnixMillis(started),
            finished_at: UnixMillis(finished),
        }
    }

    fn fail_at(t: i64) -> EndpointAttempt {
        failure(OutcomeName::Busy, t, t)
    }

    fn success_at(t: i64) -> EndpointAttempt {
        failure(OutcomeName::Succeeded, t, t)
    }

    /// An endpoint put on probation by `threshold` Busy failures at t = 0.
    fn on_probation(policy: &ProbationPolicy) -> Option<ProbationRecord> {
        let mut h = None;
        for _ in 0..policy.failure_threshold() {
            policy.record(&mut h, &fail_at(0));
        }
        h
    }

    #[test]
    fn endpoint_ids_are_hex_and_hide_the_url() {
        let url = "https://hooks.example.com/in?code=s3cret";
        let id = EndpointId::of(url);
        assert_eq!(id.as_str().len(), 32);
        assert!(
            id.as_str()
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        for part in ["hooks", "example", "s3cret", "code"] {
            assert!(!id.as_str().contains(part));
        }
        assert_eq!(id, EndpointId::of(url), "stable");
        assert_eq!(
            id,
            EndpointId::of("https://HOOKS.example.com:443/in?code=s3cret"),
            "normalised"
        );
        assert_ne!(id, EndpointId::of("https://hooks.example.com/in?code=other"));
        assert_ne!(id, EndpointId::of("https://hooks.example.com/out?code=s3cret"));
        assert_eq!(EndpointId::of("http://a"), EndpointId::of("http://a/"));
    }

    #[test]
    fn endpoint_id_is_the_first_half_of_the_sha256() {
        // printf 'http://example.com/' | sha256sum | cut -c1-32
        assert_eq!(
            EndpointId::of("http://example.com").as_str(),
            "2a1b402420ef46577471cdc7409b0fa2"
        );
    }

    #[test]
    fn default_bases_follow_the_spec() {
        let p = ProbationPolicy::default();
        let secs = Duration::from_secs;
        assert_eq!(p.base(OutcomeName::Busy), secs(10));
        assert_eq!(p.base(OutcomeName::TimedOut), secs(10));
        assert_eq!(p.base(OutcomeName::SocketError), secs(30));
        for o in [
            OutcomeName::NotFound,
            OutcomeName::ResolutionError,
            OutcomeName::Unauthorized,
            OutcomeName::Forbidden,
        ] {
            assert_eq!(p.base(o), secs(300), "{o}");
        }
        for o in [
            OutcomeName::GenericError,
            OutcomeName::BadRequest,
            OutcomeName::PayloadTooLarge,
        ] {
            assert_eq!(p.base(o), secs(10), "{o}");
        }
        assert_eq!(p.failure_threshold(), 10);
        assert_eq!(p.max(), secs(3600));
    }

    #[test]
    fn ladders_double_up_to_the_maximum() {
        let p = ProbationPolicy::default();
        let secs: Vec<u64> = p.ladder(OutcomeName::Busy).iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600]);
        let secs: Vec<u64> = p.ladder(OutcomeName::NotFound).iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [300, 600, 1200, 2400, 3600]);
        assert_eq!(p.probation_length(OutcomeName::NotFound, 0), Duration::from_secs(300));
        assert_eq!(p.probation_length(OutcomeName::NotFound, 2), Duration::from_secs(600));
        assert_eq!(p.probation_length(OutcomeName::NotFound, 99), Duration::from_secs(3600));
    }

    #[test]
    fn a_growth_of_one_keeps_lengths_fixed() {
        let p = ProbationPolicy::parse(3, "", 1, Duration::from_secs(3600)).unwrap();
        assert_eq!(p.ladder(OutcomeName::Busy), [Duration::from_secs(10)]);
        assert_eq!(p.probation_length(OutcomeName::Busy, 7), Duration::from_secs(10));
    }

    #[test]
    fn a_deployment_can_change_the_policy() {
        let p = ProbationPolicy::parse(3, "NotFound=1m, *=20s", 3, Duration::from_secs(600)).unwrap();
        assert_eq!(p.failure_threshold(), 3);
        assert_eq!(p.base(OutcomeName::NotFound), Duration::from_secs(60));
        assert_eq!(p.base(OutcomeName::Busy), Duration::from_secs(10), "defaults stay");
        assert_eq!(p.base(OutcomeName::GenericError), Duration::from_secs(20));
        let secs: Vec<u64> = p.ladder(OutcomeName::NotFound).iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [60, 180, 540, 600]);

        let max = Duration::from_secs(60);
        assert!(ProbationPolicy::parse(0, "", 2, max).is_err());
        assert!(ProbationPolicy::parse(1, "", 0, max).is_err());
        assert!(ProbationPolicy::parse(1, "", 2, Duration::ZERO).is_err());
        assert!(ProbationPolicy::parse(1, "Busy", 2, max).is_err());
        assert!(ProbationPolicy::parse(1, "Busy=soon", 2, max).is_err());
        assert!(ProbationPolicy::parse(1, "Busy=0s", 2, max).is_err());
        assert!(ProbationPolicy::parse(1, "Nope=1s", 2, max).is_err());
        assert!(ProbationPolicy::parse(1, "Succeeded=1s", 2, max).is_err());
        assert!(ProbationPolicy::parse(1, "Aborted=1s", 2, max).is_err());
    }

    #[test]
    fn which_outcomes_count() {
        assert_eq!(Signal::of(OutcomeName::Succeeded), Signal::Success);
        for o in [
            OutcomeName::Probation,
            OutcomeName::Aborted,
            OutcomeName::Canceled,
            OutcomeName::TokenUnavailable,
        ] {
            assert_eq!(Signal::of(o), Signal::Ignored, "{o}");
        }
        for o in [OutcomeName::Busy, OutcomeName::BadRequest, OutcomeName::GenericError] {
            assert_eq!(Signal::of(o), Signal::Failure, "{o}");
        }
    }

    #[test]
    fn the_threshold_puts_an_endpoint_on_probation() {
        let p = ProbationPolicy::default();
        let mut h = None;
        for n in 1..10 {
            assert_eq!(
                p.record(&mut h, &fail_at(0)),
                ProbationChange::Failed {
                    consecutive_failures: n
                }
            );
            assert_eq!(gate(&mut h, UnixMillis(0), Duration::from_secs(30)), Gate::Open);
        }
        let change = p.record(&mut h, &failure(OutcomeName::SocketError, 0, 5 * SEC));
        let until = UnixMillis(35 * SEC);
        assert_eq!(
            change,
            ProbationChange::ProbationStarted {
                level: 1,
                until,
                length: Duration::from_secs(30),
                consecutive_failures: 10
            }
        );
        let record = h.clone().unwrap();
        assert_eq!(record.last_failure, Some(OutcomeName::SocketError));
        assert_eq!(record.last_failure_at, Some(UnixMillis(5 * SEC)));
        assert_eq!(record.state(UnixMillis(6 * SEC)), ProbationState::Probation { until });
        assert_eq!(record.state(until), ProbationState::Probing);
    }

    #[test]
    fn during_probation_every_gate_waits_and_then_one_caller_probes() {
        let p = ProbationPolicy::default();
        let mut h = on_probation(&p);
        let lease = Duration::from_secs(30);
        let until = UnixMillis(10 * SEC);
        for t in [0, SEC, 9 * SEC, 10 * SEC - 1] {
            assert_eq!(gate(&mut h, UnixMillis(t), lease), Gate::Wait(until));
        }
        assert_eq!(gate(&mut h, until, lease), Gate::Probe);
        let lease_end = UnixMillis(40 * SEC);
        assert_eq!(gate(&mut h, until, lease), Gate::Wait(lease_end));
        assert_eq!(gate(&mut h, UnixMillis(39 * SEC), lease), Gate::Wait(lease_end));
        assert_eq!(state_of(h.as_ref(), UnixMillis(39 * SEC)), ProbationState::Probing);
        // The prober vanished: the lease runs out and the next caller probes.
        assert_eq!(gate(&mut h, lease_end, lease), Gate::Probe);
    }

    #[test]
    fn a_failed_probe_lengthens_probation_and_a_success_ends_it() {
        let p = ProbationPolicy::default();
        let mut h = on_probation(&p);
        let lease = Duration::from_secs(30);
        assert_eq!(gate(&mut h, UnixMillis(10 * SEC), lease), Gate::Probe);
        let change = p.record(&mut h, &failure(OutcomeName::Busy, 10 * SEC, 11 * SEC));
        assert_eq!(
            change,
            ProbationChange::ProbationStarted {
                level: 2,
                until: UnixMillis(31 * SEC),
                length: Duration::from_secs(20),
                consecutive_failures: 11
            }
        );
        assert_eq!(
            h.as_ref().unwrap().probe_lease_until,
            None,
            "the lease ended with the probe"
        );
        assert_eq!(
            gate(&mut h, UnixMillis(30 * SEC), lease),
            Gate::Wait(UnixMillis(31 * SEC))
        );
        assert_eq!(gate(&mut h, UnixMillis(31 * SEC), lease), Gate::Probe);
        assert_eq!(
            p.record(&mut h, &success_at(32 * SEC)),
            ProbationChange::Succeeded { ended_probation: true }
        );
        assert_eq!(h, None);
        assert_eq!(gate(&mut h, UnixMillis(32 * SEC), lease), Gate::Open);
        assert_eq!(state_of(h.as_ref(), UnixMillis(32 * SEC)), ProbationState::Healthy);
    }

    #[test]
    fn failures_of_attempts_begun_before_probation_ended_change_nothing() {
        let p = ProbationPolicy::default();
        let mut h = on_probation(&p);
        let before = h.clone().unwrap();
        // Stragglers that were in flight when probation began, reported during it and after.
        for finished in [SEC, 20 * SEC] {
            let change = p.record(&mut h, &failure(OutcomeName::TimedOut, 0, finished));
            assert!(
                matches!(change, ProbationChange::FailedOnProbation { until, .. } if until == UnixMillis(10 * SEC))
            );
        }
        let after = h.unwrap();
        assert_eq!(after.level, before.level);
        assert_eq!(after.probation_until, before.probation_until);
        assert_eq!(after.consecutive_failures, before.consecutive_failures + 2);
    }

    #[test]
    fn success_resets_the_count_and_ignored_outcomes_change_nothing() {
        let p = ProbationPolicy::parse(3, "", 2, Duration::from_secs(60)).unwrap();
        let mut h = None;
        p.record(&mut h, &fail_at(0));
        p.record(&mut h, &fail_at(0));
        assert_eq!(
            p.record(&mut h, &failure(OutcomeName::Aborted, 0, 0)),
            ProbationChange::Ignored
        );
        assert_eq!(h.as_ref().unwrap().consecutive_failures, 2);
        assert_eq!(
            p.record(&mut h, &success_at(0)),
            ProbationChange::Succeeded { ended_probation: false }
        );
        assert_eq!(h, None);
        p.record(&mut h, &fail_at(0));
        assert_eq!(
            p.record(&mut h, &fail_at(0)),
            ProbationChange::Failed {
                consecutive_failures: 2
            }
        );
    }

    fn arb_outcome() -> impl Strategy<Value = OutcomeName> {
        prop::sample::select(vec![
            OutcomeName::Succeeded,
            OutcomeName::NotFound,
            OutcomeName::Unauthorized,
            OutcomeName::Forbidden,
            OutcomeName::BadRequest,
            OutcomeName::PayloadTooLarge,
            OutcomeName::TimedOut,
            OutcomeName::Busy,
            OutcomeName::SocketError,
            OutcomeName::ResolutionError,
            OutcomeName::Probation,
            OutcomeName::Aborted,
            OutcomeName::Canceled,
            OutcomeName::GenericError,
        ])
    }

    fn arb_policy() -> impl Strategy<Value = ProbationPolicy> {
        (1u32..20, 1u64..5_000_000, 1u32..5, 1u64..10_000_000, 1u64..10_000_000).prop_map(
            |(threshold, base_ms, growth, other_ms, max_ms)| {
                let bases = format!("Busy={base_ms}ms,*={other_ms}ms");
                ProbationPolicy::parse(threshold, &bases, growth, Duration::from_millis(max_ms)).unwrap()
            },
        )
    }

    proptest! {
        #[test]
        fn ladders_grow_and_are_capped(policy in arb_policy(), outcome in arb_outcome()) {
            let ladder = policy.ladder(outcome);
            prop_assert!(!ladder.is_empty() && ladder.len() <= MAX_LADDER_STEPS);
            prop_assert_eq!(ladder[0], policy.base(outcome).min(policy.max()));
            for pair in ladder.windows(2) {
                prop_assert!(pair[0] < pair[1], "{:?}", ladder);
            }
            prop_assert!(ladder.iter().all(|d| *d <= policy.max()));
            if ladder.len() < MAX_LADDER_STEPS && policy.growth > 1 {
                prop_assert_eq!(ladder.last().copied(), Some(policy.max()));
            }
            let mut previous = Duration::ZERO;
            for level in 1..40 {
                let length = policy.probation_length(outcome, level);
                prop_assert!(length >= previous && length <= policy.max());
                previous = length;
            }
        }

        #[test]
        fn the_threshold_is_respected(policy in arb_policy(), outcomes in prop::collection::vec(arb_outcome(), 0..60)) {
            // Attempts one after another (none overlapping), each gated first.
            let mut h = None;
            let mut failures_since_success = 0u32;
            let mut now = 0i64;
            for outcome in outcomes {
                let gated = gate(&mut h, UnixMillis(now), Duration::from_secs(1));
                if let Gate::Wait(until) = gated {
                    prop_assert!(until.0 > now);
                    prop_assert!(failures_since_success >= policy.failure_threshold());
                    now = until.0;
                    continue;
                }
                let change = policy.record(&mut h, &failure(outcome, now, now + 1));
                let on_probation = matches!(change, ProbationChange::ProbationStarted { .. });
                match Signal::of(outcome) {
                    Signal::Success => {
                        failures_since_success = 0;
                        prop_assert!(matches!(change, ProbationChange::Succeeded { .. }), "{:?}", change);
                        prop_assert!(h.is_none());
                    }
                    Signal::Ignored => prop_assert_eq!(change, ProbationChange::Ignored),
                    Signal::Failure => {
                        failures_since_success += 1;
                        if failures_since_success >= policy.failure_threshold() {
                            prop_assert!(on_probation, "threshold reached: {:?}", change);
                        }
                    }
                }
                if failures_since_success < policy.failure_threshold() {
                    prop_assert!(!on_probation, "below threshold: {:?}", change);
                    prop_assert_eq!(gate(&mut h, UnixMillis(now + 1), Duration::from_secs(1)), Gate::Open);
                }
                if let ProbationChange::ProbationStarted { length, level, .. } = change {
                    prop_assert!(length <= policy.max());
                    prop_assert_eq!(length, policy.probation_length(outcome, level));
                    // Gated attempts only: every further probation is one level up.
                    prop_assert_eq!(level, failures_since_success - policy.failure_threshold() + 1);
                }
                prop_assert_eq!(h.as_ref().map_or(0, |h| h.consecutive_failures), failures_since_success);
                now += 1;
            }
        }
    }
}
