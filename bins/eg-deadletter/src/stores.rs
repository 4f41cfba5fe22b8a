//! The stores dead letters are written to, all behind `object_store`'s one interface:
//! one `Arc<dyn ObjectStore>` per (store, container), built the first time a record goes
//! there and kept (its HTTP connections with it).
//!
//! - `LocalDirectory`: `LocalFileSystem` rooted at `EG__DEADLETTER__DIR/<container>`, with
//!   fsync on. Its create-only put writes a staging file (`<name>#<n>`), fsyncs it,
//!   hard-links it to the name (failing if the name exists) and fsyncs the folder: an
//!   object appears whole or not at all and survives a crash once acknowledged, as the
//!   hand-written directory writer it replaces did.
//! - `AzureBlob`: the account's blob endpoint, name and key from `[storage]`. The endpoint
//!   is always explicit, so Azurite is one more endpoint: no emulator switch.
//! - `S3`: the named connection's endpoint, region, keys and addressing style; without
//!   keys, the standard AWS environment (`AWS_*` variables, web identity, container and
//!   instance credentials). The region is the connection's, else the subscription's.
//!
//! The stores' own retries are off: the worker retries with its backoff, and a request
//! gets at most the time the worker's write window leaves (see `worker`).

use crate::failures::{FailureKind, WriteFailure};
use eg_core::subscription::{DeadLetterDestination, DeadLetterStore};
use eg_runtime::aws_chain::{self, AwsKeys};
use eg_runtime::settings::{AzureAccount, S3ConnectionSettings};
use object_store::azure::MicrosoftAzureBuilder;
use object_store::local::LocalFileSystem;
use object_store::{ClientOptions, ObjectStore, RetryConfig};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where a group of records goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Destination {
    pub store: DeadLetterStore,
    pub container: String,
}

impl From<&DeadLetterDestination> for Destination {
    fn from(destination: &DeadLetterDestination) -> Self {
        Self {
            store: destination.store.clone(),
            container: destination.container_name.clone(),
        }
    }
}

/// A built store and the URL its objects are reached at.
#[derive(Clone)]
pub struct Built {
    pub store: Arc<dyn ObjectStore>,
    /// The container's URL, without a trailing slash: an object's is `<base_url>/<path>`.
    pub base_url: String,
}

/// Every store this worker writes to, built on first use.
pub struct Stores {
    dir: PathBuf,
    azure: BTreeMap<String, AzureAccount>,
    s3: BTreeMap<String, S3ConnectionSettings>,
    request_timeout: Duration,
    built: Mutex<HashMap<Destination, Built>>,
}

