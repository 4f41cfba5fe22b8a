//! The guarded client: the only way eg sends a request to a user's endpoint.
//!
//! Two checks, because hyper resolves names through our resolver but connects to an
//! IP-literal host (`http://127.0.0.1/`, `http://[::1]/`, and what the `url` crate
//! makes of `http://2130706433/` or `http://0x7f.1/`: `127.0.0.1`) without asking it:
//!
//! 1. [`check_url`] refuses a URL whose host is an address the policy forbids. It runs
//!    inside [`Client::request`], so no request can be built without it.
//! 2. The resolver ([`crate::resolve`]) drops every resolved address the policy
//!    forbids, at every new connection; a name with none left fails to connect.
//!
//! The HTTP client inside ([`crate::transport`]) never leaves this module, so neither
//! check can be skipped by a caller.

use crate::checked_urls::CheckedUrls;
use crate::settings::{BuildError, ClientCertificate, OutboundSettings};
use crate::transport::{self, ForTests, Http, Response, TransportError};
use bytes::Bytes;
use eg_core::AttemptOutcome;
use eg_core::address::{AddressPolicy, AddressRefusal};
use http::header::{ACCEPT, HeaderName, HeaderValue, USER_AGENT};
use http::{Method, Uri};
use http_body_util::Full;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use url::{Host, Url};

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
    /// The request failed on the way (timeout, DNS, connection, TLS …). Never names the
    /// URL.
    #[error(transparent)]
    Transport(TransportError),
}

impl SendError {
    /// The attempt outcome this failure stands for.
    pub fn outcome(&self) -> AttemptOutcome {
        match self {
            Self::Blocked(blocked) => blocked.outcome(),
            Self::Transport(error) => error.outcome(),
        }
    }

    fn from_transport(error: TransportError) -> Self {
        match crate::resolve::refusal_in(&error) {
            Some(refusal) => Self::Blocked(Blocked::Address(refusal)),
            None => Self::Transport(error),
        }
    }
}

