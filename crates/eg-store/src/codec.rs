//! The wire forms of what eg keeps in Redis, each defined once, next to the scripts that
//! share them. No other crate spells a stored field name or builds a stored record:
//! `eg-core`'s types are the domain, this module is how they look in Redis.
//!
//! - A **delivery record** ([`encode_delivery`], [`decode_delivery`]): the JSON of one
//!   `eg_core::Delivery` with short field names, as it sits in a ready stream entry
//!   (field [`DELIVERY_FIELD`]), a retry set, a paused set or a redrive.
//! - A **ready entry** ([`EntryLayout`]): the `EventHash` layout is the record alone, its event in the
//!   event hash; the `Carried` layout ([`ENTRY_LAYOUT_FIELD`] = 2) also carries the event's body
//!   ([`ENTRY_BODY_FIELD`]), written when an event has exactly one push delivery, so
//!   that delivery needs no event hash at all. Entries without the layout field are
//!   the `EventHash` layout (everything written before layouts were numbered).
//! - A **dead-letter record** ([`decode_dead_letter`]): the dead-letter entry JSON, a
//!   newline, and the event body. `settle.lua` joins the two (the body is read inside
//!   the script); `redrive.lua` splits them again.
//! - The **event record**: a hash of the event body ([`EVENT_BODY_FIELD`]) and the
//!   count of its outstanding deliveries ([`EVENT_OUTSTANDING_FIELD`]).
//! - The **settle call** (`SettleCall`): the positional KEYS and ARGV that
//!   `settle.lua` reads, built in one place whose layout the script's header mirrors.
//! - A **delivered-log field** ([`shared_step_record`]): a history step, or the name
//!   (`#<entry id>`) of a record field of the same bucket holding a step several events
//!   share (`settle_steps.lua` writes them).
//! - The **probation record** ([`probation`]): an endpoint's hash, its field names and
//!   [`decode_probation_record`].
//! - The **stats bucket** ([`stats`]): bucket numbers ([`bucket_of`], [`window_span`])
//!   and the `<kind>|<label>` fields ([`encode_stats_field`], [`decode_stats_field`]).
//! - The **heartbeat** ([`heartbeat`]): one field per running tier process.

pub mod heartbeat;
pub mod probation;
pub(crate) mod publish;
mod settle;
pub mod stats;

pub use probation::decode_probation_record;
pub(crate) use publish::PublishCall;
pub use publish::{ArchiveAppend, DuplicateCheck, EventToStore, Routes, WhenFull};
pub(crate) use settle::SettleCall;
pub use stats::{Kind, bucket_of, decode_stats_field, encode_stats_field, window_span};

use crate::keyspace::Partition;
use eg_core::deadletter::DeadLetterEntry;
use eg_core::schema::StoredFormat;
use eg_core::{Delivery, LastAttempt, OutcomeName, TraceContext, UnixMillis};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The stream entry field holding a delivery record (ready streams).
pub const DELIVERY_FIELD: &str = "d";
/// The ready entry field naming its layout ([`EntryLayout`]; absent: `EventHash` layout).
pub const ENTRY_LAYOUT_FIELD: &str = "v";
/// The ready entry field carrying the event's body (`Carried` layout).
pub const ENTRY_BODY_FIELD: &str = "b";
/// The stream entry field holding a dead-letter record (dead-letter streams).
pub const DEAD_LETTER_FIELD: &str = "r";
/// The event hash field holding the event's body.
pub const EVENT_BODY_FIELD: &str = "b";
/// The event hash field counting the event's deliveries still outstanding (written only
/// by scripts: `publish.lua` sets it, `settle.lua` and `cancel_retry.lua` count down).
pub const EVENT_OUTSTANDING_FIELD: &str = "r";
/// What separates a dead-letter record's entry from its event body. Entry JSON never
/// holds a raw newline, so the first one is always the separator.
pub const DEAD_LETTER_SEPARATOR: char = '\n';

/// A carried retry as a retry-set member holds it (`record\nbody`, `settle_steps.lua`),
/// split into its record and body; `None` for a record alone. `promote.lua` splits it
/// into a `Carried` entry; a scheduler of an earlier release writes it whole into the
/// entry's record field, which a reader splits with this. Records are JSON on one line.
pub fn split_carried_retry(member: &str) -> Option<(&str, &str)> {
    member.split_once('\n')
}

/// What starts a delivered-log value that names a shared step's record instead of
/// holding a step (a step is JSON, so it starts with `{`).
pub const SHARED_STEP_MARK: char = '#';

/// The record field a delivered-log value names, when it names one (a step several
/// events of one settle call share: a delivered batch); `None` when it is a step.
pub fn shared_step_record(logged: &str) -> Option<&str> {
    logged.starts_with(SHARED_STEP_MARK).then_some(logged)
}

