//! Delivery identities whose token endpoint is down or refusing (docs/oauth-delivery.md),
//! so operators see it (status page, `GET /admin/status`, `egctl status`) and not only
//! `TokenUnavailable` attempts in history. Each sender reports what its token cache
//! knows, on a change only (and now and then while it lasts, to stay fresh); a token
//! obtained again clears it. One small hash for the deployment, in a hash tag of its
//! own (one key: no script). It expires when no sender refreshes it, and readers skip
//! entries not refreshed within [`IDENTITY_PROBLEM_TTL`], so a sender that stopped
//! leaves nothing behind for long.

use crate::connection::Store;
use crate::error::StoreError;
use eg_core::UnixMillis;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How long an entry counts without being refreshed (senders refresh every minute).
pub const IDENTITY_PROBLEM_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// Why an identity has no tokens. Never holds a secret: `message` is the token
/// endpoint's error text (`error`, `error_description`) or eg's words for no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityProblem {
    /// `Refused` (the endpoint answered without a token) or `Unreachable` (no answer).
    pub kind: String,
    pub message: String,
    /// The first failure since the identity last got a token.
    pub since: UnixMillis,
    /// The latest report of it.
    pub last: UnixMillis,
}

/// A failing identity, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailingIdentity {
    /// The identity's name as configured (`EG__IDENTITIES__<NAME>__…`, lower case).
    pub identity: String,
    pub problem: IdentityProblem,
}

impl Store {
    /// Records that `identity` gets no tokens; keeps the `since` of a problem already
    /// recorded.
    pub async fn record_identity_problem(
        &self,
        identity: &str,
        mut problem: IdentityProblem,
    ) -> Result<(), StoreError> {
        let key = self.keys.identity_problems();
        let field = identity.to_ascii_lowercase();
        let mut conn = self.conn().await?;
        let earlier: Option<String> = redis::cmd("HGET").arg(&key).arg(&field).query_async(&mut conn).await?;
        if let Some(earlier) = earlier.and_then(|raw| serde_json::from_str::<IdentityProblem>(&raw).ok()) {
            problem.since = earlier.since.min(problem.since);
        }
        let json = serde_json::to_string(&problem).map_err(|e| StoreError::corrupt(&key, e.to_string()))?;
        let ttl_ms = u64::try_from(IDENTITY_PROBLEM_TTL.as_millis()).unwrap_or(u64::MAX);
        let _: () = redis::pipe()
            .atomic()
            .cmd("HSET")
            .arg(&key)
            .arg(&field)
            .arg(json)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(ttl_ms)
            .ignore()
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Forgets `identity`'s problem (a token was obtained).
    pub async fn clear_identity_problem(&self, identity: &str) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let _: i64 = redis::cmd("HDEL")
            .arg(self.keys.identity_problems())
            .arg(identity.to_ascii_lowercase())
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Every identity failing as of `now` (entries refreshed within
    /// [`IDENTITY_PROBLEM_TTL`]), by name.
    pub async fn identity_problems(&self, now: UnixMillis) -> Result<Vec<FailingIdentity>, StoreError> {
        let key = self.keys.identity_problems();
        let mut conn = self.conn().await?;
        let all: HashMap<String, String> = redis::cmd("HGETALL").arg(&key).query_async(&mut conn).await?;
        let ttl_ms = i64::try_from(IDENTITY_PROBLEM_TTL.as_millis()).unwrap_or(i64::MAX);
        let mut failing = Vec::with_capacity(all.len());
        for (identity, raw) in all {
            let problem: IdentityProblem =
                serde_json::from_str(&raw).map_err(|e| StoreError::corrupt(&key, e.to_string()))?;
            if now.0.saturating_sub(problem.last.0) <= ttl_ms {
                failing.push(FailingIdentity { identity, problem });
            }
        }
        failing.sort_by(|a, b| a.identity.cmp(&b.identity));
        Ok(failing)
    }
}
