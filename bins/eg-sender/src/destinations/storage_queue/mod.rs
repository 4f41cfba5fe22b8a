//! The Storage Queue destination (Event Grid's `StorageQueue`): each event of a batch
//! becomes one message in a queue of an Azure storage account configured in eg
//! (`[storage.accounts]`), written with the queue service's Put Message call and
//! authorized with the account key ([`crate::shared_key`]).
//!
//! A message is what Event Grid writes: the event alone (one JSON object, not an array),
//! in the subscription's delivery schema, its UTF-8 JSON in base64 — what an Azure
//! Functions queue trigger decodes by default. Its time-to-live is the subscription's
//! `queueMessageTimeToLiveInSeconds` (`messagettl`; -1 never expires), else the queue
//! service's default of 7 days. Storage queues take no delivery properties: a queue
//! message has no headers. So it carries no `traceparent` either, and eg does not write
//! one into the event (a CloudEvent keeps the attribute its publisher gave it; traces.md).
//!
//! An event is delivered when the service answered `201 Created`. Its refusals become
//! Event Grid's outcome names ([`outcome_of`]), each with the HTTP status the retry table
//! treats it as, so `EG__DELIVERY__NOT_RETRIED` decides here as for webhooks. There is no
//! SDK for this: Azure's Rust crate has no Shared Key authorization, and the old one
//! brings a second HTTP stack; one REST call on the workspace's reqwest is all it takes.

mod shared_key;

use super::Kind;
use super::batch_events::events_of;
use super::told::{Told, refused};
use crate::destination::{RenderedBatch, Sent};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use eg_core::destination::StorageQueue;
use eg_core::{AttemptOutcome, OutcomeName};
use eg_runtime::settings::AzureAccount;
use eg_runtime::settings::Settings;
use reqwest::Url;
use shared_key::{AccountKey, SignedRequest};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The queue service version requests are made in (`messagettl=-1` needs 2017-07-29 or later).
const SERVICE_VERSION: &str = "2021-12-02";
/// The Put Message body's type, signed as sent.
const CONTENT_TYPE: &str = "application/xml";
/// Most bytes of an error answer read for its error code.
const MAX_ERROR_BODY: usize = 4096;

/// Writes events to the queues of the configured storage accounts, over one HTTP client.
pub struct StorageQueues {
    http: reqwest::Client,
    accounts: BTreeMap<String, QueueAccount>,
    /// Bounds one attempt (every message of the batch).
    timeout: Duration,
}

/// A configured account as this destination uses it.
struct QueueAccount {
    key: AccountKey,
    /// The queue service, e.g. `https://acct.queue.core.windows.net` or Azurite's
    /// `http://127.0.0.1:10001/devstoreaccount1`.
    endpoint: Url,
}

/// A storage account whose configuration this destination cannot use; the sender does
/// not start with one.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("storage.accounts.{account}: {source}")]
    Key {
        account: String,
        source: shared_key::NotBase64,
    },
    #[error("storage.accounts.{account}: the queue endpoint {endpoint:?} is not an http(s) URL")]
    Endpoint { account: String, endpoint: String },
    #[error("cannot build the HTTP client for storage queues: {0}")]
    Client(reqwest::Error),
}

impl StorageQueues {
    /// Writes to `accounts`; an attempt is bounded by `timeout`.
    pub fn new(accounts: &BTreeMap<String, AzureAccount>, timeout: Duration) -> Result<Self, AccountError> {
        let accounts = accounts
            .iter()
            .map(|(name, account)| Ok((name.clone(), QueueAccount::new(account)?)))
            .collect::<Result<_, AccountError>>()?;
        // reqwest is built without a default crypto provider; use ring, as eg-outbound
        // does. An error only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Not eg-outbound's guarded client: the account's endpoint is the operator's
        // configuration, not a subscriber's choice, so no address policy applies, and
        // the usual proxy variables do (a deployment may reach Azure through one).
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .pool_idle_timeout(Duration::from_secs(60))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("eg/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(AccountError::Client)?;
        Ok(Self {
            http,
            accounts,
            timeout,
        })
    }
}

impl QueueAccount {
    fn new(account: &AzureAccount) -> Result<Self, AccountError> {
        let key = AccountKey::from_base64(account.key.expose()).map_err(|source| AccountError::Key {
            account: account.name.clone(),
            source,
        })?;
        let endpoint = Url::parse(&account.queue_endpoint)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
            .ok_or_else(|| AccountError::Endpoint {
                account: account.name.clone(),
                endpoint: account.queue_endpoint.clone(),
            })?;
        Ok(Self { key, endpoint })
    }
}

impl Kind for StorageQueues {
    type Target = StorageQueue;

