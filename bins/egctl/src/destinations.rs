//! Dead-letter destinations on the command line: `--dead-letter-blob` (a container of an
//! Azure storage account, in Event Grid's `StorageBlob` JSON as the `az` CLI writes it)
//! and `--dead-letter-s3` (a bucket through an S3 connection, eg's `S3` JSON). egctl only
//! shapes the JSON; eg-ingress checks that the account or connection is configured, and
//! refuses the subscription saying so when it is not.

use serde_json::{Value, json};
use std::fmt;

/// The resource group and subscription of a resource id built from a bare account name:
/// eg reads only the account from it, so the rest is a well-formed placeholder.
pub(crate) const PLACEHOLDER_ACCOUNT_ID: &str = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/eg/providers/Microsoft.Storage/storageAccounts/";

/// `--dead-letter-blob`: an Azure storage account's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobTarget {
    /// The account's resource id, as given or built from its name.
    pub resource_id: String,
    pub container: String,
}

/// `--dead-letter-s3`: a bucket (and key prefix) through a configured S3 connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Target {
    pub connection: String,
    pub bucket: String,
    pub key_prefix: String,
}

/// Why a destination argument cannot be used, for clap to print after the flag's name.
#[derive(Debug)]
pub struct BadTarget(String);

impl fmt::Display for BadTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadTarget {}

impl BadTarget {
    pub(crate) fn new(why: String) -> Self {
        Self(why)
    }
}

/// Reads `ACCOUNT/CONTAINER`, or an account's full resource id followed by `/CONTAINER`
/// (`/subscriptions/…/providers/Microsoft.Storage/storageAccounts/ACCOUNT/CONTAINER`).
pub fn parse_blob(raw: &str) -> Result<BlobTarget, BadTarget> {
    let Some((account_part, container)) = raw.trim_end_matches('/').rsplit_once('/') else {
        return Err(BadTarget(format!(
            "{raw:?}: give ACCOUNT/CONTAINER (or the account's resource id followed by /CONTAINER)"
        )));
    };
    if container.is_empty() {
        return Err(BadTarget(format!("{raw:?}: the container name is missing")));
    }
    let resource_id = if account_part.starts_with('/') {
        let named = account_part
            .to_ascii_lowercase()
            .split('/')
            .rev()
            .nth(1)
            .is_some_and(|segment| segment == "storageaccounts");
        if !named {
            return Err(BadTarget(format!(
                "{account_part:?} is not a storage account's resource id \
                 (/subscriptions/…/resourceGroups/…/providers/Microsoft.Storage/storageAccounts/ACCOUNT)"
            )));
        }
        account_part.to_owned()
    } else {
        let valid = !account_part.is_empty()
            && account_part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !valid {
            return Err(BadTarget(format!(
                "{account_part:?} is not a storage account name (lower-case letters and digits)"
            )));
        }
        format!("{PLACEHOLDER_ACCOUNT_ID}{account_part}")
    };
    Ok(BlobTarget {
        resource_id,
        container: container.to_owned(),
    })
}

/// Reads `CONNECTION/BUCKET` or `CONNECTION/BUCKET/KEY/PREFIX`.
pub fn parse_s3(raw: &str) -> Result<S3Target, BadTarget> {
    let mut parts = raw.trim_matches('/').splitn(3, '/');
    let (connection, bucket) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    if connection.is_empty() || bucket.is_empty() {
        return Err(BadTarget(format!(
            "{raw:?}: give CONNECTION/BUCKET or CONNECTION/BUCKET/KEY/PREFIX (the connection as configured in eg)"
        )));
    }
    Ok(S3Target {
        connection: connection.to_owned(),
        bucket: bucket.to_owned(),
        key_prefix: parts.next().unwrap_or_default().to_owned(),
    })
}

impl BlobTarget {
    /// Event Grid's `StorageBlob` destination, as `az eventgrid event-subscription create
    /// --deadletter-endpoint` writes it.
    pub fn to_json(&self) -> Value {
        json!({"endpointType": "StorageBlob", "properties": {
            "resourceId": self.resource_id,
            "blobContainerName": self.container,
        }})
    }
}

impl S3Target {
    /// eg's `S3` destination; endpoint and region come from the connection.
    pub fn to_json(&self) -> Value {
        let mut properties = json!({"connection": self.connection, "bucket": self.bucket});
        if !self.key_prefix.is_empty() {
            properties["keyPrefix"] = json!(self.key_prefix);
        }
        json!({"endpointType": "S3", "properties": properties})
    }
}

