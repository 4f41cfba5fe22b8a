//! Delivery tokens (docs/oauth-delivery.md): bearer tokens got from the identity
//! providers the operator configured, cached per identity and target, renewed before
//! their end, one request at a time per token.
//!
//! The token endpoint is the operator's configuration, not a subscription's: it is asked
//! over a plain client of its own, outside the address policy (a provider on a private
//! network is normal), like the storage queues. The policy (the form, reading the answer,
//! when to renew, how long to leave a failing provider alone) is `eg_core::identity`.
//! Secrets and tokens never reach a log, an error or a metric label from here.

use crate::assertion::CertificateCredential;
use eg_core::UnixMillis;
use eg_core::identity::{
    AccessToken, ClientProof, TokenTarget, failure_backoff, parse_token_response, refresh_at, token_form,
};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One identity's client credentials and defaults, from eg's settings.
#[derive(Clone)]
pub struct TokenSource {
    pub token_url: String,
    pub client_id: String,
    pub credential: Credential,
    /// What a token is asked for when the subscription gives nothing.
    pub default_target: TokenTarget,
    pub refresh_before: Duration,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("token_url", &self.token_url)
            .field("client_id", &self.client_id)
            .field("credential", &self.credential)
            .finish_non_exhaustive()
    }
}

/// How an identity proves itself to its provider.
#[derive(Clone)]
pub enum Credential {
    /// A client secret (`client_secret_post`).
    Secret(String),
    /// A certificate: each request carries a fresh signed assertion (`private_key_jwt`).
    Certificate(Arc<CertificateCredential>),
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(_) => f.write_str("Secret(***)"),
            Self::Certificate(certificate) => certificate.fmt(f),
        }
    }
}

/// Why no token is at hand: said in history and on the status page, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("eg has no delivery identity named {0:?} (EG__IDENTITIES__<NAME>__…)")]
    UnknownIdentity(String),
    #[error("identity {identity:?}: {problem}")]
    Unavailable { identity: String, problem: String },
}

/// What one token request came to, for the caller's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestResult {
    Issued,
    /// The provider answered, but with no token (4xx, 5xx, or nonsense).
    Refused,
    /// No answer: connection failed or timed out.
    Unreachable,
}

impl RequestResult {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Issued => "issued",
            Self::Refused => "refused",
            Self::Unreachable => "unreachable",
        }
    }
}

/// Told of every token request made: identity, result, how long it took and, when it
/// failed, why (in the provider's words, never a secret).
pub type RequestObserver = Arc<dyn Fn(&str, RequestResult, Duration, Option<&str>) + Send + Sync>;

/// Every configured identity's tokens, shared by a process's deliveries.
pub struct Tokens {
    http: reqwest::Client,
    identities: BTreeMap<String, Identity>,
    observe: RequestObserver,
}

/// One identity: its settings, its tokens by target, and how its provider has fared.
struct Identity {
    source: TokenSource,
    slots: Mutex<HashMap<TokenTarget, Arc<Slot>>>,
    health: Mutex<Health>,
}

/// One token's place: the token, and the lock the one task renewing it holds.
#[derive(Default)]
struct Slot {
    current: Mutex<Option<Cached>>,
    renewing: tokio::sync::Mutex<()>,
}

#[derive(Clone)]
struct Cached {
    token: AccessToken,
    renew_at: Instant,
    ends_at: Instant,
}

/// Failed requests in a row, and until when the provider is left alone.
#[derive(Default)]
struct Health {
    failures: u32,
    quiet_until: Option<Instant>,
    last_problem: String,
    /// Whether the last failed request was refused or got no answer.
    last_result: Option<RequestResult>,
}

/// An identity whose provider failed its last request: what it said, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityProblem {
    pub identity: String,
    pub problem: String,
    pub failures: u32,
    /// [`RequestResult::Refused`] or [`RequestResult::Unreachable`].
    pub result: RequestResult,
}