impl Stores {
    /// `dir` is the local directory's root; a request to a remote store is given up
    /// after `request_timeout`.
    pub fn new(
        dir: PathBuf,
        azure: BTreeMap<String, AzureAccount>,
        s3: BTreeMap<String, S3ConnectionSettings>,
        request_timeout: Duration,
    ) -> Self {
        // The HTTP client of a remote store needs the process's TLS provider before it is
        // built (rustls with ring, as every eg client); installing it twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            dir,
            azure,
            s3,
            request_timeout,
            built: Mutex::new(HashMap::new()),
        }
    }

    /// The store for `destination`, built now if it is the first time.
    pub fn get(&self, destination: &Destination) -> Result<Built, WriteFailure> {
        if let Some(built) = self.lock().get(destination) {
            return Ok(built.clone());
        }
        let built = self.build(destination)?;
        // Two partitions may build the same store at once: either copy is fine.
        Ok(self.lock().entry(destination.clone()).or_insert(built).clone())
    }

    /// Uses `built` for `destination` from now on (tests: a store that fails on purpose).
    #[cfg(test)]
    pub fn insert(&self, destination: Destination, built: Built) {
        self.lock().insert(destination, built);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Destination, Built>> {
        // The map is only ever inserted into: a panic elsewhere cannot leave it half-done.
        self.built.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn build(&self, destination: &Destination) -> Result<Built, WriteFailure> {
        let container = destination.container.as_str();
        match &destination.store {
            DeadLetterStore::LocalDirectory => self.local(container),
            DeadLetterStore::AzureBlob { account } => self.azure(account, container),
            DeadLetterStore::S3 { connection, region, .. } => self.s3(connection, region.as_deref(), container),
        }
    }

    fn local(&self, container: &str) -> Result<Built, WriteFailure> {
        let plain = !container.is_empty() && container.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !plain {
            return Err(WriteFailure::new(
                FailureKind::Rejected,
                format!("refusing dead-letter container {container:?}"),
            ));
        }
        let root = self.dir.join(container);
        let unavailable = |e: std::io::Error| {
            WriteFailure::new(
                FailureKind::Unavailable,
                format!("cannot create the dead-letter folder {}: {e}", root.display()),
            )
        };
        if !root.is_dir() {
            std::fs::create_dir_all(&root).map_err(unavailable)?;
            // The new folder's entry is durable before anything is acknowledged in it.
            std::fs::File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(unavailable)?;
        }
        let store = LocalFileSystem::new_with_prefix(&root)
            .map_err(|e| WriteFailure::new(FailureKind::Unavailable, e.to_string()))?
            .with_fsync(true);
        let absolute = std::fs::canonicalize(&root).unwrap_or(root);
        Ok(Built {
            store: Arc::new(store),
            // Percent-encoded as a URL must be (`eg_core::storage_event::local_file_url`).
            base_url: eg_core::storage_event::local_file_url(&absolute)
                .map(|url| url.trim_end_matches('/').to_owned())
                .unwrap_or_else(|| format!("file://{}", absolute.display())),
        })
    }

    fn azure(&self, account: &str, container: &str) -> Result<Built, WriteFailure> {
        let Some(settings) = self.azure.get(account) else {
            return Err(not_configured(format!(
                "eg has no configuration for the storage account {account:?} (EG__STORAGE__ACCOUNTS__{}__CONNECTION_STRING)",
                account.to_ascii_uppercase()
            )));
        };
        let endpoint = settings.blob_endpoint.trim_end_matches('/').to_owned();
        let store = MicrosoftAzureBuilder::new()
            .with_client_options(self.client_options(&endpoint))
            .with_retry(no_retries())
            .with_endpoint(endpoint.clone())
            .with_account(&settings.name)
            .with_access_key(settings.key.expose())
            .with_container_name(container)
            .build()
            .map_err(|e| not_configured(format!("the storage account {account:?} cannot be used: {e}")))?;
        Ok(Built {
            store: Arc::new(store),
            base_url: format!("{endpoint}/{container}"),
        })
    }

    fn s3(&self, connection: &str, subscription_region: Option<&str>, bucket: &str) -> Result<Built, WriteFailure> {
        let Some(settings) = self.s3.get(connection) else {
            return Err(not_configured(format!(
                "eg has no S3 connection named {connection:?} (EG__STORAGE__S3__{}__…)",
                connection.to_ascii_uppercase()
            )));
        };
        // No keys configured: AWS's own chain (eg_runtime::aws_chain).
        let keys = AwsKeys {
            access_key_id: &settings.access_key_id,
            secret_access_key: &settings.secret_access_key,
            session_token: &settings.session_token,
        };
        let mut builder = aws_chain::builder(&keys, non_empty(&settings.region).or(subscription_region));
        let region = aws_chain::region(&builder);
        let endpoint = non_empty(&settings.endpoint_url).map(|e| e.trim_end_matches('/'));
        let virtual_hosted = settings.virtual_hosted_style.unwrap_or(endpoint.is_none());
        let addressing = s3_addressing(endpoint, virtual_hosted, bucket, &region);
        if let Some(endpoint) = &addressing.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        let store = builder
            .with_client_options(self.client_options(&addressing.base_url))
            .with_retry(no_retries())
            .with_virtual_hosted_style_request(virtual_hosted)
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| not_configured(format!("the S3 connection {connection:?} cannot be used: {e}")))?;
        Ok(Built {
            store: Arc::new(store),
            base_url: addressing.base_url,
        })
    }

    /// `with_client_options` replaces any `with_allow_http`: both go here.
    fn client_options(&self, url: &str) -> ClientOptions {
        ClientOptions::new()
            .with_allow_http(url.starts_with("http://"))
            .with_timeout(self.request_timeout)
            .with_connect_timeout(self.request_timeout.min(Duration::from_secs(5)))
    }
}

