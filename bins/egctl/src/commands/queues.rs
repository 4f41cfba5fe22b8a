//! `egctl queues`: how much work waits where, per partition and per tier.

use super::Ctx;
use crate::failure::Failure;
use crate::output::{cell, table};
use serde_json::Value;

pub async fn run(ctx: &Ctx) -> Result<String, Failure> {
    let queues = ctx.api.get(&["queues"]).await?;
    Ok(ctx.show(&queues, render))
}

/// The tier table (which tier the work waits for), then the partition table.
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
    format!(
        "{}\n{}",
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
        )
    )
}
