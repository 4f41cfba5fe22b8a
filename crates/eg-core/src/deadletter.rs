//! Dead-letter records (spec §6, Event Grid schema) and where they are written.

use crate::delivery::Delivery;
use crate::outcome::OutcomeName;
use crate::policy::DeadLetterReason;
use crate::subscription::Subscription;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Everything the dead-letter worker needs besides the event itself. It travels
/// through Redis from whichever tier decided to dead-letter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterEntry {
    pub container_name: String,
    /// The subscription's name as the user spelled it.
    pub subscription: String,
    pub topic: String,
    pub delivery_id: String,
    pub reason: DeadLetterReason,
    pub delivery_attempts: u32,
    pub last_outcome: Option<OutcomeName>,
    pub last_http_status_code: Option<u16>,
    pub publish_time: UnixMillis,
    pub last_attempt_time: Option<UnixMillis>,
    pub dead_lettered_at: UnixMillis,
}

impl DeadLetterEntry {
    /// The entry for `delivery` of `subscription`, dead-lettered into `container_name` now.
    pub fn for_delivery(
        delivery: &Delivery,
        subscription: &Subscription,
        container_name: &str,
        reason: DeadLetterReason,
        now: UnixMillis,
    ) -> Self {
        Self {
            container_name: container_name.to_owned(),
            subscription: subscription.name.as_str().to_owned(),
            topic: subscription.topic.as_str().to_owned(),
            delivery_id: delivery.id.clone(),
            reason,
            delivery_attempts: delivery.attempts,
            last_outcome: delivery.last.map(|l| l.outcome),
            last_http_status_code: delivery.last.and_then(|l| l.status),
            publish_time: delivery.published_at,
            last_attempt_time: delivery.last.map(|l| l.at),
            dead_lettered_at: now,
        }
    }

    /// The record written to the destination: the event with the dead-letter fields beside it.
    pub fn record(&self, event_json: &str) -> Value {
        let mut record = match serde_json::from_str::<Value>(event_json) {
            Ok(Value::Object(map)) => map,
            // Stored events are always objects; keep whatever it is rather than lose it.
            Ok(other) => serde_json::Map::from_iter([("data".to_owned(), other)]),
            Err(_) => serde_json::Map::from_iter([("data".to_owned(), Value::String(event_json.to_owned()))]),
        };
        record.insert("deadLetterReason".into(), self.reason.as_str().into());
        record.insert("deliveryAttempts".into(), self.delivery_attempts.into());
        record.insert(
            "lastDeliveryOutcome".into(),
            self.last_outcome.map_or("Canceled", OutcomeName::as_str).into(),
        );
        if let Some(code) = self.last_http_status_code {
            record.insert("lastHttpStatusCode".into(), code.into());
        }
        record.insert("publishTime".into(), self.publish_time.to_rfc3339().into());
        record.insert(
            "lastDeliveryAttemptTime".into(),
            self.last_attempt_time
                .unwrap_or(self.dead_lettered_at)
                .to_rfc3339()
                .into(),
        );
        Value::Object(record)
    }

    /// The folder, relative to the dead-letter root, of a file holding this record:
    /// `<container>/<SUBSCRIPTION>/YYYY/M/D/H` (UTC, not zero-padded).
    pub fn folder(&self) -> Vec<String> {
        use chrono::{Datelike, Timelike};
        let at = self.dead_lettered_at.to_datetime();
        vec![
            self.container_name.clone(),
            self.subscription.to_ascii_uppercase(),
            at.year().to_string(),
            at.month().to_string(),
            at.day().to_string(),
            at.hour().to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry() -> DeadLetterEntry {
        DeadLetterEntry {
            container_name: "dl".into(),
            subscription: "Billing".into(),
            topic: "orders".into(),
            delivery_id: "d".into(),
            reason: DeadLetterReason::MaxDeliveryAttemptsExceeded,
            delivery_attempts: 3,
            last_outcome: Some(OutcomeName::GenericError),
            last_http_status_code: Some(500),
            publish_time: UnixMillis(0),
            last_attempt_time: Some(UnixMillis(1_000)),
            // 2026-03-04T05:06:07Z
            dead_lettered_at: UnixMillis(1_772_600_767_000),
        }
    }

    #[test]
    fn record_puts_dead_letter_fields_beside_the_event() {
        let r = entry().record(r#"{"id":"1","eventType":"A","data":{"k":1}}"#);
        assert_eq!(r["id"], "1");
        assert_eq!(r["data"], json!({"k":1}));
        assert_eq!(r["deadLetterReason"], "MaxDeliveryAttemptsExceeded");
        assert_eq!(r["deliveryAttempts"], 3);
        assert_eq!(r["lastDeliveryOutcome"], "GenericError");
        assert_eq!(r["lastHttpStatusCode"], 500);
        assert_eq!(r["publishTime"], "1970-01-01T00:00:00.000Z");
        assert_eq!(r["lastDeliveryAttemptTime"], "1970-01-01T00:00:01.000Z");
    }

    #[test]
    fn folder_is_laid_out_like_a_blob_container() {
        assert_eq!(entry().folder(), ["dl", "BILLING", "2026", "3", "4", "5"]);
    }
}
