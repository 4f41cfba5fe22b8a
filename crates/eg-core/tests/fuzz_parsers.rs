//! Property tests ("fuzzing" on stable Rust) for everything that reads client input:
//! the strict JSON reader, the publish parsers (Event Grid, CloudEvents single and
//! batch, custom schema), the management-side parsers (topic, subscription, filters)
//! and the filter evaluator.
//!
//! - Arbitrary bytes, mutated valid bodies and arbitrary JSON never panic any parser.
//! - The strict reader agrees with `serde_json` except where it is meant to refuse
//!   (duplicate keys, nesting past `json::MAX_DEPTH`).
//! - Valid generated batches round-trip: every event is accepted and stored as the
//!   schema says; one bad event refuses the batch, naming its index.
//! - Filters: arbitrary filters × arbitrary events never panic; algebraic properties
//!   (an operator and its negation disagree wherever the key is present, `<` and `>=`
//!   split the numbers, `In` implies `BeginsWith`/`EndsWith`/`Contains`, advanced
//!   filters are AND-ed, serialization round-trips).
//!
//! Each property runs [`DEFAULT_CASES`] cases, which keeps `cargo test` quick; set
//! `PROPTEST_CASES` for a long run, e.g.
//! `PROPTEST_CASES=100000 cargo test --release -p eg-core --test fuzz_parsers`
//! (see docs/bad-input.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use eg_core::advanced_filter::AdvancedFilter;
use eg_core::event::custom::InputSchemaMapping;
use eg_core::json::{self, JsonProblem};
use eg_core::publish::{PublishError, PublishLimits};
use eg_core::{EventFilter, PublishedBatch, Routing, Subscription, SubscriptionName, Topic, TopicName, UnixMillis};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Number, Value, json};

/// Cases per property unless `PROPTEST_CASES` says otherwise.
const DEFAULT_CASES: u32 = 128;

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    Config {
        cases,
        ..Config::default()
    }
}

// ---------------------------------------------------------------------------------------
// Strategies

/// Keys that the parsers and filters look at, and some that nothing does.
fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "id", "topic", "subject", "eventType", "eventTime", "data", "dataVersion", "metadataVersion",
            "specversion", "source", "type", "time", "datacontenttype", "dataschema", "data_base64",
            "ext", "orderId", "kind", "x", "y", "a", "b",
        ])
        .prop_map(str::to_owned),
        1 => "[a-zA-Z0-9_]{0,10}",
        1 => any::<String>(),
    ]
}

/// Strings that collide with filter operands and valid field values, and any others.
fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "", "a", "A", "ab", "AB", "b", "ba", "1.0", "/s", "/orders/1", "Order.Created",
            "2026-01-01T00:00:00Z", "yesterday", "aGVsbG8=", "application/json", "https://example.com/s",
        ])
        .prop_map(str::to_owned),
        2 => "[a-zA-Z0-9 ./:-]{0,16}",
        1 => any::<String>(),
    ]
}

fn arb_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop::sample::select(vec![0.0, 1.0, -1.0, 1.5, 2.0, 100.0, 1e300, -0.0]).prop_map(|f| json!(f)),
        2 => (-5i64..5).prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
    ]
}

fn arb_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => arb_number(),
        3 => arb_string().prop_map(Value::String),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    arb_scalar().prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(arb_key(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(arb_key(), arb_json(), 0..6).prop_map(|m| m.into_iter().collect())
}

/// Bytes that change what JSON means when inserted.
const STRUCTURAL: &[u8] = b"{}[]\",:\\ 0e-.";

/// A valid body with some bytes changed, inserted or cut: mostly-JSON garbage.
fn arb_mutated(valid: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (
        valid,
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..4),
    )
        .prop_map(|(mut bytes, edits)| {
            for (at, edit, byte) in edits {
                if bytes.is_empty() {
                    bytes.push(byte);
                    continue;
                }
                let i = at.index(bytes.len());
                let structural = STRUCTURAL[usize::from(byte) % STRUCTURAL.len()];
                match edit {
                    0 => bytes[i] = byte,
                    1 => bytes.insert(i, structural),
                    2 => bytes.truncate(i),
                    _ => {
                        bytes.remove(i);
                    }
                }
            }
            bytes
        })
}

