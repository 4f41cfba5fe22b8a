//! An S3-compatible server for the tests of S3 dead letters (and SQS, `crate::sqs`): moto's standalone server
//! (PyPI `moto[server]`, program `moto_server`), one per test on a free loopback port,
//! with request signatures checked, so wrong credentials are refused as by AWS.
//!
//! moto accepts any credentials unless its IAM authentication is on. Each start:
//! 1. seeds moto's random generator (`/moto-api/seed`), so the access key created next is
//!    the same after every restart;
//! 2. creates, with authentication still off, an IAM user allowed `s3:*` and an access
//!    key for it ([`S3Server::credentials`]);
//! 3. turns authentication on (`/moto-api/reset-auth` with 0 free requests);
//! 4. on a restart, replays the requests recorded before (`/moto-api/recorder/…`: moto
//!    keeps everything in memory, so this is how buckets and objects survive a kill;
//!    replayed with authentication on, a request refused then is refused again), and
//!    starts recording.
//!
//! From then on a request signed with an unknown key id gets 403 `InvalidAccessKeyId`, one
//! signed with a wrong secret 403 `SignatureDoesNotMatch`, an unsigned one an error.
//!
//! The program is found at `$EG_MOTO_SERVER`, else
//! `<workspace>/target/test-tools/venv/bin/moto_server` (where
//! `deploy/local/ensure-test-tools.sh` installs it), else on `PATH`.

use crate::http;
use crate::ports::start_on_free_ports;
use crate::server_process::{ServerProcess, find_program};
use crate::sigv4;
pub use crate::sigv4::Credentials;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The region the server is used in (moto serves every region; buckets are made here).
pub const REGION: &str = "us-east-1";
/// The version `deploy/local/ensure-test-tools.sh` installs and these tests were written for.
pub const VERSION: &str = "5.2.5";

const HOW_TO_INSTALL: &str = "Install moto's server with `python3 -m venv target/test-tools/venv && \
     target/test-tools/venv/bin/pip install 'moto[server]==5.2.5'` in the workspace \
     (deploy/local/ensure-test-tools.sh, run by `just test`, does it), or set EG_MOTO_SERVER \
     to its `moto_server` program.";

const START_WITHIN: Duration = Duration::from_secs(30);
/// The seed of moto's random generator: the same seed, the same access key.
const SEED: &str = "1716";
/// The IAM user whose access key the tests use.
const USER: &str = "eg-test";
/// An `s3:*` and `sqs:*` policy for [`USER`] (the SQS destination's tests use the same
/// server, `crate::sqs`).
const POLICY: &str =
    r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*","sqs:*"],"Resource":"*"}]}"#;

/// A running moto server with authentication on; killed when dropped.
pub struct S3Server {
    // Before `dir`: the process is killed before its files are removed.
    process: Option<ServerProcess>,
    port: u16,
    credentials: Credentials,
    dir: tempfile::TempDir,
}

