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
//! The package is found at `$EG_OAUTH2_MOCK_SERVER` (its directory), else
//! `<workspace>/target/test-tools/node_modules/oauth2-mock-server`, where
//! `deploy/local/ensure-test-tools.sh` installs it; `node` is found on `PATH`.

use crate::ports::start_on_free_ports;
use crate::server_process::{ServerProcess, find_program, workspace_root};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The version `deploy/local/ensure-test-tools.sh` installs and these tests were written for.
pub const VERSION: &str = "9.3.0";
/// The one client the provider knows.
pub const CLIENT_ID: &str = "eg-delivery";
/// Its secret: tests look for it in logs and answers, where it must never be.
pub const CLIENT_SECRET: &str = "s3cret-of-the-oauth-test-client";

const HOW_TO_INSTALL: &str = "Install it with `npm install --prefix target/test-tools oauth2-mock-server@9.3.0` \
     in the workspace (deploy/local/ensure-test-tools.sh, run by `just test`, does it), \
     or set EG_OAUTH2_MOCK_SERVER to the package's directory.";

const START_WITHIN: Duration = Duration::from_secs(30);

/// A running provider; killed when dropped.
pub struct OAuthServer {
    process: Option<ServerProcess>,
    port: u16,
    token_ttl: Duration,
    dir: tempfile::TempDir,
}

impl OAuthServer {
    /// Starts a provider whose tokens live `token_ttl`.
    pub fn start(token_ttl: Duration) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("eg-oauth-")
            .tempdir()
            .expect("temp dir for the oauth server");
        let mut server = Self {
            process: None,
            port: 0,
            token_ttl,
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
