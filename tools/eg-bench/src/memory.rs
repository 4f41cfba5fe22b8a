//! A process's memory as Linux reports it in `/proc/<pid>/status`: `VmRSS` (resident
//! now) and `VmHWM` (the most it was ever resident), and summaries of a series of
//! samples.

use anyhow::{Context, bail};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

/// Reads `VmRSS` and `VmHWM` of `pid`.
pub fn read(pid: u32) -> anyhow::Result<Memory> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    parse(&status).with_context(|| format!("{path} has no VmRSS/VmHWM"))
}

fn parse(status: &str) -> anyhow::Result<Memory> {
    let field = |name: &str| -> anyhow::Result<u64> {
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .with_context(|| format!("no {name}"))?;
        let mut words = line.split_whitespace();
        let value: u64 = words.next().context("no value")?.parse()?;
        match words.next() {
            Some("kB") => Ok(value),
            other => bail!("{name} in unexpected units {other:?}"),
        }
    };
    Ok(Memory {
        rss_kib: field("VmRSS")?,
        hwm_kib: field("VmHWM")?,
    })
}

/// Minimum, median, 95th percentile, maximum and mean of a series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub min: f64,
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
    pub mean: f64,
}

impl Summary {
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        Some(Self {
            count: sorted.len(),
            min: sorted[0],
            p50: at(0.5),
            p95: at(0.95),
            max: sorted[sorted.len() - 1],
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
        })
    }

    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "count": self.count, "min": self.min, "p50": self.p50, "p95": self.p95,
            "max": self.max, "mean": self.mean,
        })
    }
}

/// The least-squares slope of `y` over `x` (units of y per unit of x); `None` with
/// fewer than two distinct x.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status() -> anyhow::Result<()> {
        let status = "Name:\teg-sender\nVmPeak:\t  900 kB\nVmHWM:\t    20480 kB\nVmRSS:\t    18432 kB\nThreads:\t3\n";
        assert_eq!(
            parse(status)?,
            Memory {
                rss_kib: 18432,
                hwm_kib: 20480
            }
        );
        assert!(parse("Name:\tx\n").is_err());
        assert!(parse("VmRSS:\t1 MB\nVmHWM:\t1 kB\n").is_err());
        Ok(())
    }

    #[test]
    fn reads_this_process() -> anyhow::Result<()> {
        let m = read(std::process::id())?;
        assert!(m.rss_kib > 0 && m.hwm_kib >= m.rss_kib);
        Ok(())
    }

    #[test]
    fn summarises_and_fits_a_line() {
        let s = Summary::of(&[3.0, 1.0, 2.0, 4.0, 5.0]);
        assert_eq!(s.map(|s| (s.min, s.p50, s.max, s.mean)), Some((1.0, 3.0, 5.0, 3.0)));
        assert_eq!(Summary::of(&[]), None);
        let line: Vec<(f64, f64)> = (0..10).map(|x| (f64::from(x), 2.0 * f64::from(x) + 1.0)).collect();
        assert!(slope(&line).is_some_and(|s| (s - 2.0).abs() < 1e-9));
        assert_eq!(slope(&[(1.0, 1.0)]), None);
        assert_eq!(slope(&[(1.0, 1.0), (1.0, 2.0)]), None);
    }
}
