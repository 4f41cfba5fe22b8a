//! Per-endpoint probation records in Redis
//! (behaviour.md#protecting-endpoints-and-the-system): one hash per endpoint, shared by
//! every sender, changed only by two scripts that run `eg_core::probation`'s machine.
//!
//! - `endpoint_gate` before each attempt: go ahead, probe, or wait until a time.
//! - `record_endpoint_result` after each attempt: count the failure, start or lengthen
//!   probation, or reset on success; `record_endpoint_results` records several of one
//!   endpoint in one call, each as if alone.
//! - `probation_record` / `probation_records` read the state for display and gauges.
//!
//! The record's hash fields and its decoding are `codec::probation`'s.
//!
//! Each script touches only its endpoint's key, which has a hash tag of its own. Keys
//! expire [`ENDPOINT_KEY_TTL`] after their last write, so endpoints nobody sends to any
//! more leave nothing behind. Times come from the caller: pass `Clock::now()`, which is
//! corrected to Redis's clock, so all senders agree.

use crate::codec::decode_probation_record;
use crate::connection::Store;
use crate::error::StoreError;
use crate::scripts;
use eg_core::UnixMillis;
use eg_core::probation::{
    EndpointAttempt, EndpointId, Gate, ProbationChange, ProbationPolicy, ProbationRecord, Signal,
};
use std::collections::HashMap;
use std::time::Duration;

/// How long an endpoint's probation record outlives its last write (at least; longer when the
/// policy's longest probation or the probe lease would not fit twice).
pub const ENDPOINT_KEY_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn key_ttl(longest: Duration) -> u64 {
    millis(ENDPOINT_KEY_TTL.max(longest.saturating_mul(2)))
}

impl Store {
    /// Asks whether an attempt to this endpoint may go ahead now. `probe_lease` is how
    /// long a prober may take (the delivery timeout); `now` is `Clock::now()`.
    ///
    /// On `Gate::Wait(t)` make no attempt and charge none; try again at `t` (plus jitter).
    /// On `Gate::Probe` attempt, and record the result with `record_endpoint_result`.
    pub async fn endpoint_gate(
        &self,
        id: &EndpointId,
        now: UnixMillis,
        probe_lease: Duration,
    ) -> Result<Gate, StoreError> {
        let key = self.keys.endpoint(id);
        let mut conn = self.conn().await?;
        let reply: Vec<String> = scripts::ENDPOINT_GATE
            .key(&key)
            .arg(now.0)
            .arg(millis(probe_lease))
            .arg(key_ttl(probe_lease))
            .invoke_async(&mut conn)
            .await?;
        let bad = || StoreError::corrupt(&key, format!("unexpected endpoint_gate reply {reply:?}"));
        match reply.as_slice() {
            [open] if open == "OPEN" => Ok(Gate::Open),
            [probe, _] if probe == "PROBE" => Ok(Gate::Probe),
            [wait, until] if wait == "WAIT" => Ok(Gate::Wait(UnixMillis(until.parse().map_err(|_| bad())?))),
            _ => Err(bad()),
        }
    }

    /// Records a finished attempt in its endpoint's probation record and says what changed, for
    /// logs ("endpoint put on probation for 20s") and metrics. Outcomes that say nothing
    /// about the endpoint (`Probation`, `Aborted`, `Canceled`) are not sent to Redis.
    pub async fn record_endpoint_result(
        &self,
        id: &EndpointId,
        attempt: &EndpointAttempt,
        policy: &ProbationPolicy,
    ) -> Result<ProbationChange, StoreError> {
        let mut changes = self
            .record_endpoint_results(id, std::slice::from_ref(attempt), policy)
            .await?;
        changes
            .pop()
            .ok_or_else(|| StoreError::corrupt(self.keys.endpoint(id), "endpoint_record answered nothing"))
    }

