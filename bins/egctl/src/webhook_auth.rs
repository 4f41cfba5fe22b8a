//! A webhook's bearer token on the command line (docs/oauth-delivery.md): Event Grid's
//! Entra ID pair (`--aad-tenant`, `--aad-application`) or eg's generic form
//! (`--delivery-identity` with `--token-scope` / `--token-audience`), written into the
//! WebHook destination's properties as the API takes them, and how `show` names it.
//! egctl only shapes the JSON; eg-ingress refuses an identity eg lacks, naming the
//! setting to add.

use clap::Args;
use serde_json::{Value, json};

/// The token flags of `subscriptions create` (webhooks only).
#[derive(Debug, Clone, Default, Args)]
pub struct WebhookAuthFlags {
    /// Entra ID: the tenant that issues the webhook's token
    /// (azureActiveDirectoryTenantId); an identity for it must be configured in eg
    #[arg(long, value_name = "TENANT", requires = "aad_application", conflicts_with_all = crate::endpoints::NOT_WEBHOOKS)]
    pub aad_tenant: Option<String>,
    /// Entra ID: the application id or URI the token is for (scope <APP>/.default)
    #[arg(long, value_name = "APP", requires = "aad_tenant")]
    pub aad_application: Option<String>,
    /// The identity configured in eg (EG__IDENTITIES__<NAME>__…) that gets the token
    #[arg(long, value_name = "NAME", conflicts_with_all = crate::endpoints::NOT_WEBHOOKS)]
    pub delivery_identity: Option<String>,
    /// OAuth 2.0: the scope the token is asked for
    #[arg(
        long,
        value_name = "SCOPE",
        requires = "delivery_identity",
        conflicts_with = "aad_tenant"
    )]
    pub token_scope: Option<String>,
    /// OAuth 2.0: the audience the token is asked for
    #[arg(
        long,
        value_name = "AUDIENCE",
        requires = "delivery_identity",
        conflicts_with = "aad_tenant"
    )]
    pub token_audience: Option<String>,
    /// The client certificate configured in eg (EG__CLIENT_CERTIFICATES__<NAME>__…) the
    /// webhook's TLS handshakes present (docs/client-certificates.md)
    #[arg(long, value_name = "NAME", conflicts_with_all = crate::endpoints::NOT_WEBHOOKS)]
    pub client_certificate: Option<String>,
}

impl WebhookAuthFlags {
    /// Adds the given flags to a WebHook `destination`.
    pub fn apply(&self, destination: &mut Value) {
        let props = &mut destination["properties"];
        for (key, value) in [
            ("azureActiveDirectoryTenantId", &self.aad_tenant),
            ("azureActiveDirectoryApplicationIdOrUri", &self.aad_application),
            ("deliveryIdentity", &self.delivery_identity),
            ("tokenScope", &self.token_scope),
            ("tokenAudience", &self.token_audience),
            ("clientCertificate", &self.client_certificate),
        ] {
            if let Some(value) = value {
                props[key] = json!(value);
            }
        }
    }
}

/// How `show` names a webhook's token, from its destination properties as the API shows
/// them; `None` when it sends none.
pub fn describe(props: &Value) -> Option<String> {
    let text = |key: &str| props[key].as_str();
    let identity = text("deliveryIdentity").map(|name| format!(" with identity {name}"));
    match (
        text("azureActiveDirectoryTenantId"),
        text("azureActiveDirectoryApplicationIdOrUri"),
    ) {
        (Some(tenant), Some(app)) => Some(format!(
            "Entra ID tenant {tenant}, for {app}{}",
            identity.unwrap_or_default()
        )),
        _ => {
            let name = text("deliveryIdentity")?;
            let asked: Vec<&str> = [text("tokenScope"), text("tokenAudience")]
                .into_iter()
                .flatten()
                .collect();
            Some(if asked.is_empty() {
                format!("identity {name} (its default scope)")
            } else {
                format!("identity {name}, for {}", asked.join(" "))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command, SubscriptionCommand};
    use clap::Parser;

    fn create(args: &[&str]) -> Result<Value, clap::Error> {
        let line = ["egctl", "subscriptions", "create", "orders", "audit"]
            .iter()
            .chain(args);
        match Cli::try_parse_from(line)?.command {
            Command::Subscriptions(SubscriptionCommand::Create(a)) => {
                let mut destination = json!({"endpointType": "WebHook", "properties": {}});
                a.auth.apply(&mut destination);
                Ok(destination["properties"].clone())
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_token_flags_write_event_grid_and_eg_keys() {
        let entra = create(&[
            "--endpoint",
            "https://h/x",
            "--aad-tenant",
            "contoso",
            "--aad-application",
            "api://o",
        ])
        .unwrap();
        assert_eq!(entra["azureActiveDirectoryTenantId"], "contoso");
        assert_eq!(entra["azureActiveDirectoryApplicationIdOrUri"], "api://o");
        assert_eq!(describe(&entra).unwrap(), "Entra ID tenant contoso, for api://o");
        let generic = create(&[
            "--endpoint",
            "https://h/x",
            "--delivery-identity",
            "partner",
            "--token-audience",
            "https://p",
        ])
        .unwrap();
        assert_eq!(generic["tokenAudience"], "https://p");
        assert_eq!(describe(&generic).unwrap(), "identity partner, for https://p");
        assert_eq!(describe(&json!({"endpointBaseUrl": "https://h/x"})), None);
    }

    #[test]
    fn half_given_or_misplaced_token_flags_are_refused() {
        assert!(create(&["--endpoint", "https://h/x", "--aad-tenant", "contoso"]).is_err());
        assert!(create(&["--endpoint", "https://h/x", "--token-scope", "s"]).is_err());
        assert!(create(&["--nats", "main/a", "--delivery-identity", "p"]).is_err());
    }
}
