//! Where a subscription's dead letters go (behaviour.md#dead-lettering), and where a
//! topic's archive goes (archive.md), read from and shown in Event Grid's JSON:
//!
//! - `LocalDirectory` (eg's): `{"containerName"}`, a folder under the dead-letter
//!   worker's directory, laid out like a blob container — the embedded default;
//! - `StorageBlob` (Event Grid's): `{"resourceId", "blobContainerName"}`, a container in
//!   the Azure storage account named by `resourceId`, which must be configured in eg
//!   ([`NamedConnections`]). Without `resourceId` (as the namespace form is often written
//!   for eg) it is the local directory, as before object stores existed;
//! - `S3` (eg's): `{"bucket", "keyPrefix", "region", "endpointUrl", "connection"}`, a
//!   bucket reached through an S3 connection configured in eg by name.
//!
//! Credentials never appear here: a subscription names an account or a connection, and
//! only eg's configuration holds its keys. So the people who create subscriptions cannot
//! send those keys anywhere else: a subscription's `endpointUrl` or `region` must agree
//! with its connection's.

use crate::api_error::InvalidField;
use crate::destination::{NamedConnections, connection_name, optional_string, required_string, storage_account};
use crate::json::json_type;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A subscription's dead-letter destination: a container (a bucket, for S3) in a store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterDestination {
    /// The container (blob), bucket (S3) or folder under the dead-letter directory.
    pub container_name: String,
    /// Which store holds the container (the local directory in records written before
    /// object stores existed).
    #[serde(default, skip_serializing_if = "DeadLetterStore::is_local_directory")]
    pub store: DeadLetterStore,
    /// Event Grid's storage account id (`resourceId`), shown back as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
}

/// The store a dead-letter container lives in. Stored in the catalog and in every
/// dead-letter record, so a record goes where its subscription pointed when it died.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum DeadLetterStore {
    /// The dead-letter worker's directory (`EG__DEADLETTER__DIR`).
    #[default]
    LocalDirectory,
    /// An Azure storage account configured in eg under this name.
    #[serde(rename_all = "camelCase")]
    AzureBlob { account: String },
    /// A bucket reached through the S3 connection configured in eg under `connection`.
    #[serde(rename_all = "camelCase")]
    S3 {
        connection: String,
        /// Prepended to every object key (`<prefix>/<SUBSCRIPTION>/YYYY/…`); may be empty.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        key_prefix: String,
        /// As the subscription wrote them (checked against the connection's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        region: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint_url: Option<String>,
    },
}

impl DeadLetterStore {
    pub(crate) fn is_local_directory(&self) -> bool {
        *self == Self::LocalDirectory
    }

    /// How logs, metrics and the status page name the store: `local`, `azure:<account>`,
    /// `s3:<connection>`.
    pub fn label(&self) -> String {
        match self {
            Self::LocalDirectory => "local".into(),
            Self::AzureBlob { account } => format!("azure:{account}"),
            Self::S3 { connection, .. } => format!("s3:{connection}"),
        }
    }
}

impl DeadLetterDestination {
    /// A folder of the local directory. Container names follow Azure's rules (3–63 of
    /// `[a-z0-9-]`, starting with a letter or digit, no `--`), which also keeps them from
    /// escaping the dead-letter root.
    pub fn new(container_name: &str) -> Result<Self, InvalidField> {
        check_container_name(container_name, "containerName")?;
        Ok(Self {
            container_name: container_name.to_owned(),
            store: DeadLetterStore::LocalDirectory,
            resource_id: None,
        })
    }

