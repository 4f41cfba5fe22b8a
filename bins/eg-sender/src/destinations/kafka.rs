//! The Kafka destination (through librdkafka, the `rdkafka` crate): each event is one
//! record, produced with `acks=all` by an idempotent producer, and the attempt succeeds
//! only when the brokers acknowledged it (every in-sync replica wrote it). An attempt
//! carries one event (eg-core refuses `maxEventsPerBatch` for Kafka), so each event is
//! retried and dead-lettered on its own; librdkafka still batches records on the wire
//! across concurrent attempts (its `linger.ms`).
//!
//! Records: the event as rendered is the value for the Event Grid and custom schemas;
//! a CloudEvent goes in the binary mode of the CloudEvents Kafka binding (`ce_` headers,
//! its data as the value), so consumers read `data` as published and route on headers
//! without parsing. Every record carries the `aeg-*` headers and the subscription's
//! delivery properties. The key comes from the target (`eg_core::destination::RecordKey`)
//! and the `murmur2_random` partitioner puts a key where Java clients put it.
//!
//! One producer per configured connection name and sender process, made on first use and
//! shared by every delivery through it ([`Lazy`]). librdkafka connects and reconnects by
//! itself; a producer that hit a fatal error (its idempotence state broken) is made anew.
//! `message.timeout.ms` is a little shorter than the attempt timeout, so each record's
//! report comes back within the attempt: its error, or "timed out" with the last error
//! the client saw (a refused connection, say) for the history.

use super::Kind;
use super::broker_message::{EventMessage, message_content_type, messages};
use super::connections::{Connect, Connections, Lazy, UnknownConnection};
use super::told::{Told, refused};
use crate::destination::{RenderedBatch, Sent};
use eg_core::destination::{Kafka as KafkaTarget, RecordKey, binary_cloud_event};
use eg_core::schema::DeliverySchema;
use eg_core::{AttemptOutcome, OutcomeName};
use eg_runtime::settings::{KafkaConnectionSettings, Settings};
use futures_util::future::join_all;
use rdkafka::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::time::timeout_at;

/// What is left of the attempt for the record's report to come back in, after
/// `message.timeout.ms`.
const REPORT_MARGIN: Duration = Duration::from_millis(500);

/// How long a new producer is kept through timeouts: its first records wait for its
/// producer id and the cluster's metadata, which a slow broker (tansu on S3: 600 ms)
/// gives after the attempt's timeout. Replacing it then would only start that again.
const NEW_PRODUCER_GRACE: Duration = Duration::from_secs(5);

/// Produces to the Kafka connections of eg's configuration.
pub struct KafkaProducers {
    clusters: Connections<Lazy<Cluster>>,
    /// Bounds one attempt: producing and the acknowledgement.
    timeout: Duration,
    /// Whether each record carries `aeg-output-event-id` (the event's id), as Event
    /// Grid's deliveries to Event Hubs do.
    output_event_id: bool,
}

impl KafkaProducers {
    /// Produces through the connections of `[brokers.kafka]` (no producer is made before
    /// a delivery needs it); an attempt is bounded by `timeout`.
    pub fn new(connections: &BTreeMap<String, KafkaConnectionSettings>, timeout: Duration) -> Self {
        let clusters = Connections::new("Kafka", KafkaTarget::CONNECTIONS, connections, |name, settings| {
            Lazy::new(name, Cluster::new(settings))
        })
        .configured_by("BOOTSTRAP_SERVERS");
        Self {
            clusters,
            timeout,
            output_event_id: false,
        }
    }

    /// Produces to Event Hubs namespaces through their Kafka endpoints: `namespaces` are
    /// their Kafka connections by the names `EventHub` targets give them, and records
    /// carry the headers Event Grid's deliveries to Event Hubs carry.
    pub fn for_event_hubs(namespaces: &BTreeMap<String, KafkaConnectionSettings>, timeout: Duration) -> Self {
        let clusters = Connections::new(
            "Event Hubs namespace",
            eg_core::destination::EventHub::CONNECTIONS,
            namespaces,
            |name, settings| Lazy::new(name, Cluster::new(settings)),
        )
        .configured_by("CONNECTION_STRING");
        Self {
            clusters,
            timeout,
            output_event_id: true,
        }
    }