    fn from_settings(s: &Settings) -> anyhow::Result<Self> {
        let accounts = s.storage.azure_accounts().map_err(anyhow::Error::msg)?;
        Ok(Self::new(&accounts, s.delivery.timeout)?)
    }

    async fn send(&self, target: &StorageQueue, batch: RenderedBatch<'_>, _late_window: Option<Duration>) -> Sent {
        // A queue's answer is not listened to after the timeout: nothing comes late
        // that a retry would not also learn.
        let started = Instant::now();
        let outcome = match tokio::time::timeout(self.timeout, self.put_all(target, &batch)).await {
            Ok(outcome) => outcome,
            Err(_) => AttemptOutcome::TimedOut,
        };
        Told::from(outcome).sent(started)
    }
}

impl StorageQueues {
    /// Puts each event of the batch as a message, in order, stopping at the first that
    /// is not stored. StorageQueue subscriptions do not batch, so a batch is one event;
    /// were it more, those stored before a failure are stored again by the retry (at
    /// least once).
    async fn put_all(&self, target: &StorageQueue, batch: &RenderedBatch<'_>) -> AttemptOutcome {
        let Some(configured) = self.accounts.get(&target.account) else {
            // The management API refuses such subscriptions; this sender's configuration
            // lacks an account the ingress has. Retried: the operator can add it.
            tracing::error!(
                account = %target.account,
                "this sender has no configuration for the storage account (EG__STORAGE__ACCOUNTS__{}__…); not sent",
                target.account.to_ascii_uppercase()
            );
            return refused(OutcomeName::NotFound, 404);
        };
        let events = match events_of(&batch.body.body) {
            Ok(events) => events,
            Err(e) => {
                tracing::error!(error = %e, "not sent");
                return refused(OutcomeName::GenericError, 500);
            }
        };
        for event in events {
            let outcome = self.put_message(configured, target, event).await;
            if !outcome.is_success() {
                return outcome;
            }
        }
        AttemptOutcome::Stored
    }

    /// One Put Message call for one event.
    async fn put_message(&self, configured: &QueueAccount, target: &StorageQueue, event: &str) -> AttemptOutcome {
        let url = message_url(&configured.endpoint, &target.queue_name, target.message_ttl_seconds);
        let body = message_body(event);
        let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        let ms_headers = [("x-ms-date", date.as_str()), ("x-ms-version", SERVICE_VERSION)];
        let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        let query: Vec<(&str, &str)> = query.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let authorization = shared_key::authorization(
            &target.account,
            &configured.key,
            &SignedRequest {
                method: "POST",
                content_length: body.len(),
                content_type: CONTENT_TYPE,
                ms_headers: &ms_headers,
                path: url.path(),
                query: &query,
            },
        );
        let mut request = self
            .http
            .post(url)
            .header("content-type", CONTENT_TYPE)
            .header("authorization", authorization);
        for (name, value) in ms_headers {
            request = request.header(name, value);
        }
        match request.body(body).send().await {
            Ok(response) => self.outcome_of_response(response, target).await,
            Err(e) => eg_outbound::classify(&e),
        }
    }

