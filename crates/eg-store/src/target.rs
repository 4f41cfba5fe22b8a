//! Where connections go — one server, a Redis Cluster, or the primary that Redis Sentinel
//! names — and how they are secured: TLS (rustls with the ring provider, the system's
//! trust roots unless a CA file is given, a client certificate for mutual TLS) and the
//! ACL user and password. Built once from [`RedisSettings`]; every connection a process
//! opens (the pool's, the status-page counts') is opened by [`Target::open`].
//!
//! A failed TLS handshake is reported in the settings' words (which setting to change),
//! since rustls's own words ("UnknownIssuer") do not say what an operator should do.

use crate::error::StoreError;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, ClientTlsConfig, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo,
    Pipeline, RedisError, RedisFuture, TlsCertificates, TlsMode, Value,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the cluster client retries a command that met a moved slot, a failover or a
/// dropped node before handing the error to the caller (whose own retry takes over).
const CLUSTER_RETRIES: u32 = 3;

/// The files of TLS connections to Redis (PEM): each is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA that signed the servers' certificates; without it, the system's roots.
    pub ca_file: Option<PathBuf>,
    /// A client certificate (chain) and its key, for servers that ask for one (mutual TLS).
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

impl TlsFiles {
    fn is_empty(&self) -> bool {
        self.ca_file.is_none() && self.cert_file.is_none() && self.key_file.is_none()
    }

    /// The certificates as redis-rs takes them, read from the files; `None` when no file
    /// is set (the system's roots, no client certificate).
    fn load(&self) -> Result<Option<TlsCertificates>, StoreError> {
        if self.is_empty() {
            return Ok(None);
        }
        let read = |path: &PathBuf, setting: &str| {
            std::fs::read(path)
                .map_err(|e| StoreError::Config(format!("{setting}: cannot read {}: {e}", path.display())))
        };
        let client_tls = match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => Some(ClientTlsConfig {
                client_cert: read(cert, "EG__REDIS__TLS_CERT_FILE")?,
                client_key: read(key, "EG__REDIS__TLS_KEY_FILE")?,
            }),
            (None, None) => None,
            _ => {
                return Err(StoreError::Config(
                    "EG__REDIS__TLS_CERT_FILE and EG__REDIS__TLS_KEY_FILE go together: set both or neither".into(),
                ));
            }
        };
        let root_cert = match &self.ca_file {
            Some(ca) => Some(read(ca, "EG__REDIS__TLS_CA_FILE")?),
            None => None,
        };
        Ok(Some(TlsCertificates { client_tls, root_cert }))
    }
}

/// The ACL user and password of the data nodes, when not in their URLs (with Sentinel,
/// always here: Sentinel names the primary, not its credentials).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub username: Option<String>,
    pub password: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Redis Sentinel: the sentinels to ask and the name of the primary they watch.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SentinelSettings {
    /// `redis://host:26379` (or `rediss://`: then the data nodes are reached over TLS too).
    pub nodes: Vec<String>,
    /// The name the sentinels monitor the primary under (`sentinel monitor <name> …`).
    pub master_name: String,
    /// The sentinels' own ACL user and password (`requirepass` of the sentinels).
    pub credentials: Credentials,
}

impl std::fmt::Debug for SentinelSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelSettings")
            .field("nodes", &self.nodes.iter().map(|n| redact_url(n)).collect::<Vec<_>>())
            .field("master_name", &self.master_name)
            .field("credentials", &self.credentials)
            .finish()
    }
}

/// `url` with any password replaced by `***`, for logs and messages.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            let pairs: Vec<(String, String)> = parsed
                .query_pairs()
                .map(|(k, v)| {
                    let v = if k == "pass" { "***".to_owned() } else { v.into_owned() };
                    (k.into_owned(), v)
                })
                .collect();
            if !pairs.is_empty() {
                parsed.query_pairs_mut().clear().extend_pairs(pairs);
            }
            parsed.to_string()
        }
        Err(_) => "(not a URL)".to_owned(),
    }
}

/// Where connections go: built once from [`RedisSettings`], shared by the pool and by
/// the status-page counts.
#[derive(Clone)]
pub struct Target {
    route: Route,
    /// Whether connections use TLS (a timeout then may mean a port without TLS).
    tls: bool,
    connect_timeout: std::time::Duration,
}

