//! `dead-letters` (scenario 10, issue 16): dead letters written per second to each store
//! — the local directory, Azure Blob (Azurite) and S3 (moto's server) — against the
//! store's own write ceiling measured in the same run.
//!
//! Per store: a deployment without eg-deadletter whose subscription's endpoint answers
//! `400` to everything (not retried: each event is dead-lettered at once) builds a
//! backlog of dead-letter records in Redis; then eg-deadletter starts (with no batching
//! delay) and the bench measures how fast the backlog leaves Redis — a record leaves
//! only once the store confirmed its object. The ceiling: the same `object_store`
//! client writing objects of the size the worker wrote, as many at once as the worker
//! writes (one per partition), straight to the same store.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::drain;
use crate::launcher::{PARTITIONS, PREFIX, Role};
use crate::load::{self, Progress, Template};
use crate::receiver::Behaviour;
use crate::report::{Row, thousands};
use crate::store_ceiling;
use eg_testkit::{Azurite, S3Server};
use object_store::ObjectStore;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "dead-letters",
    summary: "10: dead letters written/s to the local directory, Azurite and S3, against each store's write ceiling",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench dead-letters: dead-letter records written per second by eg-deadletter to each
store (local directory, Azure Blob on Azurite, S3 on moto's server), against the same
object_store client writing objects of the same size straight to the store, as many at
once as the worker (one per partition). Azurite and moto come from target/test-tools
(deploy/local/ensure-test-tools.sh).

usage: eg-bench dead-letters [options]

  --records N            dead letters per store (default 20000; quick 3000)
  --stores LIST          local,azure,s3 (default all three)
  --interval D           EG__DEADLETTER__INTERVAL (default: eg's, 1s)

";

const CONTAINER: &str = "bench-dead-letters";
/// Anything longer is a stuck run, not a slow one.
const DRAIN_LIMIT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Store {
    Local,
    Azure,
    S3,
}

impl Store {
    pub(super) fn parse(name: &str) -> anyhow::Result<Self> {
        match name.trim() {
            "local" => Ok(Self::Local),
            "azure" => Ok(Self::Azure),
            "s3" => Ok(Self::S3),
            other => anyhow::bail!("--stores: no store {other:?} (local, azure or s3)"),
        }
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Local => "local directory",
            Self::Azure => "Azure Blob (Azurite)",
            Self::S3 => "S3 (moto server)",
        }
    }
}

/// The store's server, while the row runs.
pub(super) enum Server {
    Local,
    Azure(Azurite),
    S3(S3Server),
}

impl Server {
    pub(super) fn pid(&self) -> Option<u32> {
        match self {
            Server::Local => None,
            Server::Azure(a) => a.pid(),
            Server::S3(s) => s.pid(),
        }
    }
}

/// Settings for every tier of the deployment.
pub(super) type TierEnv = Vec<(&'static str, String)>;

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let records: u64 = flags.number("records", ctx.sized(20_000, 3_000))?;
        let stores = flags
            .text("stores")?
            .unwrap_or_else(|| "local,azure,s3".into())
            .split(',')
            .map(Store::parse)
            .collect::<anyhow::Result<Vec<_>>>()?;
        let interval = flags.text("interval")?;
        flags.finish()?;
        let mut rows = Vec::new();
        for store in stores {
            eprintln!("dead-letters: {} …", store.label());
            // One store failing (its server not installed, say) does not lose the others.
            match one_store(ctx, store, records, interval.as_deref()).await {
                Ok(row) => rows.push(row),
                Err(e) => rows.push(Row::failed("10 dead letters", store.label(), &e)),
            }
        }
        Ok(rows)
    })
}