    async fn outcome_of_response(&self, response: reqwest::Response, target: &StorageQueue) -> AttemptOutcome {
        let status = response.status().as_u16();
        if response.status().is_success() {
            return AttemptOutcome::Stored;
        }
        let code = error_code(response).await;
        let outcome = outcome_of(status, code.as_deref());
        // The service's own words, which the outcome name summarises: what an operator
        // needs to fix an account or a queue.
        tracing::info!(
            account = %target.account, queue = %target.queue_name, status, code = code.as_deref().unwrap_or(""),
            outcome = %outcome.name(), "the queue service refused the message"
        );
        outcome
    }
}

/// `<endpoint>/<queue>/messages`, with `messagettl` when the subscription sets one.
fn message_url(endpoint: &Url, queue: &str, message_ttl_seconds: Option<i64>) -> Url {
    let mut url = endpoint.clone();
    let path = format!("{}/{queue}/messages", endpoint.path().trim_end_matches('/'));
    url.set_path(&path);
    url.set_query(None);
    url.set_fragment(None);
    if let Some(ttl) = message_ttl_seconds {
        url.query_pairs_mut().append_pair("messagettl", &ttl.to_string());
    }
    url
}

/// The Put Message body: the event's UTF-8 JSON in base64 (which needs no XML escaping).
fn message_body(event: &str) -> String {
    format!(
        "<QueueMessage><MessageText>{}</MessageText></QueueMessage>",
        STANDARD.encode(event.as_bytes())
    )
}

/// The service's error code: its `x-ms-error-code` header, else the `<Code>` of its
/// error body.
async fn error_code(mut response: reqwest::Response) -> Option<String> {
    if let Some(code) = response.headers().get("x-ms-error-code").and_then(|v| v.to_str().ok()) {
        return Some(code.to_owned());
    }
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ERROR_BODY {
            break;
        }
    }
    let text = String::from_utf8_lossy(&body);
    let (_, after) = text.split_once("<Code>")?;
    let (code, _) = after.split_once("</Code>")?;
    Some(code.trim().to_owned())
}