    async fn attempt(&self, target: &KafkaTarget, batch: &RenderedBatch<'_>, started: Instant) -> Told {
        let cluster = match self.clusters.get(&target.connection) {
            Ok(cluster) => cluster,
            Err(UnknownConnection { outcome, error }) => return Told::with_error(outcome, error),
        };
        let records = match records(target, batch, self.output_event_id) {
            Ok(records) => records,
            Err(e) => {
                tracing::error!(error = %e, "cannot produce the batch");
                return refused(OutcomeName::BadRequest, 400).into();
            }
        };
        let timeout = cluster.connector().settings.timeout.unwrap_or(self.timeout);
        let deadline = tokio::time::Instant::now() + timeout;
        let producer = match cluster.client(timeout).await {
            Ok(producer) => producer,
            Err(outcome) => return outcome.into(),
        };
        let Some(client) = producer.inner.producer() else {
            return refused(OutcomeName::GenericError, 500).into();
        };
        let mut reports = Vec::with_capacity(records.len());
        for record in &records {
            let mut future_record = FutureRecord::to(&target.topic)
                .payload(&record.value)
                .headers(record.headers());
            if let Some(key) = &record.key {
                future_record = future_record.key(key);
            }
            match client.send_result(future_record) {
                Ok(report) => reports.push(report),
                Err((e, _)) => return producer.told(&target.topic, &e, started),
            }
        }
        let Ok(reports) = timeout_at(deadline, join_all(reports)).await else {
            return producer.timed_out(&target.topic, started);
        };
        for report in reports {
            match report {
                Ok(Ok(_delivery)) => {}
                Ok(Err((e, _))) => return producer.told(&target.topic, &e, started),
                // The producer was dropped with the record unreported.
                Err(_canceled) => return AttemptOutcome::SocketError.into(),
            }
        }
        AttemptOutcome::Stored.into()
    }
}

impl Kind for KafkaProducers {
    type Target = KafkaTarget;

    fn from_settings(s: &Settings) -> anyhow::Result<Self> {
        Ok(Self::new(&s.brokers.kafka, s.delivery.timeout))
    }

    async fn send(&self, target: &KafkaTarget, batch: RenderedBatch<'_>, _late_window: Option<Duration>) -> Sent {
        // A report after the timeout is not listened for: the retry produces the record
        // again (at least once; consumers dedupe on the event id, `ce_id` or the value's).
        let started = Instant::now();
        self.attempt(target, &batch, started).await.sent(started)
    }
}

/// One record, ready to produce.
struct Record {
    key: Option<String>,
    value: Vec<u8>,
    headers: Vec<(String, String)>,
}

impl Record {
    fn headers(&self) -> OwnedHeaders {
        self.headers.iter().fold(
            OwnedHeaders::new_with_capacity(self.headers.len()),
            |headers, (name, value)| {
                headers.insert(Header {
                    key: name,
                    value: Some(value),
                })
            },
        )
    }
}

