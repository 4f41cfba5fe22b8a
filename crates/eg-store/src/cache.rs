//! An in-process copy of the catalog, refreshed when the catalog version moves.
//!
//! Ingress matches publishes against it (the publish script refuses a stale copy);
//! senders and schedulers look subscriptions up in it and see changes within the
//! refresh interval, or at once when they meet a subscription they do not know yet.

use crate::catalog::Catalog;
use crate::error::StoreError;
use crate::snapshot::CatalogSnapshot;
use std::sync::{Arc, RwLock};

pub struct CatalogCache {
    catalog: Catalog,
    current: RwLock<Arc<CatalogSnapshot>>,
}

impl CatalogCache {
    pub async fn load(catalog: Catalog) -> Result<Self, StoreError> {
        let snapshot = catalog.load().await?;
        Ok(Self {
            catalog,
            current: RwLock::new(Arc::new(snapshot)),
        })
    }

    pub fn snapshot(&self) -> Arc<CatalogSnapshot> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reloads the whole catalog.
    pub async fn reload(&self) -> Result<Arc<CatalogSnapshot>, StoreError> {
        let fresh = Arc::new(self.catalog.load().await?);
        let mut guard = match self.current.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Always replace, even with a lower version: Redis may have come back empty.
        *guard = fresh.clone();
        Ok(fresh)
    }

    /// Reloads only if the catalog version moved (one cheap `GET` otherwise).
    pub async fn refresh(&self) -> Result<Arc<CatalogSnapshot>, StoreError> {
        let current = self.snapshot();
        if self.catalog.version().await? == current.version {
            return Ok(current);
        }
        self.reload().await
    }
}
