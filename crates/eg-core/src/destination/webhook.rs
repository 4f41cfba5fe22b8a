//! An HTTP webhook (Event Grid's `WebHook`): events are POSTed to its URL, whose query
//! may hold a secret, so only its base URL is ever shown.

use super::Kind;
use super::connections::{connection_name, optional_string};
use super::webhook_auth::WebhookAuth;
use super::{NamedConnections, required_string};
use crate::api_error::InvalidField;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A webhook's URL. Stored at the subscription's top level (`endpointUrl`), as every
/// subscription was before other destinations existed, never inside the target.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebHook {
    /// The full URL. Its query may hold a secret: shown only by `getFullUrl`.
    #[serde(skip)]
    pub url: String,
    /// Its requests' bearer token, when it asks for one (docs/oauth-delivery.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<WebhookAuth>,
    /// The configured client certificate its TLS handshakes present, by name
    /// (docs/client-certificates.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<String>,
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
        "clientCertificate",
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
        let client_certificate = optional_string(props, "clientCertificate")?;
        if let Some(name) = &client_certificate {
            connection_name(name, "properties.clientCertificate")?;
        }
        Ok(Self {
            url,
            auth,
            client_certificate,
        })
    }

    fn show(&self) -> Map<String, Value> {
        let mut props = Map::new();
        props.insert("endpointBaseUrl".to_owned(), json!(self.base_url()));
        if let Some(auth) = &self.auth {
            auth.show(&mut props);
        }
        if let Some(name) = &self.client_certificate {
            props.insert("clientCertificate".to_owned(), json!(name));
        }
        props
    }

    fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
        if let Some(auth) = &self.auth {
            auth.check_configured(configured)?;
        }
        match &self.client_certificate {
            Some(name) => check_certificate(name, configured),
            None => Ok(()),
        }
    }

    fn identity(&self) -> String {
        self.url.clone()
    }
}

/// A client certificate eg has and that has not expired.
fn check_certificate(name: &str, configured: &impl NamedConnections) -> Result<(), InvalidField> {
    const FIELD: &str = "properties.clientCertificate";
    let setting = format!("EG__CLIENT_CERTIFICATES__{}", name.to_ascii_uppercase());
    match configured.client_certificate(name) {
        None => Err(InvalidField::new(
            FIELD,
            format!(
                "eg has no client certificate {name:?}: set {setting}__CERTIFICATE_FILE and {setting}__KEY_FILE \
                 (or {setting}__PEM) on eg-ingress and eg-sender"
            ),
        )),
        Some(facts) if facts.expired => Err(InvalidField::new(
            FIELD,
            format!(
                "client certificate {name:?} expired at {}: replace the files {setting}__CERTIFICATE_FILE and \
                 __KEY_FILE name (or {setting}__PEM) and restart eg-ingress and eg-sender",
                facts.not_after
            ),
        )),
        Some(_) => Ok(()),
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

#[cfg(test)]
mod tests {
    use super::super::tests::{Configured, read};
    use super::super::{Kind, Target};
    use serde_json::json;

    fn hook(certificate: &str) -> Target {
        read(
            "WebHook",
            json!({"endpointUrl": "https://h.example/in", "clientCertificate": certificate}),
        )
        .unwrap()
    }

    #[test]
    fn a_client_certificate_is_named_shown_back_and_checked_against_the_configuration() {
        let Target::WebHook(partner) = hook("partner") else {
            panic!()
        };
        assert_eq!(partner.client_certificate.as_deref(), Some("partner"));
        assert_eq!(partner.show()["clientCertificate"], "partner");
        assert!(partner.check_configured(&Configured).is_ok());
        assert_eq!(
            partner.identity(),
            "https://h.example/in",
            "probation keys on the URL alone"
        );
        let stored = serde_json::to_value(&partner).unwrap();
        assert_eq!(stored, json!({"clientCertificate": "partner"}));
    }

    #[test]
    fn an_unknown_or_expired_certificate_is_refused_naming_the_setting() {
        let Target::WebHook(missing) = hook("nobody") else {
            panic!()
        };
        let err = missing.check_configured(&Configured).unwrap_err();
        assert_eq!(err.field, "properties.clientCertificate");
        assert!(
            err.problem
                .contains("EG__CLIENT_CERTIFICATES__NOBODY__CERTIFICATE_FILE"),
            "{err}"
        );
        let Target::WebHook(old) = hook("old") else { panic!() };
        let err = old.check_configured(&Configured).unwrap_err();
        assert!(err.problem.contains("expired at 2020-01-01T00:00:00Z"), "{err}");
        let err = read(
            "WebHook",
            json!({"endpointUrl": "https://h.example/in", "clientCertificate": "Not A Name"}),
        )
        .unwrap_err();
        assert_eq!(err.field, "properties.clientCertificate");
    }
}
