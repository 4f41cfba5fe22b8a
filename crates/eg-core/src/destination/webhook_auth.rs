//! A webhook's bearer token (docs/oauth-delivery.md): which configured identity eg
//! signs in with and what it asks a token for. Event Grid's own JSON
//! (`azureActiveDirectoryTenantId` + `azureActiveDirectoryApplicationIdOrUri`) and eg's
//! generic OAuth 2.0 form (`deliveryIdentity` + `tokenScope` / `tokenAudience`) read into
//! one [`WebhookAuth`]. A subscription names an identity, never a secret: only the
//! operator's settings hold the client secret.

use super::{NamedConnections, connection_name, optional_string};
use crate::api_error::InvalidField;
use crate::identity::TokenTarget;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

const TENANT: &str = "azureActiveDirectoryTenantId";
const APPLICATION: &str = "azureActiveDirectoryApplicationIdOrUri";
const IDENTITY: &str = "deliveryIdentity";
const SCOPE: &str = "tokenScope";
const AUDIENCE: &str = "tokenAudience";

/// How a webhook's requests get their `Authorization: Bearer` token. Stored in the
/// catalog inside the webhook's target (`endpoint.auth`); older tiers ignore it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "via", rename_all = "camelCase")]
pub enum WebhookAuth {
    /// Event Grid's: a token for `application` from the Entra ID `tenant`, got with the
    /// identity configured for that tenant, or the one `identity` names.
    #[serde(rename_all = "camelCase")]
    EntraId {
        tenant: String,
        application: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        identity: Option<String>,
    },
    /// eg's: a token from the named identity's provider, for `scope` and/or `audience`
    /// (both absent: the identity's defaults).
    #[serde(rename = "oauth2", rename_all = "camelCase")]
    OAuth2 {
        identity: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        audience: Option<String>,
    },
}

impl WebhookAuth {
    /// Reads the auth keys of a WebHook's `properties`; `None` when it has none.
    pub(crate) fn read(props: &Map<String, Value>) -> Result<Option<Self>, InvalidField> {
        let tenant = optional_string(props, TENANT)?;
        let application = optional_string(props, APPLICATION)?;
        let identity = optional_string(props, IDENTITY)?;
        let scope = non_empty(SCOPE, optional_string(props, SCOPE)?)?;
        let audience = non_empty(AUDIENCE, optional_string(props, AUDIENCE)?)?;
        if let Some(name) = &identity {
            connection_name(name, &format!("properties.{IDENTITY}"))?;
        }
        match (tenant, application) {
            (Some(tenant), Some(application)) => {
                if let Some(extra) = [(SCOPE, &scope), (AUDIENCE, &audience)]
                    .iter()
                    .find(|(_, v)| v.is_some())
                {
                    return Err(InvalidField::new(
                        format!("properties.{}", extra.0),
                        format!("not with {TENANT}: the token is asked for {APPLICATION}/.default"),
                    ));
                }
                Ok(Some(Self::EntraId {
                    tenant: non_empty(TENANT, Some(tenant))?.unwrap_or_default(),
                    application: non_empty(APPLICATION, Some(application))?.unwrap_or_default(),
                    identity,
                }))
            }
            (Some(_), None) => Err(InvalidField::new(
                format!("properties.{APPLICATION}"),
                format!("is required with {TENANT}: the application the token is for"),
            )),
            (None, Some(_)) => Err(InvalidField::new(
                format!("properties.{TENANT}"),
                format!("is required with {APPLICATION}: the Entra ID tenant that issues the token"),
            )),
            (None, None) => match identity {
                Some(identity) => Ok(Some(Self::OAuth2 {
                    identity,
                    scope,
                    audience,
                })),
                None => match [(SCOPE, &scope), (AUDIENCE, &audience)]
                    .iter()
                    .find(|(_, v)| v.is_some())
                {
                    Some((key, _)) => Err(InvalidField::new(
                        format!("properties.{key}"),
                        format!("needs {IDENTITY}: the configured identity that asks for the token"),
                    )),
                    None => Ok(None),
                },
            },
        }
    }

