//! The NATS JetStream destination (through `async-nats`): each event of a batch is
//! published to the subscription's subject as one message, and the attempt succeeds only
//! when the stream acknowledged every message. Each message's `Nats-Msg-Id` is its event's
//! id, so JetStream's duplicate window absorbs eg's at-least-once redeliveries: a retry
//! of an event the stream already holds is acknowledged as a duplicate and stored once.
//! Those duplicates are counted (`DestinationDuplicateCount{destination="nats"}`).
//!
//! One client per configured connection name and sender process, opened on first use and
//! shared by every delivery through it ([`Lazy`]). The client reconnects by itself after a server
//! restart; publishes made meanwhile are held by the client and fail as `SocketError`
//! when their acknowledgement does not come within the attempt's timeout (a retry
//! publishes them again under the same message id).
//!
//! A subject no stream captures is the newcomer's usual mistake, and its outcome name
//! (`NotFound`) does not say which subject: the attempt's history and the log say
//! `no JetStream stream captures subject "…"`.

use super::Kind;
use super::broker_message::{EventMessage, message_content_type, messages};
use super::connections::{Connect, Connections, Lazy, UnknownConnection};
use super::told::{Told, refused};
use crate::destination::{RenderedBatch, Sent};
use async_nats::connection::State;
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{Error as JetStreamError, ErrorCode};
use async_nats::{Client, ConnectErrorKind, ConnectOptions, HeaderMap, HeaderName, ServerAddr};
use eg_core::destination::NatsJetStream;
use eg_core::{AttemptOutcome, OutcomeName};
use eg_runtime::metrics::DESTINATION_DUPLICATE_COUNT;
use eg_runtime::settings::{NatsConnectionSettings, Settings};
use futures_util::future::join_all;
use std::collections::BTreeMap;
use std::error::Error as _;
use std::future::IntoFuture;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::time::timeout_at;

/// Publishes batches to the NATS connections of eg's configuration.
pub struct Nats {
    servers: Connections<Lazy<Server>>,
    /// Bounds one attempt: connecting, publishing and every acknowledgement.
    timeout: Duration,
}

impl Nats {
    /// Publishes through the connections of `[brokers.nats]` (none is opened before a
    /// delivery needs it); an attempt is bounded by `timeout`.
    pub fn new(connections: &BTreeMap<String, NatsConnectionSettings>, timeout: Duration) -> Self {
        let servers = Connections::new("NATS", NatsJetStream::CONNECTIONS, connections, |name, settings| {
            Lazy::new(name, Server::new(settings))
        });
        Self { servers, timeout }
    }

    async fn attempt(&self, target: &NatsJetStream, batch: &RenderedBatch<'_>) -> Told {
        let server = match self.servers.get(&target.connection) {
            Ok(server) => server,
            Err(UnknownConnection { outcome, error }) => return Told::with_error(outcome, error),
        };
        let messages = match messages(batch) {
            Ok(messages) => messages,
            Err(e) => {
                tracing::error!(error = %e, "cannot publish the batch");
                return refused(OutcomeName::BadRequest, 400).into();
            }
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        let client = match timeout_at(deadline, server.client(self.timeout)).await {
            Ok(Ok(client)) => client,
            Ok(Err(outcome)) => return outcome.into(),
            Err(_) => return AttemptOutcome::TimedOut.into(),
        };
        let publish = Publish {
            client: &client,
            subject: &target.subject,
            content_type: message_content_type(batch),
            timeout: self.timeout,
        };
        match timeout_at(deadline, publish.all(messages)).await {
            Ok(told) => told,
            Err(_) => unanswered(&client).into(),
        }
    }
}

impl Kind for Nats {
    type Target = NatsJetStream;

    fn from_settings(s: &Settings) -> anyhow::Result<Self> {
        Ok(Self::new(&s.brokers.nats, s.delivery.timeout))
    }

