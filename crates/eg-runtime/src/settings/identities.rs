//! The identities eg signs in with to get webhook delivery tokens (`[identities]`,
//! docs/oauth-delivery.md), by name, like the broker connections: an Entra ID app
//! registration (`EG__IDENTITIES__<NAME>__TENANT_ID`, `__CLIENT_ID`, `__CLIENT_SECRET`)
//! or any OAuth 2.0 provider's client (`__KIND=oauth2`, `__TOKEN_URL`, …). A
//! subscription names an identity (or, in Event Grid's JSON, its tenant); only these
//! settings hold the secret ([`Secret`]: never printed). Instead of a secret, an identity
//! may sign in with a certificate (`__CERTIFICATE_FILE`, `__KEY_FILE`): read and checked
//! when a tier starts, an expired one stopping it, like the client certificates.

use super::storage::Secret;
use eg_core::UnixMillis;
use eg_core::identity::{IdentityFacts, TokenTarget};
use eg_outbound::{CertificateCredential, Credential};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Entra ID's public cloud; national clouds set `__AUTHORITY`.
pub const ENTRA_AUTHORITY: &str = "https://login.microsoftonline.com";

/// Every identity, by its name (lower case, as the variables are read).
pub type IdentitiesSection = BTreeMap<String, IdentitySettings>;

/// One client that gets tokens with the client-credentials grant.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdentitySettings {
    /// `entra` or `oauth2`; empty: `entra` when a tenant is given, else `oauth2`.
    pub kind: String,
    /// Entra ID: the tenant (GUID or domain) subscriptions' `azureActiveDirectoryTenantId`
    /// is matched against (ignoring case).
    pub tenant_id: String,
    /// Entra ID: the authority host the token URL is built on.
    pub authority: String,
    /// The token endpoint. Required for `oauth2`; for `entra` it replaces
    /// `<authority>/<tenant>/oauth2/v2.0/token` (a proxy, or a test's provider).
    pub token_url: String,
    pub client_id: String,
    pub client_secret: Secret,
    /// Instead of the secret, a certificate (PEM) whose key signs each request's client
    /// assertion (`private_key_jwt`); registered with the provider.
    pub certificate_file: String,
    /// Its RSA private key (PEM, PKCS#8 or PKCS#1).
    pub key_file: String,
    /// What a token is asked for when a subscription names this identity without
    /// `tokenScope` or `tokenAudience`.
    pub scope: String,
    pub audience: String,
    /// How long before its end a cached token is renewed (never in its first half).
    #[serde(with = "humantime_serde")]
    pub refresh_before: Duration,
}

impl Default for IdentitySettings {
    fn default() -> Self {
        Self {
            kind: String::new(),
            tenant_id: String::new(),
            authority: ENTRA_AUTHORITY.to_owned(),
            token_url: String::new(),
            client_id: String::new(),
            client_secret: Secret::default(),
            certificate_file: String::new(),
            key_file: String::new(),
            scope: String::new(),
            audience: String::new(),
            refresh_before: Duration::from_secs(300),
        }
    }
}

/// Which kind of provider an identity signs in to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityKind {
    Entra,
    OAuth2,
}

impl IdentitySettings {
    pub fn kind(&self) -> IdentityKind {
        match self.kind.as_str() {
            "oauth2" => IdentityKind::OAuth2,
            "entra" => IdentityKind::Entra,
            _ if self.tenant_id.is_empty() => IdentityKind::OAuth2,
            _ => IdentityKind::Entra,
        }
    }

    /// Where tokens are asked for.
    pub fn token_url(&self) -> String {
        if self.token_url.is_empty() {
            format!(
                "{}/{}/oauth2/v2.0/token",
                self.authority.trim_end_matches('/'),
                self.tenant_id
            )
        } else {
            self.token_url.clone()
        }
    }

    /// What a token is asked for when a subscription gives nothing.
    pub fn default_target(&self) -> TokenTarget {
        let given = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        TokenTarget {
            scope: given(&self.scope),
            audience: given(&self.audience),
        }
    }

