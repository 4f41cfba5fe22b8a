//! Comparing setups on a shared machine: runs of one setup minutes apart differ by a
//! quarter here, so setups are measured in alternation (each round runs every setup once,
//! so drift falls on all alike), compared by their medians, and shown with the sender's
//! CPU per delivery.

use crate::measure::Measured;
use crate::report::{Row, thousands};
use std::future::Future;

/// Each setup's runs, in setup order: `rounds` rounds of `setups` runs, `measure(i)`
/// measuring setup `i`.
pub async fn alternating<T, F, Fut>(rounds: usize, setups: &[&str], mut measure: F) -> anyhow::Result<Vec<Vec<T>>>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let mut runs: Vec<Vec<T>> = setups.iter().map(|_| Vec::new()).collect();
    for round in 1..=rounds.max(1) {
        for (i, name) in setups.iter().enumerate() {
            eprintln!("round {round}: {name} …");
            runs[i].push(measure(i).await?);
        }
    }
    Ok(runs)
}

/// What one setup's runs came to.
pub struct Summary<'a> {
    /// Median deliveries received per second.
    pub rate: f64,
    /// Median sender CPU µs per delivery (0 when no sender was measured).
    pub sender_micros: f64,
    /// The run whose rate is nearest the median, for the row's other figures.
    pub typical: &'a Measured,
    /// Every run's rate, `1,234, 1,301, …`.
    pub each: String,
}

pub fn summarise(runs: &[Measured]) -> anyhow::Result<Summary<'_>> {
    let rate = median(runs.iter().map(Measured::received_per_second));
    let typical = runs
        .iter()
        .min_by(|a, b| {
            let off = |m: &Measured| (m.received_per_second() - rate).abs();
            off(a).total_cmp(&off(b))
        })
        .ok_or_else(|| anyhow::anyhow!("a setup with no run"))?;
    let each = runs
        .iter()
        .map(|m| thousands(m.received_per_second()))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Summary {
        rate,
        sender_micros: median(runs.iter().filter_map(sender_micros_per_delivery)),
        typical,
        each,
    })
}

/// The row of a publish-only comparison of two setups, `off` and `on` (each with its
/// label), by their median published rates: `on`'s rate, request latency and CPU (of
/// its run nearest the median), `off`'s rate and every run's, and `on`'s share of `off`.
/// Returns the row and the two medians.
pub fn publish_row(
    scenario: &'static str,
    title: String,
    (off_label, off): (&str, &[&Measured]),
    (on_label, on): (&str, &[&Measured]),
) -> anyhow::Result<(Row, f64, f64)> {
    let rate = |runs: &[&Measured]| median(runs.iter().map(|m| m.published_per_second()));
    let each = |runs: &[&Measured]| {
        runs.iter()
            .map(|m| thousands(m.published_per_second()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (off_rate, on_rate) = (rate(off), rate(on));
    let typical = on
        .iter()
        .min_by(|a, b| {
            let off = |m: &Measured| (m.published_per_second() - on_rate).abs();
            off(a).total_cmp(&off(b))
        })
        .ok_or_else(|| anyhow::anyhow!("no run {on_label}"))?;
    let mut row = Row::new(scenario, title);
    row.rate = Some((on_rate, "events/s"));
    row.latency_label = Some("publish request (100 events) → 200, round trip");
    row.latency = Some(typical.request_latency);
    row.cpu = Some((typical.cpu.clone(), typical.seconds));
    row.figures.push((
        off_label.to_owned(),
        format!("{} events/s (median; runs {})", thousands(off_rate), each(off)),
    ));
    row.figures
        .push((format!("{on_label}, runs"), format!("{} events/s", each(on))));
    row.figures.push((
        format!("share of {off_label}"),
        format!("{:.1} %", on_rate / off_rate.max(1.0) * 100.0),
    ));
    Ok((row, off_rate, on_rate))
}

/// The sender processes' CPU time per delivery received in the window.
fn sender_micros_per_delivery(m: &Measured) -> Option<f64> {
    let seconds = m.cpu.seconds.iter().find(|(label, _)| label == "sender")?.1;
    (m.received > 0).then(|| seconds * 1e6 / m.received as f64)
}

/// The middle value (the mean of the two middle ones for an even count); 0 for none.
pub fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 3.0, 2.0].into_iter()), 2.5);
        assert_eq!(median(std::iter::empty()), 0.0);
    }
}
