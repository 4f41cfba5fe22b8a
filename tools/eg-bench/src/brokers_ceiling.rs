//! The publish ceiling of a message broker, for the destinations' benchmark rows
//! (`scenarios::destinations`): how many messages per second the same client library the
//! sender uses gets confirmed when it publishes directly, the way the sender does (one
//! persistent, mandatory message per event with a publisher confirm on RabbitMQ; one
//! JetStream publish per event with its message id, awaiting the stream's
//! acknowledgement, on NATS; one Shared Key-signed Put Message per event over HTTP on a
//! storage queue; one record per event with `acks=all` and an idempotent producer on
//! Kafka; `SendMessageBatch` requests of ten on SQS), with `in_flight` publishes
//! outstanding at a time as the sender has `in_flight` deliveries. eg's deliveries per second against the same broker in the
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

/// Runs one task per publisher, each taking numbered units (a message, or an SQS
/// request) from a shared count until `units` are taken and sending each with its
/// `publish`, and times them all: `messages` confirmed when every task ended well.
async fn run_publishers<P, Fut>(
    publishers: impl IntoIterator<Item = P>,
    units: usize,
    messages: usize,
) -> anyhow::Result<Ceiling>
where
    P: FnMut(usize) -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = publishers
        .into_iter()
        .map(|mut publish| {
            let next = Arc::clone(&next);
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= units {
                        return anyhow::Ok(());
                    }
                    publish(n).await?;
                }
            })
        })
        .collect();
    for task in futures_util::future::join_all(tasks).await {
        task??;
    }
    Ok(Ceiling {
        messages,
        elapsed: started.elapsed(),
    })
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
    let payload: Arc<[u8]> = payload.into();
    let (exchange, routing_key): (Arc<str>, Arc<str>) = (exchange.into(), routing_key.into());
    let publishers = channels.into_iter().map(|channel| {
        let (payload, exchange, routing_key) = (Arc::clone(&payload), Arc::clone(&exchange), Arc::clone(&routing_key));
        move |_| {
            let (channel, payload) = (channel.clone(), Arc::clone(&payload));
            let (exchange, routing_key) = (Arc::clone(&exchange), Arc::clone(&routing_key));
            async move {
                let options = BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                };
                let properties = BasicProperties::default()
                    .with_delivery_mode(2)
                    .with_content_type("application/json".into());
                let confirmation = channel
                    .basic_publish(
                        (&*exchange).into(),
                        (&*routing_key).into(),
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
                Ok(())
            }
        }
    });
    run_publishers(publishers, messages, messages).await
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
    let payload = bytes::Bytes::copy_from_slice(payload);
    // Ids unique to this call: a second call (after a warm-up) must not be deduplicated.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let run = format!("{}-{}", std::process::id(), CALLS.fetch_add(1, Ordering::Relaxed));
    let subject: Arc<str> = subject.into();
    let publishers = (0..in_flight.max(1)).map(|_| {
        let (payload, jetstream, subject, run) =
            (payload.clone(), jetstream.clone(), Arc::clone(&subject), run.clone());
        move |n| {
            let message = PublishMessage::build()
                .message_id(format!("ceiling-{run}-{n}"))
                .payload(payload.clone());
            let (jetstream, subject) = (jetstream.clone(), subject.to_string());
            async move {
                let ack = jetstream.send_publish(subject, message).await?.await?;
                anyhow::ensure!(!ack.duplicate, "JetStream took message {n} for a duplicate");
                Ok(())
            }
        }
    });
    run_publishers(publishers, messages, messages).await
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
    let publishers = (0..in_flight.max(1)).map(|_| {
        let (http, body, path, url) = (http.clone(), body.clone(), path.clone(), url.clone());
        move |_| {
            let mut request = http.post(&url).body(body.clone());
            for (name, value) in eg_testkit::shared_key::sign(ACCOUNT, ACCOUNT_KEY, "POST", &path, &[], body.len()) {
                request = request.header(name, value);
            }
            async move {
                let response = request.send().await?;
                let status = response.status();
                anyhow::ensure!(
                    status.as_u16() == 201,
                    "Put Message answered {status}: {}",
                    response.text().await.unwrap_or_default()
                );
                Ok(())
            }
        }
    });
    run_publishers(publishers, messages, messages).await
}

/// Produces `messages` records with `payload` as the value to `topic` (which must exist:
/// a missing topic fails the run), one record per event with the sender's producer
/// settings (`acks=all`, `enable.idempotence`, no topic auto-creation), `in_flight`
/// records awaiting their delivery reports at a time on one producer, as the sender's
/// deliveries share one producer per cluster.
pub async fn kafka_ceiling(
    bootstrap_servers: &str,
    topic: &str,
    payload: &[u8],
    messages: usize,
    in_flight: usize,
) -> anyhow::Result<Ceiling> {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap_servers)
        .set("client.id", "eg-bench-ceiling")
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("allow.auto.create.topics", "false")
        .set("partitioner", "murmur2_random")
        .set("message.timeout.ms", "10000")
        .set("topic.metadata.propagation.max.ms", "5000")
        .create()
        .context("create the Kafka producer")?;
    let payload: Arc<[u8]> = payload.into();
    let topic: Arc<str> = topic.into();
    let publishers = (0..in_flight.max(1)).map(|_| {
        let (payload, producer, topic) = (Arc::clone(&payload), producer.clone(), Arc::clone(&topic));
        move |_| {
            let (payload, producer, topic) = (Arc::clone(&payload), producer.clone(), Arc::clone(&topic));
            async move {
                let record: FutureRecord<'_, (), [u8]> = FutureRecord::to(&topic).payload(&payload);
                producer
                    .send(record, Duration::from_secs(0))
                    .await
                    .map_err(|(e, _)| anyhow::anyhow!("Kafka did not take a record: {e}"))?;
                Ok(())
            }
        }
    });
    run_publishers(publishers, messages, messages).await
}

