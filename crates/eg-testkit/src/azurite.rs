//! Azurite, Microsoft's storage emulator (npm package `azurite`), for the tests of blob
//! dead letters and the Storage Queue destination: one process per test serving the blob,
//! queue (and table) services on free loopback ports, its data on disk in a temp dir.
//!
//! It runs as close to a real account as the emulator allows: requests are checked
//! against the account key (SharedKey/SAS; an anonymous request gets Azure's 403 error
//! XML), and without `--loose` unsupported headers are refused. Only
//! `--skipApiVersionCheck` is relaxed, because client crates may send an API version
//! newer than the emulator knows. The account is the emulator's well-known
//! `devstoreaccount1`, with path-style URLs (`http://127.0.0.1:PORT/devstoreaccount1`).
//!
//! Azurite keeps its metadata in memory and saves it to disk every 5 s (LokiJS
//! autosave): [`Azurite::kill`] (SIGKILL) is an outage that may lose the last seconds of
//! acknowledged writes, which a real account never does; [`Azurite::stop`] (SIGTERM)
//! saves first. [`Azurite::restart`] stops gracefully, so the data survives it.
//!
//! The program is found at `$EG_AZURITE`, else
//! `<workspace>/target/test-tools/node_modules/.bin/azurite` (where
//! `deploy/local/ensure-test-tools.sh` installs it), else on `PATH`.

use crate::http;
use crate::ports::start_on_free_ports;
use crate::server_process::{ServerProcess, find_program};
use crate::shared_key;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The emulator's well-known account name.
pub const ACCOUNT: &str = "devstoreaccount1";
/// The emulator's well-known account key (base64), published by Microsoft.
pub const ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// The version `deploy/local/ensure-test-tools.sh` installs and these tests were written for.
pub const VERSION: &str = "3.37.0";

const HOW_TO_INSTALL: &str = "Install Azurite with `npm install --prefix target/test-tools azurite@3.37.0` \
     in the workspace (deploy/local/ensure-test-tools.sh, run by `just test`, does it), \
     or set EG_AZURITE to its `azurite` program.";

/// How long a start may take (it takes about 2 s).
const START_WITHIN: Duration = Duration::from_secs(30);

/// A running Azurite with blob and queue services; killed when dropped.
pub struct Azurite {
    // Before `dir`: the process is killed before its files are removed.
    process: Option<ServerProcess>,
    blob_port: u16,
    queue_port: u16,
    table_port: u16,
    dir: tempfile::TempDir,
}

