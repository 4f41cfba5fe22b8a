//! An event's fate: every way a delivery can end other than by reaching its endpoint, as
//! typed reasons, and the [`Decision`] that chooses between them
//! (behaviour.md#dead-lettering).
//!
//! The tiers never spell a reason themselves: they take it from here, and its
//! [`as_str`](DeadLetterReason::as_str) is at once the Event Grid name (in a dead-letter
//! record's `deadLetterReason`, in a history entry) and the `reason` label of
//! `DeadLetteredCount` and `DroppedEventCount`. `docs/delivery.md` lists them all.

use crate::time::UnixMillis;
use crate::validation::Provisioning;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Why a delivery was dead-lettered (Event Grid's `deadLetterReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DeadLetterReason {
    /// Every attempt the subscription allows has been made.
    MaxDeliveryAttemptsExceeded,
    /// The event's time-to-live ended before it was delivered.
    TimeToLiveExceeded,
    /// The endpoint's answer is not worth retrying (a 400, say), or the endpoint never
    /// consented to receive events.
    NonRetriableFailure,
    /// Pull delivery: the event was received as often as the queue subscription's
    /// `maxDeliveryCount` allows and its last lock ended (expired or released) without
    /// an acknowledgement.
    MaxDeliveryCountExceeded,
    /// Pull delivery: a consumer rejected the event.
    Rejected,
}

impl DeadLetterReason {
    /// Its Event Grid name, which is also its metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxDeliveryAttemptsExceeded => "MaxDeliveryAttemptsExceeded",
            Self::TimeToLiveExceeded => "TimeToLiveExceeded",
            Self::NonRetriableFailure => "NonRetriableFailure",
            Self::MaxDeliveryCountExceeded => "MaxDeliveryCountExceeded",
            Self::Rejected => "Rejected",
        }
    }
}

impl DeadLetterReason {
    /// Where dead-lettering for this reason leads, given the subscription's dead-letter
    /// destination: `Ok` with it, or, where there is none, `Err` with the drop it becomes,
    /// labelled with this same reason (as Event Grid does). The one place that rule is
    /// written: the sender's verdicts and pull delivery's endings both go through it.
    pub fn dead_letter_to<D>(self, destination: Option<D>) -> Result<D, DropReason> {
        destination.ok_or(DropReason::NoDeadLetterDestination(self))
    }
}

impl fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a delivery ended without reaching anyone and without a dead-letter record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// It would have been dead-lettered, but the subscription has no dead-letter
    /// destination: labelled with the dead-letter reason itself, as Event Grid does.
    NoDeadLetterDestination(DeadLetterReason),
    /// Its subscription was deleted before the delivery was attempted.
    SubscriptionDeleted,
    /// The stored event is gone (its record expired or was removed).
    EventMissing,
    /// The stored event cannot be rendered in the subscription's schema (a corrupt
    /// record): nobody could ever deliver it.
    EventUnrenderable,
    /// Its dead-letter record could not be written for longer than the dead-letter
    /// worker waits.
    DeadLetterDestinationUnavailable,
}

impl DropReason {
    /// Its name in a history entry, which is also its metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoDeadLetterDestination(reason) => reason.as_str(),
            Self::SubscriptionDeleted => "SubscriptionDeleted",
            Self::EventMissing => "EventMissing",
            Self::EventUnrenderable => "EventUnrenderable",
            Self::DeadLetterDestinationUnavailable => "DeadLetterDestinationUnavailable",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What eg-core's policy decides about a delivery after (or before) an attempt. The
/// sender turns it into its verdict; a delivery that ends for another reason (its
/// subscription deleted, its event gone) is dropped without a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Delivered,
    RetryAt(UnixMillis),
    /// To the subscription's dead-letter destination; where it has none, the delivery is
    /// dropped instead ([`DeadLetterReason::dead_letter_to`]).
    DeadLetter(DeadLetterReason),
}

/// How soon a delivery waiting for its endpoint's consent looks again.
pub(crate) const CONSENT_RECHECK: Duration = Duration::from_secs(10);

/// Whether deliveries may go to a subscription's endpoint, by its consent (validation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// Validated: deliveries go ahead.
    Given,
    /// The endpoint may still consent: wait, uncharged, and look again at this time.
    AwaitedUntil(UnixMillis),
    /// Refused for good (or the window to consent ended): dead-letter.
    Refused(DeadLetterReason),
}