fn not_configured(message: String) -> WriteFailure {
    WriteFailure::new(FailureKind::NotConfigured, message)
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

fn no_retries() -> RetryConfig {
    RetryConfig {
        max_retries: 0,
        ..RetryConfig::default()
    }
}

/// How a bucket is reached.
#[derive(Debug, PartialEq, Eq)]
struct S3Addressing {
    /// What `with_endpoint` gets: for virtual-hosted style object_store takes the
    /// bucket's own endpoint, so the bucket goes into the host; `None` is AWS's default.
    endpoint: Option<String>,
    /// The bucket's URL.
    base_url: String,
}

fn s3_addressing(endpoint: Option<&str>, virtual_hosted: bool, bucket: &str, region: &str) -> S3Addressing {
    match (endpoint, virtual_hosted) {
        (Some(endpoint), false) => S3Addressing {
            endpoint: Some(endpoint.to_owned()),
            base_url: format!("{endpoint}/{bucket}"),
        },
        (Some(endpoint), true) => {
            let hosted = match endpoint.split_once("://") {
                Some((scheme, host)) => format!("{scheme}://{bucket}.{host}"),
                None => format!("{bucket}.{endpoint}"),
            };
            S3Addressing {
                endpoint: Some(hosted.clone()),
                base_url: hosted,
            }
        }
        (None, true) => S3Addressing {
            endpoint: None,
            base_url: format!("https://{bucket}.s3.{region}.amazonaws.com"),
        },
        (None, false) => S3Addressing {
            endpoint: None,
            base_url: format!("https://s3.{region}.amazonaws.com/{bucket}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eg_runtime::settings::Secret;
    use object_store::PutMode;
    use object_store::path::Path;

    fn stores(dir: PathBuf) -> Stores {
        let azure = BTreeMap::from([(
            "acct".to_owned(),
            AzureAccount {
                name: "acct".into(),
                key: Secret::new("a2V5"),
                blob_endpoint: "http://127.0.0.1:1/acct/".into(),
                queue_endpoint: String::new(),
            },
        )]);
        let s3 = BTreeMap::from([(
            "minio".to_owned(),
            S3ConnectionSettings {
                endpoint_url: "http://127.0.0.1:9000/".into(),
                region: "eu-west-1".into(),
                access_key_id: "k".into(),
                secret_access_key: Secret::new("s"),
                ..Default::default()
            },
        )]);
        Stores::new(dir, azure, s3, Duration::from_secs(1))
    }

    fn destination(store: DeadLetterStore, container: &str) -> Destination {
        Destination {
            store,
            container: container.into(),
        }
    }

    #[test]
    fn s3_buckets_are_addressed_by_path_or_by_host() {
        assert_eq!(
            s3_addressing(Some("http://minio:9000"), false, "dl", "r"),
            S3Addressing {
                endpoint: Some("http://minio:9000".into()),
                base_url: "http://minio:9000/dl".into()
            }
        );
        assert_eq!(
            s3_addressing(Some("https://r2.example"), true, "dl", "r"),
            S3Addressing {
                endpoint: Some("https://dl.r2.example".into()),
                base_url: "https://dl.r2.example".into()
            }
        );
        assert_eq!(
            s3_addressing(None, true, "dl", "eu-west-1").base_url,
            "https://dl.s3.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            s3_addressing(None, false, "dl", "eu-west-1").base_url,
            "https://s3.eu-west-1.amazonaws.com/dl"
        );
    }

    #[test]
    fn remote_stores_are_built_from_configuration_and_kept() {
        let stores = stores(std::env::temp_dir());
        let azure = destination(DeadLetterStore::AzureBlob { account: "acct".into() }, "dead");
        let built = stores.get(&azure).unwrap();
        assert_eq!(built.base_url, "http://127.0.0.1:1/acct/dead", "no double slash");
        assert!(Arc::ptr_eq(&built.store, &stores.get(&azure).unwrap().store), "kept");
        let s3 = destination(
            DeadLetterStore::S3 {
                connection: "minio".into(),
                key_prefix: String::new(),
                region: None,
                endpoint_url: None,
            },
            "bucket",
        );
        assert_eq!(stores.get(&s3).unwrap().base_url, "http://127.0.0.1:9000/bucket");
    }

    #[test]
    fn unknown_accounts_and_connections_are_not_configured() {
        let stores = stores(std::env::temp_dir());
        for store in [
            DeadLetterStore::AzureBlob { account: "gone".into() },
            DeadLetterStore::S3 {
                connection: "gone".into(),
                key_prefix: String::new(),
                region: None,
                endpoint_url: None,
            },
        ] {
            let failure = stores.get(&destination(store, "dl")).err().unwrap();
            assert_eq!(failure.kind, FailureKind::NotConfigured);
            assert!(failure.message.contains("\"gone\""), "{}", failure.message);
        }
    }

    #[tokio::test]
    async fn the_local_directory_creates_once_and_whole() {
        let root = tempfile::tempdir().unwrap();
        let stores = stores(root.path().to_path_buf());
        let local = stores.get(&destination(DeadLetterStore::LocalDirectory, "dl")).unwrap();
        assert!(local.base_url.starts_with("file:///"), "{}", local.base_url);
        let path = Path::from("SUB/2026/3/4/5/x.json");
        local
            .store
            .put_opts(&path, b"[1]".to_vec().into(), PutMode::Create.into())
            .await
            .unwrap();
        let again = local
            .store
            .put_opts(&path, b"[2]".to_vec().into(), PutMode::Create.into())
            .await;
        assert!(
            matches!(again, Err(object_store::Error::AlreadyExists { .. })),
            "{again:?}"
        );
        let folder = root.path().join("dl/SUB/2026/3/4/5");
        assert_eq!(std::fs::read(folder.join("x.json")).unwrap(), b"[1]");
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 1, "no staging file left");
        assert_eq!(
            stores
                .get(&destination(DeadLetterStore::LocalDirectory, "../up"))
                .err()
                .unwrap()
                .kind,
            FailureKind::Rejected
        );
    }
}
