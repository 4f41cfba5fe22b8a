//! CPU time of the processes under measurement, from `/proc/<pid>/stat` (user + system
//! time, fields 14 and 15), summed per label: "sender" is every eg-sender process,
//! "redis" the redis-server, "bench" this program (load generator and receiver).
//! A [`Sample`] taken before and after a window gives each tier's CPU seconds in it.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The processes to account, each under a label (several pids may share one).
#[derive(Debug, Clone, Default)]
pub struct Processes {
    list: Vec<(String, u32)>,
}

/// CPU seconds per label at one moment, labels in the order they were added.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    seconds: Vec<(String, f64)>,
}

impl Processes {
    pub fn add(&mut self, label: &str, pid: u32) {
        self.list.push((label.to_owned(), pid));
    }

    /// `pid` and every process below it, under one label: a server started through a
    /// wrapper script (RabbitMQ's Erlang VM) does its work in a child.
    pub fn add_with_children(&mut self, label: &str, pid: u32) {
        let mut pending = vec![pid];
        while let Some(next) = pending.pop() {
            self.add(label, next);
            pending.extend(children_of(next));
        }
    }

    /// Reads every process's CPU time now; a process that is gone counts as zero.
    pub fn sample(&self) -> Sample {
        let mut seconds: Vec<(String, f64)> = Vec::new();
        for (label, pid) in &self.list {
            let s = seconds_of(*pid).unwrap_or(0.0);
            match seconds.iter_mut().find(|(l, _)| l == label) {
                Some((_, total)) => *total += s,
                None => seconds.push((label.clone(), s)),
            }
        }
        Sample { seconds }
    }
}

/// The children of `pid` now, from `/proc/<pid>/task/*/children`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

impl Sample {
    /// CPU seconds spent per label between `earlier` and this sample.
    pub fn since(&self, earlier: &Sample) -> Usage {
        let before: BTreeMap<&str, f64> = earlier.seconds.iter().map(|(l, s)| (l.as_str(), *s)).collect();
        Usage {
            seconds: self
                .seconds
                .iter()
                .map(|(l, s)| (l.clone(), (s - before.get(l.as_str()).copied().unwrap_or(0.0)).max(0.0)))
                .collect(),
        }
    }
}

/// CPU seconds per label over a window.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub seconds: Vec<(String, f64)>,
}

impl Usage {
    pub fn get(&self, label: &str) -> Option<f64> {
        self.seconds.iter().find(|(l, _)| l == label).map(|(_, s)| *s)
    }

    /// `ingress 1.2, sender 3.4, …` (seconds).
    pub fn brief(&self) -> String {
        self.seconds
            .iter()
            .map(|(l, s)| format!("{l} {s:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn to_json(&self) -> serde_json::Value {
        let map: serde_json::Map<String, serde_json::Value> = self
            .seconds
            .iter()
            .map(|(l, s)| (l.clone(), serde_json::json!((s * 1000.0).round() / 1000.0)))
            .collect();
        serde_json::Value::Object(map)
    }
}

/// User + system CPU seconds of `pid` so far.
pub fn seconds_of(pid: u32) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    let ticks = parse_ticks(&stat).with_context(|| format!("{path}: unexpected layout"))?;
    Ok(ticks as f64 / ticks_per_second())
}

/// utime + stime of a `/proc/<pid>/stat` line. The command name (field 2) is in
/// parentheses and may hold spaces, so fields are counted after its closing one.
fn parse_ticks(stat: &str) -> anyhow::Result<u64> {
    let (_, rest) = stat.rsplit_once(')').context("no command name")?;
    // rest starts at field 3 (state): utime is field 14, stime 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.len() < 13 {
        bail!("only {} fields", fields.len() + 2);
    }
    Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
}

/// `getconf CLK_TCK` (100 on every Linux this runs on; asked once anyway).
fn ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_utime_and_stime_past_a_name_with_spaces() -> anyhow::Result<()> {
        let stat = "4242 (eg sender) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 3 0 1 2 3";
        assert_eq!(parse_ticks(stat)?, 300);
        assert!(parse_ticks("1 (x) S 1").is_err());
        Ok(())
    }

    #[test]
    fn this_process_uses_some_cpu() -> anyhow::Result<()> {
        let mut p = Processes::default();
        p.add("bench", std::process::id());
        let before = p.sample();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        let used = p.sample().since(&before);
        assert!(used.get("bench").is_some_and(|s| s >= 0.0));
        assert!(seconds_of(std::process::id())? > 0.0);
        Ok(())
    }
}
