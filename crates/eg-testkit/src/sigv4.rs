//! AWS Signature Version 4 for the harness's own S3 requests (creating a bucket, reading
//! an object back), so a test needs no AWS SDK: only the header-signing form, with the
//! payload's SHA-256 in `x-amz-content-sha256`, as S3 expects.

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// An access key: its id and its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

/// Signs requests with an access key, for one service in one region.
pub struct Signer<'a> {
    pub credentials: &'a Credentials,
    pub region: &'a str,
    pub service: &'a str,
}

impl Signer<'_> {
    /// The headers that sign `method path_and_query` with `body` at `now`:
    /// `x-amz-date`, `x-amz-content-sha256` and `Authorization` (the `Host` header signed
    /// is `host`, which the request must send as is).
    pub fn sign(
        &self,
        method: &str,
        host: &str,
        path_and_query: &str,
        body: &[u8],
        now: DateTime<Utc>,
    ) -> Vec<(String, String)> {
        let Signer {
            credentials,
            region,
            service,
        } = *self;
        let amz_date = now.format("%Y%m%dT%H%M%SZ").to_string();
        let date = now.format("%Y%m%d").to_string();
        let payload_hash = hex(&Sha256::digest(body));
        let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
        let signed_headers = "host;x-amz-content-sha256;x-amz-date";
        let canonical_request = format!(
            "{method}\n{path}\n{}\nhost:{host}\nx-amz-content-sha256:{payload_hash}\nx-amz-date:{amz_date}\n\n{signed_headers}\n{payload_hash}",
            canonical_query(query)
        );
        let scope = format!("{date}/{region}/{service}/aws4_request");
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            hex(&Sha256::digest(canonical_request.as_bytes()))
        );
        let mut key = hmac(
            format!("AWS4{}", credentials.secret_access_key).as_bytes(),
            date.as_bytes(),
        );
        for part in [region, service, "aws4_request"] {
            key = hmac(&key, part.as_bytes());
        }
        let signature = hex(&hmac(&key, string_to_sign.as_bytes()));
        vec![
            ("x-amz-date".to_owned(), amz_date),
            ("x-amz-content-sha256".to_owned(), payload_hash),
            (
                "Authorization".to_owned(),
                format!(
                    "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
                    credentials.access_key_id
                ),
            ),
        ]
    }
}

/// The query's `name=value` pairs sorted (names and values are used as given: the
/// harness only sends ones that need no encoding).
fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<String> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            if pair.contains('=') {
                pair.to_owned()
            } else {
                format!("{pair}=")
            }
        })
        .collect();
    pairs.sort();
    pairs.join("&")
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
