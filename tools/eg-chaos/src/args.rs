//! Command-line arguments. Hand-parsed (`--name value` or `--name=value`): a handful of
//! flags does not justify another dependency to compile on small machines.

use anyhow::{Context, bail};
use std::path::PathBuf;
use std::time::Duration;

pub const USAGE: &str = "\
eg-chaos: runs eg's tiers as real processes around a real Redis, publishes continuously
while killing processes and Redis at random, then checks that every event answered 200
reached every subscription it matches or was dead-lettered with a fitting reason, and that
pull consumers (which crash mid-batch, acknowledge late, release and reject) got every
event of the queue subscriptions acknowledged, dead-lettered or dropped with a reason.
A subscription dead-letters to Azure Blob on Azurite (stopped and started again once)
and two deliver to RabbitMQ and NATS JetStream (each broker killed and restarted once);
the oracle reads the blobs and the messages back from those servers.

usage: eg-chaos [options]

  --duration D          how long to publish and inject faults (default 60s)
  --rate N              events per second published (default 60)
  --fault-every D       mean interval between process kills (default 4s; 0s = none)
  --pause-every D       mean interval between freezes (SIGSTOP for 2–8 s, then
                        SIGCONT) of a tier process (default 10s; 0s = none)
  --churn-every D       mean interval between catalog writes under load (a subscription
                        rewritten as it is, a throwaway one created or deleted)
                        (default 3s; 0s = none)
  --redis-restarts N    SIGKILL + restart of redis-server during the run (default 2)
  --redis-freezes N     SIGSTOP of redis-server for 1–6 s during the run (default 1)
  --drain-timeout D     how long the system may take to drain afterwards (default 150s:
                        a crashed pull consumer's events come back only after their
                        60 s locks expire)
  --no-azurite          leave out the subscription dead-lettering to Azure Blob on
                        Azurite (stopped and started again once during the run)
  --no-brokers          leave out the RabbitMQ, NATS JetStream and SQS subscriptions
                        (each broker but moto killed and restarted once during the run)
  --kafka               add a Kafka subscription on tansu keeping its records in moto's
                        S3, tansu killed and restarted once (off by default: tansu on
                        S3 is too slow on a busy 2-core CI machine to drain in time)
  --sentinel            Redis as a primary, a replica and three sentinels (the tiers
                        find the primary through them, EG__REDIS__REPLICA_ACKS=1); a
                        Redis restart is then the primary SIGKILLed, a failover to the
                        replica, and the old primary back as the new one's replica
  --json PATH           also write the JSON report to PATH
  --keep                keep the run directory (logs, dead letters, Redis AOF); it is
                        kept anyway when the oracle finds a violation
  --run-dir PATH        use PATH as the run directory (implies --keep)
  --bin-dir PATH        where eg-ingress, eg-sender, … are (default: next to eg-chaos)
  --ingress N           eg-ingress copies (default 2)
  --schedulers N        eg-scheduler copies (default 2)
  --senders N           eg-sender copies (default 3)
  --deadletters N       eg-deadletter copies (default 2)
  --failure-rate F      share of deliveries a receiver answers badly while faults run,
                        0…1 (default 0.35; some subscriptions double it)
  --max-examples N      example ids listed per violation kind (default 10)
  --sabotage N          checks the checker: when the faults stop, deletes N queued
                        deliveries and up to N queue-subscription entries straight
                        from Redis; the run must then fail
  -h, --help            this text
";

#[derive(Debug, Clone)]
pub struct Args {
    pub duration: Duration,
    pub rate: f64,
    pub fault_every: Duration,
    pub pause_every: Duration,
    pub churn_every: Duration,
    pub redis_restarts: usize,
    pub redis_freezes: usize,
    pub drain_timeout: Duration,
    pub json: Option<PathBuf>,
    pub keep: bool,
    pub run_dir: Option<PathBuf>,
    pub bin_dir: Option<PathBuf>,
    pub ingress: usize,
    pub schedulers: usize,
    pub senders: usize,
    pub deadletters: usize,
    pub failure_rate: f64,
    pub max_examples: usize,
    pub sabotage: usize,
    pub azurite: bool,
    pub brokers: bool,
    /// A Kafka subscription (tansu on moto's S3); off by default.
    pub kafka: bool,
    pub sentinel: bool,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(60),
            rate: 60.0,
            fault_every: Duration::from_secs(4),
            pause_every: Duration::from_secs(10),
            churn_every: Duration::from_secs(3),
            redis_restarts: 2,
            redis_freezes: 1,
            drain_timeout: Duration::from_secs(150),
            json: None,
            keep: false,
            run_dir: None,
            bin_dir: None,
            ingress: 2,
            schedulers: 2,
            senders: 3,
            deadletters: 2,
            failure_rate: 0.35,
            max_examples: 10,
            sabotage: 0,
            azurite: true,
            brokers: true,
            kafka: false,
            sentinel: false,
        }
    }
}

