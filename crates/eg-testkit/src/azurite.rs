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
use crate::ports::free_ports;
use crate::server_process::{ServerProcess, find_program};
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
        for _ in 0..5 {
            let ports = free_ports(3);
            (azurite.blob_port, azurite.queue_port, azurite.table_port) = (ports[0], ports[1], ports[2]);
            match azurite.spawn() {
                Ok(()) => return azurite,
                // A parallel test took one of the ports first: try others.
                Err(e) if e.contains("EADDRINUSE") => continue,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("azurite could not listen on free ports (5 tries)");
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
    use base64::Engine;
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    const VERSION_HEADER: &str = "2021-08-06";

    /// Sends a request signed with Shared Key for `key` (Azure's "Authorize with Shared
    /// Key" for the blob and queue services), `path` starting with `/devstoreaccount1`.
    fn signed(port: u16, key: &str, method: &str, path: &str, extra: &[(&str, &str)], body: &[u8]) -> http::Response {
        let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        let mut ms_headers: Vec<(String, String)> = vec![
            ("x-ms-date".to_owned(), date),
            ("x-ms-version".to_owned(), VERSION_HEADER.to_owned()),
        ];
        ms_headers.extend(extra.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        ms_headers.sort();
        let (resource, query) = path.split_once('?').unwrap_or((path, ""));
        let mut canonical_resource = format!("/{ACCOUNT}{resource}");
        let mut params: Vec<(&str, &str)> = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap_or((p, "")))
            .collect();
        params.sort();
        for (name, value) in params {
            canonical_resource.push_str(&format!("\n{name}:{value}"));
        }
        let length = if body.is_empty() {
            String::new()
        } else {
            body.len().to_string()
        };
        let canonical_headers: String = ms_headers.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
        let string_to_sign = format!("{method}\n\n\n{length}\n\n\n\n\n\n\n\n\n{canonical_headers}{canonical_resource}");
        let engine = base64::engine::general_purpose::STANDARD;
        let mut mac = Hmac::<Sha256>::new_from_slice(&engine.decode(key).unwrap()).unwrap();
        mac.update(string_to_sign.as_bytes());
        let authorization = format!("SharedKey {ACCOUNT}:{}", engine.encode(mac.finalize().into_bytes()));
        let mut headers: Vec<(&str, &str)> = ms_headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        headers.push(("Authorization", &authorization));
        http::request(port, method, path, &headers, body).unwrap()
    }

    #[test]
    fn blobs_need_the_account_key_and_survive_a_restart() {
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

        let created = signed(
            port,
            ACCOUNT_KEY,
            "PUT",
            "/devstoreaccount1/dead?restype=container",
            &[],
            b"",
        );
        assert_eq!(created.status, 201, "{created:?}");
        let blob_type = [("x-ms-blob-type", "BlockBlob")];
        let put = signed(
            port,
            ACCOUNT_KEY,
            "PUT",
            "/devstoreaccount1/dead/a.json",
            &blob_type,
            b"[1]",
        );
        assert_eq!(put.status, 201, "{put:?}");
        let wrong_key = base64::engine::general_purpose::STANDARD.encode(b"not the account key");
        let refused = signed(
            port,
            &wrong_key,
            "PUT",
            "/devstoreaccount1/dead/b.json",
            &blob_type,
            b"[2]",
        );
        assert_eq!(refused.status, 403, "{refused:?}");

        let started = std::time::Instant::now();
        azurite.restart();
        eprintln!("azurite restarted in {:?}", started.elapsed());
        let read = signed(port, ACCOUNT_KEY, "GET", "/devstoreaccount1/dead/a.json", &[], b"");
        assert_eq!((read.status, read.body.as_str()), (200, "[1]"), "{read:?}");
        let missing = signed(port, ACCOUNT_KEY, "GET", "/devstoreaccount1/dead/b.json", &[], b"");
        assert_eq!(missing.status, 404, "{missing:?}");

        // A killed emulator is down until started again, on the same port.
        azurite.kill();
        assert!(http::request(port, "GET", "/", &[], b"").is_err());
        azurite.start_again();
        assert!(answers_as_azurite(port, "Azurite-Blob"));
    }
}