/// `GET …/deadLetters/destination`'s `destination` in one line: `azure:acct / dead`,
/// `s3:minio / bucket/prefix`; `None` without one.
pub fn describe(destination: &Value) -> Option<String> {
    let store = destination["store"].as_str()?;
    let container = destination["container"].as_str().unwrap_or("-");
    Some(match destination["keyPrefix"].as_str().filter(|p| !p.is_empty()) {
        Some(prefix) => format!("{store} / {container}/{prefix}"),
        None => format!("{store} / {container}"),
    })
}

/// The warning shown above a subscription whose dead letters cannot be written, from
/// the same answer's `problem`; `None` while nothing fails.
pub fn failure_warning(problem: &Value) -> Option<String> {
    let kind = problem["kind"].as_str()?;
    let text = |key: &str| problem[key].as_str().unwrap_or("-").to_owned();
    Some(format!(
        "WARNING: dead letters are not being written: {kind} at {} / {} since {} (latest {})\n  {}\n  \
         Records wait in Redis and are retried; after EG__DEADLETTER__GIVE_UP_AFTER they are dropped.\n\n",
        text("store"),
        text("container"),
        text("failingSince"),
        text("lastFailureTime"),
        text("message"),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_blob_target_takes_an_account_name_or_a_full_resource_id() {
        let short = parse_blob("deadletters1/dead").unwrap();
        assert_eq!(
            short.to_json(),
            json!({"endpointType": "StorageBlob", "properties": {
                "resourceId": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/eg/providers/Microsoft.Storage/storageAccounts/deadletters1",
                "blobContainerName": "dead"}})
        );
        let id = "/subscriptions/1234/resourceGroups/prod/providers/Microsoft.Storage/storageAccounts/prodlogs";
        let full = parse_blob(&format!("{id}/dead-letters")).unwrap();
        assert_eq!(full.resource_id, id);
        assert_eq!(full.container, "dead-letters");
    }

    #[test]
    fn bad_blob_targets_say_what_to_give() {
        for (raw, says) in [
            ("dead", "ACCOUNT/CONTAINER"),
            ("acct/", "ACCOUNT/CONTAINER"),
            ("Acct_1/dead", "not a storage account name"),
            (
                "/subscriptions/1/resourceGroups/rg/providers/Microsoft.Web/sites/app/dead",
                "not a storage account's resource id",
            ),
        ] {
            let e = parse_blob(raw).unwrap_err().to_string();
            assert!(e.contains(says), "{raw}: {e}");
        }
    }

    #[test]
    fn an_s3_target_takes_a_connection_a_bucket_and_maybe_a_prefix() {
        let plain = parse_s3("minio/eg-dead").unwrap();
        assert_eq!(
            plain.to_json(),
            json!({"endpointType": "S3", "properties": {"connection": "minio", "bucket": "eg-dead"}})
        );
        let prefixed = parse_s3("aws/eg-dead/prod/eg").unwrap();
        assert_eq!(prefixed.to_json()["properties"]["keyPrefix"], "prod/eg");
        for raw in ["minio", "minio/", "/eg-dead", ""] {
            assert!(
                parse_s3(raw).unwrap_err().to_string().contains("CONNECTION/BUCKET"),
                "{raw}"
            );
        }
    }

    #[test]
    fn the_api_answer_reads_as_one_line_and_a_warning() {
        assert_eq!(
            describe(&json!({"store": "s3:minio", "container": "eg-dead", "keyPrefix": "prod"})).as_deref(),
            Some("s3:minio / eg-dead/prod")
        );
        assert_eq!(
            describe(&json!({"store": "local", "container": "dead"})).as_deref(),
            Some("local / dead")
        );
        assert_eq!(describe(&Value::Null), None);
        assert_eq!(failure_warning(&Value::Null), None);
        let warning = failure_warning(&json!({"store": "azure:deadletters1", "container": "dead",
            "kind": "Unauthenticated", "message": "Server failed to authenticate the request.",
            "failingSince": "2026-11-25T16:00:00.000Z", "lastFailureTime": "2026-11-25T16:05:00.000Z"}))
        .unwrap();
        assert!(
            warning.starts_with(
                "WARNING: dead letters are not being written: Unauthenticated at azure:deadletters1 / dead \
                 since 2026-11-25T16:00:00.000Z (latest 2026-11-25T16:05:00.000Z)\n  Server failed to authenticate"
            ),
            "{warning}"
        );
    }
}
