//! The Amazon SQS destination (eg's `AmazonSQS`): each event becomes one message in the
//! subscription's queue, sent through a connection of eg's configuration
//! (`[brokers.sqs]`).
//!
//! An SQS attempt carries one event, so each event has its own outcome; the batching
//! SQS offers (10 messages a request) happens below the attempt, in one [`Batcher`] per
//! queue that gathers the attempts in flight into one `SendMessageBatch` and answers
//! each from its own entry. An event counts as delivered when SQS listed its entry as
//! `Successful`.
//!
//! A message is the event as rendered in the delivery schema, with the `aeg-*` values
//! that vary and the delivery properties as `String` message attributes, and, for a
//! FIFO queue, the group and deduplication ids eg-core decides
//! ([`AmazonSqs::fifo_ids`]). A message larger than the connection's
//! `max_message_bytes` is refused here (`PayloadTooLarge`, not retried), before SQS
//! would refuse the whole request it shares with others.

mod batcher;
mod outcome;
mod request;

use super::Kind;
use super::broker_message::{EventMessage, messages};
use super::told::{Told, refused};
use crate::destination::{RenderedBatch, Sent};
use batcher::Batcher;
use eg_core::destination::AmazonSqs;
use eg_core::routing::Routing;
use eg_core::{AttemptOutcome, OutcomeName};
use eg_runtime::aws_chain::{self, AwsKeys};
use eg_runtime::settings::{Settings, SqsConnectionSettings};
use request::{Entry, Queue};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The `aeg-*` values that are the same on every message; SQS's 10 attributes are
/// kept for those that vary and the delivery properties.
const CONSTANT_HEADERS: &[&str] = &["aeg-event-type", "aeg-metadata-version"];

/// Sends events to the queues of the configured SQS connections.
pub struct Sqs {
    connections: BTreeMap<String, Connection>,
    /// Bounds one attempt: waiting for its request, and the request.
    timeout: Duration,
}

/// One configured connection: where its requests go and how they are signed, and the
/// batcher of each queue used through it so far.
struct Connection {
    http: reqwest::Client,
    endpoint: String,
    region: String,
    credentials: object_store::aws::AwsCredentialProvider,
    max_message_bytes: usize,
    batchers: Mutex<HashMap<String, Batcher>>,
}

impl Sqs {
    /// Sends through `connections`; an attempt is bounded by `timeout`. An error names
    /// the connection whose credentials cannot be used.
    pub fn new(connections: &BTreeMap<String, SqsConnectionSettings>, timeout: Duration) -> anyhow::Result<Self> {
        // reqwest is built without a default crypto provider; use ring, as eg-outbound
        // does. An error only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Not eg-outbound's guarded client: the endpoint is the operator's configuration,
        // not a subscriber's choice, so no address policy applies, and proxies do.
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .pool_idle_timeout(Duration::from_secs(60))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("eg/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let connections = connections
            .iter()
            .map(|(name, settings)| Ok((name.clone(), Connection::new(name, settings, http.clone())?)))
            .collect::<anyhow::Result<_>>()?;
        Ok(Self { connections, timeout })
    }
}

impl Connection {
    fn new(name: &str, settings: &SqsConnectionSettings, http: reqwest::Client) -> anyhow::Result<Self> {
        let keys = AwsKeys {
            access_key_id: &settings.access_key_id,
            secret_access_key: &settings.secret_access_key,
            session_token: &settings.session_token,
        };
        let region = (!settings.region.is_empty()).then_some(settings.region.as_str());
        let (credentials, region) =
            aws_chain::credentials(&keys, region).map_err(|e| anyhow::anyhow!("brokers.sqs.{name}: {e}"))?;
        Ok(Self {
            http,
            endpoint: settings.endpoint(&region),
            region,
            credentials,
            max_message_bytes: settings.max_message_bytes,
            batchers: Mutex::new(HashMap::new()),
        })
    }

    /// The batcher of `target`'s queue, started on its first use.
    fn batcher(&self, target: &AmazonSqs) -> Batcher {
        let mut batchers = self.batchers.lock().unwrap_or_else(PoisonError::into_inner);
        batchers
            .entry(target.queue_url.clone())
            .or_insert_with(|| {
                Batcher::start(Arc::new(Queue {
                    http: self.http.clone(),
                    endpoint: self.endpoint.clone(),
                    region: self.region.clone(),
                    credentials: Arc::clone(&self.credentials),
                    queue_url: target.queue_url.clone(),
                    identity: target.queue_identity(),
                }))
            })
            .clone()
    }
}

impl Kind for Sqs {
    type Target = AmazonSqs;

