//! The guarded client: the only way eg sends a request to a user's endpoint.
//!
//! Two checks, because reqwest resolves names through our resolver but connects to an
//! IP-literal host (`http://127.0.0.1/`, `http://[::1]/`, and what the `url` crate
//! makes of `http://2130706433/` or `http://0x7f.1/`: `127.0.0.1`) without asking it:
//!
//! 1. [`check_url`] refuses a URL whose host is an address the policy forbids. It runs
//!    inside [`Client::request`], so no request can be built without it.
//! 2. The resolver ([`crate::resolve`]) drops every resolved address the policy
//!    forbids, at every new connection; a name with none left fails to connect.
//!
//! The `reqwest::Client` inside never leaves this module, so neither check can be
//! skipped by a caller.

use crate::checked_urls::CheckedUrls;
use crate::resolve::{GuardedResolver, refusal_in};
use crate::response::classify;
use eg_core::AttemptOutcome;
use eg_core::address::{AddressPolicy, AddressRefusal};
use reqwest::Method;
use reqwest::header::{HeaderName, HeaderValue};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use url::{Host, Url};

/// How the outbound client behaves. `Default` is the delivery profile of
/// behaviour.md#a-delivery-attempt: 30 s for the whole request, 10 s to connect, no
/// allow-list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundSettings {
    /// The whole request: connect, send, and the response head. Reading the body with
    /// [`drain`](crate::drain) is also bounded by it.
    pub timeout: Duration,
    /// Establishing one TCP connection.
    pub connect_timeout: Duration,
    /// Which addresses may be connected to.
    pub policy: AddressPolicy,
    pub user_agent: String,
    /// PEM certificates trusted besides the system's roots (a private CA's), as
    /// `EG__DELIVERY__TLS_CA_FILE` names them.
    pub extra_roots_pem: Option<Arc<[u8]>>,
}

impl Default for OutboundSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            policy: AddressPolicy::default(),
            user_agent: concat!("eg/", env!("CARGO_PKG_VERSION")).to_owned(),
            extra_roots_pem: None,
        }
    }
}

/// A client certificate chain and its private key, presented in the TLS handshakes of
/// the endpoints that ask for one (docs/client-certificates.md). `Debug` shows its name
/// only: the key never reaches a log.
#[derive(Clone)]
pub struct ClientCertificate {
    name: String,
    identity: reqwest::Identity,
}