/// Why a batch could not be made into records (only a body the renderer did not write
/// could cause it).
#[derive(Debug, thiserror::Error)]
enum NotRecords {
    #[error(transparent)]
    Messages(#[from] super::broker_message::NotEvents),
    #[error(transparent)]
    CloudEvent(#[from] eg_core::destination::NotBinary),
}

/// The batch's events as records: a CloudEvent in binary mode, any other event as its
/// JSON with a `content-type` header.
fn records(target: &KafkaTarget, batch: &RenderedBatch<'_>, output_event_id: bool) -> Result<Vec<Record>, NotRecords> {
    let binary = batch.subscription.delivery_schema == DeliverySchema::CloudEventSchemaV1_0;
    messages(batch)?
        .into_iter()
        .map(|EventMessage { payload, headers, id }| {
            let key = match &target.key {
                RecordKey::FromDeliveryProperty(name) => headers
                    .iter()
                    .find(|(header, _)| header.eq_ignore_ascii_case(name))
                    .map(|(_, value)| value.clone()),
                key => key.of_event(&payload),
            };
            let mut headers = headers;
            if output_event_id {
                headers.push(("aeg-output-event-id".to_owned(), id));
            }
            let value = if binary {
                let event = binary_cloud_event(&payload)?;
                headers.extend(event.headers);
                event.value
            } else {
                headers.push(("content-type".to_owned(), message_content_type(batch).to_owned()));
                payload.into_bytes()
            };
            Ok(Record { key, value, headers })
        })
        .collect()
}

/// A client error as an attempt's outcome, by librdkafka's error code:
///
/// | Kafka says | outcome | as HTTP |
/// |---|---|---|
/// | unknown topic or partition | NotFound | 404 |
/// | SASL authentication failed | Unauthorized | 401 |
/// | topic or cluster authorization failed | Forbidden | 403 |
/// | record over `message.max.bytes` (the client's or the broker's) | PayloadTooLarge | 413 |
/// | not the leader, leader not available, not enough replicas, throttled, queue full | Busy | 503 |
/// | no report in time | TimedOut | |
/// | connection failed or lost, TLS failed | SocketError | |
/// | the brokers' name does not resolve | ResolutionError | |
/// | the record is refused as invalid | BadRequest | 400 |
/// | anything else | GenericError | 500 |
///
/// The retry table does the rest: 400, 401, 403 and 413 are not retried.
fn outcome_of(code: RDKafkaErrorCode) -> AttemptOutcome {
    use RDKafkaErrorCode as C;
    match code {
        C::UnknownTopicOrPartition | C::UnknownTopic | C::UnknownPartition => refused(OutcomeName::NotFound, 404),
        C::SaslAuthenticationFailed | C::Authentication | C::UnsupportedSASLMechanism | C::IllegalSASLState => {
            refused(OutcomeName::Unauthorized, 401)
        }
        C::TopicAuthorizationFailed | C::ClusterAuthorizationFailed | C::TransactionalIdAuthorizationFailed => {
            refused(OutcomeName::Forbidden, 403)
        }
        C::MessageSizeTooLarge | C::MessageBatchTooLarge | C::InvalidMessageSize => {
            refused(OutcomeName::PayloadTooLarge, 413)
        }
        C::NotLeaderForPartition
        | C::LeaderNotAvailable
        | C::BrokerNotAvailable
        | C::ReplicaNotAvailable
        | C::NotEnoughReplicas
        | C::NotEnoughReplicasAfterAppend
        | C::KafkaStorageError
        | C::ThrottlingQuotaExceeded
        | C::QueueFull
        | C::ISRInsufficient => refused(OutcomeName::Busy, 503),
        C::MessageTimedOut | C::RequestTimedOut | C::OperationTimedOut | C::TimedOutQueue => AttemptOutcome::TimedOut,
        C::AllBrokersDown | C::BrokerTransportFailure | C::NetworkException | C::SSL => AttemptOutcome::SocketError,
        C::Resolve => AttemptOutcome::ResolutionError,
        C::InvalidMessage | C::InvalidRecord | C::InvalidTopic | C::PolicyViolation => {
            refused(OutcomeName::BadRequest, 400)
        }
        _ => refused(OutcomeName::GenericError, 500),
    }
}

/// A named connection's producer and what its client last complained about.
#[derive(Clone)]
struct Producer {
    inner: Arc<Retiring>,
    watch: Watch,
    /// Set when the brokers no longer take its producer id (see [`breaks_producer`]):
    /// the next attempt makes a new producer.
    broken: Arc<AtomicBool>,
    /// When it was made ([`NEW_PRODUCER_GRACE`]).
    made: Instant,
}

/// Errors that leave an idempotent producer's id or epoch refused by the brokers for
/// good: a broker that lost its producer state (tansu with memory storage after a
/// restart says `UnknownProducerId`), or fenced the producer after librdkafka bumped its
/// epoch following a timed-out record (`ProducerFenced`, tansu 0.6.0). A new producer
/// gets a new id; the records it sends again may be duplicates, as any retry may.
fn breaks_producer(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::ProducerFenced
            | C::InvalidProducerEpoch
            | C::UnknownProducerId
            | C::OutOfOrderSequenceNumber
            | C::InvalidProducerIdMapping
            | C::Fatal
    )
}

impl Producer {
    /// `e`, returned for a record, as the attempt's outcome, with the client's own text
    /// for the history.
    fn told(&self, topic: &str, e: &KafkaError, started: Instant) -> Told {
        let Some(code) = e.rdkafka_error_code() else {
            tracing::warn!(topic, error = %e, "Kafka refused a record");
            return Told::with_error(refused(OutcomeName::GenericError, 500), e.to_string());
        };
        if code == RDKafkaErrorCode::MessageTimedOut {
            return self.timed_out(topic, started);
        }
        if breaks_producer(code) {
            self.broken.store(true, Ordering::Relaxed);
        }
        let outcome = outcome_of(code);
        let error = match code {
            RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic => {
                format!("{code}: topic {topic:?} does not exist; eg creates none (docs/destinations.md, \"Kafka\")")
            }
            _ => code.to_string(),
        };
        tracing::warn!(topic, error, "Kafka refused a record");
        Told::with_error(outcome, error)
    }