    fn from_settings(s: &Settings) -> anyhow::Result<Self> {
        Self::new(&s.brokers.sqs, s.delivery.timeout)
    }

    async fn send(&self, target: &AmazonSqs, batch: RenderedBatch<'_>, _late_window: Option<Duration>) -> Sent {
        // An answer after the timeout is not listened for: the retry sends the event
        // again (a FIFO queue drops it by its deduplication id).
        let started = Instant::now();
        let told = match tokio::time::timeout(self.timeout, self.attempt(target, &batch)).await {
            Ok(told) => told,
            Err(_) => AttemptOutcome::TimedOut.into(),
        };
        told.sent(started)
    }
}

impl Sqs {
    /// Sends each event of the batch (one, as SQS subscriptions do not batch) and
    /// reports the first failure in event order.
    async fn attempt(&self, target: &AmazonSqs, batch: &RenderedBatch<'_>) -> Told {
        let Some(connection) = self.connections.get(&target.connection) else {
            let error = format!(
                "eg has no SQS connection named {:?} (EG__BROKERS__SQS__{}__REGION)",
                target.connection,
                target.connection.to_ascii_uppercase()
            );
            tracing::error!("{error}");
            return Told::with_error(refused(OutcomeName::NotFound, 404), error);
        };
        let messages = match messages(batch) {
            Ok(messages) => messages,
            Err(e) => {
                tracing::error!(error = %e, "cannot send the batch");
                return refused(OutcomeName::BadRequest, 400).into();
            }
        };
        let batcher = connection.batcher(target);
        for message in messages {
            let entry = entry_of(target, batch, message);
            if entry.size > connection.max_message_bytes {
                return Told::with_error(
                    refused(OutcomeName::PayloadTooLarge, 413),
                    format!(
                        "the message is {} bytes; the SQS connection {:?} sends at most {} (max_message_bytes)",
                        entry.size, target.connection, connection.max_message_bytes
                    ),
                );
            }
            let answer = batcher.send(entry).await;
            if !answer.outcome.is_success() {
                return answer.into();
            }
        }
        AttemptOutcome::Stored.into()
    }
}

/// One event's message: its body, its attributes and, for a FIFO queue, its ids.
fn entry_of(target: &AmazonSqs, batch: &RenderedBatch<'_>, message: EventMessage) -> Entry {
    let fifo = if target.is_fifo() {
        let event: Map<String, Value> = serde_json::from_str(&message.payload).unwrap_or_default();
        let text = |name: &str| event.get(name).and_then(Value::as_str).unwrap_or_default();
        let event_type = match text("eventType") {
            "" => text("type"),
            event_type => event_type,
        };
        let routing = Routing {
            event_type,
            subject: text("subject"),
            fields: &event,
        };
        target.fifo_ids(batch.subscription.ordering.as_ref(), &routing, &message.id)
    } else {
        None
    };
    let mut attributes: Vec<(String, String)> = message
        .headers
        .into_iter()
        .filter(|(name, _)| !CONSTANT_HEADERS.contains(&name.as_str()))
        .collect();
    make_room(&mut attributes);
    Entry::new(message.payload, attributes, fifo)
}

/// The most attributes SQS takes on one message.
const MAX_ATTRIBUTES: usize = 10;

/// The trace context goes along only where the message's attributes leave room for it:
/// eg's own and the delivery properties (at most 7, checked when the subscription is
/// written) fill SQS's 10 first, and a message SQS would refuse for a trace header must
/// never be the price of tracing. `tracestate` goes first, then `traceparent`, then a
/// replayed event's `aeg-replay-job`.
fn make_room(attributes: &mut Vec<(String, String)>) {
    for optional in ["tracestate", "traceparent", eg_core::replay::REPLAY_HEADER] {
        if attributes.len() <= MAX_ATTRIBUTES {
            return;
        }
        attributes.retain(|(name, _)| name != optional);
    }
}

#[cfg(test)]
mod tests;