    /// Reads `{"endpointType", "properties"}` (errors named from there down).
    pub fn from_json(v: &Value) -> Result<Self, InvalidField> {
        let map = match v {
            Value::Object(map) => map,
            other => {
                return Err(InvalidField::new(
                    "",
                    format!("must be an object, got {}", json_type(other)),
                ));
            }
        };
        only_known(map, &["endpointType", "properties"], "")?;
        let props = match map.get("properties") {
            Some(Value::Object(props)) => props,
            Some(other) => {
                return Err(InvalidField::new(
                    "properties",
                    format!("must be an object, got {}", json_type(other)),
                ));
            }
            None => return Err(InvalidField::new("properties", "is required")),
        };
        match map.get("endpointType") {
            Some(Value::String(t)) if t == "LocalDirectory" => local_directory(props),
            Some(Value::String(t)) if t == "StorageBlob" => storage_blob(props),
            Some(Value::String(t)) if t == "S3" => s3(props),
            _ => Err(InvalidField::new(
                "endpointType",
                "must be \"StorageBlob\" (an Azure storage account configured in eg), \"S3\" (a bucket through an S3 connection configured in eg) or \"LocalDirectory\" (the dead-letter worker's directory)",
            )),
        }
    }

    /// The destination as Event Grid's JSON shows it.
    pub fn to_json(&self) -> Value {
        match &self.store {
            DeadLetterStore::LocalDirectory => match &self.resource_id {
                // Written as `StorageBlob` without an account (the namespace form).
                None => json!({"endpointType": "LocalDirectory", "properties": {"containerName": self.container_name}}),
                Some(id) => {
                    json!({"endpointType": "LocalDirectory", "properties": {"containerName": self.container_name, "resourceId": id}})
                }
            },
            DeadLetterStore::AzureBlob { .. } => json!({"endpointType": "StorageBlob", "properties": {
                "resourceId": self.resource_id,
                "blobContainerName": self.container_name,
            }}),
            DeadLetterStore::S3 {
                connection,
                key_prefix,
                region,
                endpoint_url,
            } => {
                let mut props = json!({"bucket": self.container_name, "connection": connection});
                if !key_prefix.is_empty() {
                    props["keyPrefix"] = json!(key_prefix);
                }
                if let Some(region) = region {
                    props["region"] = json!(region);
                }
                if let Some(url) = endpoint_url {
                    props["endpointUrl"] = json!(url);
                }
                json!({"endpointType": "S3", "properties": props})
            }
        }
    }

    /// The namespace form's `StorageBlob` (a local directory written that way is shown
    /// back that way); other stores as [`Self::to_json`].
    pub(crate) fn to_namespace_json(&self) -> Value {
        match self.store {
            DeadLetterStore::LocalDirectory => {
                json!({"endpointType": "StorageBlob", "properties": {"blobContainerName": self.container_name}})
            }
            _ => self.to_json(),
        }
    }

    /// Refuses a destination naming an account or connection eg has no configuration
    /// for, or an S3 endpoint or region its connection does not use (field names from
    /// `properties` down).
    pub(crate) fn check_configured(&self, stores: &impl NamedConnections) -> Result<(), InvalidField> {
        match &self.store {
            DeadLetterStore::LocalDirectory => Ok(()),
            DeadLetterStore::AzureBlob { account } if stores.has_azure_account(account) => Ok(()),
            DeadLetterStore::AzureBlob { account } => Err(InvalidField::new(
                "properties.resourceId",
                format!(
                    "eg has no configuration for the storage account {account:?}: an operator must add it (EG__STORAGE__ACCOUNTS__{}__CONNECTION_STRING) before subscriptions can dead-letter there",
                    account.to_ascii_uppercase()
                ),
            )),
            DeadLetterStore::S3 {
                connection,
                region,
                endpoint_url,
                ..
            } => {
                let Some(facts) = stores.s3_connection(connection) else {
                    return Err(InvalidField::new(
                        "properties.connection",
                        format!(
                            "eg has no S3 connection named {connection:?}: an operator must configure it (EG__STORAGE__S3__{}__…) before subscriptions can dead-letter through it",
                            connection.to_ascii_uppercase()
                        ),
                    ));
                };
                check_agrees(
                    "endpointUrl",
                    endpoint_url.as_deref(),
                    facts.endpoint_url,
                    connection,
                    "AWS's own endpoint",
                )?;
                check_agrees("region", region.as_deref(), facts.region, connection, "")
            }
        }
    }
}

