//! `egctl deadletters …`: a subscription's dead letters — listing (following the
//! API's cursor), one record in full, redrive and purge. Redrive and purge may cover
//! thousands of records, so they call the API chunk by chunk until nothing matching
//! remains, showing progress on stderr.

use super::{Ctx, count};
use crate::cli::{DeadLetterCommand, Selection, Window};
use crate::failure::Failure;
use crate::output::{cell, fields, json, table};
use crate::progress::Progress;
use crate::times;
use serde_json::{Map, Value, json};
use std::io::{BufRead, IsTerminal, Write};

/// The API's largest page.
const MAX_PAGE: u64 = 1000;

pub async fn run(command: DeadLetterCommand, ctx: &Ctx) -> Result<String, Failure> {
    match command {
        DeadLetterCommand::List {
            topic,
            subscription,
            window,
            limit,
        } => list(ctx, &topic, &subscription, &window, limit).await,
        DeadLetterCommand::Show {
            topic,
            subscription,
            id,
        } => {
            let path = [
                "topics",
                &topic,
                "eventSubscriptions",
                &subscription,
                "deadLetters",
                &id,
            ];
            let one = ctx.api.get(&path).await?;
            Ok(ctx.show(&one, |d| {
                let mut pairs = summary_fields(d);
                pairs.insert(0, ("id", cell(&d["id"])));
                format!("{}\nrecord:\n{}", fields(pairs), json(&d["record"]))
            }))
        }
        DeadLetterCommand::Redrive {
            topic,
            subscription,
            selection,
            chunk,
        } => {
            let totals = repeat(ctx, &topic, &subscription, &selection, chunk, Action::Redrive).await?;
            Ok(ctx.show(&totals, |t| report(t, Action::Redrive, &topic, &subscription)))
        }
        DeadLetterCommand::Purge {
            topic,
            subscription,
            selection,
            chunk,
            yes,
        } => {
            if !yes {
                confirm(&topic, &subscription, &selection)?;
            }
            let totals = repeat(ctx, &topic, &subscription, &selection, chunk, Action::Purge).await?;
            Ok(ctx.show(&totals, |t| report(t, Action::Purge, &topic, &subscription)))
        }
    }
}

async fn list(ctx: &Ctx, topic: &str, subscription: &str, window: &Window, limit: u64) -> Result<String, Failure> {
    let path = ["topics", topic, "eventSubscriptions", subscription, "deadLetters"];
    let mut records: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut destination = Value::Null;
    // Pages until the limit is reached or the API has no more.
    let more = loop {
        let wanted = limit.saturating_sub(records.len() as u64);
        if wanted == 0 {
            break cursor;
        }
        let mut query = window_query(window);
        query.push(("limit", wanted.min(MAX_PAGE).to_string()));
        if let Some(c) = &cursor {
            query.push(("cursor", c.clone()));
        }
        let page = ctx.api.get_query(&path, &query).await?;
        destination = page["destination"].clone();
        let items = page["value"].as_array().cloned().unwrap_or_default();
        let got = items.len();
        records.extend(items);
        cursor = page["nextCursor"].as_str().map(str::to_owned);
        if cursor.is_none() || got == 0 {
            break None;
        }
    };
    if let Some(place) = crate::destinations::describe(&destination).filter(|_| !ctx.json) {
        ctx.note(format!(
            "{topic}/{subscription} dead-letters to {place}; `egctl subscriptions show {topic} {subscription}` says whether writing there fails"
        ));
    }
    if more.is_some() && !ctx.json {
        ctx.note(format!(
            "more dead letters match; raise --limit (now {limit}) or narrow --from/--to to see them"
        ));
    }
    let value = json!({"value": records, "nextCursor": more});
    Ok(ctx.show(&value, |_| {
        let rows = records
            .iter()
            .map(|d| {
                vec![
                    cell(&d["id"]),
                    cell(&d["eventId"]),
                    cell(&d["eventType"]),
                    cell(&d["subject"]),
                    cell(&d["deadLetterReason"]),
                    cell(&d["deliveryAttempts"]),
                    cell(&d["lastHttpStatusCode"]),
                    cell(&d["deadLetteredAt"]),
                    cell(&d["redrivenAt"]),
                ]
            })
            .collect();
        table(
            &[
                "ID",
                "EVENT ID",
                "TYPE",
                "SUBJECT",
                "REASON",
                "ATTEMPTS",
                "HTTP",
                "DEAD-LETTERED",
                "REDRIVEN",
            ],
            rows,
        )
    }))
}

