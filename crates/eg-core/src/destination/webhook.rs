//! An HTTP webhook (Event Grid's `WebHook`): events are POSTed to its URL, whose query
//! may hold a secret, so only its base URL is ever shown.

use super::Kind;
use super::webhook_auth::WebhookAuth;
use super::{NamedConnections, required_string};
use crate::api_error::InvalidField;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A webhook's URL. Stored at the subscription's top level (`endpointUrl`), as every
/// subscription was before other destinations existed, never inside the target.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WebHook {
    /// The full URL. Its query may hold a secret: shown only by `getFullUrl`.
    #[serde(skip)]
    pub url: String,
    /// Its requests' bearer token, when it asks for one (docs/oauth-delivery.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<WebhookAuth>,
}

impl WebHook {
    /// Scheme, host, port and path: what may be shown.
    pub fn base_url(&self) -> String {
        base_url(&self.url)
    }

    /// Whether it holds nothing but its URL, which is stored apart (`endpointUrl`): such
    /// a webhook is stored as every webhook was before targets had fields.
    pub fn is_only_a_url(&self) -> bool {
        *self
            == Self {
                url: self.url.clone(),
                ..Self::default()
            }
    }
}

impl Kind for WebHook {
    const ENDPOINT_TYPE: &'static str = "WebHook";
    const OWN: &'static [&'static str] = &[
        "endpointUrl",
        "endpointBaseUrl",
        "azureActiveDirectoryTenantId",
        "azureActiveDirectoryApplicationIdOrUri",
        "deliveryIdentity",
        "tokenScope",
        "tokenAudience",
    ];
    const SHARED: &'static [&'static str] = &[
        "maxEventsPerBatch",
        "preferredBatchSizeInKilobytes",
        "deliveryAttributeMappings",
        "signingSecrets",
    ];

    fn read(props: &Map<String, Value>) -> Result<Self, InvalidField> {
        let url = required_string(props, "endpointUrl")?;
        http_url("properties.endpointUrl", &url)?;
        let auth = WebhookAuth::read(props)?;
        Ok(Self { url, auth })
    }

    fn show(&self) -> Map<String, Value> {
        let mut props = Map::new();
        props.insert("endpointBaseUrl".to_owned(), json!(self.base_url()));
        if let Some(auth) = &self.auth {
            auth.show(&mut props);
        }
        props
    }

    fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
        match &self.auth {
            Some(auth) => auth.check_configured(configured),
            None => Ok(()),
        }
    }

    fn identity(&self) -> String {
        self.url.clone()
    }
}

/// An `http` or `https` URL with a host, and a port a connection can be made to (not
/// `0`), as every URL a subscription gives eg to send to must be; refused naming `field`.
pub(crate) fn http_url(field: &str, value: &str) -> Result<url::Url, InvalidField> {
    let parsed =
        url::Url::parse(value).map_err(|e| InvalidField::new(field, format!("is not an absolute URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(InvalidField::new(field, "must be an http or https URL with a host"));
    }
    if parsed.port() == Some(0) {
        return Err(InvalidField::new(
            field,
            "port 0 cannot be connected to; give the port the server listens on",
        ));
    }
    Ok(parsed)
}

/// Scheme, host, port and path: the URL without its query or fragment, which may hold secrets.
fn base_url(full: &str) -> String {
    match url::Url::parse(full) {
        Ok(mut u) => {
            u.set_query(None);
            u.set_fragment(None);
            let _ = u.set_password(None);
            let _ = u.set_username("");
            u.to_string()
        }
        Err(_) => String::new(),
    }
}