impl Tokens {
    /// Tokens for `identities` (by name); `observe` is told of each request.
    pub fn new(identities: BTreeMap<String, TokenSource>, observe: RequestObserver) -> Result<Self, reqwest::Error> {
        // As for the guarded client: ring, unless a provider is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            http,
            identities: identities
                .into_iter()
                .map(|(name, source)| {
                    let identity = Identity {
                        source,
                        slots: Mutex::default(),
                        health: Mutex::default(),
                    };
                    (name, identity)
                })
                .collect(),
            observe,
        })
    }

    /// A token of `identity` for `target` (empty: the identity's default), from the cache
    /// or asked for within `timeout`. A token still valid is used while its renewal fails.
    pub async fn token(
        &self,
        identity: &str,
        target: &TokenTarget,
        timeout: Duration,
    ) -> Result<AccessToken, TokenError> {
        let (entry, slot) = self.slot(identity, target)?;
        let now = Instant::now();
        if let Some(cached) = current(&slot).filter(|c| now < c.renew_at) {
            return Ok(cached.token);
        }
        // One task asks; the others wait for its token.
        let _renewing = slot.renewing.lock().await;
        let now = Instant::now();
        let still_valid = current(&slot).filter(|c| now < c.ends_at);
        if let Some(cached) = still_valid.clone().filter(|c| now < c.renew_at) {
            return Ok(cached.token);
        }
        let unavailable = |problem: String| TokenError::Unavailable {
            identity: identity.to_owned(),
            problem,
        };
        {
            let health = lock(&entry.health);
            if health.quiet_until.is_some_and(|until| now < until) {
                return match still_valid {
                    Some(cached) => Ok(cached.token),
                    None => Err(unavailable(health.last_problem.clone())),
                };
            }
        }
        let target = if target.is_empty() {
            &entry.source.default_target
        } else {
            target
        };
        match self.ask(identity, &entry.source, target, timeout).await {
            Ok((token, lifetime)) => {
                let renew_in = Duration::from_millis(
                    u64::try_from(refresh_at(UnixMillis(0), lifetime, entry.source.refresh_before).0).unwrap_or(0),
                );
                *lock(&slot.current) = Some(Cached {
                    token: token.clone(),
                    renew_at: now + renew_in,
                    ends_at: now + lifetime,
                });
                *lock(&entry.health) = Health::default();
                Ok(token)
            }
            Err((result, problem)) => {
                let mut health = lock(&entry.health);
                health.failures = health.failures.saturating_add(1);
                health.quiet_until = Some(Instant::now() + failure_backoff(health.failures));
                health.last_problem.clone_from(&problem);
                health.last_result = Some(result);
                match still_valid {
                    Some(cached) => Ok(cached.token),
                    None => Err(unavailable(problem)),
                }
            }
        }
    }

    /// Forgets `token` of `identity` for `target` after an endpoint refused it (`401`),
    /// unless another task already replaced it; the next [`Tokens::token`] asks anew.
    pub fn forget(&self, identity: &str, target: &TokenTarget, token: &AccessToken) {
        if let Ok((_, slot)) = self.slot(identity, target) {
            let mut current = lock(&slot.current);
            if current.as_ref().is_some_and(|c| &c.token == token) {
                *current = None;
            }
        }
    }

    /// The identities whose provider failed its last request.
    pub fn problems(&self) -> Vec<IdentityProblem> {
        self.identities
            .iter()
            .filter_map(|(name, identity)| {
                let health = lock(&identity.health);
                (health.failures > 0).then(|| IdentityProblem {
                    identity: name.clone(),
                    problem: health.last_problem.clone(),
                    failures: health.failures,
                    result: health.last_result.unwrap_or(RequestResult::Refused),
                })
            })
            .collect()
    }

    fn slot(&self, identity: &str, target: &TokenTarget) -> Result<(&Identity, Arc<Slot>), TokenError> {
        let entry = self
            .identities
            .get(identity)
            .ok_or_else(|| TokenError::UnknownIdentity(identity.to_owned()))?;
        let slot = lock(&entry.slots).entry(target.clone()).or_default().clone();
        Ok((entry, slot))
    }

    /// One token request; the problem, when it fails, in words an operator can act on.
    async fn ask(
        &self,
        identity: &str,
        source: &TokenSource,
        target: &TokenTarget,
        timeout: Duration,
    ) -> Result<(AccessToken, Duration), (RequestResult, String)> {
        let started = Instant::now();
        let form = |proof| {
            url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(token_form(&source.client_id, proof, target))
                .finish()
        };
        let form = match &source.credential {
            Credential::Secret(secret) => form(ClientProof::Secret(secret)),
            Credential::Certificate(certificate) => {
                match certificate.assertion(&source.client_id, &source.token_url, wall_clock()) {
                    Ok(jwt) => form(ClientProof::Assertion(&jwt)),
                    Err(problem) => {
                        (self.observe)(identity, RequestResult::Refused, started.elapsed(), Some(&problem));
                        return Err((RequestResult::Refused, problem));
                    }
                }
            }
        };
        let request = self
            .http
            .post(&source.token_url)
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(form)
            .send();
        let (result, answer) = match request.await {
            Err(e) => {
                let problem = if e.is_timeout() {
                    format!("the token endpoint did not answer within {timeout:?}")
                } else {
                    "the token endpoint could not be reached".to_owned()
                };
                (RequestResult::Unreachable, Err(problem))
            }
            Ok(response) => {
                let status = response.status().as_u16();
                match response.bytes().await {
                    Err(_) => (
                        RequestResult::Unreachable,
                        Err("the token endpoint's answer broke off".to_owned()),
                    ),
                    Ok(body) => match parse_token_response(status, &body) {
                        Ok(issued) => (RequestResult::Issued, Ok((issued.token, issued.lifetime))),
                        Err(refusal) => (RequestResult::Refused, Err(refusal.0)),
                    },
                }
            }
        };
        (self.observe)(
            identity,
            result,
            started.elapsed(),
            answer.as_ref().err().map(String::as_str),
        );
        answer.map_err(|problem| (result, problem))
    }
}

/// Now, for an assertion's `nbf` and `exp`: the provider compares them with its clock.
fn wall_clock() -> UnixMillis {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    UnixMillis(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
}

fn current(slot: &Slot) -> Option<Cached> {
    lock(&slot.current).clone()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
