//! `egctl status`: the deployment at a glance. Shows whatever `GET /admin/status`
//! reports (generically, so new fields appear without an egctl release); against an
//! eg-ingress without that endpoint it falls back to the queues and the catalog.

use super::topics::items;
use super::{Ctx, queues};
use crate::failure::Failure;
use crate::output::{cell, generic, table};
use serde_json::json;

pub async fn run(ctx: &Ctx) -> Result<String, Failure> {
    match ctx.api.get(&["status"]).await {
        Ok(status) => Ok(ctx.show(&status, generic)),
        Err(e) if e.is_not_found() => fallback(ctx).await,
        Err(e) => Err(e),
    }
}

/// Queue depths (when the server has them) plus every topic's subscriptions.
async fn fallback(ctx: &Ctx) -> Result<String, Failure> {
    let queues = match ctx.api.get(&["queues"]).await {
        Ok(q) => Some(q),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    let topics = ctx.api.get(&["topics"]).await?;
    let mut subscriptions = Vec::new();
    for topic in items(&topics) {
        let name = topic["name"].as_str().unwrap_or_default();
        let list = ctx.api.get(&["topics", name, "eventSubscriptions"]).await?;
        subscriptions.extend(items(&list).iter().map(|s| (name.to_owned(), s.clone())));
    }
    let value = json!({
        "queues": queues,
        "topics": topics["value"],
        "subscriptions": subscriptions.iter().map(|(_, s)| s).collect::<Vec<_>>(),
    });
    Ok(ctx.show(&value, |_| {
        let mut out = match &queues {
            Some(q) => format!("{}\n", queues::render(q)),
            None => String::new(),
        };
        let rows = subscriptions
            .iter()
            .map(|(topic, s)| {
                let p = &s["properties"];
                vec![
                    topic.clone(),
                    cell(&s["name"]),
                    cell(&p["provisioningState"]),
                    cell(&p["paused"]),
                    cell(&p["destination"]["properties"]["endpointBaseUrl"]),
                ]
            })
            .collect();
        out.push_str(&format!(
            "{} topics, {} subscriptions\n",
            items(&topics).len(),
            subscriptions.len()
        ));
        if !subscriptions.is_empty() {
            out.push_str(&table(&["TOPIC", "SUBSCRIPTION", "STATE", "PAUSED", "ENDPOINT"], rows));
        }
        out
    }))
}
