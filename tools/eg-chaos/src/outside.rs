//! The servers outside eg that the run delivers to: Azurite (the Azure Blob dead-letter
//! destination), a RabbitMQ node, a NATS server with JetStream, a Kafka-protocol broker
//! (tansu, its storage in a bucket of moto's S3) and moto's SQS (broker destinations),
//! each eg-testkit's, started before the tiers, prepared (container; durable exchange
//! and queue bound to it; stream with a duplicate window longer than the run; topic;
//! queue), and disturbed once each while events flow (moto is not: it is the Kafka
//! broker's disk, and SQS's outages are the SQS tests').
//!
//! Azurite is stopped with SIGTERM, not killed: it saves its metadata only every 5 s,
//! so a SIGKILL loses writes it acknowledged, which a real account never does (its port
//! is closed meanwhile exactly as after a kill). The brokers are SIGKILLed: RabbitMQ
//! confirms a persistent message to a durable queue once it is on disk, the NATS
//! reader re-reads the stream after a restart (see [`crate::broker_readers`]), and tansu
//! acknowledges a record once its S3 storage holds it, so a restart finds it.
//!
//! eg-testkit's servers are blocking and panic when they cannot start; every call to
//! them here runs on a blocking thread and a panic becomes an error.

use crate::journal::Journal;
use crate::receiver::lock;
use crate::scenario::{
    BLOB_CONTAINER, KAFKA_CONNECTION, KAFKA_TOPIC, NATS_CONNECTION, NATS_SUBJECT, Outside, RABBITMQ_CONNECTION,
    RABBITMQ_EXCHANGE, RABBITMQ_ROUTING_KEY, SQS_CONNECTION, SQS_QUEUE,
};
use anyhow::Context;
use eg_testkit::{Azurite, Nats, RabbitMq, S3Server, Tansu};
use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties, ExchangeKind};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The durable queue bound to the run's exchange, which the oracle reads.
pub const RABBITMQ_QUEUE: &str = "eg-chaos-oracle";
/// The JetStream stream taking the run's subject.
pub const NATS_STREAM: &str = "EGCHAOS";
/// The Kafka topic's partitions.
const KAFKA_PARTITIONS: u32 = 3;
/// The moto bucket tansu keeps its records in.
const TANSU_BUCKET: &str = "tansu";
/// How many times a server that does not come back is started again before the run
/// gives up on it (the drain then fails, naming it).
const START_TRIES: usize = 3;

/// The servers of one run; `None` for those the scenario leaves out.
pub struct Servers {
    pub azurite: Option<Arc<Mutex<Azurite>>>,
    pub rabbitmq: Option<Arc<Mutex<RabbitMq>>>,
    pub nats: Option<Arc<Mutex<Nats>>>,
    /// moto: tansu's storage and the SQS queue. Never disturbed.
    pub moto: Option<Arc<S3Server>>,
    pub tansu: Option<Arc<Mutex<Tansu>>>,
    /// Connection details, fixed for the run (restarts keep ports).
    pub blob_port: Option<u16>,
    pub amqp_url: Option<String>,
    pub nats_url: Option<String>,
    pub kafka_bootstrap: Option<String>,
    /// The queue's URL as moto gives it (the reader's; subscriptions name AWS's form).
    pub sqs_queue_url: Option<String>,
    azurite_connection_string: Option<String>,
    /// Outages injected, by kind (`stop_azurite`, `kill_rabbitmq`, `kill_nats`), and how
    /// long each server took to answer again.
    pub injected: Mutex<BTreeMap<String, u64>>,
    pub restart_seconds: Mutex<BTreeMap<String, Vec<f64>>>,
}

