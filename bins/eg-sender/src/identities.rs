//! Reports the delivery identities whose token endpoint is down or refusing
//! (`eg_store::identity_health`), so the status page and `egctl status` show why
//! deliveries are `TokenUnavailable`. The token cache already knows (it backs off a
//! failing provider and keeps its last answer); this task looks every few seconds and
//! writes to Redis only what changed: a new problem, a different one, one cleared
//! because a token was obtained, and a refresh once a minute while one lasts (so an
//! entry of a sender that stopped goes stale). Nothing per delivery attempt.

use eg_core::UnixMillis;
use eg_outbound::{IdentityProblem as CacheProblem, RequestResult};
use eg_runtime::bearer::TokenWatch;
use eg_runtime::shutdown::Shutdown;
use eg_store::{Clock, IdentityProblem, Store};
use std::collections::BTreeMap;
use std::time::Duration;

/// How often the token cache is looked at (in memory: costs nothing).
const LOOK_EVERY: Duration = Duration::from_secs(2);
/// How often a lasting problem is written again, well within
/// `eg_store::IDENTITY_PROBLEM_TTL`.
const REFRESH_EVERY: Duration = Duration::from_secs(60);

/// What this sender last wrote of an identity.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reported {
    kind: &'static str,
    message: String,
    written_at: UnixMillis,
}

/// One write to make.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    Record {
        identity: String,
        kind: &'static str,
        message: String,
    },
    Clear(String),
}

/// `Refused` or `Unreachable`, as the status shows it.
fn kind_of(result: RequestResult) -> &'static str {
    match result {
        RequestResult::Unreachable => "Unreachable",
        RequestResult::Refused | RequestResult::Issued => "Refused",
    }
}

/// The writes that bring Redis from `reported` to `failing` at `now`.
fn changes(reported: &BTreeMap<String, Reported>, failing: &[CacheProblem], now: UnixMillis) -> Vec<Change> {
    let refresh_ms = i64::try_from(REFRESH_EVERY.as_millis()).unwrap_or(i64::MAX);
    let mut out = Vec::new();
    for problem in failing {
        let kind = kind_of(problem.result);
        let stale = |r: &Reported| {
            r.kind != kind || r.message != problem.problem || now.0.saturating_sub(r.written_at.0) >= refresh_ms
        };
        if reported.get(&problem.identity).is_none_or(stale) {
            out.push(Change::Record {
                identity: problem.identity.clone(),
                kind,
                message: problem.problem.clone(),
            });
        }
    }
    for identity in reported.keys() {
        if !failing.iter().any(|p| &p.identity == identity) {
            out.push(Change::Clear(identity.clone()));
        }
    }
    out
}

/// Reports until shutdown.
pub async fn report(store: Store, watch: TokenWatch, clock: Clock, shutdown: Shutdown) {
    let mut reported: BTreeMap<String, Reported> = BTreeMap::new();
    while !shutdown.is_triggered() {
        let now = clock.now();
        for change in changes(&reported, &watch.problems(), now) {
            match change {
                Change::Record {
                    identity,
                    kind,
                    message,
                } => {
                    let problem = IdentityProblem {
                        kind: kind.to_owned(),
                        message: message.clone(),
                        since: now,
                        last: now,
                    };
                    match store.record_identity_problem(&identity, problem).await {
                        Ok(()) => {
                            reported.insert(
                                identity,
                                Reported {
                                    kind,
                                    message,
                                    written_at: now,
                                },
                            );
                        }
                        Err(e) => tracing::warn!(error = %e, identity, "cannot record an identity's problem"),
                    }
                }
                Change::Clear(identity) => match store.clear_identity_problem(&identity).await {
                    Ok(()) => {
                        reported.remove(&identity);
                    }
                    Err(e) => tracing::warn!(error = %e, identity, "cannot clear an identity's problem"),
                },
            }
        }
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = shutdown.requested() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(identity: &str, result: RequestResult, problem: &str) -> CacheProblem {
        CacheProblem {
            identity: identity.into(),
            problem: problem.into(),
            failures: 1,
            result,
        }
    }

    fn reported(kind: &'static str, message: &str, at: i64) -> Reported {
        Reported {
            kind,
            message: message.into(),
            written_at: UnixMillis(at),
        }
    }

    #[test]
    fn a_new_problem_is_recorded_and_an_unchanged_one_is_not_written_again_within_the_minute() {
        let now = UnixMillis(10_000);
        let down = [failing("partner", RequestResult::Unreachable, "no answer")];
        assert_eq!(
            changes(&BTreeMap::new(), &down, now),
            vec![Change::Record {
                identity: "partner".into(),
                kind: "Unreachable",
                message: "no answer".into()
            }]
        );
        let known = BTreeMap::from([("partner".to_owned(), reported("Unreachable", "no answer", 5_000))]);
        assert!(changes(&known, &down, now).is_empty());
        assert_eq!(
            changes(&known, &down, UnixMillis(65_000)).len(),
            1,
            "refreshed after a minute"
        );
    }

    #[test]
    fn a_different_problem_is_written_and_one_no_longer_failing_is_cleared() {
        let now = UnixMillis(10_000);
        let known = BTreeMap::from([("partner".to_owned(), reported("Unreachable", "no answer", 5_000))]);
        let refused = [failing(
            "partner",
            RequestResult::Refused,
            "answered 401: invalid_client",
        )];
        assert_eq!(
            changes(&known, &refused, now),
            vec![Change::Record {
                identity: "partner".into(),
                kind: "Refused",
                message: "answered 401: invalid_client".into()
            }]
        );
        assert_eq!(changes(&known, &[], now), vec![Change::Clear("partner".into())]);
    }
}
