//! Replaying a time window of a topic's archive into one subscription (archive.md,
//! "Replay"): what a replay request may say, where a job stands, and how the archive's
//! objects and lines are read in order — pure functions, so the API (eg-ingress) and the
//! worker (eg-deadletter) agree on them.
//!
//! A job reads the window's objects in archive order (minute, partition, first stream id)
//! and remembers its [`ReplayPosition`]: the object and line it reached and, per archive
//! partition, the stream id of the last entry it handled. The position moves in the same
//! atomic step that enqueues a chunk's events, so a job that stops anywhere goes on from
//! there and replays no archived entry twice (an entry an archive retry wrote into a
//! second object has the same stream id, and is skipped).

use crate::api_error::InvalidField;
use crate::event::AcceptedEvent;
use crate::filter::EventFilter;
use crate::json::json_type;
use crate::schema::StoredFormat;
use crate::time::UnixMillis;
use crate::topic::ARCHIVE_ROOT;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Events per second a replay enqueues when the request does not say.
pub const DEFAULT_REPLAY_RATE: u32 = 1_000;
/// The most a request may ask for.
pub const MAX_REPLAY_RATE: u32 = 100_000;
/// The longest window one replay may cover: a year of archive, a bound on what a typo
/// in `from` sets going.
pub const MAX_REPLAY_WINDOW_MS: i64 = 366 * 24 * 3_600_000;
/// The fields a replay request may have.
pub const REPLAY_FIELDS: [&str; 4] = ["from", "to", "filter", "maxEventsPerSecond"];
/// The header (and broker message header) a replayed event's delivery carries: the job's id.
pub const REPLAY_HEADER: &str = "aeg-replay-job";

/// What a replay request asked for, as the job keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplaySpec {
    /// The topic and subscription keys (case-folded names).
    pub topic: String,
    pub subscription: String,
    /// The window of acceptance times: `from` inclusive, `to` exclusive.
    pub from: UnixMillis,
    pub to: UnixMillis,
    /// The request's own filter, applied besides the subscription's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<EventFilter>,
    pub max_events_per_second: u32,
    pub created_at: UnixMillis,
}

impl ReplaySpec {
    /// Reads a replay request `{"from", "to"?, "filter"?, "maxEventsPerSecond"?}` for
    /// the subscription `topic`/`subscription` (keys) at `now`. `to` defaults to `now`;
    /// a window may not end in the future (the archive holds only what was accepted).
    pub fn from_request(body: &Value, topic: &str, subscription: &str, now: UnixMillis) -> Result<Self, InvalidField> {
        let Value::Object(fields) = body else {
            return Err(InvalidField::new(
                "",
                format!("must be a JSON object, got {}", json_type(body)),
            ));
        };
        if let Some(unknown) = fields.keys().find(|k| !REPLAY_FIELDS.contains(&k.as_str())) {
            return Err(InvalidField::new(
                unknown.as_str(),
                format!("not a replay field (known: {})", REPLAY_FIELDS.join(", ")),
            ));
        }
        let from = match fields.get("from") {
            Some(v) => time("from", v)?,
            None => return Err(InvalidField::new("from", "is required: an RFC 3339 time")),
        };
        let to = fields.get("to").map(|v| time("to", v)).transpose()?.unwrap_or(now);
        if to <= from {
            return Err(InvalidField::new(
                "to",
                format!("must be after from ({}), got {}", from.to_rfc3339(), to.to_rfc3339()),
            ));
        }
        if to > now {
            return Err(InvalidField::new(
                "to",
                format!(
                    "must not be in the future (now is {}): the archive holds only what was accepted",
                    now.to_rfc3339()
                ),
            ));
        }
        if to.0 - from.0 > MAX_REPLAY_WINDOW_MS {
            return Err(InvalidField::new("from", "the window may cover at most 366 days"));
        }
        let filter = fields
            .get("filter")
            .map(|v| EventFilter::from_json(v).map_err(|e| e.within("filter")))
            .transpose()?;
        let max_events_per_second = match fields.get("maxEventsPerSecond") {
            None => DEFAULT_REPLAY_RATE,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=u64::from(MAX_REPLAY_RATE)).contains(n))
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    InvalidField::new(
                        "maxEventsPerSecond",
                        format!("must be a whole number from 1 to {MAX_REPLAY_RATE}, got {v}"),
                    )
                })?,
        };
        Ok(Self {
            topic: topic.to_owned(),
            subscription: subscription.to_owned(),
            from,
            to,
            filter,
            max_events_per_second,
            created_at: now,
        })
    }

    /// Whether an archived line accepted at `accepted_at` lies in the window.
    pub fn in_window(&self, accepted_at: i64) -> bool {
        (self.from.0..self.to.0).contains(&accepted_at)
    }

    /// The hour folders of the topic's archive the window touches, oldest first
    /// (`archive/<topic>/<yyyy>/<mm>/<dd>/<hh>/`): a replay lists them one at a time.
    pub fn hour_folders(&self) -> Vec<String> {
        const HOUR: i64 = 3_600_000;
        let first = self.from.0.div_euclid(HOUR);
        let last = (self.to.0 - 1).div_euclid(HOUR);
        (first..=last)
            .map(|hour| {
                let t = UnixMillis(hour * HOUR).to_datetime();
                format!("{ARCHIVE_ROOT}/{}/{}/", self.topic, t.format("%Y/%m/%d/%H"))
            })
            .collect()
    }
}