/// How a ready entry holds its event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryLayout {
    /// The delivery record alone; the body is in the event hash (shared by every
    /// delivery of the event, counted down as they finish).
    EventHash = 1,
    /// The record and the event's body: the event's only delivery carries it, from the
    /// publish to its end, through its retries (the retry-set member carries it too), until
    /// a pause moves it into an event hash.
    Carried = 2,
    /// An event with several push deliveries, as published: the body and one fan-out
    /// record ([`encode_fan_out`]) naming the matched subscriptions. The first reader
    /// expands it (`expand_fan_out.lua`) into an event hash and one `EventHash` entry per
    /// delivery, so a pending fan-out costs one body and a few bytes per subscription.
    FanOut = 3,
    /// Several events of one publish request, each with exactly one push delivery, all to
    /// one subscription that batches (`maxEventsPerBatch` > 1): delivery `i`'s record in
    /// field `d<i>` ([`batch_record_field`]) and its event's body in `b<i>`
    /// ([`batch_body_field`]), as many as the subscription sends in one request. A sender
    /// hands out the deliveries from the entry, each holding it like a fan-out's
    /// ([`crate::settlement::SharedHold`]), so one publish, one read and one settle call
    /// serve the whole batch; a take-back splits it into `Carried` entries
    /// (`expand_fan_out.lua`).
    Batch = 4,
}

impl EntryLayout {
    /// The layout a ready entry names (`None` in the field: `EventHash` layout). `Err` holds a
    /// layout this release does not know (written by a newer one).
    pub fn of(field: Option<&str>) -> Result<Self, String> {
        match field {
            None | Some("1") => Ok(Self::EventHash),
            Some("2") => Ok(Self::Carried),
            Some("3") => Ok(Self::FanOut),
            Some("4") => Ok(Self::Batch),
            Some(other) => Err(other.to_owned()),
        }
    }

    /// The value of [`ENTRY_LAYOUT_FIELD`] for this layout.
    pub fn field(self) -> &'static str {
        match self {
            Self::EventHash => "1",
            Self::Carried => "2",
            Self::FanOut => "3",
            Self::Batch => "4",
        }
    }
}

/// The field of a `Batch` entry holding delivery `index`'s record.
pub fn batch_record_field(index: usize) -> String {
    format!("d{index}")
}

/// The field of a `Batch` entry holding delivery `index`'s event body.
pub fn batch_body_field(index: usize) -> String {
    format!("b{index}")
}

/// A stored record that does not have the form this version reads.
#[derive(Debug, thiserror::Error)]
pub enum Malformed {
    #[error("not a delivery record: {0}")]
    Delivery(serde_json::Error),
    #[error("a dead-letter record without the newline between entry and event")]
    NoSeparator,
    #[error("the entry of a dead-letter record does not parse: {0}")]
    DeadLetterEntry(serde_json::Error),
}

/// A delivery record as stored. Field names are short because the record is written
/// once per delivery per attempt; optional fields are left out at their default, so
/// records written before they existed still read.
#[derive(Serialize, Deserialize)]
struct DeliveryRecord<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    /// Left out of a carried entry's record when it equals `id` ([`encode_carried_delivery`]).
    #[serde(rename = "ev", default, skip_serializing_if = "str::is_empty", borrow)]
    event_key: Cow<'a, str>,
    #[serde(rename = "t", borrow)]
    topic: Cow<'a, str>,
    #[serde(rename = "s", borrow)]
    subscription: Cow<'a, str>,
    /// Left out of a carried entry's record when 0 ([`encode_carried_delivery`]).
    #[serde(rename = "n", default, skip_serializing_if = "Option::is_none")]
    attempts: Option<u32>,
    #[serde(rename = "p")]
    published_at: i64,
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    last: Option<LastAttemptRecord>,
    #[serde(rename = "f", default, skip_serializing_if = "StoredFormat::is_event_grid")]
    format: StoredFormat,
    #[serde(rename = "cv", default, skip_serializing_if = "is_zero")]
    catalog_version: u64,
    #[serde(rename = "e", default, skip_serializing_if = "str::is_empty", borrow)]
    event_id: Cow<'a, str>,
    #[serde(rename = "dv", default, skip_serializing_if = "Option::is_none", borrow)]
    data_version: Option<Cow<'a, str>>,
    /// The ordering line it waits in; absent for unordered deliveries (older readers skip it).
    #[serde(rename = "ol", default, skip_serializing_if = "Option::is_none", borrow)]
    line: Option<Cow<'a, str>>,
    /// The event's W3C `traceparent`; absent for events published without one (older
    /// readers skip it, and a record they write again goes on without it).
    #[serde(rename = "tp", default, skip_serializing_if = "Option::is_none", borrow)]
    traceparent: Option<Cow<'a, str>>,
    /// Its `tracestate`, when there is one.
    #[serde(rename = "ts", default, skip_serializing_if = "Option::is_none", borrow)]
    tracestate: Option<Cow<'a, str>>,
    /// The replay job that enqueued it; absent for published events (older readers skip it).
    #[serde(rename = "rp", default, skip_serializing_if = "Option::is_none", borrow)]
    replay: Option<Cow<'a, str>>,
}

