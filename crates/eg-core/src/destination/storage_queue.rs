//! An Azure Storage queue (Event Grid's `StorageQueue`) of an account configured in eg:
//! one message per event.

use super::Kind;
use super::{NamedConnections, required_string};
use crate::api_error::InvalidField;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A queue of a storage account configured in eg.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageQueue {
    pub account: String,
    /// As written (`/subscriptions/…/storageAccounts/<account>`), shown back.
    pub resource_id: String,
    pub queue_name: String,
    /// `queueMessageTimeToLiveInSeconds`: `None` = the queue service's default
    /// (7 days), -1 = never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_ttl_seconds: Option<i64>,
}

impl Kind for StorageQueue {
    const ENDPOINT_TYPE: &'static str = "StorageQueue";
    const OWN: &'static [&'static str] = &["resourceId", "queueName", "queueMessageTimeToLiveInSeconds"];
    /// One message per event and no properties, as Event Grid: nothing shared.
    const SHARED: &'static [&'static str] = &[];

    fn read(props: &Map<String, Value>) -> Result<Self, InvalidField> {
        let resource_id = required_string(props, "resourceId")?;
        let account = storage_account(&resource_id)?;
        let queue_name = required_string(props, "queueName")?;
        check_queue_name(&queue_name)?;
        let message_ttl_seconds = match props.get("queueMessageTimeToLiveInSeconds") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_i64() {
                Some(ttl) if ttl == -1 || ttl > 0 => Some(ttl),
                _ => {
                    return Err(InvalidField::new(
                        "properties.queueMessageTimeToLiveInSeconds",
                        format!("must be a positive number of seconds, or -1 for messages that never expire; got {v}"),
                    ));
                }
            },
        };
        Ok(Self {
            account,
            resource_id,
            queue_name,
            message_ttl_seconds,
        })
    }

    fn show(&self) -> Map<String, Value> {
        let mut props = Map::new();
        props.insert("resourceId".to_owned(), json!(self.resource_id));
        props.insert("queueName".to_owned(), json!(self.queue_name));
        if let Some(ttl) = self.message_ttl_seconds {
            props.insert("queueMessageTimeToLiveInSeconds".to_owned(), json!(ttl));
        }
        props
    }

    fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
        if configured.has_azure_account(&self.account) {
            return Ok(());
        }
        Err(InvalidField::new(
            "properties.resourceId",
            format!(
                "eg has no configuration for the storage account {:?}: an operator must add it (EG__STORAGE__ACCOUNTS__{}__CONNECTION_STRING) before subscriptions can deliver there",
                self.account,
                self.account.to_ascii_uppercase()
            ),
        ))
    }

    fn identity(&self) -> String {
        format!("storagequeue://{}/{}", self.account, self.queue_name)
    }
}

/// Azure's queue naming rules: 3–63 of `[a-z0-9-]`, a letter or digit at both ends, no `--`.
fn check_queue_name(name: &str) -> Result<(), InvalidField> {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let valid = (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && alnum(name.chars().next())
        && alnum(name.chars().last())
        && !name.contains("--");
    if valid {
        Ok(())
    } else {
        Err(InvalidField::new(
            "properties.queueName",
            format!(
                "{name:?} is not a valid queue name: 3-63 lower-case letters, digits or single hyphens, starting and ending with a letter or digit"
            ),
        ))
    }
}

/// The account of `/subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Storage/storageAccounts/<account>`
/// (segment names compared as Azure does, ignoring case).
pub(crate) fn storage_account(resource_id: &str) -> Result<String, InvalidField> {
    let parts: Vec<&str> = resource_id.trim_matches('/').split('/').collect();
    let shaped = parts.len() == 8
        && parts[0].eq_ignore_ascii_case("subscriptions")
        && parts[2].eq_ignore_ascii_case("resourceGroups")
        && parts[4].eq_ignore_ascii_case("providers")
        && parts[5].eq_ignore_ascii_case("Microsoft.Storage")
        && parts[6].eq_ignore_ascii_case("storageAccounts")
        && parts.iter().all(|p| !p.is_empty());
    if !shaped {
        return Err(InvalidField::new(
            "properties.resourceId",
            format!(
                "{resource_id:?} is not a storage account id: expected /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Storage/storageAccounts/<account>"
            ),
        ));
    }
    let account = parts[7];
    let valid =
        (3..=24).contains(&account.len()) && account.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !valid {
        return Err(InvalidField::new(
            "properties.resourceId",
            format!("{account:?} is not a storage account name: 3-24 lower-case letters or digits"),
        ));
    }
    Ok(account.to_owned())
}

#[cfg(test)]
mod tests {
    use super::super::Target;
    use super::super::tests::{Configured, read, reads_back};
    use serde_json::json;

    const QUEUE_ACCOUNT: &str =
        "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/queues1";

    #[test]
    fn storage_queue_as_event_grid_writes_it() {
        let e = read(
            "StorageQueue",
            json!({"resourceId": QUEUE_ACCOUNT, "queueName": "orders", "queueMessageTimeToLiveInSeconds": -1}),
        )
        .unwrap();
        assert_eq!(e.display_name(), "storagequeue://queues1/orders");
        assert!(e.check_configured(&Configured).is_ok());
        reads_back(&e);
        for ttl in [json!(0), json!(-2), json!("1")] {
            let err = read(
                "StorageQueue",
                json!({"resourceId": QUEUE_ACCOUNT, "queueName": "orders", "queueMessageTimeToLiveInSeconds": ttl}),
            )
            .unwrap_err();
            assert_eq!(err.field, "properties.queueMessageTimeToLiveInSeconds");
        }
        let other = read(
            "StorageQueue",
            json!({"resourceId": QUEUE_ACCOUNT.replace("queues1", "other"), "queueName": "orders"}),
        )
        .unwrap();
        assert_eq!(
            other.check_configured(&Configured).unwrap_err().field,
            "properties.resourceId"
        );
        let _: &Target = &other;
    }
}