fn time(field: &str, v: &Value) -> Result<UnixMillis, InvalidField> {
    let raw = v
        .as_str()
        .ok_or_else(|| InvalidField::new(field, format!("must be an RFC 3339 time string, got {}", json_type(v))))?;
    chrono::DateTime::parse_from_rfc3339(raw)
        .map(|t| UnixMillis(t.timestamp_millis()))
        .map_err(|_| InvalidField::new(field, format!("{raw:?} is not an RFC 3339 time (2026-11-29T03:00:00Z)")))
}

/// Events per second a job enqueues for `subscription`: the request's rate, or less when
/// the subscription's `deliveryLimits.requestsPerSecond` (times the events one request
/// carries) allows less, so a replay does not heap up in Redis what the sender may not
/// send faster anyway.
pub fn replay_rate(spec: &ReplaySpec, subscription: &crate::Subscription) -> f64 {
    let requested = f64::from(spec.max_events_per_second);
    let limited = subscription
        .limits
        .as_ref()
        .and_then(|l| l.requests_per_second())
        .map(|per_second| per_second * f64::from(subscription.batching.max_events_per_batch.max(1)));
    limited.map_or(requested, |l| requested.min(l)).max(0.001)
}

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayState {
    Running,
    Succeeded,
    Cancelled,
    Failed,
}

impl ReplayState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Cancelled => "Cancelled",
            Self::Failed => "Failed",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [Self::Running, Self::Succeeded, Self::Cancelled, Self::Failed]
            .into_iter()
            .find(|s| s.as_str() == raw)
    }
}

/// How far a job got through the archive (see the module doc). Compared whole by the
/// step that moves it, so two copies working one job cannot both enqueue a chunk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayPosition {
    /// The object being read ("" before the first).
    #[serde(rename = "o")]
    pub object: String,
    /// Lines of it already handled.
    #[serde(rename = "l")]
    pub line: usize,
    /// Per archive partition, the stream id of the last entry handled.
    #[serde(rename = "h", default)]
    pub last: BTreeMap<u16, String>,
}

impl ReplayPosition {
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn decode(raw: &str) -> Option<Self> {
        if raw.is_empty() {
            return Some(Self::default());
        }
        serde_json::from_str(raw).ok()
    }

    /// Whether the entry `stream_id` of archive partition `partition` was handled
    /// already (it is not after the last one handled there).
    pub fn handled(&self, partition: u16, stream_id: &str) -> bool {
        match (self.last.get(&partition), parse_stream_id(stream_id)) {
            (Some(last), Some(id)) => parse_stream_id(last).is_some_and(|last| id <= last),
            _ => false,
        }
    }

    /// Lines of `object` to skip: those handled before (0 for an object not started).
    pub fn lines_done(&self, object: &str) -> usize {
        if self.object == object { self.line } else { 0 }
    }
}

/// A stream id `<ms>-<seq>` as numbers, so ids order as Redis orders them.
fn parse_stream_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// Where an archive object falls in archive order: its minute, partition and first
/// stream id, read from its name (`…/<mm>/p<N>-<stream id>.jsonl.gz`); `None` for a
/// name outside the layout (not replayed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectOrder {
    pub minute: i64,
    pub partition: u16,
    first: (u64, u64),
}

impl ObjectOrder {
    pub fn of(topic: &str, name: &str) -> Option<Self> {
        let minute = crate::topic::archive_object_minute(topic, name)?;
        let file = name.rsplit('/').next()?.strip_suffix(".jsonl.gz")?;
        let (partition, first) = file.strip_prefix('p')?.split_once('-')?;
        Some(Self {
            minute: minute.0,
            partition: partition.parse().ok()?,
            first: parse_stream_id(first)?,
        })
    }
}

