//! What the broker destinations share: one client per configured connection name and
//! sender process, opened on first use and shared by every delivery through it
//! ([`Lazy`]), looked up by the name a subscription gives ([`Connections`]).

use eg_core::{AttemptOutcome, OutcomeName};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How one kind of broker client is opened.
pub trait Connect: Send + Sync + 'static {
    /// A client, cheap to clone, shared by the deliveries through one connection.
    type Client: Clone + Send + Sync;

    /// Opens a client for the connection `name` within `timeout`; a failure is the
    /// attempt's outcome (and is logged by the implementation, naming the connection).
    fn connect(
        &self,
        name: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Self::Client, AttemptOutcome>> + Send;

    /// Whether a kept client can still be used: one whose connection dropped is opened
    /// again (a client that reconnects by itself always can).
    fn usable(_client: &Self::Client) -> bool {
        true
    }
}

/// One named connection's client, opened on first use and again when it is no longer
/// usable. One task opens it; the others wait for its client rather than open their own.
pub struct Lazy<C: Connect> {
    name: String,
    connector: C,
    client: Mutex<Option<C::Client>>,
    connecting: tokio::sync::Mutex<()>,
}

impl<C: Connect> Lazy<C> {
    pub fn new(name: &str, connector: C) -> Self {
        Self {
            name: name.to_owned(),
            connector,
            client: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
        }
    }

    /// The connection's name in eg's configuration.
    /// What makes its client (its settings).
    pub fn connector(&self) -> &C {
        &self.connector
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client, if one is open and usable; opens none.
    pub fn current(&self) -> Option<C::Client> {
        let current = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().filter(|c| C::usable(c)).cloned()
    }

    /// The client, opening it first when there is none or it is no longer usable.
    pub async fn client(&self, timeout: Duration) -> Result<C::Client, AttemptOutcome> {
        if let Some(client) = self.current() {
            return Ok(client);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(client) = self.current() {
            return Ok(client);
        }
        let client = self.connector.connect(&self.name, timeout).await?;
        *self.client.lock().unwrap_or_else(PoisonError::into_inner) = Some(client.clone());
        Ok(client)
    }
}

/// A broker kind's connections by the name subscriptions give them.
pub struct Connections<T> {
    /// The kind as an operator knows it (`RabbitMQ`), for messages.
    kind: &'static str,
    /// Its settings section (`rabbitmq`: `EG__BROKERS__RABBITMQ__<NAME>__URL`).
    section: &'static str,
    /// The setting that configures a connection (`URL`), named when one is missing.
    setting: &'static str,
    by_name: BTreeMap<String, T>,
}

/// A subscription names a connection eg has no configuration for (the management API
/// refuses such a subscription; one still stored from before a configuration change
/// gets here).
pub struct UnknownConnection {
    pub outcome: AttemptOutcome,
    /// What the operator must add, for the attempt's history and the log.
    pub error: String,
}

impl<T> Connections<T> {
    /// `kind`'s connections: `settings` by name, each made into a `T` by `open`.
    pub fn new<S>(
        kind: &'static str,
        section: &'static str,
        settings: &BTreeMap<String, S>,
        open: impl Fn(&str, &S) -> T,
    ) -> Self {
        let by_name = settings.iter().map(|(name, s)| (name.clone(), open(name, s))).collect();
        Self {
            kind,
            section,
            setting: "URL",
            by_name,
        }
    }

    /// The same, for a kind whose connections are configured by `setting` rather than
    /// `URL` (Kafka's `BOOTSTRAP_SERVERS`).
    pub fn configured_by(self, setting: &'static str) -> Self {
        Self { setting, ..self }
    }

    /// The connection `name`, or why there is none.
    pub fn get(&self, name: &str) -> Result<&T, UnknownConnection> {
        self.by_name.get(name).ok_or_else(|| {
            let error = format!(
                "eg has no {} connection named {name:?} (EG__BROKERS__{}__{}__{})",
                self.kind,
                self.section.to_ascii_uppercase(),
                name.to_ascii_uppercase(),
                self.setting
            );
            tracing::error!("{error}");
            UnknownConnection {
                outcome: AttemptOutcome::Refused {
                    outcome: OutcomeName::NotFound,
                    as_status: 404,
                },
                error,
            }
        })
    }
}