#[derive(Serialize, Deserialize)]
struct LastAttemptRecord {
    /// A name every tier knows ([`OutcomeName::known_to_every_tier`]): an older tier
    /// refuses a record whose `o` it cannot read.
    #[serde(rename = "o")]
    outcome: OutcomeName,
    /// The outcome itself when `o` stands in for a newer one; read before `o`.
    #[serde(rename = "on", default, skip_serializing_if = "Option::is_none")]
    newer_outcome: Option<OutcomeName>,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    at: i64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The stored form of a delivery. Every field is written, so every release since
/// records were versioned reads it (retry sets, paused sets and redrives hold these).
pub fn encode_delivery(delivery: &Delivery) -> String {
    encode_record(delivery, Brevity::Full)
}

/// The stored form of a delivery whose ready entry carries its event's body (`Carried` layout,
/// written by a publish): `ev` is left out when the event key is the delivery's own id,
/// and `n` when no attempt was made yet, ~45 bytes less per pending delivery. Only a
/// release that reads the `Carried` layout ever sees one, so no older reader meets the short form.
pub fn encode_carried_delivery(delivery: &Delivery) -> String {
    encode_record(delivery, Brevity::Carried)
}

/// Which fields a record may leave out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Brevity {
    Full,
    Carried,
}

fn encode_record(delivery: &Delivery, brevity: Brevity) -> String {
    let short = brevity == Brevity::Carried;
    let record = DeliveryRecord {
        id: Cow::Borrowed(&delivery.id),
        event_key: if short && delivery.event_key == delivery.id {
            Cow::Borrowed("")
        } else {
            Cow::Borrowed(&delivery.event_key)
        },
        topic: Cow::Borrowed(&delivery.topic),
        subscription: Cow::Borrowed(&delivery.subscription),
        attempts: (!short || delivery.attempts > 0).then_some(delivery.attempts),
        published_at: delivery.published_at.0,
        last: delivery.last.map(|last| LastAttemptRecord {
            outcome: last.outcome.known_to_every_tier(),
            newer_outcome: (last.outcome.known_to_every_tier() != last.outcome).then_some(last.outcome),
            status: last.status,
            at: last.at.0,
        }),
        format: delivery.format,
        catalog_version: delivery.catalog_version,
        event_id: Cow::Borrowed(&delivery.event_id),
        data_version: delivery.data_version.as_deref().map(Cow::Borrowed),
        line: delivery.line.as_deref().map(Cow::Borrowed),
        traceparent: delivery.trace.as_ref().map(|t| Cow::Owned(t.traceparent())),
        tracestate: delivery.trace.as_ref().and_then(|t| t.tracestate()).map(Cow::Borrowed),
        replay: delivery.replay.as_deref().map(Cow::Borrowed),
    };
    // Strings and numbers only: serializing cannot fail.
    serde_json::to_string(&record).unwrap_or_default()
}

/// A delivery from its stored form.
pub fn decode_delivery(raw: &str) -> Result<Delivery, Malformed> {
    let record: DeliveryRecord<'_> = serde_json::from_str(raw).map_err(Malformed::Delivery)?;
    let event_key = if record.event_key.is_empty() {
        record.id.clone().into_owned()
    } else {
        record.event_key.into_owned()
    };
    Ok(Delivery {
        id: record.id.into_owned(),
        event_key,
        topic: record.topic.into_owned(),
        subscription: record.subscription.into_owned(),
        attempts: record.attempts.unwrap_or(0),
        published_at: UnixMillis(record.published_at),
        last: record.last.map(|last| LastAttempt {
            outcome: last.newer_outcome.unwrap_or(last.outcome),
            status: last.status,
            at: UnixMillis(last.at),
        }),
        format: record.format,
        catalog_version: record.catalog_version,
        event_id: record.event_id.into_owned(),
        data_version: record.data_version.map(Cow::into_owned),
        line: record.line.map(Cow::into_owned),
        trace: stored_trace(record.traceparent.as_deref(), record.tracestate.as_deref()),
        replay: record.replay.map(Cow::into_owned),
    })
}

