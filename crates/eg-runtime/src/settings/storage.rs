//! The object stores eg may write to, by name (`[storage]`): Azure storage accounts
//! (`EG__STORAGE__ACCOUNTS__<ACCOUNT>__CONNECTION_STRING`, or `…__ACCOUNT_KEY` with
//! optional endpoints) and S3 connections (`EG__STORAGE__S3__<NAME>__ENDPOINT_URL`,
//! `…__REGION`, `…__ACCESS_KEY_ID`, `…__SECRET_ACCESS_KEY`). Subscriptions name them;
//! only this configuration holds their keys, which are never shown or logged
//! ([`Secret`]).

use eg_core::subscription::S3ConnectionFacts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageSection {
    /// Azure storage accounts by account name (lower case, as Azure spells them).
    pub accounts: BTreeMap<String, AzureAccountSettings>,
    /// S3 or S3-compatible connections (AWS, MinIO, Ceph, R2) by name.
    pub s3: BTreeMap<String, S3ConnectionSettings>,
}

/// One Azure storage account: a connection string, or a key with optional endpoints.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AzureAccountSettings {
    /// `DefaultEndpointsProtocol=https;AccountName=…;AccountKey=…;EndpointSuffix=…` or
    /// with `BlobEndpoint=` / `QueueEndpoint=` (as the portal and `az storage account
    /// show-connection-string` give it).
    pub connection_string: Secret,
    /// Instead of a connection string: the account key (base64)…
    pub account_key: Secret,
    /// …and, when not `https://<account>.blob.core.windows.net`, the blob endpoint.
    pub blob_endpoint: String,
    /// When not `https://<account>.queue.core.windows.net`, the queue endpoint.
    pub queue_endpoint: String,
}

/// An account as the writers use it.
#[derive(Clone, PartialEq, Eq)]
pub struct AzureAccount {
    pub name: String,
    pub key: Secret,
    /// Without a trailing slash, e.g. `https://acct.blob.core.windows.net` or
    /// `http://127.0.0.1:10000/devstoreaccount1`.
    pub blob_endpoint: String,
    pub queue_endpoint: String,
}

impl fmt::Debug for AzureAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzureAccount")
            .field("name", &self.name)
            .field("blob_endpoint", &self.blob_endpoint)
            .field("queue_endpoint", &self.queue_endpoint)
            .finish_non_exhaustive()
    }
}

/// One S3 connection. Empty fields fall back to AWS's own: the endpoint to AWS, the
/// region to the subscription's or `AWS_REGION`, the keys to the standard AWS
/// environment (`AWS_ACCESS_KEY_ID`, …, web identity, instance metadata).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct S3ConnectionSettings {
    /// e.g. `http://minio.internal:9000`; empty = AWS.
    pub endpoint_url: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub session_token: Secret,
    /// Virtual-hosted-style requests (`<bucket>.<endpoint>`), as AWS prefers; the default
    /// is path style when an endpoint is given (MinIO, Ceph) and virtual-hosted for AWS.
    pub virtual_hosted_style: Option<bool>,
}

/// A configured secret: read like a string, printed as `***`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that signs with it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "\"\"" } else { "***" })
    }
}

impl StorageSection {
    /// Every account resolved, or what is wrong with the first one that cannot be.
    pub fn azure_accounts(&self) -> Result<BTreeMap<String, AzureAccount>, String> {
        self.accounts
            .iter()
            .map(|(name, settings)| settings.resolve(name).map(|account| (name.clone(), account)))
            .collect()
    }

    /// Checks every account and connection, naming the setting that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        self.azure_accounts()?;
        for (name, s3) in &self.s3 {
            if !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(format!(
                    "storage.s3.{name}: a connection name is lower-case letters, digits and '_'"
                ));
            }
            if !s3.endpoint_url.is_empty() && url::Url::parse(&s3.endpoint_url).is_err() {
                return Err(format!(
                    "storage.s3.{name}.endpoint_url: {:?} is not a URL",
                    s3.endpoint_url
                ));
            }
            if s3.access_key_id.is_empty() != s3.secret_access_key.is_empty() {
                return Err(format!(
                    "storage.s3.{name}: give both access_key_id and secret_access_key, or neither (to use the AWS environment)"
                ));
            }
        }
        Ok(())
    }
}

impl StorageSection {
    /// The S3 connection of this name, as a subscription is checked against it.
    pub fn s3_connection(&self, name: &str) -> Option<S3ConnectionFacts<'_>> {
        let s3 = self.s3.get(name)?;
        fn non_empty(s: &str) -> Option<&str> {
            (!s.is_empty()).then_some(s)
        }
        Some(S3ConnectionFacts {
            endpoint_url: non_empty(&s3.endpoint_url).map(|u| u.trim_end_matches('/')),
            region: non_empty(&s3.region),
        })
    }
}

