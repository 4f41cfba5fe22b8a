//! The ingress application: shared state and routes.

use crate::validation::Validator;
use crate::{admin, publish};
use axum::Router;
use axum::http::Request;
use axum::routing::{get, post};
use eg_core::event::PublishLimits;
use eg_runtime::ops;
use eg_runtime::startup::Process;
use eg_store::{Catalog, CatalogCache, Clock, Store};
use std::sync::Arc;
use tower_http::trace::TraceLayer;

pub struct App {
    pub store: Store,
    pub catalog: Catalog,
    pub cache: Arc<CatalogCache>,
    pub clock: Clock,
    pub limits: PublishLimits,
    pub max_request_bytes: usize,
    /// Longest a publish waits on Redis before answering `503`.
    pub storage_timeout: std::time::Duration,
    pub max_subscriptions_per_topic: u32,
    /// Base of each topic's `endpoint`.
    pub public_url: String,
    pub admin_token: Option<String>,
    pub validator: Validator,
}

impl App {
    pub async fn build(process: &Process) -> anyhow::Result<Arc<Self>> {
        let s = &process.settings;
        let catalog = Catalog::new(process.store.clone());
        let cache = Arc::new(CatalogCache::load(catalog.clone()).await?);
        let public_url = s
            .ingress
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", s.ingress.listen));
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
            storage_timeout: s.ingress.storage_timeout,
            max_subscriptions_per_topic: s.ingress.max_subscriptions_per_topic,
            validator: Validator::new(s, &public_url)?,
            public_url,
            admin_token: s.admin.token.clone().filter(|t| !t.is_empty()),
        }))
    }

    pub fn router(self: &Arc<Self>, process: &Process) -> Router {
        let mut router = Router::new()
            .route("/topics/{topic}/api/events", post(publish::publish))
            .route(
                "/validation/topics/{topic}/eventSubscriptions/{name}",
                get(admin::manual_validation),
            )
            .with_state(self.clone());
        if self.admin_token.is_some() {
            router = router.nest("/admin", admin::router(self.clone()));
        }
        // A span per request with the path only: a query may carry `aeg-sas-key`.
        let trace = TraceLayer::new_for_http().make_span_with(
            |r: &Request<_>| tracing::info_span!("request", method = %r.method(), path = %r.uri().path()),
        );
        router
            .merge(ops::router(process.store.clone(), process.metrics.clone()))
            .route("/", get(|| async { "eg-ingress" }))
            .layer(trace)
    }
}