fn timestamp() -> impl Strategy<Value = String> {
    (0i64..4_102_444_800, 0u32..1_000_000_000, prop::bool::ANY).prop_map(|(secs, nanos, utc)| {
        let t = chrono::DateTime::from_timestamp(secs, nanos).unwrap();
        if utc {
            t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
        } else {
            t.with_timezone(&chrono::FixedOffset::east_opt(3600).unwrap())
                .to_rfc3339()
        }
    })
}

/// A valid Event Grid schema event as published.
fn arb_event_grid_event() -> impl Strategy<Value = Value> {
    (
        "[a-zA-Z0-9-]{1,36}",
        arb_string(),
        "[A-Za-z][A-Za-z.]{0,30}",
        timestamp(),
        prop::option::of(arb_json()),
        prop::option::of("[0-9.]{0,5}"),
        prop::bool::ANY,
    )
        .prop_map(|(id, subject, event_type, time, data, data_version, stamped)| {
            let mut e = json!({"id": id, "subject": subject, "eventType": event_type, "eventTime": time});
            if let Some(data) = data {
                e["data"] = data;
            }
            if let Some(v) = data_version {
                e["dataVersion"] = json!(v);
            }
            if stamped {
                e["metadataVersion"] = json!("1");
                e["topic"] = json!("/topics/orders");
            }
            e
        })
}

/// A valid CloudEvent as published.
fn arb_cloud_event() -> impl Strategy<Value = Value> {
    (
        "[a-zA-Z0-9-]{1,36}",
        prop::sample::select(vec!["/orders", "orders", "urn:x:y", "https://example.com/s"]),
        "[A-Za-z][A-Za-z.]{0,30}",
        prop::option::of("[a-z/0-9]{1,10}"),
        prop::option::of(timestamp()),
        prop::option::of(arb_json()),
        prop::collection::btree_map(
            "[a-z0-9]{1,20}",
            prop_oneof![
                arb_string().prop_map(Value::String),
                arb_number(),
                any::<bool>().prop_map(Value::Bool)
            ],
            0..4,
        ),
    )
        .prop_map(|(id, source, event_type, subject, time, data, extensions)| {
            let mut e = json!({"specversion": "1.0", "id": id, "source": source, "type": event_type});
            if let Some(subject) = subject {
                e["subject"] = json!(subject);
            }
            if let Some(time) = time {
                e["time"] = json!(time);
            }
            if let Some(data) = data {
                e["data"] = data;
            }
            for (name, value) in extensions {
                if !CLOUD_EVENTS_CORE.contains(&name.as_str()) {
                    e[name] = value;
                }
            }
            e
        })
}

/// CloudEvents' core attribute names: an extension never takes one.
const CLOUD_EVENTS_CORE: [&str; 10] = [
    "id",
    "source",
    "specversion",
    "type",
    "datacontenttype",
    "dataschema",
    "subject",
    "time",
    "data",
    "data_base64",
];

fn topic(properties: Value) -> Topic {
    Topic::from_resource(
        TopicName::parse("orders").unwrap(),
        &json!({ "properties": properties }),
    )
    .unwrap()
}

fn event_grid_topic() -> Topic {
    topic(json!({}))
}

fn cloud_events_topic() -> Topic {
    topic(json!({"inputSchema": "CloudEventSchemaV1_0"}))
}

fn custom_topic() -> Topic {
    topic(json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": {
        "inputSchemaMappingType": "Json",
        "properties": {"id": {"sourceField": "orderId"}, "eventType": {"sourceField": "kind", "defaultValue": "Order"}}
    }}))
}

const CONTENT_TYPES: [Option<&str>; 5] = [
    None,
    Some("application/json"),
    Some("application/cloudevents+json"),
    Some("application/cloudevents-batch+json; charset=utf-8"),
    Some("application/cloudevents+xml"),
];

fn parse(body: &[u8], content_type: Option<&str>, topic: &Topic) -> Result<PublishedBatch, PublishError> {
    PublishedBatch::parse(body, content_type, topic, UnixMillis(0), PublishLimits::default())
}