    /// No report within the attempt that began at `started`: `SocketError` when the
    /// client's last word since then was that it cannot reach the brokers,
    /// `Unauthorized` when it was that they refused its sign-in, else `TimedOut`; with
    /// that word for the history.
    fn timed_out(&self, topic: &str, started: Instant) -> Told {
        let last = self.watch.last_since(started);
        let outcome = match last.as_ref().map(|e| outcome_of(e.code)) {
            Some(AttemptOutcome::SocketError) => AttemptOutcome::SocketError,
            Some(AttemptOutcome::ResolutionError) => AttemptOutcome::ResolutionError,
            // The brokers turned the client's sign-in away: not retried, as a webhook's 401.
            Some(
                refused @ AttemptOutcome::Refused {
                    outcome: OutcomeName::Unauthorized,
                    ..
                },
            ) => refused,
            _ => {
                // The brokers were reachable and still took nothing: the producer is stuck
                // (a broker that lost its producer state answers `UnknownProducerId`,
                // which librdkafka retries until the record times out). A new one gets
                // a new producer id, unless this one is new itself and still getting its own.
                if self.made.elapsed() >= NEW_PRODUCER_GRACE {
                    self.broken.store(true, Ordering::Relaxed);
                }
                AttemptOutcome::TimedOut
            }
        };
        let error = match last {
            Some(e) => format!("no acknowledgement in time; the client last said: {}", e.text),
            None => "no acknowledgement in time".to_owned(),
        };
        tracing::warn!(topic, error, "a Kafka record was not acknowledged");
        Told::with_error(outcome, error)
    }
}

/// A producer that is dropped off the async runtime: librdkafka's destroy purges and
/// flushes for up to half a second, and the last clone may go in a task (or under the
/// lock that swaps a broken producer for a new one).
struct Retiring(Option<FutureProducer<Watch>>);

impl Retiring {
    /// The producer (`None` only inside `drop`).
    fn producer(&self) -> Option<&FutureProducer<Watch>> {
        self.0.as_ref()
    }
}

impl Drop for Retiring {
    fn drop(&mut self) {
        let Some(producer) = self.0.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || drop(producer));
            }
            Err(_) => drop(producer),
        }
    }
}

/// The client's context: librdkafka's log lines go to `tracing` (debug: it logs every
/// reconnect), and its last error is kept for the attempts that time out.
#[derive(Clone, Default)]
struct Watch {
    name: Arc<str>,
    last: Arc<Mutex<Option<ClientError>>>,
}

/// An error the client reported, and when.
#[derive(Clone)]
struct ClientError {
    code: RDKafkaErrorCode,
    text: String,
    at: Instant,
}

impl Watch {
    /// The client's last error, if it came after `since` (an older one may be healed).
    fn last_since(&self, since: Instant) -> Option<ClientError> {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        last.as_ref().filter(|e| e.at >= since).cloned()
    }
}

impl ClientContext for Watch {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        tracing::debug!(connection = %self.name, ?level, facility, message, "librdkafka");
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let code = error.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail);
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        // "All brokers are down" follows each broker's own failure (a refused connection,
        // a certificate that did not verify): keep that one's words, now.
        if code == RDKafkaErrorCode::AllBrokersDown
            && let Some(previous) = last.as_mut()
        {
            previous.at = Instant::now();
            return;
        }
        // Said once per change: a broker that is down is reported at each reconnect.
        if last.as_ref().is_none_or(|e| e.text != reason) {
            tracing::warn!(connection = %self.name, error = reason, "Kafka client error");
        }
        *last = Some(ClientError {
            code,
            text: reason.to_owned(),
            at: Instant::now(),
        });
    }
}

/// How one named Kafka cluster is produced to.
struct Cluster {
    settings: KafkaConnectionSettings,
}

impl Cluster {
    fn new(settings: &KafkaConnectionSettings) -> Self {
        Self {
            settings: settings.clone(),
        }
    }

