//! `egctl queues`: how much work waits where, per partition and per tier, and in each
//! queue-mode subscription's queue (pull delivery: what waits for its consumers).

use super::Ctx;
use crate::failure::Failure;
use crate::output::{cell, table};
use serde_json::Value;

pub async fn run(ctx: &Ctx) -> Result<String, Failure> {
    let queues = ctx.api.get(&["queues"]).await?;
    Ok(ctx.show(&queues, render))
}

/// One row per queue-mode subscription: its topic, name and queue figures (`available`,
/// `locked`, `delayed`, `oldestUnacknowledgedSeconds`, as `GET /admin/queues` and
/// `GET /admin/status` write them). Empty when there is none.
pub fn subscription_queues<'a>(rows: impl IntoIterator<Item = (String, String, &'a Value)>) -> String {
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(topic, name, q)| {
            let oldest = q["oldestUnacknowledgedSeconds"].as_u64().map_or_else(
                || "-".to_owned(),
                |s| humantime::format_duration(std::time::Duration::from_secs(s)).to_string(),
            );
            vec![
                topic,
                name,
                cell(&q["available"]),
                cell(&q["locked"]),
                cell(&q["delayed"]),
                oldest,
            ]
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    table(
        &[
            "TOPIC",
            "QUEUE SUBSCRIPTION",
            "AVAILABLE",
            "LOCKED",
            "DELAYED",
            "OLDEST UNACKED",
        ],
        rows,
    )
}

/// The tier table (which tier the work waits for), then the partition table, then the
/// queue subscriptions' queues.
pub fn render(queues: &Value) -> String {
    let total = &queues["total"];
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let tiers = vec![
        vec![
            "eg-sender".to_owned(),
            (n(total, "ready") + n(total, "inFlight")).to_string(),
            format!("ready {}, in flight {}", n(total, "ready"), n(total, "inFlight")),
        ],
        vec![
            "eg-scheduler".to_owned(),
            (n(total, "retry") + n(total, "paused")).to_string(),
            format!("retry {}, paused {}", n(total, "retry"), n(total, "paused")),
        ],
        vec![
            "eg-deadletter".to_owned(),
            n(total, "deadLetterBacklog").to_string(),
            format!("dead-letter backlog {}", n(total, "deadLetterBacklog")),
        ],
    ];
    let columns = ["ready", "inFlight", "retry", "paused", "deadLetterBacklog"];
    let partitions = queues["partitions"].as_array().map_or(&[][..], Vec::as_slice);
    let mut rows: Vec<Vec<String>> = partitions
        .iter()
        .map(|p| {
            std::iter::once(cell(&p["partition"]))
                .chain(columns.iter().map(|c| cell(&p[*c])))
                .collect()
        })
        .collect();
    rows.push(
        std::iter::once("total".to_owned())
            .chain(columns.iter().map(|c| cell(&total[*c])))
            .collect(),
    );
    let pulled = queues["subscriptionQueues"].as_array().map_or(&[][..], Vec::as_slice);
    let pulled = subscription_queues(pulled.iter().map(|q| (cell(&q["topic"]), cell(&q["subscription"]), q)));
    format!(
        "{}\n{}{}",
        table(&["TIER", "QUEUED", "DETAIL"], tiers),
        table(
            &[
                "PARTITION",
                "READY",
                "IN FLIGHT",
                "RETRY",
                "PAUSED",
                "DEAD-LETTER BACKLOG"
            ],
            rows
        ),
        if pulled.is_empty() {
            String::new()
        } else {
            format!("\n{pulled}")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn queue_subscriptions_get_a_table_of_their_own() {
        let queues = json!({
            "partitions": [{"partition": 0, "ready": 2}],
            "total": {"ready": 2},
            "subscriptionQueues": [
                {"topic": "orders", "subscription": "workers", "available": 12, "locked": 3, "delayed": 1,
                 "oldestUnacknowledgedSeconds": 125},
                {"topic": "orders", "subscription": "idle", "available": 0, "locked": 0, "delayed": 0,
                 "oldestUnacknowledgedSeconds": null},
            ],
        });
        let text = render(&queues);
        assert!(text.contains("QUEUE SUBSCRIPTION"), "{text}");
        let row = |name: &str| {
            text.lines()
                .find(|l| l.contains(name))
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            row("workers"),
            ["orders", "workers", "12", "3", "1", "2m", "5s"],
            "{text}"
        );
        assert_eq!(row("idle"), ["orders", "idle", "0", "0", "0", "-"], "{text}");
        // None: no table at all.
        assert!(!render(&json!({"partitions": [], "total": {}})).contains("QUEUE SUBSCRIPTION"));
    }
}