#[derive(Clone)]
enum Route {
    Single {
        client: redis::Client,
        config: AsyncConnectionConfig,
    },
    Cluster(redis::cluster::ClusterClient),
    /// The primary, as the sentinels name it when a connection is opened: after a failover
    /// the next connection goes to the new primary.
    Sentinel {
        client: Arc<tokio::sync::Mutex<SentinelClient>>,
        config: AsyncConnectionConfig,
    },
}

impl Target {
    pub fn new(settings: &RedisSettings) -> Result<Self, StoreError> {
        // rustls picks its provider per process; eg's is ring (as reqwest's and the
        // brokers'), installed here so a Redis-only process needs nothing else.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let certificates = settings.tls.load()?;
        let config = AsyncConnectionConfig::new()
            .set_response_timeout(Some(settings.command_timeout))
            .set_connection_timeout(Some(settings.connect_timeout));
        let (route, tls) = if let Some(sentinel) = &settings.sentinel {
            Route::sentinel(sentinel, &settings.credentials, certificates, config)?
        } else if settings.cluster_nodes.is_empty() {
            Route::single(settings, certificates, config)?
        } else {
            Route::cluster(settings, certificates)?
        };
        Ok(Self {
            route,
            tls,
            connect_timeout: settings.connect_timeout,
        })
    }

    /// Whether connections go to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.route, Route::Cluster(_))
    }

    /// Opens a new multiplexed connection (with Sentinel: to the primary it names now).
    pub async fn open(&self) -> Result<Link, RedisError> {
        let opened = match &self.route {
            Route::Single { client, config } => client
                .get_multiplexed_async_connection_with_config(config)
                .await
                .map(Link::Single),
            Route::Cluster(client) => client.get_async_connection().await.map(Link::Cluster),
            Route::Sentinel { client, config } => {
                let primary = client.lock().await.async_get_client().await;
                match primary {
                    Ok(primary) => primary
                        .get_multiplexed_async_connection_with_config(config)
                        .await
                        .map(Link::Single),
                    Err(e) => Err(e),
                }
            }
        };
        opened.map_err(|e| self.explain(e))
    }

    /// `error` with what it means in the settings' words in front, when it is a failed
    /// TLS handshake, refused credentials, or a TLS connection that got no answer.
    fn explain(&self, error: RedisError) -> RedisError {
        let text = error.to_string();
        if let Some(hint) = tls_hint(&text) {
            return RedisError::from((
                ErrorKind::Io,
                "TLS handshake with Redis failed",
                format!("{hint} ({text})"),
            ));
        }
        if error.kind() == ErrorKind::AuthenticationFailed || text.contains("WRONGPASS") {
            return RedisError::from((
                ErrorKind::AuthenticationFailed,
                "Redis refused eg's credentials",
                format!(
                    "check the user and password in EG__REDIS__URL (or EG__REDIS__USERNAME / EG__REDIS__PASSWORD) ({text})"
                ),
            ));
        }
        if self.tls && error.is_timeout() {
            return RedisError::from((
                ErrorKind::Io,
                "no TLS answer from Redis",
                format!(
                    "the server did not complete a TLS handshake within EG__REDIS__CONNECT_TIMEOUT ({:?}): a port \
                     that speaks plain Redis never does; use redis:// for it, or the server's TLS port (tls-port) ({text})",
                    self.connect_timeout
                ),
            ));
        }
        error
    }
}

impl Route {
    fn single(
        settings: &RedisSettings,
        certificates: Option<TlsCertificates>,
        config: AsyncConnectionConfig,
    ) -> Result<(Self, bool), StoreError> {
        let info = with_credentials(parse("EG__REDIS__URL", &settings.url)?, &settings.credentials);
        let tls = is_tls(&info, "EG__REDIS__URL")?;
        let client = match certificates {
            Some(certificates) if tls => redis::Client::build_with_tls(info, certificates)?,
            Some(_) => return Err(tls_files_without_tls("EG__REDIS__URL")),
            None => redis::Client::open(info)?,
        };
        Ok((Self::Single { client, config }, tls))
    }