/// Deliveries queued before the subscription moved to an endpoint that has not
/// consented yet must not reach it: they wait for the consent, or are dead-lettered once
/// it has been refused for good.
pub fn consent(provisioning: &Provisioning, now: UnixMillis) -> Consent {
    match provisioning {
        Provisioning::Succeeded => Consent::Given,
        Provisioning::AwaitingManualAction { deadline, .. } if now < *deadline => {
            Consent::AwaitedUntil((*deadline).min(now.plus(CONSENT_RECHECK)))
        }
        Provisioning::AwaitingManualAction { .. } | Provisioning::Failed { .. } => {
            Consent::Refused(DeadLetterReason::NonRetriableFailure)
        }
    }
}

/// A dead-letter record that has waited `give_up_after` for its destination since it was
/// dead-lettered is dropped: `Some` with the reason when that time has come.
pub fn dead_letter_given_up(
    dead_lettered_at: UnixMillis,
    now: UnixMillis,
    give_up_after: Duration,
) -> Option<DropReason> {
    (now.since(dead_lettered_at) >= give_up_after).then_some(DropReason::DeadLetterDestinationUnavailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_dead_letter_destination_dead_lettering_becomes_a_drop_for_the_same_reason() {
        let reason = DeadLetterReason::TimeToLiveExceeded;
        assert_eq!(reason.dead_letter_to(Some("dl")), Ok("dl"));
        let dropped = reason.dead_letter_to(None::<&str>);
        assert_eq!(dropped, Err(DropReason::NoDeadLetterDestination(reason)));
        let Err(drop) = dropped else { unreachable!() };
        assert_eq!(drop.as_str(), "TimeToLiveExceeded", "labelled as Event Grid does");
    }

    #[test]
    fn every_reason_has_its_documented_name() {
        let names: Vec<&str> = [
            DropReason::SubscriptionDeleted,
            DropReason::EventMissing,
            DropReason::EventUnrenderable,
            DropReason::DeadLetterDestinationUnavailable,
            DropReason::NoDeadLetterDestination(DeadLetterReason::NonRetriableFailure),
        ]
        .into_iter()
        .map(DropReason::as_str)
        .collect();
        assert_eq!(
            names,
            [
                "SubscriptionDeleted",
                "EventMissing",
                "EventUnrenderable",
                "DeadLetterDestinationUnavailable",
                "NonRetriableFailure"
            ]
        );
        // The stored form of a dead-letter reason is its name.
        let stored = serde_json::to_string(&DeadLetterReason::MaxDeliveryAttemptsExceeded).unwrap();
        assert_eq!(stored, "\"MaxDeliveryAttemptsExceeded\"");
        let docs = include_str!("../../../docs/delivery.md");
        for name in names
            .iter()
            .chain(&["MaxDeliveryAttemptsExceeded", "TimeToLiveExceeded"])
        {
            assert!(docs.contains(&format!("`{name}`")), "{name} is not in docs/delivery.md");
        }
    }

    #[test]
    fn deliveries_wait_for_consent_and_are_dead_lettered_once_it_is_refused() {
        let now = UnixMillis(1_000_000);
        assert_eq!(consent(&Provisioning::Succeeded, now), Consent::Given);
        let awaiting = |deadline| Provisioning::AwaitingManualAction {
            code: "c".into(),
            deadline,
            reason: String::new(),
        };
        assert_eq!(
            consent(&awaiting(UnixMillis(2_000_000)), now),
            Consent::AwaitedUntil(now.plus(CONSENT_RECHECK)),
            "looks again soon"
        );
        assert_eq!(
            consent(&awaiting(UnixMillis(1_003_000)), now),
            Consent::AwaitedUntil(UnixMillis(1_003_000)),
            "never later than the deadline"
        );
        let refused = Consent::Refused(DeadLetterReason::NonRetriableFailure);
        assert_eq!(consent(&awaiting(now), now), refused, "the window has ended");
        assert_eq!(consent(&Provisioning::Failed { reason: "no".into() }, now), refused);
    }

    #[test]
    fn a_dead_letter_record_is_given_up_after_its_wait() {
        let wait = Duration::from_secs(60);
        assert_eq!(dead_letter_given_up(UnixMillis(0), UnixMillis(59_999), wait), None);
        assert_eq!(
            dead_letter_given_up(UnixMillis(0), UnixMillis(60_000), wait),
            Some(DropReason::DeadLetterDestinationUnavailable)
        );
    }
}
