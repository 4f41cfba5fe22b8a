//! A lock-free latency histogram in microseconds, in the manner of HdrHistogram: exact
//! below 128 µs, then 64 linear sub-buckets per power of two (about 1.5 % resolution),
//! up to 2^41 µs. Many tasks record at once with one atomic add each, so the receiver
//! and the publishers never wait on a lock to count.

use std::sync::atomic::{AtomicU64, Ordering};

const EXACT: u64 = 128;
const SUB_BITS: u32 = 6;
const SUB: usize = 1 << SUB_BITS;
const FIRST_EXPONENT: u32 = 7; // 2^7 = EXACT
const LAST_EXPONENT: u32 = 40;
const BUCKETS: usize = EXACT as usize + (LAST_EXPONENT - FIRST_EXPONENT + 1) as usize * SUB;

pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

/// Percentiles of what was recorded, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Latency {
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Latency {
    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "count": self.count, "p50Ms": round(self.p50_ms), "p90Ms": round(self.p90_ms), "p99Ms": round(self.p99_ms),
            "maxMs": round(self.max_ms), "meanMs": round(self.mean_ms),
        })
    }
}

fn round(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

fn index(micros: u64) -> usize {
    if micros < EXACT {
        return micros as usize;
    }
    let exponent = (63 - micros.leading_zeros()).min(LAST_EXPONENT);
    let micros = micros.min((1 << (LAST_EXPONENT + 1)) - 1);
    let sub = ((micros >> (exponent - SUB_BITS)) as usize) & (SUB - 1);
    EXACT as usize + (exponent - FIRST_EXPONENT) as usize * SUB + sub
}

/// The middle of bucket `i`, µs.
fn value(i: usize) -> f64 {
    if i < EXACT as usize {
        return i as f64;
    }
    let exponent = (i - EXACT as usize) / SUB + FIRST_EXPONENT as usize;
    let sub = ((i - EXACT as usize) % SUB) as u64;
    let width = 1u64 << (exponent - SUB_BITS as usize);
    let low = (1u64 << exponent) + sub * width;
    low as f64 + width as f64 / 2.0
}

impl Histogram {
    pub fn record(&self, micros: u64) {
        self.buckets[index(micros)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(micros, Ordering::Relaxed);
        self.max.fetch_max(micros, Ordering::Relaxed);
    }

    /// Forgets everything recorded (the start of a measurement window).
    pub fn reset(&self) {
        for b in self.buckets.iter() {
            b.store(0, Ordering::Relaxed);
        }
        self.count.store(0, Ordering::Relaxed);
        self.sum.store(0, Ordering::Relaxed);
        self.max.store(0, Ordering::Relaxed);
    }

    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn latency(&self) -> Latency {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let count: u64 = counts.iter().sum();
        if count == 0 {
            return Latency::default();
        }
        let max = self.max.load(Ordering::Relaxed) as f64;
        let at = |q: f64| {
            let rank = ((count as f64 * q).ceil() as u64).max(1);
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return value(i).min(max);
                }
            }
            max
        };
        Latency {
            count,
            p50_ms: at(0.50) / 1000.0,
            p90_ms: at(0.90) / 1000.0,
            p99_ms: at(0.99) / 1000.0,
            max_ms: max / 1000.0,
            mean_ms: self.sum.load(Ordering::Relaxed) as f64 / count as f64 / 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_about_two_percent() {
        for v in [
            0u64,
            1,
            127,
            128,
            129,
            1000,
            4095,
            65_536,
            1_234_567,
            99_999_999,
            1 << 45,
        ] {
            let i = index(v);
            assert!(i < BUCKETS, "{v}");
            let back = value(i);
            let expected = v.min((1 << (LAST_EXPONENT + 1)) - 1) as f64;
            assert!((back - expected).abs() <= expected * 0.02 + 0.5, "{v} -> {back}");
        }
        let mut last = 0;
        for v in 0..100_000u64 {
            assert!(index(v) >= last);
            last = index(v);
        }
    }

    #[test]
    fn percentiles_of_a_uniform_spread() {
        let h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v);
        }
        let l = h.latency();
        assert_eq!(l.count, 10_000);
        assert!((l.p50_ms - 5.0).abs() < 0.1, "{l:?}");
        assert!((l.p90_ms - 9.0).abs() < 0.2, "{l:?}");
        assert!((l.p99_ms - 9.9).abs() < 0.2, "{l:?}");
        assert!((l.max_ms - 10.0).abs() < 1e-9, "{l:?}");
        h.reset();
        assert_eq!(h.latency(), Latency::default());
    }
}
