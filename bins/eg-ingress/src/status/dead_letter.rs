//! What operators are shown of a subscription's dead-letter destination: where its dead
//! letters go (the store's label and the container, never a key or an endpoint) and,
//! while writing them fails, why and since when (`eg_store::dead_letter_health`, kept by
//! the dead-letter worker). One shape for the status page, `GET /admin/status` and the
//! management API's `GET …/deadLetters/destination`, so they cannot disagree.

use eg_core::Subscription;
use eg_core::UnixMillis;
use eg_core::subscription::{DeadLetterDestination, DeadLetterStore};
use eg_store::{DestinationProblem, FailingDestination};
use serde::Serialize;
use serde_json::{Value, json};

/// Where a subscription's dead letters go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterTarget {
    /// `local` (the dead-letter worker's directory), `azure:<account>`, `s3:<connection>`.
    pub store: String,
    /// The blob container, the S3 bucket, or the folder of the local directory.
    pub container: String,
    /// S3 only: what every object key starts with.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key_prefix: String,
}

impl DeadLetterTarget {
    pub fn of(destination: &DeadLetterDestination) -> Self {
        let key_prefix = match &destination.store {
            DeadLetterStore::S3 { key_prefix, .. } => key_prefix.clone(),
            _ => String::new(),
        };
        Self {
            store: destination.store.label(),
            container: destination.container_name.clone(),
            key_prefix,
        }
    }
}

/// Why a subscription's dead letters cannot be written now. The store and container are
/// those of the records that fail, which may differ from the subscription's destination
/// if it was changed since: records go where the subscription pointed when they died.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterFailure {
    pub store: String,
    pub container: String,
    /// `Unauthenticated`, `PermissionDenied`, `ContainerNotFound`, `Unavailable`, …
    pub kind: String,
    /// What the store answered, for a person.
    pub message: String,
    /// The first failure since the last write that succeeded (RFC 3339).
    pub failing_since: String,
    /// The latest failure (RFC 3339).
    pub last_failure_time: String,
    #[serde(skip)]
    pub since_ms: UnixMillis,
}

impl DeadLetterFailure {
    pub fn of(problem: &DestinationProblem) -> Self {
        Self {
            store: problem.store.clone(),
            container: problem.container.clone(),
            kind: problem.kind.clone(),
            message: problem.message.clone(),
            failing_since: problem.since.to_rfc3339(),
            last_failure_time: problem.last.to_rfc3339(),
            since_ms: problem.since,
        }
    }
}

/// A failing destination in the deployment-wide list (`failingDeadLetterDestinations`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailingDeadLetters {
    /// As stored (lower case), like the keys of every per-subscription record.
    pub topic: String,
    pub subscription: String,
    #[serde(flatten)]
    pub failure: DeadLetterFailure,
}

impl FailingDeadLetters {
    pub fn of(failing: &FailingDestination) -> Self {
        Self {
            topic: failing.topic.clone(),
            subscription: failing.subscription.clone(),
            failure: DeadLetterFailure::of(&failing.problem),
        }
    }
}

/// `Failing` while writes fail; `Healthy` otherwise (none failed since the last that
/// succeeded, or none was tried); `NotConfigured` without a destination or a failure.
pub fn state(target: Option<&DeadLetterTarget>, failure: Option<&DeadLetterFailure>) -> &'static str {
    match (target, failure) {
        (_, Some(_)) => "Failing",
        (Some(_), None) => "Healthy",
        (None, None) => "NotConfigured",
    }
}

/// The management API's answer about a subscription's dead-letter destination.
pub fn destination_body(sub: &Subscription, problem: Option<&DestinationProblem>) -> Value {
    let target = sub.dead_letter.as_ref().map(DeadLetterTarget::of);
    let failure = problem.map(DeadLetterFailure::of);
    json!({
        "destination": target,
        "state": state(target.as_ref(), failure.as_ref()),
        "problem": failure,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn problem() -> DestinationProblem {
        DestinationProblem {
            store: "azure:deadletters1".into(),
            container: "dead".into(),
            kind: "Unauthenticated".into(),
            message: "the account key was refused".into(),
            since: UnixMillis(1_000),
            last: UnixMillis(61_000),
        }
    }

    #[test]
    fn targets_name_the_store_and_container_and_never_more() {
        let s3 = DeadLetterDestination::from_json(&json!({"endpointType": "S3", "properties": {
            "bucket": "eg-dead", "keyPrefix": "prod", "connection": "minio",
            "endpointUrl": "http://minio.internal:9000"}}))
        .unwrap();
        let target = DeadLetterTarget::of(&s3);
        assert_eq!(
            serde_json::to_value(&target).unwrap(),
            json!({"store": "s3:minio", "container": "eg-dead", "keyPrefix": "prod"}),
            "no endpoint, region or key"
        );
        let local = DeadLetterTarget::of(&DeadLetterDestination::new("dead").unwrap());
        assert_eq!(
            serde_json::to_value(&local).unwrap(),
            json!({"store": "local", "container": "dead"})
        );
    }

    #[test]
    fn a_failure_reads_as_times_and_the_state_follows_it() {
        let failure = DeadLetterFailure::of(&problem());
        let value = serde_json::to_value(&failure).unwrap();
        assert_eq!(value["failingSince"], "1970-01-01T00:00:01.000Z");
        assert_eq!(value["lastFailureTime"], "1970-01-01T00:01:01.000Z");
        assert_eq!(value["kind"], "Unauthenticated");
        assert!(value.get("sinceMs").is_none());
        let target = DeadLetterTarget::of(&DeadLetterDestination::new("dead").unwrap());
        assert_eq!(state(Some(&target), Some(&failure)), "Failing");
        assert_eq!(
            state(None, Some(&failure)),
            "Failing",
            "records still failing after the destination was removed"
        );
        assert_eq!(state(Some(&target), None), "Healthy");
        assert_eq!(state(None, None), "NotConfigured");
    }
}