async fn one_store(ctx: &Ctx, store: Store, records: u64, interval: Option<&str>) -> anyhow::Result<Row> {
    let mut setup = Setup::new(Fsync::EverySec);
    setup.scheduler = false;
    setup.receiver = Behaviour {
        refuse_all: true,
        ..Behaviour::default()
    };
    let (server, dead_letter, env) = start_store(store).await?;
    setup.dead_letter_destination = Some(dead_letter);
    setup.env = env;
    // Building the backlog fast is not what is measured: an endpoint refusing everything
    // would otherwise go on probation and hold its deliveries back.
    setup.env.push(("EG__PROBATION__ENABLED", "false".into()));
    let d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;

    // The backlog: every event refused once, dead-lettered, waiting in Redis.
    let template = Template::new(100, 1024);
    let progress = Arc::new(Progress::default());
    let publishers = load::closed(&d.target, &template, 4, Some(records), None, &progress);
    load::join(publishers).await?;
    let mut redis = d.launcher.redis().await?;
    let keys = eg_store::Keyspace::new(PREFIX, PARTITIONS);
    let published = progress.published();
    let until = std::time::Instant::now() + DRAIN_LIMIT;
    while waiting(&mut redis, &keys).await? < published {
        anyhow::ensure!(
            std::time::Instant::now() < until,
            "the sender had not dead-lettered {published} events after {DRAIN_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut deadletter_env = vec![("EG__DEADLETTER__DELAY", "0s".to_owned())];
    if let Some(interval) = interval {
        deadletter_env.push(("EG__DEADLETTER__INTERVAL", interval.to_owned()));
    }
    let worker = d
        .launcher
        .start(Role::DeadLetter, "deadletter", &deadletter_env)
        .await?;
    let mut processes = crate::cpu::Processes::default();
    processes.add("deadletter", worker.pid());
    if let Some(pid) = d.launcher.redis_pid() {
        processes.add("redis", pid);
    }
    if let Some(pid) = server.pid() {
        processes.add_with_children(store_process_label(store), pid);
    }
    processes.add("bench", std::process::id());
    let drained = drain::measure(published, &processes, DRAIN_LIMIT, || {
        // A multiplexed connection: a clone shares it.
        let (mut redis, keys) = (redis.clone(), &keys);
        async move { Ok(published.saturating_sub(waiting(&mut redis, keys).await?)) }
    })
    .await?;
    drop(worker);

    let client = client_for(&server, &d)?;
    let (objects, bytes) = store_ceiling::contents(client.as_ref()).await?;
    anyhow::ensure!(objects > 0, "eg-deadletter wrote no object to the {}", store.label());
    let object_bytes = (bytes / objects as u64) as usize;
    let records_per_object = published as f64 / objects as f64;
    let ceiling = store_ceiling::write_ceiling(client, object_bytes, PARTITIONS as usize, ctx.seconds(5, 2)).await?;
    let ceiling_records = ceiling.per_second() * records_per_object;
    d.finish(ctx.keep);

    let mut row = Row::new("10 dead letters", store.label());
    row.rate = Some((drained.per_second(), "records/s"));
    row.cpu = Some((drained.cpu.clone(), drained.seconds));
    row.counted = Some(drained.counted as f64);
    row.ceiling = Some((
        format!(
            "object_store put (create-only) of {} KB objects to the same store, {} at once, × {:.0} records per object",
            object_bytes / 1024,
            PARTITIONS,
            records_per_object
        ),
        ceiling_records,
    ));
    row.figures.push((
        "objects".into(),
        format!(
            "eg wrote {objects} objects ({:.0} records, {} KB each on average) for {published} records; \
             the ceiling wrote {} objects/s, eg {:.1} objects/s",
            records_per_object,
            object_bytes / 1024,
            thousands(ceiling.per_second()),
            drained.per_second() / records_per_object
        ),
    ));
    row.figures.push((
        "backlog".into(),
        format!(
            "{published} records written in {:.1} s from the worker's start (rate taken between 10 % and 90 % done)",
            drained.total_seconds
        ),
    ));
    row.notes.push(format!(
        "appendfsync everysec; EG__DEADLETTER__DELAY=0s{}; EG__PROBATION__ENABLED=false while the backlog is built; the worker's batch (EG__DEADLETTER__BATCH) and partitions ({PARTITIONS}) as eg's defaults",
        interval.map_or(String::new(), |i| format!(", EG__DEADLETTER__INTERVAL={i}"))
    ));
    row.details = json!({
        "records": published, "objects": objects, "objectBytes": object_bytes,
        "secondsMeasured": drained.seconds, "secondsTotal": drained.total_seconds,
        "ceilingObjects": ceiling.messages, "ceilingSeconds": ceiling.elapsed.as_secs_f64(),
        "cpuSeconds": drained.cpu.to_json(),
    });
    eprintln!(
        "dead-letters: {}: {} records/s, ceiling {} records/s",
        store.label(),
        thousands(drained.per_second()),
        thousands(ceiling_records)
    );
    Ok(row)
}

pub(super) fn store_process_label(store: Store) -> &'static str {
    match store {
        Store::Local => "store",
        Store::Azure => "azurite",
        Store::S3 => "moto",
    }
}

/// Starts the store's server; its dead-letter destination (the JSON a topic's archive
/// takes too) and the tiers' settings for it.
pub(super) async fn start_store(store: Store) -> anyhow::Result<(Server, Value, TierEnv)> {
    Ok(match store {
        Store::Local => (
            Server::Local,
            json!({"endpointType": "LocalDirectory", "properties": {"containerName": CONTAINER}}),
            Vec::new(),
        ),
        Store::Azure => {
            let emulator = crate::servers::start("Azurite", || {
                let emulator = Azurite::start();
                emulator.create_container(CONTAINER);
                emulator
            })
            .await?;
            let env = vec![(
                "EG__STORAGE__ACCOUNTS__DEVSTOREACCOUNT1__CONNECTION_STRING",
                emulator.connection_string(),
            )];
            let destination = json!({"endpointType": "StorageBlob", "properties": {
                "resourceId": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/eg-bench/providers/Microsoft.Storage/storageAccounts/devstoreaccount1",
                "blobContainerName": CONTAINER,
            }});
            (Server::Azure(emulator), destination, env)
        }
        Store::S3 => {
            let server = crate::servers::start("moto's S3 server", || {
                let server = S3Server::start();
                server.create_bucket(CONTAINER);
                server
            })
            .await?;
            let credentials = server.credentials();
            let env = vec![
                ("EG__STORAGE__S3__BENCH__ENDPOINT_URL", server.endpoint()),
                ("EG__STORAGE__S3__BENCH__REGION", server.region().to_owned()),
                ("EG__STORAGE__S3__BENCH__ACCESS_KEY_ID", credentials.access_key_id),
                (
                    "EG__STORAGE__S3__BENCH__SECRET_ACCESS_KEY",
                    credentials.secret_access_key,
                ),
            ];
            let destination = json!({"endpointType": "S3", "properties": {
                "connection": "bench", "bucket": CONTAINER,
            }});
            (Server::S3(server), destination, env)
        }
    })
}

/// A client of the container the worker wrote to.
fn client_for(server: &Server, d: &Deployment) -> anyhow::Result<Arc<dyn ObjectStore>> {
    match server {
        Server::Local => store_ceiling::local(&d.launcher.run_dir().join("deadletters").join(CONTAINER)),
        Server::Azure(emulator) => store_ceiling::azure(emulator, CONTAINER),
        Server::S3(s3) => store_ceiling::s3(s3, CONTAINER),
    }
}

/// Dead-letter records still in Redis: waiting out the delay, or in the stream (read or
/// not) — a record leaves the stream only once its object was written.
async fn waiting(redis: &mut redis::aio::MultiplexedConnection, keys: &eg_store::Keyspace) -> anyhow::Result<u64> {
    let mut pipe = redis::pipe();
    for partition in keys.all_partitions() {
        pipe.zcard(partition.deadletter_delay()).xlen(partition.deadletter());
    }
    let counts: Vec<u64> = pipe.query_async(redis).await?;
    Ok(counts.iter().sum())
}
