//! What the writers' tests share: a local-directory object store that fails on purpose
//! (its first puts refused before writing, or — as a connection reset after the upload —
//! failing after really writing the object), and a connection to a test Redis.
#![allow(clippy::unwrap_used)]

use async_trait::async_trait;
use eg_store::{RedisSettings, Store};
use eg_testkit::RedisServer;
use futures_util::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult,
};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A store whose first `refused` puts fail without writing, and whose next `lost` puts
/// write the object and then fail.
#[derive(Debug)]
pub(crate) struct Faulty {
    inner: LocalFileSystem,
    refused: AtomicUsize,
    lost: AtomicUsize,
}

impl Faulty {
    /// A store under `root` (created) refusing its first `refused` puts, then losing the
    /// answer of the next `lost`.
    pub(crate) fn new(root: &Path, refused: usize, lost: usize) -> Self {
        std::fs::create_dir_all(root).unwrap();
        Self {
            inner: LocalFileSystem::new_with_prefix(root).unwrap(),
            refused: AtomicUsize::new(refused),
            lost: AtomicUsize::new(lost),
        }
    }
}

/// Takes one from `count` unless it is zero; whether it did.
fn take_one(count: &AtomicUsize) -> bool {
    count
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

impl std::fmt::Display for Faulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if take_one(&self.refused) {
            return Err(object_store::Error::Generic {
                store: "Faulty",
                source: "connection refused".into(),
            });
        }
        let result = self.inner.put_opts(location, payload, opts).await?;
        if take_one(&self.lost) {
            return Err(object_store::Error::Generic {
                store: "Faulty",
                source: "connection reset after the upload".into(),
            });
        }
        Ok(result)
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &ObjectPath, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&ObjectPath>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&ObjectPath>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &ObjectPath, to: &ObjectPath, options: CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// eg's store on `server`, one partition, its layout and consumer groups in place.
pub(crate) async fn connect(server: &RedisServer) -> Store {
    let store = Store::connect(&RedisSettings {
        partitions: 1,
        pool_size: 4,
        command_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        ..RedisSettings::for_url(server.url())
    })
    .unwrap();
    store.check_layout().await.unwrap();
    store.ensure_groups().await.unwrap();
    store
}
