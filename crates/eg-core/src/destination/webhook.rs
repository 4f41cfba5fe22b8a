//! An HTTP webhook (Event Grid's `WebHook`): events are POSTed to its URL, whose query
//! may hold a secret, so only its base URL is ever shown.

use super::Kind;
use crate::api_error::InvalidField;
use crate::subscription::{NamedConnections, base_url, http_url, required_string};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A webhook's URL. Stored at the subscription's top level (`endpointUrl`), as every
/// subscription was before other destinations existed, never inside the target.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WebHook {
    /// The full URL. Its query may hold a secret: shown only by `getFullUrl`.
    #[serde(skip)]
    pub url: String,
}

impl WebHook {
    /// Scheme, host, port and path: what may be shown.
    pub fn base_url(&self) -> String {
        base_url(&self.url)
    }
}

impl Kind for WebHook {
    const ENDPOINT_TYPE: &'static str = "WebHook";
    const OWN: &'static [&'static str] = &["endpointUrl", "endpointBaseUrl"];
    const SHARED: &'static [&'static str] = &[
        "maxEventsPerBatch",
        "preferredBatchSizeInKilobytes",
        "deliveryAttributeMappings",
        "signingSecrets",
    ];

    fn read(props: &Map<String, Value>) -> Result<Self, InvalidField> {
        let url = required_string(props, "endpointUrl")?;
        http_url("properties.endpointUrl", &url)?;
        Ok(Self { url })
    }

    fn show(&self) -> Map<String, Value> {
        let mut props = Map::new();
        props.insert("endpointBaseUrl".to_owned(), json!(self.base_url()));
        props
    }

    fn check_configured(&self, _: &impl NamedConnections) -> Result<(), InvalidField> {
        Ok(())
    }

    fn identity(&self) -> String {
        self.url.clone()
    }
}
