//! The ceilings each figure is measured against, measured in the same run on the same
//! machine:
//!
//! - Redis: `redis-benchmark` running `XADD` of a 1 KB field (the size of an event) from
//!   50 connections, one command per round trip and pipelined 100 deep, against a fresh
//!   `redis-server` configured like the deployment's (unix socket, append-only file with
//!   the scenario's `appendfsync`). Without pipelining it is what a round trip per
//!   command allows; pipelined, what Redis can absorb at all.
//! - HTTP: the bench's own client posting to the bench's own receiver with nothing in
//!   between, one event per request and 100 per request: what the load generator and the
//!   receiver can do on this machine without eg.
//!
//! Each is measured once per run and remembered ([`Ceilings`]).

use crate::load::{self, Progress, Target, Template};
use crate::receiver::{Behaviour, Receiver};
use anyhow::{Context, bail};
use eg_testkit::RedisServer;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `appendfsync` of the deployment's Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fsync {
    EverySec,
    Always,
}

impl Fsync {
    pub fn name(self) -> &'static str {
        match self {
            Fsync::EverySec => "everysec",
            Fsync::Always => "always",
        }
    }
}

/// Which ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `redis-benchmark XADD`, commands per second; `pipeline` deep.
    RedisXadd { fsync: Fsync, pipeline: u32 },
    /// The bench's client to its receiver: events per second with `events` per request.
    Http { events: u32 },
}

impl Kind {
    pub fn label(self) -> String {
        match self {
            Kind::RedisXadd { fsync, pipeline: 1 } => {
                format!("redis-benchmark XADD 1 KB ({}), no pipelining", fsync.name())
            }
            Kind::RedisXadd { fsync, pipeline } => {
                format!("redis-benchmark -P {pipeline} XADD 1 KB ({})", fsync.name())
            }
            Kind::Http { events: 1 } => "bench client → receiver, 1 event/request".into(),
            Kind::Http { events } => format!("bench client → receiver, {events} events/request"),
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Kind::RedisXadd { .. } => "XADD/s",
            Kind::Http { events: 1 } => "requests/s",
            Kind::Http { .. } => "events/s",
        }
    }
}

/// Ceilings measured so far in this run.
pub struct Ceilings {
    quick: bool,
    measured: BTreeMap<Kind, f64>,
}

impl Ceilings {
    pub fn new(quick: bool) -> Self {
        Self {
            quick,
            measured: BTreeMap::new(),
        }
    }

    /// The ceiling, measured now if it was not yet in this run.
    pub async fn get(&mut self, kind: Kind) -> anyhow::Result<f64> {
        if let Some(v) = self.measured.get(&kind) {
            return Ok(*v);
        }
        eprintln!("ceiling: {} …", kind.label());
        let value = match kind {
            Kind::RedisXadd { fsync, pipeline } => redis_xadd(fsync, pipeline, self.quick)?,
            Kind::Http { events } => http(events as usize, self.quick).await?,
        };
        eprintln!("ceiling: {} = {value:.0} {}", kind.label(), kind.unit());
        self.measured.insert(kind, value);
        Ok(value)
    }

    pub fn to_json(&self) -> Value {
        Value::Array(
            self.measured
                .iter()
                .map(|(k, v)| json!({"ceiling": k.label(), "value": v.round(), "unit": k.unit()}))
                .collect(),
        )
    }

    pub fn all(&self) -> impl Iterator<Item = (Kind, f64)> + '_ {
        self.measured.iter().map(|(k, v)| (*k, *v))
    }
}

/// Sets `appendfsync` on a running server.
pub fn set_fsync(redis_url: &str, fsync: Fsync) -> anyhow::Result<()> {
    let mut conn = redis::Client::open(redis_url)?.get_connection()?;
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendfsync")
        .arg(fsync.name())
        .query::<()>(&mut conn)?;
    Ok(())
}

fn redis_xadd(fsync: Fsync, pipeline: u32, quick: bool) -> anyhow::Result<f64> {
    let server = RedisServer::start();
    set_fsync(&server.url(), fsync)?;
    let requests: u64 = match (pipeline > 1, quick) {
        (false, true) => 50_000,
        (false, false) => 200_000,
        (true, true) => 200_000,
        (true, false) => 1_000_000,
    };
    let value = "x".repeat(1024);
    let output = Command::new("redis-benchmark")
        .arg("-s")
        .arg(server.socket())
        .args([
            "-c",
            "50",
            "-n",
            &requests.to_string(),
            "-P",
            &pipeline.to_string(),
            "--csv",
        ])
        .args(["XADD", "egbench:xadd", "*", "d", &value])
        .output()
        .context("cannot run redis-benchmark (it comes with redis-server, e.g. `apt-get install redis-tools`)")?;
    if !output.status.success() {
        bail!("redis-benchmark failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    parse_csv_rps(&String::from_utf8_lossy(&output.stdout))
}

/// The `rps` column of `redis-benchmark --csv`'s last row.
fn parse_csv_rps(csv: &str) -> anyhow::Result<f64> {
    let row = csv
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with("\"test\""))
        .context("redis-benchmark printed no result")?;
    // The first column (the command) holds no `","`: its argument is letters only.
    let mut columns = row.split("\",\"");
    let rps = columns.nth(1).context("no rps column")?.trim_matches('"');
    rps.parse().with_context(|| format!("rps {rps:?}"))
}

/// Events per second the bench's client gets through to its receiver with `events` per
/// request from 64 connections (the same client and receiver the scenarios use).
async fn http(events: usize, quick: bool) -> anyhow::Result<f64> {
    let receiver = Arc::new(Receiver::start(Behaviour::default()).await?);
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()?;
    let target = Target {
        http,
        url: receiver.url().to_owned(),
        key: String::new(),
    };
    let template = Template::new(events, 1024);
    let progress = Arc::new(Progress::default());
    let duration = if quick {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(5)
    };
    let connections = if events == 1 { 64 } else { 16 };
    let tasks = load::closed(&target, &template, connections, None, None, &progress);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (start, at) = (receiver.events(), Instant::now());
    tokio::time::sleep(duration).await;
    let (end, took) = (receiver.events(), at.elapsed());
    progress.stop();
    load::join(tasks).await?;
    Ok((end - start) as f64 / took.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_redis_benchmark_csv() -> anyhow::Result<()> {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\"\n\"XADD egbench:xadd * d xxxx\",\"81234.56\",\"0.5\"\n";
        assert!((parse_csv_rps(csv)? - 81234.56).abs() < 1e-6);
        assert!(parse_csv_rps("").is_err());
        Ok(())
    }
}