/// The trace context of a record's `tp` and `ts` (a malformed one, which eg never
/// writes, is as good as none: tracing must not make a delivery unreadable).
fn stored_trace(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<TraceContext> {
    TraceContext::parse(traceparent?, tracestate)
}

/// What separates a line member's delivery id from its record, and the parts of a
/// settle item's line marker (neither ids, keys nor record JSON hold a raw newline).
pub const LINE_SEPARATOR: char = '\n';
/// What starts a settle item's last argument when the delivery waits in a line.
pub const LINE_MARKER: char = 'L';

/// A member of an ordering line (`publish.lua` pushes it, `line_steps.lua` promotes it):
/// the delivery id, a newline, its full record. The id lets a settle check that the
/// head is its own delivery without parsing the record.
pub fn line_member(delivery: &Delivery) -> String {
    format!("{}{LINE_SEPARATOR}{}", delivery.id, encode_delivery(delivery))
}

/// A settle or cancel call's word for an ordered delivery (`line_steps.lua` reads it):
/// `L<delivery id>\n<line key>\n<waiting hash key>\n<line index key>`; `None` when
/// unordered.
pub fn line_marker(partition: &Partition, delivery: &Delivery) -> Option<String> {
    let line = delivery.line.as_deref()?;
    let subscription = format!("{}/{}", delivery.topic, delivery.subscription);
    Some(format!(
        "{LINE_MARKER}{}{LINE_SEPARATOR}{}{LINE_SEPARATOR}{}{LINE_SEPARATOR}{}",
        delivery.id,
        partition.line(&subscription, line),
        partition.lines_waiting(),
        partition.line_index()
    ))
}

/// The id of delivery `index` (from 0) of a fanned-out event: its event key, a dash,
/// the index. The ingress names a fan-out's deliveries so, which lets a fan-out record
/// list subscriptions alone and its expansion give every delivery the id it was
/// published with.
pub fn fan_out_delivery_id(event_key: &str, index: usize) -> String {
    format!("{event_key}-{index}")
}

/// A fan-out record as stored (`FanOut` layout): what the deliveries of one event share, and
/// the subscriptions they go to, in order.
#[derive(Serialize, Deserialize)]
struct FanOutRecord<'a> {
    #[serde(rename = "ev", borrow)]
    event_key: Cow<'a, str>,
    #[serde(rename = "t", borrow)]
    topic: Cow<'a, str>,
    #[serde(rename = "ss", borrow)]
    subscriptions: Vec<Cow<'a, str>>,
    #[serde(rename = "p")]
    published_at: i64,
    #[serde(rename = "f", default, skip_serializing_if = "StoredFormat::is_event_grid")]
    format: StoredFormat,
    #[serde(rename = "cv", default, skip_serializing_if = "is_zero")]
    catalog_version: u64,
    #[serde(rename = "e", default, skip_serializing_if = "str::is_empty", borrow)]
    event_id: Cow<'a, str>,
    #[serde(rename = "dv", default, skip_serializing_if = "Option::is_none", borrow)]
    data_version: Option<Cow<'a, str>>,
    /// The event's trace context, as in a delivery record.
    #[serde(rename = "tp", default, skip_serializing_if = "Option::is_none", borrow)]
    traceparent: Option<Cow<'a, str>>,
    #[serde(rename = "ts", default, skip_serializing_if = "Option::is_none", borrow)]
    tracestate: Option<Cow<'a, str>>,
}

/// The fan-out record of an event's push deliveries (`FanOut` layout), or `None` when they do
/// not have its shape: at least two, named by [`fan_out_delivery_id`] in order, not yet
/// attempted, one topic, and the same publish time, format, catalog version and event
/// id. Deliveries of another shape are stored one entry each.
pub fn encode_fan_out(event_key: &str, deliveries: &[Delivery]) -> Option<String> {
    let first = deliveries.first()?;
    let same_shape = deliveries.len() > 1
        && deliveries.iter().enumerate().all(|(i, d)| {
            d.id == fan_out_delivery_id(event_key, i)
                && d.event_key == event_key
                && d.attempts == 0
                && d.last.is_none()
                && d.topic == first.topic
                && d.published_at == first.published_at
                && d.format == first.format
                && d.catalog_version == first.catalog_version
                && d.event_id == first.event_id
                && d.data_version == first.data_version
                && d.trace == first.trace
        });
    if !same_shape {
        return None;
    }
    let record = FanOutRecord {
        event_key: Cow::Borrowed(event_key),
        topic: Cow::Borrowed(&first.topic),
        subscriptions: deliveries
            .iter()
            .map(|d| Cow::Borrowed(d.subscription.as_str()))
            .collect(),
        published_at: first.published_at.0,
        format: first.format,
        catalog_version: first.catalog_version,
        event_id: Cow::Borrowed(&first.event_id),
        data_version: first.data_version.as_deref().map(Cow::Borrowed),
        traceparent: first.trace.as_ref().map(|t| Cow::Owned(t.traceparent())),
        tracestate: first.trace.as_ref().and_then(|t| t.tracestate()).map(Cow::Borrowed),
    };
    // Strings and numbers only: serializing cannot fail.
    serde_json::to_string(&record).ok()
}