impl Azurite {
    /// Starts a fresh emulator in its own temp dir and waits until both services answer.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("eg-azurite-")
            .tempdir()
            .expect("temp dir for azurite");
        let mut azurite = Self {
            process: None,
            blob_port: 0,
            queue_port: 0,
            table_port: 0,
            dir,
        };
        start_on_free_ports("azurite", 3, |ports| {
            (azurite.blob_port, azurite.queue_port, azurite.table_port) = (ports[0], ports[1], ports[2]);
            azurite.spawn()
        });
        azurite
    }

    fn command(&self) -> Command {
        let program = find_program(
            "EG_AZURITE",
            Some("target/test-tools/node_modules/.bin/azurite"),
            "azurite",
            HOW_TO_INSTALL,
        );
        let mut command = Command::new(program);
        command
            .arg("--location")
            .arg(self.data_dir())
            .args(["--blobHost", "127.0.0.1", "--blobPort", &self.blob_port.to_string()])
            .args(["--queueHost", "127.0.0.1", "--queuePort", &self.queue_port.to_string()])
            .args(["--tableHost", "127.0.0.1", "--tablePort", &self.table_port.to_string()])
            .args(["--skipApiVersionCheck", "--disableTelemetry"]);
        command
    }

    /// Starts the process and waits until it serves on its ports.
    fn spawn(&mut self) -> Result<(), String> {
        std::fs::create_dir_all(self.data_dir()).expect("create azurite's data dir");
        let mut process = ServerProcess::spawn("azurite", self.command(), &self.log());
        let (blob, queue, table) = (self.blob_port, self.queue_port, self.table_port);
        // The log line proves this process bound the port, the request that it serves.
        let listening = |process: &ServerProcess, service: &str, port: u16| {
            process.output().contains(&format!(
                "Azurite {service} service is successfully listening at http://127.0.0.1:{port}"
            ))
        };
        process.wait_until_ready(START_WITHIN, |process| {
            listening(process, "Blob", blob)
                && listening(process, "Queue", queue)
                && listening(process, "Table", table)
                && answers_as_azurite(blob, "Azurite-Blob")
                && answers_as_azurite(queue, "Azurite-Queue")
        })?;
        self.process = Some(process);
        Ok(())
    }

    fn data_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    /// Azurite's output (access log included), appended across restarts.
    pub fn log(&self) -> std::path::PathBuf {
        self.dir.path().join("azurite.log")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn blob_port(&self) -> u16 {
        self.blob_port
    }

    pub fn queue_port(&self) -> u16 {
        self.queue_port
    }

    /// `http://127.0.0.1:PORT/devstoreaccount1`: the blob service endpoint.
    pub fn blob_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{ACCOUNT}", self.blob_port)
    }

    /// `http://127.0.0.1:PORT/devstoreaccount1`: the queue service endpoint.
    pub fn queue_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{ACCOUNT}", self.queue_port)
    }

    /// A storage connection string naming the account, its key and both endpoints, as
    /// the Azure portal gives one (with the emulator's endpoints).
    pub fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};BlobEndpoint={};QueueEndpoint={};",
            self.blob_endpoint(),
            self.queue_endpoint()
        )
    }

    /// The emulator's process id while it runs (to pause it with SIGSTOP, say).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// SIGKILL: an outage. Writes of the last few seconds may be lost (see the module
    /// doc); [`Azurite::stop`] keeps them.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// SIGTERM, waiting for the emulator to save its metadata and exit: an outage that
    /// keeps every acknowledged write.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.stop(Duration::from_secs(10));
        }
    }

    /// Starts a killed or stopped emulator again on the same ports with the same data;
    /// a no-op while it runs.
    pub fn start_again(&mut self) {
        if self.process.is_none() {
            self.spawn().unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// [`Azurite::stop`], then [`Azurite::start_again`]: same ports, same data.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }
}

/// Requests to the emulator signed with the account key, for a test's setup and its
/// checks of what eg wrote (a test should not need an Azure SDK for that).
impl Azurite {
    /// Sends `method path_and_query` to `service`, signed with the account key (`path`
    /// starting with `/devstoreaccount1`, query values percent-encoded; `ms_headers` are
    /// `x-ms-*` headers to send and sign).
    pub fn request(
        &self,
        service: Service,
        method: &str,
        path_and_query: &str,
        ms_headers: &[(&str, &str)],
        body: &[u8],
    ) -> http::Response {
        let port = match service {
            Service::Blob => self.blob_port,
            Service::Queue => self.queue_port,
        };
        let headers = shared_key::sign(ACCOUNT, ACCOUNT_KEY, method, path_and_query, ms_headers, body.len());
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        http::request(port, method, path_and_query, &headers, body)
            .unwrap_or_else(|e| panic!("azurite {method} {path_and_query}: {e}"))
    }

    /// Creates the blob container `name`; fails the test unless the emulator made it.
    pub fn create_container(&self, name: &str) {
        let response = self.request(
            Service::Blob,
            "PUT",
            &format!("/{ACCOUNT}/{name}?restype=container"),
            &[],
            b"",
        );
        assert_eq!(response.status, 201, "create container {name}: {}", response.body);
    }

    /// Creates the queue `name`; fails the test unless the emulator made it.
    pub fn create_queue(&self, name: &str) {
        let response = self.request(Service::Queue, "PUT", &format!("/{ACCOUNT}/{name}"), &[], b"");
        assert_eq!(response.status, 201, "create queue {name}: {}", response.body);
    }

    /// The names of the blobs in `container` (the first 5,000), in the emulator's order.
    pub fn list_blobs(&self, container: &str) -> Vec<String> {
        let response = self.request(
            Service::Blob,
            "GET",
            &format!("/{ACCOUNT}/{container}?restype=container&comp=list"),
            &[],
            b"",
        );
        assert_eq!(response.status, 200, "list blobs in {container}: {}", response.body);
        xml_texts(&response.body, "Name")
    }

    /// The content of blob `path` in `container`, `None` when it does not exist.
    pub fn get_blob(&self, container: &str, path: &str) -> Option<String> {
        let response = self.request(
            Service::Blob,
            "GET",
            &format!("/{ACCOUNT}/{container}/{path}"),
            &[],
            b"",
        );
        match response.status {
            200 => Some(response.body),
            404 => None,
            status => panic!("get blob {container}/{path}: {status} {}", response.body),
        }
    }

    /// Takes every message out of `queue` (receive, then delete each) and returns their
    /// texts as stored (Event Grid's are base64 of the JSON), oldest first.
    pub fn drain_queue(&self, queue: &str) -> Vec<String> {
        let mut texts = Vec::new();
        loop {
            let response = self.request(
                Service::Queue,
                "GET",
                &format!("/{ACCOUNT}/{queue}/messages?numofmessages=32&visibilitytimeout=60"),
                &[],
                b"",
            );
            assert_eq!(response.status, 200, "receive from {queue}: {}", response.body);
            let ids = xml_texts(&response.body, "MessageId");
            if ids.is_empty() {
                return texts;
            }
            let receipts = xml_texts(&response.body, "PopReceipt");
            for (id, receipt) in ids.iter().zip(&receipts) {
                let receipt = percent_encoding::utf8_percent_encode(receipt, percent_encoding::NON_ALPHANUMERIC);
                let path = format!("/{ACCOUNT}/{queue}/messages/{id}?popreceipt={receipt}");
                let deleted = self.request(Service::Queue, "DELETE", &path, &[], b"");
                assert_eq!(
                    deleted.status, 204,
                    "delete message {id} from {queue}: {}",
                    deleted.body
                );
            }
            texts.extend(xml_texts(&response.body, "MessageText"));
        }
    }
}

/// One of the emulator's services, for [`Azurite::request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Blob,
    Queue,
}