    /// Checks one identity, naming the setting that is wrong.
    fn validate(&self, name: &str) -> Result<(), String> {
        let setting = |key: &str| {
            format!(
                "identities.{name}.{key} (EG__IDENTITIES__{}__{})",
                name.to_ascii_uppercase(),
                key.to_ascii_uppercase()
            )
        };
        if !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(format!(
                "identities.{name}: an identity name is lower-case letters, digits and '_'"
            ));
        }
        if !matches!(self.kind.as_str(), "" | "entra" | "oauth2") {
            return Err(format!(
                "{}: must be \"entra\" or \"oauth2\", got {:?}",
                setting("kind"),
                self.kind
            ));
        }
        if self.client_id.is_empty() {
            return Err(format!("{}: required, the client eg signs in as", setting("client_id")));
        }
        let with_certificate = !self.certificate_file.trim().is_empty() || !self.key_file.trim().is_empty();
        match (self.client_secret.is_empty(), with_certificate) {
            (true, false) => {
                return Err(format!(
                    "{}: required, the client's secret (or a certificate: {} and {})",
                    setting("client_secret"),
                    setting("certificate_file"),
                    setting("key_file")
                ));
            }
            (false, true) => {
                return Err(format!(
                    "{} and {}: give the client's secret or a certificate, not both",
                    setting("client_secret"),
                    setting("certificate_file")
                ));
            }
            _ => {}
        }
        if with_certificate {
            self.certificate(name, now())?;
        }
        match self.kind() {
            IdentityKind::Entra if self.tenant_id.is_empty() => {
                return Err(format!("{}: required for an Entra ID identity", setting("tenant_id")));
            }
            IdentityKind::OAuth2 if self.token_url.is_empty() => {
                return Err(format!(
                    "{}: required for an oauth2 identity, the provider's token endpoint",
                    setting("token_url")
                ));
            }
            _ => {}
        }
        let (key, url) = if self.token_url.is_empty() {
            ("authority", self.authority.as_str())
        } else {
            ("token_url", self.token_url.as_str())
        };
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(format!("{}: must be an http(s) URL, got {url:?}", setting(key)));
        }
        Ok(())
    }
}

impl IdentitySettings {
    /// How this identity proves itself: its secret, or its certificate read and checked
    /// at `now` (an expired one refused). The error names the setting.
    pub fn credential(&self, name: &str) -> Result<Credential, String> {
        if self.client_secret.is_empty() {
            Ok(Credential::Certificate(self.certificate(name, now())?.into()))
        } else {
            Ok(Credential::Secret(self.client_secret.expose().to_owned()))
        }
    }

    fn certificate(&self, name: &str, now: UnixMillis) -> Result<CertificateCredential, String> {
        let setting = |key: &str| {
            format!(
                "identities.{name}.{key} (EG__IDENTITIES__{}__{})",
                name.to_ascii_uppercase(),
                key.to_ascii_uppercase()
            )
        };
        let read = |key: &str, path: &str| {
            if path.is_empty() {
                return Err(format!("{}: required with a certificate", setting(key)));
            }
            std::fs::read(path).map_err(|e| format!("{}: cannot read {path:?}: {e}", setting(key)))
        };
        let certificate = read("certificate_file", self.certificate_file.trim())?;
        let key = read("key_file", self.key_file.trim())?;
        let mut pem = certificate;
        pem.push(b'\n');
        pem.extend_from_slice(&key);
        let (leaf, not_after) =
            super::certificates::check_pair(&format!("identities.{name}"), &pem, "certificate_file", "key_file")?;
        if not_after <= now {
            return Err(format!(
                "{}: the certificate expired on {}; renew it (and register the new one with the provider)",
                setting("certificate_file"),
                not_after.to_rfc3339()
            ));
        }
        CertificateCredential::new(&leaf, &key).map_err(|e| format!("{}: {e}", setting("key_file")))
    }
}

