//! The **heartbeat**: one field per running tier process in the heartbeats hash,
//! `<tier>/<instance>` → `<last seen ms> <started ms> <version> <capabilities>`, written
//! by `heartbeat.lua` (whose header mirrors this form; it reads the first number to forget
//! copies long gone). Capabilities are comma-separated words ([`Capability::name`]);
//! releases before them wrote three words, read as a copy that has none.

use eg_core::UnixMillis;
use eg_core::capability::Capability;

/// One tier process as it announced itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveCopy {
    /// The tier's binary, e.g. `eg-sender`.
    pub tier: String,
    /// This process's name in consumer groups (host, pid and a random part).
    pub instance: String,
    /// The version of the binary (`CARGO_PKG_VERSION`).
    pub version: String,
    /// When the process started.
    pub started_at: UnixMillis,
    /// Its last heartbeat.
    pub last_seen: UnixMillis,
    /// What it can do beyond every release (words it does not know are left out).
    pub capabilities: Vec<Capability>,
}

/// The hash field of a copy.
pub fn encode_heartbeat_field(tier: &str, instance: &str) -> String {
    format!("{tier}/{instance}")
}

/// The hash value of a copy's heartbeat at `seen`.
pub fn encode_heartbeat(copy: &LiveCopy) -> String {
    let capabilities: Vec<&str> = copy.capabilities.iter().map(|c| c.name()).collect();
    format!(
        "{} {} {} {}",
        copy.last_seen.0,
        copy.started_at.0,
        copy.version,
        capabilities.join(",")
    )
    .trim_end()
    .to_owned()
}

/// A copy from its field and value; the error says what is malformed.
pub fn decode_heartbeat(field: &str, value: &str) -> Result<LiveCopy, String> {
    let (tier, instance) = field
        .split_once('/')
        .ok_or_else(|| format!("heartbeat field {field:?} is not <tier>/<instance>"))?;
    let mut parts = value.splitn(4, ' ');
    let mut time = |what: &str| -> Result<UnixMillis, String> {
        parts
            .next()
            .and_then(|n| n.parse().ok())
            .map(UnixMillis)
            .ok_or_else(|| format!("heartbeat {field:?}: {what} is not a time in ms: {value:?}"))
    };
    let last_seen = time("last seen")?;
    let started_at = time("start")?;
    Ok(LiveCopy {
        tier: tier.to_owned(),
        instance: instance.to_owned(),
        version: parts.next().unwrap_or_default().to_owned(),
        started_at,
        last_seen,
        capabilities: parts
            .next()
            .unwrap_or_default()
            .split(',')
            .filter_map(Capability::parse)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_round_trips() {
        let copy = LiveCopy {
            tier: "eg-sender".into(),
            instance: "sender-host-12-ab12".into(),
            version: "0.1.0".into(),
            started_at: UnixMillis(1_000),
            last_seen: UnixMillis(5_000),
            capabilities: vec![Capability::RateLimits, Capability::OrderedDelivery],
        };
        let field = encode_heartbeat_field(&copy.tier, &copy.instance);
        assert_eq!(field, "eg-sender/sender-host-12-ab12");
        assert_eq!(encode_heartbeat(&copy), "5000 1000 0.1.0 limits,ordering");
        assert_eq!(decode_heartbeat(&field, &encode_heartbeat(&copy)), Ok(copy));
    }

    #[test]
    fn a_heartbeat_of_an_earlier_release_has_no_capabilities_and_unknown_words_are_skipped() {
        let old = decode_heartbeat("eg-sender/a", "5000 1000 0.1.0").expect("reads");
        assert_eq!(old.version, "0.1.0");
        assert!(old.capabilities.is_empty());
        let newer = decode_heartbeat("eg-sender/a", "5000 1000 0.3.0 limits,teleport").expect("reads");
        assert_eq!(newer.capabilities, [Capability::RateLimits]);
    }

    #[test]
    fn malformed_heartbeats_are_named() {
        assert!(
            decode_heartbeat("no-slash", "1 2 v")
                .unwrap_err()
                .contains("<tier>/<instance>")
        );
        assert!(decode_heartbeat("t/i", "x 2 v").unwrap_err().contains("last seen"));
        assert!(decode_heartbeat("t/i", "1").unwrap_err().contains("start"));
    }
}