impl Servers {
    /// Starts and prepares the servers `outside` asks for.
    pub async fn start(outside: Outside, duplicate_window: Duration) -> anyhow::Result<Self> {
        let mut servers = Self {
            azurite: None,
            rabbitmq: None,
            nats: None,
            blob_port: None,
            amqp_url: None,
            nats_url: None,
            kafka_bootstrap: None,
            sqs_queue_url: None,
            moto: None,
            tansu: None,
            azurite_connection_string: None,
            injected: Mutex::default(),
            restart_seconds: Mutex::default(),
        };
        // Started side by side: RabbitMQ alone takes seconds.
        let azurite = async {
            if !outside.blob {
                return anyhow::Ok(None);
            }
            let azurite = blocking("start Azurite", || {
                let azurite = Azurite::start();
                azurite.create_container(BLOB_CONTAINER);
                azurite
            })
            .await?;
            Ok(Some(azurite))
        };
        let rabbitmq = async {
            if !outside.brokers {
                return anyhow::Ok(None);
            }
            let rabbitmq = blocking("start RabbitMQ", RabbitMq::start).await?;
            declare_rabbitmq_queue(&rabbitmq.amqp_url()).await?;
            Ok(Some(rabbitmq))
        };
        let nats = async {
            if !outside.brokers {
                return anyhow::Ok(None);
            }
            let nats = blocking("start nats-server", Nats::start).await?;
            create_nats_stream(&nats.url(), duplicate_window).await?;
            Ok(Some(nats))
        };
        let kafka_and_sqs = async {
            if !outside.brokers {
                return anyhow::Ok(None);
            }
            let kafka = outside.kafka;
            let started = blocking("start moto (and tansu on its S3)", move || {
                let moto = S3Server::start();
                let queue_url = eg_testkit::sqs::create_queue(&moto, SQS_QUEUE);
                let tansu = kafka.then(|| {
                    let tansu = Tansu::start_on_s3(&moto, TANSU_BUCKET);
                    tansu.create_topic(KAFKA_TOPIC, KAFKA_PARTITIONS);
                    tansu
                });
                (moto, tansu, queue_url)
            })
            .await?;
            Ok(Some(started))
        };
        let (azurite, rabbitmq, nats, kafka_and_sqs) = tokio::join!(azurite, rabbitmq, nats, kafka_and_sqs);
        if let Some(azurite) = azurite? {
            servers.blob_port = Some(azurite.blob_port());
            servers.azurite_connection_string = Some(azurite.connection_string());
            servers.azurite = Some(Arc::new(Mutex::new(azurite)));
        }
        if let Some(rabbitmq) = rabbitmq? {
            servers.amqp_url = Some(rabbitmq.amqp_url());
            servers.rabbitmq = Some(Arc::new(Mutex::new(rabbitmq)));
        }
        if let Some(nats) = nats? {
            servers.nats_url = Some(nats.url());
            servers.nats = Some(Arc::new(Mutex::new(nats)));
        }
        if let Some((moto, tansu, queue_url)) = kafka_and_sqs? {
            servers.sqs_queue_url = Some(queue_url);
            if let Some(tansu) = tansu {
                servers.kafka_bootstrap = Some(tansu.bootstrap_servers());
                servers.tansu = Some(Arc::new(Mutex::new(tansu)));
            }
            servers.moto = Some(Arc::new(moto));
        }
        Ok(servers)
    }

    /// The tiers' settings naming these servers.
    pub fn tier_env(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        if let Some(connection_string) = &self.azurite_connection_string {
            env.push((
                format!(
                    "EG__STORAGE__ACCOUNTS__{}__CONNECTION_STRING",
                    eg_testkit::azurite::ACCOUNT.to_ascii_uppercase()
                ),
                connection_string.clone(),
            ));
        }
        if let Some(url) = &self.amqp_url {
            env.push((
                format!(
                    "EG__BROKERS__RABBITMQ__{}__URL",
                    RABBITMQ_CONNECTION.to_ascii_uppercase()
                ),
                url.clone(),
            ));
        }
        if let Some(url) = &self.nats_url {
            env.push((
                format!("EG__BROKERS__NATS__{}__URL", NATS_CONNECTION.to_ascii_uppercase()),
                url.clone(),
            ));
        }
        if let Some(bootstrap) = &self.kafka_bootstrap {
            env.push((
                format!(
                    "EG__BROKERS__KAFKA__{}__BOOTSTRAP_SERVERS",
                    KAFKA_CONNECTION.to_ascii_uppercase()
                ),
                bootstrap.clone(),
            ));
            // tansu writes every produce request to S3 (moto): longer than the run's 1 s
            // attempt bound under load, and each record that times out costs the
            // producer its epoch. Still under the 4 s visibility timeout.
            env.push((
                format!("EG__BROKERS__KAFKA__{}__TIMEOUT", KAFKA_CONNECTION.to_ascii_uppercase()),
                "3s".to_owned(),
            ));
        }
        if let Some(moto) = &self.moto {
            let credentials = moto.credentials();
            let setting = |key: &str| format!("EG__BROKERS__SQS__{}__{key}", SQS_CONNECTION.to_ascii_uppercase());
            env.push((setting("ENDPOINT_URL"), moto.endpoint()));
            env.push((setting("REGION"), moto.region().to_owned()));
            env.push((setting("ACCESS_KEY_ID"), credentials.access_key_id));
            env.push((setting("SECRET_ACCESS_KEY"), credentials.secret_access_key));
        }
        env
    }

