//! The publish ceiling of a message broker, for the destinations' benchmark rows
//! (`scenarios::destinations`): how many messages per second the same client library the
//! sender uses gets confirmed when it publishes directly, the way the sender does (one
//! persistent, mandatory message per event with a publisher confirm on RabbitMQ; one
//! JetStream publish per event with its message id, awaiting the stream's
//! acknowledgement, on NATS; one Shared Key-signed Put Message per event over HTTP on a
//! storage queue), with `in_flight` publishes outstanding at a time as the sender has
//! `in_flight` deliveries. eg's deliveries per second against the same broker in the
//! same run, divided by this, is the row's ratio.

use anyhow::Context;
use async_nats::jetstream::message::PublishMessage;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{BasicProperties, Confirmation, Connection, ConnectionProperties};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Messages confirmed and the time they took.
#[derive(Debug, Clone, Copy)]
pub struct Ceiling {
    pub messages: usize,
    pub elapsed: Duration,
}

impl Ceiling {
    pub fn per_second(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }
}

/// Publishes `messages` copies of `payload` to `exchange` with `routing_key` (which must
/// route to a queue: unroutable messages fail the run), `in_flight` at a time, each
/// publisher on a confirm-mode channel of its own on one connection, as the sender's
/// channel pool does.
pub async fn rabbitmq_ceiling(
    url: &str,
    exchange: &str,
    routing_key: &str,
    payload: &[u8],
    messages: usize,
    in_flight: usize,
) -> anyhow::Result<Ceiling> {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .context("connect to RabbitMQ")?;
    let mut channels = Vec::with_capacity(in_flight);
    for _ in 0..in_flight.max(1) {
        let channel = connection.create_channel().await?;
        channel.confirm_select(ConfirmSelectOptions::default()).await?;
        channels.push(channel);
    }
    let next = Arc::new(AtomicUsize::new(0));
    let payload: Arc<[u8]> = payload.into();
    let started = Instant::now();
    let publishers = channels.into_iter().map(|channel| {
        let (next, payload) = (Arc::clone(&next), Arc::clone(&payload));
        let (exchange, routing_key) = (exchange.to_owned(), routing_key.to_owned());
        tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < messages {
                let options = BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                };
                let properties = BasicProperties::default()
                    .with_delivery_mode(2)
                    .with_content_type("application/json".into());
                let confirmation = channel
                    .basic_publish(
                        exchange.as_str().into(),
                        routing_key.as_str().into(),
                        options,
                        &payload,
                        properties,
                    )
                    .await?
                    .await?;
                anyhow::ensure!(
                    matches!(confirmation, Confirmation::Ack(None)),
                    "RabbitMQ did not confirm a message: {confirmation:?}"
                );
            }
            anyhow::Ok(())
        })
    });
    for publisher in futures_util::future::join_all(publishers).await {
        publisher??;
    }
    Ok(Ceiling {
        messages,
        elapsed: started.elapsed(),
    })
}

/// Publishes `messages` copies of `payload` to `subject` (which a stream must take),
/// each with a message id of its own, `in_flight` at a time on one client, as the sender
/// does.
pub async fn nats_ceiling(
    url: &str,
    subject: &str,
    payload: &[u8],
    messages: usize,
    in_flight: usize,
) -> anyhow::Result<Ceiling> {
    let client = async_nats::connect(url).await.context("connect to NATS")?;
    let jetstream = async_nats::jetstream::new(client);
    let next = Arc::new(AtomicUsize::new(0));
    let payload = bytes::Bytes::copy_from_slice(payload);
    // Ids unique to this call: a second call (after a warm-up) must not be deduplicated.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let run = format!("{}-{}", std::process::id(), CALLS.fetch_add(1, Ordering::Relaxed));
    let started = Instant::now();
    let publishers = (0..in_flight.max(1)).map(|_| {
        let (next, payload, jetstream) = (Arc::clone(&next), payload.clone(), jetstream.clone());
        let (subject, run) = (subject.to_owned(), run.clone());
        tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= messages {
                    break;
                }
                let message = PublishMessage::build()
                    .message_id(format!("ceiling-{run}-{n}"))
                    .payload(payload.clone());
                let ack = jetstream.send_publish(subject.clone(), message).await?.await?;
                anyhow::ensure!(!ack.duplicate, "JetStream took message {n} for a duplicate");
            }
            anyhow::Ok(())
        })
    });
    for publisher in futures_util::future::join_all(publishers).await {
        publisher??;
    }
    Ok(Ceiling {
        messages,
        elapsed: started.elapsed(),
    })
}

