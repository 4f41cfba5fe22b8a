//! Azure Storage's Shared Key authorization for the harness's own requests to Azurite
//! (creating a container or queue, reading back what eg wrote), so a test needs no Azure
//! SDK: the blob and queue services' string-to-sign (version 2015-02-21 and later), with
//! path-style URLs (`/<account>/<container>/<blob>`).

use base64::Engine;
use hmac::{Hmac, Mac};
use percent_encoding::percent_decode_str;
use sha2::Sha256;

/// The `x-ms-version` the harness sends.
pub const API_VERSION: &str = "2021-08-06";

/// The headers that authorize `method path_and_query` (path starting with `/<account>`,
/// query values percent-encoded) with a body of `content_length` bytes, for `account`
/// with its base64 `key`: `x-ms-date`, `x-ms-version`, the `x-ms-*` headers given in
/// `ms_headers`, and `Authorization`. A key that is not base64 signs with its bytes, so a
/// test can send a wrong one.
pub fn sign(
    account: &str,
    key: &str,
    method: &str,
    path_and_query: &str,
    ms_headers: &[(&str, &str)],
    content_length: usize,
) -> Vec<(String, String)> {
    let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT").to_string();
    let mut headers: Vec<(String, String)> = vec![
        ("x-ms-date".to_owned(), date),
        ("x-ms-version".to_owned(), API_VERSION.to_owned()),
    ];
    headers.extend(
        ms_headers
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), (*v).to_owned())),
    );
    headers.sort();
    let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
    // The account appears twice with path-style URLs: once for the account, once in the path.
    let mut resource = format!("/{account}{}", decode(path));
    let mut parameters: Vec<(String, String)> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .map(|(name, value)| (decode(name).to_ascii_lowercase(), decode(value)))
        .collect();
    parameters.sort();
    for (name, value) in parameters {
        resource.push_str(&format!("\n{name}:{value}"));
    }
    let length = if content_length == 0 {
        String::new()
    } else {
        content_length.to_string()
    };
    let canonical_headers: String = headers.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
    // VERB, then Content-Encoding … Range (11 standard headers; only the length is sent).
    let string_to_sign = format!("{method}\n\n\n{length}\n\n\n\n\n\n\n\n\n{canonical_headers}{resource}");
    let engine = base64::engine::general_purpose::STANDARD;
    let key = engine.decode(key).unwrap_or_else(|_| key.as_bytes().to_vec());
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes a key of any length");
    mac.update(string_to_sign.as_bytes());
    let signature = engine.encode(mac.finalize().into_bytes());
    headers.push(("Authorization".to_owned(), format!("SharedKey {account}:{signature}")));
    headers
}

fn decode(text: &str) -> String {
    percent_decode_str(text).decode_utf8_lossy().into_owned()
}
