//! `egctl status`: the deployment at a glance, from `GET /admin/status` (the data of
//! the status page). First the problems, and the subscriptions whose dead letters
//! cannot be written (what the store said, since when). The sections egctl knows
//! (rates, topics and their
//! subscriptions, queues, the running copies of each tier) get tables of their own; anything else the server adds is
//! shown generically, so a newer server never breaks an older egctl. Under the topics,
//! a line per topic whose events went nowhere: how many matched no active subscription
//! in the last hour, and which subscriptions wait for validation and why. Then the
//! queue-mode subscriptions' queues (pull delivery). Against an
//! eg-ingress without that endpoint it falls back to the queues and the catalog.

use super::topics::items;
use super::{Ctx, count, queues};
use crate::failure::Failure;
use crate::output::{cell, decimal, generic, table};
use serde_json::{Map, Value, json};

/// The top-level fields rendered by their own sections.
const KNOWN: [&str; 8] = [
    "generatedAt",
    "problems",
    "failingDeadLetterDestinations",
    "failingIdentities",
    "rates",
    "topics",
    "queues",
    "tiers",
];

pub async fn run(ctx: &Ctx) -> Result<String, Failure> {
    match ctx.api.get(&["status"]).await {
        Ok(status) => Ok(ctx.show(&status, render)),
        Err(e) if e.is_not_found() => fallback(ctx).await,
        Err(e) => Err(e),
    }
}

fn render(status: &Value) -> String {
    let Value::Object(fields) = status else {
        return generic(status);
    };
    let mut sections: Vec<String> = Vec::new();
    let mut head = String::new();
    if let Some(at) = fields.get("generatedAt").and_then(Value::as_str) {
        head.push_str(&format!("status at {at}\n"));
    }
    for problem in fields.get("problems").and_then(Value::as_array).into_iter().flatten() {
        head.push_str(&format!("problem: {}\n", cell(problem)));
    }
    sections.push(head);
    if let Some(failing) = fields.get("failingDeadLetterDestinations").and_then(Value::as_array) {
        sections.push(failing_dead_letters_section(failing));
    }
    if let Some(failing) = fields.get("failingIdentities").and_then(Value::as_array) {
        sections.push(failing_identities_section(failing));
    }
    if let Some(rates) = fields.get("rates").filter(|r| r.is_object()) {
        sections.push(rates_section(rates));
    }
    if let Some(topics) = fields.get("topics").and_then(Value::as_array) {
        sections.push(topics_section(topics));
        sections.push(topics.iter().filter_map(unmatched_line).collect());
        sections.push(queue_subscriptions_section(topics));
    }
    if let Some(queues) = fields.get("queues").filter(|q| q.is_object()) {
        sections.push(queues::render(queues));
    }
    if let Some(tiers) = fields.get("tiers").and_then(Value::as_array) {
        sections.push(tiers_section(tiers));
    }
    let rest: Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| !KNOWN.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !rest.is_empty() {
        sections.push(generic(&Value::Object(rest)));
    }
    sections.retain(|s| !s.is_empty());
    sections.join("\n")
}

/// The subscriptions whose dead letters cannot be written now, under a title that says
/// so; nothing while none fails.
fn failing_dead_letters_section(failing: &[Value]) -> String {
    if failing.is_empty() {
        return String::new();
    }
    let rows = failing
        .iter()
        .map(|f| {
            vec![
                cell(&f["topic"]),
                cell(&f["subscription"]),
                cell(&f["kind"]),
                format!("{} / {}", cell(&f["store"]), cell(&f["container"])),
                cell(&f["failingSince"]),
                cell(&f["message"]),
            ]
        })
        .collect();
    format!(
        "dead letters not being written ({}; records wait in Redis, retried until EG__DEADLETTER__GIVE_UP_AFTER):\n{}",
        count(failing.len() as u64, "subscription", "subscriptions"),
        table(
            &[
                "TOPIC",
                "SUBSCRIPTION",
                "PROBLEM",
                "DESTINATION",
                "FAILING SINCE",
                "MESSAGE"
            ],
            rows
        )
    )
}

