//! A topic's archive (archive.md): every event the topic accepts is written, once, to an
//! object store, and deleted from there after a retention. Written as eg's own
//! `properties.archive = {"destination", "retentionDays"}`; the destination is the same
//! JSON a subscription's `deadLetterDestination` takes, read by the same parser, so the
//! archive reaches the same named accounts and connections dead letters do.
//!
//! What the archive's objects are called lives here too, as pure functions, so the writer
//! (eg-deadletter), the retention sweep and a later replay agree on one layout:
//! `archive/<topic>/<yyyy>/<mm>/<dd>/<hh>/<mm>/p<N>-<first stream id>.jsonl.gz`.

use crate::api_error::InvalidField;
use crate::dead_letter_destination::DeadLetterDestination;
use crate::destination::NamedConnections;
use crate::json::json_type;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The shortest retention: a day, so an archive is never emptied before an operator
/// could look at it.
pub const MIN_ARCHIVE_RETENTION_DAYS: u16 = 1;
/// The longest retention: ten years, a bound on what a mistyped number can keep.
pub const MAX_ARCHIVE_RETENTION_DAYS: u16 = 3650;

/// The top folder of every archive object, so one container can hold dead letters and
/// archives side by side.
pub const ARCHIVE_ROOT: &str = "archive";

/// A topic's archive: where its accepted events are written and how long they stay.
/// Built valid from a `PUT` body ([`Archive::from_json`]); stored in the catalog as is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Archive {
    pub destination: DeadLetterDestination,
    pub retention_days: u16,
}

impl Archive {
    /// Reads `{"destination", "retentionDays"}` (errors named from there down).
    pub fn from_json(v: &Value) -> Result<Self, InvalidField> {
        let Value::Object(map) = v else {
            return Err(InvalidField::new(
                "",
                format!("must be an object, got {}", json_type(v)),
            ));
        };
        if let Some(unknown) = map
            .keys()
            .find(|k| !["destination", "retentionDays"].contains(&k.as_str()))
        {
            return Err(InvalidField::new(
                unknown.as_str(),
                "not a known archive property (destination, retentionDays)",
            ));
        }
        let destination = match map.get("destination") {
            None | Some(Value::Null) => {
                return Err(InvalidField::new(
                    "destination",
                    "is required: the store the archive is written to, as a deadLetterDestination is written",
                ));
            }
            Some(d) => DeadLetterDestination::from_json(d).map_err(|e| e.within("destination"))?,
        };
        let bounds =
            format!("a whole number of days from {MIN_ARCHIVE_RETENTION_DAYS} to {MAX_ARCHIVE_RETENTION_DAYS}");
        let retention_days = match map.get("retentionDays") {
            None | Some(Value::Null) => {
                return Err(InvalidField::new(
                    "retentionDays",
                    format!("is required: how long archived events are kept, {bounds}"),
                ));
            }
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|d| u16::try_from(d).ok())
                .filter(|d| (MIN_ARCHIVE_RETENTION_DAYS..=MAX_ARCHIVE_RETENTION_DAYS).contains(d))
                .ok_or_else(|| InvalidField::new("retentionDays", format!("must be {bounds}, got {n}")))?,
            Some(other) => {
                return Err(InvalidField::new(
                    "retentionDays",
                    format!("must be {bounds}, got {}", json_type(other)),
                ));
            }
        };
        Ok(Self {
            destination,
            retention_days,
        })
    }

    /// The archive as the topic resource shows it (and a `PUT` takes it back).
    pub fn to_json(&self) -> Value {
        json!({"destination": self.destination.to_json(), "retentionDays": self.retention_days})
    }

    /// Refuses a destination naming an account or connection eg has no configuration for
    /// (field names from `properties.archive` down).
    pub fn check_configured(&self, stores: &impl NamedConnections) -> Result<(), InvalidField> {
        self.destination
            .check_configured(stores)
            .map_err(|e| e.within("destination"))
    }

    /// How long objects are kept, in milliseconds.
    pub fn retention_millis(&self) -> i64 {
        i64::from(self.retention_days) * 24 * 3600 * 1000
    }
}

/// The folder of one minute of a topic's archive: `archive/<topic>/<yyyy>/<mm>/<dd>/<hh>/<mm>`
/// (UTC), the minute `at` falls in. A replay lists the minutes of its window; the
/// retention sweep deletes whole minutes.
pub fn minute_prefix(topic: &str, at: UnixMillis) -> String {
    let t = at.to_datetime();
    format!("{ARCHIVE_ROOT}/{topic}/{}", t.format("%Y/%m/%d/%H/%M"))
}

