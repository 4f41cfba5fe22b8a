//! The RabbitMQ destination (AMQP 0-9-1, through `lapin`): each event of a batch is
//! published to the subscription's exchange as one persistent, `mandatory` message, on a
//! channel in confirm mode, and the attempt succeeds only when the broker acknowledged
//! every message and returned none as unroutable. An event counts as delivered when the
//! broker confirmed it, never when it was written to a socket.
//!
//! One connection per configured connection name and sender process, opened on first use
//! and shared by every delivery through it ([`Lazy`]). Each delivery borrows a channel of its own
//! from a pool on that connection: publishes of different deliveries never wait for one
//! another's confirms, and a channel error (a missing exchange closes the channel) hits
//! only the delivery that caused it. A dropped connection fails the attempts on it
//! (`SocketError`); the next attempt opens a new one, so a broker restart heals on the
//! retry schedule. No lock is held while publishing.
//!
//! Failures are reported as Event Grid names them, with the HTTP status the retry table
//! treats them as (see [`outcome_of`], [`Broker::unanswered`] and docs/delivery.md).

use super::Kind;
use super::broker_message::{EventMessage, event_field, message_content_type, messages};
use super::connections::{Connect, Connections, Lazy, UnknownConnection};
use super::told::{Told, refused};
use crate::destination::{RenderedBatch, Sent};
use eg_core::destination::{RabbitMq as Exchange, RoutingKey};
use eg_core::{AttemptOutcome, OutcomeName};
use eg_runtime::settings::{RabbitMqConnectionSettings, Settings};
use futures_util::future::join_all;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
use lapin::tcp::OwnedTLSConfig;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, DefaultConnectionBuilder, ErrorKind};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::time::timeout_at;

/// AMQP's persistent delivery mode: the broker writes the message to disk in a durable queue.
const PERSISTENT: u8 = 2;

/// AMQP short strings (exchange, routing key, message id, header names) hold at most
/// 255 bytes.
const SHORT_STRING_MAX: usize = 255;

/// Publishes batches to the RabbitMQ connections of eg's configuration.
pub struct RabbitMq {
    brokers: Connections<Broker>,
    /// Bounds one attempt: connecting, publishing and every confirm.
    timeout: Duration,
}

impl RabbitMq {
    /// Publishes through the connections of `[brokers.rabbitmq]` (none is opened before
    /// a delivery needs it); an attempt is bounded by `timeout`.
    pub fn new(connections: &BTreeMap<String, RabbitMqConnectionSettings>, timeout: Duration) -> Self {
        let brokers = Connections::new("RabbitMQ", Exchange::CONNECTIONS, connections, Broker::new);
        Self { brokers, timeout }
    }

    async fn attempt(&self, target: &Exchange, batch: &RenderedBatch<'_>) -> Told {
        let broker = match self.brokers.get(&target.connection) {
            Ok(broker) => broker,
            Err(UnknownConnection { outcome, error }) => return Told::with_error(outcome, error),
        };
        let messages = match messages(batch) {
            Ok(messages) => messages,
            Err(e) => {
                tracing::error!(error = %e, "cannot publish the batch");
                return refused(OutcomeName::BadRequest, 400).into();
            }
        };
        let publish = Publish {
            exchange: &target.exchange,
            routing_key: &target.routing_key,
            content_type: message_content_type(batch),
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        let channel = match timeout_at(deadline, broker.checkout(self.timeout)).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(outcome)) => return outcome.into(),
            Err(_) => return AttemptOutcome::TimedOut.into(),
        };
        match timeout_at(deadline, publish.all(&channel, &messages)).await {
            Ok(outcome) => {
                broker.checkin(channel);
                outcome.into()
            }
            Err(_) => {
                broker.retire(channel);
                broker.unanswered().into()
            }
        }
    }
}

impl Kind for RabbitMq {
    type Target = Exchange;

    fn from_settings(s: &Settings) -> anyhow::Result<Self> {
        Ok(Self::new(&s.brokers.rabbitmq, s.delivery.timeout))
    }

    async fn send(&self, target: &Exchange, batch: RenderedBatch<'_>, _late_window: Option<Duration>) -> Sent {
        // A confirm that comes after the timeout is not listened for: the events are
        // retried, and the broker may hold them twice (consumers dedupe on message_id).
        let started = Instant::now();
        self.attempt(target, &batch).await.sent(started)
    }
}