/// The deliveries a fan-out record stands for, each as [`encode_fan_out`] took it.
pub fn decode_fan_out(raw: &str) -> Result<Vec<Delivery>, Malformed> {
    let record: FanOutRecord<'_> = serde_json::from_str(raw).map_err(Malformed::Delivery)?;
    Ok(record
        .subscriptions
        .iter()
        .enumerate()
        .map(|(i, subscription)| Delivery {
            id: fan_out_delivery_id(&record.event_key, i),
            event_key: record.event_key.clone().into_owned(),
            topic: record.topic.clone().into_owned(),
            subscription: subscription.clone().into_owned(),
            attempts: 0,
            published_at: UnixMillis(record.published_at),
            last: None,
            format: record.format,
            catalog_version: record.catalog_version,
            event_id: record.event_id.clone().into_owned(),
            data_version: record.data_version.clone().map(Cow::into_owned),
            // A fan-out lists unordered deliveries only (codec::publish).
            line: None,
            trace: stored_trace(record.traceparent.as_deref(), record.tracestate.as_deref()),
            // Only a publish writes fan-outs.
            replay: None,
        })
        .collect())
}

/// The entry half of a dead-letter record, as handed to `settle.lua` (which appends
/// the separator and the event body).
pub(crate) fn encode_dead_letter_entry(entry: &DeadLetterEntry) -> Result<String, serde_json::Error> {
    serde_json::to_string(entry)
}