/// The wall clock, for a certificate's expiry.
fn now() -> UnixMillis {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    UnixMillis(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
}

/// Checks every identity.
pub fn validate(identities: &IdentitiesSection) -> Result<(), String> {
    identities
        .iter()
        .try_for_each(|(name, identity)| identity.validate(name))
}

/// What the management API may know of the identity `name`.
pub fn facts(identities: &IdentitiesSection, name: &str) -> Option<IdentityFacts> {
    identities.get(name).map(|i| IdentityFacts {
        has_default_target: !i.default_target().is_empty(),
    })
}

/// The identity serving the Entra ID `tenant`: the first by name when several do (a
/// subscription picks another with `deliveryIdentity`).
pub fn for_tenant(identities: &IdentitiesSection, tenant: &str) -> Option<String> {
    identities
        .iter()
        .find(|(_, i)| i.kind() == IdentityKind::Entra && i.tenant_id.eq_ignore_ascii_case(tenant))
        .map(|(name, _)| name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    fn load(env: &[(&str, &str)]) -> Result<Settings, String> {
        Settings::load(None, env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))).map_err(|e| e.to_string())
    }

    #[test]
    fn identities_come_from_the_environment_and_never_print_their_secret() {
        let s = load(&[
            ("EG__IDENTITIES__CORP__TENANT_ID", "Contoso.onmicrosoft.com"),
            ("EG__IDENTITIES__CORP__CLIENT_ID", "app"),
            ("EG__IDENTITIES__CORP__CLIENT_SECRET", "hunter2"),
            ("EG__IDENTITIES__PARTNER__TOKEN_URL", "http://127.0.0.1:9/token"),
            ("EG__IDENTITIES__PARTNER__CLIENT_ID", "eg"),
            ("EG__IDENTITIES__PARTNER__CLIENT_SECRET", "hunter3"),
            ("EG__IDENTITIES__PARTNER__AUDIENCE", "https://partner"),
            ("EG__IDENTITIES__PARTNER__REFRESH_BEFORE", "30s"),
        ])
        .unwrap();
        let corp = &s.identities["corp"];
        assert_eq!(corp.kind(), IdentityKind::Entra);
        assert_eq!(
            corp.token_url(),
            "https://login.microsoftonline.com/Contoso.onmicrosoft.com/oauth2/v2.0/token"
        );
        let partner = &s.identities["partner"];
        assert_eq!(partner.kind(), IdentityKind::OAuth2);
        assert_eq!(partner.refresh_before, Duration::from_secs(30));
        assert_eq!(
            for_tenant(&s.identities, "contoso.ONMICROSOFT.com"),
            Some("corp".into())
        );
        assert_eq!(for_tenant(&s.identities, "other"), None);
        assert_eq!(
            facts(&s.identities, "partner").map(|f| f.has_default_target),
            Some(true)
        );
        assert_eq!(facts(&s.identities, "corp").map(|f| f.has_default_target), Some(false));
        let printed = format!("{s:?}");
        assert!(!printed.contains("hunter"), "{printed}");
    }

    #[test]
    fn a_wrong_identity_is_refused_at_start_naming_the_setting() {
        let e = load(&[
            ("EG__IDENTITIES__CORP__TENANT_ID", "t"),
            ("EG__IDENTITIES__CORP__CLIENT_SECRET", "s"),
        ])
        .unwrap_err();
        assert!(e.contains("EG__IDENTITIES__CORP__CLIENT_ID"), "{e}");
        let e = load(&[
            ("EG__IDENTITIES__CORP__TENANT_ID", "t"),
            ("EG__IDENTITIES__CORP__CLIENT_ID", "c"),
        ])
        .unwrap_err();
        assert!(e.contains("EG__IDENTITIES__CORP__CLIENT_SECRET"), "{e}");
        let e = load(&[
            ("EG__IDENTITIES__P__CLIENT_ID", "c"),
            ("EG__IDENTITIES__P__CLIENT_SECRET", "s"),
        ])
        .unwrap_err();
        assert!(e.contains("EG__IDENTITIES__P__TOKEN_URL"), "{e}");
        let e = load(&[
            ("EG__IDENTITIES__P__KIND", "saml"),
            ("EG__IDENTITIES__P__CLIENT_ID", "c"),
            ("EG__IDENTITIES__P__CLIENT_SECRET", "s"),
        ])
        .unwrap_err();
        assert!(e.contains("EG__IDENTITIES__P__KIND"), "{e}");
        let e = load(&[
            ("EG__IDENTITIES__P__TOKEN_URL", "ftp://x"),
            ("EG__IDENTITIES__P__CLIENT_ID", "c"),
            ("EG__IDENTITIES__P__CLIENT_SECRET", "s"),
        ])
        .unwrap_err();
        assert!(e.contains("EG__IDENTITIES__P__TOKEN_URL"), "{e}");
    }

    #[test]
    fn an_identity_signs_in_with_a_certificate_instead_of_a_secret() {
        use eg_testkit::oauth_server::{CLIENT_KEY_PEM, client_certificate};
        let dir = tempfile::tempdir().unwrap();
        let issued = client_certificate(dir.path(), "corp", CLIENT_KEY_PEM, false);
        let (cert, key) = (issued.cert.display().to_string(), issued.key.display().to_string());
        let s = load(&[
            ("EG__IDENTITIES__CORP__TENANT_ID", "t"),
            ("EG__IDENTITIES__CORP__CLIENT_ID", "app"),
            ("EG__IDENTITIES__CORP__CERTIFICATE_FILE", &cert),
            ("EG__IDENTITIES__CORP__KEY_FILE", &key),
        ])
        .unwrap();
        let credential = s.identities["corp"].credential("corp").unwrap();
        let Credential::Certificate(certificate) = &credential else {
            panic!("a certificate credential, got {credential:?}");
        };
        let jwt = certificate
            .assertion("app", "https://login.example/t/token", UnixMillis(1_700_000_000_000))
            .unwrap();
        assert_eq!(jwt.split('.').count(), 3, "{jwt}");
        assert!(!format!("{credential:?}").contains("PRIVATE"), "{credential:?}");
    }

    #[test]
    fn a_secret_and_a_certificate_together_or_an_expired_certificate_are_refused() {
        use eg_testkit::oauth_server::{CLIENT_KEY_PEM, OTHER_KEY_PEM, client_certificate};
        let dir = tempfile::tempdir().unwrap();
        let good = client_certificate(dir.path(), "good", CLIENT_KEY_PEM, false);
        let expired = client_certificate(dir.path(), "old", CLIENT_KEY_PEM, true);
        let other = client_certificate(dir.path(), "other", OTHER_KEY_PEM, false);
        let with = |cert: &std::path::Path, key: &std::path::Path, secret: Option<&str>| {
            let (cert, key) = (cert.display().to_string(), key.display().to_string());
            let mut env = vec![
                ("EG__IDENTITIES__CORP__TENANT_ID", "t".to_owned()),
                ("EG__IDENTITIES__CORP__CLIENT_ID", "app".to_owned()),
                ("EG__IDENTITIES__CORP__CERTIFICATE_FILE", cert),
                ("EG__IDENTITIES__CORP__KEY_FILE", key),
            ];
            if let Some(secret) = secret {
                env.push(("EG__IDENTITIES__CORP__CLIENT_SECRET", secret.to_owned()));
            }
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            load(&env).unwrap_err()
        };
        let both = with(&good.cert, &good.key, Some("s"));
        assert!(
            both.contains("EG__IDENTITIES__CORP__CLIENT_SECRET") && both.contains("not both"),
            "{both}"
        );
        let old = with(&expired.cert, &expired.key, None);
        assert!(
            old.contains("EG__IDENTITIES__CORP__CERTIFICATE_FILE") && old.contains("expired on 2020-01-01"),
            "{old}"
        );
        let mismatched = with(&good.cert, &other.key, None);
        assert!(
            mismatched.contains("identities.corp.key_file: the key does not belong"),
            "{mismatched}"
        );
        let neither = load(&[
            ("EG__IDENTITIES__CORP__TENANT_ID", "t"),
            ("EG__IDENTITIES__CORP__CLIENT_ID", "app"),
            ("EG__IDENTITIES__CORP__KEY_FILE", "/nonexistent.key"),
        ])
        .unwrap_err();
        assert!(
            neither.contains("EG__IDENTITIES__CORP__CERTIFICATE_FILE): required"),
            "{neither}"
        );
    }
}
