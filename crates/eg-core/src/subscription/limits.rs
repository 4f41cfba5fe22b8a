//! A subscription's `deliveryLimits` (eg's own; Event Grid has none): how many requests
//! per second its endpoint may receive, with a burst, and how many may be in flight at
//! once. The cap holds for the subscription as a whole, whatever the number of senders:
//! the machine is `crate::throttle`, run in Redis by eg-store.
//!
//! Requests are counted, not events: a partner's quota counts requests, and with
//! `maxEventsPerBatch` 1 they are the same. Built only valid ([`DeliveryLimits::parse`]),
//! stored in the catalog in the layout it is written in, shown back the same way.

use super::fields::only_known;
use crate::api_error::InvalidField;
use crate::json::json_type;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::num::NonZeroU32;
use std::time::Duration;

/// The fields of `deliveryLimits`.
const FIELDS: [&str; 3] = ["requestsPerSecond", "burst", "maxConcurrentRequests"];
/// `requestsPerSecond` in thousandths: 0.01 to 100,000 per second.
const MIN_RATE_MILLI: u64 = 10;
const MAX_RATE_MILLI: u64 = 100_000_000;
const MAX_BURST: u32 = 10_000;
const MAX_CONCURRENT: u32 = 10_000;

/// A subscription's delivery limits: at least one of a rate and a concurrency cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryLimits {
    /// Requests per 1,000 seconds (thousandths of `requestsPerSecond`, so the type is `Eq`
    /// and the stored form exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate_milli: Option<u64>,
    /// Requests that may go at once after an idle spell (the GCRA's bucket size).
    burst: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_concurrent: Option<NonZeroU32>,
}

impl DeliveryLimits {
    /// Reads `deliveryLimits` (its problems are located in it: `burst: must be …`).
    pub fn parse(v: &Value) -> Result<Self, InvalidField> {
        let Value::Object(map) = v else {
            return Err(InvalidField::new(
                "",
                format!("must be an object, got {}", json_type(v)),
            ));
        };
        only_known(map, &FIELDS, "")?;
        let rate_milli = rate(map)?;
        let default_burst = rate_milli.map_or(1, |r| {
            u32::try_from(r.div_ceil(1000)).unwrap_or(MAX_BURST).clamp(1, MAX_BURST)
        });
        let burst = ranged(map, "burst", MAX_BURST)?;
        if burst.is_some() && rate_milli.is_none() {
            return Err(InvalidField::new(
                "burst",
                "needs requestsPerSecond: a burst is how many requests may go at once at that rate",
            ));
        }
        let max_concurrent = ranged(map, "maxConcurrentRequests", MAX_CONCURRENT)?.and_then(NonZeroU32::new);
        if rate_milli.is_none() && max_concurrent.is_none() {
            return Err(InvalidField::new(
                "",
                "give requestsPerSecond, maxConcurrentRequests or both (or leave deliveryLimits out for no limit)",
            ));
        }
        Ok(Self {
            rate_milli,
            burst: burst.unwrap_or(default_burst),
            max_concurrent,
        })
    }

    /// Reads an optional `deliveryLimits` of `props`, refusing it in queue mode.
    pub(super) fn read(props: &Map<String, Value>, path: &str, push: bool) -> Result<Option<Self>, InvalidField> {
        let field = if path.is_empty() {
            "deliveryLimits".to_owned()
        } else {
            format!("{path}.deliveryLimits")
        };
        match props.get("deliveryLimits") {
            None | Some(Value::Null) => Ok(None),
            Some(_) if !push => Err(InvalidField::new(
                field,
                "limits apply to push delivery; a queue's consumers pace themselves",
            )),
            Some(v) => Self::parse(v).map(Some).map_err(|e| e.within(&field)),
        }
    }

    /// The limits as the API shows them.
    pub fn to_json(&self) -> Value {
        let mut shown = json!({});
        if let Some(rate) = self.rate_milli {
            shown["requestsPerSecond"] = json!(rate as f64 / 1000.0);
            shown["burst"] = json!(self.burst);
        }
        if let Some(n) = self.max_concurrent {
            shown["maxConcurrentRequests"] = json!(n.get());
        }
        shown
    }

