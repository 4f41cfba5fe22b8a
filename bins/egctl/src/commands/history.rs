//! `egctl history`: every delivery attempt of one event, per subscription, and what
//! became of it.

use super::Ctx;
use super::topics::items;
use crate::cli::HistoryArgs;
use crate::failure::Failure;
use crate::output::{cell, table};
use serde_json::Value;

pub async fn run(args: HistoryArgs, ctx: &Ctx) -> Result<String, Failure> {
    let query: Vec<(&str, String)> = args.subscription.iter().map(|s| ("subscription", s.clone())).collect();
    let path = [
        "topics",
        args.topic.as_str(),
        "events",
        args.event_id.as_str(),
        "history",
    ];
    let history = ctx.api.get_query(&path, &query).await?;
    Ok(ctx.show(&history, render))
}

fn render(history: &Value) -> String {
    let rows = items(history)
        .iter()
        .map(|a| {
            let duration = a["durationMs"]
                .as_u64()
                .map_or_else(|| "-".to_owned(), |ms| format!("{ms}ms"));
            vec![
                cell(&a["subscription"]),
                cell(&a["attempt"]),
                cell(&a["time"]),
                cell(&a["outcome"]),
                cell(&a["httpStatus"]),
                duration,
                cell(&a["state"]),
                cell(&a["nextAttemptTime"]),
                cell(&a["reason"]),
            ]
        })
        .collect();
    format!(
        "event {} of topic {}\n{}",
        cell(&history["eventId"]),
        cell(&history["topic"]),
        table(
            &[
                "SUBSCRIPTION",
                "ATTEMPT",
                "TIME",
                "OUTCOME",
                "HTTP",
                "DURATION",
                "STATE",
                "NEXT ATTEMPT",
                "REASON"
            ],
            rows
        )
    )
}
