//! `egctl replays …`: replay a window of an archived topic into one subscription
//! (docs/archive.md, "Replay"), list a subscription's replays, follow one and cancel it.

use super::Ctx;
use crate::cli::ReplayCommand;
use crate::failure::Failure;
use crate::output::{cell, fields, table};
use crate::times;
use serde_json::{Map, Value, json};
use std::io::Write;
use std::time::Duration;

/// How often `--follow` reads the job again.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

pub async fn run(command: ReplayCommand, ctx: &Ctx) -> Result<String, Failure> {
    match command {
        ReplayCommand::Start {
            topic,
            subscription,
            from,
            to,
            event_types,
            subject_begins_with,
            rate,
            follow,
        } => {
            let mut body = json!({"from": times::format(from)});
            if let Some(to) = to {
                body["to"] = json!(times::format(to));
            }
            let mut filter = Map::new();
            if !event_types.is_empty() {
                filter.insert("includedEventTypes".into(), json!(event_types));
            }
            if let Some(prefix) = subject_begins_with {
                filter.insert("subjectBeginsWith".into(), json!(prefix));
            }
            if !filter.is_empty() {
                body["filter"] = Value::Object(filter);
            }
            if let Some(rate) = rate {
                body["maxEventsPerSecond"] = json!(rate);
            }
            let path = ["topics", &topic, "eventSubscriptions", &subscription, "replay"];
            let job = ctx.api.post(&path, Some(&body)).await?;
            if follow {
                let id = job["id"].as_str().unwrap_or_default().to_owned();
                return follow_job(ctx, &topic, &subscription, &id).await;
            }
            if !ctx.json {
                ctx.note(format!(
                    "follow it with `egctl replays show {topic} {subscription} {} --follow`",
                    cell(&job["id"])
                ));
            }
            Ok(ctx.show(&job, summary))
        }
        ReplayCommand::List { topic, subscription } => {
            let path = ["topics", &topic, "eventSubscriptions", &subscription, "replays"];
            let jobs = ctx.api.get(&path).await?;
            Ok(ctx.show(&jobs, |j| {
                let rows = j["value"]
                    .as_array()
                    .map(|jobs| {
                        jobs.iter()
                            .map(|job| {
                                vec![
                                    cell(&job["id"]),
                                    cell(&job["state"]),
                                    cell(&job["from"]),
                                    cell(&job["to"]),
                                    cell(&job["progress"]["replayed"]),
                                    cell(&job["progress"]["read"]),
                                    cell(&job["createdAt"]),
                                ]
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                table(&["ID", "STATE", "FROM", "TO", "REPLAYED", "READ", "CREATED"], rows)
            }))
        }
        ReplayCommand::Show {
            topic,
            subscription,
            id,
            follow,
        } => {
            if follow {
                return follow_job(ctx, &topic, &subscription, &id).await;
            }
            let job = ctx.api.get(&refs(&job_path(&topic, &subscription, &id))).await?;
            Ok(ctx.show(&job, summary))
        }
        ReplayCommand::Cancel {
            topic,
            subscription,
            id,
        } => {
            let mut path = job_path(&topic, &subscription, &id);
            path.push("cancel".into());
            let job = ctx.api.post(&refs(&path), None).await?;
            Ok(ctx.show(&job, summary))
        }
    }
}

fn refs(path: &[String]) -> Vec<&str> {
    path.iter().map(String::as_str).collect()
}

fn job_path(topic: &str, subscription: &str, id: &str) -> Vec<String> {
    ["topics", topic, "eventSubscriptions", subscription, "replays", id]
        .map(str::to_owned)
        .to_vec()
}

/// Prints the job's progress on stderr every second until it ends; answers its end.
async fn follow_job(ctx: &Ctx, topic: &str, subscription: &str, id: &str) -> Result<String, Failure> {
    let path = job_path(topic, subscription, id);
    loop {
        let job = ctx.api.get(&refs(&path)).await?;
        let running = job["state"] == "Running";
        if !ctx.json {
            let p = &job["progress"];
            let mut line = format!(
                "{}: {} replayed of {} read ({} filtered), {}/s",
                cell(&job["state"]),
                cell(&p["replayed"]),
                cell(&p["read"]),
                cell(&p["filtered"]),
                cell(&p["eventsPerSecond"])
            );
            if let Some(problem) = job["problem"].as_str() {
                line.push_str(&format!(" — {problem}"));
            }
            let _ = writeln!(std::io::stderr(), "{line}");
        }
        if !running {
            return Ok(ctx.show(&job, summary));
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

fn summary(job: &Value) -> String {
    let p = &job["progress"];
    let mut pairs = vec![
        ("id", cell(&job["id"])),
        ("state", cell(&job["state"])),
        (
            "subscription",
            format!("{}/{}", cell(&job["topic"]), cell(&job["subscription"])),
        ),
        ("window", format!("{} – {}", cell(&job["from"]), cell(&job["to"]))),
        ("replayed", cell(&p["replayed"])),
        ("read", cell(&p["read"])),
        ("filtered", cell(&p["filtered"])),
        ("events/s", cell(&p["eventsPerSecond"])),
        ("max events/s", cell(&job["maxEventsPerSecond"])),
    ];
    if !job["filter"].is_null() {
        pairs.push(("filter", job["filter"].to_string()));
    }
    if let Some(problem) = job["problem"].as_str() {
        pairs.push(("problem", problem.to_owned()));
    }
    if !job["finishedAt"].is_null() {
        pairs.push(("finished", cell(&job["finishedAt"])));
    }
    fields(pairs)
}