    /// Its keys as `GET` shows them (Event Grid's shown back as written).
    pub(crate) fn show(&self, props: &mut Map<String, Value>) {
        let mut put = |key: &str, value: &Option<String>| {
            if let Some(v) = value {
                props.insert(key.to_owned(), json!(v));
            }
        };
        match self {
            Self::EntraId {
                tenant,
                application,
                identity,
            } => {
                put(TENANT, &Some(tenant.clone()));
                put(APPLICATION, &Some(application.clone()));
                put(IDENTITY, identity);
            }
            Self::OAuth2 {
                identity,
                scope,
                audience,
            } => {
                put(IDENTITY, &Some(identity.clone()));
                put(SCOPE, scope);
                put(AUDIENCE, audience);
            }
        }
    }

    /// Refuses an identity or tenant eg has no configuration for, naming the setting
    /// that would add it.
    pub(crate) fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
        let unknown = |name: &str| {
            InvalidField::new(
                format!("properties.{IDENTITY}"),
                format!(
                    "eg has no delivery identity named {name:?}: an operator must configure it (EG__IDENTITIES__{}__CLIENT_ID and __CLIENT_SECRET, with __TOKEN_URL or __TENANT_ID) first",
                    name.to_ascii_uppercase()
                ),
            )
        };
        match self {
            Self::EntraId {
                identity: Some(name), ..
            } => configured.identity(name).map(|_| ()).ok_or_else(|| unknown(name)),
            Self::EntraId { tenant, .. } => match configured.identity_for_tenant(tenant) {
                Some(_) => Ok(()),
                None => Err(InvalidField::new(
                    format!("properties.{TENANT}"),
                    format!(
                        "eg has no identity for tenant {tenant:?}: an operator must configure one (EG__IDENTITIES__<NAME>__TENANT_ID={tenant} with __CLIENT_ID and __CLIENT_SECRET)"
                    ),
                )),
            },
            Self::OAuth2 {
                identity,
                scope,
                audience,
            } => {
                let facts = configured.identity(identity).ok_or_else(|| unknown(identity))?;
                if scope.is_none() && audience.is_none() && !facts.has_default_target {
                    return Err(InvalidField::new(
                        format!("properties.{SCOPE}"),
                        format!(
                            "give {SCOPE} or {AUDIENCE}: identity {identity:?} has no default (EG__IDENTITIES__{}__SCOPE)",
                            identity.to_ascii_uppercase()
                        ),
                    ));
                }
                Ok(())
            }
        }
    }

    /// The configured identity to ask, given how tenants map to identities.
    pub fn identity_name(&self, for_tenant: impl Fn(&str) -> Option<String>) -> Option<String> {
        match self {
            Self::EntraId {
                identity: Some(name), ..
            }
            | Self::OAuth2 { identity: name, .. } => Some(name.clone()),
            Self::EntraId { tenant, .. } => for_tenant(tenant),
        }
    }

    /// What the token is asked for; an empty target means the identity's defaults.
    pub fn target(&self) -> TokenTarget {
        match self {
            Self::EntraId { application, .. } => TokenTarget::entra_application(application),
            Self::OAuth2 { scope, audience, .. } => TokenTarget {
                scope: scope.clone(),
                audience: audience.clone(),
            },
        }
    }
}

