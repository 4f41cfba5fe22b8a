//! What a tier process can do beyond what every version of eg does. Each process
//! announces its capabilities in its heartbeat; the management API refuses a
//! subscription or topic using a feature that some running copy of a tier it needs lacks,
//! so a rolling upgrade never has an old sender silently ignore a rate limit, a token or a
//! certificate, settle an ordered delivery without releasing the next of its key, or an
//! old ingress accept an archived topic's events without archiving them.

use std::fmt;

/// One feature older tiers do not honour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Capability {
    /// `deliveryLimits`: senders share the rate and concurrency caps.
    RateLimits,
    /// `orderedDelivery`: ingress stores a key's events in line, senders release the
    /// next when one settles, schedulers unstick lines.
    OrderedDelivery,
    /// OAuth 2.0 / Entra ID tokens on webhook requests.
    DeliveryTokens,
    /// Client certificates in the webhook TLS handshake.
    ClientCertificates,
    /// A topic's `archive`: ingress appends accepted events to the archive backlog,
    /// eg-deadletter writes it to the store.
    Archive,
    /// The destination kinds added since heartbeats carry capabilities (those whose
    /// `destination::Kind::SINCE_CAPABILITIES` is set): a sender of an earlier release
    /// cannot read such a target.
    NewerDestinationKinds,
}

impl Capability {
    /// Everything this build can do: what its processes announce.
    pub const ALL: [Capability; 6] = [
        Capability::RateLimits,
        Capability::OrderedDelivery,
        Capability::DeliveryTokens,
        Capability::ClientCertificates,
        Capability::Archive,
        Capability::NewerDestinationKinds,
    ];

    /// The word in a heartbeat.
    pub fn name(self) -> &'static str {
        match self {
            Capability::RateLimits => "limits",
            Capability::OrderedDelivery => "ordering",
            Capability::DeliveryTokens => "tokens",
            Capability::ClientCertificates => "certificates",
            Capability::Archive => "archive",
            Capability::NewerDestinationKinds => "kinds2",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == word)
    }

    /// The feature as a subscription asks for it, for messages.
    pub fn feature(self) -> &'static str {
        match self {
            Capability::RateLimits => "rate limits (deliveryLimits)",
            Capability::OrderedDelivery => "ordered delivery (orderedDelivery)",
            Capability::DeliveryTokens => "OAuth tokens on delivery",
            Capability::ClientCertificates => "client certificates (clientCertificate)",
            Capability::Archive => "a topic archive (properties.archive)",
            Capability::NewerDestinationKinds => "this destination kind (new in this release)",
        }
    }

    /// The tiers whose every running copy must have it.
    pub fn tiers(self) -> &'static [&'static str] {
        match self {
            Capability::OrderedDelivery => &["eg-ingress", "eg-scheduler", "eg-sender"],
            Capability::RateLimits
            | Capability::DeliveryTokens
            | Capability::ClientCertificates
            | Capability::NewerDestinationKinds => &["eg-sender"],
            Capability::Archive => &["eg-ingress", "eg-deadletter"],
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A running tier process as its heartbeat describes it.
#[derive(Debug, Clone, Copy)]
pub struct RunningCopy<'a> {
    pub tier: &'a str,
    pub instance: &'a str,
    pub version: &'a str,
    pub capabilities: &'a [Capability],
}

/// The first running copy that lacks one of `needed`, and what it lacks, as the
/// sentence the management API answers with; `None` when every copy can.
pub fn first_lacking<'a>(needed: &[Capability], copies: impl IntoIterator<Item = RunningCopy<'a>>) -> Option<String> {
    let copies: Vec<RunningCopy<'a>> = copies.into_iter().collect();
    for capability in needed {
        let lacking = copies
            .iter()
            .find(|copy| capability.tiers().contains(&copy.tier) && !copy.capabilities.contains(capability));
        if let Some(copy) = lacking {
            return Some(format!(
                "{} {} (version {}) cannot do {}: upgrade every {} first, then write it \
                 again (docs/operations.md#upgrading-one-tier-at-a-time)",
                copy.tier,
                copy.instance,
                copy.version,
                capability.feature(),
                capability.tiers().join(", "),
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy<'a>(tier: &'a str, capabilities: &'a [Capability]) -> RunningCopy<'a> {
        RunningCopy {
            tier,
            instance: "host-1",
            version: "0.9.0",
            capabilities,
        }
    }

    #[test]
    fn capability_names_round_trip() {
        for capability in Capability::ALL {
            assert_eq!(Capability::parse(capability.name()), Some(capability));
        }
        assert_eq!(Capability::parse("teleport"), None);
    }

    #[test]
    fn an_archive_is_refused_while_an_older_dead_letter_worker_runs() {
        let all = Capability::ALL;
        let older = [Capability::RateLimits];
        let copies = [
            copy("eg-ingress", &all),
            copy("eg-sender", &older),
            copy("eg-deadletter", &older),
        ];
        let refusal = first_lacking(&[Capability::Archive], copies).expect("refused");
        assert!(refusal.starts_with("eg-deadletter host-1"), "{refusal}");
        assert!(
            refusal.contains("upgrade every eg-ingress, eg-deadletter first"),
            "{refusal}"
        );
    }

    #[test]
    fn a_feature_is_refused_while_a_copy_of_a_tier_it_needs_lacks_it() {
        let all = Capability::ALL;
        let copies = [
            copy("eg-ingress", &all),
            copy("eg-sender", &all),
            copy("eg-scheduler", &[]),
        ];
        assert_eq!(first_lacking(&[Capability::RateLimits], copies), None);
        let refusal = first_lacking(&[Capability::OrderedDelivery], copies).expect("refused");
        assert!(
            refusal.starts_with("eg-scheduler host-1 (version 0.9.0) cannot do ordered delivery"),
            "{refusal}"
        );
        assert!(
            refusal.contains("upgrade every eg-ingress, eg-scheduler, eg-sender first"),
            "{refusal}"
        );
        assert_eq!(first_lacking(&[], copies), None);
    }

    #[test]
    fn copies_of_other_tiers_do_not_matter() {
        let copies = [
            copy("eg-deadletter", &[]),
            copy("eg-sender", &[Capability::DeliveryTokens]),
        ];
        assert_eq!(first_lacking(&[Capability::DeliveryTokens], copies), None);
        assert!(first_lacking(&[Capability::ClientCertificates], copies).is_some());
    }
}
