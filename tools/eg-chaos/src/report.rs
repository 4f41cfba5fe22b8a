//! The run's report: one JSON document (kept in the run directory as `report.json`, and
//! written to `--json` or printed) with the oracle's verdict, what was published, the
//! faults injected, the drain and what Redis held after it; then the summary lines a
//! person reads first. Also the one figure read from the senders for it: repeats NATS's
//! duplicate window absorbed.

use crate::args::Args;
use crate::churn::Churn;
use crate::deployment::Deployment;
use crate::faults::Faults;
use crate::oracle::Verdict;
use crate::outside::Servers;
use crate::publisher::Ledger;
use crate::receiver::lock;
use crate::redis_state::{queue_depth, redis_state};
use crate::scenario::Scenario;
use anyhow::Context;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// What the run did and holds at its end, for the report.
pub struct Run<'a> {
    pub args: &'a Args,
    pub run_dir: &'a Path,
    pub scenario: &'a Scenario,
    pub ledger: &'a Ledger,
    pub faults: &'a Faults,
    pub churn: &'a Churn,
    pub servers: &'a Servers,
    pub deployment: &'a Deployment,
    /// How long events were published for, with faults.
    pub published_for: Duration,
    /// How long the drain took; `None` when it did not end in time.
    pub drained_after: Option<Duration>,
    /// Repeats NATS's duplicate window absorbed ([`absorbed_duplicates`]).
    pub absorbed: Option<u64>,
}