/// A subscription may repeat its connection's endpoint or region, never change them: the
/// connection's credentials go only where the operator configured them.
fn check_agrees(
    field: &str,
    written: Option<&str>,
    configured: Option<&str>,
    connection: &str,
    unset_means: &str,
) -> Result<(), InvalidField> {
    match (written, configured) {
        (Some(w), Some(c)) if w.trim_end_matches('/') != c.trim_end_matches('/') => Err(InvalidField::new(
            format!("properties.{field}"),
            format!(
                "{w:?} is not the {field} of the S3 connection {connection:?} ({c:?}); leave it out to use the connection's"
            ),
        )),
        (Some(w), None) if !unset_means.is_empty() => Err(InvalidField::new(
            format!("properties.{field}"),
            format!(
                "{w:?}: the S3 connection {connection:?} uses {unset_means}; a subscription cannot send its credentials elsewhere (configure a connection for that endpoint)"
            ),
        )),
        _ => Ok(()),
    }
}

fn local_directory(props: &Map<String, Value>) -> Result<DeadLetterDestination, InvalidField> {
    only_known(
        props,
        &["containerName", "blobContainerName", "resourceId"],
        "properties",
    )?;
    let (key, name) = container(props)?;
    let mut destination =
        DeadLetterDestination::new(name).map_err(|e| InvalidField::new(format!("properties.{key}"), e.problem))?;
    destination.resource_id = optional_string(props, "resourceId")?;
    Ok(destination)
}

fn storage_blob(props: &Map<String, Value>) -> Result<DeadLetterDestination, InvalidField> {
    only_known(
        props,
        &["resourceId", "blobContainerName", "containerName"],
        "properties",
    )?;
    let (key, name) = container(props)?;
    check_container_name(name, &format!("properties.{key}"))?;
    let Some(resource_id) = optional_string(props, "resourceId")? else {
        // No account: eg's own directory, as StorageBlob always meant before object stores.
        return DeadLetterDestination::new(name).map_err(|e| InvalidField::new(format!("properties.{key}"), e.problem));
    };
    let account = storage_account(&resource_id)?;
    Ok(DeadLetterDestination {
        container_name: name.to_owned(),
        store: DeadLetterStore::AzureBlob { account },
        resource_id: Some(resource_id),
    })
}

fn s3(props: &Map<String, Value>) -> Result<DeadLetterDestination, InvalidField> {
    only_known(
        props,
        &["bucket", "keyPrefix", "region", "endpointUrl", "connection"],
        "properties",
    )?;
    let bucket = required_string(props, "bucket")?;
    check_bucket_name(&bucket)?;
    let connection = required_string(props, "connection")?;
    connection_name(&connection, "properties.connection")?;
    let key_prefix = optional_string(props, "keyPrefix")?.unwrap_or_default();
    check_key_prefix(&key_prefix)?;
    let endpoint_url = optional_string(props, "endpointUrl")?;
    if let Some(url) = &endpoint_url {
        crate::destination::http_url("properties.endpointUrl", url)?;
    }
    Ok(DeadLetterDestination {
        container_name: bucket,
        store: DeadLetterStore::S3 {
            connection,
            key_prefix: key_prefix.trim_matches('/').to_owned(),
            region: optional_string(props, "region")?,
            endpoint_url,
        },
        resource_id: None,
    })
}

/// The container, under eg's name or Event Grid's (`blobContainerName`), so resources
/// written for Azure work as they are; the key it was found under.
fn container(props: &Map<String, Value>) -> Result<(&'static str, &str), InvalidField> {
    let key = if props.contains_key("containerName") {
        "containerName"
    } else {
        "blobContainerName"
    };
    match props.get(key) {
        Some(Value::String(name)) => Ok((key, name)),
        _ => Err(InvalidField::new(
            format!("properties.{key}"),
            "is required and must be a string",
        )),
    }
}