fn window_query(window: &Window) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    if let Some(from) = window.from {
        query.push(("from", times::format(from)));
    }
    if let Some(to) = window.to {
        query.push(("to", times::format(to)));
    }
    query
}

fn summary_fields(d: &Value) -> Vec<(&'static str, String)> {
    [
        "eventId",
        "eventType",
        "subject",
        "deadLetterReason",
        "deliveryAttempts",
        "lastDeliveryOutcome",
        "lastHttpStatusCode",
        "publishTime",
        "deadLetteredAt",
        "redrivenAt",
    ]
    .into_iter()
    .map(|k| (k, cell(&d[k])))
    .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Redrive,
    Purge,
}

impl Action {
    fn path(self) -> &'static str {
        match self {
            Action::Redrive => "redrive",
            Action::Purge => "purge",
        }
    }

    /// The answer's count field, also the word for progress.
    fn done(self) -> &'static str {
        match self {
            Action::Redrive => "redriven",
            Action::Purge => "purged",
        }
    }
}

/// The selection as the API takes it.
fn selection_body(selection: &Selection) -> Map<String, Value> {
    let mut body = Map::new();
    if selection.all {
        body.insert("all".into(), json!(true));
    }
    if let Some(from) = selection.from {
        body.insert("from".into(), json!(times::format(from)));
    }
    if let Some(to) = selection.to {
        body.insert("to".into(), json!(times::format(to)));
    }
    if !selection.event_ids.is_empty() {
        body.insert("eventIds".into(), json!(selection.event_ids));
    }
    if !selection.ids.is_empty() {
        body.insert("ids".into(), json!(selection.ids));
    }
    body
}

/// Calls redrive or purge until nothing matching remains (or a call handles nothing,
/// so a record the server cannot handle now does not loop forever); returns the totals.
async fn repeat(
    ctx: &Ctx,
    topic: &str,
    subscription: &str,
    selection: &Selection,
    chunk: u32,
    action: Action,
) -> Result<Value, Failure> {
    let path = [
        "topics",
        topic,
        "eventSubscriptions",
        subscription,
        "deadLetters",
        action.path(),
    ];
    let mut body = selection_body(selection);
    body.insert("limit".into(), json!(chunk));
    let body = Value::Object(body);
    let mut progress = Progress::new(action.done());
    let mut total = 0;
    let remaining = loop {
        let answer = ctx.api.post(&path, Some(&body)).await?;
        let (Some(done), Some(remaining)) = (answer[action.done()].as_u64(), answer["remaining"].as_u64()) else {
            return Err(Failure::other(format!(
                "{} answered without {} and remaining: {answer}",
                action.path(),
                action.done()
            )));
        };
        total += done;
        if remaining == 0 || done == 0 {
            break remaining;
        }
        progress.update(total, remaining);
    };
    progress.finish();
    Ok(json!({ action.done(): total, "remaining": remaining }))
}

fn report(totals: &Value, action: Action, topic: &str, subscription: &str) -> String {
    let done = totals[action.done()].as_u64().unwrap_or(0);
    let remaining = totals["remaining"].as_u64().unwrap_or(0);
    let mut line = format!(
        "{} {} of {topic}/{subscription}",
        action.done(),
        count(done, "dead letter", "dead letters")
    );
    if remaining > 0 {
        line.push_str(&format!(
            "; {remaining} matching could not be {} now (run it again later)",
            action.done()
        ));
    }
    line.push('\n');
    line
}

/// Purging cannot be undone: ask on a terminal, refuse elsewhere without `--yes`.
fn confirm(topic: &str, subscription: &str, selection: &Selection) -> Result<(), Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(Failure::usage(
            "purge deletes dead letters for good: pass --yes to confirm (stdin is not a terminal, so egctl cannot ask)",
        ));
    }
    let what = if selection.all {
        "every dead letter".to_owned()
    } else {
        format!("the dead letters matching {}", Value::Object(selection_body(selection)))
    };
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "purge {what} of {topic}/{subscription}? This cannot be undone. [y/N] "
    );
    let _ = err.flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::usage(format!("cannot read the answer: {e}")))?;
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err(Failure::usage("purge cancelled"))
    }
}