/// The delivery identities that get no tokens (their webhooks' deliveries are
/// `TokenUnavailable`); nothing while none fails.
fn failing_identities_section(failing: &[Value]) -> String {
    if failing.is_empty() {
        return String::new();
    }
    let rows = failing
        .iter()
        .map(|f| {
            vec![
                cell(&f["identity"]),
                cell(&f["kind"]),
                cell(&f["subscriptions"]),
                cell(&f["failingSince"]),
                cell(&f["lastFailureTime"]),
                cell(&f["message"]),
            ]
        })
        .collect();
    format!(
        "delivery identities without tokens ({}; their webhooks' deliveries wait, TokenUnavailable):\n{}",
        count(failing.len() as u64, "identity", "identities"),
        table(
            &[
                "IDENTITY",
                "PROBLEM",
                "SUBSCRIPTIONS",
                "FAILING SINCE",
                "LAST SEEN",
                "MESSAGE"
            ],
            rows
        )
    )
}

/// A row per running copy of each tier (from their heartbeats); a tier with none
/// running says so, since that is the first thing to look at when nothing moves.
fn tiers_section(tiers: &[Value]) -> String {
    let mut rows = Vec::new();
    for tier in tiers {
        let copies = tier["copies"].as_array().map(Vec::as_slice).unwrap_or_default();
        if copies.is_empty() {
            rows.push(vec![
                cell(&tier["tier"]),
                "none running".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
        }
        for copy in copies {
            let up = copy["uptimeSeconds"].as_u64().map_or_else(
                || "-".to_owned(),
                |s| humantime::format_duration(std::time::Duration::from_secs(s)).to_string(),
            );
            rows.push(vec![
                cell(&tier["tier"]),
                cell(&copy["instance"]),
                cell(&copy["version"]),
                up,
                cell(&copy["lastSeen"]),
            ]);
        }
    }
    table(&["TIER", "COPY", "VERSION", "UP FOR", "LAST HEARD"], rows)
}

/// One line of counts over the last minute with their rates, then the breakdowns.
fn rates_section(rates: &Value) -> String {
    let counts = &rates["lastMinute"];
    let window = rates["windowSeconds"]
        .as_f64()
        .map_or_else(String::new, |s| format!(" ({s:.0} s)"));
    let kinds = [
        ("published", "published"),
        ("delivered", "delivered"),
        ("failed", "failed attempts"),
        ("deadLettered", "dead-lettered"),
        ("dropped", "dropped"),
    ];
    let parts: Vec<String> = kinds
        .iter()
        .map(|(key, label)| {
            let rate = rates[*key]
                .as_f64()
                .map_or_else(String::new, |r| format!(" ({}/s)", decimal(r)));
            format!("{label} {}{rate}", cell(&counts[*key]))
        })
        .collect();
    let mut out = format!("last minute{window}: {}\n", parts.join(", "));
    for (key, label) in [
        ("failuresByOutcome", "failures by outcome"),
        ("deadLetteredByReason", "dead-lettered by reason"),
        ("droppedByReason", "dropped by reason"),
    ] {
        if let Some(by) = counts[key].as_object().filter(|m| !m.is_empty()) {
            let list: Vec<String> = by.iter().map(|(k, v)| format!("{k} {}", cell(v))).collect();
            out.push_str(&format!("{label}: {}\n", list.join(", ")));
        }
    }
    out
}

/// One row per subscription (a topic without any gets a row of its own).
fn topics_section(topics: &[Value]) -> String {
    let mut rows = Vec::new();
    for topic in topics {
        let name = match topic["namespaceTopic"].as_bool() {
            Some(true) => format!("{} (namespace)", cell(&topic["name"])),
            _ => cell(&topic["name"]),
        };
        let publish = topic["publishRate"].as_f64().map_or_else(|| "-".to_owned(), decimal);
        let subs = topic["subscriptions"].as_array().map_or(&[][..], Vec::as_slice);
        if subs.is_empty() {
            let mut row = vec![name.clone(), publish.clone()];
            row.resize(10, "-".to_owned());
            rows.push(row);
        }
        for sub in subs {
            let probation = match &sub["probation"] {
                Value::Null => "-".to_owned(),
                p => match p["until"].as_str() {
                    Some(until) => format!("{} until {until}", cell(&p["state"])),
                    None => cell(&p["state"]),
                },
            };
            let sub_name = match sub["deliveryMode"].as_str() {
                Some("Queue") => format!("{} (queue)", cell(&sub["name"])),
                _ => cell(&sub["name"]),
            };
            rows.push(vec![
                name.clone(),
                publish.clone(),
                sub_name,
                cell(&sub["provisioningState"]),
                cell(&sub["paused"]),
                cell(&sub["deliveryRate"]),
                cell(&sub["failureRate"]),
                cell(&sub["deadLetterRate"]),
                format!("{}/{}", cell(&sub["deadLettersNotRedriven"]), cell(&sub["deadLetters"])),
                probation,
            ]);
        }
    }
    table(
        &[
            "TOPIC",
            "PUBLISHED/S",
            "SUBSCRIPTION",
            "STATE",
            "PAUSED",
            "DELIVERED/S",
            "FAILED/S",
            "DEAD-LETTERED/S",
            "DEAD LETTERS (NOT REDRIVEN/ALL)",
            "PROBATION",
        ],
        rows,
    )
}

/// The queue-mode subscriptions with their queues (available, locked, delayed, oldest
/// unacknowledged age); nothing when there is none.
fn queue_subscriptions_section(topics: &[Value]) -> String {
    queues::subscription_queues(topics.iter().flat_map(|topic| {
        topic["subscriptions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|sub| sub["deliveryMode"] == "Queue")
            .map(move |sub| (cell(&topic["name"]), cell(&sub["name"]), &sub["queue"]))
    }))
}

/// For a topic with events that went nowhere, or subscriptions that get none: how many
/// events matched no active subscription in the last hour, and each subscription that
/// is not `Succeeded` with the events it would have matched and its reason. `None` when
/// all is well.
fn unmatched_line(topic: &Value) -> Option<String> {
    let name = cell(&topic["name"]);
    let unmatched = topic["unmatchedLastHour"].as_u64().unwrap_or(0);
    let inactive: Vec<String> = topic["subscriptions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|sub| {
            let state = sub["provisioningState"].as_str()?;
            let waiting = match state {
                "Succeeded" => return None,
                "AwaitingManualAction" => "is waiting for validation".to_owned(),
                other => format!("is {other}"),
            };
            let missed = sub["missedLastHour"].as_u64().map_or_else(String::new, |n| {
                format!(" ({} missed in the last hour)", count(n, "event", "events"))
            });
            let reason = sub["provisioningMessage"]
                .as_str()
                .map_or_else(String::new, |m| format!(": {m}"));
            Some(format!("{name}/{} {waiting}{missed}{reason}", cell(&sub["name"])))
        })
        .collect();
    if unmatched == 0 && inactive.is_empty() {
        return None;
    }
    let mut parts = vec![format!(
        "{name}: {} matched no active subscription in the last hour",
        count(unmatched, "event", "events")
    )];
    parts.extend(inactive);
    Some(format!("{}\n", parts.join("; ")))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_known_sections_and_keeps_unknown_ones() {
        let status = json!({
            "generatedAt": "2026-01-02T03:04:05Z",
            "problems": ["catalog not refreshed"],
            "rates": {"windowSeconds": 55.0, "published": 0.5, "delivered": 0.25, "failed": 0.0,
                      "deadLettered": 0.0, "dropped": 0.0,
                      "lastMinute": {"published": 30, "delivered": 15, "failed": 0, "deadLettered": 0, "dropped": 0,
                                     "failuresByOutcome": {"TimedOut": 2}}},
            "topics": [
                {"name": "orders", "publishRate": 0.5, "subscriptions": [
                    {"name": "audit", "paused": true, "provisioningState": "Succeeded", "deliveryRate": 0.25,
                     "failureRate": 0.0, "deadLetterRate": 0.0, "deadLetters": 3, "deadLettersNotRedriven": 1,
                     "probation": {"state": "Probation", "until": "2026-01-02T03:05:00Z"}}]},
                {"name": "empty", "publishRate": 0.0, "subscriptions": []},
            ],
            "queues": {"partitions": [], "total": {"ready": 4}},
            "tiers": [
                {"tier": "eg-ingress", "copies": []},
                {"tier": "eg-sender", "copies": [
                    {"instance": "sender-a", "version": "0.1.0", "uptimeSeconds": 3725, "lastSeen": "2026-01-02T03:04:05Z"},
                    {"instance": "sender-b", "version": "0.1.0", "uptimeSeconds": 5, "lastSeen": "2026-01-02T03:04:06Z"}]},
            ],
            "senders": 3,
        });
        let text = render(&status);
        assert!(text.contains("problem: catalog not refreshed"), "{text}");
        assert!(text.contains("published 30 (0.50/s)"), "{text}");
        assert!(text.contains("failures by outcome: TimedOut 2"), "{text}");
        let audit = text.lines().find(|l| l.starts_with("orders")).unwrap_or_default();
        assert!(
            audit.contains("audit") && audit.contains("1/3") && audit.contains("Probation until"),
            "{text}"
        );
        assert!(text.lines().any(|l| l.starts_with("empty")), "{text}");
        assert!(text.contains("eg-sender      4"), "{text}");
        assert!(text.contains("senders:"), "{text}");
        let tier_rows: Vec<&str> = text.lines().filter(|l| l.starts_with("eg-")).collect();
        assert!(
            tier_rows
                .iter()
                .any(|l| l.contains("eg-ingress") && l.contains("none running")),
            "{text}"
        );
        assert!(
            tier_rows
                .iter()
                .any(|l| l.contains("sender-a") && l.contains("1h 2m 5s")),
            "{text}"
        );
        assert!(
            tier_rows.iter().any(|l| l.contains("sender-b") && l.contains("5s")),
            "{text}"
        );
        assert!(!text.contains("\"copies\""), "no raw JSON: {text}");
        assert!(!text.contains("matched no active subscription"), "all is well: {text}");
        assert!(!text.contains("dead letters not being written"), "all is well: {text}");
    }

    #[test]
    fn failing_dead_letter_destinations_come_first_with_what_the_store_said() {
        let status = json!({
            "generatedAt": "2026-11-25T16:10:00.000Z",
            "problems": [],
            "failingDeadLetterDestinations": [
                {"topic": "orders", "subscription": "audit", "store": "s3:minio", "container": "eg-dead",
                 "kind": "Unauthenticated", "message": "The AWS Access Key Id you provided does not exist.",
                 "failingSince": "2026-11-25T16:00:00.000Z", "lastFailureTime": "2026-11-25T16:09:00.000Z"}],
            "topics": [{"name": "orders", "publishRate": 0.0, "subscriptions": []}],
        });
        let text = render(&status);
        assert!(
            text.contains("dead letters not being written (1 subscription;"),
            "{text}"
        );
        let row = text
            .lines()
            .find(|l| l.starts_with("orders") && l.contains("audit"))
            .unwrap_or_default();
        for part in [
            "Unauthenticated",
            "s3:minio / eg-dead",
            "2026-11-25T16:00:00.000Z",
            "does not exist",
        ] {
            assert!(row.contains(part), "{part}: {text}");
        }
        assert!(
            text.find("dead letters not being written").unwrap() < text.find("TOPIC  PUBLISHED").unwrap_or(usize::MAX),
            "before the topics: {text}"
        );
        assert!(
            !text.contains("failingDeadLetterDestinations"),
            "not shown twice: {text}"
        );
    }

    #[test]
    fn failing_identities_are_listed_with_what_the_token_endpoint_said() {
        let status = json!({
            "failingIdentities": [
                {"identity": "partner", "kind": "Unreachable", "message": "the token endpoint could not be reached",
                 "failingSince": "2026-11-25T16:00:00.000Z", "lastFailureTime": "2026-11-25T16:09:00.000Z",
                 "subscriptions": 2}],
            "topics": [],
        });
        let text = render(&status);
        assert!(
            text.contains("delivery identities without tokens (1 identity;"),
            "{text}"
        );
        let row = text.lines().find(|l| l.starts_with("partner")).unwrap_or_default();
        for part in ["Unreachable", " 2 ", "2026-11-25T16:00:00.000Z", "could not be reached"] {
            assert!(row.contains(part), "{part}: {text}");
        }
        assert!(!text.contains("failingIdentities"), "not shown twice: {text}");
        assert!(
            !render(&json!({"failingIdentities": []})).contains("without tokens"),
            "nothing while none fails"
        );
    }

    #[test]
    fn queue_subscriptions_show_their_queue() {
        let status = json!({
            "topics": [
                {"name": "orders", "namespaceTopic": true, "publishRate": 0.5, "subscriptions": [
                    {"name": "workers", "deliveryMode": "Queue", "provisioningState": "Succeeded", "paused": false,
                     "queue": {"available": 7, "locked": 2, "delayed": 0, "oldestUnacknowledgedSeconds": 42}},
                    {"name": "hook", "deliveryMode": "Push", "provisioningState": "Succeeded", "paused": false,
                     "queue": null}]},
                {"name": "plain", "publishRate": 0.0, "subscriptions": []},
            ],
        });
        let text = render(&status);
        assert!(text.contains("orders (namespace)"), "{text}");
        assert!(text.contains("workers (queue)"), "{text}");
        assert!(!text.contains("plain (namespace)"), "{text}");
        let queue_rows: Vec<Vec<&str>> = text
            .lines()
            .skip_while(|l| !l.contains("QUEUE SUBSCRIPTION"))
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(queue_rows, [["orders", "workers", "7", "2", "0", "42s"]], "{text}");
    }

    #[test]
    fn unmatched_events_are_shown_next_to_the_subscriptions_waiting_for_validation() {
        let status = json!({
            "topics": [
                {"name": "orders", "publishRate": 0.1, "unmatchedLastHour": 3, "subscriptions": [
                    {"name": "audit", "provisioningState": "AwaitingManualAction", "missedLastHour": 5,
                     "provisioningMessage": "The validation handshake failed: the endpoint answered 200 OK with an empty body."},
                    {"name": "billing", "provisioningState": "Succeeded"}]},
                {"name": "quiet", "publishRate": 0.0, "unmatchedLastHour": 1, "subscriptions": []},
                {"name": "fine", "publishRate": 0.0, "unmatchedLastHour": 0, "subscriptions": []},
            ],
        });
        let text = render(&status);
        assert!(
            text.contains(
                "orders: 3 events matched no active subscription in the last hour; \
                 orders/audit is waiting for validation (5 events missed in the last hour): The validation handshake failed: the endpoint answered 200 OK with an empty body.\n"
            ),
            "{text}"
        );
        assert!(!text.contains("orders/billing"), "{text}");
        assert!(
            text.contains("quiet: 1 event matched no active subscription in the last hour\n"),
            "{text}"
        );
        assert!(!text.contains("fine:"), "{text}");
    }
}