fn check_container_name(name: &str, field: &str) -> Result<(), InvalidField> {
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !(3..=63).contains(&name.len())
        || !valid_chars
        || name.starts_with('-')
        || name.ends_with('-')
        || name.contains("--")
    {
        return Err(InvalidField::new(
            field,
            format!(
                "{name:?} is not a valid container name: 3-63 lower-case letters, digits or single hyphens, starting and ending with a letter or digit"
            ),
        ));
    }
    Ok(())
}

/// S3's bucket naming rules (3–63 of `[a-z0-9.-]`, letter or digit at both ends, no `..`).
fn check_bucket_name(name: &str) -> Result<(), InvalidField> {
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let valid = (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && ends_ok(name.chars().next())
        && ends_ok(name.chars().last())
        && !name.contains("..");
    if !valid {
        return Err(InvalidField::new(
            "properties.bucket",
            format!(
                "{name:?} is not a valid bucket name: 3-63 lower-case letters, digits, dots or hyphens, starting and ending with a letter or digit"
            ),
        ));
    }
    let parts: Vec<&str> = name.split('.').collect();
    let like_an_ip = parts.len() == 4
        && parts
            .iter()
            .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    if like_an_ip {
        return Err(InvalidField::new(
            "properties.bucket",
            format!("{name:?} is not a valid bucket name: S3 refuses a name formatted as an IP address"),
        ));
    }
    if let Some(reserved) = RESERVED_BUCKET_PREFIXES.iter().find(|p| name.starts_with(*p)) {
        return Err(InvalidField::new(
            "properties.bucket",
            format!("{name:?} is not a valid bucket name: S3 reserves the prefix {reserved:?}"),
        ));
    }
    if let Some(reserved) = RESERVED_BUCKET_SUFFIXES.iter().find(|s| name.ends_with(*s)) {
        return Err(InvalidField::new(
            "properties.bucket",
            format!("{name:?} is not a valid bucket name: S3 reserves the suffix {reserved:?}"),
        ));
    }
    Ok(())
}

/// Prefixes and suffixes S3's bucket naming rules keep for its own kinds of bucket and
/// access point: a bucket named with one can never be created, so nothing could ever be
/// stored there.
const RESERVED_BUCKET_PREFIXES: [&str; 3] = ["xn--", "sthree-", "amzn-s3-demo-"];
const RESERVED_BUCKET_SUFFIXES: [&str; 4] = ["-s3alias", "--ol-s3", ".mrap", "--x-s3"];

/// Path segments of plain characters only: nothing in a prefix can climb out of it.
fn check_key_prefix(prefix: &str) -> Result<(), InvalidField> {
    let segments_ok = prefix.trim_matches('/').split('/').all(|segment| {
        prefix.trim_matches('/').is_empty()
            || (!segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    });
    if prefix.len() <= 256 && segments_ok {
        Ok(())
    } else {
        Err(InvalidField::new(
            "properties.keyPrefix",
            format!(
                "{prefix:?} is not a usable key prefix: up to 256 characters, '/'-separated segments of letters, digits, '-', '_' or '.'"
            ),
        ))
    }
}

fn only_known(map: &Map<String, Value>, known: &[&str], path: &str) -> Result<(), InvalidField> {
    // The subscription module's rule, repeated: a topic's archive reads this JSON too,
    // and the topic module may not depend on the subscription module.
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(InvalidField::new(
            if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            },
            format!("not a known field (expected one of: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subscription::S3ConnectionFacts;
    use std::collections::HashMap;

    struct Configured {
        accounts: Vec<&'static str>,
        s3: HashMap<&'static str, S3ConnectionFacts<'static>>,
    }

    impl NamedConnections for Configured {
        fn has_azure_account(&self, account: &str) -> bool {
            self.accounts.contains(&account)
        }
        fn s3_connection(&self, name: &str) -> Option<S3ConnectionFacts<'_>> {
            self.s3.get(name).copied()
        }
        fn has_broker_connection(&self, _: &str, _: &str) -> bool {
            false
        }
    }

    fn configured() -> Configured {
        Configured {
            accounts: vec!["deadletters1"],
            s3: HashMap::from([
                ("aws", S3ConnectionFacts::default()),
                (
                    "minio",
                    S3ConnectionFacts {
                        endpoint_url: Some("http://minio.internal:9000"),
                        region: Some("us-east-1"),
                    },
                ),
            ]),
        }
    }

    const ACCOUNT_ID: &str =
        "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/deadletters1";

    #[test]
    fn storage_blob_as_event_grid_writes_it_names_the_account() {
        let d = DeadLetterDestination::from_json(&json!({"endpointType": "StorageBlob",
            "properties": {"resourceId": ACCOUNT_ID, "blobContainerName": "dead"}}))
        .unwrap();
        assert_eq!(
            d.store,
            DeadLetterStore::AzureBlob {
                account: "deadletters1".into()
            }
        );
        assert_eq!(d.container_name, "dead");
        assert!(d.check_configured(&configured()).is_ok());
        assert_eq!(
            DeadLetterDestination::from_json(&d.to_json()).unwrap(),
            d,
            "shown back, it reads the same"
        );
    }

    #[test]
    fn an_account_eg_does_not_know_is_refused_saying_how_to_add_it() {
        let d = DeadLetterDestination::from_json(&json!({"endpointType": "StorageBlob",
            "properties": {"resourceId": ACCOUNT_ID.replace("deadletters1", "other"), "blobContainerName": "dead"}}))
        .unwrap();
        let e = d.check_configured(&configured()).unwrap_err();
        assert_eq!(e.field, "properties.resourceId");
        assert!(
            e.problem.contains("\"other\"") && e.problem.contains("EG__STORAGE__ACCOUNTS__OTHER__CONNECTION_STRING"),
            "{}",
            e.problem
        );
    }

    #[test]
    fn malformed_resource_ids_are_refused() {
        for id in [
            "/x",
            "/subscriptions/0/resourceGroups/rg/providers/Microsoft.Web/sites/app",
            "/subscriptions/0/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/Has_Upper",
        ] {
            let e = DeadLetterDestination::from_json(&json!({"endpointType": "StorageBlob",
                "properties": {"resourceId": id, "blobContainerName": "dead"}}))
            .unwrap_err();
            assert_eq!(e.field, "properties.resourceId", "{id}");
        }
    }

    #[test]
    fn storage_blob_without_an_account_is_the_local_directory() {
        let d = DeadLetterDestination::from_json(&json!({"endpointType": "StorageBlob",
            "properties": {"blobContainerName": "dead"}}))
        .unwrap();
        assert_eq!(d, DeadLetterDestination::new("dead").unwrap());
        assert_eq!(d.to_namespace_json()["endpointType"], "StorageBlob");
    }

    #[test]
    fn s3_reads_back_and_keeps_credentials_where_configured() {
        let d = DeadLetterDestination::from_json(&json!({"endpointType": "S3", "properties": {
            "bucket": "eg.dead-letters", "keyPrefix": "/prod/eg/", "connection": "minio",
            "endpointUrl": "http://minio.internal:9000/"}}))
        .unwrap();
        assert!(d.check_configured(&configured()).is_ok());
        assert_eq!(DeadLetterDestination::from_json(&d.to_json()).unwrap(), d);
        let DeadLetterStore::S3 { key_prefix, .. } = &d.store else {
            panic!("{d:?}")
        };
        assert_eq!(key_prefix, "prod/eg");

        let elsewhere = DeadLetterDestination::from_json(&json!({"endpointType": "S3", "properties": {
            "bucket": "b-1", "connection": "minio", "endpointUrl": "http://attacker.example"}}))
        .unwrap();
        assert_eq!(
            elsewhere.check_configured(&configured()).unwrap_err().field,
            "properties.endpointUrl"
        );
        let aws_elsewhere = DeadLetterDestination::from_json(&json!({"endpointType": "S3", "properties": {
            "bucket": "b-1", "connection": "aws", "endpointUrl": "http://minio.internal:9000"}}))
        .unwrap();
        assert_eq!(
            aws_elsewhere.check_configured(&configured()).unwrap_err().field,
            "properties.endpointUrl"
        );
        let aws_region = DeadLetterDestination::from_json(&json!({"endpointType": "S3", "properties": {
            "bucket": "b-1", "connection": "aws", "region": "eu-west-1"}}))
        .unwrap();
        assert!(aws_region.check_configured(&configured()).is_ok());
        let unknown = DeadLetterDestination::from_json(&json!({"endpointType": "S3", "properties": {
            "bucket": "b-1", "connection": "nope"}}))
        .unwrap();
        assert_eq!(
            unknown.check_configured(&configured()).unwrap_err().field,
            "properties.connection"
        );
    }

    #[test]
    fn bad_s3_fields_are_named() {
        let cases = [
            (json!({"connection": "aws"}), "properties.bucket"),
            (json!({"bucket": "Upper", "connection": "aws"}), "properties.bucket"),
            (json!({"bucket": "b-1"}), "properties.connection"),
            (
                json!({"bucket": "b-1", "connection": "aws", "keyPrefix": "a/../b"}),
                "properties.keyPrefix",
            ),
            (
                json!({"bucket": "b-1", "connection": "aws", "endpointUrl": "ftp://x"}),
                "properties.endpointUrl",
            ),
            (
                json!({"bucket": "b-1", "connection": "aws", "endpointUrl": "http://minio.internal:0"}),
                "properties.endpointUrl",
            ),
            (
                json!({"bucket": "b-1", "connection": "aws", "endpointUrl": "http://"}),
                "properties.endpointUrl",
            ),
            (
                json!({"bucket": "b-1", "connection": "aws", "secretKey": "x"}),
                "properties.secretKey",
            ),
            (
                json!({"bucket": "192.168.5.4", "connection": "aws"}),
                "properties.bucket",
            ),
            (json!({"bucket": "10.0.0.1", "connection": "aws"}), "properties.bucket"),
            (
                json!({"bucket": "999.010.0.1", "connection": "aws"}),
                "properties.bucket",
            ),
            (
                json!({"bucket": "xn--bucket", "connection": "aws"}),
                "properties.bucket",
            ),
            (json!({"bucket": "sthree-b", "connection": "aws"}), "properties.bucket"),
            (json!({"bucket": "b-s3alias", "connection": "aws"}), "properties.bucket"),
            (json!({"bucket": "b--ol-s3", "connection": "aws"}), "properties.bucket"),
        ];
        for (props, field) in cases {
            let e = DeadLetterDestination::from_json(&json!({"endpointType": "S3", "properties": props})).unwrap_err();
            assert_eq!(e.field, field, "{props}: {}", e.problem);
        }
        let e = DeadLetterDestination::from_json(&json!({"endpointType": "S3", "properties":
            {"bucket": "192.168.5.4", "connection": "aws"}}))
        .unwrap_err();
        assert!(e.problem.contains("IP address"), "{e}");
        // Dotted names that are not four numbers are fine, as is a port given in full.
        for bucket in ["192.168.5", "1.2.3.4.5", "v1.2.3.4", "logs.example.com"] {
            let props = json!({"bucket": bucket, "connection": "aws", "endpointUrl": "http://minio.internal:9000"});
            assert!(
                DeadLetterDestination::from_json(&json!({"endpointType": "S3", "properties": props})).is_ok(),
                "{bucket}"
            );
        }
    }

    #[test]
    fn records_written_before_stores_existed_are_the_local_directory() {
        let d: DeadLetterDestination =
            serde_json::from_value(json!({"containerName": "dead", "resourceId": "/x"})).unwrap();
        assert_eq!(d.store, DeadLetterStore::LocalDirectory);
        let stored = serde_json::to_value(DeadLetterDestination::new("dead").unwrap()).unwrap();
        assert_eq!(stored, json!({"containerName": "dead"}));
    }
}
