//! `egctl publish`: sends events through the publish API exactly as a publisher would,
//! with the topic's `key1` (fetched with the admin token), in the form the topic's
//! input schema takes.

use super::{Ctx, count, read_input};
use crate::cli::PublishArgs;
use crate::failure::Failure;
use crate::times;
use serde_json::{Value, json};

/// How many published ids the human output lists before summarising the rest.
const IDS_SHOWN: usize = 10;

const JSON: &str = "application/json";
const CLOUDEVENT: &str = "application/cloudevents+json";
const CLOUDEVENTS_BATCH: &str = "application/cloudevents-batch+json";

pub async fn run(args: PublishArgs, ctx: &Ctx) -> Result<String, Failure> {
    let topic = ctx.api.get(&["topics", &args.topic]).await?;
    let schema = topic["properties"]["inputSchema"]
        .as_str()
        .unwrap_or("EventGridSchema")
        .to_owned();
    let (body, content_type) = match &args.file {
        Some(path) => {
            let bytes = read_input(path)?;
            let content_type = file_content_type(&schema, &bytes);
            (bytes, content_type)
        }
        None => from_flags(&args, &schema)?,
    };
    let ids = event_ids(&body);
    let keys = ctx.api.post(&["topics", &args.topic, "listKeys"], None).await?;
    let key = keys["key1"]
        .as_str()
        .ok_or_else(|| Failure::other(format!("listKeys of topic {} answered without key1", args.topic)))?;
    ctx.api.publish(&args.topic, key, content_type, body).await?;
    let result = json!({"topic": args.topic, "published": ids});
    Ok(ctx.show(&result, |_| published(&args.topic, &ids)))
}

/// One event built from the flags, in the topic's schema.
fn from_flags(args: &PublishArgs, schema: &str) -> Result<(Vec<u8>, &'static str), Failure> {
    let data: Value = match &args.data {
        Some(raw) => serde_json::from_str(raw).map_err(|e| {
            Failure::usage(format!(
                "--data is not valid JSON: {e} (to send text, quote it as a JSON string: --data '\"hello\"')"
            ))
        })?,
        None => json!({}),
    };
    let id = args.id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let now = times::format(chrono::Utc::now());
    let (event_type, subject) = (args.event_type.as_deref(), args.subject.as_deref());
    match schema {
        "EventGridSchema" => {
            let event = json!([{
                "id": id, "eventType": event_type, "subject": subject, "eventTime": now,
                "data": data, "dataVersion": "1.0",
            }]);
            Ok((event.to_string().into_bytes(), JSON))
        }
        "CloudEventSchemaV1_0" => {
            let event = json!({
                "specversion": "1.0", "id": id, "type": event_type, "source": args.source,
                "subject": subject, "time": now, "datacontenttype": "application/json", "data": data,
            });
            Ok((event.to_string().into_bytes(), CLOUDEVENT))
        }
        other => Err(Failure::usage(format!(
            "topic {} takes {other} events, which --type/--subject cannot build; publish them with --file",
            args.topic
        ))),
    }
}

/// CloudEvents topics take one event or a batch, told apart by content type;
/// the other schemas take JSON.
fn file_content_type(schema: &str, body: &[u8]) -> &'static str {
    if schema != "CloudEventSchemaV1_0" {
        return JSON;
    }
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        CLOUDEVENTS_BATCH
    } else {
        CLOUDEVENT
    }
}

/// The `id`s of the events in a body (one object or an array), for the report;
/// custom-schema events may carry their id elsewhere and are then not listed.
fn event_ids(body: &[u8]) -> Vec<String> {
    let events = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Array(events)) => events,
        Ok(one @ Value::Object(_)) => vec![one],
        _ => return Vec::new(),
    };
    events
        .iter()
        .filter_map(|e| e["id"].as_str().map(str::to_owned))
        .collect()
}

fn published(topic: &str, ids: &[String]) -> String {
    if ids.is_empty() {
        return format!("published to {topic}\n");
    }
    let mut shown = ids.iter().take(IDS_SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if ids.len() > IDS_SHOWN {
        shown.push_str(&format!(" … and {} more", ids.len() - IDS_SHOWN));
    }
    format!(
        "published {} to {topic}: {shown}\n",
        count(ids.len() as u64, "event", "events")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloudevents_files_are_sent_as_one_or_a_batch() {
        assert_eq!(file_content_type("CloudEventSchemaV1_0", b"  [{}]"), CLOUDEVENTS_BATCH);
        assert_eq!(file_content_type("CloudEventSchemaV1_0", b"{}"), CLOUDEVENT);
        assert_eq!(file_content_type("EventGridSchema", b"[{}]"), JSON);
        assert_eq!(file_content_type("CustomEventSchema", b"{}"), JSON);
    }

    #[test]
    fn reports_the_ids_sent() {
        assert_eq!(event_ids(br#"[{"id":"a"},{"id":"b"},{"x":1}]"#), ["a", "b"]);
        assert_eq!(event_ids(br#"{"id":"c"}"#), ["c"]);
        assert!(event_ids(b"not json").is_empty());
        assert_eq!(published("t", &["a".into()]), "published 1 event to t: a\n");
        let many: Vec<String> = (0..12).map(|i| i.to_string()).collect();
        assert!(published("t", &many).ends_with("9 … and 2 more\n"));
    }
}
