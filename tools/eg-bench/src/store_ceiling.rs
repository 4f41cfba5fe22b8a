//! The write ceiling of an object store, for the dead-letter rows: objects per second the
//! `object_store` client eg-deadletter uses gets written when it writes directly, the way
//! the worker does (create-only puts of whole objects, no client retries), with as many
//! writes at once as the worker has (one per partition), objects of the size the worker
//! wrote in the same run. The worker's records per second, divided by this times the
//! records per object it wrote, is the row's ratio.
//!
//! The clients are built as `bins/eg-deadletter/src/stores.rs` builds them: the local
//! directory with fsync, Azure with the account key and an explicit endpoint, S3 with
//! the connection's keys, endpoint and path-style addressing.

use crate::brokers_ceiling::Ceiling;
use eg_testkit::{Azurite, S3Server, azurite};
use futures_util::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStore, PutMode, PutPayload, RetryConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

fn client_options() -> ClientOptions {
    // The HTTP client needs the process's TLS provider (ring, as every eg client).
    let _ = rustls::crypto::ring::default_provider().install_default();
    ClientOptions::new()
        .with_allow_http(true)
        .with_timeout(REQUEST_TIMEOUT)
        .with_connect_timeout(Duration::from_secs(5))
}

fn no_retries() -> RetryConfig {
    RetryConfig {
        max_retries: 0,
        ..RetryConfig::default()
    }
}

/// The folder `root` (which must exist), fsync on.
pub fn local(root: &std::path::Path) -> anyhow::Result<Arc<dyn ObjectStore>> {
    Ok(Arc::new(LocalFileSystem::new_with_prefix(root)?.with_fsync(true)))
}

/// `container` of the emulator's account.
pub fn azure(emulator: &Azurite, container: &str) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let store = MicrosoftAzureBuilder::new()
        .with_client_options(client_options())
        .with_retry(no_retries())
        .with_endpoint(emulator.blob_endpoint())
        .with_account(azurite::ACCOUNT)
        .with_access_key(azurite::ACCOUNT_KEY)
        .with_container_name(container)
        .build()?;
    Ok(Arc::new(store))
}

/// `bucket` of the S3 server, with its user's keys.
pub fn s3(server: &S3Server, bucket: &str) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let credentials = server.credentials();
    let store = AmazonS3Builder::new()
        .with_client_options(client_options())
        .with_retry(no_retries())
        .with_endpoint(server.endpoint())
        .with_region(server.region())
        .with_access_key_id(credentials.access_key_id)
        .with_secret_access_key(credentials.secret_access_key)
        .with_virtual_hosted_style_request(false)
        .with_bucket_name(bucket)
        .build()?;
    Ok(Arc::new(store))
}

/// How many objects `store` holds and their bytes in all.
pub async fn contents(store: &dyn ObjectStore) -> anyhow::Result<(usize, u64)> {
    let objects: Vec<object_store::ObjectMeta> = store.list(None).try_collect().await?;
    Ok((objects.len(), objects.iter().map(|o| o.size).sum()))
}

/// Writes objects of `object_bytes` under `ceiling/`, `writers` at a time, for about
/// `duration` (each writer finishes the put it has begun).
pub async fn write_ceiling(
    store: Arc<dyn ObjectStore>,
    object_bytes: usize,
    writers: usize,
    duration: Duration,
) -> anyhow::Result<Ceiling> {
    // A JSON array of the right size, as the worker's objects are.
    let mut body = vec![b'x'; object_bytes.max(2)];
    body[0] = b'[';
    body[object_bytes.max(2) - 1] = b']';
    let body = bytes::Bytes::from(body);
    let next = Arc::new(AtomicUsize::new(0));
    let run = std::process::id();
    let started = Instant::now();
    let tasks = (0..writers.max(1)).map(|_| {
        let (store, body, next) = (Arc::clone(&store), body.clone(), Arc::clone(&next));
        tokio::spawn(async move {
            let mut written = 0usize;
            while started.elapsed() < duration {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let location = ObjectPath::from(format!("ceiling/{run}/{n}.json"));
                store
                    .put_opts(&location, PutPayload::from(body.clone()), PutMode::Create.into())
                    .await?;
                written += 1;
            }
            anyhow::Ok(written)
        })
    });
    let mut messages = 0;
    for task in futures_util::future::join_all(tasks).await {
        messages += task??;
    }
    Ok(Ceiling {
        messages,
        elapsed: started.elapsed(),
    })
}
