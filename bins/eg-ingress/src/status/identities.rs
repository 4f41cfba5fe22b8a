//! Delivery identities whose token endpoint is down or refusing, as operators see them
//! (`eg_store::identity_health`, reported by the senders): `failingIdentities` of
//! `GET /admin/status`, the status page's banner, and `egctl status`. While one lasts,
//! every delivery to a webhook using it is `TokenUnavailable`, so the page names how
//! many subscriptions are held up. Never a secret: the message is the provider's error
//! text as the token cache kept it.

use eg_core::destination::Target;
use eg_core::{Subscription, UnixMillis};
use eg_runtime::bearer::Bearer;
use eg_store::FailingIdentity;
use serde::Serialize;

/// One failing identity (`failingIdentities[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityFailure {
    /// The identity's name as configured (lower case).
    pub identity: String,
    /// `Refused` (the token endpoint answered without a token) or `Unreachable`.
    pub kind: String,
    /// What the token endpoint said, or that it did not answer.
    pub message: String,
    /// The first failure since the identity last got a token (RFC 3339).
    pub failing_since: String,
    /// The latest report of it (RFC 3339; senders refresh it every minute).
    pub last_failure_time: String,
    /// Subscriptions whose webhook gets its tokens from this identity.
    pub subscriptions: usize,
    #[serde(skip)]
    pub since_ms: UnixMillis,
}

impl IdentityFailure {
    /// `failing`, with the subscriptions of `catalog` that use it (by `bearer`'s
    /// identities: an Entra ID webhook may name its tenant, not the identity).
    pub fn of(failing: &FailingIdentity, catalog: &[&Subscription], bearer: &Bearer) -> Self {
        let subscriptions = catalog
            .iter()
            .filter(|s| match s.target() {
                Some(Target::WebHook(hook)) => hook
                    .auth
                    .as_ref()
                    .and_then(|auth| bearer.identity_of(auth))
                    .is_some_and(|name| name.eq_ignore_ascii_case(&failing.identity)),
                _ => false,
            })
            .count();
        let p = &failing.problem;
        Self {
            identity: failing.identity.clone(),
            kind: p.kind.clone(),
            message: p.message.clone(),
            failing_since: p.since.to_rfc3339(),
            last_failure_time: p.last.to_rfc3339(),
            subscriptions,
            since_ms: p.since,
        }
    }
}

#[cfg(test)]
pub mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use eg_store::IdentityProblem;

    pub fn failure(message: &str) -> IdentityFailure {
        let failing = FailingIdentity {
            identity: "partner".into(),
            problem: IdentityProblem {
                kind: "Unreachable".into(),
                message: message.into(),
                since: UnixMillis(1_000),
                last: UnixMillis(61_000),
            },
        };
        let bearer = Bearer::from_settings(&Default::default()).unwrap();
        IdentityFailure::of(&failing, &[], &bearer)
    }

    #[test]
    fn a_failure_reads_as_times_with_no_internal_field() {
        let value = serde_json::to_value(failure("no answer")).unwrap();
        assert_eq!(value["failingSince"], "1970-01-01T00:00:01.000Z");
        assert_eq!(value["lastFailureTime"], "1970-01-01T00:01:01.000Z");
        assert_eq!(value["kind"], "Unreachable");
        assert_eq!(value["subscriptions"], 0);
        assert!(value.get("sinceMs").is_none());
    }
}