    fn cluster(settings: &RedisSettings, certificates: Option<TlsCertificates>) -> Result<(Self, bool), StoreError> {
        let mut tls = false;
        for node in &settings.cluster_nodes {
            tls |= is_tls(&parse("EG__REDIS__CLUSTER_NODES", node)?, "EG__REDIS__CLUSTER_NODES")?;
        }
        let mut builder = redis::cluster::ClusterClientBuilder::new(settings.cluster_nodes.iter().map(String::as_str))
            .connection_timeout(settings.connect_timeout)
            .response_timeout(settings.command_timeout)
            .retries(CLUSTER_RETRIES)
            .min_retry_wait(50)
            .max_retry_wait(1_000);
        if let Some(username) = &settings.credentials.username {
            builder = builder.username(username);
        }
        if let Some(password) = &settings.credentials.password {
            builder = builder.password(password);
        }
        match certificates {
            Some(certificates) if tls => builder = builder.certs(certificates),
            Some(_) => return Err(tls_files_without_tls("EG__REDIS__CLUSTER_NODES")),
            None => {}
        }
        Ok((Self::Cluster(builder.build()?), tls))
    }

    fn sentinel(
        sentinel: &SentinelSettings,
        credentials: &Credentials,
        certificates: Option<TlsCertificates>,
        config: AsyncConnectionConfig,
    ) -> Result<(Self, bool), StoreError> {
        if sentinel.master_name.trim().is_empty() {
            return Err(StoreError::Config(
                "EG__REDIS__SENTINEL_MASTER: name the primary the sentinels monitor (`sentinel monitor <name> …`)"
                    .into(),
            ));
        }
        let mut addresses = Vec::with_capacity(sentinel.nodes.len());
        let mut tls = None;
        for node in &sentinel.nodes {
            let info = parse("EG__REDIS__SENTINEL_NODES", node)?;
            let secure = is_tls(&info, "EG__REDIS__SENTINEL_NODES")?;
            if tls.is_some_and(|t| t != secure) {
                return Err(StoreError::Config(
                    "EG__REDIS__SENTINEL_NODES: use rediss:// for every sentinel or for none".into(),
                ));
            }
            tls = Some(secure);
            addresses.push(info.addr().clone());
        }
        let insecure = addresses
            .iter()
            .any(|a| matches!(a, ConnectionAddr::TcpTls { insecure: true, .. }));
        let mut builder = SentinelClientBuilder::new(addresses, &sentinel.master_name, SentinelServerType::Master)?;
        if let Some(username) = &credentials.username {
            builder = builder.set_client_to_redis_username(username);
        }
        if let Some(password) = &credentials.password {
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some(username) = &sentinel.credentials.username {
            builder = builder.set_client_to_sentinel_username(username);
        }
        if let Some(password) = &sentinel.credentials.password {
            builder = builder.set_client_to_sentinel_password(password);
        }
        if tls == Some(true) {
            builder = builder.set_client_to_redis_tls_mode(if insecure { TlsMode::Insecure } else { TlsMode::Secure });
            if let Some(certificates) = certificates {
                builder = builder
                    .set_client_to_redis_certificates(certificates.clone())
                    .set_client_to_sentinel_certificates(certificates);
            }
        } else if certificates.is_some() {
            return Err(tls_files_without_tls("EG__REDIS__SENTINEL_NODES"));
        }
        let route = Self::Sentinel {
            client: Arc::new(tokio::sync::Mutex::new(builder.build()?)),
            config,
        };
        Ok((route, tls == Some(true)))
    }
}

fn parse(setting: &str, url: &str) -> Result<ConnectionInfo, StoreError> {
    url.into_connection_info().map_err(|e| {
        StoreError::Config(format!(
            "{setting}: {} is not a Redis URL ({e}); the forms are redis://, rediss:// and redis+unix:///path",
            redact_url(url)
        ))
    })
}

/// Whether `info` is a TLS address; warns loudly when its certificate is not checked.
fn is_tls(info: &ConnectionInfo, setting: &str) -> Result<bool, StoreError> {
    Ok(match info.addr() {
        ConnectionAddr::TcpTls { insecure, .. } => {
            if *insecure {
                tracing::warn!(
                    setting,
                    "INSECURE: {setting} ends in #insecure, so the Redis server's TLS certificate is NOT checked: \
                     anyone on the network path can read and change eg's data; use EG__REDIS__TLS_CA_FILE instead"
                );
            }
            true
        }
        _ => false,
    })
}

fn with_credentials(info: ConnectionInfo, credentials: &Credentials) -> ConnectionInfo {
    let mut redis = info.redis_settings().clone();
    if let Some(username) = &credentials.username {
        redis = redis.set_username(username);
    }
    if let Some(password) = &credentials.password {
        redis = redis.set_password(password);
    }
    info.set_redis_settings(redis)
}

fn tls_files_without_tls(setting: &str) -> StoreError {
    StoreError::Config(format!(
        "EG__REDIS__TLS_CA_FILE / TLS_CERT_FILE / TLS_KEY_FILE are set, but {setting} is not a rediss:// URL: \
         use rediss:// to connect with TLS, or unset the TLS files"
    ))
}

/// What a failed TLS handshake means, in the settings' words; `None` for any other error.
/// Matched on the error's text: the cluster client passes handshake errors on as text.
pub fn tls_hint(error: &str) -> Option<&'static str> {
    if error.contains("UnknownIssuer") || error.contains("BadSignature") {
        Some(
            "the Redis server's certificate is not signed by a CA eg trusts: set EG__REDIS__TLS_CA_FILE to the CA \
             certificate (PEM) that signed it (without it, the system's trust roots are used)",
        )
    } else if error.contains("NotValidForName") || error.contains("not valid for name") {
        Some(
            "the Redis server's certificate does not name the host eg connects to: use a host name (or IP) the \
             certificate holds in EG__REDIS__URL / EG__REDIS__CLUSTER_NODES, or reissue the certificate",
        )
    } else if error.contains("Expired") || error.contains("expired") || error.contains("not valid yet") {
        Some("the Redis server's certificate has expired or is not valid yet: renew it")
    } else if error.contains("CertificateRequired") {
        Some("the Redis server asks for a client certificate: set EG__REDIS__TLS_CERT_FILE and EG__REDIS__TLS_KEY_FILE")
    } else if error.contains("InvalidContentType") || error.contains("corrupt message") {
        Some(
            "the Redis server did not answer with TLS: this port speaks plain Redis; use redis:// for it, or the \
             server's TLS port (tls-port)",
        )
    } else {
        None
    }
}