    /// Time between two requests at the cap; `None` without a rate.
    pub fn interval(&self) -> Option<Duration> {
        self.rate_milli.map(|r| Duration::from_nanos(1_000_000_000_000 / r))
    }

    /// `requestsPerSecond`, if set.
    pub fn requests_per_second(&self) -> Option<f64> {
        self.rate_milli.map(|r| r as f64 / 1000.0)
    }

    pub fn burst(&self) -> u32 {
        self.burst
    }

    pub fn max_concurrent(&self) -> Option<NonZeroU32> {
        self.max_concurrent
    }
}

fn rate(map: &Map<String, Value>) -> Result<Option<u64>, InvalidField> {
    let field = "requestsPerSecond";
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let milli = v.as_f64().map(|f| (f * 1000.0).round());
            match milli {
                Some(m) if (MIN_RATE_MILLI as f64..=MAX_RATE_MILLI as f64).contains(&m) => Ok(Some(m as u64)),
                _ => Err(InvalidField::new(
                    field,
                    format!("must be a number between 0.01 and 100000 (decimals allowed), got {v}"),
                )),
            }
        }
    }
}

fn ranged(map: &Map<String, Value>, field: &str, max: u32) -> Result<Option<u32>, InvalidField> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=u64::from(max)).contains(&n) => Ok(Some(n as u32)),
            _ => Err(InvalidField::new(
                field,
                format!("must be an integer between 1 and {max}, got {v}"),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(v: Value) -> Result<DeliveryLimits, InvalidField> {
        DeliveryLimits::parse(&v)
    }

    #[test]
    fn a_decimal_rate_reads_with_a_default_burst_of_one_second() {
        let l = parse(json!({"requestsPerSecond": 2.5})).unwrap();
        assert_eq!(l.requests_per_second(), Some(2.5));
        assert_eq!(l.burst(), 3);
        assert_eq!(l.interval(), Some(Duration::from_millis(400)));
        assert_eq!(l.max_concurrent(), None);
        let slow = parse(json!({"requestsPerSecond": 0.01})).unwrap();
        assert_eq!((slow.burst(), slow.interval()), (1, Some(Duration::from_secs(100))));
    }

    #[test]
    fn limits_show_back_as_written() {
        let written = json!({"requestsPerSecond": 50.0, "burst": 100, "maxConcurrentRequests": 8});
        let l = parse(written.clone()).unwrap();
        assert_eq!(l.to_json(), written);
        assert_eq!(parse(l.to_json()).unwrap(), l);
        let stored = serde_json::to_value(l).unwrap();
        assert_eq!(serde_json::from_value::<DeliveryLimits>(stored).unwrap(), l);
    }

    #[test]
    fn out_of_range_values_are_refused_naming_the_field() {
        let cases = [
            (json!({"requestsPerSecond": 0}), "requestsPerSecond"),
            (json!({"requestsPerSecond": 0.001}), "requestsPerSecond"),
            (json!({"requestsPerSecond": 100001}), "requestsPerSecond"),
            (json!({"requestsPerSecond": "50"}), "requestsPerSecond"),
            (json!({"requestsPerSecond": 5, "burst": 0}), "burst"),
            (json!({"requestsPerSecond": 5, "burst": 10001}), "burst"),
            (json!({"requestsPerSecond": 5, "burst": 1.5}), "burst"),
            (json!({"maxConcurrentRequests": 0}), "maxConcurrentRequests"),
            (json!({"maxConcurrentRequests": 10001}), "maxConcurrentRequests"),
            (json!({"burst": 5}), "burst"),
            (json!({"requestsPerSec": 5}), "requestsPerSec"),
            (json!({}), ""),
            (json!(5), ""),
        ];
        for (body, field) in cases {
            let e = parse(body.clone()).unwrap_err();
            assert_eq!(e.field, field, "{body}: {e}");
        }
    }
}