/// Writes the report and prints the summary; `Ok(true)` when the promise held and the
/// system drained in time.
pub async fn write(run: Run<'_>, mut verdict: Verdict) -> anyhow::Result<bool> {
    let Run {
        args,
        run_dir,
        scenario,
        ledger,
        faults,
        churn,
        servers,
        deployment,
        published_for,
        drained_after,
        absorbed,
    } = run;
    if let Some(Value::Object(nats)) = verdict.json["by_destination_kind"].get_mut("nats") {
        // Repeats the stream's duplicate window took and stored once, as the senders
        // running at the end counted them (a killed sender's count went with it).
        nats.insert("absorbed_by_the_duplicate_window_at_least".into(), json!(absorbed));
    }
    let queues = redis_state(&deployment.redis_url())
        .await
        .unwrap_or_else(|e| json!({"error": e.to_string()}));
    let published_events = lock(&ledger.events).len();
    let injected = lock(&faults.injected).clone();
    let unexpected = deployment.unexpected_exits();
    let drained = drained_after.is_some();
    let ok = drained && verdict.violations == 0;
    let report = json!({
        "ok": ok,
        "run_directory": run_dir.display().to_string(),
        "arguments": {
            "duration_s": args.duration.as_secs_f64(),
            "rate": args.rate,
            "fault_every_s": args.fault_every.as_secs_f64(),
            "pause_every_s": args.pause_every.as_secs_f64(),
            "churn_every_s": args.churn_every.as_secs_f64(),
            "redis_restarts": args.redis_restarts,
            "redis_freezes": args.redis_freezes,
            "processes": {"ingress": args.ingress, "scheduler": args.schedulers, "sender": args.senders, "deadletter": args.deadletters},
            "failure_rate": args.failure_rate,
            "sabotage": args.sabotage,
            "azurite": args.azurite,
            "brokers": args.brokers,
        },
        "published": {
            "for_s": published_for.as_secs_f64(),
            "events": published_events,
            "requests": ledger.requests.load(Ordering::Relaxed),
            "acknowledged_requests": ledger.acknowledged_requests.load(Ordering::Relaxed),
            "errors_by_kind": lock(&ledger.errors).clone(),
            "errors_while_redis_down": lock(&ledger.errors_while_redis_down).clone(),
            "events_behind_schedule": ledger.behind.load(Ordering::Relaxed),
        },
        "oracle": verdict.json,
        "faults": {
            "injected": injected,
            "unexpected_exits": unexpected,
            "catalog_calls": lock(&churn.calls).clone(),
            "outside_servers": lock(&servers.injected).clone(),
            "outside_restart_seconds": lock(&servers.restart_seconds).clone(),
        },
        "drain": {
            "completed": drained,
            "seconds": drained_after.map(|d| d.as_secs_f64()),
            "bound_s": args.drain_timeout.as_secs_f64(),
        },
        "redis_after_drain": queues,
        "queue_subscriptions_after_drain": queue_depth(&deployment.redis_url(), scenario)
            .await
            .map_or_else(|e| json!({"error": e.to_string()}), |n| json!({"queued_locked_or_delayed": n})),
        "tier_settings": deployment.settings(),
    });
    let text = serde_json::to_string_pretty(&report)?;
    std::fs::write(run_dir.join("report.json"), &text)?;
    if let Some(path) = &args.json {
        std::fs::write(path, &text).with_context(|| format!("write {}", path.display()))?;
    } else {
        println!("{text}");
    }
    let of_kind = |prefix: &str| -> u64 {
        injected
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    };
    let (kills, pauses) = (of_kind("kill_"), of_kind("pause_"));
    let redis = injected.get("restart_redis").copied().unwrap_or(0);
    let freezes = injected.get("freeze_redis").copied().unwrap_or(0);
    println!(
        "eg-chaos: {} — {} events published, {} acknowledged; {} deliveries owed: {} delivered, {} dead-lettered, {} lost; \
         {} duplicates; faults: {kills} kills, {pauses} pauses, {redis} Redis restarts, {freezes} Redis freezes, {} unexpected exits; {}; {} left in Redis; \
         {} violation(s)",
        if ok { "OK" } else { "FAILED" },
        published_events,
        verdict.json["acknowledged"],
        verdict.owed,
        verdict.delivered,
        verdict.dead_lettered,
        verdict.lost,
        verdict.duplicates,
        unexpected.values().sum::<u64>(),
        match drained_after {
            Some(d) => format!("drained in {:.1}s", d.as_secs_f64()),
            None => format!("NOT drained within {}", humantime::format_duration(args.drain_timeout)),
        },
        queues["leftovers"],
        verdict.violations,
    );
    let consumed = &verdict.json["queues"]["consumers"];
    let ends: Vec<String> = scenario
        .queues
        .iter()
        .map(|q| {
            let ends = &verdict.json["queues"]["subscriptions"][q.name.as_str()]["ends"];
            let listed: Vec<String> = ends
                .as_object()
                .map(|m| m.iter().map(|(end, n)| format!("{n} {end}")).collect())
                .unwrap_or_default();
            format!("{}: {}", q.name, listed.join(", "))
        })
        .collect();
    println!(
        "eg-chaos: pull delivery — {} owed; consumers received {} events, acknowledged {}, released {}, rejected {}, \
         crashed {} batches ({} events), {} acknowledgements TokenLost; {}; {} lost",
        verdict.queue_owed,
        consumed["events_received"],
        consumed["acknowledged"],
        consumed["released"],
        consumed["rejected"],
        consumed["crashed_batches"],
        consumed["events_in_crashed_batches"],
        consumed["token_lost_acknowledgements"],
        ends.join("; "),
        verdict.queue_lost,
    );
    let archive = &verdict.json["archive"];
    if !archive.is_null() {
        println!(
            "eg-chaos: archive — {} accepted events of {}, {} objects; {} missing from the archive, {} archived more than once, \
             {} archived without a 200",
            archive["accepted_events"],
            archive["topics"],
            archive["objects"],
            archive["missing"],
            archive["archived_more_than_once"],
            archive["archived_without_a_200"],
        );
    }
    let kinds = &verdict.json["by_destination_kind"];
    let outside: Vec<String> = [
        "webhook_dead_lettering_to_azure_blob",
        "rabbitmq",
        "nats",
        "kafka",
        "sqs",
    ]
    .iter()
    .filter_map(|kind| {
        let f = kinds.get(*kind)?;
        let mut line = format!(
            "{kind}: {} owed, {} delivered, {} dead-lettered, {} lost, {} duplicates, {} duplicate dead letters",
            f["owed"],
            f["delivered"],
            f["dead_lettered"],
            f["lost"],
            f["duplicates"],
            f["duplicate_dead_letter_records"]
        );
        if let Some(absorbed) = f.get("absorbed_by_the_duplicate_window_at_least") {
            line.push_str(&format!(", ≥{absorbed} absorbed by the duplicate window"));
        }
        Some(line)
    })
    .collect();
    if !outside.is_empty() {
        let injected = lock(&servers.injected).clone();
        println!(
            "eg-chaos: outside eg — {}; outages: {}",
            outside.join("; "),
            injected
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(ok)
}

/// The sum of `DestinationDuplicateCount{destination="nats"}` over the senders'
/// metrics pages; `None` if none answered.
pub async fn absorbed_duplicates(http: &reqwest::Client, senders: &[String]) -> Option<u64> {
    let mut total = None;
    for url in senders {
        let Ok(response) = http
            .get(format!("{url}/metrics"))
            .timeout(Duration::from_secs(5))
            .send()
            .await
        else {
            continue;
        };
        let Ok(page) = response.text().await else { continue };
        let counted: f64 = page
            .lines()
            .filter(|l| l.starts_with("DestinationDuplicateCount{") && l.contains(r#"destination="nats""#))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        *total.get_or_insert(0) += counted as u64;
    }
    total
}
