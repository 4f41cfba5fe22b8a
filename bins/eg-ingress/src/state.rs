//! The state every handler shares ([`App`]: the store, the catalog and the settings a
//! request needs), and the rule every request body follows: it is read within a size
//! and a time limit.

use crate::errors::Refusal;
use crate::validation::Validator;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{HeaderMap, header};
use eg_core::TopicName;
use eg_core::publish::PublishLimits;
use eg_runtime::startup::Process;
use eg_store::{Catalog, CatalogCache, Clock, Store};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub struct App {
    pub store: Store,
    pub catalog: Catalog,
    pub cache: Arc<CatalogCache>,
    pub clock: Clock,
    pub limits: PublishLimits,
    /// Most bytes of a publish or management request body.
    pub max_request_bytes: usize,
    /// Longest a request body may take to arrive before `408`.
    pub body_read_timeout: Duration,
    /// Longest a publish waits on Redis before answering `503`.
    pub storage_timeout: std::time::Duration,
    pub max_subscriptions_per_topic: u32,
    /// Base of each topic's `endpoint`.
    pub public_url: String,
    pub admin_token: Option<String>,
    pub validator: Validator,
    /// The accounts and connections subscriptions may name (their keys are not used here).
    pub connections: eg_runtime::settings::Connections,
    /// The topic eg-deadletter announces dead-letter objects on
    /// (`deadletter.notify_topic`): only eg publishes to it, and its subscriptions may
    /// not dead-letter.
    pub notify_topic: Option<TopicName>,
    /// The archive backlog's bound and what a publish does at it (archive.md).
    pub archive: eg_runtime::settings::ArchiveSection,
}

impl App {
    /// `bound`: the address the ingress listens on, the base of topic endpoints unless
    /// `ingress.public_url` is set.
    pub async fn build(process: &Process, bound: std::net::SocketAddr) -> anyhow::Result<Arc<Self>> {
        let s = &process.settings;
        let catalog = Catalog::new(process.store.clone());
        let cache = eg_runtime::startup::until_ready("load the catalog", &process.shutdown, || {
            CatalogCache::load(catalog.clone())
        })
        .await?;
        let cache = Arc::new(cache);
        let public_url = s
            .ingress
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{bound}"));
        if s.admin.token.is_none() {
            tracing::warn!("no admin token configured (EG__ADMIN__TOKEN): the management API is off");
        }
        Ok(Arc::new(Self {
            store: process.store.clone(),
            catalog,
            cache,
            clock: process.clock.clone(),
            limits: PublishLimits {
                max_events: s.ingress.max_events_per_request,
                max_event_bytes: s.ingress.max_event_bytes,
            },
            max_request_bytes: s.ingress.max_request_bytes,
            body_read_timeout: s.ingress.body_read_timeout,
            storage_timeout: s.ingress.storage_timeout,
            max_subscriptions_per_topic: s.ingress.max_subscriptions_per_topic,
            validator: Validator::new(s, &public_url)?,
            connections: s.connections(),
            notify_topic: s.deadletter.notify_topic_name().map_err(anyhow::Error::msg)?,
            archive: s.archive,
            public_url,
            admin_token: s.admin.token.clone().filter(|t| !t.is_empty()),
        }))
    }

    /// Reads a request body of at most `max_request_bytes` within `body_read_timeout`.
    ///
    /// A `Content-Length` over the limit is refused (`413`) before a byte of the body is
    /// read (a client sending `Expect: 100-continue` never sends it); a body without
    /// one (chunked) is refused as soon as it grows past the limit, so no more than the
    /// limit is ever held. A body still incomplete at the deadline is `408`.
    pub async fn read_body(&self, headers: &HeaderMap, mut body: Body) -> Result<Bytes, Refusal> {
        let limit = self.max_request_bytes;
        // hyper has already refused a Content-Length that is not a number.
        let announced = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(length) = announced
            && length > limit as u64
        {
            self.discard_body(headers, body);
            return Err(Refusal::too_large(format!(
                "the request body is {length} bytes (Content-Length); at most {limit} are accepted"
            )));
        }
        let too_large = || Refusal::too_large(format!("the request body is over {limit} bytes, the most accepted"));
        let deadline = tokio::time::Instant::now() + self.body_read_timeout;
        let mut bytes = Vec::with_capacity(announced.map_or(0, |n| n as usize));
        loop {
            let frame = tokio::time::timeout_at(deadline, next_frame(&mut body))
                .await
                .map_err(|_| {
                    Refusal::timed_out(format!(
                        "the request body did not arrive within {:?} ({} bytes came); nothing was accepted",
                        self.body_read_timeout,
                        bytes.len()
                    ))
                })?;
            match frame {
                None => break,
                Some(Err(e)) => {
                    return Err(Refusal::bad_request(format!("the request body could not be read: {e}")));
                }
                Some(Ok(frame)) => {
                    if let Some(data) = frame {
                        if bytes.len() + data.len() > limit {
                            self.discard_body(headers, body);
                            return Err(too_large());
                        }
                        bytes.extend_from_slice(&data);
                    }
                }
            }
        }
        Ok(Bytes::from(bytes))
    }

    /// Reads what is left of a refused request's body in the background and throws it
    /// away, for at most [`LINGER_TIME`] and twice `max_request_bytes`, while the
    /// refusal is answered. A server that closes a connection with unread data resets
    /// it, and a client still sending its body may then never see the answer; reading
    /// on a little (as web servers' "lingering close" does) lets it. Nothing is kept.
    /// A client that sent `Expect: 100-continue` has not sent the body and never will.
    pub fn discard_body(&self, headers: &HeaderMap, mut body: Body) {
        let waits_for_continue = headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        if waits_for_continue || body.is_end_stream() {
            return;
        }
        let mut budget = self.max_request_bytes.saturating_mul(2);
        let deadline = tokio::time::Instant::now() + LINGER_TIME;
        tokio::spawn(async move {
            while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, next_frame(&mut body)).await {
                let size = frame.as_ref().map_or(0, Bytes::len);
                if size >= budget {
                    break;
                }
                budget -= size;
            }
        });
    }
}

/// The data of the next frame of a request body (`Some(None)` for a frame without
/// data, such as trailers; `None` at the end of the body).
async fn next_frame(body: &mut Body) -> Option<Result<Option<Bytes>, axum::Error>> {
    std::future::poll_fn(|cx| {
        Pin::new(&mut *body)
            .poll_frame(cx)
            .map(|frame| frame.map(|result| result.map(|f| f.into_data().ok())))
    })
    .await
}

/// Longest a refused request's remaining body is read (and thrown away) for; see
/// [`App::discard_body`].
const LINGER_TIME: Duration = Duration::from_secs(5);