/// `Ok(None)` when help was asked for.
pub fn parse(mut raw: impl Iterator<Item = String>) -> anyhow::Result<Option<Args>> {
    let mut args = Args::default();
    while let Some(arg) = raw.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(None);
        }
        match arg.as_str() {
            "--keep" => args.keep = true,
            "--no-azurite" => args.azurite = false,
            "--no-brokers" => args.brokers = false,
            "--sentinel" => args.sentinel = true,
            "--kafka" => args.kafka = true,
            _ => {}
        }
        if ["--keep", "--no-azurite", "--no-brokers", "--sentinel", "--kafka"].contains(&arg.as_str()) {
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        let mut value = || -> anyhow::Result<String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => raw.next().with_context(|| format!("{name} needs a value")),
            }
        };
        match name.as_str() {
            "--duration" => args.duration = duration(&name, &value()?)?,
            "--rate" => args.rate = number(&name, &value()?)?,
            "--fault-every" => args.fault_every = duration(&name, &value()?)?,
            "--churn-every" => args.churn_every = duration(&name, &value()?)?,
            "--pause-every" => args.pause_every = duration(&name, &value()?)?,
            "--redis-restarts" => args.redis_restarts = count(&name, &value()?)?,
            "--redis-freezes" => args.redis_freezes = count(&name, &value()?)?,
            "--drain-timeout" => args.drain_timeout = duration(&name, &value()?)?,
            "--json" => args.json = Some(PathBuf::from(value()?)),
            "--run-dir" => {
                args.run_dir = Some(PathBuf::from(value()?));
                args.keep = true;
            }
            "--bin-dir" => args.bin_dir = Some(PathBuf::from(value()?)),
            "--ingress" => args.ingress = count(&name, &value()?)?,
            "--schedulers" => args.schedulers = count(&name, &value()?)?,
            "--senders" => args.senders = count(&name, &value()?)?,
            "--deadletters" => args.deadletters = count(&name, &value()?)?,
            "--failure-rate" => args.failure_rate = number(&name, &value()?)?,
            "--sabotage" => args.sabotage = count(&name, &value()?)?,
            "--max-examples" => args.max_examples = count(&name, &value()?)?,
            other => bail!("unknown argument {other:?} (see --help)"),
        }
    }
    if args.rate <= 0.0 {
        bail!("--rate must be more than 0");
    }
    if !(0.0..=1.0).contains(&args.failure_rate) {
        bail!("--failure-rate must be between 0 and 1");
    }
    for (name, n) in [
        ("--ingress", args.ingress),
        ("--schedulers", args.schedulers),
        ("--senders", args.senders),
        ("--deadletters", args.deadletters),
    ] {
        if n == 0 {
            bail!("{name} must be at least 1");
        }
    }
    Ok(Some(args))
}

fn duration(name: &str, text: &str) -> anyhow::Result<Duration> {
    humantime::parse_duration(text).with_context(|| format!("{name} {text:?}: not a duration like 60s or 10m"))
}

fn number(name: &str, text: &str) -> anyhow::Result<f64> {
    text.parse().with_context(|| format!("{name} {text:?}: not a number"))
}

fn count(name: &str, text: &str) -> anyhow::Result<usize> {
    text.parse()
        .with_context(|| format!("{name} {text:?}: not a whole number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &[&str]) -> anyhow::Result<Option<Args>> {
        parse(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn reads_both_spellings_and_defaults() -> anyhow::Result<()> {
        let args = parsed(&["--duration", "10m", "--rate=200", "--keep"])?.context("args")?;
        assert_eq!(args.duration, Duration::from_secs(600));
        assert!((args.rate - 200.0).abs() < f64::EPSILON);
        assert!(args.keep);
        assert_eq!(args.senders, 3);
        assert!(args.azurite && args.brokers, "the outside servers are in by default");
        let without = parsed(&["--no-azurite", "--no-brokers"])?.context("args")?;
        assert!(!without.azurite && !without.brokers);
        assert!(parsed(&["--help"])?.is_none());
        assert!(parsed(&["--nope"]).is_err());
        assert!(parsed(&["--rate"]).is_err());
        assert!(parsed(&["--senders", "0"]).is_err());
        Ok(())
    }
}
