//! `destinations` (scenario 11, issues 17 and 29): deliveries per second from eg to each
//! destination beyond webhooks — RabbitMQ, NATS JetStream, Azure Storage Queue (Azurite),
//! Kafka (tansu), Amazon SQS (moto) — against the same broker's own publish ceiling measured in the same run
//! ([`crate::brokers_ceiling`]: the client library the sender uses, publishing directly
//! the way the sender does, as many at once as the sender's concurrency).
//!
//! Per destination: a deployment without a sender builds a backlog of deliveries in
//! Redis; the ceiling is measured (to a queue, subject or queue of its own on the same
//! server); then one eg-sender starts and the bench measures how fast its
//! `DeliverySuccessCount` rises through the backlog — an event counts once the broker
//! confirmed it.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::brokers_ceiling::{self, Ceiling};
use crate::ceiling::Fsync;
use crate::ctx::Ctx;
use crate::deployment::{Deployment, Setup};
use crate::drain;
use crate::load::{self, Progress, Template};
use crate::report::{Row, thousands};
use anyhow::Context;
use base64::Engine;
use eg_testkit::{Azurite, Nats, RabbitMq, S3Server, Tansu};
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

pub const SCENARIO: Scenario = Scenario {
    name: "destinations",
    summary: "11: deliveries/s to RabbitMQ, NATS JetStream, a storage queue, Kafka and SQS, against each broker's publish ceiling",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench destinations: deliveries per second from one eg-sender to each destination
(RabbitMQ, NATS JetStream, Azure Storage Queue on Azurite, Kafka on tansu, Amazon SQS on
moto), one event per message, against a client publishing 1 KB events straight to the
same server, as many at once as the sender's concurrency. rabbitmq-server and
nats-server from the system; Azurite, tansu and moto from target/test-tools
(deploy/local/ensure-test-tools.sh).

usage: eg-bench destinations [options]

  --events N             events delivered per destination (default: about 10 s of
                         deliveries here — RabbitMQ 60000, NATS 120000, storage queue
                         10000, Kafka 30000, SQS 1000; quick at most 2000)
  --ceiling-messages N   messages in each ceiling (default: RabbitMQ 100000, NATS 200000,
                         storage queue 6000, Kafka 60000, SQS 1000; quick at most 2000), after a
                         warm-up of a tenth
  --destinations LIST    rabbitmq,nats,storage-queue,kafka,sqs (default all five)

";

/// The sender's concurrency (eg's default `EG__SENDER__CONCURRENCY`): the ceilings
/// publish this many at once.
const SENDER_CONCURRENCY: usize = 64;
const DRAIN_LIMIT: Duration = Duration::from_secs(300);
const AZURITE_RESOURCE_ID: &str = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/eg-bench/providers/Microsoft.Storage/storageAccounts/devstoreaccount1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    RabbitMq,
    Nats,
    StorageQueue,
    Kafka,
    Sqs,
}

impl Kind {
    fn parse(name: &str) -> anyhow::Result<Self> {
        match name.trim() {
            "rabbitmq" => Ok(Self::RabbitMq),
            "nats" => Ok(Self::Nats),
            "storage-queue" => Ok(Self::StorageQueue),
            "kafka" => Ok(Self::Kafka),
            "sqs" => Ok(Self::Sqs),
            other => {
                anyhow::bail!("--destinations: no destination {other:?} (rabbitmq, nats, storage-queue, kafka or sqs)")
            }
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::RabbitMq => "RabbitMQ",
            Self::Nats => "NATS JetStream",
            Self::StorageQueue => "Storage Queue (Azurite)",
            Self::Kafka => "Kafka (tansu)",
            Self::Sqs => "Amazon SQS (moto)",
        }
    }

    /// Events for eg and messages for the ceiling: about 10 s of eg's deliveries and a few
    /// seconds of the ceiling on the machine the figures were first taken on.
    fn sizes(self) -> (u64, usize) {
        match self {
            Self::RabbitMq => (60_000, 100_000),
            Self::Nats => (120_000, 200_000),
            Self::StorageQueue => (10_000, 6_000),
            Self::Kafka => (30_000, 60_000),
            // moto's SQS slows as its queue grows: a few seconds' worth.
            Self::Sqs => (1_000, 1_000),
        }
    }

