//! A backlog drained by a tier started after it was built: how fast the tier works
//! through it, with nothing else of eg competing (the load generator has finished). The
//! rate is taken between 10 % and 90 % of the backlog done, so the tier's start-up and
//! the last partial batches do not count; the CPU of every process is read at those two
//! moments.

use crate::cpu::{Processes, Usage};
use std::future::Future;
use std::time::{Duration, Instant};

/// How often progress is read (a Redis query or a `/metrics` scrape: cheap at this pace).
const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
pub struct Drained {
    /// Units done between the 10 % and the 90 % marks.
    pub counted: u64,
    /// Time between the marks.
    pub seconds: f64,
    /// CPU per process between the marks.
    pub cpu: Usage,
    /// From the call until the whole backlog was done.
    pub total_seconds: f64,
}

impl Drained {
    pub fn per_second(&self) -> f64 {
        self.counted as f64 / self.seconds.max(f64::EPSILON)
    }
}

/// Polls `done` (units of the backlog done so far) until it reaches `total`; fails if that
/// takes longer than `limit`.
pub async fn measure<F, Fut>(total: u64, processes: &Processes, limit: Duration, mut done: F) -> anyhow::Result<Drained>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<u64>>,
{
    let started = Instant::now();
    let (low, high) = (total / 10, total * 9 / 10);
    let mut first = None;
    let mut last = None;
    loop {
        let now_done = done().await?;
        let at = Instant::now();
        if first.is_none() && now_done >= low {
            first = Some((now_done, at, processes.sample()));
        }
        if last.is_none() && now_done >= high {
            last = Some((now_done, at, processes.sample()));
        }
        if now_done >= total {
            break;
        }
        if started.elapsed() > limit {
            anyhow::bail!("only {now_done} of {total} done after {limit:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    let total_seconds = started.elapsed().as_secs_f64();
    let (Some((from, from_at, cpu_from)), Some((to, to_at, cpu_to))) = (first, last) else {
        anyhow::bail!("the backlog of {total} was done before it could be measured");
    };
    Ok(Drained {
        counted: to - from,
        seconds: (to_at - from_at).as_secs_f64(),
        cpu: cpu_to.since(&cpu_from),
        total_seconds,
    })
}

/// The sum of a counter over all its label sets in a Prometheus text page.
pub fn counter_total(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_a_counter_over_its_labels_and_nothing_else() {
        let page = "# TYPE DeliverySuccessCount counter\n\
            DeliverySuccessCount{topic=\"bench\",subscription=\"sub0\"} 120\n\
            DeliverySuccessCount{topic=\"bench\",subscription=\"sub1\"} 3\n\
            DeliverySuccessCountOther 1000\n\
            DroppedEventCount 7\n";
        assert_eq!(counter_total(page, "DeliverySuccessCount"), 123.0);
        assert_eq!(counter_total(page, "DroppedEventCount"), 7.0);
        assert_eq!(counter_total(page, "Missing"), 0.0);
    }
}