    /// One outage of each server at a random moment of the run, spread so that they
    /// rarely overlap: Azurite stopped for one to four seconds in the first half,
    /// RabbitMQ killed (its restart takes 3–6 s) around the middle, NATS killed for one
    /// to three seconds in the second half, tansu killed for one to three seconds late
    /// in the run. Returns once every server runs again.
    pub async fn disturb(self: Arc<Self>, journal: Journal, started: Instant, stop_at: Instant) {
        let span = stop_at.saturating_duration_since(started);
        let at = |from: f64, to: f64| started + span.mul_f64(rand::random_range(from..to));
        let mut outages = tokio::task::JoinSet::new();
        if let Some(azurite) = self.azurite.clone() {
            let (servers, journal, moment) = (self.clone(), journal.clone(), at(0.15, 0.4));
            outages.spawn(async move {
                tokio::time::sleep_until(moment.into()).await;
                let down = Duration::from_millis(rand::random_range(1000..4000));
                let stopped = blocking("stop Azurite", {
                    let azurite = azurite.clone();
                    move || lock(&azurite).stop()
                })
                .await;
                servers
                    .outage(
                        "stop_azurite",
                        "Azurite (SIGTERM, saves first)",
                        stopped,
                        down,
                        &journal,
                    )
                    .await;
                servers
                    .start_again("azurite", &journal, move || lock(&azurite).start_again())
                    .await;
            });
        }
        if let Some(rabbitmq) = self.rabbitmq.clone() {
            let (servers, journal, moment) = (self.clone(), journal.clone(), at(0.35, 0.6));
            outages.spawn(async move {
                tokio::time::sleep_until(moment.into()).await;
                let down = Duration::from_millis(rand::random_range(200..1500));
                let killed = blocking("kill RabbitMQ", {
                    let rabbitmq = rabbitmq.clone();
                    move || lock(&rabbitmq).kill()
                })
                .await;
                servers
                    .outage("kill_rabbitmq", "RabbitMQ (SIGKILL)", killed, down, &journal)
                    .await;
                servers
                    .start_again("rabbitmq", &journal, move || lock(&rabbitmq).start_again())
                    .await;
            });
        }
        if let Some(nats) = self.nats.clone() {
            let (servers, journal, moment) = (self.clone(), journal.clone(), at(0.55, 0.8));
            outages.spawn(async move {
                tokio::time::sleep_until(moment.into()).await;
                let down = Duration::from_millis(rand::random_range(1000..3000));
                let killed = blocking("kill nats-server", {
                    let nats = nats.clone();
                    move || lock(&nats).kill()
                })
                .await;
                servers
                    .outage("kill_nats", "nats-server (SIGKILL)", killed, down, &journal)
                    .await;
                servers
                    .start_again("nats", &journal, move || lock(&nats).start_again())
                    .await;
            });
        }
        if let Some(tansu) = self.tansu.clone() {
            let (servers, journal, moment) = (self.clone(), journal.clone(), at(0.65, 0.9));
            outages.spawn(async move {
                tokio::time::sleep_until(moment.into()).await;
                let down = Duration::from_millis(rand::random_range(1000..3000));
                let killed = blocking("kill tansu", {
                    let tansu = tansu.clone();
                    move || lock(&tansu).kill()
                })
                .await;
                servers
                    .outage(
                        "kill_kafka",
                        "tansu (SIGKILL; its records are in S3)",
                        killed,
                        down,
                        &journal,
                    )
                    .await;
                servers
                    .start_again("tansu", &journal, move || lock(&tansu).start_again())
                    .await;
            });
        }
        while outages.join_next().await.is_some() {}
    }

