//! Idempotent publish (deduplication.md): a topic's duplicate detection window, written
//! with Azure Service Bus's name for the same feature
//! (`properties.duplicateDetectionHistoryTimeWindow`), and the identity an accepted
//! event is remembered by within it. The check itself is the store's, in the atomic step
//! that stores the events.

use crate::event::AcceptedEvent;
use crate::json::json_type;
use crate::schema::InputSchema;
use crate::time::{iso8601_duration, parse_iso8601_duration};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// Service Bus's own minimum: a shorter window would not outlast a publisher's retry
/// after a timed-out request, which is the duplicate the window is for.
pub const MIN_DUPLICATE_WINDOW: Duration = Duration::from_secs(20);
/// Every remembered id costs Redis memory for the whole window (deduplication.md#costs),
/// so a window is bounded; a day outlasts any publisher's retries.
pub const MAX_DUPLICATE_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// How long a topic remembers the events it accepted, so that one published again within
/// it is answered as accepted and not stored twice. Built valid from a `PUT` body
/// ([`WrittenWindow`]); stored in the catalog as milliseconds and loaded as is, so a
/// bound changed later never makes a stored topic unreadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "u64", into = "u64")]
pub struct DuplicateWindow(Duration);

impl DuplicateWindow {
    pub fn duration(self) -> Duration {
        self.0
    }

    /// The window in milliseconds, as the store's script takes it.
    pub fn millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }

    /// The window as the topic resource shows it (`PT10M`).
    pub fn to_iso8601(self) -> String {
        iso8601_duration(self.0)
    }
}

impl From<u64> for DuplicateWindow {
    fn from(millis: u64) -> Self {
        Self(Duration::from_millis(millis))
    }
}

impl From<DuplicateWindow> for u64 {
    fn from(window: DuplicateWindow) -> u64 {
        window.millis()
    }
}

/// `properties.duplicateDetectionHistoryTimeWindow` as written: an ISO 8601 duration
/// between [`MIN_DUPLICATE_WINDOW`] and [`MAX_DUPLICATE_WINDOW`].
#[derive(Deserialize)]
#[serde(try_from = "Value")]
pub(super) struct WrittenWindow(pub(super) DuplicateWindow);

impl TryFrom<Value> for WrittenWindow {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        let bounds = "an ISO 8601 duration from PT20S to P1D, such as PT10M";
        let Value::String(raw) = value else {
            return Err(format!("must be {bounds}, got {}", json_type(&value)));
        };
        let window = parse_iso8601_duration(&raw)?;
        if !(MIN_DUPLICATE_WINDOW..=MAX_DUPLICATE_WINDOW).contains(&window) {
            return Err(format!("must be {bounds}, got {raw:?}"));
        }
        Ok(Self(DuplicateWindow(window)))
    }
}

/// What makes two events of a topic the same event: the `id` for Event Grid schema and
/// custom events (Event Grid's own uniqueness), `source` and `id` together for
/// CloudEvents (the CloudEvents spec: "Producers MUST ensure that source + id is unique
/// for each distinct event"). The CloudEvents pair is written as a JSON array, so no
/// choice of characters in either part can make two pairs read alike.
pub fn duplicate_identity(schema: InputSchema, event: &AcceptedEvent) -> String {
    match schema {
        InputSchema::CloudEventSchemaV1_0 => {
            let pair = [event.source().unwrap_or_default(), event.id()];
            // Serializing two strings cannot fail.
            serde_json::to_string(&pair).unwrap_or_default()
        }
        InputSchema::EventGridSchema | InputSchema::CustomEventSchema => event.id().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::TopicName;
    use crate::publish::{PublishLimits, PublishedBatch};
    use crate::{Topic, UnixMillis};
    use serde_json::json;

    fn written(value: Value) -> Result<DuplicateWindow, String> {
        WrittenWindow::try_from(value).map(|w| w.0)
    }

    #[test]
    fn a_window_from_twenty_seconds_to_a_day_is_taken() {
        assert_eq!(written(json!("PT10M")).unwrap().duration(), Duration::from_secs(600));
        assert_eq!(written(json!("PT20S")).unwrap().millis(), 20_000);
        assert_eq!(written(json!("P1D")).unwrap().to_iso8601(), "P1D");
    }

    #[test]
    fn a_window_out_of_bounds_or_not_a_duration_is_refused_with_what_was_found() {
        for (value, words) in [
            (json!("PT19S"), "from PT20S to P1D, such as PT10M, got \"PT19S\""),
            (json!("P2D"), "got \"P2D\""),
            (json!("PT0S"), "got \"PT0S\""),
            (json!("10 minutes"), "not an ISO 8601 duration"),
            (json!("P1M"), "years and months are not allowed"),
            (json!(600), "got a number"),
        ] {
            let err = written(value.clone()).unwrap_err();
            assert!(err.contains(words), "{value}: {err}");
        }
    }

    #[test]
    fn the_catalog_keeps_the_window_in_milliseconds() {
        let window = written(json!("PT10M")).unwrap();
        assert_eq!(serde_json::to_value(window).unwrap(), json!(600_000));
        assert_eq!(
            serde_json::from_value::<DuplicateWindow>(json!(600_000)).unwrap(),
            window
        );
    }

    #[test]
    fn event_grid_events_are_the_same_by_id_and_cloud_events_by_source_and_id() {
        let grid = |id: &str| {
            let body = format!(
                r#"[{{"id":"{id}","subject":"s","eventType":"t","eventTime":"2026-11-21T10:00:00Z","data":{{}}}}]"#
            );
            PublishedBatch::parse_event_grid(body.as_bytes(), "/topics/orders", PublishLimits::default())
                .unwrap()
                .events
                .remove(0)
        };
        assert_eq!(duplicate_identity(InputSchema::EventGridSchema, &grid("a1")), "a1");

        let cloud = |source: &str, id: &str| {
            let body = format!(r#"[{{"specversion":"1.0","id":"{id}","source":"{source}","type":"t"}}]"#);
            let topic = Topic::from_resource(
                TopicName::parse("orders").unwrap(),
                &json!({"properties": {"inputSchema": "CloudEventSchemaV1_0"}}),
            )
            .unwrap();
            let batch = "application/cloudevents-batch+json";
            PublishedBatch::parse(
                body.as_bytes(),
                Some(batch),
                &topic,
                UnixMillis(0),
                PublishLimits::default(),
            )
            .unwrap()
            .events
            .remove(0)
        };
        let schema = InputSchema::CloudEventSchemaV1_0;
        assert_eq!(duplicate_identity(schema, &cloud("/shop", "a1")), r#"["/shop","a1"]"#);
        assert_ne!(
            duplicate_identity(schema, &cloud("/shop", "a1")),
            duplicate_identity(schema, &cloud("/stock", "a1")),
            "one id from two sources is two events"
        );
    }
}
