//! Publisher authentication at the HTTP edge (behaviour.md#topics-and-publishing): finds
//! the credential a publish request presents, an access key (`aeg-sas-key` header or query,
//! or `Authorization: SharedAccessKey <key>`, what every namespace SDK sends) or a SAS
//! token (`aeg-sas-token` header or `Authorization: SharedAccessSignature …`), and has
//! `eg_core::publisher_auth` check it at the deployment's time (the clock corrected to
//! Redis's) for the resource the request acts on. Keys and tokens are never logged.

use crate::errors::Refusal;
use axum::http::HeaderMap;
use eg_core::UnixMillis;
use eg_core::publisher_auth::{self, Credential, Resource};
use eg_store::TopicEntry;
use std::collections::HashMap;

/// Checks the request's credential against `entry`'s keys at `now`, for a request
/// acting on `resource` (which says what a SAS token must be issued for).
pub fn authenticate(
    entry: &TopicEntry,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    resource: Resource<'_>,
    now: UnixMillis,
) -> Result<(), Refusal> {
    publisher_auth::verify(presented(query, headers), &entry.keys, resource, now)
        .map_err(|e| Refusal::unauthorized(e.to_string()))
}

/// The credential presented, in order of precedence: a key in `aeg-sas-key`, a key in
/// the query, a token in `aeg-sas-token`, then whatever `Authorization` carries.
fn presented<'a>(query: &'a HashMap<String, String>, headers: &'a HeaderMap) -> Option<Credential<'a>> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    header("aeg-sas-key")
        .or_else(|| query.get("aeg-sas-key").map(String::as_str))
        .map(Credential::Key)
        .or_else(|| header("aeg-sas-token").map(Credential::SasToken))
        .or_else(|| header("authorization").and_then(from_authorization))
}

/// `SharedAccessKey <key>` or `SharedAccessSignature <token>`, the scheme in any case and
/// followed by exactly one space (as azure-core and the Go SDK write it). Any other
/// scheme (`Bearer`: eg has no Entra ID) is no credential.
fn from_authorization(value: &str) -> Option<Credential<'_>> {
    let (scheme, rest) = value.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("SharedAccessKey") {
        Some(Credential::Key(rest))
    } else if scheme.eq_ignore_ascii_case("SharedAccessSignature") {
        Some(Credential::SasToken(rest))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found<'a>(query: &'a HashMap<String, String>, headers: &'a HeaderMap) -> Option<Credential<'a>> {
        presented(query, headers)
    }

    #[test]
    fn credentials_are_found_where_the_sdks_put_them() {
        let none = HashMap::new();
        let mut headers = HeaderMap::new();
        assert_eq!(found(&none, &headers), None);
        headers.insert("authorization", "SharedAccessSignature r=a&e=b&s=c".parse().unwrap());
        assert_eq!(found(&none, &headers), Some(Credential::SasToken("r=a&e=b&s=c")));
        headers.insert("aeg-sas-token", "r=x&e=y&s=z".parse().unwrap());
        assert_eq!(found(&none, &headers), Some(Credential::SasToken("r=x&e=y&s=z")));
        let query = HashMap::from([("aeg-sas-key".to_owned(), "from-query".to_owned())]);
        assert_eq!(found(&query, &headers), Some(Credential::Key("from-query")));
        headers.insert("aeg-sas-key", "from-header".parse().unwrap());
        assert_eq!(found(&query, &headers), Some(Credential::Key("from-header")));

        let mut bearer = HeaderMap::new();
        bearer.insert("authorization", "Bearer t".parse().unwrap());
        assert_eq!(found(&none, &bearer), None);
    }

    #[test]
    fn a_shared_access_key_in_authorization_is_a_key() {
        let none = HashMap::new();
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("authorization", value.parse().unwrap());
            headers
        };
        for value in [
            "SharedAccessKey k3y==",
            "sharedaccesskey k3y==",
            "SHAREDACCESSKEY k3y==",
        ] {
            let headers = with(value);
            assert_eq!(found(&none, &headers), Some(Credential::Key("k3y==")), "{value}");
        }
        let headers = with("sharedaccesssignature r=a&e=b&s=c");
        assert_eq!(found(&none, &headers), Some(Credential::SasToken("r=a&e=b&s=c")));
        // Exactly one space: a second one is part of the key, which then does not match.
        let headers = with("SharedAccessKey  k3y==");
        assert_eq!(found(&none, &headers), Some(Credential::Key(" k3y==")));
        for value in ["SharedAccessKey", "SharedAccessKeyk3y==", "SharedAccessKeys k3y=="] {
            let headers = with(value);
            assert_eq!(found(&none, &headers), None, "{value}");
        }
        // aeg-sas-key still comes first.
        let mut headers = with("SharedAccessKey from-authorization");
        headers.insert("aeg-sas-key", "from-header".parse().unwrap());
        assert_eq!(found(&none, &headers), Some(Credential::Key("from-header")));
    }
}