/// Every schema × every content type: must return, never panic.
fn parse_everywhere(body: &[u8]) {
    for topic in [event_grid_topic(), cloud_events_topic(), custom_topic()] {
        for content_type in CONTENT_TYPES {
            let _ = parse(body, content_type, &topic);
        }
    }
}

fn stored(batch: &PublishedBatch) -> Vec<Value> {
    batch
        .events
        .iter()
        .map(|e| serde_json::from_str(&e.json).unwrap())
        .collect()
}

// ---------------------------------------------------------------------------------------
// The strict JSON reader and the publish parsers

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic_a_parser(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = json::parse(&bytes);
        parse_everywhere(&bytes);
    }

    #[test]
    fn mutated_batches_never_panic_a_parser(
        body in arb_mutated(prop::collection::vec(prop_oneof![arb_event_grid_event(), arb_cloud_event()], 1..4)
            .prop_map(|events| serde_json::to_vec(&events).unwrap()))
    ) {
        let _ = json::parse(&body);
        parse_everywhere(&body);
    }

    #[test]
    fn arbitrary_json_never_panics_a_parser(value in arb_json()) {
        let body = serde_json::to_vec(&value).unwrap();
        parse_everywhere(&body);
        let wrapped = serde_json::to_vec(&json!([value])).unwrap();
        parse_everywhere(&wrapped);
    }

    /// What the strict reader accepts, serde_json reads the same; what it refuses that
    /// serde_json reads has a duplicate key or is too deep.
    #[test]
    fn the_strict_reader_agrees_with_serde_json(
        body in prop_oneof![
            arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
            arb_mutated(arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap())),
            prop::collection::vec(any::<u8>(), 0..64),
        ]
    ) {
        let strict = json::parse(&body);
        // The strict reader skips a byte order mark; serde_json does not.
        let lax = serde_json::from_slice::<Value>(body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&body));
        match (strict, lax) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Ok(a), Err(e)) => prop_assert!(false, "strict read {a} where serde_json failed: {e}"),
            (Err(e), Ok(_)) => prop_assert!(
                matches!(e.problem, JsonProblem::DuplicateKey(_) | JsonProblem::TooDeep),
                "refused what serde_json reads, for {e}"
            ),
            (Err(_), Err(_)) => {}
        }
    }

    /// Checking without building refuses exactly what the parse refuses, in the same words.
    #[test]
    fn validating_agrees_with_parsing(
        body in prop_oneof![
            arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
            arb_mutated(arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap())),
            prop::collection::vec(any::<u8>(), 0..64),
        ]
    ) {
        prop_assert_eq!(json::validate(&body).map(|_| ()), json::parse(&body).map(|_| ()));
    }

    #[test]
    fn generated_json_round_trips_through_the_strict_reader(value in arb_json()) {
        let text = serde_json::to_string(&value).unwrap();
        prop_assert_eq!(json::parse(text.as_bytes()).unwrap(), value.clone());
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        prop_assert_eq!(json::parse(pretty.as_bytes()).unwrap(), value);
    }

    #[test]
    fn a_repeated_key_is_always_refused(mut object in arb_object(), key in arb_key(), a in arb_json(), b in arb_json()) {
        object.remove(&key);
        let mut text = serde_json::to_string(&Value::Object(object)).unwrap();
        text.pop(); // the closing brace
        let comma = if text.len() > 1 { "," } else { "" };
        let key = serde_json::to_string(&key).unwrap();
        text.push_str(&format!("{comma}{key}:{a},{key}:{b}}}"));
        let e = json::parse(text.as_bytes()).unwrap_err();
        prop_assert!(matches!(e.problem, JsonProblem::DuplicateKey(_)), "{e}");
    }

    #[test]
    fn valid_event_grid_batches_round_trip(events in prop::collection::vec(arb_event_grid_event(), 1..6)) {
        let body = serde_json::to_vec(&events).unwrap();
        for content_type in [None, Some("application/json"), Some("text/plain")] {
            let batch = parse(&body, content_type, &event_grid_topic()).unwrap();
            prop_assert_eq!(batch.events.len(), events.len());
            for ((published, stored), accepted) in events.iter().zip(stored(&batch)).zip(&batch.events) {
                for field in ["id", "subject", "eventType", "eventTime"] {
                    prop_assert_eq!(&stored[field], &published[field]);
                }
                prop_assert_eq!(stored.get("data"), published.get("data"));
                prop_assert_eq!(stored["dataVersion"].clone(), published.get("dataVersion").cloned().unwrap_or(json!("")));
                prop_assert_eq!(&stored["topic"], "/topics/orders");
                prop_assert_eq!(&stored["metadataVersion"], "1");
                prop_assert_eq!(accepted.event_type.as_str(), published["eventType"].as_str().unwrap());
                prop_assert_eq!(accepted.subject.as_str(), published["subject"].as_str().unwrap());
            }
        }
    }

    #[test]
    fn valid_cloud_events_round_trip_as_published(events in prop::collection::vec(arb_cloud_event(), 1..6)) {
        let t = cloud_events_topic();
        let body = serde_json::to_vec(&events).unwrap();
        for content_type in [Some("application/cloudevents-batch+json"), Some("application/json"), None] {
            let batch = parse(&body, content_type, &t).unwrap();
            prop_assert_eq!(stored(&batch), events.clone());
            for (published, accepted) in events.iter().zip(&batch.events) {
                prop_assert_eq!(accepted.event_type.as_str(), published["type"].as_str().unwrap());
                prop_assert_eq!(accepted.subject.as_str(), published.get("subject").and_then(Value::as_str).unwrap_or(""));
            }
        }
        let one = serde_json::to_vec(&events[0]).unwrap();
        let batch = parse(&one, Some("application/cloudevents+json; charset=utf-8"), &t).unwrap();
        prop_assert_eq!(stored(&batch), vec![events[0].clone()]);
    }

    #[test]
    fn valid_custom_events_round_trip_in_their_envelope(
        objects in prop::collection::vec(
            (arb_object(), "[a-zA-Z0-9-]{1,20}", prop::option::of("[A-Za-z.]{1,20}")).prop_map(|(mut o, id, kind)| {
                o.insert("orderId".into(), json!(id));
                match kind {
                    Some(kind) => o.insert("kind".into(), json!(kind)),
                    None => o.remove("kind"),
                };
                Value::Object(o)
            }),
            1..6,
        )
    ) {
        let body = serde_json::to_vec(&objects).unwrap();
        let batch = parse(&body, Some("application/json"), &custom_topic()).unwrap();
        for (published, stored) in objects.iter().zip(stored(&batch)) {
            prop_assert_eq!(&stored["data"], published);
            prop_assert_eq!(&stored["id"], &published["orderId"]);
            prop_assert_eq!(stored["eventType"].clone(), published.get("kind").cloned().unwrap_or(json!("Order")));
            prop_assert_eq!(&stored["topic"], "/topics/orders");
        }
    }

    /// All or nothing: one bad event refuses the batch, and the error names its index.
    #[test]
    fn one_bad_event_refuses_the_batch_naming_it(
        events in prop::collection::vec(arb_event_grid_event(), 1..6),
        bad in any::<prop::sample::Index>(),
        breakage in 0usize..4,
    ) {
        let mut events = events;
        let i = bad.index(events.len());
        match breakage {
            0 => events[i]["eventTime"] = json!("not a time"),
            1 => events[i]["subject"] = json!(5),
            2 => { events[i].as_object_mut().unwrap().remove("id"); }
            _ => events[i]["unknown"] = json!(true),
        }
        let body = serde_json::to_vec(&events).unwrap();
        let e = parse(&body, None, &event_grid_topic()).unwrap_err();
        let events_i = format!("events[{i}]");
        prop_assert!(e.to_string().starts_with(&events_i), "{}", e);
    }

    #[test]
    fn custom_mappings_from_arbitrary_json_never_panic(mapping in arb_json(), item in arb_json()) {
        if let Ok(mapping) = InputSchemaMapping::from_resource(&mapping) {
            let mut n = 0;
            let item: Box<serde_json::value::RawValue> = serde_json::from_str(&item.to_string()).unwrap();
            let _ = mapping.apply(&item, "/topics/orders", UnixMillis(0), &mut || { n += 1; n.to_string() });
        }
    }

    #[test]
    fn topic_and_subscription_resources_from_arbitrary_json_never_panic(
        body in arb_json(),
        props in arb_object(),
        destination in arb_object(),
        retry in arb_json(),
        filter in arb_json(),
    ) {
        let name = TopicName::parse("orders").unwrap();
        let _ = Topic::from_resource(name.clone(), &body);
        let _ = Topic::from_resource(name, &json!({"properties": props.clone()}));
        let sub = SubscriptionName::parse("sub").unwrap();
        for t in [event_grid_topic(), cloud_events_topic(), custom_topic()] {
            let _ = Subscription::from_resource(&t, sub.clone(), &body, UnixMillis(0));
            let mut props = props.clone();
            props.insert("destination".into(), json!({"endpointType": "WebHook", "properties": destination.clone()}));
            props.insert("retryPolicy".into(), retry.clone());
            props.insert("filter".into(), filter.clone());
            let _ = Subscription::from_resource(&t, sub.clone(), &json!({"properties": props}), UnixMillis(0));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Filters

const OPERATORS: [&str; 19] = [
    "NumberIn",
    "NumberNotIn",
    "NumberLessThan",
    "NumberGreaterThan",
    "NumberLessThanOrEquals",
    "NumberGreaterThanOrEquals",
    "NumberInRange",
    "NumberNotInRange",
    "BoolEquals",
    "StringIn",
    "StringNotIn",
    "StringBeginsWith",
    "StringNotBeginsWith",
    "StringEndsWith",
    "StringNotEndsWith",
    "StringContains",
    "StringNotContains",
    "IsNullOrUndefined",
    "IsNotNull",
];

/// Operators and the operator that negates them.
const NEGATIONS: [(&str, &str); 6] = [
    ("NumberIn", "NumberNotIn"),
    ("NumberInRange", "NumberNotInRange"),
    ("StringIn", "StringNotIn"),
    ("StringBeginsWith", "StringNotBeginsWith"),
    ("StringEndsWith", "StringNotEndsWith"),
    ("StringContains", "StringNotContains"),
];

fn arb_filter_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "data.x", "data.y", "data.x.y", "data", "subject", "eventType", "type", "id", "data.missing",
        ])
        .prop_map(str::to_owned),
        1 => "[a-z]{1,4}(\\.[a-z]{1,4}){0,3}",
    ]
}