/// The guarded HTTP client. Cheap to clone; clones share one connection pool.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    http: Http,
    policy: Arc<AddressPolicy>,
    /// URLs that passed [`check_url`] under `policy`, as hyper takes them.
    checked: CheckedUrls,
    /// A request's whole time unless it sets its own.
    timeout: Duration,
    user_agent: HeaderValue,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("policy", &self.shared.policy)
            .field("timeout", &self.shared.timeout)
            .finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(settings: OutboundSettings) -> Result<Self, BuildError> {
        Self::build(settings, None, &ForTests::default())
    }

    /// [`Client::new`], presenting `certificate` to every server that asks for one.
    /// Its own connection pool: a connection made with a certificate is never reused
    /// for a request that names none (or another).
    pub fn with_certificate(settings: OutboundSettings, certificate: &ClientCertificate) -> Result<Self, BuildError> {
        Self::build(settings, Some(certificate), &ForTests::default())
    }

    /// The client of `settings` (presenting `certificate`), with what `tests` change.
    pub(crate) fn build(
        settings: OutboundSettings,
        certificate: Option<&ClientCertificate>,
        tests: &ForTests,
    ) -> Result<Self, BuildError> {
        let policy = Arc::new(settings.policy.clone());
        let http = transport::http(&settings, &policy, certificate, tests)?;
        let user_agent =
            HeaderValue::try_from(settings.user_agent).map_err(|e| BuildError::new("the user agent", e))?;
        Ok(Self {
            shared: Arc::new(Shared {
                http,
                policy,
                checked: CheckedUrls::default(),
                timeout: settings.timeout,
                user_agent,
            }),
        })
    }

    pub fn policy(&self) -> &AddressPolicy {
        &self.shared.policy
    }

    /// The pre-flight check of an endpoint URL (also run by [`Client::request`]).
    pub fn check_url(&self, url: &Url) -> Result<(), Blocked> {
        check_url(&self.shared.policy, url)
    }

    /// Starts a request to `url`. A URL that is not http(s), or whose host is a
    /// forbidden address, makes `send` fail with [`SendError::Blocked`] without any
    /// network traffic.
    pub fn request(&self, method: Method, url: &str) -> RequestBuilder {
        let request = self.checked_url(url).map_err(SendError::Blocked).map(|uri| {
            let mut request = http::Request::new(Full::default());
            *request.method_mut() = method;
            *request.uri_mut() = uri;
            request
        });
        RequestBuilder {
            client: self.clone(),
            request,
            timeout: self.shared.timeout,
        }
    }

    /// `raw` parsed and checked: once per URL, then remembered ([`CheckedUrls`]).
    fn checked_url(&self, raw: &str) -> Result<Uri, Blocked> {
        if let Some(uri) = self.shared.checked.get(raw) {
            return Ok(uri);
        }
        let url = Url::parse(raw).map_err(|_| Blocked::InvalidUrl("is not an absolute URL"))?;
        self.check_url(&url)?;
        // What `url` makes of it (its IPv4 spellings normalised) is what is connected to.
        let uri = Uri::try_from(url.as_str()).map_err(|_| Blocked::InvalidUrl("is not a URL HTTP can send to"))?;
        self.shared.checked.passed(raw, &uri);
        Ok(uri)
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
/// check (or a header that cannot be sent) through to [`RequestBuilder::send`].
#[must_use = "a request does nothing until it is sent"]
pub struct RequestBuilder {
    client: Client,
    request: Result<http::Request<transport::Body>, SendError>,
    /// The whole request: connecting, sending, the answer's head and reading its body.
    timeout: Duration,
}

impl RequestBuilder {
    /// Adds a header (a name may appear more than once).
    pub fn header<K, V>(mut self, key: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        HeaderValue: TryFrom<V>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        if let Ok(request) = &mut self.request {
            let header = HeaderName::try_from(key)
                .map_err(Into::into)
                .and_then(|name| Ok((name, HeaderValue::try_from(value).map_err(Into::into)?)));
            match header {
                Ok((name, value)) => {
                    request.headers_mut().append(name, value);
                }
                Err(e) => self.request = Err(SendError::Transport(TransportError::request(e))),
            }
        }
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        if let Ok(request) = &mut self.request {
            *request.body_mut() = Full::new(body.into());
        }
        self
    }

    /// Overrides the client's whole-request timeout for this request.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends the request and waits for the answer's head; its body is read by the same
    /// deadline ([`Response::chunk`]).
    pub async fn send(self) -> Result<Response, SendError> {
        let mut request = self.request?;
        let deadline = tokio::time::Instant::now() + self.timeout;
        let headers = request.headers_mut();
        if !headers.contains_key(USER_AGENT) {
            headers.insert(USER_AGENT, self.client.shared.user_agent.clone());
        }
        if !headers.contains_key(ACCEPT) {
            headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        }
        match tokio::time::timeout_at(deadline, self.client.shared.http.request(request)).await {
            Ok(Ok(response)) => Ok(Response::new(response, deadline)),
            Ok(Err(e)) => Err(SendError::from_transport(TransportError::from_client(e))),
            Err(_) => Err(SendError::Transport(TransportError::timed_out())),
        }
    }
}

impl std::fmt::Debug for RequestBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("method", &self.request.as_ref().map(|r| r.method()))
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
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

    /// The resolver's refusal survives hyper's wrapping, so the raw client error
    /// classifies as a refusal, not as a DNS failure.
    #[tokio::test]
    async fn a_raw_resolver_refusal_classifies_as_address_not_allowed() {
        let client = Client::new(OutboundSettings::default()).unwrap();
        let request = http::Request::get("http://localhost:9/").body(Full::default()).unwrap();
        let error = TransportError::from_client(client.shared.http.request(request).await.unwrap_err());
        assert!(error.is_connect(), "hyper reports it as a connect failure: {error:?}");
        assert_eq!(error.outcome(), AttemptOutcome::AddressNotAllowed);
        assert_eq!(
            crate::resolve::refusal_in(&error).map(|r| r.category()),
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
