//! The accounts and connections eg's configuration names, as far as the management API
//! checks subscriptions against them: a subscription names an account or a connection,
//! and only the configuration holds where it is and its keys. Also the readers of the
//! properties both kinds of named destination share.

use crate::api_error::InvalidField;
use crate::identity::IdentityFacts;
use crate::json::json_type;
use serde_json::{Map, Value};

/// What eg's configuration says about the accounts and connections a subscription may
/// name (object stores for dead letters, queues and brokers for deliveries); the
/// management API checks each new subscription against it.
pub trait NamedConnections {
    /// Whether an Azure storage account of this name is configured.
    fn has_azure_account(&self, account: &str) -> bool;
    /// The S3 connection of this name, when configured.
    fn s3_connection(&self, name: &str) -> Option<S3ConnectionFacts<'_>>;
    /// Whether a broker connection of this name is configured in the settings section
    /// `section` (`rabbitmq` for `EG__BROKERS__RABBITMQ__<NAME>__…`, `nats`, …).
    fn has_broker_connection(&self, section: &str, name: &str) -> bool;
    /// The delivery identity of this name (`EG__IDENTITIES__<NAME>__…`), when configured.
    fn identity(&self, _name: &str) -> Option<IdentityFacts> {
        None
    }
    /// The name of the identity configured for this Entra ID tenant, when one is.
    fn identity_for_tenant(&self, _tenant: &str) -> Option<String> {
        None
    }
    /// The client certificate of this name (`EG__CLIENT_CERTIFICATES__<NAME>__…`), when
    /// configured.
    fn client_certificate(&self, _name: &str) -> Option<CertificateFacts> {
        None
    }
}

/// What a subscription may be checked against about a configured client certificate
/// (never its key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateFacts {
    /// When it stops being valid (RFC 3339).
    pub not_after: String,
    /// Whether that time has passed.
    pub expired: bool,
}

/// What a subscription may be checked against about an S3 connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct S3ConnectionFacts<'a> {
    /// `None`: AWS itself.
    pub endpoint_url: Option<&'a str>,
    /// `None`: the subscription's, or the AWS environment's.
    pub region: Option<&'a str>,
}

/// A connection or account name as configuration keys spell it
/// (`EG__BROKERS__RABBITMQ__<NAME>__…` is read in lower case): 1–63 of `[a-z0-9_]`.
pub(crate) fn connection_name(name: &str, field: &str) -> Result<(), InvalidField> {
    if (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        Ok(())
    } else {
        Err(InvalidField::new(
            field,
            format!("{name:?} is not a connection name: 1-63 lower-case letters, digits or '_'"),
        ))
    }
}

/// `properties.<key>`, required.
pub(crate) fn required_string(props: &Map<String, Value>, key: &str) -> Result<String, InvalidField> {
    optional_string(props, key)?.ok_or_else(|| InvalidField::new(format!("properties.{key}"), "is required"))
}

/// `properties.<key>`: absent or null is `None`, anything but a string is refused.
pub(crate) fn optional_string(props: &Map<String, Value>, key: &str) -> Result<Option<String>, InvalidField> {
    match props.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(InvalidField::new(
            format!("properties.{key}"),
            format!("must be a string, got {}", json_type(other)),
        )),
    }
}
