//! Dead-letter blobs read back from Azurite for the oracle, as any client of the account
//! would: List Blobs (every page) and Get Blob, signed with the account key by
//! eg-testkit's Shared Key signer. Asynchronous and without panics, unlike eg-testkit's
//! test helpers, so the drain can poll it and an unreachable emulator is an error.

use anyhow::{Context, bail};
use eg_testkit::azurite::{ACCOUNT, ACCOUNT_KEY};
use std::collections::HashSet;
use std::time::{Duration, SystemTime};

/// A dead-letter object: its path as `<container>/<blob name>` (the dead-letter
/// directory's layout), its text, and when it was written.
pub struct Blob {
    pub path: String,
    pub text: String,
    /// Last-Modified has whole seconds: the write happened within the second after it,
    /// so this is the end of that second.
    pub written_at: SystemTime,
}

pub struct BlobReader {
    http: reqwest::Client,
    port: u16,
    container: String,
    read: HashSet<String>,
}

impl BlobReader {
    pub fn new(http: reqwest::Client, port: u16, container: &str) -> Self {
        Self {
            http,
            port,
            container: container.to_owned(),
            read: HashSet::new(),
        }
    }

    /// The blobs written since the last call.
    pub async fn new_blobs(&mut self) -> anyhow::Result<Vec<Blob>> {
        let mut blobs = Vec::new();
        let mut marker = String::new();
        loop {
            let mut path = format!("/{ACCOUNT}/{}?restype=container&comp=list", self.container);
            if !marker.is_empty() {
                let encoded = percent_encoding::utf8_percent_encode(&marker, percent_encoding::NON_ALPHANUMERIC);
                path.push_str(&format!("&marker={encoded}"));
            }
            let listing = self.get(&path).await?.context("the container is missing")?;
            for entry in xml_elements(&listing, "Blob") {
                let Some(name) = xml_elements(entry, "Name").first().map(|n| unescape(n)) else {
                    continue;
                };
                if self.read.contains(&name) {
                    continue;
                }
                let modified = xml_elements(entry, "Last-Modified")
                    .first()
                    .and_then(|t| chrono::DateTime::parse_from_rfc2822(t).ok())
                    .map_or_else(SystemTime::now, |t| {
                        SystemTime::from(t.with_timezone(&chrono::Utc)) + Duration::from_millis(999)
                    });
                let blob_path = format!("/{ACCOUNT}/{}/{}", self.container, encode_path(&name));
                let Some(text) = self.get(&blob_path).await? else {
                    bail!("blob {name} was listed but is not there");
                };
                blobs.push(Blob {
                    path: format!("{}/{name}", self.container),
                    text,
                    written_at: modified,
                });
                self.read.insert(name);
            }
            marker = xml_elements(&listing, "NextMarker")
                .first()
                .map(|m| unescape(m))
                .unwrap_or_default();
            if marker.is_empty() {
                return Ok(blobs);
            }
        }
    }

    /// `GET path_and_query` signed with the account key; `None` on 404.
    async fn get(&self, path_and_query: &str) -> anyhow::Result<Option<String>> {
        let headers = eg_testkit::shared_key::sign(ACCOUNT, ACCOUNT_KEY, "GET", path_and_query, &[], 0);
        let mut request = self
            .http
            .get(format!("http://127.0.0.1:{}{path_and_query}", self.port))
            .timeout(Duration::from_secs(10));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("Azurite GET {path_and_query}"))?;
        let status = response.status();
        let body = response.text().await?;
        match status.as_u16() {
            200 => Ok(Some(body)),
            404 => Ok(None),
            _ => bail!("Azurite GET {path_and_query}: {status} {body}"),
        }
    }
}

/// What a URL path segment keeps as it is (RFC 3986's unreserved characters).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes each segment of a blob name, keeping the slashes.
fn encode_path(name: &str) -> String {
    name.split('/')
        .map(|segment| percent_encoding::utf8_percent_encode(segment, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// The contents of every `<name>…</name>` in `xml` (not unescaped).
fn xml_elements<'a>(xml: &'a str, name: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let mut found = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        rest = &rest[start + open.len()..];
        let Some(end) = rest.find(&close) else { break };
        found.push(&rest[..end]);
        rest = &rest[end + close.len()..];
    }
    found
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_elements_are_found_in_order_and_names_encoded_by_segment() {
        let xml = "<Blobs><Blob><Name>a/1.json</Name><Properties><Last-Modified>Wed, 25 Nov 2026 17:00:00 GMT\
                   </Last-Modified></Properties></Blob><Blob><Name>b&amp;c.json</Name></Blob></Blobs><NextMarker />";
        let blobs = xml_elements(xml, "Blob");
        assert_eq!(blobs.len(), 2);
        assert_eq!(xml_elements(blobs[0], "Name"), ["a/1.json"]);
        assert_eq!(unescape(xml_elements(blobs[1], "Name")[0]), "b&c.json");
        assert!(
            xml_elements(xml, "NextMarker").is_empty(),
            "an empty marker ends the listing"
        );
        assert_eq!(encode_path("DL/2026/11/25/17/x y.json"), "DL/2026/11/25/17/x%20y.json");
    }
}