/// The object holding entries of `topic` accepted in the minute of `at` on partition
/// `partition`, named after the first entry's stream id: a partition's objects of one
/// minute sort in stream order, and the name says where in the stream it starts.
pub fn object_name(topic: &str, at: UnixMillis, partition: u16, first_stream_id: &str) -> String {
    format!("{}/p{partition}-{first_stream_id}.jsonl.gz", minute_prefix(topic, at))
}

/// The minute an object name of `topic` belongs to (its path's `<yyyy>/<mm>/<dd>/<hh>/<mm>`),
/// in ms since the epoch; `None` for a name outside that layout (left alone by the sweep).
pub fn object_minute(topic: &str, name: &str) -> Option<UnixMillis> {
    let rest = name.strip_prefix(&format!("{ARCHIVE_ROOT}/{topic}/"))?;
    let parts: Vec<&str> = rest.splitn(6, '/').collect();
    if parts.len() != 6 {
        return None;
    }
    let number = |s: &str| s.parse::<u32>().ok();
    let date = chrono::NaiveDate::from_ymd_opt(
        i32::try_from(number(parts[0])?).ok()?,
        number(parts[1])?,
        number(parts[2])?,
    )?;
    let time = date.and_hms_opt(number(parts[3])?, number(parts[4])?, 0)?;
    Some(UnixMillis(time.and_utc().timestamp_millis()))
}

/// Whether an object of the minute `minute` is past a retention of `retention_ms` at
/// `now`: its whole minute ended longer ago than the retention.
pub fn expired(minute: UnixMillis, retention_ms: i64, now: UnixMillis) -> bool {
    minute.0.saturating_add(60_000).saturating_add(retention_ms) <= now.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(v: Value) -> Result<Archive, InvalidField> {
        Archive::from_json(&v)
    }

    fn local() -> Value {
        json!({"endpointType": "LocalDirectory", "properties": {"containerName": "archive-box"}})
    }

    #[test]
    fn a_destination_and_a_retention_are_read_and_shown_back() {
        let a = written(json!({"destination": local(), "retentionDays": 30})).unwrap();
        assert_eq!(a.retention_days, 30);
        assert_eq!(a.destination.container_name, "archive-box");
        assert_eq!(written(a.to_json()).unwrap(), a);
        assert_eq!(a.retention_millis(), 30 * 86_400_000);
    }

    #[test]
    fn refusals_name_the_field_and_the_problem() {
        let e = written(json!({"retentionDays": 3})).unwrap_err();
        assert_eq!(e.field, "destination");
        let e = written(json!({"destination": local()})).unwrap_err();
        assert_eq!(e.field, "retentionDays");
        for bad in [json!(0), json!(3651), json!(1.5), json!(-1)] {
            let e = written(json!({"destination": local(), "retentionDays": bad})).unwrap_err();
            assert_eq!(e.field, "retentionDays", "{bad}");
            assert!(e.problem.contains("1 to 3650"), "{}", e.problem);
        }
        let e = written(json!({"destination": local(), "retentionDays": "7"})).unwrap_err();
        assert!(e.problem.contains("got a string"), "{}", e.problem);
        let e =
            written(json!({"destination": {"endpointType": "S3", "properties": {}}, "retentionDays": 7})).unwrap_err();
        assert!(e.field.starts_with("destination.properties"), "{}", e.field);
        let e = written(json!({"destination": local(), "retentionDays": 7, "schema": "x"})).unwrap_err();
        assert_eq!(e.field, "schema");
        assert_eq!(written(json!([])).unwrap_err().field, "");
    }

    #[test]
    fn objects_are_named_by_topic_minute_partition_and_first_id() {
        // 2026-11-28T18:46:30Z
        let at = UnixMillis(1_795_891_590_000);
        let name = object_name("orders", at, 3, "1795891590000-0");
        assert_eq!(name, "archive/orders/2026/11/28/18/46/p3-1795891590000-0.jsonl.gz");
        assert_eq!(object_minute("orders", &name), Some(UnixMillis(1_795_891_560_000)));
        assert_eq!(object_minute("other", &name), None);
        assert_eq!(object_minute("orders", "archive/orders/2026/11/x"), None);
    }

    #[test]
    fn a_minute_expires_once_all_of_it_is_older_than_the_retention() {
        let minute = UnixMillis(600_000);
        let day = 86_400_000;
        assert!(!expired(minute, day, UnixMillis(600_000 + 60_000 + day - 1)));
        assert!(expired(minute, day, UnixMillis(600_000 + 60_000 + day)));
    }
}
