//! eg-chaos: proves "200 means delivered or dead-lettered" against real processes.
//!
//! It starts redis-server and several copies of every tier, creates topics and
//! subscriptions whose endpoints are its own misbehaving receivers, publishes at a steady
//! rate while SIGKILLing tier processes and Redis at random, then stops the faults, lets
//! the receivers behave and the system drain, and asks the oracle whether every event
//! answered `200` reached every subscription it matches or was dead-lettered for it with a
//! fitting reason. A namespace topic's queue-mode subscriptions are served by pull
//! consumers that crash mid-batch, acknowledge late, release and reject; for them the
//! oracle asks whether every such event was acknowledged, dead-lettered or dropped with a
//! reason. Unless left out, one subscription dead-letters to Azure Blob on Azurite
//! (stopped and started again during the run) and two deliver to RabbitMQ and NATS
//! JetStream (each broker killed and restarted during the run); the oracle reads the
//! blobs back from Azurite and the messages from the brokers. It writes a JSON report and
//! exits non-zero on any violation, or when the system does not drain in time.

mod args;
mod blob_reader;
mod broker_readers;
mod churn;
mod consumer;
mod deployment;
mod faults;
mod journal;
mod oracle;
mod oracle_queues;
mod outside;
mod publisher;
mod receiver;
mod scenario;

use anyhow::{Context, bail};
use args::Args;
use consumer::Consumers;
use deployment::{ADMIN_TOKEN, DELIVERY_TIMEOUT, Deployment, Role};
use eg_store::keyspace::{self, Keyspace, Partition};
use faults::Faults;
use journal::Journal;
use oracle::{BrokerLogs, Oracle};
use outside::Servers;
use publisher::{Ledger, Publisher};
use receiver::{Receivers, lock};
use scenario::{BLOB_CONTAINER, Outside, Scenario};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Pull consumers per queue subscription.
const CONSUMERS_PER_QUEUE: usize = 2;
/// Share of received batches a consumer crashes on (drops unsettled) while faults run.
const CRASH_RATE: f64 = 0.05;

/// After everything resolved, how long to keep watching for late duplicates and
/// deliveries that should not happen.
const QUIET_PERIOD: Duration = Duration::from_secs(3);

/// How long the last full read of the NATS stream may take before the verdict.
const FINAL_STREAM_READ: Duration = Duration::from_secs(20);

