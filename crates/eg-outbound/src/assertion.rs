//! Certificate credentials (`private_key_jwt`, RFC 7523), as Entra ID takes them: each
//! token request carries a JWT the client signs RS256 with its certificate's key, whose
//! header names the certificate by thumbprint (`x5t`, SHA-1, which Entra ID reads, and
//! `x5t#S256`). The claims are `eg_core::identity::assertion_claims`; here they are only
//! signed. The signing is `jsonwebtoken`'s (over `ring`, eg's one crypto library).
//!
//! The key is held only in [`CertificateCredential`], whose `Debug` leaves it out, and an
//! assertion is a secret like the client secret it replaces: never logged.

use eg_core::UnixMillis;
use eg_core::identity::assertion_claims;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::digest;
use ring::rand::{SecureRandom, SystemRandom};
use std::fmt;

/// A certificate and its RSA key, ready to sign client assertions.
pub struct CertificateCredential {
    key: EncodingKey,
    header: Header,
}

impl fmt::Debug for CertificateCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateCredential")
            .field("x5t", &self.header.x5t)
            .finish_non_exhaustive()
    }
}

impl CertificateCredential {
    /// From the certificate (DER) and its RSA private key (PEM: PKCS#8 or PKCS#1); the
    /// error says which is wrong, never the key.
    pub fn new(certificate_der: &[u8], key_pem: &[u8]) -> Result<Self, String> {
        let key = EncodingKey::from_rsa_pem(key_pem)
            .map_err(|e| format!("not an RSA private key eg can sign RS256 with: {e}"))?;
        let mut header = Header::new(Algorithm::RS256);
        header.x5t = Some(thumbprint(&digest::SHA1_FOR_LEGACY_USE_ONLY, certificate_der));
        header.x5t_s256 = Some(thumbprint(&digest::SHA256, certificate_der));
        Ok(Self { key, header })
    }

    /// A fresh assertion for `client_id` asking `token_url`, at `now`.
    pub fn assertion(&self, client_id: &str, token_url: &str, now: UnixMillis) -> Result<String, String> {
        let claims = assertion_claims(client_id, token_url, now, jti()?);
        jsonwebtoken::encode(&self.header, &claims, &self.key)
            .map_err(|e| format!("the client assertion could not be signed: {e}"))
    }

    /// The certificate's SHA-1 thumbprint as its `x5t` header gives it (base64url): what
    /// an operator compares with the one registered with the provider.
    pub fn x5t(&self) -> &str {
        self.header.x5t.as_deref().unwrap_or_default()
    }
}

fn thumbprint(algorithm: &'static digest::Algorithm, der: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest::digest(algorithm, der))
}

/// 128 random bits, hex: a `jti` no provider has seen before.
fn jti() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "no randomness for the client assertion's jti".to_owned())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