/// Puts `messages` messages with `text` (already encoded as the queue stores it: eg puts
/// base64) into `queue` of the emulator's account, `in_flight` at a time over one HTTP
/// client, each signed with the account key; every one must be answered `201 Created`.
pub async fn storage_queue_ceiling(
    emulator: &eg_testkit::Azurite,
    queue: &str,
    text: &str,
    messages: usize,
    in_flight: usize,
) -> anyhow::Result<Ceiling> {
    use eg_testkit::azurite::{ACCOUNT, ACCOUNT_KEY};
    // reqwest is built without a TLS provider of its own (the workspace picks ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()?;
    let body: bytes::Bytes = format!("<QueueMessage><MessageText>{text}</MessageText></QueueMessage>").into();
    let path = format!("/{ACCOUNT}/{queue}/messages");
    let url = format!("{}/{queue}/messages", emulator.queue_endpoint());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let publishers = (0..in_flight.max(1)).map(|_| {
        let (next, http, body) = (Arc::clone(&next), http.clone(), body.clone());
        let (path, url) = (path.clone(), url.clone());
        tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < messages {
                let mut request = http.post(&url).body(body.clone());
                for (name, value) in eg_testkit::shared_key::sign(ACCOUNT, ACCOUNT_KEY, "POST", &path, &[], body.len())
                {
                    request = request.header(name, value);
                }
                let response = request.send().await?;
                let status = response.status();
                anyhow::ensure!(
                    status.as_u16() == 201,
                    "Put Message answered {status}: {}",
                    response.text().await.unwrap_or_default()
                );
            }
            anyhow::Ok(())
        })
    });
    for publisher in futures_util::future::join_all(publishers).await {
        publisher??;
    }
    Ok(Ceiling {
        messages,
        elapsed: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use async_nats::jetstream::stream;
    use lapin::options::{QueueDeclareOptions, QueuePurgeOptions};
    use lapin::types::FieldTable;

    #[tokio::test]
    async fn each_ceiling_publishes_every_message_and_the_broker_holds_them() {
        let rabbit = eg_testkit::RabbitMq::start();
        let connection = Connection::connect(&rabbit.amqp_url(), ConnectionProperties::default())
            .await
            .unwrap();
        let channel = connection.create_channel().await.unwrap();
        let durable = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare("ceiling".into(), durable, FieldTable::default())
            .await
            .unwrap();
        // The default exchange routes by queue name.
        let ceiling = rabbitmq_ceiling(&rabbit.amqp_url(), "", "ceiling", br#"{"id":"x"}"#, 200, 4)
            .await
            .unwrap();
        assert_eq!(ceiling.messages, 200);
        assert!(ceiling.per_second() > 0.0);
        let held = channel
            .queue_purge("ceiling".into(), QueuePurgeOptions::default())
            .await
            .unwrap();
        assert_eq!(held, 200);
        assert!(
            rabbitmq_ceiling(&rabbit.amqp_url(), "", "no-such-queue", b"{}", 1, 1)
                .await
                .is_err(),
            "an unroutable message fails the run"
        );

        let nats = eg_testkit::Nats::start();
        let client = async_nats::connect(nats.url()).await.unwrap();
        let stream = async_nats::jetstream::new(client)
            .create_stream(stream::Config {
                name: "CEILING".into(),
                subjects: vec!["ceiling".into()],
                ..stream::Config::default()
            })
            .await
            .unwrap();
        let ceiling = nats_ceiling(&nats.url(), "ceiling", br#"{"id":"x"}"#, 200, 4)
            .await
            .unwrap();
        assert_eq!(ceiling.messages, 200);
        assert_eq!(stream.get_info().await.unwrap().state.messages, 200);

        let azurite = eg_testkit::Azurite::start();
        azurite.create_queue("ceiling");
        let ceiling = storage_queue_ceiling(&azurite, "ceiling", "eyJpZCI6IngifQ==", 50, 4)
            .await
            .unwrap();
        assert_eq!(ceiling.messages, 50);
        assert_eq!(azurite.drain_queue("ceiling").len(), 50);
        assert!(
            storage_queue_ceiling(&azurite, "no-such-queue", "e30=", 1, 1)
                .await
                .is_err(),
            "a missing queue fails the run"
        );
    }
}