impl S3Server {
    /// Starts a fresh server with its IAM user and waits until it checks signatures.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("eg-s3-")
            .tempdir()
            .expect("temp dir for moto");
        let mut server = Self {
            process: None,
            port: 0,
            credentials: Credentials {
                access_key_id: String::new(),
                secret_access_key: String::new(),
            },
            dir,
        };
        start_on_free_ports("moto_server", 1, |ports| {
            server.port = ports[0];
            server.spawn()
        });
        server
    }

    fn command(&self) -> Command {
        let program = find_program(
            "EG_MOTO_SERVER",
            Some("target/test-tools/venv/bin/moto_server"),
            "moto_server",
            HOW_TO_INSTALL,
        );
        let mut command = Command::new(program);
        command
            .args(["-H", "127.0.0.1", "-p", &self.port.to_string()])
            .env("MOTO_RECORDER_FILEPATH", self.recording())
            // Authentication is turned on by the start, after the IAM user exists.
            .env_remove("INITIAL_NO_AUTH_ACTION_COUNT")
            .env_remove("MOTO_ENABLE_RECORDING");
        // moto replays its recording to itself over HTTP: a proxy must not intercept it.
        for variable in crate::tier::PROXY_VARIABLES {
            command.env_remove(variable);
        }
        command
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut process = ServerProcess::spawn("moto_server", self.command(), &self.log());
        let port = self.port;
        // The log line proves this process bound the port.
        process.wait_until_ready(START_WITHIN, |process| {
            process
                .output()
                .contains(&format!("Running on http://127.0.0.1:{port}"))
                && http::request(port, "GET", "/moto-api/data.json", &[], b"").is_ok_and(|r| r.status == 200)
        })?;
        self.credentials = self
            .set_up()
            .map_err(|e| format!("{e}; moto's output:\n{}", process.output()))?;
        self.process = Some(process);
        Ok(())
    }

    /// Steps 1 to 4 of the module doc.
    fn set_up(&self) -> Result<Credentials, String> {
        self.moto_api(&format!("/moto-api/seed?a={SEED}"), "")?;
        self.iam(&format!("Action=CreateUser&Version=2010-05-08&UserName={USER}"))?;
        self.iam(&format!(
            "Action=PutUserPolicy&Version=2010-05-08&UserName={USER}&PolicyName=s3&PolicyDocument={}",
            form_encode(POLICY)
        ))?;
        let key = self.iam(&format!("Action=CreateAccessKey&Version=2010-05-08&UserName={USER}"))?;
        let credentials = Credentials {
            access_key_id: xml_element(&key, "AccessKeyId").ok_or("CreateAccessKey: no AccessKeyId")?,
            secret_access_key: xml_element(&key, "SecretAccessKey").ok_or("CreateAccessKey: no SecretAccessKey")?,
        };
        self.moto_api("/moto-api/reset-auth", "0")?;
        // With authentication on: a request refused when it was made is refused again.
        if std::fs::metadata(self.recording()).is_ok_and(|m| m.len() > 0) {
            self.moto_api("/moto-api/recorder/replay-recording", "")?;
        }
        self.moto_api("/moto-api/recorder/start-recording", "")?;
        Ok(credentials)
    }

    fn moto_api(&self, path: &str, body: &str) -> Result<String, String> {
        let response = http::request(
            self.port,
            "POST",
            path,
            &[("Content-Type", "text/plain")],
            body.as_bytes(),
        )
        .map_err(|e| format!("moto {path}: {e}"))?;
        if response.status != 200 {
            return Err(format!("moto {path}: {} {}", response.status, response.body));
        }
        Ok(response.body)
    }

    /// An IAM query-API call while authentication is off (the made-up credential scope
    /// only routes the request to IAM).
    fn iam(&self, form: &str) -> Result<String, String> {
        let route = "AWS4-HMAC-SHA256 Credential=AKIAEGSETUP000000000/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0";
        let response = http::request(
            self.port,
            "POST",
            "/",
            &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("Authorization", route),
            ],
            form.as_bytes(),
        )
        .map_err(|e| format!("moto IAM call: {e}"))?;
        if response.status != 200 {
            return Err(format!("moto IAM call {form}: {} {}", response.status, response.body));
        }
        Ok(response.body)
    }

    fn recording(&self) -> PathBuf {
        self.dir.path().join("recording.jsonl")
    }

    /// moto's output (access log included), appended across restarts.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("moto.log")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`: the endpoint URL, path-style buckets.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn region(&self) -> &'static str {
        REGION
    }

    /// The access key of the IAM user allowed `s3:*` (the same after a restart).
    pub fn credentials(&self) -> Credentials {
        self.credentials.clone()
    }

    /// The right access key id with a wrong secret: refused with 403 `SignatureDoesNotMatch`.
    pub fn wrong_secret(&self) -> Credentials {
        Credentials {
            access_key_id: self.credentials.access_key_id.clone(),
            secret_access_key: "wrong-secret-for-the-eg-tests-000000000".to_owned(),
        }
    }

    /// An access key id no user has: refused with 403 `InvalidAccessKeyId`.
    pub fn unknown_key() -> Credentials {
        Credentials {
            access_key_id: "AKIAEGUNKNOWN0000000".to_owned(),
            secret_access_key: "unknown-secret-for-the-eg-tests-0000000".to_owned(),
        }
    }

    /// Sends `method path` signed with `credentials` (path-style: `/<bucket>/<key>`).
    pub fn signed_request(
        &self,
        credentials: &Credentials,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> std::io::Result<http::Response> {
        let host = format!("127.0.0.1:{}", self.port);
        let signer = sigv4::Signer {
            credentials,
            region: REGION,
            service: "s3",
        };
        let headers = signer.sign(method, &host, path, body, chrono::Utc::now());
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        http::request(self.port, method, path, &headers, body)
    }

    /// Creates `bucket` with the test credentials; fails the test when the server refuses.
    pub fn create_bucket(&self, bucket: &str) {
        let response = self
            .signed_request(&self.credentials, "PUT", &format!("/{bucket}"), b"")
            .unwrap_or_else(|e| panic!("create bucket {bucket}: {e}"));
        assert_eq!(response.status, 200, "create bucket {bucket}: {}", response.body);
    }

    /// The object `bucket/key` read with the test credentials, `None` when it does not exist.
    pub fn get_object(&self, bucket: &str, key: &str) -> Option<String> {
        let response = self
            .signed_request(&self.credentials, "GET", &format!("/{bucket}/{key}"), b"")
            .unwrap_or_else(|e| panic!("get {bucket}/{key}: {e}"));
        match response.status {
            200 => Some(response.body),
            404 => None,
            status => panic!("get {bucket}/{key}: {status} {}", response.body),
        }
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// SIGKILL: an outage. What was written before is restored by the next start.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Starts a killed server again on the same port, with the same credentials, buckets
    /// and objects; a no-op while it runs.
    pub fn start_again(&mut self) {
        if self.process.is_none() {
            self.spawn().unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// [`S3Server::kill`], then [`S3Server::start_again`].
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The text of the first `<name>…</name>` in `xml`.
fn xml_element(xml: &str, name: &str) -> Option<String> {
    let start = xml.find(&format!("<{name}>"))? + name.len() + 2;
    let end = start + xml[start..].find(&format!("</{name}>"))?;
    Some(xml[start..end].to_owned())
}

/// `application/x-www-form-urlencoded` encoding of a value.
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_credentials_write_and_objects_survive_a_restart() {
        let started = std::time::Instant::now();
        let mut s3 = S3Server::start();
        eprintln!("moto_server started in {:?}", started.elapsed());
        s3.create_bucket("dead-letters");
        let credentials = s3.credentials();

        let put = s3
            .signed_request(&credentials, "PUT", "/dead-letters/a.json", b"[1]")
            .unwrap();
        assert_eq!(put.status, 200, "{put:?}");
        let wrong_secret = s3
            .signed_request(&s3.wrong_secret(), "PUT", "/dead-letters/b.json", b"[2]")
            .unwrap();
        assert_eq!(wrong_secret.status, 403, "{wrong_secret:?}");
        assert!(
            wrong_secret.body.contains("SignatureDoesNotMatch"),
            "{}",
            wrong_secret.body
        );
        let unknown = s3
            .signed_request(&S3Server::unknown_key(), "PUT", "/dead-letters/b.json", b"[2]")
            .unwrap();
        assert_eq!(unknown.status, 403, "{unknown:?}");
        assert!(unknown.body.contains("InvalidAccessKeyId"), "{}", unknown.body);
        let no_bucket = s3
            .signed_request(&credentials, "PUT", "/no-such-bucket/a.json", b"[3]")
            .unwrap();
        assert_eq!(no_bucket.status, 404, "{no_bucket:?}");
        assert!(no_bucket.body.contains("NoSuchBucket"), "{}", no_bucket.body);

        let started = std::time::Instant::now();
        s3.restart();
        eprintln!("moto_server restarted in {:?}", started.elapsed());
        assert_eq!(s3.credentials(), credentials, "the access key changed with the restart");
        assert_eq!(s3.get_object("dead-letters", "a.json").as_deref(), Some("[1]"));
        assert_eq!(s3.get_object("dead-letters", "b.json"), None);
        let refused = s3
            .signed_request(&s3.wrong_secret(), "GET", "/dead-letters/a.json", b"")
            .unwrap();
        assert_eq!(
            refused.status, 403,
            "signatures are checked after a restart too: {refused:?}"
        );
    }
}