    fn ceiling_label(self) -> String {
        match self {
            Self::RabbitMq => format!(
                "lapin, persistent mandatory publish + confirm to a durable queue, {SENDER_CONCURRENCY} channels"
            ),
            Self::Nats => format!("async-nats JetStream publish with Nats-Msg-Id + ack, {SENDER_CONCURRENCY} at once"),
            Self::StorageQueue => format!("signed Put Message (base64), {SENDER_CONCURRENCY} at once"),
            Self::Kafka => format!(
                "rdkafka produce, acks=all, idempotent, one producer, {SENDER_CONCURRENCY} records awaiting their reports"
            ),
            Self::Sqs => format!(
                "signed SendMessageBatch of 10, {SENDER_CONCURRENCY} messages in flight ({} requests at once)",
                SENDER_CONCURRENCY.div_ceil(10)
            ),
        }
    }
}

/// The destination's server while its row runs.
enum Broker {
    RabbitMq(RabbitMq),
    Nats(Nats),
    StorageQueue(Azurite),
    Kafka(Tansu),
    /// The server and the ceiling's queue URL.
    Sqs(S3Server, String),
}

impl Broker {
    fn pid(&self) -> Option<u32> {
        match self {
            Broker::RabbitMq(b) => b.pid(),
            Broker::Nats(b) => b.pid(),
            Broker::StorageQueue(b) => b.pid(),
            Broker::Kafka(b) => b.pid(),
            Broker::Sqs(b, _) => b.pid(),
        }
    }
}

/// Settings for every tier of the deployment.
type TierEnv = Vec<(&'static str, String)>;

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let events: Option<u64> = flags.text("events")?.map(|n| n.parse()).transpose()?;
        let ceiling_messages: Option<usize> = flags.text("ceiling-messages")?.map(|n| n.parse()).transpose()?;
        let kinds = flags
            .text("destinations")?
            .unwrap_or_else(|| "rabbitmq,nats,storage-queue,kafka,sqs".into())
            .split(',')
            .map(Kind::parse)
            .collect::<anyhow::Result<Vec<_>>>()?;
        flags.finish()?;
        let mut rows = Vec::new();
        for kind in kinds {
            eprintln!("destinations: {} …", kind.label());
            let (default_events, default_messages) = kind.sizes();
            let events = events.unwrap_or(ctx.sized(default_events, default_events.min(2_000)));
            let messages = ceiling_messages.unwrap_or(ctx.sized(default_messages, default_messages.min(2_000)));
            match one_destination(ctx, kind, events, messages).await {
                Ok(row) => rows.push(row),
                Err(e) => rows.push(Row::failed("11 destinations", kind.label(), &e)),
            }
        }
        Ok(rows)
    })
}