    async fn send(&self, target: &NatsJetStream, batch: RenderedBatch<'_>, _late_window: Option<Duration>) -> Sent {
        // An acknowledgement after the timeout is not listened for: the retry publishes
        // the same message ids, which the duplicate window absorbs.
        let started = Instant::now();
        self.attempt(target, &batch).await.sent(started)
    }
}

/// Where one batch's messages are published.
struct Publish<'a> {
    client: &'a Client,
    subject: &'a str,
    content_type: &'static str,
    timeout: Duration,
}

impl Publish<'_> {
    /// Publishes every message, pipelined, then awaits every acknowledgement: the first
    /// failure, in event order, is the attempt's outcome.
    async fn all(&self, messages: Vec<EventMessage>) -> Told {
        let mut jetstream = async_nats::jetstream::new(self.client.clone());
        jetstream.set_timeout(self.timeout);
        let mut acks = Vec::with_capacity(messages.len());
        for message in messages {
            // `message_id` after `headers`: `headers` replaces the whole map, id included.
            let publish = PublishMessage::build()
                .headers(self.headers(&message))
                .message_id(&message.id)
                .payload(message.payload.into());
            match jetstream.send_publish(self.subject.to_owned(), publish).await {
                Ok(ack) => acks.push(ack.into_future()),
                Err(e) => return self.outcome_of(&e),
            }
        }
        for ack in join_all(acks).await {
            match ack {
                Ok(ack) if ack.duplicate => {
                    metrics::counter!(DESTINATION_DUPLICATE_COUNT, "destination" => "nats").increment(1);
                }
                Ok(_) => {}
                Err(e) => return self.outcome_of(&e),
            }
        }
        AttemptOutcome::Stored.into()
    }

    /// The message's headers as NATS headers, with its content type. A name or value
    /// NATS cannot carry (a dynamic value with a line break, say) is left out.
    fn headers(&self, message: &EventMessage) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("Content-Type", self.content_type);
        for (name, value) in &message.headers {
            if let Ok(name) = name.parse::<HeaderName>()
                && !value.contains(['\r', '\n'])
            {
                headers.insert(name, value.as_str());
            }
        }
        headers
    }

    /// A publish error as an attempt's outcome:
    ///
    /// | JetStream says | outcome | as HTTP |
    /// |---|---|---|
    /// | no stream for the subject (no responders) | NotFound | 404 |
    /// | message over the server's `max_payload` | PayloadTooLarge | 413 |
    /// | too many acknowledgements pending | Busy | 503 |
    /// | the stream refused the message | see [`stream_refusal`] | |
    /// | no acknowledgement in time | TimedOut, or SocketError while disconnected | |
    /// | connection broken | SocketError | |
    /// | anything else | GenericError | 500 |
    fn outcome_of(&self, e: &PublishError) -> Told {
        match e.kind() {
            PublishErrorKind::StreamNotFound => {
                let error = format!(
                    "no JetStream stream captures subject {:?}; eg creates none (docs/destinations.md, \"NatsJetStream\")",
                    self.subject
                );
                tracing::warn!("{error}");
                Told::with_error(refused(OutcomeName::NotFound, 404), error)
            }
            PublishErrorKind::MaxPayloadExceeded => refused(OutcomeName::PayloadTooLarge, 413).into(),
            PublishErrorKind::MaxAckPending => refused(OutcomeName::Busy, 503).into(),
            PublishErrorKind::TimedOut => unanswered(self.client).into(),
            PublishErrorKind::BrokenPipe => AttemptOutcome::SocketError.into(),
            _ => {
                tracing::warn!(error = %e, "JetStream refused a publish");
                e.source()
                    .and_then(|source| source.downcast_ref::<JetStreamError>())
                    .map_or(refused(OutcomeName::GenericError, 500), stream_refusal)
                    .into()
            }
        }
    }
}

