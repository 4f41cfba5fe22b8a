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
mod outside;
mod provision;
mod publisher;
mod receiver;
mod redis_state;
mod report;
mod sabotage;
mod scenario;

use anyhow::Context;
use args::Args;
use consumer::Consumers;
use deployment::{DELIVERY_TIMEOUT, Deployment, Role};
use faults::Faults;
use journal::Journal;
use oracle::{BrokerLogs, Oracle};
use outside::Servers;
use publisher::{Ledger, Publisher};
use receiver::{Receivers, lock};
use scenario::{BLOB_CONTAINER, Outside, Scenario};
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
        kafka: args.kafka && args.brokers,
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
    let keys = provision::provision(http, &deployment.ingress_urls()[0], scenario, receivers).await?;
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
        kafka: servers.kafka_bootstrap.as_ref().map(|_| Arc::default()),
        sqs: servers.sqs_queue_url.as_ref().map(|_| Arc::default()),
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
    if let (Some(bootstrap), Some(log)) = (&servers.kafka_bootstrap, &brokers.kafka) {
        readers.push(tokio::spawn(broker_readers::read_kafka(
            bootstrap.clone(),
            log.clone(),
            journal.clone(),
        )));
    }
    if let (Some(moto), Some(url), Some(log)) = (&servers.moto, &servers.sqs_queue_url, &brokers.sqs) {
        readers.push(tokio::spawn(broker_readers::read_sqs(
            moto.clone(),
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
        let deleted = sabotage::deliveries(&deployment.redis_url(), args.sabotage).await?;
        let from_queues = sabotage::queue_entries(&deployment.redis_url(), scenario, args.sabotage).await?;
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
            redis_state::queue_depth(&redis_url, scenario).await.unwrap_or(u64::MAX)
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
    for (name, log) in [("NATS stream", &brokers.nats), ("Kafka topic", &brokers.kafka)] {
        let Some(log) = log else { continue };
        // A message the server lost in a kill may have left its sequence number (or
        // offset) to a later one: the verdict counts what one whole read finds.
        log.reread();
        let deadline = Instant::now() + FINAL_STREAM_READ;
        while !log.reread_done.load(Ordering::SeqCst) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if !log.reread_done.load(Ordering::SeqCst) {
            journal.phase(&format!("the last full read of the {name} did not finish in time"));
        }
    }
    let absorbed = if brokers.nats.is_some() {
        report::absorbed_duplicates(http, &deployment.urls(deployment::Role::Sender)).await
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
    let verdict = oracle.verdict(args.max_examples);
    let run = report::Run {
        args,
        run_dir,
        scenario,
        ledger: &ledger,
        faults: &faults,
        churn: &churn,
        servers,
        deployment,
        published_for,
        drained_after,
        absorbed,
    };
    report::write(run, verdict).await
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