/// Where and how one batch's messages are published.
struct Publish<'a> {
    exchange: &'a str,
    routing_key: &'a RoutingKey,
    content_type: &'static str,
}

impl Publish<'_> {
    /// Publishes every message, pipelined on `channel`, then awaits every confirm: the
    /// first failure, in event order, is the attempt's outcome.
    async fn all(&self, channel: &Channel, messages: &[EventMessage]) -> AttemptOutcome {
        let mut confirms = Vec::with_capacity(messages.len());
        let mut unpublished = None;
        for message in messages {
            let Some(routing_key) = self.routing_key_of(message) else {
                tracing::warn!(event = %message.id, "the event's routing key is longer than AMQP's 255 bytes");
                return refused(OutcomeName::BadRequest, 400);
            };
            let options = BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            };
            let published = channel
                .basic_publish(
                    self.exchange.into(),
                    routing_key,
                    options,
                    message.payload.as_bytes(),
                    self.properties(message),
                )
                .await;
            match published {
                Ok(confirm) => confirms.push(confirm),
                Err(e) => {
                    unpublished = Some(outcome_of(&e));
                    break;
                }
            }
        }
        // The confirms of what was sent come first: when the broker closes the channel
        // (no such exchange), an earlier message's confirm carries the reason and the
        // later publishes only fail because the channel is closing.
        for confirmation in join_all(confirms).await {
            match confirmation {
                Ok(Confirmation::Ack(None)) => {}
                // Mandatory and routed nowhere (312 NO_ROUTE): no queue is bound for
                // the key yet. Retried like a missing queue, since binding one fixes it.
                Ok(Confirmation::Ack(Some(_))) => return refused(OutcomeName::NotFound, 404),
                // The broker would not take it: a queue at its length limit with
                // `x-overflow: reject-publish`, or a store that failed.
                Ok(Confirmation::Nack(_)) => return refused(OutcomeName::Full, 503),
                Ok(Confirmation::NotRequested) => {
                    tracing::error!("the channel is not in confirm mode");
                    return refused(OutcomeName::GenericError, 500);
                }
                Err(e) => return outcome_of(&e),
            }
        }
        unpublished.unwrap_or(AttemptOutcome::Stored)
    }

    /// The static key, or the event's field (empty when the event lacks it); `None`
    /// when it is too long for AMQP.
    fn routing_key_of(&self, message: &EventMessage) -> Option<ShortString> {
        let key = match self.routing_key {
            RoutingKey::Static(key) => key.clone(),
            RoutingKey::FromEvent(field) => event_field(&message.payload, field).unwrap_or_default(),
        };
        (key.len() <= SHORT_STRING_MAX).then(|| key.into())
    }

    fn properties(&self, message: &EventMessage) -> BasicProperties {
        let mut headers = FieldTable::default();
        for (name, value) in &message.headers {
            if name.len() <= SHORT_STRING_MAX {
                headers.insert(
                    name.clone().into(),
                    AMQPValue::LongString(LongString::from(value.as_str())),
                );
            }
        }
        let properties = BasicProperties::default()
            .with_delivery_mode(PERSISTENT)
            .with_content_type(self.content_type.into())
            .with_headers(headers);
        // An id too long for a short string still travels in the body.
        if message.id.len() <= SHORT_STRING_MAX {
            properties.with_message_id(message.id.clone().into())
        } else {
            properties
        }
    }
}

/// One named broker: its connection ([`Lazy`]: opened on first use and again after it
/// dropped), and its idle confirm-mode channels.
struct Broker {
    connection: Lazy<Amqp>,
    idle: Mutex<Vec<Channel>>,
}

/// How a RabbitMQ connection is opened.
struct Amqp {
    url: String,
    ca_file: String,
}

