//! The identities eg signs in with to get webhook delivery tokens (`[identities]`,
//! docs/oauth-delivery.md), by name, like the broker connections: an Entra ID app
//! registration (`EG__IDENTITIES__<NAME>__TENANT_ID`, `__CLIENT_ID`, `__CLIENT_SECRET`)
//! or any OAuth 2.0 provider's client (`__KIND=oauth2`, `__TOKEN_URL`, …). A
//! subscription names an identity (or, in Event Grid's JSON, its tenant); only these
//! settings hold the secret ([`Secret`]: never printed).

use super::storage::Secret;
use eg_core::identity::{IdentityFacts, TokenTarget};
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
        if self.client_secret.is_empty() {
            return Err(format!(
                "{}: required, the client's secret (certificate credentials are not supported yet)",
                setting("client_secret")
            ));
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
}