impl ClientCertificate {
    /// From PEM holding the certificate chain (leaf first) and the private key (PKCS#8,
    /// PKCS#1 or SEC1).
    pub fn from_pem(name: &str, pem: &[u8]) -> Result<Self, BuildError> {
        let identity = reqwest::Identity::from_pem(pem).map_err(BuildError)?;
        Ok(Self {
            name: name.to_owned(),
            identity,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertificate")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A destination eg will not send to. Never retried: the URL or the address policy has
/// to change first. `Display` never contains the URL or the resolved address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Blocked {
    /// Not an absolute http(s) URL with a host (subscriptions are validated on
    /// creation, so this means a caller bug or an old record).
    #[error("the endpoint URL {0}")]
    InvalidUrl(&'static str),
    /// The URL's host is, or its name resolved only to, addresses the policy refuses.
    #[error(transparent)]
    Address(#[from] AddressRefusal),
}

impl Blocked {
    pub fn outcome(&self) -> AttemptOutcome {
        AttemptOutcome::AddressNotAllowed
    }
}

/// Why [`RequestBuilder::send`] has no response.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Refused before or while connecting; the endpoint saw nothing.
    #[error(transparent)]
    Blocked(#[from] Blocked),
    /// The request failed on the way (timeout, DNS, connection, TLS …). The error's
    /// URL has been removed.
    #[error(transparent)]
    Transport(reqwest::Error),
}

impl SendError {
    /// The attempt outcome this failure stands for.
    pub fn outcome(&self) -> AttemptOutcome {
        match self {
            Self::Blocked(blocked) => blocked.outcome(),
            Self::Transport(error) => classify(error),
        }
    }

    fn from_transport(error: reqwest::Error) -> Self {
        match refusal_in(&error) {
            Some(refusal) => Self::Blocked(Blocked::Address(refusal)),
            None => Self::Transport(error.without_url()),
        }
    }
}

/// The client could not be built (the TLS backend failed to initialise).
#[derive(Debug, thiserror::Error)]
#[error("could not build the outbound HTTP client: {0}")]
pub struct BuildError(#[source] reqwest::Error);

/// The guarded HTTP client. Cheap to clone; clones share one connection pool.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    policy: Arc<AddressPolicy>,
    /// URLs that passed [`check_url`] under `policy`, as parsed.
    checked: Arc<CheckedUrls>,
}

/// HTTP/2 receive windows: how much a server may send before eg has read it. hyper's
/// defaults (2 MiB per stream, 5 MiB per connection) would let an endpoint that speaks
/// HTTP/2 push 2 MiB into eg's memory per attempt, however little of the response eg
/// reads ([`drain`](crate::drain) stops at `sender.max_response_bytes`, 64 KiB by
/// default). With the protocol's own default stream window (64 KiB) an attempt holds at
/// most that much unread; webhook answers are small, so nothing is slower.
pub(crate) const H2_STREAM_WINDOW: u32 = 64 * 1024;
pub(crate) const H2_CONNECTION_WINDOW: u32 = 1024 * 1024;

impl Client {
    pub fn new(settings: OutboundSettings) -> Result<Self, BuildError> {
        Self::build(settings, |builder| builder)
    }

    /// [`Client::new`], presenting `certificate` to every server that asks for one.
    /// Its own connection pool: a connection made with a certificate is never reused
    /// for a request that names none (or another).
    pub fn with_certificate(settings: OutboundSettings, certificate: &ClientCertificate) -> Result<Self, BuildError> {
        let identity = certificate.identity.clone();
        Self::build(settings, move |builder| builder.identity(identity))
    }

    /// [`Client::new`], with `extra` applied to the reqwest builder last (tests: trust a
    /// local TLS endpoint's certificate).
    pub(crate) fn build(
        settings: OutboundSettings,
        extra: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    ) -> Result<Self, BuildError> {
        // reqwest is built without a default crypto provider; use ring. An error only
        // means a provider is installed already, which reqwest then uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let policy = Arc::new(settings.policy);
        let extra_roots = match &settings.extra_roots_pem {
            Some(pem) => reqwest::Certificate::from_pem_bundle(pem).map_err(BuildError)?,
            None => Vec::new(),
        };
        let mut builder = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.connect_timeout)
            // A 3xx is the attempt's outcome (behaviour.md#a-delivery-attempt); following
            // it would also let an endpoint point eg at an address the first check never
            // saw.
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would connect on our behalf to addresses we never checked.
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(60))
            .http2_initial_stream_window_size(H2_STREAM_WINDOW)
            .http2_initial_connection_window_size(H2_CONNECTION_WINDOW)
            .user_agent(settings.user_agent)
            .dns_resolver(GuardedResolver::new(Arc::clone(&policy)));
        if !extra_roots.is_empty() {
            builder = builder.tls_certs_merge(extra_roots);
        }
        let http = extra(builder).build().map_err(BuildError)?;
        Ok(Self {
            http,
            policy,
            checked: Arc::default(),
        })
    }

    pub fn policy(&self) -> &AddressPolicy {
        &self.policy
    }

    /// The pre-flight check of an endpoint URL (also run by [`Client::request`]).
    pub fn check_url(&self, url: &Url) -> Result<(), Blocked> {
        check_url(&self.policy, url)
    }

    /// Starts a request to `url`. A URL that is not http(s), or whose host is a
    /// forbidden address, makes `send` fail with [`SendError::Blocked`] without any
    /// network traffic.
    pub fn request(&self, method: Method, url: &str) -> RequestBuilder {
        let inner = self.checked_url(url).map(|url| self.http.request(method, url));
        RequestBuilder { inner }
    }

    /// `raw` parsed and checked: once per URL, then remembered ([`CheckedUrls`]).
    fn checked_url(&self, raw: &str) -> Result<Url, Blocked> {
        if let Some(url) = self.checked.get(raw) {
            return Ok(url);
        }
        let url = Url::parse(raw).map_err(|_| Blocked::InvalidUrl("is not an absolute URL"))?;
        self.check_url(&url)?;
        self.checked.passed(raw, &url);
        Ok(url)
    }

    pub fn post(&self, url: &str) -> RequestBuilder {
        self.request(Method::POST, url)
    }
}

/// The plain guarded client and one per configured client certificate, each with its
/// own connection pool (a TLS connection made with a certificate is never reused for a
/// request that names none, or another).
#[derive(Debug, Clone)]
pub struct Clients {
    plain: Client,
    certified: std::collections::BTreeMap<String, Client>,
}

impl Clients {
    /// Clients of `settings`: the plain one, and one presenting each of `certificates`.
    pub fn new(settings: OutboundSettings, certificates: &[ClientCertificate]) -> Result<Self, BuildError> {
        let certified = certificates
            .iter()
            .map(|c| Ok((c.name().to_owned(), Client::with_certificate(settings.clone(), c)?)))
            .collect::<Result<_, BuildError>>()?;
        Ok(Self {
            plain: Client::new(settings)?,
            certified,
        })
    }

    /// The client without a certificate.
    pub fn plain(&self) -> &Client {
        &self.plain
    }

    /// The client presenting `certificate`, or the plain one for `None`; `None` when no
    /// certificate of that name is configured.
    pub fn presenting(&self, certificate: Option<&str>) -> Option<&Client> {
        match certificate {
            None => Some(&self.plain),
            Some(name) => self.certified.get(name),
        }
    }
}

/// Refuses a URL that is not http(s) with a host, or whose host is an IP address the
/// policy forbids. A host *name* passes here; its addresses are checked when resolved.
pub fn check_url(policy: &AddressPolicy, url: &Url) -> Result<(), Blocked> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Blocked::InvalidUrl("is not an http or https URL"));
    }
    let ip = match url.host() {
        None => return Err(Blocked::InvalidUrl("has no host")),
        Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        // `url` turns every IPv4 spelling of an http(s) host into `Host::Ipv4`; should
        // a name still parse as an address, hyper would connect to it without
        // resolving, so check it here.
        Some(Host::Domain(name)) => match name.trim_end_matches('.').parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => return Ok(()),
        },
    };
    policy.check(ip).map_err(Blocked::Address)
}