/// A stream's refusal of a publish, by JetStream's error code:
///
/// | JetStream says | outcome | as HTTP |
/// |---|---|---|
/// | 10077 "maximum messages/bytes (per subject) exceeded": a limit with `discard: new` | Full | 503 |
/// | 10047, 10023: the server's JetStream storage is used up | Full | 503 |
/// | 10109: the stream is sealed and takes no message ever again | Disabled | 503 |
/// | anything else | GenericError | 500 |
///
/// Full and Disabled are retried, like a full RabbitMQ queue or a disabled storage
/// queue: consumers, an operator raising a limit, or a new stream for the subject heal
/// them. 10077 is any store failure; only its limit messages (all "maximum … exceeded")
/// mean the stream is full.
fn stream_refusal(e: &JetStreamError) -> AttemptOutcome {
    match e.error_code() {
        ErrorCode::STREAM_STORE_FAILED if e.to_string().starts_with("maximum ") => refused(OutcomeName::Full, 503),
        ErrorCode::STORAGE_RESOURCES_EXCEEDED | ErrorCode::INSUFFICIENT_RESOURCES => refused(OutcomeName::Full, 503),
        ErrorCode::STREAM_SEALED => refused(OutcomeName::Disabled, 503),
        _ => refused(OutcomeName::GenericError, 500),
    }
}

/// No acknowledgement in time: the connection was lost (the client holds the publish
/// until it reconnects), or the server is slow.
fn unanswered(client: &Client) -> AttemptOutcome {
    match client.connection_state() {
        State::Connected => AttemptOutcome::TimedOut,
        State::Pending | State::Disconnected => AttemptOutcome::SocketError,
    }
}

/// How one named NATS server or cluster is connected to.
struct Server {
    settings: NatsConnectionSettings,
}

impl Server {
    fn new(settings: &NatsConnectionSettings) -> Self {
        Self {
            settings: settings.clone(),
        }
    }
}

/// Once connected, a client is kept: it reconnects by itself.
impl Connect for Server {
    type Client = Client;

    async fn connect(&self, name: &str, timeout: Duration) -> Result<Client, AttemptOutcome> {
        let s = &self.settings;
        let servers: Vec<ServerAddr> = s
            .url
            .split(',')
            .map(|url| url.trim().parse::<ServerAddr>())
            .collect::<Result<_, _>>()
            .map_err(|e| {
                tracing::error!(connection = %name, error = %e, "the NATS connection's url is not a server address");
                refused(OutcomeName::GenericError, 500)
            })?;
        let mut options = ConnectOptions::new().name("eg-sender").connection_timeout(timeout);
        if !s.user.is_empty() {
            options = options.user_and_password(s.user.clone(), s.password.expose().to_owned());
        }
        if !s.token.is_empty() {
            options = options.token(s.token.expose().to_owned());
        }
        if !s.credentials_file.is_empty() {
            options = options.credentials_file(&s.credentials_file).await.map_err(|e| {
                tracing::error!(connection = %name, credentials_file = %s.credentials_file, error = %e, "cannot read the NATS connection's credentials file");
                AttemptOutcome::SocketError
            })?;
        }
        if !s.ca_file.is_empty() {
            options = options.add_root_certificates(PathBuf::from(&s.ca_file));
        }
        let client = options.connect(servers).await.map_err(|e| {
            tracing::warn!(connection = %name, error = %e, "cannot connect to NATS");
            match e.kind() {
                ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
                    refused(OutcomeName::Unauthorized, 401)
                }
                ConnectErrorKind::Dns => AttemptOutcome::ResolutionError,
                ConnectErrorKind::TimedOut => AttemptOutcome::TimedOut,
                _ => AttemptOutcome::SocketError,
            }
        })?;
        tracing::info!(connection = %name, "connected to NATS");
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_subscriptions::{batch_of, subscription_with};
    use async_nats::jetstream::{self, stream};
    use eg_core::subscription::Subscription;
    use eg_runtime::settings::Secret;
    use eg_testkit::nats::Nats as NatsServer;
    use serde_json::{Value, json};

    const TWO_EVENTS: &str = r#"[{"id":"e-1","dataVersion":"1","data":{"region":"eu"}},{"id":"e-2","dataVersion":"1","data":{"region":"us"}}]"#;

    fn destination(server: &NatsServer, user: Option<(&str, &str)>, timeout: Duration) -> Nats {
        let mut settings = NatsConnectionSettings {
            url: server.url(),
            ..NatsConnectionSettings::default()
        };
        if let Some((user, password)) = user {
            settings.user = user.to_owned();
            settings.password = Secret::new(password);
        }
        Nats::new(&BTreeMap::from([("main".to_owned(), settings)]), timeout)
    }

