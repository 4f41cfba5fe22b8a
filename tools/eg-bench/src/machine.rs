//! What the figures were measured on: CPU model and cores, memory, kernel, the Rust
//! compiler, redis-server's version, the git commit, and how busy the machine was
//! (load average) when the run began, so a reader can tell a shared machine.

use serde_json::{Value, json};
use std::process::Command;

#[derive(Debug, Clone)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    pub rustc: String,
    pub redis: String,
    pub commit: String,
    pub load_average: String,
    /// Free space where Redis keeps its append-only files (the temp dir), GiB.
    pub disk_free_gib: Option<f64>,
}

impl Machine {
    pub fn describe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let cores = cpuinfo.lines().filter(|l| l.starts_with("processor")).count().max(1);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:")?.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into());
        let commit = output("git", &["rev-parse", "--short=12", "HEAD"]);
        let dirty = !output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty();
        Self {
            cpu_model,
            cores,
            memory_gib: memory_kib / 1024.0 / 1024.0,
            kernel,
            rustc: output("rustc", &["-V"]),
            redis: output("redis-server", &["--version"]),
            commit: if dirty {
                format!("{commit} (with uncommitted changes in the working tree)")
            } else {
                commit
            },
            load_average: std::fs::read_to_string("/proc/loadavg")
                .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
                .unwrap_or_default(),
            disk_free_gib: disk_free_gib(&std::env::temp_dir()),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "cpuModel": self.cpu_model, "cores": self.cores, "memoryGiB": (self.memory_gib * 10.0).round() / 10.0,
            "kernel": self.kernel, "rustc": self.rustc, "redis": self.redis, "commit": self.commit,
            "loadAverageAtStart": self.load_average,
            "tempDiskFreeGiB": self.disk_free_gib.map(|g| (g * 10.0).round() / 10.0),
        })
    }
}

/// Free space of the file system holding `dir` (`df -Pk`), GiB.
fn disk_free_gib(dir: &std::path::Path) -> Option<f64> {
    let out = Command::new("df").arg("-Pk").arg(dir).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let kib: f64 = text.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()?;
    Some(kib / 1024.0 / 1024.0)
}

/// The first line a command prints, or "unknown".
fn output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.lines().next().unwrap_or_default().trim().to_owned())
        .unwrap_or_else(|| "unknown".into())
}