/// A request being built by [`Client::request`]. Carries a refusal from the pre-flight
/// check through to [`RequestBuilder::send`].
#[must_use = "a request does nothing until it is sent"]
#[derive(Debug)]
pub struct RequestBuilder {
    inner: Result<reqwest::RequestBuilder, Blocked>,
}

impl RequestBuilder {
    pub fn header<K, V>(self, key: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        HeaderValue: TryFrom<V>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        self.map(|b| b.header(key, value))
    }

    pub fn body(self, body: impl Into<reqwest::Body>) -> Self {
        self.map(|b| b.body(body))
    }

    /// Overrides the client's whole-request timeout for this request.
    pub fn timeout(self, timeout: Duration) -> Self {
        self.map(|b| b.timeout(timeout))
    }

    pub async fn send(self) -> Result<reqwest::Response, SendError> {
        self.inner?.send().await.map_err(SendError::from_transport)
    }

    fn map(self, f: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder) -> Self {
        Self {
            inner: self.inner.map(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eg_core::address::AddressCategory;

    fn check(policy: &AddressPolicy, url: &str) -> Result<(), Blocked> {
        check_url(policy, &Url::parse(url).unwrap())
    }

    fn category(policy: &AddressPolicy, url: &str) -> Option<AddressCategory> {
        match check(policy, url) {
            Err(Blocked::Address(r)) => Some(r.category()),
            _ => None,
        }
    }

    #[test]
    fn url_normalises_odd_ipv4_spellings_to_ip_hosts() {
        for (raw, host) in [
            ("http://2130706433/", "127.0.0.1"),
            ("http://0x7f.1/", "127.0.0.1"),
            ("http://0177.0.0.1/", "127.0.0.1"),
            ("http://127.1/", "127.0.0.1"),
            ("http://0x7f000001/", "127.0.0.1"),
            ("http://127.0.0.1./", "127.0.0.1"),
            ("http://0/", "0.0.0.0"),
            ("http://[::ffff:127.0.0.1]/", "[::ffff:7f00:1]"),
            ("http://[0:0:0:0:0:0:0:1]/", "[::1]"),
        ] {
            let url = Url::parse(raw).unwrap();
            assert_eq!(url.host_str(), Some(host), "{raw}");
            assert!(!matches!(url.host(), Some(Host::Domain(_))), "{raw} is an IP host");
        }
    }

    #[test]
    fn refuses_forbidden_ip_literals_in_every_spelling() {
        let p = AddressPolicy::default();
        for url in [
            "http://127.0.0.1:9/",
            "http://[::1]/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "https://127.1/",
            "http://[::ffff:127.0.0.1]/",
        ] {
            assert_eq!(category(&p, url), Some(AddressCategory::Loopback), "{url}");
        }
        assert_eq!(category(&p, "http://0/"), Some(AddressCategory::Unspecified));
        assert_eq!(
            category(&p, "http://169.254.169.254/latest/meta-data/"),
            Some(AddressCategory::CloudMetadata)
        );
        assert_eq!(category(&p, "http://10.0.0.1/"), Some(AddressCategory::Private));
        assert_eq!(
            category(&p, "http://[fd00:ec2::254]/"),
            Some(AddressCategory::CloudMetadata)
        );
    }

    #[test]
    fn passes_public_literals_and_names_and_what_the_allow_list_covers() {
        let p = AddressPolicy::default();
        assert_eq!(check(&p, "https://8.8.8.8/x?code=1"), Ok(()));
        assert_eq!(check(&p, "https://[2606:4700:4700::1111]/"), Ok(()));
        assert_eq!(
            check(&p, "https://localhost/"),
            Ok(()),
            "names are checked when resolved"
        );
        let allow = AddressPolicy::parse(["127.0.0.1/32"]).unwrap();
        assert_eq!(check(&allow, "http://127.0.0.1:9/"), Ok(()));
        assert_eq!(check(&allow, "http://2130706433/"), Ok(()));
        assert_eq!(category(&allow, "http://127.0.0.2/"), Some(AddressCategory::Loopback));
    }

    /// The resolver's refusal survives reqwest's and hyper's wrapping, so the raw
    /// `reqwest::Error` classifies as a refusal, not as a DNS failure.
    #[tokio::test]
    async fn a_raw_resolver_refusal_classifies_as_address_not_allowed() {
        let client = Client::new(OutboundSettings::default()).unwrap();
        let error = client.http.get("http://localhost:9/").send().await.unwrap_err();
        assert!(error.is_dns(), "reqwest reports it as a resolver failure: {error:?}");
        assert_eq!(classify(&error), AttemptOutcome::AddressNotAllowed);
        assert_eq!(
            refusal_in(&error).map(|r| r.category()),
            Some(AddressCategory::Loopback)
        );
    }

    #[test]
    fn refuses_what_is_not_http() {
        let p = AddressPolicy::default();
        assert_eq!(
            check(&p, "ftp://8.8.8.8/"),
            Err(Blocked::InvalidUrl("is not an http or https URL"))
        );
        assert_eq!(
            check(&p, "file:///etc/passwd"),
            Err(Blocked::InvalidUrl("is not an http or https URL"))
        );
        assert!(matches!(check(&p, "unix:/run/redis.sock"), Err(Blocked::InvalidUrl(_))));
    }
}
