//! What a scenario hands back: one [`Row`] per figure (a rate, its publish→receipt
//! latency, CPU per tier, the ceiling it is measured against) and the [`Target`]s it is
//! held to. The same rows are printed as a table, written as JSON and rendered into
//! `docs/benchmarks.md` ([`crate::markdown`]).

use crate::cpu::Usage;
use crate::histogram::Latency;
use serde_json::{Value, json};

#[derive(Debug, Clone, Default)]
pub struct Row {
    /// Scenario number and name, e.g. `2 end to end`.
    pub scenario: String,
    /// The variant measured, e.g. `appendfsync always`, `4 senders`.
    pub variant: String,
    /// The headline figure and its unit: a rate (`events/s`, `deliveries/s`, `retries
    /// moved/s`) or, for memory, bytes.
    pub rate: Option<(f64, &'static str)>,
    /// What the latency columns mean, when not publish→receipt.
    pub latency_label: Option<&'static str>,
    pub latency: Option<Latency>,
    /// CPU seconds per process over the measured window, and the window's length.
    pub cpu: Option<(Usage, f64)>,
    /// What the rate counted within the CPU window, when not rate × window (for CPU per unit).
    pub counted: Option<f64>,
    /// The ceiling the rate is compared with: its name and value (same unit as the rate).
    pub ceiling: Option<(String, f64)>,
    /// Other figures worth a line: (name, value as text).
    pub figures: Vec<(String, String)>,
    pub targets: Vec<Target>,
    /// Settings that differ from the suite's defaults, and anything a reader must know.
    pub notes: Vec<String>,
    /// Everything else, for the JSON.
    pub details: Value,
}

#[derive(Debug, Clone)]
pub struct Target {
    pub what: String,
    pub wanted: String,
    pub measured: String,
    pub met: bool,
}

impl Target {
    /// A target that `value` be at least `least`.
    pub fn at_least(what: &str, value: f64, least: f64, unit: &str) -> Self {
        Self {
            what: what.into(),
            wanted: format!("≥ {} {unit}", thousands(least)),
            measured: format!("{} {unit}", thousands(value)),
            met: value >= least,
        }
    }

    /// A target that `value` be at most `most`.
    pub fn at_most(what: &str, value: f64, most: f64, unit: &str, precision: usize) -> Self {
        Self {
            what: what.into(),
            wanted: format!("≤ {most:.precision$} {unit}"),
            measured: format!("{value:.precision$} {unit}"),
            met: value <= most,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"target": self.what, "wanted": self.wanted, "measured": self.measured, "met": self.met})
    }
}

impl Row {
    pub fn new(scenario: &str, variant: impl Into<String>) -> Self {
        Self {
            scenario: scenario.into(),
            variant: variant.into(),
            details: Value::Null,
            ..Self::default()
        }
    }

    /// The row of a variant whose measurement failed, saying why (the run goes on).
    pub fn failed(scenario: &str, variant: &str, e: &anyhow::Error) -> Self {
        eprintln!("{scenario} — {variant} failed: {e:#}");
        let mut row = Self::new(scenario, format!("{variant} FAILED"));
        row.notes.push(format!("{e:#}"));
        row
    }

    pub fn ratio(&self) -> Option<f64> {
        match (self.rate, &self.ceiling) {
            (Some((rate, _)), Some((_, ceiling))) if *ceiling > 0.0 => Some(rate / ceiling),
            _ => None,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "scenario": self.scenario,
            "variant": self.variant,
            "rate": self.rate.map(|(v, unit)| json!({"value": v.round(), "unit": unit})),
            "latency": self.latency.map(|l| {
                let mut v = l.to_json();
                v["meaning"] = json!(self.latency_label.unwrap_or("publish → receipt"));
                v
            }),
            "cpuSeconds": self.cpu.as_ref().map(|(u, _)| u.to_json()),
            "windowSeconds": self.cpu.as_ref().map(|(_, w)| (w * 100.0).round() / 100.0),
            "ceiling": self.ceiling.as_ref().map(|(name, v)| json!({"name": name, "value": v.round()})),
            "ratioToCeiling": self.ratio().map(|r| (r * 1000.0).round() / 1000.0),
            "figures": self.figures.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
            "targets": self.targets.iter().map(Target::to_json).collect::<Vec<_>>(),
            "notes": self.notes,
            "details": self.details,
        })
    }
}