impl Broker {
    fn new(name: &str, settings: &RabbitMqConnectionSettings) -> Self {
        let amqp = Amqp {
            url: settings.url.expose().to_owned(),
            ca_file: settings.ca_file.clone(),
        };
        Self {
            connection: Lazy::new(name, amqp),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An open channel in confirm mode for one delivery: an idle one, or a new one.
    async fn checkout(&self, timeout: Duration) -> Result<Channel, AttemptOutcome> {
        loop {
            let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
            match idle {
                Some(channel) if channel.status().connected() => return Ok(channel),
                Some(_) => continue,
                None => break,
            }
        }
        let connection = self.connection.client(timeout).await?;
        let channel = connection.create_channel().await.map_err(|e| self.failed(&e))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| self.failed(&e))?;
        Ok(channel)
    }

    /// Gives a channel back after an attempt that was answered; one the broker closed
    /// is useless and dropped.
    fn checkin(&self, channel: Channel) {
        if channel.status().connected() {
            self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(channel);
        }
    }

    /// Closes the channel of an attempt that timed out: it may still owe confirms, which
    /// must not be taken for the next delivery's.
    fn retire(&self, channel: Channel) {
        if channel.status().connected() {
            tokio::spawn(async move {
                let _ = channel.close(200, "eg: attempt timed out".into()).await;
            });
        }
    }

    /// What no confirm within the attempt's timeout means. A broker under a memory or
    /// disk alarm blocks publishing connections (`connection.blocked`) and confirms
    /// nothing until it has room again: `Full`, retried like a queue at its limit (and
    /// by a namespace topic, whose table does not retry `TimedOut`). Otherwise the broker
    /// is slow or gone: `TimedOut`.
    fn unanswered(&self) -> AttemptOutcome {
        if self.connection.current().is_some_and(|c| c.status().blocked()) {
            tracing::warn!(connection = %self.connection.name(), "RabbitMQ blocks publishing (a memory or disk alarm)");
            refused(OutcomeName::Full, 503)
        } else {
            AttemptOutcome::TimedOut
        }
    }

    /// Logs why a channel could not be opened, and its outcome.
    fn failed(&self, e: &lapin::Error) -> AttemptOutcome {
        failed(self.connection.name(), e)
    }
}

/// A dropped connection is opened again by the next attempt, so a broker restart heals
/// on the retry schedule.
impl Connect for Amqp {
    type Client = Arc<Connection>;

    async fn connect(&self, name: &str, _timeout: Duration) -> Result<Arc<Connection>, AttemptOutcome> {
        let mut builder = DefaultConnectionBuilder::new()
            .map_err(|e| failed(name, &e))?
            .with_uri_str(self.url.clone());
        if !self.ca_file.is_empty() {
            let pem = tokio::fs::read_to_string(&self.ca_file).await.map_err(|e| {
                tracing::error!(connection = %name, ca_file = %self.ca_file, error = %e, "cannot read the RabbitMQ connection's CA file");
                AttemptOutcome::SocketError
            })?;
            builder = builder.with_tls_config(OwnedTLSConfig {
                identity: None,
                cert_chain: Some(pem),
            });
        }
        let connection = builder.connect().await.map_err(|e| failed(name, &e))?;
        tracing::info!(connection = %name, "connected to RabbitMQ");
        Ok(Arc::new(connection))
    }