async fn one_destination(ctx: &Ctx, kind: Kind, events: u64, ceiling_messages: usize) -> anyhow::Result<Row> {
    let (broker, destination, env) = start_broker(kind).await?;
    let mut setup = Setup::new(Fsync::EverySec);
    setup.senders = 0;
    setup.scheduler = false;
    setup.destination = Some(destination);
    setup.env = env;
    let mut d = Deployment::start(ctx.bin_dir.clone(), &setup).await?;

    let template = Template::new(100, 1024);
    let progress = Arc::new(Progress::default());
    let publishers = load::closed(&d.target, &template, 4, Some(events), None, &progress);
    load::join(publishers).await?;
    let published = progress.published();

    let event = one_event();
    let ceiling = measure_ceiling(&broker, &event, ceiling_messages).await?;

    d.add_sender(&[]).await?;
    let sender_url = d.senders[0].url.clone();
    let mut processes = crate::cpu::Processes::default();
    processes.add("sender", d.senders[0].pid());
    if let Some(pid) = d.launcher.redis_pid() {
        processes.add("redis", pid);
    }
    if let Some(pid) = broker.pid() {
        processes.add_with_children("broker", pid);
    }
    processes.add("bench", std::process::id());
    let http = d.launcher.http().clone();
    let drained = drain::measure(published, &processes, DRAIN_LIMIT, || {
        let (http, url) = (&http, format!("{sender_url}/metrics"));
        async move {
            let page = http.get(url).send().await?.error_for_status()?.text().await?;
            Ok(drain::counter_total(&page, "DeliverySuccessCount") as u64)
        }
    })
    .await?;
    d.finish(ctx.keep);
    drop(broker);

    let mut row = Row::new("11 destinations", kind.label());
    row.rate = Some((drained.per_second(), "deliveries/s"));
    row.cpu = Some((drained.cpu.clone(), drained.seconds));
    row.counted = Some(drained.counted as f64);
    row.ceiling = Some((kind.ceiling_label(), ceiling.per_second()));
    row.figures.push((
        "backlog".into(),
        format!(
            "{published} events of 1 KB delivered in {:.1} s from the sender's start (rate taken between 10 % and 90 % done)",
            drained.total_seconds
        ),
    ));
    row.figures.push((
        "ceiling run".into(),
        format!(
            "{} messages in {:.1} s",
            ceiling.messages,
            ceiling.elapsed.as_secs_f64()
        ),
    ));
    row.notes.push(format!(
        "one eg-sender, EG__SENDER__CONCURRENCY {SENDER_CONCURRENCY} (eg's default), maxEventsPerBatch 1 (one message per event), appendfsync everysec; the sender's /metrics read every 50 ms"
    ));
    row.details = json!({
        "events": published, "secondsMeasured": drained.seconds, "secondsTotal": drained.total_seconds,
        "ceilingMessages": ceiling.messages, "ceilingSeconds": ceiling.elapsed.as_secs_f64(),
        "cpuSeconds": drained.cpu.to_json(),
    });
    eprintln!(
        "destinations: {}: {} deliveries/s, ceiling {} messages/s",
        kind.label(),
        thousands(drained.per_second()),
        thousands(ceiling.per_second())
    );
    Ok(row)
}

/// One event as the load generator publishes it (1 KB): what the ceiling sends per message.
fn one_event() -> Vec<u8> {
    let array = Template::new(1, 1024).body(0, crate::receiver::now_micros());
    array[1..array.len() - 1].to_vec()
}

