//! A real HTTP receiver on 127.0.0.1:0 that counts the TCP connections it accepts and
//! records the requests it sees, and clients built with or without an allow-list.

#![allow(dead_code, clippy::unwrap_used)]

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, Method};
use axum::middleware::{self, Next};
use axum::serve::ListenerExt;
use eg_core::address::AddressPolicy;
use eg_outbound::{Client, OutboundSettings};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
}

pub struct Receiver {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Receiver {
    pub fn url(&self, path_and_query: &str) -> String {
        format!("http://{}{path_and_query}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Proves nothing reached this receiver before: one request from a client that
    /// is allowed to connect must be the first connection and the first request.
    /// (Connections are accepted in order, so an earlier one would be counted first.)
    pub async fn assert_untouched_so_far(&self) {
        assert_eq!(self.seen().len(), 0, "the receiver saw a request");
        let response = loopback_client()
            .request(Method::GET, &self.url("/__probe"))
            .send()
            .await
            .unwrap();
        drop(response);
        assert_eq!(
            self.connections(),
            1,
            "the receiver had accepted a connection before the probe"
        );
        assert_eq!(self.seen().len(), 1);
    }
}

pub async fn spawn(router: Router) -> Receiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let counter = Arc::clone(&connections);
    let listener = listener.tap_io(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let record = Arc::clone(&seen);
    let router = router
        .route("/__probe", axum::routing::get(|| async { "probe" }))
        .layer(middleware::from_fn(move |request: Request, next: Next| {
            let record = Arc::clone(&record);
            async move {
                record.lock().unwrap().push(Seen {
                    method: request.method().clone(),
                    path: request.uri().path().to_owned(),
                    headers: request.headers().clone(),
                });
                next.run(request).await
            }
        }));
    tokio::spawn(async move { axum::serve(listener, router).await });
    Receiver {
        addr,
        connections,
        seen,
    }
}

pub fn client(policy: AddressPolicy, timeout: Duration) -> Client {
    Client::new(OutboundSettings {
        timeout,
        connect_timeout: timeout,
        policy,
        user_agent: "eg-outbound-tests".into(),
        extra_roots_pem: None,
    })
    .unwrap()
}

/// The deployment default: nothing allowed.
pub fn guarded_client() -> Client {
    client(AddressPolicy::default(), Duration::from_secs(5))
}

/// Allowed to reach the local receivers.
pub fn loopback_client() -> Client {
    client(
        AddressPolicy::parse(["127.0.0.1/32", "::1"]).unwrap(),
        Duration::from_secs(5),
    )
}
