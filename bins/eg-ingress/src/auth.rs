//! Publisher authentication at the HTTP edge (spec §1): finds the credential a publish
//! request presents, an access key (`aeg-sas-key` header or query) or a SAS token
//! (`aeg-sas-token` header or `Authorization: SharedAccessSignature …`), and has
//! `eg_core::publisher_auth` check it at the deployment's time (the clock corrected to
//! Redis's). Keys and tokens are never logged.

use crate::errors::Refusal;
use axum::http::HeaderMap;
use eg_core::UnixMillis;
use eg_core::publisher_auth::{self, Credential};
use eg_store::TopicEntry;
use std::collections::HashMap;

/// Checks the request's credential against `entry`'s keys at `now`; `resource_path` is
/// the publish path a SAS token must be issued for.
pub fn authenticate(
    entry: &TopicEntry,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    resource_path: &str,
    now: UnixMillis,
) -> Result<(), Refusal> {
    publisher_auth::verify(presented(query, headers), &entry.keys, resource_path, now)
        .map_err(|e| Refusal::unauthorized(e.to_string()))
}

/// The credential presented, in order of precedence: a key in the header, a key in the
/// query, a token in `aeg-sas-token`, a token in `Authorization`.
fn presented<'a>(query: &'a HashMap<String, String>, headers: &'a HeaderMap) -> Option<Credential<'a>> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    header("aeg-sas-key")
        .or_else(|| query.get("aeg-sas-key").map(String::as_str))
        .map(Credential::Key)
        .or_else(|| header("aeg-sas-token").map(Credential::SasToken))
        .or_else(|| {
            header("authorization")
                .and_then(|v| v.strip_prefix("SharedAccessSignature "))
                .map(Credential::SasToken)
        })
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
}
