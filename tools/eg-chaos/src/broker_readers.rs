//! What arrived at the brokers, read from the brokers themselves, for the oracle.
//!
//! RabbitMQ: a consumer on the durable queue bound to the run's exchange takes every
//! message and acknowledges it only after noting its `message_id` (the event id), so a
//! broker killed meanwhile gives back what was not acknowledged, flagged `redelivered`;
//! such a copy of an id already noted is the broker's redelivery to the reader, counted
//! apart, not eg's duplicate.
//!
//! NATS: the stream is read by sequence number. After the client lost the server, or
//! any failed request, the reader starts again from sequence 1: a server killed right after
//! acknowledging a message may not have written it, and give its sequence number to the
//! next message after the restart, which a reader going on from where it stopped would
//! never see. Each (sequence, `Nats-Msg-Id`) pair is noted once; an id under two
//! sequences is a duplicate the duplicate window did not absorb.
//!
//! Kafka: every partition of the topic is read by offset, in sessions of a few seconds
//! each ending when every partition reported its end (or the session's time is up).
//! After an error, or when asked ([`BrokerLog::reread`]), the next session reads from
//! offset 0 again. Each (partition, offset) pair is noted once; an event id at two pairs
//! is a duplicate (at least once allows it: a record whose acknowledgement was lost in a
//! broker kill is produced again).
//!
//! SQS: messages are received and deleted, ten at a time; a copy of an id already noted
//! is a duplicate (SQS standard queues may give one twice, and so may eg).

use crate::journal::Journal;
use crate::outside::{NATS_STREAM, RABBITMQ_QUEUE};
use crate::receiver::lock;
use crate::scenario::KAFKA_TOPIC;
use crate::scenario::event_seq;
use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How long a reader waits before connecting again after losing its broker.
const RECONNECT_AFTER: Duration = Duration::from_millis(500);

/// What one broker gave its reader.
#[derive(Default)]
pub struct BrokerLog {
    /// Copies of each event (by sequence number) that eg put there.
    pub copies: Mutex<HashMap<u64, u32>>,
    /// Message ids that are not this run's events.
    pub strangers: Mutex<Vec<String>>,
    /// RabbitMQ: copies given again to the reader because its acknowledgement was lost.
    pub redelivered_to_reader: AtomicU64,
    /// Times the reader lost its broker and connected again.
    pub reconnects: AtomicU64,
    /// NATS: (stream sequence, event) pairs read, so a re-read notes nothing twice;
    /// Kafka: (partition and offset, event) pairs.
    read: Mutex<HashSet<(u64, u64)>>,
    /// NATS and Kafka: set when a full read from the start ended after
    /// [`BrokerLog::reread`] asked for it.
    pub reread_done: AtomicBool,
    reread_asked: AtomicBool,
}

impl BrokerLog {
    fn note(&self, id: Option<&str>) {
        match id.and_then(event_seq) {
            Some(seq) => *lock(&self.copies).entry(seq).or_default() += 1,
            None => lock(&self.strangers).push(id.unwrap_or("(no message id)").to_owned()),
        }
    }

    /// NATS and Kafka: asks the reader to read everything again from the start.
    pub fn reread(&self) {
        self.reread_done.store(false, Ordering::SeqCst);
        self.reread_asked.store(true, Ordering::SeqCst);
    }
}

