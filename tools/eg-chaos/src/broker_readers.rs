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

use crate::journal::Journal;
use crate::outside::{NATS_STREAM, RABBITMQ_QUEUE};
use crate::receiver::lock;
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
    /// NATS: (stream sequence, event) pairs read, so a re-read notes nothing twice.
    read: Mutex<HashSet<(u64, u64)>>,
    /// NATS: set when a full read of the stream from sequence 1 ended after
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

    /// NATS: asks the reader to read the whole stream again from sequence 1.
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

async fn consume_rabbitmq(url: &str, log: &BrokerLog) -> anyhow::Result<()> {
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    channel.basic_qos(200, BasicQosOptions::default()).await?;
    let mut consumer = channel
        .basic_consume(
            RABBITMQ_QUEUE.into(),
            "eg-chaos-oracle".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
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