    fn to_subject(subject: &str) -> Subscription {
        subscription_with(json!({"endpointType": "NatsJetStream", "properties": {
        "connection": "main", "subject": subject,
        "deliveryAttributeMappings": [
            {"name": "region", "type": "Dynamic", "properties": {"sourceField": "data.region"}}
        ]}}))
    }

    /// The test's own JetStream context.
    async fn admin(server: &NatsServer, user: Option<(&str, &str)>) -> jetstream::Context {
        let mut options = ConnectOptions::new();
        if let Some((user, password)) = user {
            options = options.user_and_password(user.into(), password.into());
        }
        jetstream::new(options.connect(server.url()).await.unwrap())
    }

    /// Stream `EVENTS` on `events.>`.
    async fn events_stream(server: &NatsServer, user: Option<(&str, &str)>) -> stream::Stream {
        admin(server, user)
            .await
            .get_or_create_stream(stream::Config {
                name: "EVENTS".into(),
                subjects: vec!["events.>".into()],
                ..stream::Config::default()
            })
            .await
            .unwrap()
    }

    async fn stored(stream: &mut stream::Stream) -> u64 {
        stream.info().await.unwrap().state.messages
    }

    async fn send(nats: &Nats, subscription: &Subscription, body: &str) -> AttemptOutcome {
        nats.send_own(batch_of(subscription, body, Some("1")), None)
            .await
            .outcome
    }