/// An empty string given for `key` is refused: a blank scope would be sent as one.
fn non_empty(key: &str, value: Option<String>) -> Result<Option<String>, InvalidField> {
    match value {
        Some(v) if v.trim().is_empty() => Err(InvalidField::new(format!("properties.{key}"), "must not be empty")),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Configured, read};
    use super::super::{Target, WebHook};
    use super::*;

    /// Reading what `GET` shows (with the full URL, which it never shows) gives the
    /// same webhook back.
    fn reads_back(target: &Target) {
        let mut shown = Value::Object(target.show());
        shown.as_object_mut().unwrap().remove("endpointBaseUrl");
        assert_eq!(&Target::WebHook(hook(shown).unwrap()), target);
    }

    fn hook(props: Value) -> Result<WebHook, InvalidField> {
        let mut props = props;
        props["endpointUrl"] = json!("https://h.example/in");
        match read("WebHook", props)? {
            Target::WebHook(hook) => Ok(hook),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn event_grid_json_asks_for_the_application_default_scope_and_reads_back() {
        let h = hook(json!({TENANT: "contoso.onmicrosoft.com", APPLICATION: "api://orders"})).unwrap();
        let auth = h.auth.clone().unwrap();
        assert_eq!(auth.target().scope.as_deref(), Some("api://orders/.default"));
        assert_eq!(
            auth.identity_name(|t| (t == "contoso.onmicrosoft.com").then(|| "corp".into())),
            Some("corp".into())
        );
        let shown = Target::WebHook(h.clone()).show();
        assert_eq!(shown[TENANT], json!("contoso.onmicrosoft.com"));
        assert_eq!(shown[APPLICATION], json!("api://orders"));
        reads_back(&Target::WebHook(h));
    }

    #[test]
    fn the_generic_form_names_an_identity_and_what_to_ask_for() {
        let h = hook(json!({IDENTITY: "partner", SCOPE: "orders.write", AUDIENCE: "https://p"})).unwrap();
        let auth = h.auth.clone().unwrap();
        assert_eq!(auth.identity_name(|_| None), Some("partner".into()));
        assert_eq!(auth.target().audience.as_deref(), Some("https://p"));
        reads_back(&Target::WebHook(h));
        assert_eq!(hook(json!({})).unwrap().auth, None, "no auth keys, no token");
    }

    #[test]
    fn half_given_or_mixed_forms_are_refused_naming_the_field() {
        let field = |props| hook(props).unwrap_err().field;
        assert_eq!(field(json!({TENANT: "t"})), format!("properties.{APPLICATION}"));
        assert_eq!(field(json!({APPLICATION: "a"})), format!("properties.{TENANT}"));
        assert_eq!(field(json!({SCOPE: "s"})), format!("properties.{SCOPE}"));
        assert_eq!(
            field(json!({TENANT: "t", APPLICATION: "a", AUDIENCE: "x"})),
            format!("properties.{AUDIENCE}")
        );
        assert_eq!(field(json!({IDENTITY: "Bad Name"})), format!("properties.{IDENTITY}"));
        assert_eq!(field(json!({IDENTITY: "p", SCOPE: " "})), format!("properties.{SCOPE}"));
        assert_eq!(
            field(json!({TENANT: 3, APPLICATION: "a"})),
            format!("properties.{TENANT}")
        );
    }

    #[test]
    fn an_identity_or_tenant_eg_lacks_is_refused_naming_the_setting() {
        let check = |props| hook(props).unwrap().auth.unwrap().check_configured(&Configured);
        let e = check(json!({IDENTITY: "partner", SCOPE: "s"})).unwrap_err();
        assert_eq!(e.field, format!("properties.{IDENTITY}"));
        assert!(e.problem.contains("EG__IDENTITIES__PARTNER__CLIENT_ID"), "{e}");
        let e = check(json!({TENANT: "contoso", APPLICATION: "a"})).unwrap_err();
        assert_eq!(e.field, format!("properties.{TENANT}"));
        assert!(e.problem.contains("EG__IDENTITIES__<NAME>__TENANT_ID=contoso"), "{e}");
        let e = check(json!({IDENTITY: "corp"})).unwrap_err();
        assert_eq!(e.field, format!("properties.{SCOPE}"), "no target and no default");
        check(json!({IDENTITY: "corp", AUDIENCE: "x"})).unwrap();
        check(json!({TENANT: "corp-tenant", APPLICATION: "a"})).unwrap();
        check(json!({TENANT: "other", APPLICATION: "a", IDENTITY: "corp"})).unwrap();
    }
}