/// A dead-letter record's entry and event body.
pub fn decode_dead_letter(raw: &str) -> Result<(DeadLetterEntry, String), Malformed> {
    let (entry, body) = raw.split_once(DEAD_LETTER_SEPARATOR).ok_or(Malformed::NoSeparator)?;
    let entry = serde_json::from_str(entry).map_err(Malformed::DeadLetterEntry)?;
    Ok((entry, body.to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::settle::{SETTLE_ARGS_PER_ITEM, SETTLE_FIXED_ARGS, SETTLE_FIXED_KEYS, SETTLE_KEYS_PER_ITEM};
    use super::*;
    use crate::settlement::{Retention, Settle, Settlement, SharedHold};
    use eg_core::DeadLetterReason;
    use eg_core::deadletter::DeadLetterFormat;

    fn full_delivery() -> Delivery {
        Delivery::new(
            "d1".into(),
            "e1".into(),
            "orders".into(),
            "billing".into(),
            UnixMillis(5),
        )
        .for_event("evt-1")
        .matched_at(7)
        .with_format(StoredFormat::CloudEvents)
        .after_attempt(LastAttempt {
            outcome: OutcomeName::Busy,
            status: Some(503),
            at: UnixMillis(9),
        })
    }

    #[test]
    fn delivery_records_keep_the_stored_bytes() {
        // Records as every earlier version wrote them: a change here makes stored data
        // unreadable.
        let full = r#"{"id":"d1","ev":"e1","t":"orders","s":"billing","n":1,"p":5,"l":{"o":"Busy","c":503,"at":9},"f":"ce","cv":7,"e":"evt-1"}"#;
        assert_eq!(encode_delivery(&full_delivery()), full);
        assert_eq!(decode_delivery(full).unwrap(), full_delivery());

        let plain = Delivery::new("d2".into(), "e2".into(), "t".into(), "s".into(), UnixMillis(1));
        let bare = r#"{"id":"d2","ev":"e2","t":"t","s":"s","n":0,"p":1}"#;
        assert_eq!(encode_delivery(&plain), bare);
        assert_eq!(decode_delivery(bare).unwrap(), plain);

        // The data version stamped at the publish; records without it read as unknown.
        let stamped = plain.clone().with_data_version(Some("2.0".into()));
        let with_version = r#"{"id":"d2","ev":"e2","t":"t","s":"s","n":0,"p":1,"dv":"2.0"}"#;
        assert_eq!(encode_delivery(&stamped), with_version);
        assert_eq!(decode_delivery(with_version).unwrap(), stamped);
        let empty = plain.with_data_version(Some(String::new()));
        assert_eq!(decode_delivery(&encode_delivery(&empty)).unwrap(), empty);
    }

    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_trace_context_is_stored_only_when_the_event_has_one() {
        let plain = Delivery::new("d2".into(), "e2".into(), "t".into(), "s".into(), UnixMillis(1));
        assert!(
            !encode_delivery(&plain).contains("tp"),
            "no bytes for events without one"
        );
        let traced = plain.in_trace(TraceContext::parse(TRACEPARENT, Some("k=v")));
        let stored = format!(r#"{{"id":"d2","ev":"e2","t":"t","s":"s","n":0,"p":1,"tp":"{TRACEPARENT}","ts":"k=v"}}"#);
        assert_eq!(encode_delivery(&traced), stored);
        assert_eq!(decode_delivery(&stored).unwrap(), traced);
        // A release that knows no trace fields reads the record without them.
        let older: serde_json::Value = serde_json::from_str(&stored).unwrap();
        assert_eq!(older["id"], "d2");
        // A malformed stored context is as good as none, never an unreadable record.
        let garbled = stored.replace(TRACEPARENT, "00-zz");
        assert_eq!(decode_delivery(&garbled).unwrap().trace, None);
    }

    #[test]
    fn carried_records_leave_out_what_they_imply() {
        // A publish names the event by its only delivery's id, and nothing was attempted yet.
        let fresh = Delivery::new("d3".into(), "d3".into(), "t".into(), "s".into(), UnixMillis(1));
        let short = r#"{"id":"d3","t":"t","s":"s","p":1}"#;
        assert_eq!(encode_carried_delivery(&fresh), short);
        assert_eq!(decode_delivery(short).unwrap(), fresh);
        // Anything not implied is kept.
        let other = full_delivery();
        assert_eq!(encode_carried_delivery(&other), encode_delivery(&other));
    }

    #[test]
    fn a_fan_out_record_stands_for_its_deliveries() {
        let fan_out: Vec<Delivery> = ["audit", "billing", "ship"]
            .iter()
            .enumerate()
            .map(|(i, s)| {
                Delivery::new(
                    fan_out_delivery_id("k", i),
                    "k".into(),
                    "orders".into(),
                    (*s).into(),
                    UnixMillis(5),
                )
                .matched_at(7)
                .for_event("evt-1")
                .with_data_version(Some("1.0".into()))
            })
            .collect();
        let raw = encode_fan_out("k", &fan_out).unwrap();
        assert_eq!(
            raw,
            r#"{"ev":"k","t":"orders","ss":["audit","billing","ship"],"p":5,"cv":7,"e":"evt-1","dv":"1.0"}"#
        );
        assert_eq!(decode_fan_out(&raw).unwrap(), fan_out);

        // The event's trace context is said once for all its deliveries.
        let traced: Vec<Delivery> = fan_out
            .iter()
            .map(|d| d.clone().in_trace(TraceContext::parse(TRACEPARENT, None)))
            .collect();
        let raw = encode_fan_out("k", &traced).unwrap();
        assert!(raw.ends_with(&format!(r#""tp":"{TRACEPARENT}"}}"#)), "{raw}");
        assert_eq!(decode_fan_out(&raw).unwrap(), traced);

        // Anything it could not say is stored one entry per delivery.
        assert!(encode_fan_out("k", &fan_out[..1]).is_none(), "one delivery is carried");
        let mut renamed = fan_out.clone();
        renamed[1].id = "other".into();
        assert!(encode_fan_out("k", &renamed).is_none());
        let mut attempted = fan_out.clone();
        attempted[2] = attempted[2].after_attempt(LastAttempt {
            outcome: OutcomeName::Busy,
            status: Some(503),
            at: UnixMillis(9),
        });
        assert!(encode_fan_out("k", &attempted).is_none());
    }

    #[test]
    fn a_newer_outcome_is_stored_so_older_tiers_still_read_the_record() {
        let d = full_delivery().after_attempt(LastAttempt {
            outcome: OutcomeName::TokenUnavailable,
            status: None,
            at: UnixMillis(9),
        });
        let raw = encode_delivery(&d);
        assert!(raw.contains(r#""o":"GenericError","on":"TokenUnavailable""#), "{raw}");
        assert_eq!(decode_delivery(&raw).unwrap(), d, "newer tiers read the outcome itself");
        // What an older tier reads: `o` only, a name it knows.
        let older: serde_json::Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(older["l"]["o"], "GenericError");
    }

    #[test]
    fn delivery_records_round_trip_with_escapes() {
        let d = Delivery::new("d\"1".into(), "e\\1".into(), "t\n".into(), "s/é".into(), UnixMillis(-3))
            .for_event("id with \"quotes\"");
        assert_eq!(decode_delivery(&encode_delivery(&d)).unwrap(), d);
        assert_eq!(
            decode_delivery(&encode_delivery(&full_delivery())).unwrap(),
            full_delivery()
        );
        assert!(matches!(decode_delivery("{}"), Err(Malformed::Delivery(_))));
    }

    fn entry() -> DeadLetterEntry {
        DeadLetterEntry {
            container_name: "dl".into(),
            store: Default::default(),
            subscription: "Billing".into(),
            topic: "orders".into(),
            delivery_id: "d1".into(),
            reason: DeadLetterReason::MaxDeliveryAttemptsExceeded,
            delivery_attempts: 3,
            last_outcome: Some(OutcomeName::NotFound),
            last_http_status_code: Some(404),
            publish_time: UnixMillis(5),
            last_attempt_time: Some(UnixMillis(9)),
            dead_lettered_at: UnixMillis(10),
            format: DeadLetterFormat::EventGrid,
            stored_format: StoredFormat::EventGrid,
            event_id: "evt-1".into(),
            traceparent: None,
            tracestate: None,
        }
    }

    #[test]
    fn dead_letter_records_keep_the_stored_bytes() {
        // A record as settle.lua writes it: the entry, a newline, the body (which may
        // hold newlines of its own).
        let stored = "{\"containerName\":\"dl\",\"subscription\":\"Billing\",\"topic\":\"orders\",\"deliveryId\":\"d1\",\"reason\":\"MaxDeliveryAttemptsExceeded\",\"deliveryAttempts\":3,\"lastOutcome\":\"NotFound\",\"lastHttpStatusCode\":404,\"publishTime\":5,\"lastAttemptTime\":9,\"deadLetteredAt\":10,\"eventId\":\"evt-1\"}\n{\"id\":\"evt-1\",\n\"data\":1}";
        let (entry_json, body) = stored.split_once('\n').unwrap();
        assert_eq!(encode_dead_letter_entry(&entry()).unwrap(), entry_json);
        let (decoded, event_json) = decode_dead_letter(stored).unwrap();
        assert_eq!(decoded, entry());
        assert_eq!(event_json, body);
    }

    #[test]
    fn dead_letter_records_round_trip() {
        let body = "{\"id\":\"x\",\"data\":\"a\\nb\"}\n";
        let stored = format!(
            "{}{DEAD_LETTER_SEPARATOR}{body}",
            encode_dead_letter_entry(&entry()).unwrap()
        );
        assert_eq!(decode_dead_letter(&stored).unwrap(), (entry(), body.to_owned()));
        assert!(matches!(decode_dead_letter("{}"), Err(Malformed::NoSeparator)));
        assert!(matches!(
            decode_dead_letter("nonsense\n{}"),
            Err(Malformed::DeadLetterEntry(_))
        ));
    }

    #[test]
    fn settle_script_reads_the_layout_built_here() {
        // The script computes each item's offsets from these strides; its header lists
        // the same positions.
        let source = include_str!("scripts/settle.lua");
        let key_base = format!("{SETTLE_FIXED_KEYS} + {SETTLE_KEYS_PER_ITEM} * (i - 1)");
        let arg_base = format!("{SETTLE_FIXED_ARGS} + {SETTLE_ARGS_PER_ITEM} * (i - 1)");
        assert!(source.contains(&format!("settle({key_base}, {arg_base}, nil)")), "loop");
        assert!(
            source.contains(&format!("settle({key_base}, {arg_base}, index)")),
            "shared loop"
        );
        assert!(source.contains(&format!("(base b = {key_base})")), "KEYS header");
        assert!(source.contains(&format!("(base a = {arg_base})")), "ARGV header");
        assert!(source.contains(&format!("KEYS[b+{SETTLE_KEYS_PER_ITEM}]")));
        assert!(!source.contains(&format!("KEYS[b+{}]", SETTLE_KEYS_PER_ITEM + 1)));
        assert!(source.contains(&format!("ARGV[a+{SETTLE_ARGS_PER_ITEM}]")));
        assert!(!source.contains(&format!("ARGV[a+{}]", SETTLE_ARGS_PER_ITEM + 1)));
        assert!(source.contains(&format!("ARGV[{SETTLE_FIXED_ARGS}]  N")));
        // queue_settle.lua reads the same layout, and its own ARGV after the items.
        let queue = include_str!("scripts/queue_settle.lua");
        assert!(
            queue.contains(&format!("local k, a = {key_base}, {arg_base}")),
            "queue loop"
        );
        assert!(queue.contains(&format!("local c = {SETTLE_FIXED_ARGS} + {SETTLE_ARGS_PER_ITEM} * n")));
        assert!(queue.contains(&format!("the {SETTLE_ARGS_PER_ITEM} ARGV of")));

        let p = crate::Keyspace::new("eg", 1).partition(0);
        let delivery = full_delivery();
        let retry = Settlement::Retry {
            delivery: delivery.clone(),
            due: UnixMillis(42),
        };
        let items = [
            Settle {
                entry_id: "1-0".into(),
                delivery: delivery.clone(),
                settlement: Settlement::Done,
                history: None,
                carries_body: false,
                shared: None,
            },
            Settle {
                entry_id: "2-0".into(),
                delivery: delivery.clone(),
                settlement: retry,
                history: None,
                carries_body: true,
                shared: None,
            },
        ];
        let call = SettleCall::new(&p, &items, &Retention::NONE).unwrap();
        assert_eq!(call.keys.len(), SETTLE_FIXED_KEYS + 2 * SETTLE_KEYS_PER_ITEM);
        assert_eq!(call.args.len(), SETTLE_FIXED_ARGS + 2 * SETTLE_ARGS_PER_ITEM);
        assert_eq!(call.args[SETTLE_FIXED_ARGS - 1], "2", "ARGV[6] N");
        // The second item: ARGV[a+1] entry id, ARGV[a+2] action, ARGV[a+3] record,
        // ARGV[a+4] due (1-based in Lua, 0-based here).
        let a = SETTLE_FIXED_ARGS + SETTLE_ARGS_PER_ITEM;
        assert_eq!(call.args[a], "2-0");
        assert_eq!(call.args[a + 1], "retry");
        assert_eq!(call.args[a + 2], encode_delivery(&delivery));
        assert_eq!(call.args[a + 3], "42");
        assert_eq!(call.args[a + 6], "orders/billing");
        assert_eq!(call.args[a + 7], "1", "ARGV[a+8] carried");
        assert_eq!(
            call.args[SETTLE_FIXED_ARGS + 7],
            "",
            "the first item's entry holds no body"
        );
        // KEYS[b+1] the event hash, KEYS[b+6] the paused set.
        let b = SETTLE_FIXED_KEYS + SETTLE_KEYS_PER_ITEM;
        assert_eq!(call.keys[b], p.event("e1"));
        assert_eq!(call.keys[b + 5], p.paused("orders/billing"));

        // A delivery of a fan-out entry is marked with its index and the entry's count,
        // in the form the script matches.
        let shared = Settle {
            shared: Some(SharedHold { index: 1, of: 3 }),
            ..items[1].clone()
        };
        let call = SettleCall::new(&p, &[shared], &Retention::NONE).unwrap();
        assert_eq!(call.args[SETTLE_FIXED_ARGS + 7], "S1 3");
        assert!(source.contains("'^S(%d+) (%d+)$'"));
    }

    /// Every delivery of a shared entry, all done with one step, is one item: its record
    /// lists the events' delivered-log fields in index order; each settle is answered by it.
    #[test]
    fn a_whole_shared_entry_settled_done_is_one_item() {
        let source = include_str!("scripts/settle.lua");
        let p = crate::Keyspace::new("eg", 1).partition(0);
        let retention = Retention {
            history_for: std::time::Duration::from_secs(60),
            histories_per_partition: 10,
            steps_per_history: 10,
            archived_per_partition: 0,
        };
        let step = eg_core::history::HistoryEntry {
            subscription: "billing".into(),
            attempt: 1,
            at: UnixMillis(7),
            outcome: None,
            http_status: Some(200),
            duration_ms: Some(3),
            next: None,
            state: eg_core::history::DeliveryState::Delivered,
            reason: None,
            hold: None,
            error: None,
        };
        let settle = |index: usize, event: &str, settlement: Settlement| Settle {
            entry_id: "9-0".into(),
            delivery: full_delivery().for_event(event),
            settlement,
            history: Some(step.clone()),
            carries_body: true,
            shared: Some(SharedHold { index, of: 3 }),
        };
        let alone = Settle {
            entry_id: "8-0".into(),
            shared: None,
            ..settle(0, "x", Settlement::Done)
        };
        // Given out of order, with another settle between them.
        let items = [
            settle(1, "b", Settlement::Done),
            alone,
            settle(0, "a", Settlement::Done),
            settle(2, "c", Settlement::Done),
        ];
        let call = SettleCall::new(&p, &items, &retention).unwrap();
        assert_eq!(call.items(), 2);
        assert_eq!(call.answers, [0, 1, 0, 0]);
        let a = SETTLE_FIXED_ARGS;
        assert_eq!(call.args[a], "9-0");
        assert_eq!(call.args[a + 1], "done");
        assert_eq!(call.args[a + 2], "orders/a\norders/b\norders/c");
        assert_eq!(call.args[a + 4], step.to_json());
        assert_eq!(call.args[a + 7], "S* 3");
        assert!(source.contains("'^S%* (%d+)$'"));
        assert!(
            source.contains("KEYS[4] .. ':' .. field"),
            "the list named as settle() names it"
        );
        assert_eq!(p.history("orders", "a"), format!("{}:orders/a", p.history_index()));

        // Not every delivery, not all done, or not one step: one item each.
        let some = SettleCall::new(&p, &items[..3], &retention).unwrap();
        assert_eq!(some.items(), 3);
        let retried = [
            settle(0, "a", Settlement::Done),
            settle(
                1,
                "b",
                Settlement::Requeue {
                    delivery: full_delivery(),
                },
            ),
            settle(2, "c", Settlement::Done),
        ];
        assert_eq!(SettleCall::new(&p, &retried, &retention).unwrap().items(), 3);
        let mut apart = [
            settle(0, "a", Settlement::Done),
            settle(1, "b", Settlement::Done),
            settle(2, "c", Settlement::Done),
        ];
        apart[2].history = None;
        assert_eq!(SettleCall::new(&p, &apart, &retention).unwrap().items(), 3);
        assert_eq!(
            SettleCall::new(&p, &apart, &Retention::NONE).unwrap().items(),
            1,
            "no step kept: one"
        );
    }
}