/// `123,456` (whole numbers with thousands separators).
pub fn thousands(v: f64) -> String {
    let whole = v.round().abs() as u64;
    let digits = whole.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The cells of a row in the table (terminal and markdown share them).
pub fn cells(row: &Row) -> [String; 9] {
    let rate = row
        .rate
        .map_or("-".to_owned(), |(v, unit)| format!("{} {unit}", thousands(v)));
    let (p50, p99, max) = row.latency.map_or(("-".into(), "-".into(), "-".into()), |l| {
        (ms(l.p50_ms), ms(l.p99_ms), ms(l.max_ms))
    });
    let cpu = row
        .cpu
        .as_ref()
        .map_or("-".to_owned(), |(u, w)| format!("{} (of {:.0} s)", u.brief(), w));
    let ceiling = row.ceiling.as_ref().map_or("-".to_owned(), |(_, v)| thousands(*v));
    let ratio = row.ratio().map_or("-".to_owned(), |r| format!("{:.0} %", r * 100.0));
    let targets = if row.targets.is_empty() {
        "-".to_owned()
    } else {
        row.targets
            .iter()
            .map(|t| if t.met { "met" } else { "MISSED" })
            .collect::<Vec<_>>()
            .join(", ")
    };
    [
        format!("{} — {}", row.scenario, row.variant),
        rate,
        p50,
        p99,
        max,
        cpu,
        ceiling,
        ratio,
        targets,
    ]
}

pub const HEADINGS: [&str; 9] = [
    "scenario",
    "figure",
    "p50 ms",
    "p99 ms",
    "max ms",
    "CPU s per process",
    "ceiling",
    "of ceiling",
    "targets",
];

/// Prints rows as an aligned table, then each row's figures, ceilings and targets.
pub fn print(rows: &[Row]) {
    let table: Vec<[String; 9]> = rows.iter().map(cells).collect();
    let mut widths = HEADINGS.map(|h| h.chars().count());
    for r in &table {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (c, w))| {
                let pad = " ".repeat(w.saturating_sub(c.chars().count()));
                if i == 0 || i == 5 {
                    format!("{c}{pad}")
                } else {
                    format!("{pad}{c}")
                }
            })
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    println!();
    line(&HEADINGS.map(str::to_owned));
    for r in &table {
        line(r);
    }
    println!();
    for row in rows {
        let has_more =
            !row.figures.is_empty() || row.ceiling.is_some() || !row.targets.is_empty() || !row.notes.is_empty();
        if !has_more {
            continue;
        }
        println!("{} — {}", row.scenario, row.variant);
        if let Some(label) = row.latency_label {
            println!("    latency columns: {label}");
        }
        if let Some((name, v)) = &row.ceiling {
            println!("    ceiling: {name} = {}", thousands(*v));
        }
        for (k, v) in &row.figures {
            println!("    {k}: {v}");
        }
        for t in &row.targets {
            println!(
                "    target {}: {} — measured {} — {}",
                t.what,
                t.wanted,
                t.measured,
                if t.met { "met" } else { "MISSED" }
            );
        }
        for n in &row.notes {
            println!("    note: {n}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers_and_ratios() {
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(0.0), "0");
        let mut row = Row::new("2 end to end", "1 subscription");
        row.rate = Some((50.0, "events/s"));
        row.ceiling = Some(("x".into(), 200.0));
        assert_eq!(row.ratio(), Some(0.25));
        assert_eq!(cells(&row)[7], "25 %");
        assert!(Target::at_least("x", 5.0, 4.0, "/s").met);
        assert!(!Target::at_most("x", 5.0, 4.0, "ms", 1).met);
    }
}
