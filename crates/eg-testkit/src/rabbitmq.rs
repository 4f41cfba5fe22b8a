//! A RabbitMQ broker for the tests of the RabbitMQ destination: Debian's
//! `rabbitmq-server` (3.10) run unprivileged as a node of its own per test — its own temp
//! dir (database, config, enabled plugins: none, the Erlang cookie in its own `HOME`), its
//! own free ports for AMQP, Erlang distribution and epmd, all on 127.0.0.1 — so parallel
//! tests share nothing, and a system broker (on 5672, started by the Debian package where
//! there is an init system) is never used.
//!
//! The node's epmd is started by the harness in the foreground (`epmd -port P`) and lives
//! as long as the [`RabbitMq`]; the broker is a shell script starting the Erlang VM,
//! killed as a process group. [`RabbitMq::kill`] is an outage (SIGKILL); a restart keeps
//! the database, so durable queues and persistent messages survive it.
//!
//! The program is found at `$EG_RABBITMQ_SERVER`, else
//! `/usr/lib/rabbitmq/bin/rabbitmq-server` (Debian's, without the wrapper in
//! `/usr/sbin` that switches to the `rabbitmq` user), else `rabbitmq-server` on `PATH`;
//! `rabbitmqctl` next to it.

use crate::ports::{port_was_taken, start_on_free_ports};
use crate::server_process::{ServerProcess, accepts, find_program};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const HOW_TO_INSTALL: &str = "Install RabbitMQ with `apt-get install rabbitmq-server` \
     (deploy/local/ensure-test-tools.sh, run by `just test`, does it), or set \
     EG_RABBITMQ_SERVER to a `rabbitmq-server` script (rabbitmqctl beside it).";

/// A start takes about 5 s on two cores; a loaded machine may take much longer.
const START_WITHIN: Duration = Duration::from_secs(60);

/// The node's configuration: logs on the console (the harness's log file), the guest
/// user allowed from loopback only (RabbitMQ's default). In the classic Erlang-term form:
/// a `.conf` file is translated by cuttlefish first, which slows every start.
const CONFIG: &str = "\
[{rabbit, [{log, [{console, [{enabled, true}, {level, info}]}, {file, [{file, false}]}]}]}].
";

/// A running RabbitMQ node with its own epmd; both killed when dropped.
pub struct RabbitMq {
    // Before `epmd` and `dir`: the broker goes first, then its epmd, then its files.
    process: Option<ServerProcess>,
    epmd: Option<ServerProcess>,
    amqp_port: u16,
    dist_port: u16,
    epmd_port: u16,
    dir: tempfile::TempDir,
}

