//! The rate check of rate-limited subscriptions (`deliveryLimits`): over any 10-second
//! window, the requests the receiver got stay within the cap, shared by every sender.
//! The bound allows 10 % plus two bursts: a Redis restart or failover may forget the
//! limiter's state (one more burst), and a frozen sender may send a grant late.

use crate::scenario::RateLimit;

/// The window the rate is judged over.
const WINDOW_MS: i64 = 10_000;

#[derive(Debug)]
pub(super) struct RateFindings {
    pub requests: usize,
    /// The most requests in any window.
    pub busiest_window: usize,
    /// What a window may hold.
    pub bound: usize,
}

impl RateFindings {
    pub fn exceeded(&self) -> bool {
        self.busiest_window > self.bound
    }
}

/// Judges the request times (Unix ms, any order) a subscription's receiver recorded.
pub(super) fn judge(limit: RateLimit, mut times: Vec<i64>) -> RateFindings {
    times.sort_unstable();
    let mut busiest_window = 0;
    let mut start = 0;
    for (end, t) in times.iter().enumerate() {
        while times[start] <= t - WINDOW_MS {
            start += 1;
        }
        busiest_window = busiest_window.max(end + 1 - start);
    }
    let per_window = limit.per_second * (WINDOW_MS as f64 / 1000.0) * 1.1;
    RateFindings {
        requests: times.len(),
        busiest_window,
        bound: per_window as usize + 2 * limit.burst as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: RateLimit = RateLimit {
        per_second: 10.0,
        burst: 5,
    };

    #[test]
    fn requests_at_the_cap_pass_and_a_burst_beyond_it_is_caught() {
        let steady: Vec<i64> = (0..600).map(|i| i * 100).collect();
        let findings = judge(LIMIT, steady.clone());
        assert_eq!(findings.busiest_window, 100);
        assert!(!findings.exceeded());
        let mut burst = steady;
        burst.extend((0..30).map(|i| 30_000 + i));
        let findings = judge(LIMIT, burst);
        assert!(findings.exceeded(), "{findings:?}");
        assert_eq!(findings.bound, 120);
    }
}