    /// The producer's configuration (it holds the password: never logged).
    fn config(&self, timeout: Duration) -> ClientConfig {
        let s = &self.settings;
        let message_timeout = timeout.saturating_sub(REPORT_MARGIN).max(Duration::from_millis(100));
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &s.bootstrap_servers)
            .set("client.id", "eg-sender")
            // Durable before the event is settled, and no duplicates from the client's
            // own retries within an attempt.
            .set("enable.idempotence", "true")
            .set("acks", "all")
            // A missing topic is the operator's to create, reported as NotFound.
            .set("allow.auto.create.topics", "false")
            // The Java clients' key-to-partition mapping, so mixed producers agree.
            .set("partitioner", "murmur2_random")
            .set("message.timeout.ms", message_timeout.as_millis().to_string())
            // An unknown topic fails fast enough to be reported within the attempt.
            .set(
                "topic.metadata.propagation.max.ms",
                (message_timeout / 2).as_millis().to_string(),
            );
        let protocol = match (s.sasl_mechanism.is_empty(), s.tls) {
            (true, false) => "plaintext",
            (true, true) => "ssl",
            (false, false) => "sasl_plaintext",
            (false, true) => "sasl_ssl",
        };
        config.set("security.protocol", protocol);
        if !s.sasl_mechanism.is_empty() {
            config
                .set("sasl.mechanism", &s.sasl_mechanism)
                .set("sasl.username", &s.username)
                .set("sasl.password", s.password.expose());
        }
        if !s.ca_file.is_empty() {
            config.set("ssl.ca.location", &s.ca_file);
        }
        if let Some(max) = s.message_max_bytes {
            config.set("message.max.bytes", max.to_string());
        }
        config
    }
}

impl Connect for Cluster {
    type Client = Producer;

    /// Makes the producer; it connects in the background, so this fails only on a
    /// configuration librdkafka refuses (a CA file it cannot read, say).
    async fn connect(&self, name: &str, timeout: Duration) -> Result<Producer, AttemptOutcome> {
        let watch = Watch {
            name: name.into(),
            ..Watch::default()
        };
        let producer = self
            .config(timeout)
            .create_with_context::<_, FutureProducer<Watch>>(watch.clone())
            .map_err(|e| {
                tracing::error!(connection = %name, error = %e, "cannot make a Kafka producer for the connection");
                refused(OutcomeName::GenericError, 500)
            })?;
        tracing::info!(connection = %name, "Kafka producer made");
        Ok(Producer {
            inner: Arc::new(Retiring(Some(producer))),
            watch,
            broken: Arc::default(),
            made: Instant::now(),
        })
    }