impl RabbitMq {
    /// Starts a fresh node and waits until it accepts AMQP connections.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("eg-rabbitmq-")
            .tempdir()
            .expect("temp dir for rabbitmq");
        let mut broker = Self {
            process: None,
            epmd: None,
            amqp_port: 0,
            dist_port: 0,
            epmd_port: 0,
            dir,
        };
        broker.write_files();
        start_on_free_ports("rabbitmq", 3, |ports| {
            (broker.amqp_port, broker.dist_port, broker.epmd_port) = (ports[0], ports[1], ports[2]);
            let started = broker.spawn_epmd().and_then(|()| broker.spawn());
            if started.as_ref().is_err_and(|e| port_was_taken(e)) {
                // Undo the half start before other ports are tried.
                broker.kill();
                broker.epmd = None;
                let _ = std::fs::remove_dir_all(broker.dir.path().join("mnesia"));
            }
            started
        });
        broker
    }

    fn write_files(&self) {
        let dir = self.dir.path();
        std::fs::create_dir_all(dir.join("home")).expect("create rabbitmq's HOME");
        std::fs::write(dir.join("rabbitmq.config"), CONFIG).expect("write rabbitmq.config");
        std::fs::write(dir.join("enabled_plugins"), "[].\n").expect("write enabled_plugins");
        // Read instead of /etc/rabbitmq/rabbitmq-env.conf, so a machine's settings stay out.
        std::fs::write(dir.join("rabbitmq-env.conf"), "").expect("write rabbitmq-env.conf");
    }

    fn spawn_epmd(&mut self) -> Result<(), String> {
        let mut command = Command::new("epmd");
        command.args(["-port", &self.epmd_port.to_string(), "-address", "127.0.0.1"]);
        let mut epmd = ServerProcess::spawn("epmd", command, &self.dir.path().join("epmd.log"));
        let port = self.epmd_port;
        epmd.wait_until_ready(Duration::from_secs(10), |_| accepts(port))?;
        self.epmd = Some(epmd);
        Ok(())
    }

    /// The environment `rabbitmq-server` and `rabbitmqctl` run with.
    fn env(&self, command: &mut Command) {
        let dir = self.dir.path();
        command
            .env("HOME", dir.join("home"))
            .env("RABBITMQ_CONF_ENV_FILE", dir.join("rabbitmq-env.conf"))
            .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq.config"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", dir.join("advanced.config"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_NODENAME", self.node_name())
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", self.amqp_port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .env(
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
                "-kernel inet_dist_use_interface {127,0,0,1}",
            );
    }

    fn program() -> PathBuf {
        find_program(
            "EG_RABBITMQ_SERVER",
            Some("/usr/lib/rabbitmq/bin/rabbitmq-server"),
            "rabbitmq-server",
            HOW_TO_INSTALL,
        )
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut command = Command::new(Self::program());
        self.env(&mut command);
        let mut process = ServerProcess::spawn("rabbitmq-server", command, &self.log());
        let port = self.amqp_port;
        // The log lines prove this node bound the port and finished booting.
        process.wait_until_ready(START_WITHIN, |process| {
            let output = process.output();
            output.contains(&format!("started TCP listener on 127.0.0.1:{port}"))
                && output.contains("Server startup complete")
                && accepts(port)
        })?;
        self.process = Some(process);
        Ok(())
    }

    /// `eg-test-<amqp port>@localhost`
    pub fn node_name(&self) -> String {
        format!("eg-test-{}@localhost", self.amqp_port)
    }

    /// The broker's output (its log), appended across restarts.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("rabbitmq.log")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn port(&self) -> u16 {
        self.amqp_port
    }

    /// `amqp://guest:guest@127.0.0.1:PORT/%2f`: the default user on the default vhost.
    pub fn amqp_url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.amqp_port)
    }

    /// The AMQP URL of another user of the default vhost.
    pub fn amqp_url_for(&self, user: &str, password: &str) -> String {
        format!("amqp://{user}:{password}@127.0.0.1:{}/%2f", self.amqp_port)
    }

    /// Runs `rabbitmqctl <args>` against this node; its output, or fails the test.
    pub fn ctl(&self, args: &[&str]) -> String {
        self.try_ctl(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs `rabbitmqctl <args>` against this node: its output, or an error with what it
    /// printed when it failed.
    pub fn try_ctl(&self, args: &[&str]) -> Result<String, String> {
        let program = Self::program().with_file_name("rabbitmqctl");
        let mut command = Command::new(&program);
        self.env(&mut command);
        let output = command
            .args(["-n", &self.node_name(), "-q"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}. {HOW_TO_INSTALL}", program.display()));
        if !output.status.success() {
            return Err(format!(
                "rabbitmqctl {args:?}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// Adds `user` with `password` and every permission on the default vhost (for a test
    /// with credentials of its own, or wrong ones).
    pub fn add_user(&self, user: &str, password: &str) {
        self.ctl(&["add_user", user, password]);
        self.ctl(&["set_permissions", "-p", "/", user, ".*", ".*", ".*"]);
    }

    /// The broker's process id (its start script's) while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// SIGKILL to the broker (script, Erlang VM and its helpers): an outage. Its epmd
    /// stays, as on a machine where the broker crashed.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// SIGTERM: the broker shuts down cleanly.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.stop(Duration::from_secs(30));
        }
    }

    /// Starts a killed or stopped broker again: same ports, same database. A no-op while
    /// it runs.
    pub fn start_again(&mut self) {
        if self.process.is_none() {
            self.spawn().unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// SIGSTOP: the server holds its connections open and answers nothing until
    /// [`RabbitMq::resume`]. A no-op while it is killed.
    pub fn pause(&self) {
        if let Some(process) = &self.process {
            process.pause();
        }
    }

    /// SIGCONT after [`RabbitMq::pause`].
    pub fn resume(&self) {
        if let Some(process) = &self.process {
            process.resume();
        }
    }

    /// [`RabbitMq::kill`], then [`RabbitMq::start_again`].
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }
}

impl Drop for RabbitMq {
    fn drop(&mut self) {
        self.kill();
        self.epmd = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Checks that the port speaks AMQP 0-9-1: the broker answers the protocol header
    /// with `connection.start` (a method frame on channel 0, class 10, method 10).
    fn speaks_amqp(port: u16) -> Result<(), String> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream
            .write_all(b"AMQP\x00\x00\x09\x01")
            .map_err(|e| format!("write: {e}"))?;
        let mut frame = [0u8; 11];
        stream.read_exact(&mut frame).map_err(|e| format!("read: {e}"))?;
        if frame[0] == 1 && frame[1..3] == [0, 0] && frame[7..11] == [0, 10, 0, 10] {
            Ok(())
        } else {
            Err(format!("not connection.start: {frame:?}"))
        }
    }

    #[test]
    fn a_node_of_its_own_keeps_durable_queues_and_users_across_a_kill() {
        let started = std::time::Instant::now();
        let mut broker = RabbitMq::start();
        eprintln!("rabbitmq started in {:?}", started.elapsed());
        let port = broker.port();
        speaks_amqp(port).unwrap();
        assert_eq!(broker.amqp_url(), format!("amqp://guest:guest@127.0.0.1:{port}/%2f"));

        broker.add_user("eg-publisher", "right-password");
        broker.ctl(&["authenticate_user", "eg-publisher", "right-password"]);
        let wrong = broker.try_ctl(&["authenticate_user", "eg-publisher", "wrong-password"]);
        assert!(wrong.is_err(), "a wrong password was accepted: {wrong:?}");
        broker.ctl(&[
            "eval",
            r#"rabbit_amqqueue:declare(rabbit_misc:r(<<"/">>, queue, <<"eg-durable">>), true, false, [], none, <<"eg-test">>)."#,
        ]);

        let started = std::time::Instant::now();
        broker.restart();
        eprintln!("rabbitmq restarted in {:?}", started.elapsed());
        assert_eq!(broker.port(), port);
        speaks_amqp(port).unwrap();
        // The node answers AMQP before it has recovered its durable queues: a listing
        // right after the restart may still be empty.
        let listed = std::time::Instant::now();
        let queues = loop {
            let queues = broker.ctl(&["list_queues", "name", "durable"]);
            if queues.contains("eg-durable\ttrue") || listed.elapsed() > Duration::from_secs(30) {
                break queues;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(queues.contains("eg-durable\ttrue"), "{queues:?}");
        broker.ctl(&["authenticate_user", "eg-publisher", "right-password"]);

        broker.kill();
        assert!(!accepts(port));
    }
}
