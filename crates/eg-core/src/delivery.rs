//! One delivery: one event owed to one subscription, and what has happened to it so
//! far. This is the record that travels through the ready streams and retry sets.

use crate::outcome::OutcomeName;
use crate::schema::StoredFormat;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};

/// Field names are short because the record is written once per delivery per retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// Unique per delivery; makes retry-set members distinct.
    #[serde(rename = "id")]
    pub id: String,
    /// Key of the stored event payload (shared by every delivery of the event).
    #[serde(rename = "ev")]
    pub event_key: String,
    /// Topic key (case-folded name).
    #[serde(rename = "t")]
    pub topic: String,
    /// Subscription key (case-folded name).
    #[serde(rename = "s")]
    pub subscription: String,
    /// Attempts made so far; 0 before the first.
    #[serde(rename = "n")]
    pub attempts: u32,
    /// When the publish was accepted; the time-to-live counts from here.
    #[serde(rename = "p")]
    pub published_at: UnixMillis,
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    pub last: Option<LastAttempt>,
    /// How the stored event is written; absent for Event Grid schema, the common case.
    #[serde(rename = "f", default, skip_serializing_if = "StoredFormat::is_event_grid")]
    pub format: StoredFormat,
    /// The catalog version the event was matched against: a process whose catalog
    /// copy is older refreshes it before acting on the delivery (read-your-writes for
    /// subscription changes, in every tier). 0 in records written before it existed.
    #[serde(rename = "cv", default, skip_serializing_if = "is_zero")]
    pub catalog_version: u64,
    /// The event's own `id` (as published), for delivery history and dead-letter
    /// listings without parsing the stored body. Empty in records written before it existed.
    #[serde(rename = "e", default, skip_serializing_if = "String::is_empty")]
    pub event_id: String,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastAttempt {
    #[serde(rename = "o")]
    pub outcome: OutcomeName,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(rename = "at")]
    pub at: UnixMillis,
}

impl Delivery {
    pub fn new(id: String, event_key: String, topic: String, subscription: String, published_at: UnixMillis) -> Self {
        Self {
            id,
            event_key,
            topic,
            subscription,
            attempts: 0,
            published_at,
            last: None,
            format: StoredFormat::EventGrid,
            catalog_version: 0,
            event_id: String::new(),
        }
    }

    /// The same delivery of the event whose own id is `event_id`.
    pub fn for_event(self, event_id: impl Into<String>) -> Self {
        Self {
            event_id: event_id.into(),
            ..self
        }
    }

    /// The same delivery, matched against catalog version `version`.
    pub fn matched_at(self, version: u64) -> Self {
        Self {
            catalog_version: version,
            ..self
        }
    }

    /// The same delivery of an event stored in `format`.
    pub fn with_format(self, format: StoredFormat) -> Self {
        Self { format, ..self }
    }

    /// The same delivery after one more attempt that ended in `last`.
    pub fn after_attempt(&self, last: LastAttempt) -> Self {
        Self {
            attempts: self.attempts.saturating_add(1),
            last: Some(last),
            ..self.clone()
        }
    }

    /// The same delivery held back because its endpoint is on probation (spec §8): no
    /// attempt is charged; the last outcome says why it waited.
    pub fn held_back(&self, now: UnixMillis) -> Self {
        let last = match self.last {
            Some(last) => LastAttempt {
                outcome: OutcomeName::Probation,
                ..last
            },
            None => LastAttempt {
                outcome: OutcomeName::Probation,
                status: None,
                at: now,
            },
        };
        Self {
            last: Some(last),
            ..self.clone()
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_json(raw: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json() {
        let d =
            Delivery::new("d1".into(), "e1".into(), "t".into(), "s".into(), UnixMillis(5)).after_attempt(LastAttempt {
                outcome: OutcomeName::Busy,
                status: Some(503),
                at: UnixMillis(9),
            });
        assert_eq!(d.attempts, 1);
        assert_eq!(Delivery::from_json(&d.to_json()).unwrap(), d);
    }

    #[test]
    fn holding_back_charges_no_attempt() {
        let d = Delivery::new("d1".into(), "e1".into(), "t".into(), "s".into(), UnixMillis(5));
        let held = d.held_back(UnixMillis(7));
        assert_eq!(held.attempts, 0);
        assert_eq!(held.last.unwrap().outcome, OutcomeName::Probation);
        let tried = d.after_attempt(LastAttempt {
            outcome: OutcomeName::Busy,
            status: Some(503),
            at: UnixMillis(9),
        });
        let held = tried.held_back(UnixMillis(20));
        assert_eq!(held.attempts, 1);
        assert_eq!(held.last.unwrap().status, Some(503));
        assert_eq!(held.last.unwrap().at, UnixMillis(9));
    }
}