impl AzureAccountSettings {
    /// The account named `name`, from the connection string or the separate fields.
    pub fn resolve(&self, name: &str) -> Result<AzureAccount, String> {
        let setting = format!("storage.accounts.{name}");
        if self.connection_string.is_empty() {
            if self.account_key.is_empty() {
                return Err(format!("{setting}: give connection_string, or account_key"));
            }
            return Ok(AzureAccount {
                name: name.to_owned(),
                key: self.account_key.clone(),
                blob_endpoint: endpoint_or_default(&self.blob_endpoint, name, "blob", "core.windows.net", "https"),
                queue_endpoint: endpoint_or_default(&self.queue_endpoint, name, "queue", "core.windows.net", "https"),
            });
        }
        let fields = connection_string_fields(self.connection_string.expose())
            .map_err(|problem| format!("{setting}.connection_string: {problem}"))?;
        let field = |key: &str| fields.get(key).map(String::as_str).unwrap_or("");
        let account_name = field("accountname");
        if !account_name.is_empty() && account_name != name {
            return Err(format!(
                "{setting}.connection_string: it is for the account {account_name:?}, not {name:?}"
            ));
        }
        let key = field("accountkey");
        if key.is_empty() {
            return Err(format!(
                "{setting}.connection_string: it has no AccountKey (eg signs with the account key; SAS-only connection strings are not supported)"
            ));
        }
        let protocol = match field("defaultendpointsprotocol") {
            "" => "https",
            p => p,
        };
        let suffix = match field("endpointsuffix") {
            "" => "core.windows.net",
            s => s,
        };
        Ok(AzureAccount {
            name: name.to_owned(),
            key: Secret::new(key),
            blob_endpoint: endpoint_or_default(field("blobendpoint"), name, "blob", suffix, protocol),
            queue_endpoint: endpoint_or_default(field("queueendpoint"), name, "queue", suffix, protocol),
        })
    }
}

fn endpoint_or_default(given: &str, account: &str, service: &str, suffix: &str, protocol: &str) -> String {
    if given.is_empty() {
        format!("{protocol}://{account}.{service}.{suffix}")
    } else {
        given.trim_end_matches('/').to_owned()
    }
}

/// `Key=Value;Key=Value` with keys compared ignoring case (values may hold `=`, as
/// base64 keys do).
pub(super) fn connection_string_fields(raw: &str) -> Result<BTreeMap<String, String>, String> {
    raw.split(';')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| match part.split_once('=') {
            Some((key, value)) => Ok((key.trim().to_ascii_lowercase(), value.trim().to_owned())),
            None => Err(format!("{:?} is not Key=Value", part.split('=').next().unwrap_or(part))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Azurite's well-known development account (public, in Microsoft's docs).
    const AZURITE: &str = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;";

    #[test]
    fn reads_a_connection_string_with_endpoints() {
        let settings = AzureAccountSettings {
            connection_string: Secret::new(AZURITE),
            ..Default::default()
        };
        let account = settings.resolve("devstoreaccount1").unwrap();
        assert_eq!(account.blob_endpoint, "http://127.0.0.1:10000/devstoreaccount1");
        assert_eq!(account.queue_endpoint, "http://127.0.0.1:10001/devstoreaccount1");
        assert!(account.key.expose().ends_with("GMGw=="), "'=' inside a value is kept");
        assert!(!format!("{account:?}").contains("Eby8"), "never printed");
    }

    #[test]
    fn a_portal_connection_string_gets_azure_endpoints() {
        let settings = AzureAccountSettings {
            connection_string: Secret::new(
                "DefaultEndpointsProtocol=https;AccountName=prodlogs;AccountKey=a2V5;EndpointSuffix=core.windows.net",
            ),
            ..Default::default()
        };
        let account = settings.resolve("prodlogs").unwrap();
        assert_eq!(account.blob_endpoint, "https://prodlogs.blob.core.windows.net");
        assert_eq!(account.queue_endpoint, "https://prodlogs.queue.core.windows.net");
    }

    #[test]
    fn mistakes_name_the_setting() {
        let wrong_account = AzureAccountSettings {
            connection_string: Secret::new("AccountName=other;AccountKey=a2V5"),
            ..Default::default()
        };
        let e = wrong_account.resolve("prodlogs").unwrap_err();
        assert!(
            e.starts_with("storage.accounts.prodlogs.connection_string") && e.contains("\"other\""),
            "{e}"
        );
        let sas_only = AzureAccountSettings {
            connection_string: Secret::new("BlobEndpoint=https://x;SharedAccessSignature=sv=1"),
            ..Default::default()
        };
        assert!(sas_only.resolve("x").unwrap_err().contains("AccountKey"));
        assert!(
            AzureAccountSettings::default()
                .resolve("x")
                .unwrap_err()
                .contains("connection_string")
        );
        let half = StorageSection {
            s3: BTreeMap::from([(
                "minio".to_owned(),
                S3ConnectionSettings {
                    access_key_id: "k".into(),
                    ..Default::default()
                },
            )]),
            ..Default::default()
        };
        assert!(half.validate().unwrap_err().contains("secret_access_key"));
    }

    #[test]
    fn accounts_and_connections_come_from_the_environment() {
        let env = [
            ("EG__STORAGE__ACCOUNTS__DEVSTOREACCOUNT1__CONNECTION_STRING", AZURITE),
            ("EG__STORAGE__S3__MINIO__ENDPOINT_URL", "http://127.0.0.1:9000"),
            ("EG__STORAGE__S3__MINIO__ACCESS_KEY_ID", "eg"),
            ("EG__STORAGE__S3__MINIO__SECRET_ACCESS_KEY", "secret"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let settings = crate::settings::Settings::load(None, env).unwrap();
        assert!(settings.storage.accounts.contains_key("devstoreaccount1"));
        let minio = settings.storage.s3_connection("minio").unwrap();
        assert_eq!(minio.endpoint_url, Some("http://127.0.0.1:9000"));
        assert_eq!(settings.storage.s3["minio"].secret_access_key.expose(), "secret");
    }

    #[test]
    fn secrets_never_print() {
        let s = S3ConnectionSettings {
            secret_access_key: Secret::new("wJalrXUtnFEMI"),
            ..Default::default()
        };
        assert!(!format!("{s:?}").contains("wJalr"));
    }
}