/// The objects of `names` (of `topic`) a job at `position` has still to read, in archive
/// order: each in the window's minutes, and not before the object it is reading.
pub fn objects_to_read<'a>(spec: &ReplaySpec, names: &'a [String], position: &ReplayPosition) -> Vec<&'a str> {
    let started = ObjectOrder::of(&spec.topic, &position.object);
    let first_minute = spec.from.0.div_euclid(60_000) * 60_000;
    let mut ordered: Vec<(ObjectOrder, &str)> = names
        .iter()
        .filter_map(|name| ObjectOrder::of(&spec.topic, name).map(|order| (order, name.as_str())))
        .filter(|(order, _)| (first_minute..spec.to.0).contains(&order.minute))
        .filter(|(order, name)| started.is_none_or(|s| *order > s || (*order == s && *name == position.object)))
        .collect();
    ordered.sort();
    ordered.into_iter().map(|(_, name)| name).collect()
}

/// One line of an archive object (`{"streamId", "acceptedAt", "event"}`).
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedLine {
    pub stream_id: String,
    pub accepted_at: i64,
    pub event: Map<String, Value>,
}

impl ArchivedLine {
    pub fn parse(line: &str) -> Result<Self, String> {
        let mut v: Map<String, Value> =
            serde_json::from_str(line).map_err(|e| format!("an archive line is not JSON: {e}"))?;
        let stream_id = v
            .get("streamId")
            .and_then(Value::as_str)
            .filter(|id| parse_stream_id(id).is_some())
            .ok_or("an archive line has no streamId")?
            .to_owned();
        let accepted_at = v
            .get("acceptedAt")
            .and_then(Value::as_i64)
            .ok_or("an archive line has no acceptedAt")?;
        let Some(Value::Object(event)) = v.remove("event") else {
            return Err("an archive line has no event object".to_owned());
        };
        Ok(Self {
            stream_id,
            accepted_at,
            event,
        })
    }

    /// The event as the publish path would have accepted it from a topic storing events
    /// as `format`: what the subscription's filters and the delivery read.
    pub fn accepted(&self, format: StoredFormat) -> AcceptedEvent {
        let text = |name: &str| {
            self.event
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let event_type = match format {
            StoredFormat::CloudEvents => text("type"),
            _ => text("eventType"),
        };
        AcceptedEvent::new(self.event.clone(), event_type, text("subject"))
    }
}

/// What a job shows through the API and the status page.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayView {
    pub id: String,
    pub spec: ReplaySpec,
    pub state: ReplayState,
    /// Archived entries of the window read, and of those, how many the filters passed
    /// (replayed) and how many they held back.
    pub read: u64,
    pub replayed: u64,
    pub filtered: u64,
    pub problem: Option<String>,
    pub updated_at: Option<UnixMillis>,
    pub finished_at: Option<UnixMillis>,
}

impl ReplayView {
    /// Events replayed per second over the job's life so far (to its end once finished).
    pub fn rate(&self, now: UnixMillis) -> f64 {
        let end = self.finished_at.unwrap_or(now);
        let seconds = (end.0 - self.spec.created_at.0) as f64 / 1000.0;
        if seconds <= 0.0 {
            0.0
        } else {
            self.replayed as f64 / seconds
        }
    }