    async fn outage(&self, kind: &str, what: &str, done: anyhow::Result<()>, down: Duration, journal: &Journal) {
        match done {
            Ok(()) => {
                journal.note(&format!(
                    "stopped {what}; start again in {}",
                    humantime::format_duration(down)
                ));
                *lock(&self.injected).entry(kind.to_owned()).or_default() += 1;
            }
            Err(e) => journal.phase(&format!("could not stop {what}: {e:#}")),
        }
        tokio::time::sleep(down).await;
    }

    /// Starts a server again, trying a few times: a slow or failed start is written to
    /// the journal, not a verdict (the drain waits for what it delays).
    async fn start_again(&self, name: &str, journal: &Journal, start: impl Fn() + Send + Sync + Clone + 'static) {
        for attempt in 1..=START_TRIES {
            let began = Instant::now();
            match blocking(&format!("start {name} again"), start.clone()).await {
                Ok(()) => {
                    let took = began.elapsed().as_secs_f64();
                    journal.note(&format!("{name} answers again (its start took {took:.1}s)"));
                    lock(&self.restart_seconds)
                        .entry(name.to_owned())
                        .or_default()
                        .push(took);
                    return;
                }
                Err(e) => journal.phase(&format!(
                    "{name} did not start again (try {attempt}/{START_TRIES}): {e:#}"
                )),
            }
        }
    }
}

/// Runs eg-testkit's blocking `work` on a blocking thread; its panic (how eg-testkit
/// reports a server that does not start) becomes an error naming `what`.
async fn blocking<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        let message = match e.try_into_panic() {
            Ok(panic) => panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "panicked".into()),
            Err(e) => e.to_string(),
        };
        anyhow::anyhow!("{what}: {message}")
    })
}

/// A durable topic exchange and a durable queue bound to it by the run's routing key:
/// whatever eg publishes there stays until the oracle takes it.
async fn declare_rabbitmq_queue(url: &str) -> anyhow::Result<()> {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .context("connect to RabbitMQ to declare the exchange and queue")?;
    let channel = connection.create_channel().await?;
    let exchange = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    channel
        .exchange_declare(
            RABBITMQ_EXCHANGE.into(),
            ExchangeKind::Topic,
            exchange,
            FieldTable::default(),
        )
        .await
        .context("declare the exchange")?;
    let queue = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(RABBITMQ_QUEUE.into(), queue, FieldTable::default())
        .await
        .context("declare the queue")?;
    channel
        .queue_bind(
            RABBITMQ_QUEUE.into(),
            RABBITMQ_EXCHANGE.into(),
            RABBITMQ_ROUTING_KEY.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .context("bind the queue to the exchange")?;
    let _ = connection.close(0, "declared".into()).await;
    Ok(())
}

/// A file-stored stream on the run's subject whose duplicate window covers the whole
/// run, so every repeat of an event eg sends is absorbed.
async fn create_nats_stream(url: &str, duplicate_window: Duration) -> anyhow::Result<()> {
    let client = async_nats::connect(url)
        .await
        .context("connect to NATS to create the stream")?;
    async_nats::jetstream::new(client)
        .create_stream(async_nats::jetstream::stream::Config {
            name: NATS_STREAM.into(),
            subjects: vec![NATS_SUBJECT.into()],
            duplicate_window,
            ..async_nats::jetstream::stream::Config::default()
        })
        .await
        .context("create the JetStream stream")?;
    Ok(())
}