    /// Records finished attempts of one endpoint in its probation record, in order, in
    /// one script call: each changes the record exactly as if recorded alone
    /// ([`Store::record_endpoint_result`]). One change per attempt, in order.
    pub async fn record_endpoint_results(
        &self,
        id: &EndpointId,
        attempts: &[EndpointAttempt],
        policy: &ProbationPolicy,
    ) -> Result<Vec<ProbationChange>, StoreError> {
        let signals: Vec<Signal> = attempts.iter().map(|a| Signal::of(a.outcome)).collect();
        let sent = signals.iter().filter(|s| **s != Signal::Ignored).count();
        if sent == 0 {
            return Ok(vec![ProbationChange::Ignored; attempts.len()]);
        }
        let key = self.keys.endpoint(id);
        let mut invocation = scripts::ENDPOINT_RECORD.prepare_invoke();
        invocation
            .key(&key)
            .arg(policy.failure_threshold())
            .arg(key_ttl(policy.max()))
            .arg(sent);
        for (attempt, signal) in attempts.iter().zip(&signals) {
            let success = match signal {
                Signal::Ignored => continue,
                Signal::Success => true,
                Signal::Failure => false,
            };
            invocation
                .arg(attempt.finished_at.0)
                .arg(attempt.started_at.0)
                .arg(if success { "success" } else { "failure" })
                .arg(attempt.outcome.as_str());
            if success {
                invocation.arg(0);
            } else {
                let ladder = policy.ladder(attempt.outcome);
                invocation.arg(ladder.len());
                for step in ladder {
                    invocation.arg(millis(step));
                }
            }
        }
        let mut conn = self.conn().await?;
        let replies: Vec<Vec<String>> = invocation.invoke_async(&mut conn).await?;
        let bad = |why: String| StoreError::corrupt(&key, why);
        if replies.len() != sent {
            return Err(bad(format!(
                "endpoint_record answered {} of {sent} results",
                replies.len()
            )));
        }
        let mut replies = replies.iter();
        signals
            .iter()
            .map(|signal| match signal {
                Signal::Ignored => Ok(ProbationChange::Ignored),
                _ => {
                    let reply = replies.next().map(Vec::as_slice).unwrap_or_default();
                    decode_change(reply).ok_or_else(|| bad(format!("unexpected endpoint_record reply {reply:?}")))
                }
            })
            .collect()
    }

    /// One endpoint's probation record; `None` when it has none (clear: no recent failure).
    pub async fn probation_record(&self, id: &EndpointId) -> Result<Option<ProbationRecord>, StoreError> {
        let mut records = self.probation_records(std::slice::from_ref(id)).await?;
        Ok(records.pop().flatten())
    }

    /// The probation records of many endpoints, in order, in one round trip: the reads go out
    /// together on one connection (not as one pipeline: each endpoint has its own slot).
    pub async fn probation_records(&self, ids: &[EndpointId]) -> Result<Vec<Option<ProbationRecord>>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|id| self.keys.endpoint(id)).collect();
        let (_held, link) = self.link().await?;
        let reads = keys.iter().map(|key| {
            let mut link = link.clone();
            async move { redis::AsyncCommands::hgetall::<_, HashMap<String, String>>(&mut link, key).await }
        });
        let hashes = futures_util::future::try_join_all(reads).await?;
        keys.iter()
            .zip(hashes)
            .map(|(key, fields)| decode_probation_record(&fields).map_err(|problem| StoreError::corrupt(key, problem)))
            .collect()
    }
}

fn decode_change(reply: &[String]) -> Option<ProbationChange> {
    let int = |s: &String| s.parse::<i64>().ok();
    let count = |s: &String| s.parse::<u32>().ok();
    Some(match reply {
        [ok, was] if ok == "OK" => ProbationChange::Succeeded {
            ended_probation: was == "1",
        },
        [failed, f] if failed == "FAILED" => ProbationChange::Failed {
            consecutive_failures: count(f)?,
        },
        [on, f, until] if on == "ONPROBATION" => ProbationChange::FailedOnProbation {
            until: UnixMillis(int(until)?),
            consecutive_failures: count(f)?,
        },
        [started, f, level, until, length] if started == "PROBATION" => ProbationChange::ProbationStarted {
            level: count(level)?,
            until: UnixMillis(int(until)?),
            length: Duration::from_millis(length.parse().ok()?),
            consecutive_failures: count(f)?,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn decodes_every_reply_shape() {
        let r = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            decode_change(&r(&["OK", "1"])),
            Some(ProbationChange::Succeeded { ended_probation: true })
        );
        assert_eq!(
            decode_change(&r(&["FAILED", "3"])),
            Some(ProbationChange::Failed {
                consecutive_failures: 3
            })
        );
        assert_eq!(
            decode_change(&r(&["PROBATION", "10", "2", "5000", "20000"])),
            Some(ProbationChange::ProbationStarted {
                level: 2,
                until: UnixMillis(5000),
                length: Duration::from_secs(20),
                consecutive_failures: 10
            })
        );
        assert_eq!(decode_change(&r(&["PROBATION", "x"])), None);
        assert_eq!(decode_change(&r(&["FAILED", "-1"])), None);
    }

    #[test]
    fn keys_outlive_the_longest_probation() {
        assert_eq!(key_ttl(Duration::from_secs(3600)), millis(ENDPOINT_KEY_TTL));
        assert_eq!(key_ttl(ENDPOINT_KEY_TTL), millis(ENDPOINT_KEY_TTL) * 2);
    }
}