    pub fn to_json(&self, now: UnixMillis) -> Value {
        let mut v = json!({
            "id": self.id,
            "topic": self.spec.topic,
            "subscription": self.spec.subscription,
            "from": self.spec.from.to_rfc3339(),
            "to": self.spec.to.to_rfc3339(),
            "maxEventsPerSecond": self.spec.max_events_per_second,
            "state": self.state.as_str(),
            "createdAt": self.spec.created_at.to_rfc3339(),
            "progress": {
                "read": self.read,
                "replayed": self.replayed,
                "filtered": self.filtered,
                "eventsPerSecond": (self.rate(now) * 10.0).round() / 10.0,
            },
        });
        if let Some(filter) = &self.spec.filter {
            v["filter"] = serde_json::to_value(filter).unwrap_or(Value::Null);
        }
        if let Some(problem) = &self.problem {
            v["problem"] = json!(problem);
        }
        if let Some(at) = self.finished_at {
            v["finishedAt"] = json!(at.to_rfc3339());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMillis = UnixMillis(1_795_932_000_000); // 2026-11-29T06:00:00Z

    fn spec(body: Value) -> Result<ReplaySpec, InvalidField> {
        ReplaySpec::from_request(&body, "orders", "audit", NOW)
    }

    #[test]
    fn a_request_is_read_with_defaults_and_bad_fields_are_named() {
        let s = spec(json!({"from": "2026-11-29T00:00:00Z"})).unwrap();
        assert_eq!(s.to, NOW);
        assert_eq!(s.max_events_per_second, DEFAULT_REPLAY_RATE);
        assert!(s.filter.is_none());
        let field = |body: Value| spec(body).unwrap_err().field;
        assert_eq!(field(json!({})), "from");
        assert_eq!(field(json!({"from": "yesterday"})), "from");
        assert_eq!(
            field(json!({"from": "2026-11-29T00:00:00Z", "to": "2026-11-28T00:00:00Z"})),
            "to"
        );
        assert_eq!(
            field(json!({"from": "2026-11-29T00:00:00Z", "to": "2099-01-01T00:00:00Z"})),
            "to"
        );
        assert_eq!(field(json!({"from": "2020-01-01T00:00:00Z"})), "from");
        assert_eq!(
            field(json!({"from": "2026-11-29T00:00:00Z", "maxEventsPerSecond": 0})),
            "maxEventsPerSecond"
        );
        assert_eq!(field(json!({"from": "2026-11-29T00:00:00Z", "until": 1})), "until");
        assert_eq!(
            field(json!({"from": "2026-11-29T00:00:00Z", "filter": {"subjectBeginsWith": 3}})),
            "filter.subjectBeginsWith"
        );
        let filtered = spec(json!({"from": "2026-11-29T00:00:00Z", "filter": {"includedEventTypes": ["A"]}})).unwrap();
        assert!(filtered.filter.is_some());
    }

    #[test]
    fn hour_folders_cover_the_window_and_no_more() {
        let s = spec(json!({"from": "2026-11-29T01:59:00Z", "to": "2026-11-29T03:00:00Z"})).unwrap();
        assert_eq!(
            s.hour_folders(),
            ["archive/orders/2026/11/29/01/", "archive/orders/2026/11/29/02/"]
        );
    }

    #[test]
    fn objects_are_read_in_archive_order_from_the_position_on() {
        let s = spec(json!({"from": "2026-11-29T01:00:30Z", "to": "2026-11-29T01:02:00Z"})).unwrap();
        let names: Vec<String> = [
            "archive/orders/2026/11/29/01/01/p10-1795914060000-0.jsonl.gz",
            "archive/orders/2026/11/29/01/01/p2-1795914061000-5.jsonl.gz",
            "archive/orders/2026/11/29/01/01/p2-1795914061000-10.jsonl.gz",
            "archive/orders/2026/11/29/01/00/p0-1795914000000-0.jsonl.gz",
            "archive/orders/2026/11/29/01/02/p0-1795914120000-0.jsonl.gz",
            "archive/orders/2026/11/29/00/59/p0-1795913940000-0.jsonl.gz",
            "archive/orders/2026/11/29/01/01/notes.txt",
        ]
        .map(str::to_owned)
        .to_vec();
        let all = objects_to_read(&s, &names, &ReplayPosition::default());
        assert_eq!(
            all,
            [
                "archive/orders/2026/11/29/01/00/p0-1795914000000-0.jsonl.gz",
                "archive/orders/2026/11/29/01/01/p2-1795914061000-5.jsonl.gz",
                "archive/orders/2026/11/29/01/01/p2-1795914061000-10.jsonl.gz",
                "archive/orders/2026/11/29/01/01/p10-1795914060000-0.jsonl.gz",
            ]
        );
        let position = ReplayPosition {
            object: all[2].to_owned(),
            line: 7,
            last: BTreeMap::new(),
        };
        assert_eq!(objects_to_read(&s, &names, &position), &all[2..]);
        assert_eq!(position.lines_done(all[2]), 7);
        assert_eq!(position.lines_done(all[3]), 0);
    }

    #[test]
    fn an_entry_at_or_before_the_partitions_last_is_handled() {
        let position = ReplayPosition {
            object: String::new(),
            line: 0,
            last: BTreeMap::from([(3, "1795914061000-9".to_owned())]),
        };
        assert!(position.handled(3, "1795914061000-9"));
        assert!(position.handled(3, "1795914060999-20"));
        assert!(!position.handled(3, "1795914061000-10"));
        assert!(!position.handled(4, "1795914061000-0"));
        assert_eq!(ReplayPosition::decode(&position.encode()), Some(position));
        assert_eq!(ReplayPosition::decode(""), Some(ReplayPosition::default()));
    }

    #[test]
    fn archive_lines_are_read_and_bad_ones_say_why() {
        let line = ArchivedLine::parse(
            r#"{"streamId":"1795914061000-0","acceptedAt":1795914061000,"event":{"id":"o-1","type":"T","subject":"s"}}"#,
        )
        .unwrap();
        assert!(s_in(&line));
        let accepted = line.accepted(StoredFormat::CloudEvents);
        assert_eq!(
            (accepted.id(), accepted.event_type.as_str(), accepted.subject.as_str()),
            ("o-1", "T", "s")
        );
        assert!(ArchivedLine::parse("{").unwrap_err().contains("not JSON"));
        assert!(
            ArchivedLine::parse(r#"{"acceptedAt":1,"event":{}}"#)
                .unwrap_err()
                .contains("streamId")
        );
    }

    fn s_in(line: &ArchivedLine) -> bool {
        spec(json!({"from": "2026-11-29T01:00:00Z", "to": "2026-11-29T01:02:00Z"}))
            .unwrap()
            .in_window(line.accepted_at)
    }
}