#[tokio::main]
async fn main() -> ExitCode {
    let args = match args::parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("eg-chaos: {e:#}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    // Interrupted: returning drops the run, and with it every child process
    // (`kill_on_drop`), so nothing is left running.
    let outcome = tokio::select! {
        outcome = run(args) => outcome,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("eg-chaos: interrupted; stopping every process it started");
            return ExitCode::from(130);
        }
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("eg-chaos: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `Ok(true)` when the promise held and the system drained in time.
async fn run(args: Args) -> anyhow::Result<bool> {
    let (run_dir, temp) = run_directory(&args)?;
    let journal = Journal::create(&run_dir.join("journal.log"))?;
    journal.phase(&format!("run directory {}", run_dir.display()));
    let http = http_client()?;
    let bin_dir = match &args.bin_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("eg-chaos has no parent directory")?
            .to_path_buf(),
    };

    // ----- the deployment -----
    let outside = Outside {
        blob: args.azurite,
        brokers: args.brokers,
    };
    // The duplicate window outlasts the run and its drain: every repeat is absorbed.
    let duplicate_window = args.duration + args.drain_timeout + Duration::from_secs(600);
    let servers = Arc::new(Servers::start(outside, duplicate_window).await.context(
        "start the servers outside eg (deploy/local/ensure-test-tools.sh installs them; \
         --no-azurite and --no-brokers leave them out)",
    )?);
    if outside.blob || outside.brokers {
        journal.phase(&format!(
            "outside servers ready:{}{}",
            if outside.blob { " Azurite" } else { "" },
            if outside.brokers {
                " RabbitMQ, NATS JetStream"
            } else {
                ""
            }
        ));
    }
    let scenario = Arc::new(Scenario::standard(outside));
    let receivers = Arc::new(
        Receivers::start(
            scenario
                .subscriptions
                .iter()
                .map(|s| {
                    (
                        s.name.clone(),
                        s.delivery_schema,
                        (args.failure_rate * s.failure_factor).min(0.95),
                    )
                })
                .collect(),
            DELIVERY_TIMEOUT,
        )
        .await?,
    );
    let deployment = Arc::new(Deployment::new(
        bin_dir,
        &run_dir,
        servers.tier_env(),
        args.sentinel,
        journal.clone(),
        http.clone(),
    )?);
    let outcome = exercise(
        &args,
        &run_dir,
        &journal,
        &http,
        &scenario,
        &receivers,
        &deployment,
        &servers,
    )
    .await;
    deployment.stop().await;
    let ok = match outcome {
        Ok(ok) => ok,
        Err(e) => {
            journal.phase(&format!("aborted: {e:#}"));
            let _ = temp.map(tempfile::TempDir::keep);
            eprintln!("eg-chaos: run directory kept: {}", run_dir.display());
            return Err(e);
        }
    };
    if !ok || args.keep {
        let _ = temp.map(tempfile::TempDir::keep);
        eprintln!("eg-chaos: run directory kept: {}", run_dir.display());
    }
    Ok(ok)
}

#[allow(clippy::too_many_arguments)]
async fn exercise(
    args: &Args,
    run_dir: &Path,
    journal: &Journal,
    http: &reqwest::Client,
    scenario: &Arc<Scenario>,
    receivers: &Arc<Receivers>,
    deployment: &Arc<Deployment>,
    servers: &Arc<Servers>,
) -> anyhow::Result<bool> {
    deployment.start_redis().await?;
    deployment.add(Role::Ingress, args.ingress)?;
    deployment.add(Role::Scheduler, args.schedulers)?;
    deployment.add(Role::Sender, args.senders)?;
    deployment.add(Role::DeadLetter, args.deadletters)?;
    deployment.wait_healthy(Duration::from_secs(60)).await?;
    journal.phase(&format!(
        "{} ingress, {} scheduler, {} sender, {} deadletter processes healthy",
        args.ingress, args.schedulers, args.senders, args.deadletters
    ));
    let keys = provision(http, &deployment.ingress_urls()[0], scenario, receivers).await?;
    journal.phase(&format!(
        "{} topics, {} subscriptions validated; publishing {}/s for {} with faults",
        scenario.topics.len(),
        scenario.subscriptions.len(),
        args.rate,
        humantime::format_duration(args.duration)
    ));

    // ----- what reaches the servers outside eg, read from them -----
    let brokers = BrokerLogs {
        rabbitmq: servers.amqp_url.as_ref().map(|_| Arc::default()),
        nats: servers.nats_url.as_ref().map(|_| Arc::default()),
    };
    let mut readers = Vec::new();
    if let (Some(url), Some(log)) = (&servers.amqp_url, &brokers.rabbitmq) {
        readers.push(tokio::spawn(broker_readers::read_rabbitmq(
            url.clone(),
            log.clone(),
            journal.clone(),
        )));
    }
    if let (Some(url), Some(log)) = (&servers.nats_url, &brokers.nats) {
        readers.push(tokio::spawn(broker_readers::read_nats(
            url.clone(),
            log.clone(),
            journal.clone(),
        )));
    }
    let mut blobs = servers
        .blob_port
        .map(|port| blob_reader::BlobReader::new(http.clone(), port, BLOB_CONTAINER));

    // ----- faults while publishing -----
    let ledger = Arc::new(Ledger::default());
    let redis_down = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let stop_at = started + args.duration;
    let consumers = Arc::new(Consumers {
        scenario: scenario.clone(),
        keys: keys.clone(),
        deployment: deployment.clone(),
        http: http.clone(),
        journal: journal.clone(),
        logs: scenario.queues.iter().map(|_| Default::default()).collect(),
        figures: Default::default(),
        calm: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        crash_rate: CRASH_RATE,
    });
    let consuming = consumers.start(CONSUMERS_PER_QUEUE);
    let publisher = Arc::new(Publisher {
        scenario: scenario.clone(),
        keys,
        deployment: deployment.clone(),
        http: http.clone(),
        ledger: ledger.clone(),
        redis_down: redis_down.clone(),
        journal: journal.clone(),
    });
    let faults = Arc::new(Faults {
        deployment: deployment.clone(),
        journal: journal.clone(),
        redis_down,
        injected: Default::default(),
    });
    let watcher = {
        let deployment = deployment.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                deployment.watch().await;
            }
        })
    };
    let publishing = tokio::spawn(publisher.run(args.rate, stop_at));
    let killing = tokio::spawn(faults.clone().kill_tiers(args.fault_every, stop_at));
    let churn = Arc::new(churn::Churn {
        scenario: scenario.clone(),
        receivers: receivers.clone(),
        deployment: deployment.clone(),
        http: http.clone(),
        journal: journal.clone(),
        calls: Default::default(),
    });
    let churning = tokio::spawn(churn.clone().run(args.churn_every, stop_at));
    let pausing = tokio::spawn(faults.clone().pause_tiers(args.pause_every, stop_at));
    let redis_faults = tokio::spawn(faults.clone().disturb_redis(
        args.redis_restarts,
        args.redis_freezes,
        started,
        stop_at,
    ));
    let outside_faults = tokio::spawn(servers.clone().disturb(journal.clone(), started, stop_at));
    let mut progress = tokio::time::interval(Duration::from_secs(10));
    progress.tick().await;
    while Instant::now() < stop_at {
        tokio::select! {
            _ = progress.tick() => {
                let events = lock(&ledger.events).len();
                journal.phase(&format!("{:.0}s: {events} events published", started.elapsed().as_secs_f64()));
            }
            () = tokio::time::sleep_until(stop_at.into()) => {}
        }
    }
    publishing.await?;
    killing.await?;
    pausing.await?;
    churning.await?;
    redis_faults.await?;
    outside_faults.await?;
    let published_for = started.elapsed();

    if args.sabotage > 0 {
        let deleted = sabotage(&deployment.redis_url(), args.sabotage).await?;
        let from_queues = sabotage_queues(&deployment.redis_url(), scenario, args.sabotage).await?;
        journal.phase(&format!(
            "sabotage: deleted {deleted} queued deliveries and {from_queues} queue-subscription entries \
             from Redis; the oracle must find them lost"
        ));
    }

    // ----- drain -----
    deployment.restart_all()?;
    receivers.calm_down();
    consumers.calm_down();
    let drain_started = Instant::now();
    journal.phase("faults stopped, receivers calm; draining");
    if let Err(e) = deployment.wait_healthy(Duration::from_secs(30)).await {
        journal.phase(&format!("after the faults: {e:#}"));
    }
    let mut oracle = Oracle::new(
        scenario.clone(),
        ledger.clone(),
        receivers.clone(),
        consumers.clone(),
        brokers.clone(),
        &deployment.dead_letter_dir,
    );
    let drain_deadline = drain_started + args.drain_timeout;
    let mut last_report = Instant::now();
    let mut drained_after = None;
    let redis_url = deployment.redis_url();
    loop {
        if let Some(reader) = &mut blobs {
            oracle.take_blobs(reader.new_blobs().await);
        }
        let open = oracle.unresolved();
        // Crashed consumers' events come back only when their locks expire: the drain
        // ends when nothing is queued, locked or delayed any more.
        let queued = if open == 0 {
            queue_depth(&redis_url, scenario).await.unwrap_or(u64::MAX)
        } else {
            u64::MAX
        };
        if open == 0 && queued == 0 {
            drained_after = Some(drain_started.elapsed());
            break;
        }
        if Instant::now() >= drain_deadline {
            break;
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            journal.phase(&format!(
                "{:.0}s into the drain: {open} deliveries neither delivered nor dead-lettered yet",
                drain_started.elapsed().as_secs_f64()
            ));
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    match drained_after {
        Some(took) => journal.phase(&format!("drained in {:.1}s", took.as_secs_f64())),
        None => journal.phase(&format!(
            "NOT drained within {}",
            humantime::format_duration(args.drain_timeout)
        )),
    }
    tokio::time::sleep(QUIET_PERIOD).await;
    if let Some(reader) = &mut blobs {
        oracle.take_blobs(reader.new_blobs().await);
    }
    if let Some(log) = &brokers.nats {
        // A message the server lost in a kill may have left its sequence number to a
        // later one: the verdict counts what one whole read of the stream finds.
        log.reread();
        let deadline = Instant::now() + FINAL_STREAM_READ;
        while !log.reread_done.load(Ordering::SeqCst) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if !log.reread_done.load(Ordering::SeqCst) {
            journal.phase("the last full read of the NATS stream did not finish in time");
        }
    }
    let absorbed = if brokers.nats.is_some() {
        absorbed_duplicates(http, &deployment.urls(deployment::Role::Sender)).await
    } else {
        None
    };
    for reader in readers {
        reader.abort();
    }
    watcher.abort();
    consumers.stop.store(true, Ordering::Relaxed);
    for task in consuming {
        task.abort();
    }

    // ----- verdict -----
    let mut verdict = oracle.verdict(args.max_examples);
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
    let kinds = &verdict.json["by_destination_kind"];
    let outside: Vec<String> = ["webhook_dead_lettering_to_azure_blob", "rabbitmq", "nats"]
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
async fn absorbed_duplicates(http: &reqwest::Client, senders: &[String]) -> Option<u64> {
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

/// Creates the topics and subscriptions; waits until every subscription is validated.
/// Returns each topic's `key1`.
async fn provision(
    http: &reqwest::Client,
    ingress: &str,
    scenario: &Scenario,
    receivers: &Receivers,
) -> anyhow::Result<Vec<String>> {
    let admin = |method: reqwest::Method, path: String, body: Option<Value>| {
        let mut request = http
            .request(method, format!("{ingress}/admin{path}"))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        async move {
            let response = request.send().await?;
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            anyhow::Ok((status, body))
        }
    };
    let mut keys = Vec::new();
    for topic in &scenario.topics {
        let (status, body) = admin(
            reqwest::Method::PUT,
            format!("/topics/{}", topic.name),
            Some(scenario.topic_body(topic)),
        )
        .await?;
        if !status.is_success() {
            bail!("PUT topic {}: {status} {body}", topic.name);
        }
        let (status, body) = admin(reqwest::Method::POST, format!("/topics/{}/listKeys", topic.name), None).await?;
        let key = body["key1"].as_str().map(str::to_owned);
        match key {
            Some(key) if status.is_success() => keys.push(key),
            _ => bail!("listKeys of {}: {status} {body}", topic.name),
        }
    }
    for (index, sub) in scenario.subscriptions.iter().enumerate() {
        let topic = &scenario.topics[sub.topic].name;
        let path = format!("/topics/{topic}/eventSubscriptions/{}", sub.name);
        let body = scenario.subscription_body(sub, &receivers.url(index));
        let (status, answer) = admin(reqwest::Method::PUT, path.clone(), Some(body)).await?;
        if !status.is_success() {
            bail!("PUT subscription {topic}/{}: {status} {answer}", sub.name);
        }
        let state = answer["properties"]["provisioningState"].as_str().unwrap_or_default();
        if state != "Succeeded" {
            bail!(
                "subscription {topic}/{} is {state:?} after its PUT (validation failed?): {answer}",
                sub.name
            );
        }
    }
    for queue in &scenario.queues {
        let topic = &scenario.topics[queue.topic].name;
        let path = format!("/topics/{topic}/eventSubscriptions/{}", queue.name);
        let (status, answer) = admin(reqwest::Method::PUT, path, Some(scenario.queue_body(queue))).await?;
        if !status.is_success() {
            bail!("PUT queue subscription {topic}/{}: {status} {answer}", queue.name);
        }
    }
    Ok(keys)
}

/// Deliveries still queued, locked or delayed on the queue subscriptions, over every
/// partition.
async fn queue_depth(url: &str, scenario: &Scenario) -> anyhow::Result<u64> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut depth = 0u64;
    for partition in Keyspace::new(deployment::PREFIX, deployment::PARTITIONS).all_partitions() {
        for queue in &scenario.queues {
            let name = format!("{}/{}", scenario.topics[queue.topic].name, queue.name);
            let queued: u64 = redis::cmd("XLEN")
                .arg(partition.queue(&name))
                .query_async(&mut conn)
                .await?;
            let delayed: u64 = redis::cmd("ZCARD")
                .arg(partition.queue_delayed(&name))
                .query_async(&mut conn)
                .await?;
            depth += queued + delayed;
        }
    }
    Ok(depth)
}

/// The partitions' keys, named by eg-store's keyspace (the one thing this program takes
/// from the code under test), after checking that every ready stream exists: every tier
/// creates them at start, so a missing one means the names disagree with the tiers', and
/// counting leftovers under wrong names would find none.
async fn partition_keys(conn: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<Vec<Partition>> {
    let partitions: Vec<Partition> = Keyspace::new(deployment::PREFIX, deployment::PARTITIONS)
        .all_partitions()
        .collect();
    for partition in &partitions {
        let exists: bool = redis::cmd("EXISTS").arg(partition.ready()).query_async(conn).await?;
        anyhow::ensure!(
            exists,
            "the ready stream {} does not exist: eg-store's keyspace and the tiers disagree",
            partition.ready()
        );
    }
    Ok(partitions)
}

/// What is left in Redis after the drain: every queue should be empty and every event
/// body freed.
async fn redis_state(url: &str) -> anyhow::Result<Value> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut partitions = Vec::new();
    let mut leftovers = 0u64;
    for partition in partition_keys(&mut conn).await? {
        let ready: u64 = redis::cmd("XLEN").arg(partition.ready()).query_async(&mut conn).await?;
        let retry: u64 = redis::cmd("ZCARD")
            .arg(partition.retry())
            .query_async(&mut conn)
            .await?;
        let delay: u64 = redis::cmd("ZCARD")
            .arg(partition.deadletter_delay())
            .query_async(&mut conn)
            .await?;
        let deadletter: u64 = redis::cmd("XLEN")
            .arg(partition.deadletter())
            .query_async(&mut conn)
            .await?;
        let ready_pending = pending(&mut conn, &partition.ready(), keyspace::SENDERS_GROUP).await?;
        let deadletter_pending = pending(&mut conn, &partition.deadletter(), keyspace::DEADLETTER_GROUP).await?;
        let mut events = 0u64;
        let mut cursor: u64 = 0;
        let mut examples = Vec::new();
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(partition.event("*"))
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await?;
            events += keys.len() as u64;
            for key in keys.iter().take(5usize.saturating_sub(examples.len())) {
                examples.push(leftover_body(&mut conn, key).await?);
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        leftovers += ready + retry + delay + deadletter + events;
        partitions.push(json!({
            "partition": partition.index, "ready": ready, "ready_pending": ready_pending, "retry": retry,
            "deadletter_delay": delay, "deadletter": deadletter, "deadletter_pending": deadletter_pending,
            "event_bodies": events, "event_body_examples": examples,
        }));
    }
    Ok(json!({ "leftovers": leftovers, "partitions": partitions }))
}

/// A leftover event hash, for the report: its key, its count of outstanding deliveries
/// and the id of the event it holds (so the journal and the logs can be searched).
async fn leftover_body(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> anyhow::Result<Value> {
    let (body, outstanding): (Option<String>, Option<String>) =
        redis::cmd("HMGET").arg(key).arg("b").arg("r").query_async(conn).await?;
    let event_id = body
        .as_deref()
        .and_then(|b| serde_json::from_str::<Value>(b).ok())
        .and_then(|v| v.get("id").cloned());
    Ok(json!({ "key": key, "outstanding": outstanding, "event_id": event_id }))
}

/// Deletes up to `count` queued deliveries behind the tiers' backs (due retries first,
/// then ready entries), so a run can show that the oracle notices losses.
async fn sabotage(url: &str, count: usize) -> anyhow::Result<usize> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut deleted = 0;
    let partitions = partition_keys(&mut conn).await?;
    for partition in &partitions {
        let popped: Vec<String> = redis::cmd("ZPOPMIN")
            .arg(partition.retry())
            .arg(count - deleted)
            .query_async(&mut conn)
            .await?;
        deleted += popped.len() / 2; // member, score, member, score …
        if deleted >= count {
            return Ok(deleted);
        }
    }
    for partition in &partitions {
        let stream = partition.ready();
        let entries: redis::Value = redis::cmd("XRANGE")
            .arg(&stream)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(count - deleted)
            .query_async(&mut conn)
            .await?;
        let redis::Value::Array(entries) = entries else {
            continue;
        };
        for entry in entries {
            let redis::Value::Array(parts) = entry else { continue };
            let Some(redis::Value::BulkString(id)) = parts.first() else {
                continue;
            };
            let id = String::from_utf8_lossy(id).into_owned();
            let _: i64 = redis::cmd("XACK")
                .arg(&stream)
                .arg(keyspace::SENDERS_GROUP)
                .arg(&id)
                .query_async(&mut conn)
                .await?;
            let _: i64 = redis::cmd("XDEL").arg(&stream).arg(&id).query_async(&mut conn).await?;
            deleted += 1;
        }
        if deleted >= count {
            break;
        }
    }
    Ok(deleted)
}

/// Deletes up to `count` entries of the queue subscriptions' streams (received or not)
/// behind the tiers' backs: their events can never be received or acknowledged again.
async fn sabotage_queues(url: &str, scenario: &Scenario, count: usize) -> anyhow::Result<usize> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut deleted = 0;
    for partition in Keyspace::new(deployment::PREFIX, deployment::PARTITIONS).all_partitions() {
        for queue in &scenario.queues {
            if deleted >= count {
                return Ok(deleted);
            }
            let stream = partition.queue(&format!("{}/{}", scenario.topics[queue.topic].name, queue.name));
            let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
                .arg(&stream)
                .arg("-")
                .arg("+")
                .arg("COUNT")
                .arg(count - deleted)
                .query_async(&mut conn)
                .await?;
            for (id, _) in entries {
                let _: i64 = redis::cmd("XACK")
                    .arg(&stream)
                    .arg(keyspace::RECEIVERS_GROUP)
                    .arg(&id)
                    .query_async(&mut conn)
                    .await?;
                let _: i64 = redis::cmd("XDEL").arg(&stream).arg(&id).query_async(&mut conn).await?;
                deleted += 1;
            }
        }
    }
    Ok(deleted)
}

/// How many entries of a stream's consumer group are pending (read, not acknowledged).
async fn pending(conn: &mut redis::aio::MultiplexedConnection, stream: &str, group: &str) -> anyhow::Result<i64> {
    let summary: redis::Value = redis::cmd("XPENDING").arg(stream).arg(group).query_async(conn).await?;
    Ok(match summary {
        redis::Value::Array(items) => match items.first() {
            Some(redis::Value::Int(n)) => *n,
            _ => -1,
        },
        _ => -1,
    })
}

fn run_directory(args: &Args) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match &args.run_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
            Ok((dir.canonicalize()?, None))
        }
        None => {
            let dir = tempfile::Builder::new().prefix("eg-chaos-").tempdir()?;
            Ok((dir.path().to_path_buf(), Some(dir)))
        }
    }
}

fn http_client() -> anyhow::Result<reqwest::Client> {
    // reqwest is built without a default TLS crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .no_proxy()
        .pool_max_idle_per_host(64)
        .build()?)
}
