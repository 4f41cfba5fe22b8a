//! A subscription's dead letters: list (by time, paged), show one, redrive (send back
//! into delivery with fresh attempts, keeping the events' ids; each record at most once)
//! and purge. Redrive and purge work in chunks of at most `limit` records per call and
//! say how many remain, so a client can show progress and no call runs for long. All
//! of these read the Redis archive, so they work the same whatever the destination;
//! `destination` says where the dead letters go and whether writing them fails now.

use super::{Reply, body_object, find_subscription};
use crate::errors::Refusal;
use crate::operations::{self, subscription_key};
use crate::state::App;
use crate::status::{DeadLetterTarget, destination_body};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use eg_core::UnixMillis;
use eg_store::{ArchivedRecord, Cursor, Selection, TimeRange};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1_000;
const DEFAULT_CHUNK: u64 = 1_000;
const MAX_CHUNK: u64 = 10_000;
/// Most ids or event ids one request may name.
const MAX_IDS: usize = 10_000;

/// The fields of a redrive or purge request.
const SELECTION_FIELDS: [&str; 6] = ["all", "from", "to", "ids", "eventIds", "limit"];

/// `GET …/deadLetters?from=&to=&limit=&cursor=`
pub async fn list(
    State(app): State<Arc<App>>,
    Path((topic, name)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Reply {
    let range = TimeRange {
        from: query.get("from").map(|v| time("from", v)).transpose()?,
        to: query.get("to").map(|v| time("to", v)).transpose()?,
    };
    let limit = match query.get("limit") {
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                Refusal::bad_request(format!("limit: must be a number from 1 to {MAX_PAGE}, got {raw:?}"))
            })?,
        None => DEFAULT_PAGE,
    };
    let cursor = match query.get("cursor") {
        Some(raw) => Some(
            Cursor::decode(raw)
                .ok_or_else(|| Refusal::bad_request("cursor: not a cursor this API returned (nextCursor)"))?,
        ),
        None => None,
    };
    let sub = find_subscription(&app, &topic, &name).await?;
    let (records, next) = app
        .store
        .dead_letter_page(&subscription_key(&sub), range, cursor.as_ref(), limit)
        .await?;
    let value: Vec<Value> = records.iter().map(summary).collect();
    let destination = sub.dead_letter.as_ref().map(DeadLetterTarget::of);
    Ok((
        StatusCode::OK,
        Json(json!({ "value": value, "nextCursor": next.map(|c| c.encode()), "destination": destination })),
    ))
}

/// `GET …/deadLetters/destination`: where the dead letters go (store and container,
/// never a key) and, while writing them fails, why and since when.
pub async fn destination(State(app): State<Arc<App>>, Path((topic, name)): Path<(String, String)>) -> Reply {
    let sub = find_subscription(&app, &topic, &name).await?;
    let problem = app.store.dead_letter_problem(&sub.topic.key(), &sub.name.key()).await?;
    Ok((StatusCode::OK, Json(destination_body(&sub, problem.as_ref()))))
}

/// `GET …/deadLetters/{id}`: the summary and the record as written to the destination.
pub async fn show(State(app): State<Arc<App>>, Path((topic, name, id)): Path<(String, String, String)>) -> Reply {
    let sub = find_subscription(&app, &topic, &name).await?;
    let record = app
        .store
        .dead_letter(&subscription_key(&sub), &id)
        .await?
        .ok_or_else(|| Refusal::not_found(format!("dead letter {id:?} of subscription {name:?} does not exist")))?;
    let mut body = summary(&record);
    body["record"] = record.entry.record(&record.event_json);
    Ok((StatusCode::OK, Json(body)))
}

