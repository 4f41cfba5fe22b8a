//! The receiver behind HTTPS that requires a client certificate signed by one CA (mutual
//! TLS): a connection whose handshake fails (no certificate, or one of another CA) is
//! counted and dropped, as a server with `ssl_verify_client on` does.

use axum::serve::Listener;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Accepts TCP connections and completes their TLS handshake before handing them on.
pub(super) struct MutualTlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    /// Handshakes refused (no or a wrong client certificate).
    pub(super) refused: Arc<AtomicU64>,
}

impl MutualTlsListener {
    /// Serves `cert`/`key` (PEM files) and requires clients to present a certificate
    /// signed by the CA in `client_ca` (PEM).
    pub(super) async fn bind(cert: &Path, key: &Path, client_ca: &Path) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .expect("read the server certificate")
            .collect::<Result<_, _>>()
            .expect("PEM server certificate");
        let key = PrivateKeyDer::from_pem_file(key).expect("the server key");
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_file_iter(client_ca).expect("read the client CA") {
            roots.add(ca.expect("PEM CA")).expect("a CA certificate");
        }
        let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
            .build()
            .expect("a client verifier");
        let config = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .expect("a TLS server configuration");
        Self {
            tcp: TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver"),
            acceptor: TlsAcceptor::from(Arc::new(config)),
            refused: Arc::default(),
        }
    }
}

impl Listener for MutualTlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, address)) = self.tcp.accept().await else {
                continue;
            };
            match self.acceptor.accept(stream).await {
                Ok(tls) => return (tls, address),
                Err(_) => {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