/// Reads the RabbitMQ queue until the task is aborted.
pub async fn read_rabbitmq(url: String, log: std::sync::Arc<BrokerLog>, journal: Journal) {
    // While the broker is down every try fails alike: each kind of failure noted once.
    let mut last_problem = String::new();
    loop {
        match consume_rabbitmq(&url, &log).await {
            Err(e) if format!("{e:#}") != last_problem => {
                last_problem = format!("{e:#}");
                journal.note(&format!("RabbitMQ reader: {last_problem}; connecting again"));
            }
            _ => {}
        }
        log.reconnects.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}

/// How long connecting and starting to consume may take. A broker still starting may
/// accept the connection and answer nothing, and a reader waiting on it for ever would
/// miss everything delivered after the restart.
const RABBITMQ_SETUP: Duration = Duration::from_secs(5);

async fn consume_rabbitmq(url: &str, log: &BrokerLog) -> anyhow::Result<()> {
    let setup = async {
        let connection = Connection::connect(url, ConnectionProperties::default()).await?;
        let channel = connection.create_channel().await?;
        channel.basic_qos(200, BasicQosOptions::default()).await?;
        let consumer = channel
            .basic_consume(
                RABBITMQ_QUEUE.into(),
                "eg-chaos-oracle".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        anyhow::Ok((connection, consumer))
    };
    let (_connection, mut consumer) = tokio::time::timeout(RABBITMQ_SETUP, setup)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {RABBITMQ_SETUP:?} while connecting"))??;
    while let Some(delivery) = consumer.next().await {
        let delivery = delivery?;
        let id = delivery.properties.message_id().as_ref().map(|m| m.to_string());
        let seen_before = id
            .as_deref()
            .and_then(event_seq)
            .is_some_and(|seq| lock(&log.copies).contains_key(&seq));
        if delivery.redelivered && seen_before {
            log.redelivered_to_reader.fetch_add(1, Ordering::Relaxed);
        } else {
            log.note(id.as_deref());
        }
        delivery.ack(BasicAckOptions::default()).await?;
    }
    anyhow::bail!("the consumer ended")
}

/// Reads the NATS stream until the task is aborted.
pub async fn read_nats(url: String, log: std::sync::Arc<BrokerLog>, journal: Journal) {
    loop {
        if let Err(e) = poll_nats(&url, log.clone()).await {
            journal.note(&format!("NATS reader: {e:#}; reading the stream again from the start"));
        }
        log.reconnects.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}

async fn poll_nats(url: &str, log: std::sync::Arc<BrokerLog>) -> anyhow::Result<()> {
    // The client reconnects by itself; a disconnection is the sign of a restart.
    let on_event = log.clone();
    let options = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .event_callback(move |event| {
            let log = on_event.clone();
            async move {
                if matches!(event, async_nats::Event::Disconnected) {
                    log.reconnects.fetch_add(1, Ordering::Relaxed);
                    log.reread();
                }
            }
        });
    let client = tokio::time::timeout(Duration::from_secs(5), options.connect(url)).await??;
    let jetstream = async_nats::jetstream::new(client);
    let stream = jetstream.get_stream(NATS_STREAM).await?;
    let mut next = 1u64;
    loop {
        if log.reread_asked.swap(false, Ordering::SeqCst) {
            next = 1;
        }
        let last = stream.get_info().await?.state.last_sequence;
        while next <= last {
            match stream.get_raw_message(next).await {
                Ok(message) => {
                    let id = message.headers.get("Nats-Msg-Id").map(|v| v.as_str().to_owned());
                    let pair = (message.sequence, id.as_deref().and_then(event_seq).unwrap_or(u64::MAX));
                    if lock(&log.read).insert(pair) {
                        log.note(id.as_deref());
                    }
                }
                // A sequence with no message (never written before a kill).
                Err(e) if e.kind() == async_nats::jetstream::stream::RawMessageErrorKind::NoMessageFound => {}
                Err(e) => return Err(e.into()),
            }
            next += 1;
        }
        if !log.reread_asked.load(Ordering::SeqCst) {
            log.reread_done.store(true, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// How long one Kafka read session lasts at most.
const KAFKA_SESSION: Duration = Duration::from_secs(5);

/// Reads the Kafka topic until the task is aborted.
pub async fn read_kafka(bootstrap: String, log: std::sync::Arc<BrokerLog>, journal: Journal) {
    // The next offset to read per partition; empty: from the start.
    let next = std::sync::Arc::new(Mutex::new(HashMap::<i32, i64>::new()));
    let mut last_problem = String::new();
    loop {
        let (bootstrap, session_log, session_next) = (bootstrap.clone(), log.clone(), next.clone());
        let session =
            tokio::task::spawn_blocking(move || read_kafka_session(&bootstrap, &session_log, &session_next)).await;
        let problem = match session {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("{e:#}")),
            Err(e) => Some(e.to_string()),
        };
        if let Some(problem) = problem {
            lock(&next).clear();
            log.reconnects.fetch_add(1, Ordering::Relaxed);
            if problem != last_problem {
                journal.note(&format!(
                    "Kafka reader: {problem}; reading the topic again from the start"
                ));
                last_problem = problem;
            }
            tokio::time::sleep(RECONNECT_AFTER).await;
        } else {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// One session: every partition from its next offset until each reported its end.
fn read_kafka_session(bootstrap: &str, log: &BrokerLog, next: &Mutex<HashMap<i32, i64>>) -> anyhow::Result<()> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::error::KafkaError;
    use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
    let asked = log.reread_asked.swap(false, Ordering::SeqCst);
    if asked {
        lock(next).clear();
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "eg-chaos-oracle")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()?;
    let metadata = consumer.fetch_metadata(Some(KAFKA_TOPIC), Duration::from_secs(5))?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == KAFKA_TOPIC)
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    anyhow::ensure!(!partitions.is_empty(), "the topic {KAFKA_TOPIC} has no partitions");
    let mut assignment = TopicPartitionList::new();
    for partition in &partitions {
        let from = lock(next).get(partition).copied().unwrap_or(0);
        assignment.add_partition_offset(KAFKA_TOPIC, *partition, Offset::Offset(from))?;
    }
    consumer.assign(&assignment)?;
    let mut at_end = HashSet::new();
    let deadline = std::time::Instant::now() + KAFKA_SESSION;
    while at_end.len() < partitions.len() && std::time::Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                at_end.remove(&message.partition());
                let id = message
                    .payload()
                    .and_then(|value| serde_json::from_slice::<serde_json::Value>(value).ok())
                    .and_then(|event| event["id"].as_str().map(str::to_owned));
                let place = (u64::from(message.partition().unsigned_abs()) << 40) | message.offset().unsigned_abs();
                let pair = (place, id.as_deref().and_then(event_seq).unwrap_or(u64::MAX));
                if lock(&log.read).insert(pair) {
                    log.note(id.as_deref());
                }
                lock(next).insert(message.partition(), message.offset() + 1);
            }
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                at_end.insert(partition);
            }
            Some(Err(e)) => return Err(e.into()),
            None => {}
        }
    }
    if at_end.len() == partitions.len() && !log.reread_asked.load(Ordering::SeqCst) {
        log.reread_done.store(true, Ordering::SeqCst);
    }
    Ok(())
}

/// Empties the SQS queue (moto) until the task is aborted.
pub async fn read_sqs(
    moto: std::sync::Arc<eg_testkit::S3Server>,
    queue_url: String,
    log: std::sync::Arc<BrokerLog>,
    journal: Journal,
) {
    let mut last_problem = String::new();
    loop {
        let (moto, url) = (moto.clone(), queue_url.clone());
        let taken = tokio::task::spawn_blocking(move || eg_testkit::sqs::take_messages(&moto, &url)).await;
        match taken {
            Ok(Ok(bodies)) if !bodies.is_empty() => {
                for body in bodies {
                    let id = serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|event| event["id"].as_str().map(str::to_owned));
                    log.note(id.as_deref());
                }
                continue;
            }
            Ok(Ok(_)) => {}
            Ok(Err(problem)) => {
                if problem != last_problem {
                    journal.note(&format!("SQS reader: {problem}; asking again"));
                    last_problem = problem;
                }
            }
            Err(e) => journal.note(&format!("SQS reader: {e}")),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
