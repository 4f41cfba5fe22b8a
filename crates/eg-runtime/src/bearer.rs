//! A webhook's bearer token (docs/oauth-delivery.md): which configured identity a
//! subscription's `WebhookAuth` means, and its token from the process's shared cache
//! (`eg_outbound::Tokens`), with the token requests counted in metrics. The senders put
//! it on deliveries, the ingress on validation handshakes.

use crate::metrics as m;
use crate::settings::Settings;
use crate::settings::identities::{IdentitiesSection, for_tenant};
use eg_core::destination::WebhookAuth;
use eg_core::identity::{AccessToken, TokenTarget};
use eg_outbound::{TokenError, TokenSource, Tokens};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The process's identities and their tokens.
pub struct Bearer {
    tokens: Arc<Tokens>,
    identities: IdentitiesSection,
}

/// The token one request carries, and what it was asked for (to forget it on a `401`).
pub struct Granted {
    pub token: AccessToken,
    identity: String,
    target: TokenTarget,
}

impl Bearer {
    /// Every identity of the settings, none asked yet.
    pub fn from_settings(settings: &Settings) -> anyhow::Result<Self> {
        let sources: BTreeMap<String, TokenSource> = settings
            .identities
            .iter()
            .map(|(name, identity)| {
                let source = TokenSource {
                    token_url: identity.token_url(),
                    client_id: identity.client_id.clone(),
                    credential: identity.credential(name).map_err(anyhow::Error::msg)?,
                    default_target: identity.default_target(),
                    refresh_before: identity.refresh_before,
                };
                Ok((name.clone(), source))
            })
            .collect::<anyhow::Result<_>>()?;
        let observe = Arc::new(
            |identity: &str, result: eg_outbound::RequestResult, took: Duration, problem: Option<&str>| {
                let name = identity.to_owned();
                metrics::counter!(m::TOKEN_REQUEST_COUNT, "identity" => name.clone(), "result" => result.as_str())
                    .increment(1);
                metrics::histogram!(m::TOKEN_REQUEST_DURATION_MS, "identity" => name)
                    .record(took.as_secs_f64() * 1000.0);
                // One line per failed request: a failing provider is asked ever less often.
                if let Some(problem) = problem {
                    tracing::warn!(identity, %problem, "cannot get a webhook delivery token");
                }
            },
        );
        Ok(Self {
            tokens: Arc::new(Tokens::new(sources, observe)?),
            identities: settings.identities.clone(),
        })
    }

    /// A token for a request to a webhook with `auth`, got within `timeout`.
    pub async fn grant(&self, auth: &WebhookAuth, timeout: Duration) -> Result<Granted, TokenError> {
        let identity = self.identity_of(auth).ok_or_else(|| match auth {
            WebhookAuth::EntraId { tenant, .. } => TokenError::UnknownIdentity(format!("for tenant {tenant}")),
            WebhookAuth::OAuth2 { identity, .. } => TokenError::UnknownIdentity(identity.clone()),
        })?;
        let target = auth.target();
        let token = self.tokens.token(&identity, &target, timeout).await?;
        Ok(Granted {
            token,
            identity,
            target,
        })
    }

    /// Forgets a token an endpoint refused, so the next grant asks the provider again.
    pub fn forget(&self, granted: &Granted) {
        self.tokens.forget(&granted.identity, &granted.target, &granted.token);
    }

    /// The configured identity a webhook with `auth` gets its tokens from.
    pub fn identity_of(&self, auth: &WebhookAuth) -> Option<String> {
        auth.identity_name(|tenant| for_tenant(&self.identities, tenant))
    }

    /// The identities whose provider failed its last request.
    pub fn problems(&self) -> Vec<eg_outbound::IdentityProblem> {
        self.tokens.problems()
    }

    /// A handle on the same tokens' health, for a task that reports it
    /// (the sender's `identities` module).
    pub fn watch(&self) -> TokenWatch {
        TokenWatch(Arc::clone(&self.tokens))
    }
}

/// Reads which identities are failing, without granting tokens.
#[derive(Clone)]
pub struct TokenWatch(Arc<Tokens>);

impl TokenWatch {
    /// The identities whose provider failed its last request.
    pub fn problems(&self) -> Vec<eg_outbound::IdentityProblem> {
        self.0.problems()
    }
}