/// Operands of the right type for `operator`.
fn arb_operands(operator: &'static str) -> BoxedStrategy<Value> {
    let numbers = || prop::collection::vec(arb_number(), 1..4);
    let strings = || prop::collection::vec(arb_string().prop_filter("short", |s| s.chars().count() <= 512), 1..4);
    match operator {
        "NumberIn" | "NumberNotIn" => numbers().prop_map(|v| json!({ "values": v })).boxed(),
        "NumberInRange" | "NumberNotInRange" => prop::collection::vec((arb_number(), arb_number()), 1..3)
            .prop_map(|pairs| {
                let ranges: Vec<Value> = pairs
                    .into_iter()
                    .map(|(a, b)| {
                        let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
                        json!([a.min(b), a.max(b)])
                    })
                    .collect();
                json!({ "values": ranges })
            })
            .boxed(),
        "NumberLessThan" | "NumberGreaterThan" | "NumberLessThanOrEquals" | "NumberGreaterThanOrEquals" => {
            arb_number().prop_map(|n| json!({ "value": n })).boxed()
        }
        "BoolEquals" => any::<bool>().prop_map(|b| json!({ "value": b })).boxed(),
        "IsNullOrUndefined" | "IsNotNull" => Just(json!({})).boxed(),
        _ => strings().prop_map(|v| json!({ "values": v })).boxed(),
    }
}

