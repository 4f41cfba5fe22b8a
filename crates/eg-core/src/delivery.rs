//! One delivery: one event owed to one subscription, and what has happened to it so
//! far. It travels through the ready streams and retry sets; how it is written there is
//! `eg-store`'s business (its `codec` module), not this type's.

use crate::outcome::OutcomeName;
use crate::schema::StoredFormat;
use crate::time::UnixMillis;
use crate::trace_context::TraceContext;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Unique per delivery; makes retry-set members distinct.
    pub id: String,
    /// Key of the stored event payload (shared by every delivery of the event).
    pub event_key: String,
    /// Topic key (case-folded name).
    pub topic: String,
    /// Subscription key (case-folded name).
    pub subscription: String,
    /// Attempts made so far; 0 before the first.
    pub attempts: u32,
    /// When the publish was accepted; the time-to-live counts from here.
    pub published_at: UnixMillis,
    /// The latest attempt; `None` before the first.
    pub last: Option<LastAttempt>,
    /// How the stored event is written (Event Grid schema, the common case, by default).
    pub format: StoredFormat,
    /// The catalog version the event was matched against: a process whose catalog
    /// copy is older refreshes it before acting on the delivery (read-your-writes for
    /// subscription changes, in every tier). 0 in records written before it existed.
    pub catalog_version: u64,
    /// The event's own `id` (as published), for delivery history and dead-letter
    /// listings without parsing the stored body. Empty in records written before it existed.
    pub event_id: String,
    /// The event's `dataVersion` (an Event Grid event's, or a custom event's envelope's),
    /// stamped at the publish so an Event Grid schema delivery's `aeg-data-version` is
    /// not read out of the stored event. `None` for CloudEvents and in records written
    /// before it existed (the renderer then reads the stored event).
    pub data_version: Option<String>,
    /// The line id of its ordering key (`ordering::LineId`) when its subscription orders
    /// delivery per key: the delivery waits in that line until every delivery of the key
    /// accepted before it is settled. `None` for unordered deliveries.
    pub line: Option<String>,
    /// The W3C trace context the event was published in (its CloudEvents
    /// `traceparent` attribute, or the publish request's headers, continued by the
    /// publish span when eg records one), so its attempts join that trace. `None` for
    /// events published without one, and in records written before it existed.
    pub trace: Option<TraceContext>,
    /// The replay job that enqueued it (`replay::REPLAY_HEADER`), for a replayed event;
    /// `None` for every delivery of a publish, and in records written before it existed.
    pub replay: Option<String>,
}

/// The outcome of the latest attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastAttempt {
    pub outcome: OutcomeName,
    pub status: Option<u16>,
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
            data_version: None,
            line: None,
            trace: None,
            replay: None,
        }
    }

    /// The same delivery of an event published in the trace context `trace`.
    pub fn in_trace(self, trace: Option<TraceContext>) -> Self {
        Self { trace, ..self }
    }

    /// The same delivery, waiting in the ordering line `line` (none: unordered).
    pub fn in_line(self, line: Option<String>) -> Self {
        Self { line, ..self }
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

    /// The same delivery of an event whose `dataVersion` is `version` (`None`: not known).
    pub fn with_data_version(self, version: Option<String>) -> Self {
        Self {
            data_version: version,
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

    /// The same delivery held back because its endpoint is on probation
    /// (behaviour.md#protecting-endpoints-and-the-system): no attempt is charged; the last
    /// outcome says why it waited.
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