    /// A producer with a fatal error or a refused producer id produces nothing more: a
    /// new one is made.
    fn usable(producer: &Producer) -> bool {
        !producer.broken.load(Ordering::Relaxed)
            && producer
                .inner
                .producer()
                .is_some_and(|p| p.client().fatal_error().is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_subscriptions::{batch_of, subscription_with};
    use eg_core::subscription::Subscription;
    use eg_core::{SubscriptionName, Topic, TopicName, UnixMillis};
    use eg_testkit::tansu::{Record as ReadRecord, Tansu};
    use serde_json::{Value, json};

    const READ_WITHIN: Duration = Duration::from_secs(20);

    fn producers(tansu: &Tansu, timeout: Duration) -> KafkaProducers {
        let settings = KafkaConnectionSettings {
            bootstrap_servers: tansu.bootstrap_servers(),
            ..KafkaConnectionSettings::default()
        };
        KafkaProducers::new(&BTreeMap::from([("stream".to_owned(), settings)]), timeout)
    }

    fn destination(topic: &str, key: Value) -> Value {
        let mut props = json!({"connection": "stream", "topic": topic,
        "deliveryAttributeMappings": [
            {"name": "region", "type": "Dynamic", "properties": {"sourceField": "data.region"}}
        ]});
        if let Value::Object(key) = key {
            props.as_object_mut().unwrap().extend(key);
        }
        json!({"endpointType": "Kafka", "properties": props})
    }

    fn to_topic(topic: &str, key: Value) -> Subscription {
        subscription_with(destination(topic, key))
    }

    /// The same, delivering CloudEvents.
    fn cloud_events_to(topic_name: &str) -> Subscription {
        let topic = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        let resource = json!({"properties": {
            "destination": destination(topic_name, json!({"keyFrom": "subject"})),
            "eventDeliverySchema": "CloudEventSchemaV1_0"}});
        Subscription::from_resource(
            &topic,
            SubscriptionName::parse("billing").unwrap(),
            &resource,
            UnixMillis(0),
        )
        .unwrap()
    }

    async fn send(kafka: &KafkaProducers, subscription: &Subscription, body: &str) -> Sent {
        kafka.send_own(batch_of(subscription, body, Some("1")), None).await
    }

    fn event(id: &str, subject: &str, region: &str) -> String {
        json!([{"id": id, "subject": subject, "eventType": "order.created", "dataVersion": "1",
            "data": {"region": region}}])
        .to_string()
    }

    fn read(tansu: &Tansu, topic: &str, count: usize) -> Vec<ReadRecord> {
        tansu.read(topic, count, READ_WITHIN)
    }

    #[tokio::test]
    async fn each_event_is_one_acknowledged_record_with_its_key_and_headers() {
        let tansu = Tansu::start();
        tansu.create_topic("orders", 3);
        let kafka = producers(&tansu, Duration::from_secs(10));
        let by_subject = to_topic("orders", json!({"keyFrom": "subject"}));
        for (n, subject) in ["/a", "/b", "/a", "/a", "/b"].into_iter().enumerate() {
            let sent = send(&kafka, &by_subject, &event(&format!("e-{n}"), subject, "eu")).await;
            assert_eq!(sent.outcome, AttemptOutcome::Stored, "{:?}", sent.error);
        }
        let records = read(&tansu, "orders", 5);
        assert_eq!(records.len(), 5, "{records:?}");
        let record = records.iter().find(|r| r.value_text().contains("\"e-0\"")).unwrap();
        assert_eq!(record.key_text().as_deref(), Some("/a"));
        let event: Value = serde_json::from_slice(&record.value).unwrap();
        assert_eq!(event["id"], "e-0", "the event as rendered");
        assert_eq!(record.header("region").as_deref(), Some("eu"));
        assert_eq!(record.header("aeg-subscription-name").as_deref(), Some("BILLING"));
        assert_eq!(record.header("aeg-delivery-count").as_deref(), Some("3"));
        assert_eq!(record.header("aeg-data-version").as_deref(), Some("1"));
        assert_eq!(
            record.header("content-type").as_deref(),
            Some("application/json; charset=utf-8")
        );
        // One key, one partition, in the order sent.
        for key in ["/a", "/b"] {
            let of_key: Vec<&ReadRecord> = records
                .iter()
                .filter(|r| r.key_text().as_deref() == Some(key))
                .collect();
            assert!(of_key.iter().all(|r| r.partition == of_key[0].partition), "{of_key:?}");
            let ids: Vec<String> = of_key
                .iter()
                .map(|r| {
                    serde_json::from_slice::<Value>(&r.value).unwrap()["id"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
                .collect();
            let expected: &[&str] = if key == "/a" {
                &["e-0", "e-2", "e-3"]
            } else {
                &["e-1", "e-4"]
            };
            assert_eq!(ids, expected);
        }
    }

    #[tokio::test]
    async fn a_cloud_event_goes_in_binary_mode() {
        let tansu = Tansu::start();
        tansu.create_topic("ce", 1);
        let kafka = producers(&tansu, Duration::from_secs(10));
        let body = json!({"specversion": "1.0", "id": "ce-1", "source": "/shop", "type": "order.created",
            "subject": "/orders/7", "data": {"region": "us", "n": 1}})
        .to_string();
        let sent = kafka
            .send_own(batch_of(&cloud_events_to("ce"), &body, None), None)
            .await;
        assert_eq!(sent.outcome, AttemptOutcome::Stored, "{:?}", sent.error);
        let records = read(&tansu, "ce", 1);
        let record = &records[0];
        assert_eq!(record.key_text().as_deref(), Some("/orders/7"));
        assert_eq!(
            serde_json::from_slice::<Value>(&record.value).unwrap(),
            json!({"region": "us", "n": 1}),
            "the data alone is the value"
        );
        assert_eq!(record.header("ce_id").as_deref(), Some("ce-1"));
        assert_eq!(record.header("ce_type").as_deref(), Some("order.created"));
        assert_eq!(record.header("ce_specversion").as_deref(), Some("1.0"));
        assert_eq!(record.header("content-type").as_deref(), Some("application/json"));
        assert_eq!(record.header("region").as_deref(), Some("us"));
        assert_eq!(record.header("aeg-data-version"), None);
    }

    #[tokio::test]
    async fn a_missing_topic_is_not_found_and_a_record_too_large_is_not_sent() {
        let tansu = Tansu::start();
        tansu.create_topic("orders", 1);
        let kafka = producers(&tansu, Duration::from_secs(10));

        let missing = send(&kafka, &to_topic("nowhere", json!({})), &event("e-1", "/a", "eu")).await;
        assert_eq!(
            missing.outcome,
            refused(OutcomeName::NotFound, 404),
            "{:?}",
            missing.error
        );
        let error = missing.error.unwrap_or_default();
        assert!(error.contains(r#"topic "nowhere" does not exist"#), "{error}");

        let huge = event("big", "/a", &"x".repeat(1_100_000));
        let too_large = send(&kafka, &to_topic("orders", json!({})), &huge).await;
        assert_eq!(too_large.outcome, refused(OutcomeName::PayloadTooLarge, 413));
        assert!(too_large.error.is_some_and(|e| e.contains("too large")));
        let fine = send(&kafka, &to_topic("orders", json!({})), &event("e-2", "/a", "eu")).await;
        assert_eq!(fine.outcome, AttemptOutcome::Stored);
        let records = read(&tansu, "orders", 2);
        assert_eq!(records.len(), 1, "only the event that fits: {records:?}");
    }

    #[tokio::test]
    async fn a_broker_that_stops_answering_times_out_and_the_retry_is_stored() {
        let tansu = Tansu::start();
        tansu.create_topic("orders", 1);
        let kafka = producers(&tansu, Duration::from_secs(3));
        let subscription = to_topic("orders", json!({"key": "all"}));
        assert_eq!(
            send(&kafka, &subscription, &event("e-1", "/a", "eu")).await.outcome,
            AttemptOutcome::Stored
        );

        tansu.pause();
        let unanswered = send(&kafka, &subscription, &event("e-2", "/a", "eu")).await;
        tansu.resume();
        assert_eq!(unanswered.outcome, AttemptOutcome::TimedOut, "{:?}", unanswered.error);
        assert!(
            unanswered
                .error
                .is_some_and(|e| e.starts_with("no acknowledgement in time"))
        );

        let mut outcomes = Vec::new();
        for _ in 0..10 {
            // The first retry may find the producer fenced (see `breaks_producer`).
            let outcome = send(&kafka, &subscription, &event("e-2", "/a", "eu")).await.outcome;
            outcomes.push(outcome);
            if outcome == AttemptOutcome::Stored {
                break;
            }
        }
        assert_eq!(outcomes.last(), Some(&AttemptOutcome::Stored), "{outcomes:?}");
        let ids: Vec<String> = read(&tansu, "orders", 3)
            .iter()
            .map(|r| {
                serde_json::from_slice::<Value>(&r.value).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert!(ids.starts_with(&["e-1".to_owned(), "e-2".to_owned()]), "{ids:?}");
    }

    #[tokio::test]
    async fn a_broker_down_is_a_socket_error_saying_what_the_client_saw() {
        let mut tansu = Tansu::start();
        tansu.create_topic("orders", 1);
        let kafka = producers(&tansu, Duration::from_secs(2));
        let subscription = to_topic("orders", json!({}));
        assert_eq!(
            send(&kafka, &subscription, &event("e-1", "/a", "eu")).await.outcome,
            AttemptOutcome::Stored
        );
        tansu.kill();
        let down = send(&kafka, &subscription, &event("e-2", "/a", "eu")).await;
        assert_eq!(down.outcome, AttemptOutcome::SocketError, "{:?}", down.error);
        let error = down.error.unwrap_or_default();
        assert!(
            error.starts_with("no acknowledgement in time; the client last said: ")
                && error.contains("Connection refused"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_broker_restarted_without_its_producer_state_gets_a_new_producer() {
        let mut tansu = Tansu::start();
        tansu.create_topic("orders", 1);
        let kafka = producers(&tansu, Duration::from_secs(3));
        let subscription = to_topic("orders", json!({}));
        assert_eq!(
            send(&kafka, &subscription, &event("e-1", "/a", "eu")).await.outcome,
            AttemptOutcome::Stored
        );
        // Memory storage: the restarted broker knows neither the topic nor the producer id.
        tansu.restart();
        tansu.create_topic("orders", 1);
        let mut outcomes = Vec::new();
        for _ in 0..5 {
            let outcome = send(&kafka, &subscription, &event("e-2", "/a", "eu")).await.outcome;
            outcomes.push(outcome);
            if outcome == AttemptOutcome::Stored {
                break;
            }
        }
        assert_eq!(outcomes.last(), Some(&AttemptOutcome::Stored), "{outcomes:?}");
        let records = read(&tansu, "orders", 1);
        assert!(records[0].value_text().contains("\"e-2\""));
    }

    #[tokio::test]
    async fn tls_with_a_private_ca_is_verified() {
        let certificates = tempfile::tempdir().unwrap();
        let ca = eg_testkit::tls::TestCa::generate(certificates.path(), "kafka");
        let stranger = eg_testkit::tls::TestCa::generate(&certificates.path().join("other"), "other");
        let tansu = Tansu::start_tls(&ca);
        tansu.create_topic("orders", 1);
        let over_tls = |ca_file: &std::path::Path| {
            let settings = KafkaConnectionSettings {
                bootstrap_servers: tansu.bootstrap_servers(),
                tls: true,
                ca_file: ca_file.display().to_string(),
                ..KafkaConnectionSettings::default()
            };
            KafkaProducers::new(
                &BTreeMap::from([("stream".to_owned(), settings)]),
                Duration::from_secs(3),
            )
        };
        let subscription = to_topic("orders", json!({}));

        let trusted = send(&over_tls(&ca.ca), &subscription, &event("e-1", "/a", "eu")).await;
        assert_eq!(trusted.outcome, AttemptOutcome::Stored, "{:?}", trusted.error);
        let records = read(&tansu, "orders", 1);
        assert!(records[0].value_text().contains("\"e-1\""));

        let untrusted = send(&over_tls(&stranger.ca), &subscription, &event("e-2", "/a", "eu")).await;
        assert_eq!(untrusted.outcome, AttemptOutcome::SocketError, "{:?}", untrusted.error);
        let error = untrusted.error.unwrap_or_default();
        assert!(error.contains("certificate verify failed"), "{error}");
        let plain = producers(&tansu, Duration::from_secs(3));
        let refused = send(&plain, &subscription, &event("e-3", "/a", "eu")).await;
        assert_ne!(refused.outcome, AttemptOutcome::Stored, "plain TCP to the TLS port");
    }

    #[test]
    fn kafka_errors_are_event_grid_outcomes() {
        use RDKafkaErrorCode as C;
        for (code, outcome) in [
            (C::UnknownTopicOrPartition, refused(OutcomeName::NotFound, 404)),
            (C::SaslAuthenticationFailed, refused(OutcomeName::Unauthorized, 401)),
            (C::Authentication, refused(OutcomeName::Unauthorized, 401)),
            (C::TopicAuthorizationFailed, refused(OutcomeName::Forbidden, 403)),
            (C::MessageSizeTooLarge, refused(OutcomeName::PayloadTooLarge, 413)),
            (C::NotLeaderForPartition, refused(OutcomeName::Busy, 503)),
            (C::LeaderNotAvailable, refused(OutcomeName::Busy, 503)),
            (C::NotEnoughReplicas, refused(OutcomeName::Busy, 503)),
            (C::MessageTimedOut, AttemptOutcome::TimedOut),
            (C::AllBrokersDown, AttemptOutcome::SocketError),
            (C::BrokerTransportFailure, AttemptOutcome::SocketError),
            (C::Resolve, AttemptOutcome::ResolutionError),
            (C::OutOfOrderSequenceNumber, refused(OutcomeName::GenericError, 500)),
        ] {
            assert_eq!(outcome_of(code), outcome, "{code:?}");
        }
    }

    #[test]
    fn the_producer_is_durable_idempotent_and_creates_no_topic() {
        let settings = KafkaConnectionSettings {
            bootstrap_servers: "k1:9092".into(),
            sasl_mechanism: "SCRAM-SHA-256".into(),
            username: "eg".into(),
            password: eg_runtime::settings::Secret::new("pw"),
            tls: true,
            ca_file: "/ca.pem".into(),
            message_max_bytes: Some(2_000_000),
            timeout: None,
        };
        let config = Cluster::new(&settings).config(Duration::from_secs(30));
        let get = |key: &str| config.get(key).map(str::to_owned);
        for (key, value) in [
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("allow.auto.create.topics", "false"),
            ("partitioner", "murmur2_random"),
            ("message.timeout.ms", "29500"),
            ("security.protocol", "sasl_ssl"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("ssl.ca.location", "/ca.pem"),
            ("message.max.bytes", "2000000"),
        ] {
            assert_eq!(get(key).as_deref(), Some(value), "{key}");
        }
    }
}