fn filter_json(operator: &str, key: &str, operands: &Value) -> Value {
    let mut f = operands.clone();
    f["operatorType"] = json!(operator);
    f["key"] = json!(key);
    f
}

/// A valid advanced filter, as JSON.
fn arb_valid_filter() -> impl Strategy<Value = Value> {
    (prop::sample::select(OPERATORS.to_vec()), arb_filter_key())
        .prop_flat_map(|(op, key)| arb_operands(op).prop_map(move |operands| filter_json(op, &key, &operands)))
}

/// A filter object that is mostly nonsense, sometimes valid.
fn arb_any_filter() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => arb_valid_filter(),
        1 => (prop::sample::select(OPERATORS.to_vec()), arb_json(), arb_json(), arb_json()).prop_map(|(op, key, value, values)| {
            json!({"operatorType": op, "key": key, "value": value, "values": values})
        }),
        1 => arb_json(),
    ]
}

/// An event as filters see it: a stored object with `data`, and its type and subject.
#[derive(Debug, Clone)]
struct Event {
    fields: Map<String, Value>,
    event_type: String,
    subject: String,
}

impl Event {
    fn routing(&self) -> Routing<'_> {
        Routing {
            event_type: &self.event_type,
            subject: &self.subject,
            fields: &self.fields,
        }
    }
}

