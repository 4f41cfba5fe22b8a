//! An OAuth 2.0 / OpenID Connect provider for the tests of tokens on webhook delivery
//! (docs/oauth-delivery.md): npm's `oauth2-mock-server` run by `oauth/mock-idp.mjs`,
//! one process per test on a free loopback port. It signs RS256 JWTs with a key it
//! publishes at `/jwks`, gives tokens only to its one client with the right secret (else
//! `401 invalid_client`), for the lifetime the test chose, with `aud` the audience asked
//! for (or the scope without `/.default`, as Entra ID does).
//!
//! [`OAuthServer::kill`] and [`OAuthServer::start_again`] are the provider's outage; the
//! port stays, a new signing key is made (receivers fetch the key set again on an
//! unknown `kid`).
//!
//! For certificate credentials (`private_key_jwt`), [`OAuthServer::start_with_certificate`]
//! registers a certificate for its client ([`client_certificate`] makes one from a fixed
//! test key); `mock-idp.mjs` then verifies each client assertion's signature against it.
//!
//! The package is found at `$EG_OAUTH2_MOCK_SERVER` (its directory), else
//! `<workspace>/target/test-tools/node_modules/oauth2-mock-server`, where
//! `deploy/local/ensure-test-tools.sh` installs it; `node` is found on `PATH`.

use crate::ports::start_on_free_ports;
use crate::server_process::{ServerProcess, find_program, workspace_root};
use crate::tls::{Issued, write_pem};
use rcgen::{CertificateParams, DnType, KeyPair};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The version `deploy/local/ensure-test-tools.sh` installs and these tests were written for.
pub const VERSION: &str = "9.3.0";
/// The one client the provider knows.
pub const CLIENT_ID: &str = "eg-delivery";
/// Its secret: tests look for it in logs and answers, where it must never be.
pub const CLIENT_SECRET: &str = "s3cret-of-the-oauth-test-client";

/// RSA keys for certificate credentials, made once with `openssl genpkey` (ring, eg's
/// crypto library, cannot make RSA keys): the client's, and another one (a wrong key).
pub const CLIENT_KEY_PEM: &str = include_str!("../oauth/client-key.pem");
pub const OTHER_KEY_PEM: &str = include_str!("../oauth/other-key.pem");

/// A self-signed certificate for the client, with the RSA key `key_pem`, written as
/// `<file>.pem` and `<file>.key` into `dir`; `expired` makes one that ended in 2020.
pub fn client_certificate(dir: &Path, file: &str, key_pem: &str, expired: bool) -> Issued {
    let key = KeyPair::from_pem(key_pem).expect("an RSA test key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("certificate parameters");
    params.distinguished_name.push(DnType::CommonName, CLIENT_ID);
    if expired {
        params.not_before = rcgen::date_time_ymd(2019, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 1, 1);
    }
    let cert = params.self_signed(&key).expect("a client certificate");
    let issued = Issued {
        cert: dir.join(format!("{file}.pem")),
        key: dir.join(format!("{file}.key")),
    };
    write_pem(&issued.cert, "CERTIFICATE", cert.der());
    std::fs::write(&issued.key, key_pem).expect("write the key");
    issued
}

const HOW_TO_INSTALL: &str = "Install it with `npm install --prefix target/test-tools oauth2-mock-server@9.3.0` \
     in the workspace (deploy/local/ensure-test-tools.sh, run by `just test`, does it), \
     or set EG_OAUTH2_MOCK_SERVER to the package's directory.";

const START_WITHIN: Duration = Duration::from_secs(30);

/// A running provider; killed when dropped.
pub struct OAuthServer {
    process: Option<ServerProcess>,
    port: u16,
    token_ttl: Duration,
    /// The certificate registered for the client (`CLIENT_CERT_FILE`), if any.
    certificate: Option<PathBuf>,
    dir: tempfile::TempDir,
}

impl OAuthServer {
    /// Starts a provider whose tokens live `token_ttl`.
    pub fn start(token_ttl: Duration) -> Self {
        Self::start_inner(token_ttl, None)
    }

    /// [`OAuthServer::start`], with `certificate` (PEM) registered for the client: it may
    /// then sign in with a client assertion signed by that certificate's key.
    pub fn start_with_certificate(token_ttl: Duration, certificate: &Path) -> Self {
        Self::start_inner(token_ttl, Some(certificate.to_path_buf()))
    }

    fn start_inner(token_ttl: Duration, certificate: Option<PathBuf>) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("eg-oauth-")
            .tempdir()
            .expect("temp dir for the oauth server");
        let mut server = Self {
            process: None,
            port: 0,
            token_ttl,
            certificate,
            dir,
        };
        start_on_free_ports("the oauth server", 1, |ports| {
            server.port = ports[0];
            server.spawn()
        });
        server
    }

    fn package() -> PathBuf {
        match std::env::var_os("EG_OAUTH2_MOCK_SERVER") {
            Some(dir) => PathBuf::from(dir),
            None => workspace_root().join("target/test-tools/node_modules/oauth2-mock-server"),
        }
    }

    fn command(&self) -> Command {
        let module = Self::package().join("dist/index.mjs");
        assert!(module.is_file(), "no {}. {HOW_TO_INSTALL}", module.display());
        let node = find_program("EG_NODE", None, "node", "Install Node.js 20 or newer.");
        let mut command = Command::new(node);
        command
            .arg(workspace_root().join("crates/eg-testkit/oauth/mock-idp.mjs"))
            .env("MODULE", module)
            .env("PORT", self.port.to_string())
            .env("CLIENT_ID", CLIENT_ID)
            .env("CLIENT_SECRET", CLIENT_SECRET)
            .env("TOKEN_TTL_SECONDS", self.token_ttl.as_secs().max(1).to_string());
        if let Some(certificate) = &self.certificate {
            command.env("CLIENT_CERT_FILE", certificate);
        }
        command
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("oauth.log");
        let mut process = ServerProcess::spawn("oauth2-mock-server", self.command(), &log);
        let ready = format!("ready http://localhost:{}", self.port);
        process.wait_until_ready(START_WITHIN, |p| p.output().contains(&ready))?;
        self.process = Some(process);
        Ok(())
    }

    /// The token endpoint (an identity's `TOKEN_URL`).
    pub fn token_url(&self) -> String {
        format!("http://127.0.0.1:{}/token", self.port)
    }

    /// The published key set receivers verify tokens with.
    pub fn jwks_url(&self) -> String {
        format!("http://127.0.0.1:{}/jwks", self.port)
    }

    /// The `iss` of its tokens.
    pub fn issuer(&self) -> String {
        format!("http://localhost:{}", self.port)
    }

    /// SIGKILL: the provider is down (connections refused) until [`Self::start_again`].
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Starts a killed provider again on the same port (with a new signing key).
    pub fn start_again(&mut self) {
        if self.process.is_none() {
            self.spawn().unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        self.kill();
    }
}