#[derive(Clone)]
pub struct RedisSettings {
    /// The Redis server (`redis://host:port`), when not a cluster.
    pub url: String,
    /// Seed nodes of a Redis Cluster (`redis://host:port` each); when not empty, `url` is
    /// not used and every connection is a cluster connection.
    pub cluster_nodes: Vec<String>,
    /// The primary is found through Redis Sentinel; when set, `url` and `cluster_nodes`
    /// are not used.
    pub sentinel: Option<SentinelSettings>,
    /// The data nodes' ACL user and password, when not in the URLs.
    pub credentials: Credentials,
    /// TLS files for `rediss://` connections.
    pub tls: TlsFiles,
    pub prefix: String,
    pub partitions: u16,
    pub pool_size: usize,
    /// How long a command may take before it fails; must exceed the longest `BLOCK`.
    pub command_timeout: Duration,
    /// How long to wait for a connection (from the pool, or a new one) before failing.
    pub connect_timeout: Duration,
    /// Replicas that must hold a publish before it counts as stored (`WAIT`); 0 = the
    /// primary's own append-only file is enough.
    pub replica_acks: u16,
    /// How long a publish waits for those replicas before it is reported as not stored.
    pub replica_ack_timeout: Duration,
}

impl RedisSettings {
    /// Plain settings for `url`: no TLS files, no Sentinel, credentials from the URL.
    pub fn for_url(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            cluster_nodes: Vec::new(),
            sentinel: None,
            credentials: Credentials::default(),
            tls: TlsFiles::default(),
            prefix: "eg".into(),
            partitions: 4,
            pool_size: 8,
            command_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(1),
            replica_acks: 0,
            replica_ack_timeout: Duration::from_secs(1),
        }
    }
}

/// Passwords in the URLs and credentials are shown as `***`.
impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings")
            .field("url", &redact_url(&self.url))
            .field(
                "cluster_nodes",
                &self.cluster_nodes.iter().map(|n| redact_url(n)).collect::<Vec<_>>(),
            )
            .field("sentinel", &self.sentinel)
            .field("credentials", &self.credentials)
            .field("tls", &self.tls)
            .field("prefix", &self.prefix)
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

/// One multiplexed connection to a server or a cluster; cheap to clone (clones share it).
#[derive(Clone)]
pub enum Link {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}
