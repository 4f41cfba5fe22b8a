//! How the guarded client is configured: its settings, the client certificates it may
//! present, and why one could not be built.

use eg_core::address::AddressPolicy;
use rustls::pki_types::pem::{PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use std::time::Duration;

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
pub struct ClientCertificate {
    name: String,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl ClientCertificate {
    /// From PEM holding the certificate chain (leaf first) and the private key (PKCS#8,
    /// PKCS#1 or SEC1).
    pub fn from_pem(name: &str, pem: &[u8]) -> Result<Self, BuildError> {
        let mut chain = Vec::new();
        let mut key = None;
        for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem) {
            let (kind, der) = section.map_err(|e| BuildError::new("the client certificate's PEM", e))?;
            match kind {
                SectionKind::Certificate => chain.push(CertificateDer::from(der)),
                SectionKind::PrivateKey => key = Some(PrivateKeyDer::Pkcs8(der.into())),
                SectionKind::RsaPrivateKey => key = Some(PrivateKeyDer::Pkcs1(der.into())),
                SectionKind::EcPrivateKey => key = Some(PrivateKeyDer::Sec1(der.into())),
                _ => {}
            }
        }
        match key {
            Some(key) if !chain.is_empty() => Ok(Self {
                name: name.to_owned(),
                chain,
                key,
            }),
            _ => Err(BuildError::new(
                "the client certificate",
                "its PEM needs a certificate and a private key",
            )),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    pub(crate) fn key(&self) -> PrivateKeyDer<'static> {
        self.key.clone_key()
    }
}

impl Clone for ClientCertificate {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl std::fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertificate")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The client could not be built: what of its configuration failed, and why.
#[derive(Debug, thiserror::Error)]
#[error("could not build the outbound HTTP client: {what}: {source}")]
pub struct BuildError {
    what: &'static str,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl BuildError {
    pub(crate) fn new(what: &'static str, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            what,
            source: source.into(),
        }
    }
}