fn arb_event() -> impl Strategy<Value = Event> {
    (
        arb_object(),
        prop::option::of(prop_oneof![
            arb_json(),
            prop::collection::btree_map(prop::sample::select(vec!["x", "y"]), arb_json(), 0..3)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]),
        arb_string(),
        arb_string(),
    )
        .prop_map(|(mut fields, data, event_type, subject)| {
            match data {
                Some(data) => fields.insert("data".into(), data),
                None => fields.remove("data"),
            };
            Event {
                fields,
                event_type,
                subject,
            }
        })
}

fn parsed(filter: &Value) -> AdvancedFilter {
    AdvancedFilter::from_json(filter).unwrap_or_else(|e| panic!("{filter}: {e}"))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_filters_on_arbitrary_events_never_panic(filter in arb_any_filter(), event in arb_event()) {
        if let Ok(f) = AdvancedFilter::from_json(&filter) {
            let _ = f.matches(&event.routing(), false);
            let _ = f.matches(&event.routing(), true);
            // What is stored in the catalog reads back the same.
            let again: AdvancedFilter = serde_json::from_value(serde_json::to_value(&f).unwrap()).unwrap();
            prop_assert_eq!(again, f);
        }
    }

    #[test]
    fn arbitrary_subscription_filters_never_panic(filter in arb_json(), advanced in prop::collection::vec(arb_any_filter(), 0..4), event in arb_event()) {
        for candidate in [filter.clone(), json!({"advancedFilters": advanced, "includedEventTypes": null}), json!({"subjectBeginsWith": filter})] {
            if let Ok(f) = EventFilter::from_json(&candidate) {
                let _ = f.matches(&event.routing());
                let again: EventFilter = serde_json::from_value(serde_json::to_value(&f).unwrap()).unwrap();
                prop_assert_eq!(again, f);
            }
        }
    }

    /// Where the key holds a value (`IsNotNull`), an operator and its negation disagree,
    /// whatever the value's type, with or without array filtering.
    #[test]
    fn an_operator_and_its_negation_disagree_where_the_key_is_present(
        (positive, negative, operands) in prop::sample::select(NEGATIONS.to_vec())
            .prop_flat_map(|(p, n)| arb_operands(p).prop_map(move |o| (p, n, o))),
        key in arb_filter_key(),
        event in arb_event(),
        on_arrays in any::<bool>(),
    ) {
        let pos = parsed(&filter_json(positive, &key, &operands));
        let neg = parsed(&filter_json(negative, &key, &operands));
        let present = parsed(&filter_json("IsNotNull", &key, &json!({})));
        let routing = event.routing();
        if present.matches(&routing, on_arrays) {
            prop_assert_ne!(pos.matches(&routing, on_arrays), neg.matches(&routing, on_arrays));
        }
    }

    #[test]
    fn is_null_or_undefined_and_is_not_null_are_complements(key in arb_filter_key(), event in arb_event(), on_arrays in any::<bool>()) {
        let null = parsed(&filter_json("IsNullOrUndefined", &key, &json!({})));
        let not_null = parsed(&filter_json("IsNotNull", &key, &json!({})));
        let routing = event.routing();
        prop_assert_ne!(null.matches(&routing, on_arrays), not_null.matches(&routing, on_arrays));
    }

    /// On a number, `< n` and `>= n` split it, as do `> n` and `<= n`.
    #[test]
    fn comparisons_split_the_numbers(x in arb_number(), n in arb_number(), on_arrays in any::<bool>()) {
        let event = Event { fields: json!({"data": {"x": x}}).as_object().unwrap().clone(), event_type: "T".into(), subject: String::new() };
        let routing = event.routing();
        let at = |op: &str| parsed(&filter_json(op, "data.x", &json!({ "value": n }))).matches(&routing, on_arrays);
        prop_assert_ne!(at("NumberLessThan"), at("NumberGreaterThanOrEquals"));
        prop_assert_ne!(at("NumberGreaterThan"), at("NumberLessThanOrEquals"));
        let point = parsed(&filter_json("NumberInRange", "data.x", &json!({ "values": [[n, n]] }))).matches(&routing, on_arrays);
        let member = parsed(&filter_json("NumberIn", "data.x", &json!({ "values": [n] }))).matches(&routing, on_arrays);
        prop_assert_eq!(point, member);
    }

    /// Equality implies prefix, suffix and containment; and ASCII case does not matter.
    #[test]
    fn string_in_implies_the_weaker_string_operators(
        values in prop::collection::vec(arb_string().prop_filter("short", |s| s.chars().count() <= 512), 1..4),
        key in arb_filter_key(),
        event in arb_event(),
        on_arrays in any::<bool>(),
    ) {
        let routing = event.routing();
        let with = |op: &str| parsed(&filter_json(op, &key, &json!({ "values": values }))).matches(&routing, on_arrays);
        if with("StringIn") {
            prop_assert!(with("StringBeginsWith"));
            prop_assert!(with("StringEndsWith"));
            prop_assert!(with("StringContains"));
        }
        let ascii = values[0].to_ascii_uppercase();
        let shouted = Event { fields: json!({"data": {"x": ascii}}).as_object().unwrap().clone(), ..event.clone() };
        let lowered = json!({ "values": [values[0].to_ascii_lowercase()] });
        prop_assert!(parsed(&filter_json("StringIn", "data.x", &lowered)).matches(&shouted.routing(), on_arrays));
    }

    /// Advanced filters are AND-ed: a subscription filter matches exactly when each of
    /// its advanced filters does (with no basic filter).
    #[test]
    fn advanced_filters_are_and_ed(filters in prop::collection::vec(arb_valid_filter(), 1..4), event in arb_event(), on_arrays in any::<bool>()) {
        let subscription_filter = EventFilter::from_json(&json!({
            "advancedFilters": filters,
            "enableAdvancedFilteringOnArrays": on_arrays,
        }));
        // Too many values in total is refused; that is not this property.
        if let Ok(f) = subscription_filter {
            let routing = event.routing();
            let each = filters.iter().all(|one| parsed(one).matches(&routing, on_arrays));
            prop_assert_eq!(f.matches(&routing), each);
        }
    }
}

/// The deep-nesting limit holds inside a publish body too, at any depth past it.
#[test]
fn nesting_past_the_limit_is_refused_in_every_schema() {
    for levels in [json::MAX_DEPTH, json::MAX_DEPTH * 2, 100_000] {
        let data = format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        let body = format!(
            r#"[{{"id":"1","subject":"","eventType":"T","eventTime":"2026-01-01T00:00:00Z","specversion":"1.0","source":"/s","type":"T","data":{data}}}]"#
        );
        for t in [event_grid_topic(), cloud_events_topic(), custom_topic()] {
            let e = parse(body.as_bytes(), None, &t).unwrap_err();
            assert!(e.to_string().contains("nested too deeply"), "{e}");
            assert!(e.to_string().starts_with("events[0].data"), "{e}");
        }
    }
}