/// Most entries of one `SendMessageBatch` request (SQS's limit, and the sender's).
const SQS_BATCH: usize = 10;

/// Sends `messages` messages with `body` to the queue at `queue_url` of the moto server
/// `moto`, in `SendMessageBatch` requests of ten over SQS's JSON protocol, each signed
/// with the server's credentials, with `in_flight` messages outstanding at a time (so
/// `in_flight / 10` requests at once, as the sender gathers its `in_flight` attempts into
/// requests of ten); every entry must be answered `Successful`.
pub async fn sqs_ceiling(
    moto: &eg_testkit::S3Server,
    queue_url: &str,
    body: &str,
    messages: usize,
    in_flight: usize,
) -> anyhow::Result<Ceiling> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()?;
    let credentials = Arc::new(moto.credentials());
    let host = format!("127.0.0.1:{}", moto.port());
    let requests = messages.div_ceil(SQS_BATCH);
    let publishers = (0..in_flight.div_ceil(SQS_BATCH).max(1)).map(|_| {
        let (http, credentials) = (http.clone(), Arc::clone(&credentials));
        let (host, queue_url, body) = (host.clone(), queue_url.to_owned(), body.to_owned());
        move |n: usize| {
            let entries = (n * SQS_BATCH..((n + 1) * SQS_BATCH).min(messages))
                .map(|i| serde_json::json!({"Id": (i % SQS_BATCH).to_string(), "MessageBody": body}))
                .collect::<Vec<_>>();
            let sent = entries.len();
            let request = serde_json::json!({"QueueUrl": queue_url, "Entries": entries}).to_string();
            let signer = eg_testkit::sigv4::Signer {
                credentials: &credentials,
                region: eg_testkit::s3_server::REGION,
                service: "sqs",
            };
            let mut call = http
                .post(format!("http://{host}/"))
                .header("Content-Type", "application/x-amz-json-1.0")
                .header("X-Amz-Target", "AmazonSQS.SendMessageBatch");
            for (name, value) in signer.sign("POST", &host, "/", request.as_bytes(), chrono::Utc::now()) {
                call = call.header(name, value);
            }
            async move {
                let response = call.body(request).send().await?;
                let status = response.status();
                let text = response.text().await?;
                let answer: serde_json::Value = serde_json::from_str(&text)
                    .with_context(|| format!("SendMessageBatch answered {status}: {text}"))?;
                anyhow::ensure!(status.is_success(), "SendMessageBatch answered {status}: {answer}");
                let successful = answer["Successful"].as_array().map_or(0, Vec::len);
                anyhow::ensure!(
                    successful == sent,
                    "SendMessageBatch took {successful} of {sent}: {answer}"
                );
                Ok(())
            }
        }
    });
    run_publishers(publishers, requests, messages).await
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

    #[tokio::test]
    async fn the_sqs_ceiling_sends_every_message_and_a_missing_queue_fails() {
        let moto = eg_testkit::S3Server::start();
        let queue_url = eg_testkit::sqs::create_queue(&moto, "ceiling");
        let ceiling = sqs_ceiling(&moto, &queue_url, r#"{"id":"x"}"#, 25, 20).await.unwrap();
        assert_eq!(ceiling.messages, 25);
        assert_eq!(eg_testkit::sqs::message_count(&moto, &queue_url), 25);
        let missing = queue_url.replace("ceiling", "no-such-queue");
        assert!(
            sqs_ceiling(&moto, &missing, "{}", 1, 1).await.is_err(),
            "a missing queue fails the run"
        );
    }

    #[tokio::test]
    async fn the_kafka_ceiling_produces_every_record_and_a_missing_topic_fails() {
        let tansu = eg_testkit::Tansu::start();
        tansu.create_topic("ceiling", 1);
        let ceiling = kafka_ceiling(&tansu.bootstrap_servers(), "ceiling", br#"{"id":"x"}"#, 200, 8)
            .await
            .unwrap();
        assert_eq!(ceiling.messages, 200);
        assert!(ceiling.per_second() > 0.0);
        assert_eq!(tansu.read("ceiling", 200, Duration::from_secs(30)).len(), 200);
        assert!(
            kafka_ceiling(&tansu.bootstrap_servers(), "no-such-topic", b"{}", 1, 1)
                .await
                .is_err(),
            "a missing topic fails the run"
        );
    }
}