/// What the queue service's answer means, by its status and error code. Each refusal
/// carries the status the retry table treats it as: a wrong key is `Unauthorized` (as
/// 401, not retried by default), a message over 64 KiB `PayloadTooLarge` (413, not
/// retried), a missing queue `NotFound` (404, retried: it may be created), a disabled
/// queue or account `Disabled` (as 503: retried, it may be enabled again), a busy
/// service `Busy` (503), and any other answer the name a webhook's status would get.
pub fn outcome_of(status: u16, error_code: Option<&str>) -> AttemptOutcome {
    match (status, error_code.unwrap_or_default()) {
        (200..=299, _) => AttemptOutcome::Stored,
        (_, "RequestBodyTooLarge") | (413, _) => refused(OutcomeName::PayloadTooLarge, 413),
        (_, "QueueDisabled" | "AccountIsDisabled") => refused(OutcomeName::Disabled, 503),
        (_, "AuthenticationFailed" | "InvalidAuthenticationInfo") | (401, _) => refused(OutcomeName::Unauthorized, 401),
        (_, "QueueNotFound" | "QueueBeingDeleted") | (404, _) => refused(OutcomeName::NotFound, 404),
        (code, _) => refused(
            AttemptOutcome::Status {
                code,
                retry_after: None,
            }
            .name(),
            code,
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use eg_core::outcome::{Handling, OutcomePolicy};
    use eg_core::render::DeliveryBody;
    use eg_core::subscription::Subscription;
    use eg_core::{SubscriptionName, Topic, TopicName, UnixMillis};
    use eg_testkit::hostile::{Act, Hostile};
    use serde_json::{Value, json};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    pub(crate) const ACCOUNT: &str = "devstoreaccount1";
    const KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    /// A queue service stand-in on 127.0.0.1 that reads one request, answers `response`
    /// and hands back the request's head and body: Azurite itself is in the system tests.
    pub(crate) async fn queue_service(response: &'static str) -> (String, tokio::task::JoinHandle<(String, String)>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}/{ACCOUNT}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            let (head, body) = loop {
                let n = socket.read(&mut buf).await.unwrap();
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).into_owned();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(str::to_owned)
                        })
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if body.len() >= length || n == 0 {
                        break (head.to_owned(), body.to_owned());
                    }
                }
                assert!(n > 0, "the connection closed before a whole request came");
            };
            let _ = socket.write_all(response.as_bytes()).await;
            (head, body)
        });
        (endpoint, task)
    }

    pub(crate) fn queues_at(endpoint: &str) -> StorageQueues {
        queues_with_timeout(endpoint, Duration::from_secs(5))
    }

    fn queues_with_timeout(endpoint: &str, timeout: Duration) -> StorageQueues {
        let account = AzureAccount {
            name: ACCOUNT.into(),
            key: eg_runtime::settings::Secret::new(KEY),
            blob_endpoint: String::new(),
            queue_endpoint: endpoint.into(),
        };
        StorageQueues::new(&BTreeMap::from([(ACCOUNT.to_owned(), account)]), timeout).unwrap()
    }

    pub(crate) fn subscription_with(destination: Value) -> Subscription {
        let topic = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        let resource = json!({"properties": {"destination": destination}});
        Subscription::from_resource(
            &topic,
            SubscriptionName::parse("billing").unwrap(),
            &resource,
            UnixMillis(0),
        )
        .unwrap()
    }

    pub(crate) fn queue_subscription() -> Subscription {
        subscription_with(json!({"endpointType": "StorageQueue", "properties": {
            "resourceId": format!("/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/{ACCOUNT}"),
            "queueName": "orders", "queueMessageTimeToLiveInSeconds": 300}}))
    }

    pub(crate) fn batch(subscription: &Subscription) -> RenderedBatch<'_> {
        RenderedBatch {
            subscription,
            target: subscription.target().expect("a push subscription"),
            body: DeliveryBody {
                body: r#"[{"id":"a","data":{"n":1.50}}]"#.into(),
                content_type: "application/json; charset=utf-8",
                data_version: Some("1".into()),
            },
            delivery_headers: Vec::new(),
            delivery_count: 0,
            batch_id: "msg_1".into(),
            sent_at: UnixMillis(0),
            trace: None,
            replay_job: None,
        }
    }

    fn header<'a>(head: &'a str, name: &str) -> &'a str {
        head.lines()
            .find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case(name)))
            .map_or("", |(_, v)| v.trim())
    }

    #[tokio::test]
    async fn an_event_is_put_as_one_signed_base64_message_with_its_time_to_live() {
        let (endpoint, request) = queue_service("HTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n").await;
        let subscription = queue_subscription();
        let sent = queues_at(&endpoint).send_own(batch(&subscription), None).await;
        assert_eq!(sent.outcome, AttemptOutcome::Stored);
        let (head, body) = request.await.unwrap();
        assert!(
            head.starts_with("POST /devstoreaccount1/orders/messages?messagettl=300 HTTP/1.1"),
            "{head}"
        );
        assert_eq!(
            body,
            message_body(r#"{"id":"a","data":{"n":1.50}}"#),
            "the event alone, as rendered"
        );
        assert_eq!(header(&head, "content-type"), CONTENT_TYPE);
        // The signature is over what was sent.
        let date = header(&head, "x-ms-date");
        let ms_headers = [("x-ms-date", date), ("x-ms-version", header(&head, "x-ms-version"))];
        let key = AccountKey::from_base64(KEY).unwrap();
        let expected = shared_key::authorization(
            ACCOUNT,
            &key,
            &SignedRequest {
                method: "POST",
                content_length: body.len(),
                content_type: header(&head, "content-type"),
                ms_headers: &ms_headers,
                path: "/devstoreaccount1/orders/messages",
                query: &[("messagettl", "300")],
            },
        );
        assert_eq!(header(&head, "authorization"), expected);
    }

    #[tokio::test]
    async fn a_refusal_is_named_by_its_error_code_and_a_closed_port_is_a_socket_error() {
        let (endpoint, _request) = queue_service(
            "HTTP/1.1 403 Server failed to authenticate the request\r\nx-ms-error-code: AuthenticationFailed\r\ncontent-length: 0\r\n\r\n",
        )
        .await;
        let subscription = queue_subscription();
        let sent = queues_at(&endpoint).send_own(batch(&subscription), None).await;
        assert_eq!(sent.outcome, refused(OutcomeName::Unauthorized, 401));

        let body = "<?xml version=\"1.0\"?><Error><Code>QueueNotFound</Code><Message>no</Message></Error>";
        let response: &'static str = Box::leak(
            format!("HTTP/1.1 404 Not Found\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_boxed_str(),
        );
        let (endpoint, _request) = queue_service(response).await;
        let sent = queues_at(&endpoint).send_own(batch(&subscription), None).await;
        assert_eq!(
            sent.outcome,
            refused(OutcomeName::NotFound, 404),
            "the code read from the body"
        );

        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}/{ACCOUNT}", closed.local_addr().unwrap());
        drop(closed);
        let sent = queues_at(&endpoint).send_own(batch(&subscription), None).await;
        assert_eq!(sent.outcome, AttemptOutcome::SocketError);
    }

    #[tokio::test]
    async fn a_service_that_takes_the_request_and_never_answers_times_the_attempt_out() {
        let silent = Hostile::start(Act::Silent).await;
        let endpoint = format!("http://{}/{ACCOUNT}", silent.addr());
        let subscription = queue_subscription();
        let started = Instant::now();
        let sent = queues_with_timeout(&endpoint, Duration::from_secs(1))
            .send_own(batch(&subscription), None)
            .await;
        assert_eq!(sent.outcome, AttemptOutcome::TimedOut);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "bounded by the attempt timeout: {:?}",
            started.elapsed()
        );
        let conns = silent.wait_closed(1, Duration::from_secs(10)).await;
        assert!(
            String::from_utf8_lossy(&conns[0].request()).starts_with("POST /devstoreaccount1/orders/messages"),
            "the request was sent before the silence"
        );
    }

    #[test]
    fn the_services_answers_map_to_event_grids_outcomes() {
        let cases = [
            (201, None, AttemptOutcome::Stored),
            (404, Some("QueueNotFound"), refused(OutcomeName::NotFound, 404)),
            (409, Some("QueueBeingDeleted"), refused(OutcomeName::NotFound, 404)),
            (
                403,
                Some("AuthenticationFailed"),
                refused(OutcomeName::Unauthorized, 401),
            ),
            (403, Some("AuthorizationFailure"), refused(OutcomeName::Forbidden, 403)),
            (
                413,
                Some("RequestBodyTooLarge"),
                refused(OutcomeName::PayloadTooLarge, 413),
            ),
            (413, None, refused(OutcomeName::PayloadTooLarge, 413)),
            (409, Some("QueueDisabled"), refused(OutcomeName::Disabled, 503)),
            (403, Some("AccountIsDisabled"), refused(OutcomeName::Disabled, 503)),
            (503, Some("ServerBusy"), refused(OutcomeName::Busy, 503)),
            (500, Some("InternalError"), refused(OutcomeName::GenericError, 500)),
            (
                400,
                Some("InvalidQueryParameterValue"),
                refused(OutcomeName::BadRequest, 400),
            ),
        ];
        for (status, code, expected) in cases {
            assert_eq!(outcome_of(status, code), expected, "{status} {code:?}");
        }
    }

    #[test]
    fn the_default_retry_table_retries_what_may_heal_and_not_a_wrong_key() {
        let table = OutcomePolicy::default();
        let handling = |status, code| table.classify(&outcome_of(status, Some(code)));
        assert_eq!(handling(403, "AuthenticationFailed"), Handling::NotRetried);
        assert_eq!(handling(413, "RequestBodyTooLarge"), Handling::NotRetried);
        assert!(matches!(handling(404, "QueueNotFound"), Handling::Retry { .. }));
        assert!(matches!(handling(409, "QueueDisabled"), Handling::Retry { .. }));
        assert!(matches!(handling(503, "ServerBusy"), Handling::Retry { .. }));
        assert!(matches!(handling(500, "InternalError"), Handling::Retry { .. }));
    }

    #[test]
    fn a_message_is_the_events_json_in_base64_posted_to_the_queues_messages() {
        assert_eq!(
            message_body(r#"{"id":"é"}"#),
            "<QueueMessage><MessageText>eyJpZCI6IsOpIn0=</MessageText></QueueMessage>"
        );
        let azurite = Url::parse("http://127.0.0.1:10001/devstoreaccount1").unwrap();
        assert_eq!(
            message_url(&azurite, "orders", Some(-1)).as_str(),
            "http://127.0.0.1:10001/devstoreaccount1/orders/messages?messagettl=-1"
        );
        let azure = Url::parse("https://acct.queue.core.windows.net/").unwrap();
        assert_eq!(
            message_url(&azure, "orders", None).as_str(),
            "https://acct.queue.core.windows.net/orders/messages"
        );
    }

    #[test]
    fn an_account_that_cannot_sign_or_be_reached_is_named() {
        let account = |key: &str, endpoint: &str| AzureAccount {
            name: "prodlogs".into(),
            key: eg_runtime::settings::Secret::new(key),
            blob_endpoint: String::new(),
            queue_endpoint: endpoint.into(),
        };
        let accounts = |a| BTreeMap::from([("prodlogs".to_owned(), a)]);
        let e = StorageQueues::new(&accounts(account("%%", "https://x")), Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .starts_with("storage.accounts.prodlogs: the account key is not base64"),
            "{e}"
        );
        let e = StorageQueues::new(&accounts(account("a2V5", "queue.example")), Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(e.to_string().contains("\"queue.example\" is not an http(s) URL"), "{e}");
    }
}