/// `POST …/deadLetters/redrive`
pub async fn redrive(
    State(app): State<Arc<App>>,
    Path((topic, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let body = body_object(&app, &headers, body, "a redrive request", &SELECTION_FIELDS).await?;
    let (selection, limit) = selection(&body)?;
    let sub = find_subscription(&app, &topic, &name).await?;
    let progress = operations::redrive(&app, &sub, &selection, limit).await?;
    Ok((
        StatusCode::OK,
        Json(json!({ "redriven": progress.done, "remaining": progress.remaining })),
    ))
}

/// `POST …/deadLetters/purge`
pub async fn purge(
    State(app): State<Arc<App>>,
    Path((topic, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let body = body_object(&app, &headers, body, "a purge request", &SELECTION_FIELDS).await?;
    let (selection, limit) = selection(&body)?;
    let sub = find_subscription(&app, &topic, &name).await?;
    let progress = app
        .store
        .purge_dead_letters(&subscription_key(&sub), &selection, limit)
        .await?;
    tracing::info!(topic = %sub.topic, subscription = %sub.name, purged = progress.done, remaining = progress.remaining, "dead letters purged");
    Ok((
        StatusCode::OK,
        Json(json!({ "purged": progress.done, "remaining": progress.remaining })),
    ))
}

/// How the API shows one record in a listing.
fn summary(record: &ArchivedRecord) -> Value {
    let event: Value = serde_json::from_str(&record.event_json).unwrap_or(Value::Null);
    let e = &record.entry;
    json!({
        "id": record.id,
        "eventId": record.event_id(),
        "eventType": event.get("eventType").or_else(|| event.get("type")),
        "subject": event.get("subject"),
        "deadLetterReason": e.reason.as_str(),
        "deliveryAttempts": e.delivery_attempts,
        "lastDeliveryOutcome": e.last_outcome.map(|o| o.as_str()),
        "lastHttpStatusCode": e.last_http_status_code,
        "publishTime": e.publish_time.to_rfc3339(),
        "deadLetteredAt": e.dead_lettered_at.to_rfc3339(),
        "redrivenAt": record.redriven_at.map(UnixMillis::to_rfc3339),
    })
}

fn time(field: &str, raw: &str) -> Result<UnixMillis, Refusal> {
    chrono::DateTime::parse_from_rfc3339(raw)
        .map(|t| UnixMillis(t.timestamp_millis()))
        .map_err(|_| Refusal::bad_request(format!("{field}: {raw:?} is not an RFC 3339 timestamp")))
}

/// Reads the selection of a redrive or purge request: `{"all": true}`, a time range
/// (`from` inclusive, `to` exclusive), `eventIds` (optionally within a range), or record
/// `ids`; and the most records to handle in this call.
fn selection(body: &Value) -> Result<(Selection, u64), Refusal> {
    let all = match body.get("all") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => return Err(Refusal::bad_request("all: must be true or false")),
    };
    let bound = |field: &str| -> Result<Option<UnixMillis>, Refusal> {
        match body.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => time(field, s).map(Some),
            Some(_) => Err(Refusal::bad_request(format!(
                "{field}: must be an RFC 3339 timestamp string"
            ))),
        }
    };
    let range = TimeRange {
        from: bound("from")?,
        to: bound("to")?,
    };
    let ids = strings(body, "ids")?;
    let event_ids = strings(body, "eventIds")?;
    let limit = match body.get("limit") {
        None | Some(Value::Null) => DEFAULT_CHUNK,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_CHUNK).contains(n))
            .ok_or_else(|| Refusal::bad_request(format!("limit: must be a number from 1 to {MAX_CHUNK}")))?,
    };
    let ranged = range.from.is_some() || range.to.is_some();
    let selection = match (ids, event_ids) {
        (Some(_), Some(_)) => return Err(Refusal::bad_request("ids: cannot be combined with eventIds")),
        (Some(_), _) if ranged || all => {
            return Err(Refusal::bad_request(
                "ids: names records exactly; leave out all, from and to",
            ));
        }
        (Some(ids), None) => Selection::Ids(ids),
        (None, Some(event_ids)) => Selection::EventIds(range, event_ids),
        (None, None) if all || ranged => Selection::Range(range),
        (None, None) => {
            return Err(Refusal::bad_request(
                "the request selects nothing: give \"all\": true, a time range (from, to), eventIds or ids",
            ));
        }
    };
    Ok((selection, limit))
}

fn strings(body: &Value, field: &str) -> Result<Option<Vec<String>>, Refusal> {
    let Some(v) = body.get(field) else { return Ok(None) };
    let items = v
        .as_array()
        .ok_or_else(|| Refusal::bad_request(format!("{field}: must be an array of strings")))?;
    if items.is_empty() || items.len() > MAX_IDS {
        return Err(Refusal::bad_request(format!(
            "{field}: must name from 1 to {MAX_IDS} ids, got {}",
            items.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_str()
                .map(str::to_owned)
                .ok_or_else(|| Refusal::bad_request(format!("{field}[{i}]: must be a string")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: Value) -> Result<(Selection, u64), String> {
        selection(&body).map_err(|r| r.message().to_owned())
    }

    #[test]
    fn selections_read_as_documented() {
        assert_eq!(
            parse(json!({"all": true})).unwrap(),
            (Selection::Range(TimeRange::default()), DEFAULT_CHUNK)
        );
        let (s, limit) = parse(json!({"from": "1970-01-01T00:00:01Z", "limit": 5})).unwrap();
        assert_eq!(
            s,
            Selection::Range(TimeRange {
                from: Some(UnixMillis(1_000)),
                to: None
            })
        );
        assert_eq!(limit, 5);
        assert_eq!(
            parse(json!({"eventIds": ["a"]})).unwrap().0,
            Selection::EventIds(TimeRange::default(), vec!["a".into()])
        );
        assert_eq!(
            parse(json!({"ids": ["r1"]})).unwrap().0,
            Selection::Ids(vec!["r1".into()])
        );
    }

    #[test]
    fn refusals_name_the_field() {
        for (body, field) in [
            (json!({}), "selects nothing"),
            (json!({"all": false}), "selects nothing"),
            (json!({"all": "yes"}), "all:"),
            (json!({"from": "yesterday"}), "from:"),
            (json!({"to": 5}), "to:"),
            (json!({"ids": []}), "ids:"),
            (json!({"ids": [1]}), "ids[0]:"),
            (json!({"ids": ["a"], "all": true}), "ids:"),
            (json!({"ids": ["a"], "eventIds": ["b"]}), "ids:"),
            (json!({"all": true, "limit": 0}), "limit:"),
            (json!({"all": true, "limit": 10_001}), "limit:"),
        ] {
            let message = parse(body.clone()).unwrap_err();
            assert!(message.contains(field), "{body}: {message}");
        }
    }
}
