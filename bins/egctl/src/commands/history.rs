//! `egctl history`: every delivery attempt of one event, per subscription, and what
//! became of it. A step that made no attempt says why: a held-back one names its
//! reason and until when it holds; a paused one waits for the resume, not for a time.
//! A failed attempt shows what the destination said, when it said more than its outcome.

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
                next_attempt(a),
                reason(a),
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

/// When the step's delivery is next attempted. A paused one is attempted only after a
/// resume; the time it carries is its expiry (`nextAttemptTime` from a server that did
/// not send `expiresAt` yet).
fn next_attempt(step: &Value) -> String {
    if step["state"] != "Paused" {
        return cell(&step["nextAttemptTime"]);
    }
    let expires = if step["expiresAt"].is_string() {
        &step["expiresAt"]
    } else {
        &step["nextAttemptTime"]
    };
    match expires.as_str() {
        Some(at) => format!("waits for resume (expires at {at})"),
        None => "waits for resume".to_owned(),
    }
}

/// Why the step ended as it did: the dead-letter or drop reason, or for a step that made
/// no attempt, what it waits for.
fn reason(step: &Value) -> String {
    let until = cell(&step["heldUntil"]);
    match (step["state"].as_str(), step["heldBecause"].as_str()) {
        (Some("HeldBack"), Some("EndpointProbation")) => format!("endpoint on probation until {until}"),
        (Some("HeldBack"), Some("AwaitingValidation")) => {
            format!("endpoint not validated yet; checked again at {until}")
        }
        (Some("HeldBack"), Some("NoFreeSlot")) => "no sender slot was free; handed back to any sender".to_owned(),
        (Some("HeldBack"), Some(other)) => format!("held back: {other} until {until}"),
        (Some("HeldBack"), None) => "held back (reason not recorded)".to_owned(),
        (Some("Paused"), _) => "subscription paused".to_owned(),
        _ => match (step["reason"].as_str(), step["error"].as_str()) {
            (Some(reason), Some(error)) => format!("{reason}; {error}"),
            (None, Some(error)) => error.to_owned(),
            _ => cell(&step["reason"]),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn history(step: Value) -> String {
        render(&json!({"eventId": "e1", "topic": "orders", "value": [step]}))
    }

    #[test]
    fn a_held_back_row_says_why_and_until_when() {
        let out = history(json!({
            "subscription": "billing", "attempt": 10, "time": "2026-01-01T00:00:00.000Z",
            "state": "HeldBack", "nextAttemptTime": "2026-01-01T00:05:01.000Z",
            "heldBecause": "EndpointProbation", "heldUntil": "2026-01-01T00:05:00.000Z",
        }));
        assert!(
            out.contains("endpoint on probation until 2026-01-01T00:05:00.000Z"),
            "{out}"
        );
        assert!(out.contains("2026-01-01T00:05:01.000Z"), "the next attempt: {out}");

        let out = history(json!({
            "subscription": "billing", "attempt": 0, "state": "HeldBack",
            "heldBecause": "AwaitingValidation", "heldUntil": "2026-01-01T00:00:10.000Z",
        }));
        assert!(
            out.contains("endpoint not validated yet; checked again at 2026-01-01T00:00:10.000Z"),
            "{out}"
        );
    }

    #[test]
    fn a_held_back_row_from_before_reasons_were_recorded_says_so() {
        let out = history(json!({"subscription": "billing", "attempt": 1, "state": "HeldBack"}));
        assert!(out.contains("held back (reason not recorded)"), "{out}");
    }

    #[test]
    fn a_paused_row_waits_for_the_resume_not_for_its_expiry() {
        let out = history(json!({
            "subscription": "billing", "attempt": 0, "state": "Paused",
            "nextAttemptTime": null, "expiresAt": "2026-01-02T00:00:00.000Z",
        }));
        assert!(
            out.contains("waits for resume (expires at 2026-01-02T00:00:00.000Z)"),
            "{out}"
        );
        assert!(out.contains("subscription paused"), "{out}");
        // An older server sent the expiry as the next attempt: still shown as the expiry.
        let old = history(json!({
            "subscription": "billing", "attempt": 0, "state": "Paused",
            "nextAttemptTime": "2026-01-02T00:00:00.000Z",
        }));
        assert!(
            old.contains("waits for resume (expires at 2026-01-02T00:00:00.000Z)"),
            "{old}"
        );
    }

    #[test]
    fn other_rows_show_their_next_attempt_and_reason_as_sent() {
        let out = history(json!({
            "subscription": "billing", "attempt": 5, "state": "DeadLettered",
            "outcome": "GenericError", "httpStatus": 500, "durationMs": 3,
            "reason": "MaxDeliveryAttemptsExceeded",
        }));
        assert!(out.contains("MaxDeliveryAttemptsExceeded"), "{out}");
        assert!(out.contains("3ms"), "{out}");
    }

    #[test]
    fn a_failed_attempt_shows_what_the_destination_said() {
        let missing = r#"no JetStream stream captures subject "late.orders""#;
        let out = history(json!({
            "subscription": "audit", "attempt": 1, "state": "Retrying", "outcome": "NotFound",
            "error": missing,
        }));
        assert!(out.contains(missing), "{out}");
        let out = history(json!({
            "subscription": "audit", "attempt": 2, "state": "DeadLettered", "outcome": "NotFound",
            "reason": "MaxDeliveryAttemptsExceeded", "error": missing,
        }));
        assert!(
            out.contains(&format!("MaxDeliveryAttemptsExceeded; {missing}")),
            "{out}"
        );
    }
}
