//! A NATS server with JetStream for the tests of the NATS JetStream destination:
//! Debian's `nats-server` (2.9), one per test on a free loopback port, its JetStream
//! store in a temp dir, optionally requiring a user and password. A restart keeps the
//! port and the store, so streams and their messages survive a kill.
//!
//! The program is found at `$EG_NATS_SERVER`, else `nats-server` on `PATH`.

use crate::ports::start_on_free_ports;
use crate::server_process::{ServerProcess, find_program};
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const HOW_TO_INSTALL: &str = "Install NATS with `apt-get install nats-server` \
     (deploy/local/ensure-test-tools.sh, run by `just test`, does it), or set EG_NATS_SERVER \
     to a `nats-server` program.";

const START_WITHIN: Duration = Duration::from_secs(20);

/// A user and password the server requires of every client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsUser {
    pub user: String,
    pub password: String,
}

/// A running `nats-server -js`; killed when dropped.
pub struct Nats {
    // Before `dir`: the process is killed before its files are removed.
    process: Option<ServerProcess>,
    port: u16,
    /// Unique per server: the start checks that the one answering on the port is this one.
    name: String,
    user: Option<NatsUser>,
    dir: tempfile::TempDir,
}

impl Nats {
    /// Starts a server that lets any client in.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// Starts a server that requires `user` and `password`.
    pub fn start_with_user(user: &str, password: &str) -> Self {
        Self::start_with(Some(NatsUser {
            user: user.to_owned(),
            password: password.to_owned(),
        }))
    }

    fn start_with(user: Option<NatsUser>) -> Self {
        static SERVERS: AtomicU32 = AtomicU32::new(0);
        let dir = tempfile::Builder::new()
            .prefix("eg-nats-")
            .tempdir()
            .expect("temp dir for nats");
        let name = format!(
            "eg-test-{}-{}",
            std::process::id(),
            SERVERS.fetch_add(1, Ordering::Relaxed)
        );
        let mut server = Self {
            process: None,
            port: 0,
            name,
            user,
            dir,
        };
        start_on_free_ports("nats-server", 1, |ports| {
            server.port = ports[0];
            server.spawn()
        });
        server
    }

    /// The configuration file: listen address, name, JetStream store, users.
    fn config(&self) -> String {
        let mut config = format!(
            "listen: \"127.0.0.1:{}\"\nserver_name: \"{}\"\njetstream {{\n  store_dir: {}\n}}\n",
            self.port,
            self.name,
            quoted(&self.store_dir())
        );
        if let Some(user) = &self.user {
            config.push_str(&format!(
                "authorization {{\n  user: {}\n  password: {}\n}}\n",
                json_string(&user.user),
                json_string(&user.password)
            ));
        }
        config
    }

    fn spawn(&mut self) -> Result<(), String> {
        let config = self.dir.path().join("nats.conf");
        std::fs::write(&config, self.config()).expect("write nats.conf");
        let program = find_program("EG_NATS_SERVER", None, "nats-server", HOW_TO_INSTALL);
        let mut command = Command::new(program);
        command.arg("-c").arg(&config);
        let mut process = ServerProcess::spawn("nats-server", command, &self.log());
        let (port, name) = (self.port, self.name.clone());
        process.wait_until_ready(START_WITHIN, |_| {
            server_info(port).is_some_and(|info| is_self(&info, &name))
        })?;
        self.process = Some(process);
        Ok(())
    }

