//! Delivery profiles: the custom-topic behaviour of behaviour.md#what-a-failure-leads-to
//! through behaviour.md#dead-lettering (the default) and the namespace-topic behaviour of
//! behaviour.md#namespace-topics. The profile is the topic's kind: a namespace topic
//! (written with Event Grid's `publisherType`/`eventRetentionInDays`, or with eg's older
//! `deliveryProfile: NamespaceTopic`) has the `NamespaceTopic` profile, and each
//! subscription copies its topic's profile when written.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum DeliveryProfile {
    /// Event Grid custom topics: the 10 s … 12 h schedule, up to 30 attempts, 24 h TTL.
    #[default]
    CustomTopic,
    /// Event Grid namespace topics (seed 002): immediate, 10 s, 30 s, 1 min, 5 min, then
    /// every 5 min; up to 10 attempts; TTL up to 7 days; CloudEvents only.
    NamespaceTopic,
}

impl DeliveryProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CustomTopic => "CustomTopic",
            Self::NamespaceTopic => "NamespaceTopic",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [Self::CustomTopic, Self::NamespaceTopic]
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(raw))
    }
}