    #[tokio::test]
    async fn publishes_each_event_once_under_its_id_and_names_each_refusal() {
        let server = NatsServer::start_with_user("eg-sender", "right-password");
        let user = Some(("eg-sender", "right-password"));
        let mut stream = events_stream(&server, user).await;
        let nats = destination(&server, user, Duration::from_secs(5));
        let subscription = to_subject("events.orders");

        assert_eq!(send(&nats, &subscription, TWO_EVENTS).await, AttemptOutcome::Stored);
        for (sequence, id, region) in [(1, "e-1", "eu"), (2, "e-2", "us")] {
            let message = stream.get_raw_message(sequence).await.unwrap();
            let header = |name: &str| message.headers.get(name).map(|v| v.as_str().to_owned());
            assert_eq!(header("Nats-Msg-Id").as_deref(), Some(id));
            assert_eq!(header("region").as_deref(), Some(region));
            assert_eq!(header("aeg-subscription-name").as_deref(), Some("BILLING"));
            assert_eq!(header("aeg-delivery-count").as_deref(), Some("3"));
            assert_eq!(
                header("Content-Type").as_deref(),
                Some("application/json; charset=utf-8")
            );
            let event: Value = serde_json::from_slice(&message.payload).unwrap();
            assert_eq!(event["id"], id);
        }
        assert_eq!(
            send(&nats, &subscription, TWO_EVENTS).await,
            AttemptOutcome::Stored,
            "a redelivery is acknowledged"
        );
        assert_eq!(stored(&mut stream).await, 2, "and absorbed by the duplicate window");

        let refused = |outcome, as_status| AttemptOutcome::Refused { outcome, as_status };
        let unstreamed = nats
            .send_own(batch_of(&to_subject("elsewhere.orders"), TWO_EVENTS, Some("1")), None)
            .await;
        assert_eq!(
            unstreamed.outcome,
            refused(OutcomeName::NotFound, 404),
            "no stream takes the subject"
        );
        let error = unstreamed.error.unwrap_or_default();
        assert!(
            error.starts_with(r#"no JetStream stream captures subject "elsewhere.orders""#),
            "{error}"
        );
        let huge = format!(r#"[{{"id":"big","data":"{}"}}]"#, "x".repeat(1_100_000));
        assert_eq!(
            send(&nats, &subscription, &huge).await,
            refused(OutcomeName::PayloadTooLarge, 413)
        );
        let intruder = destination(&server, Some(("eg-sender", "wrong-password")), Duration::from_secs(5));
        assert_eq!(
            send(&intruder, &subscription, TWO_EVENTS).await,
            refused(OutcomeName::Unauthorized, 401)
        );
        assert_eq!(stored(&mut stream).await, 2);
    }

    #[tokio::test]
    async fn a_stream_at_its_limit_is_full_and_a_sealed_one_is_disabled() {
        let server = NatsServer::start();
        let js = admin(&server, None).await;
        let one_only = stream::Config {
            name: "ONE".into(),
            subjects: vec!["one.>".into()],
            max_messages: 1,
            discard: stream::DiscardPolicy::New,
            ..stream::Config::default()
        };
        let mut one = js.create_stream(one_only.clone()).await.unwrap();
        let nats = destination(&server, None, Duration::from_secs(5));
        let refused = |outcome, as_status| AttemptOutcome::Refused { outcome, as_status };

        let first = r#"[{"id":"e-1","data":{}}]"#;
        assert_eq!(
            send(&nats, &to_subject("one.orders"), first).await,
            AttemptOutcome::Stored
        );
        assert_eq!(
            send(&nats, &to_subject("one.orders"), TWO_EVENTS).await,
            refused(OutcomeName::Full, 503),
            "max_msgs 1 with discard new refuses the second message"
        );
        assert_eq!(stored(&mut one).await, 1);

        js.update_stream(stream::Config {
            sealed: true,
            ..one_only
        })
        .await
        .unwrap();
        assert_eq!(
            send(&nats, &to_subject("one.orders"), r#"[{"id":"e-9","data":{}}]"#).await,
            refused(OutcomeName::Disabled, 503),
            "a sealed stream takes nothing"
        );
        assert_eq!(stored(&mut one).await, 1);
    }

    #[tokio::test]
    async fn a_server_that_stops_answering_times_the_attempt_out() {
        let server = NatsServer::start();
        let mut stream = events_stream(&server, None).await;
        let nats = destination(&server, None, Duration::from_secs(1));
        let subscription = to_subject("events.orders");
        assert_eq!(send(&nats, &subscription, TWO_EVENTS).await, AttemptOutcome::Stored);

        // The connection stays up (no ping is missed in a second): the publish is
        // written and no acknowledgement comes.
        server.pause();
        let started = Instant::now();
        let outcome = send(&nats, &subscription, r#"[{"id":"e-3","data":{}}]"#).await;
        let took = started.elapsed();
        server.resume();
        assert_eq!(outcome, AttemptOutcome::TimedOut);
        assert!(
            took < Duration::from_secs(3),
            "bounded by the attempt timeout: {took:?}"
        );

        assert_eq!(
            send(&nats, &subscription, r#"[{"id":"e-3","data":{}}]"#).await,
            AttemptOutcome::Stored,
            "the retry is acknowledged"
        );
        assert_eq!(
            stored(&mut stream).await,
            3,
            "the unanswered publish and its retry are one message"
        );
    }

    #[tokio::test]
    async fn an_outage_fails_the_attempt_as_a_socket_error_and_the_client_reconnects() {
        let mut server = NatsServer::start();
        events_stream(&server, None).await;
        let nats = destination(&server, None, Duration::from_secs(1));
        let subscription = to_subject("events.orders");
        assert_eq!(send(&nats, &subscription, TWO_EVENTS).await, AttemptOutcome::Stored);

        server.kill();
        let second = r#"[{"id":"e-3","data":{}}]"#;
        assert_eq!(send(&nats, &subscription, second).await, AttemptOutcome::SocketError);
        server.start_again();
        let mut outcomes = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let outcome = send(&nats, &subscription, second).await;
            outcomes.push(outcome);
            if outcome == AttemptOutcome::Stored {
                break;
            }
        }
        assert_eq!(outcomes.last(), Some(&AttemptOutcome::Stored), "{outcomes:?}");
        let mut stream = events_stream(&server, None).await;
        assert_eq!(
            stored(&mut stream).await,
            3,
            "the held publish and its retries are one message"
        );
    }
}
