//! The client certificates webhook deliveries may present (`[client_certificates]`,
//! docs/client-certificates.md), by name like the broker connections:
//! `EG__CLIENT_CERTIFICATES__<NAME>__CERTIFICATE_FILE` and `__KEY_FILE` (PEM files), or
//! `__PEM` (one secret holding the chain and the key). Read and checked when a tier
//! starts: a file that cannot be read, holds no certificate or no key, or a key that does
//! not belong to the certificate stops the tier, naming the setting. The key is kept
//! only in [`LoadedCertificate`], whose `Debug` leaves it out.

use super::storage::Secret;
use eg_core::UnixMillis;
use eg_core::destination::CertificateFacts;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every configured certificate, by its name (lower case, as the variables are read).
pub type ClientCertificatesSection = BTreeMap<String, ClientCertificateSettings>;

/// Where one certificate and its key are.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientCertificateSettings {
    /// PEM: the certificate, then any intermediates.
    pub certificate_file: String,
    /// PEM: its private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: String,
    /// Instead of the two files: the chain and the key in one PEM value (a secret, for
    /// deployments that pass secrets as variables).
    pub pem: Secret,
}

/// A certificate read and checked: what the sender presents.
#[derive(Clone)]
pub struct LoadedCertificate {
    /// The chain, then the key, as PEM.
    pub pem: Arc<[u8]>,
    /// When the certificate stops being valid.
    pub not_after: UnixMillis,
}

impl std::fmt::Debug for LoadedCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedCertificate")
            .field("not_after", &self.not_after.to_rfc3339())
            .finish_non_exhaustive()
    }
}

impl LoadedCertificate {
    /// What the management API checks a subscription against, at `now`.
    pub fn facts(&self, now: UnixMillis) -> CertificateFacts {
        CertificateFacts {
            not_after: self.not_after.to_rfc3339(),
            expired: self.not_after <= now,
        }
    }
}

/// Every configured certificate, read; the error names the setting that is wrong.
pub fn load_all(section: &ClientCertificatesSection) -> Result<BTreeMap<String, LoadedCertificate>, String> {
    section
        .iter()
        .map(|(name, settings)| Ok((name.clone(), load(name, settings)?)))
        .collect()
}

fn load(name: &str, settings: &ClientCertificateSettings) -> Result<LoadedCertificate, String> {
    let setting = format!("client_certificates.{name}");
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        || name.len() > 63
    {
        return Err(format!(
            "{setting}: the name must be 1-63 lower-case letters, digits or '_'"
        ));
    }
    let read = |field: &str, path: &str| {
        std::fs::read(path).map_err(|e| format!("{setting}.{field}: cannot read {path:?}: {e}"))
    };
    let (pem, cert_field, key_field) = match (
        settings.certificate_file.trim(),
        settings.key_file.trim(),
        settings.pem.is_empty(),
    ) {
        ("", "", false) => (settings.pem.expose().as_bytes().to_vec(), "pem", "pem"),
        (cert, key, true) if !cert.is_empty() && !key.is_empty() => {
            let mut pem = read("certificate_file", cert)?;
            pem.push(b'\n');
            pem.extend(read("key_file", key)?);
            (pem, "certificate_file", "key_file")
        }
        _ => {
            return Err(format!(
                "{setting}: give certificate_file and key_file (PEM files), or pem, not both"
            ));
        }
    };
    let (_, not_after) = check_pair(&setting, &pem, cert_field, key_field)?;
    Ok(LoadedCertificate {
        pem: pem.into(),
        not_after,
    })
}

/// Checks PEM holding a certificate (then any intermediates) and its private key: both
/// there, the key one eg can sign with and the certificate's. Gives the certificate (DER)
/// and when it ends; the error names `<setting>.<field>`, never the key.
pub(super) fn check_pair(
    setting: &str,
    pem: &[u8],
    cert_field: &str,
    key_field: &str,
) -> Result<(CertificateDer<'static>, UnixMillis), String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{setting}.{cert_field}: not PEM: {e}"))?;
    let Some(leaf) = chain.first().cloned() else {
        return Err(format!(
            "{setting}.{cert_field}: holds no certificate (-----BEGIN CERTIFICATE-----)"
        ));
    };
    let key = PrivateKeyDer::from_pem_slice(pem)
        .map_err(|e| format!("{setting}.{key_field}: holds no private key (-----BEGIN PRIVATE KEY-----): {e}"))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| format!("{setting}.{key_field}: a private key eg cannot sign with: {e}"))?;
    rustls::sign::CertifiedKey::new(chain, signing)
        .keys_match()
        .map_err(|_| format!("{setting}.{key_field}: the key does not belong to the certificate in {cert_field}"))?;
    let (_, parsed) = x509_parser::parse_x509_certificate(&leaf)
        .map_err(|e| format!("{setting}.{cert_field}: not an X.509 certificate: {e}"))?;
    let not_after = UnixMillis(parsed.validity().not_after.timestamp().saturating_mul(1000));
    Ok((leaf, not_after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use eg_testkit::tls::TestCa;

    fn files(cert: &std::path::Path, key: &std::path::Path) -> ClientCertificateSettings {
        ClientCertificateSettings {
            certificate_file: cert.display().to_string(),
            key_file: key.display().to_string(),
            pem: Secret::default(),
        }
    }

    #[test]
    fn a_certificate_and_its_key_are_read_from_files_or_one_pem_value() {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::generate(dir.path(), "certs");
        let section = BTreeMap::from([("partner".to_owned(), files(&ca.client.cert, &ca.client.key))]);
        let loaded = load_all(&section).unwrap();
        let partner = &loaded["partner"];
        assert!(partner.not_after > UnixMillis(0));
        assert!(!partner.facts(UnixMillis(0)).expired);
        assert!(partner.facts(partner.not_after).expired);
        assert!(
            !format!("{partner:?}").contains("PRIVATE KEY"),
            "Debug leaves the key out"
        );
        let pem = format!(
            "{}{}",
            std::fs::read_to_string(&ca.client.cert).unwrap(),
            std::fs::read_to_string(&ca.client.key).unwrap()
        );
        let one = ClientCertificateSettings {
            pem: Secret::new(pem),
            ..Default::default()
        };
        assert!(load("partner", &one).is_ok());
    }

    #[test]
    fn a_wrong_file_or_a_key_of_another_certificate_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::generate(dir.path(), "certs");
        let mismatched = load("partner", &files(&ca.client.cert, &ca.server.key)).unwrap_err();
        assert!(
            mismatched.contains("client_certificates.partner.key_file: the key does not belong"),
            "{mismatched}"
        );
        let missing = load("partner", &files(&dir.path().join("nope.pem"), &ca.client.key)).unwrap_err();
        assert!(
            missing.starts_with("client_certificates.partner.certificate_file: cannot read"),
            "{missing}"
        );
        let swapped = load("partner", &files(&ca.client.key, &ca.client.key)).unwrap_err();
        assert!(swapped.contains("holds no certificate"), "{swapped}");
        let neither = load("partner", &ClientCertificateSettings::default()).unwrap_err();
        assert!(neither.contains("give certificate_file and key_file"), "{neither}");
    }
}
