//! Which tier processes run: each announces itself with a heartbeat (`eg_store::heartbeat`),
//! and the page lists the live copies of each tier with their version and age, so a
//! scaled tier shows each copy and a tier with none running shows that.

use eg_core::UnixMillis;
use eg_store::heartbeat::LiveCopy;
use serde::Serialize;

/// The tiers a deployment runs: each is listed, with none running when none is.
pub const TIERS: [&str; 4] = ["eg-ingress", "eg-scheduler", "eg-sender", "eg-deadletter"];

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TierStatus {
    /// The tier's binary, e.g. `eg-sender`.
    pub tier: String,
    /// Its copies heard from lately, oldest first.
    pub copies: Vec<CopyStatus>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyStatus {
    /// The process's name (host, pid and a random part).
    pub instance: String,
    pub version: String,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// How long it has run, in whole seconds.
    pub uptime_seconds: u64,
    /// Its last heartbeat (RFC 3339).
    pub last_seen: String,
    #[serde(skip)]
    pub last_seen_ms: UnixMillis,
}

/// The known tiers in their order, then any other tier heard from, each with its copies.
pub fn tiers_of(copies: Vec<LiveCopy>, now: UnixMillis) -> Vec<TierStatus> {
    let mut tiers: Vec<TierStatus> = TIERS
        .iter()
        .map(|t| TierStatus {
            tier: (*t).to_owned(),
            copies: Vec::new(),
        })
        .collect();
    for copy in copies {
        let status = CopyStatus {
            instance: copy.instance,
            version: copy.version,
            started_at: copy.started_at.to_rfc3339(),
            uptime_seconds: u64::try_from((now.0 - copy.started_at.0) / 1000).unwrap_or(0),
            last_seen: copy.last_seen.to_rfc3339(),
            last_seen_ms: copy.last_seen,
        };
        match tiers.iter_mut().find(|t| t.tier == copy.tier) {
            Some(tier) => tier.copies.push(status),
            None => tiers.push(TierStatus {
                tier: copy.tier,
                copies: vec![status],
            }),
        }
    }
    tiers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(tier: &str, instance: &str, started: i64) -> LiveCopy {
        LiveCopy {
            tier: tier.into(),
            instance: instance.into(),
            version: "0.1.0".into(),
            started_at: UnixMillis(started),
            last_seen: UnixMillis(100_000),
            capabilities: Vec::new(),
        }
    }

    #[test]
    fn every_known_tier_is_listed_with_its_copies() {
        let tiers = tiers_of(
            vec![
                copy("eg-sender", "a", 1_000),
                copy("eg-sender", "b", 40_000),
                copy("eg-ingress", "i", 1_000),
                copy("eg-other", "o", 1_000),
            ],
            UnixMillis(101_000),
        );
        let names: Vec<&str> = tiers.iter().map(|t| t.tier.as_str()).collect();
        assert_eq!(
            names,
            ["eg-ingress", "eg-scheduler", "eg-sender", "eg-deadletter", "eg-other"]
        );
        assert!(tiers[1].copies.is_empty(), "a tier with none running is still listed");
        let senders: Vec<(&str, u64)> = tiers[2]
            .copies
            .iter()
            .map(|c| (c.instance.as_str(), c.uptime_seconds))
            .collect();
        assert_eq!(senders, [("a", 100), ("b", 61)]);
    }
}