    fn usable(connection: &Arc<Connection>) -> bool {
        connection.status().connected()
    }
}

/// Logs why the connection `name` or one of its channels could not be opened, and its
/// outcome.
fn failed(name: &str, e: &lapin::Error) -> AttemptOutcome {
    tracing::warn!(connection = %name, error = %e, "RabbitMQ connection failed");
    outcome_of(e)
}

/// A lapin error as an attempt's outcome:
///
/// | broker says | outcome | as HTTP |
/// |---|---|---|
/// | NOT_FOUND (no such exchange) | NotFound | 404 |
/// | ACCESS_REFUSED (wrong password, no permission), NOT_ALLOWED (vhost) | Unauthorized | 401 |
/// | PRECONDITION_FAILED, CONTENT_TOO_LARGE (message over `max_message_size`) | PayloadTooLarge | 413 |
/// | channel limit reached | Busy | 503 |
/// | connection refused, reset, closed, missed heartbeats | SocketError | |
/// | anything else | GenericError | 500 |
fn outcome_of(e: &lapin::Error) -> AttemptOutcome {
    match e.kind() {
        ErrorKind::ProtocolError(amqp) => match amqp.kind() {
            AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND) => refused(OutcomeName::NotFound, 404),
            AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED) | AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED) => {
                refused(OutcomeName::Unauthorized, 401)
            }
            AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED | AMQPSoftError::CONTENTTOOLARGE) => {
                refused(OutcomeName::PayloadTooLarge, 413)
            }
            AMQPErrorKind::Hard(AMQPHardError::CONNECTIONFORCED) => AttemptOutcome::SocketError,
            _ => refused(OutcomeName::GenericError, 500),
        },
        ErrorKind::ChannelsLimitReached => refused(OutcomeName::Busy, 503),
        ErrorKind::IOError(_)
        | ErrorKind::InvalidChannelState(..)
        | ErrorKind::InvalidConnectionState(_)
        | ErrorKind::MissingHeartbeatError => AttemptOutcome::SocketError,
        _ => refused(OutcomeName::GenericError, 500),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_subscriptions::{batch_of, subscription_with};
    use eg_core::subscription::Subscription;
    use eg_runtime::settings::Secret;
    use eg_testkit::RefusingPort;
    use eg_testkit::rabbitmq::RabbitMq as RabbitMqServer;
    use lapin::options::{BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
    use lapin::{ExchangeKind, message::BasicGetMessage};
    use serde_json::{Value, json};

    const TWO_EVENTS: &str = r#"[{"id":"e-1","subject":"orders.created","dataVersion":"1","data":{"region":"eu"}},{"id":"e-2","subject":"orders.created","dataVersion":"1","data":{"region":"us"}}]"#;

    fn destination(urls: &[(&str, String)], timeout: Duration) -> RabbitMq {
        let connections = urls
            .iter()
            .map(|(name, url)| {
                let settings = RabbitMqConnectionSettings {
                    url: Secret::new(url.clone()),
                    ca_file: String::new(),
                };
                ((*name).to_owned(), settings)
            })
            .collect();
        RabbitMq::new(&connections, timeout)
    }

    fn to_exchange(connection: &str, exchange: &str, routing: Value) -> Subscription {
        let mut properties = json!({"connection": connection, "exchange": exchange,
        "deliveryAttributeMappings": [
            {"name": "region", "type": "Dynamic", "properties": {"sourceField": "data.region"}},
            {"name": "x-team", "type": "Static", "properties": {"value": "billing", "isSecret": true}}
        ]});
        for (k, v) in routing.as_object().unwrap() {
            properties[k] = v.clone();
        }
        subscription_with(json!({"endpointType": "RabbitMQ", "properties": properties}))
    }

    /// A channel of a connection of the test's own, to set the broker up and read it.
    async fn admin(server: &RabbitMqServer) -> Channel {
        let connection = Connection::connect(&server.amqp_url(), lapin::ConnectionProperties::default())
            .await
            .unwrap();
        connection.create_channel().await.unwrap()
    }

    /// A durable topic exchange with a durable queue bound to it by `pattern`;
    /// `arguments` are the queue's.
    async fn bound_queue(channel: &Channel, exchange: &str, queue: &str, pattern: &str, arguments: FieldTable) {
        let durable = ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        };
        channel
            .exchange_declare(exchange.into(), ExchangeKind::Topic, durable, FieldTable::default())
            .await
            .unwrap();
        let durable = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        channel.queue_declare(queue.into(), durable, arguments).await.unwrap();
        channel
            .queue_bind(
                queue.into(),
                exchange.into(),
                pattern.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
    }

    async fn take(channel: &Channel, queue: &str) -> Option<BasicGetMessage> {
        let options = BasicGetOptions { no_ack: true };
        channel.basic_get(queue.into(), options).await.unwrap()
    }

    fn header(message: &BasicGetMessage, name: &str) -> Option<String> {
        let headers = message.delivery.properties.headers().as_ref()?;
        match headers.inner().get(name)? {
            AMQPValue::LongString(s) => Some(s.to_string()),
            other => Some(format!("{other:?}")),
        }
    }

    async fn send(rabbit: &RabbitMq, subscription: &Subscription, body: &str) -> AttemptOutcome {
        rabbit
            .send_own(batch_of(subscription, body, Some("1")), None)
            .await
            .outcome
    }

    #[tokio::test]
    async fn publishes_each_event_as_a_confirmed_persistent_message_and_names_each_refusal() {
        let server = RabbitMqServer::start();
        server.add_user("eg-sender", "right-password");
        let setup = admin(&server).await;
        bound_queue(&setup, "events", "orders", "orders.#", FieldTable::default()).await;
        let mut one_only = FieldTable::default();
        one_only.insert("x-max-length".into(), AMQPValue::LongInt(1));
        one_only.insert("x-overflow".into(), AMQPValue::LongString("reject-publish".into()));
        bound_queue(&setup, "small", "one-only", "#", one_only).await;
        let refusing = RefusingPort::new();
        let rabbit = destination(
            &[
                ("main", server.amqp_url()),
                ("wrong", server.amqp_url_for("eg-sender", "wrong-password")),
                ("down", format!("amqp://guest:guest@127.0.0.1:{}/%2f", refusing.port())),
            ],
            Duration::from_secs(10),
        );

        let by_subject = to_exchange("main", "events", json!({"routingKeyFrom": "subject"}));
        assert_eq!(send(&rabbit, &by_subject, TWO_EVENTS).await, AttemptOutcome::Stored);
        for (id, region) in [("e-1", "eu"), ("e-2", "us")] {
            let message = take(&setup, "orders").await.expect("one message per event");
            let properties = &message.delivery.properties;
            assert_eq!(properties.message_id().as_ref().map(|m| m.as_str()), Some(id));
            assert_eq!(*properties.delivery_mode(), Some(PERSISTENT));
            assert_eq!(
                properties.content_type().as_ref().map(|c| c.as_str()),
                Some("application/json; charset=utf-8"),
                "a webhook's content type"
            );
            assert_eq!(message.delivery.routing_key.as_str(), "orders.created");
            let event: Value = serde_json::from_slice(&message.delivery.data).unwrap();
            assert_eq!(event["id"], id, "the body is the event itself");
            assert_eq!(header(&message, "region").as_deref(), Some(region));
            assert_eq!(header(&message, "x-team").as_deref(), Some("billing"));
            assert_eq!(header(&message, "aeg-subscription-name").as_deref(), Some("BILLING"));
            assert_eq!(header(&message, "aeg-delivery-count").as_deref(), Some("3"));
            assert_eq!(header(&message, "aeg-event-type").as_deref(), Some("Notification"));
            assert_eq!(header(&message, "aeg-data-version").as_deref(), Some("1"));
        }
        assert!(take(&setup, "orders").await.is_none(), "two events, two messages");

        let refused = |outcome, as_status| AttemptOutcome::Refused { outcome, as_status };
        let unroutable = to_exchange("main", "events", json!({"routingKey": "invoices.paid"}));
        assert_eq!(
            send(&rabbit, &unroutable, TWO_EVENTS).await,
            refused(OutcomeName::NotFound, 404),
            "routed to no queue"
        );
        let no_exchange = to_exchange("main", "missing", json!({"routingKey": "orders.created"}));
        assert_eq!(
            send(&rabbit, &no_exchange, TWO_EVENTS).await,
            refused(OutcomeName::NotFound, 404),
            "no such exchange"
        );
        let static_key = to_exchange("main", "events", json!({"routingKey": "orders.paid"}));
        assert_eq!(
            send(&rabbit, &static_key, TWO_EVENTS).await,
            AttemptOutcome::Stored,
            "the channel the missing exchange closed is not reused"
        );
        let full = to_exchange("main", "small", json!({"routingKey": "any"}));
        assert_eq!(
            send(&rabbit, &full, TWO_EVENTS).await,
            refused(OutcomeName::Full, 503),
            "a queue at its limit nacks the second event"
        );
        let wrong_password = to_exchange("wrong", "events", json!({"routingKey": "orders.created"}));
        assert_eq!(
            send(&rabbit, &wrong_password, TWO_EVENTS).await,
            refused(OutcomeName::Unauthorized, 401)
        );
        let down = to_exchange("down", "events", json!({"routingKey": "orders.created"}));
        assert_eq!(send(&rabbit, &down, TWO_EVENTS).await, AttemptOutcome::SocketError);

        // Channels opened from now on refuse messages over 20 bytes.
        server.ctl(&["eval", "application:set_env(rabbit, max_message_size, 20)."]);
        let fresh = destination(&[("main", server.amqp_url())], Duration::from_secs(10));
        assert_eq!(
            send(&fresh, &by_subject, TWO_EVENTS).await,
            refused(OutcomeName::PayloadTooLarge, 413)
        );
    }

    #[tokio::test]
    async fn a_broker_that_stops_answering_times_the_attempt_out_and_its_channel_is_not_reused() {
        let server = RabbitMqServer::start();
        bound_queue(&admin(&server).await, "events", "orders", "#", FieldTable::default()).await;
        let rabbit = destination(&[("main", server.amqp_url())], Duration::from_secs(1));
        let subscription = to_exchange("main", "events", json!({"routingKey": "orders.created"}));
        assert_eq!(send(&rabbit, &subscription, TWO_EVENTS).await, AttemptOutcome::Stored);

        // The connection stays open, the publish is written, and no confirm comes.
        server.pause();
        let started = Instant::now();
        let outcome = send(&rabbit, &subscription, TWO_EVENTS).await;
        let took = started.elapsed();
        server.resume();
        assert_eq!(outcome, AttemptOutcome::TimedOut);
        assert!(
            took < Duration::from_secs(3),
            "bounded by the attempt timeout: {took:?}"
        );

        // The confirms the paused broker still owes arrive on a channel eg closed: the
        // next attempt is confirmed on a fresh one, not mistaken for the old batch's.
        assert_eq!(send(&rabbit, &subscription, TWO_EVENTS).await, AttemptOutcome::Stored);
    }

    #[tokio::test]
    async fn a_broker_blocking_publishers_under_a_resource_alarm_is_full() {
        let server = RabbitMqServer::start();
        bound_queue(&admin(&server).await, "events", "orders", "#", FieldTable::default()).await;
        let rabbit = destination(&[("main", server.amqp_url())], Duration::from_secs(2));
        let subscription = to_exchange("main", "events", json!({"routingKey": "orders.created"}));
        assert_eq!(send(&rabbit, &subscription, TWO_EVENTS).await, AttemptOutcome::Stored);

        // A memory alarm: the broker blocks every connection that publishes.
        server.ctl(&["set_vm_memory_high_watermark", "0"]);
        let outcome = send(&rabbit, &subscription, TWO_EVENTS).await;
        server.ctl(&["set_vm_memory_high_watermark", "0.4"]);
        assert_eq!(
            outcome,
            AttemptOutcome::Refused {
                outcome: OutcomeName::Full,
                as_status: 503
            }
        );
        let mut outcomes = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let outcome = send(&rabbit, &subscription, TWO_EVENTS).await;
            outcomes.push(outcome);
            if outcome == AttemptOutcome::Stored {
                break;
            }
        }
        assert_eq!(
            outcomes.last(),
            Some(&AttemptOutcome::Stored),
            "delivered once the alarm cleared: {outcomes:?}"
        );
    }

    #[tokio::test]
    async fn a_broker_restart_fails_an_attempt_and_the_next_one_reconnects() {
        let mut server = RabbitMqServer::start();
        bound_queue(&admin(&server).await, "events", "orders", "#", FieldTable::default()).await;
        let rabbit = destination(&[("main", server.amqp_url())], Duration::from_secs(5));
        let subscription = to_exchange("main", "events", json!({"routingKey": "orders.created"}));
        assert_eq!(send(&rabbit, &subscription, TWO_EVENTS).await, AttemptOutcome::Stored);

        server.kill();
        assert_eq!(
            send(&rabbit, &subscription, TWO_EVENTS).await,
            AttemptOutcome::SocketError,
            "the broker is down"
        );
        server.start_again();
        let mut outcomes = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let outcome = send(&rabbit, &subscription, TWO_EVENTS).await;
            outcomes.push(outcome);
            if outcome == AttemptOutcome::Stored {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(outcomes.last(), Some(&AttemptOutcome::Stored), "{outcomes:?}");
        assert!(
            outcomes
                .iter()
                .all(|o| matches!(o, AttemptOutcome::Stored | AttemptOutcome::SocketError)),
            "{outcomes:?}"
        );
        let setup = admin(&server).await;
        let mut kept = 0;
        while take(&setup, "orders").await.is_some() {
            kept += 1;
        }
        assert_eq!(
            kept, 4,
            "persistent messages survive the restart, and the new ones arrive"
        );
    }
}