/// Starts the server and what both eg and the ceiling publish to; returns the
/// subscription's destination and the tiers' settings for the server.
async fn start_broker(kind: Kind) -> anyhow::Result<(Broker, Value, TierEnv)> {
    Ok(match kind {
        Kind::RabbitMq => {
            let broker = crate::servers::start("rabbitmq-server", RabbitMq::start).await?;
            let connection = Connection::connect(&broker.amqp_url(), ConnectionProperties::default())
                .await
                .context("connect to RabbitMQ")?;
            let channel = connection.create_channel().await?;
            for queue in ["bench", "ceiling"] {
                let durable = QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                };
                channel
                    .queue_declare(queue.into(), durable, FieldTable::default())
                    .await?;
            }
            connection.close(200, "declared".into()).await?;
            // The default exchange routes by queue name.
            let destination = json!({"endpointType": "RabbitMQ", "properties": {
                "connection": "bench", "exchange": "", "routingKey": "bench",
            }});
            let env = vec![("EG__BROKERS__RABBITMQ__BENCH__URL", broker.amqp_url())];
            (Broker::RabbitMq(broker), destination, env)
        }
        Kind::Nats => {
            let broker = crate::servers::start("nats-server", Nats::start).await?;
            let client = async_nats::connect(broker.url()).await.context("connect to NATS")?;
            async_nats::jetstream::new(client)
                .create_stream(async_nats::jetstream::stream::Config {
                    name: "BENCH".into(),
                    subjects: vec!["bench.>".into()],
                    ..Default::default()
                })
                .await?;
            let destination = json!({"endpointType": "NatsJetStream", "properties": {
                "connection": "bench", "subject": "bench.eg",
            }});
            let env = vec![("EG__BROKERS__NATS__BENCH__URL", broker.url())];
            (Broker::Nats(broker), destination, env)
        }
        Kind::StorageQueue => {
            let emulator = crate::servers::start("Azurite", || {
                let emulator = Azurite::start();
                emulator.create_queue("bench");
                emulator.create_queue("ceiling");
                emulator
            })
            .await?;
            let destination = json!({"endpointType": "StorageQueue", "properties": {
                "resourceId": AZURITE_RESOURCE_ID, "queueName": "bench",
            }});
            let env = vec![(
                "EG__STORAGE__ACCOUNTS__DEVSTOREACCOUNT1__CONNECTION_STRING",
                emulator.connection_string(),
            )];
            (Broker::StorageQueue(emulator), destination, env)
        }
        Kind::Kafka => {
            let broker = crate::servers::start("tansu", || {
                let broker = Tansu::start();
                broker.create_topic("bench", 1);
                broker.create_topic("ceiling", 1);
                broker
            })
            .await?;
            // No key: as the ceiling's records, each goes to the one partition.
            let destination = json!({"endpointType": "Kafka", "properties": {
                "connection": "bench", "topic": "bench",
            }});
            let env = vec![(
                "EG__BROKERS__KAFKA__BENCH__BOOTSTRAP_SERVERS",
                broker.bootstrap_servers(),
            )];
            (Broker::Kafka(broker), destination, env)
        }
        Kind::Sqs => {
            let (moto, bench, ceiling) = crate::servers::start("moto", || {
                let moto = S3Server::start();
                let bench = eg_testkit::sqs::create_queue(&moto, "bench");
                let ceiling = eg_testkit::sqs::create_queue(&moto, "ceiling");
                (moto, bench, ceiling)
            })
            .await?;
            let destination = json!({"endpointType": "AmazonSQS", "properties": {
                "connection": "bench", "queueUrl": bench,
            }});
            let credentials = moto.credentials();
            let env = vec![
                ("EG__BROKERS__SQS__BENCH__REGION", moto.region().to_owned()),
                ("EG__BROKERS__SQS__BENCH__ENDPOINT_URL", moto.endpoint()),
                ("EG__BROKERS__SQS__BENCH__ACCESS_KEY_ID", credentials.access_key_id),
                (
                    "EG__BROKERS__SQS__BENCH__SECRET_ACCESS_KEY",
                    credentials.secret_access_key,
                ),
            ];
            (Broker::Sqs(moto, ceiling), destination, env)
        }
    })
}

/// The ceiling after a warm-up of a tenth as many messages (not counted): a broker just
/// started (Azurite's JavaScript above all) is slower for its first seconds.
async fn measure_ceiling(broker: &Broker, event: &[u8], messages: usize) -> anyhow::Result<Ceiling> {
    publish_directly(broker, event, (messages / 10).max(1)).await?;
    publish_directly(broker, event, messages).await
}

async fn publish_directly(broker: &Broker, event: &[u8], messages: usize) -> anyhow::Result<Ceiling> {
    match broker {
        Broker::RabbitMq(b) => {
            brokers_ceiling::rabbitmq_ceiling(&b.amqp_url(), "", "ceiling", event, messages, SENDER_CONCURRENCY).await
        }
        Broker::Nats(b) => {
            brokers_ceiling::nats_ceiling(&b.url(), "bench.ceiling", event, messages, SENDER_CONCURRENCY).await
        }
        Broker::StorageQueue(b) => {
            // Event Grid puts each event base64-encoded.
            let text = base64::engine::general_purpose::STANDARD.encode(event);
            brokers_ceiling::storage_queue_ceiling(b, "ceiling", &text, messages, SENDER_CONCURRENCY).await
        }
        Broker::Kafka(b) => {
            brokers_ceiling::kafka_ceiling(&b.bootstrap_servers(), "ceiling", event, messages, SENDER_CONCURRENCY).await
        }
        Broker::Sqs(b, queue_url) => {
            let body = String::from_utf8_lossy(event);
            brokers_ceiling::sqs_ceiling(b, queue_url, &body, messages, SENDER_CONCURRENCY).await
        }
    }
}
