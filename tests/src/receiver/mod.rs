//! A recording webhook endpoint: the far end of every delivery in the tests. It keeps
//! every request (deliveries and validation handshakes apart) with the status it
//! answered, so a test can check what eg sent, when, and how often. How it answers is
//! set per receiver ([`Behaviour`], [`Validation`]) and decided in [`answer`].

mod answer;
mod bearer;
mod tls;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use serde_json::Value;

pub use answer::{Behaviour, Reply, Validation};
pub use bearer::BearerCheck;

use crate::eventually;

/// One request a [`Receiver`] got.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    /// The body as JSON (`Null` if it was not JSON).
    pub body: Value,
    pub raw_body: String,
    pub at: Instant,
    /// The status the receiver answered (or is about to answer) with.
    pub status: u16,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }

    /// The ids of the events in the body.
    pub fn event_ids(&self) -> Vec<String> {
        self.body
            .as_array()
            .map(|events| {
                events
                    .iter()
                    .filter_map(|e| e["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

struct ReceiverState {
    behaviour: Behaviour,
    /// Changed by [`Receiver::set_validation`] (a receiver fixed while eg waits).
    validation: Mutex<Validation>,
    requests: Mutex<Vec<Recorded>>,
    validations: Mutex<Vec<Recorded>>,
    /// Deliveries without a good bearer token are answered 401 ([`Receiver::start_verifying`]).
    bearer: Option<Arc<BearerCheck>>,
}

/// A recording webhook endpoint on `127.0.0.1:<free port>`, served on the test's runtime.
pub struct Receiver {
    address: std::net::SocketAddr,
    url: String,
    state: Arc<ReceiverState>,
    task: tokio::task::JoinHandle<()>,
    /// TLS handshakes refused ([`Receiver::start_mutual_tls`]; 0 for plain HTTP).
    refused_handshakes: Arc<std::sync::atomic::AtomicU64>,
}

impl Receiver {
    pub async fn start(behaviour: Behaviour) -> Self {
        Self::start_with(behaviour, Validation::Consent).await
    }

    pub async fn start_with(behaviour: Behaviour, validation: Validation) -> Self {
        Self::start_full(behaviour, validation, None).await
    }

    /// A receiver behind an identity provider: a delivery whose bearer token `check`
    /// refuses is answered 401 (and recorded so), whatever `behaviour` says.
    pub async fn start_verifying(behaviour: Behaviour, check: BearerCheck) -> Self {
        Self::start_full(behaviour, Validation::Consent, Some(Arc::new(check))).await
    }

    /// Its token check, when it has one (to refuse a token from now on).
    pub fn bearer(&self) -> Option<&BearerCheck> {
        self.state.bearer.as_deref()
    }

    async fn start_full(behaviour: Behaviour, validation: Validation, bearer: Option<Arc<BearerCheck>>) -> Self {
        let state = Arc::new(ReceiverState {
            behaviour,
            validation: Mutex::new(validation),
            requests: Mutex::default(),
            validations: Mutex::default(),
            bearer,
        });
        let app = Router::new().fallback(answer::receive).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let address = listener.local_addr().expect("receiver address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            address,
            url: format!("http://{address}/hook"),
            state,
            task,
            refused_handshakes: Arc::default(),
        }
    }

    /// A receiver on `https://127.0.0.1:PORT/hook` serving `cert`/`key` (PEM files) that
    /// requires every client to present a certificate signed by `client_ca`.
    pub async fn start_mutual_tls(
        behaviour: Behaviour,
        cert: &std::path::Path,
        key: &std::path::Path,
        client_ca: &std::path::Path,
    ) -> Self {
        let state = Arc::new(ReceiverState {
            behaviour,
            validation: Mutex::new(Validation::Consent),
            requests: Mutex::default(),
            validations: Mutex::default(),
            bearer: None,
        });
        let app = Router::new().fallback(answer::receive).with_state(state.clone());
        let listener = tls::MutualTlsListener::bind(cert, key, client_ca).await;
        let address = axum::serve::Listener::local_addr(&listener).expect("receiver address");
        let refused_handshakes = listener.refused.clone();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            address,
            url: format!("https://127.0.0.1:{}/hook", address.port()),
            state,
            task,
            refused_handshakes,
        }
    }

    /// TLS handshakes refused so far (a client without the certificate asked for).
    pub fn refused_handshakes(&self) -> u64 {
        self.refused_handshakes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops listening, and keeps the port so that connecting to it is refused for as
    /// long as the returned port lives (a port merely freed could be handed to another
    /// test's server, which would answer instead).
    pub async fn close_refusing(mut self) -> eg_testkit::RefusingPort {
        self.task.abort();
        // The listener is dropped with the task: wait for that before binding its port.
        let _ = (&mut self.task).await;
        eg_testkit::RefusingPort::hold(self.address)
    }

    /// Answers validation handshakes from now on as `validation` says: a receiver that
    /// ignored the handshake is fixed, say, before the handshake is run again.
    pub fn set_validation(&self, validation: Validation) {
        *self.state.validation.lock().expect("receiver lock") = validation;
    }

    /// The endpoint URL to subscribe (`http://127.0.0.1:PORT/hook`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every request so far, in arrival order.
    pub fn received(&self) -> Vec<Recorded> {
        self.state.requests.lock().expect("receiver lock").clone()
    }

    pub fn count(&self) -> usize {
        self.state.requests.lock().expect("receiver lock").len()
    }

    /// The validation handshake requests (Event Grid POSTs and CloudEvents OPTIONS).
    pub fn validations(&self) -> Vec<Recorded> {
        self.state.validations.lock().expect("receiver lock").clone()
    }

    /// The ids of every event received, in arrival order, duplicates included.
    pub fn event_ids(&self) -> Vec<String> {
        self.received().iter().flat_map(Recorded::event_ids).collect()
    }

    /// The ids of the events the receiver accepted (answered 2xx), duplicates included.
    pub fn delivered_ids(&self) -> Vec<String> {
        self.received()
            .iter()
            .filter(|r| (200..300).contains(&r.status))
            .flat_map(Recorded::event_ids)
            .collect()
    }

    /// Waits until every one of `ids` has been received (accepted or not); returns the
    /// ids of every event received so far, in arrival order, duplicates included, for
    /// the test to check what else came.
    pub async fn wait_for_ids<I>(&self, ids: I, timeout: Duration) -> Vec<String>
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let expected: BTreeSet<String> = ids.into_iter().map(Into::into).collect();
        let what = format!("{} event id(s) at {}", expected.len(), self.url);
        eventually(timeout, &what, || async {
            let got = self.event_ids();
            expected.iter().all(|id| got.contains(id)).then_some(got)
        })
        .await
    }

    /// Waits until at least `count` requests have arrived; returns them all.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<Recorded> {
        eventually(timeout, &format!("{count} request(s) at {}", self.url), || async {
            let received = self.received();
            (received.len() >= count).then_some(received)
        })
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