    fn store_dir(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    /// The server's output, appended across restarts.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("nats.log")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `nats://127.0.0.1:PORT` (no credentials in it; see [`Nats::user`]).
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The user and password the server requires, if any.
    pub fn user(&self) -> Option<&NatsUser> {
        self.user.as_ref()
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// SIGKILL: an outage. The JetStream store stays on disk.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Starts a killed server again: same port, same store, same users. A no-op while
    /// it runs.
    pub fn start_again(&mut self) {
        if self.process.is_none() {
            self.spawn().unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// SIGSTOP: the server holds its connections open and answers nothing until
    /// [`Nats::resume`]. A no-op while it is killed.
    pub fn pause(&self) {
        if let Some(process) = &self.process {
            process.pause();
        }
    }

    /// SIGCONT after [`Nats::pause`].
    pub fn resume(&self) {
        if let Some(process) = &self.process {
            process.resume();
        }
    }

    /// [`Nats::kill`], then [`Nats::start_again`].
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The `INFO {…}` line a NATS server sends first to every client.
fn server_info(port: u16) -> Option<String> {
    let stream =
        TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).ok()?;
    line.starts_with("INFO ").then_some(line)
}

/// Whether the INFO line is the server called `name`, with JetStream on.
fn is_self(info: &str, name: &str) -> bool {
    info.contains(&format!("\"server_name\":\"{name}\"")) && info.contains("\"jetstream\":true")
}

fn quoted(path: &Path) -> String {
    json_string(&path.display().to_string())
}

/// A double-quoted string in NATS's configuration syntax (JSON's escapes).
fn json_string(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A client speaking NATS's text protocol, enough to check a server by hand.
    struct Client {
        reader: BufReader<TcpStream>,
        writer: TcpStream,
    }

    impl Client {
        /// Connects as `user` (if any) and returns the server's answer to a `PING`:
        /// `PONG`, or its `-ERR` line.
        fn connect(port: u16, user: Option<(&str, &str)>) -> (Self, String) {
            let writer = TcpStream::connect(("127.0.0.1", port)).unwrap();
            writer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut client = Self {
                reader: BufReader::new(writer.try_clone().unwrap()),
                writer,
            };
            let info = client.line();
            assert!(info.starts_with("INFO "), "{info}");
            let credentials = user
                .map(|(user, pass)| format!(r#","user":"{user}","pass":"{pass}""#))
                .unwrap_or_default();
            client.send(&format!(
                "CONNECT {{\"verbose\":false,\"pedantic\":false{credentials}}}\r\nPING\r\n"
            ));
            let answer = client.line();
            (client, answer)
        }

        fn send(&mut self, text: &str) {
            self.writer.write_all(text.as_bytes()).unwrap();
        }

        fn line(&mut self) -> String {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            line.trim_end().to_owned()
        }

        /// Publishes `payload` to `subject` and returns the reply's payload.
        fn request(&mut self, subject: &str, payload: &str) -> String {
            self.send(&format!(
                "SUB _INBOX.eg 1\r\nPUB {subject} _INBOX.eg {}\r\n{payload}\r\n",
                payload.len()
            ));
            loop {
                let line = self.line();
                if line.starts_with("MSG _INBOX.eg") {
                    let reply = self.line();
                    self.send("UNSUB 1\r\n");
                    return reply;
                }
                assert!(!line.starts_with("-ERR"), "{line}");
            }
        }
    }

    #[test]
    fn jetstream_keeps_a_stream_across_a_kill_and_only_the_user_gets_in() {
        let started = std::time::Instant::now();
        let mut nats = Nats::start_with_user("eg-sender", "right-password");
        eprintln!("nats-server started in {:?}", started.elapsed());
        let port = nats.port();
        assert_eq!(nats.url(), format!("nats://127.0.0.1:{port}"));

        let (_, refused) = Client::connect(port, Some(("eg-sender", "wrong-password")));
        assert!(refused.contains("Authorization Violation"), "{refused}");
        let (_, anonymous) = Client::connect(port, None);
        assert!(anonymous.contains("Authorization Violation"), "{anonymous}");
        let (mut client, pong) = Client::connect(port, Some(("eg-sender", "right-password")));
        assert_eq!(pong, "PONG");
        let created = client.request(
            "$JS.API.STREAM.CREATE.EG",
            r#"{"name":"EG","subjects":["eg.>"],"storage":"file"}"#,
        );
        assert!(
            created.contains(r#""type":"io.nats.jetstream.api.v1.stream_create_response""#),
            "{created}"
        );
        let ack = client.request("eg.events", "hello");
        assert!(ack.contains(r#""stream":"EG""#) && ack.contains(r#""seq":1"#), "{ack}");
        drop(client);

        let started = std::time::Instant::now();
        nats.restart();
        eprintln!("nats-server restarted in {:?}", started.elapsed());
        let (mut client, pong) = Client::connect(port, Some(("eg-sender", "right-password")));
        assert_eq!(pong, "PONG");
        let info = client.request("$JS.API.STREAM.INFO.EG", "");
        assert!(info.contains(r#""messages":1"#), "{info}");

        nats.kill();
        assert!(server_info(port).is_none());
    }
}