/// The texts of every `<name>…</name>` in `xml`, unescaped.
fn xml_texts(xml: &str, name: &str) -> Vec<String> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let mut texts = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        rest = &rest[start + open.len()..];
        let Some(end) = rest.find(&close) else { break };
        texts.push(unescape(&rest[..end]));
        rest = &rest[end + close.len()..];
    }
    texts
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

impl Drop for Azurite {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether `port` answers HTTP as an Azurite service (its `Server` header).
fn answers_as_azurite(port: u16, server: &str) -> bool {
    http::request(port, "GET", &format!("/{ACCOUNT}?comp=list"), &[], b"")
        .is_ok_and(|response| response.header("server").is_some_and(|s| s.starts_with(server)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(port: u16, key: &str, method: &str, path: &str, extra: &[(&str, &str)], body: &[u8]) -> http::Response {
        let headers = shared_key::sign(ACCOUNT, key, method, path, extra, body.len());
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        http::request(port, method, path, &headers, body).unwrap()
    }

    #[test]
    fn blobs_and_queue_messages_need_the_account_key_and_survive_a_restart() {
        let started = std::time::Instant::now();
        let mut azurite = Azurite::start();
        eprintln!("azurite started in {:?}", started.elapsed());
        let port = azurite.blob_port();
        assert_eq!(
            azurite.blob_endpoint(),
            format!("http://127.0.0.1:{port}/devstoreaccount1")
        );

        // Anonymous requests are refused with Azure's error XML, as by a real account.
        let anonymous = http::request(port, "GET", "/devstoreaccount1?comp=list", &[], b"").unwrap();
        assert_eq!(anonymous.status, 403, "{anonymous:?}");
        assert!(
            anonymous.body.contains("<Code>AuthorizationFailure</Code>"),
            "{}",
            anonymous.body
        );
        let queue = http::request(azurite.queue_port(), "GET", "/devstoreaccount1?comp=list", &[], b"").unwrap();
        assert_eq!(queue.status, 403, "{queue:?}");
        assert!(
            queue.body.contains("<Code>AuthenticationFailed</Code>"),
            "{}",
            queue.body
        );

        azurite.create_container("dead");
        let blob_type = [("x-ms-blob-type", "BlockBlob")];
        let put = signed(
            port,
            ACCOUNT_KEY,
            "PUT",
            "/devstoreaccount1/dead/2026/a.json",
            &blob_type,
            b"[1]",
        );
        assert_eq!(put.status, 201, "{put:?}");
        let wrong_key = "bm90IHRoZSBhY2NvdW50IGtleQ=="; // base64 of "not the account key"
        let refused = signed(
            port,
            wrong_key,
            "PUT",
            "/devstoreaccount1/dead/b.json",
            &blob_type,
            b"[2]",
        );
        assert_eq!(refused.status, 403, "{refused:?}");
        azurite.create_queue("events");
        let message = b"<QueueMessage><MessageText>eyJpZCI6MX0=</MessageText></QueueMessage>";
        let sent = azurite.request(
            Service::Queue,
            "POST",
            "/devstoreaccount1/events/messages",
            &[],
            message,
        );
        assert_eq!(sent.status, 201, "{sent:?}");

        let started = std::time::Instant::now();
        azurite.restart();
        eprintln!("azurite restarted in {:?}", started.elapsed());
        assert_eq!(azurite.list_blobs("dead"), ["2026/a.json"]);
        assert_eq!(azurite.get_blob("dead", "2026/a.json").as_deref(), Some("[1]"));
        assert_eq!(azurite.get_blob("dead", "b.json"), None);
        assert_eq!(azurite.drain_queue("events"), ["eyJpZCI6MX0="]);
        assert!(azurite.drain_queue("events").is_empty());

        // A killed emulator is down until started again, on the same port.
        azurite.kill();
        assert!(http::request(port, "GET", "/", &[], b"").is_err());
        azurite.start_again();
        assert!(answers_as_azurite(port, "Azurite-Blob"));
    }
}
