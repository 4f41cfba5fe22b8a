//! Endpoints this sender saw with a clear probation record a moment ago (no failures
//! counted, not on probation). Probation state lives in Redis
//! (`endpoint_gate.lua`, `endpoint_record.lua`), and asking it costs a script call before
//! each attempt and a share of one after it (`endpoint_records`). After a success that
//! left an endpoint with a clear record, this sender skips both for that endpoint for
//! [`FRESH_FOR`]: the gate would answer "open" and recording
//! another success would change nothing. A failure is always recorded (and forgets the
//! endpoint here), so probation starts exactly as before; other senders' failures are
//! noticed within [`FRESH_FOR`] (probation is advisory: a few more attempts reach an
//! endpoint that just went on probation, as when two senders race today).

use eg_core::probation::EndpointId;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a clear record is trusted without asking Redis again.
pub const FRESH_FOR: Duration = Duration::from_secs(1);
/// Most endpoints remembered (the map is cleared when it would grow past this).
const MOST_REMEMBERED: usize = 10_000;

#[derive(Default)]
pub struct RecentlyClear {
    seen_clear: Mutex<HashMap<EndpointId, Instant>>,
    /// Rises with every [`RecentlyClear::forget`]: a success recorded before a failure
    /// was forgotten, but answered after it, must not mark the endpoint clear again.
    forgotten: AtomicU64,
}

impl RecentlyClear {
    /// Whether `endpoint` was seen with a clear record less than [`FRESH_FOR`] ago.
    pub fn is_fresh(&self, endpoint: &EndpointId, now: Instant) -> bool {
        let seen = self.seen_clear.lock().unwrap_or_else(|p| p.into_inner());
        seen.get(endpoint).is_some_and(|at| now.duration_since(*at) < FRESH_FOR)
    }

    /// The current generation, read before recording a success.
    pub fn generation(&self) -> u64 {
        self.forgotten.load(Ordering::SeqCst)
    }

    /// A success, recorded when the generation was `generation`, left `endpoint`'s record
    /// clear at `now` (ignored if a failure was forgotten since).
    pub fn saw_clear(&self, endpoint: &EndpointId, now: Instant, generation: u64) {
        let mut seen = self.seen_clear.lock().unwrap_or_else(|p| p.into_inner());
        if self.forgotten.load(Ordering::SeqCst) != generation {
            return;
        }
        if seen.len() >= MOST_REMEMBERED && !seen.contains_key(endpoint) {
            seen.clear();
        }
        seen.insert(endpoint.clone(), now);
    }

    /// A failure was recorded for `endpoint`: ask Redis again from now on.
    pub fn forget(&self, endpoint: &EndpointId) {
        let mut seen = self.seen_clear.lock().unwrap_or_else(|p| p.into_inner());
        self.forgotten.fetch_add(1, Ordering::SeqCst);
        seen.remove(endpoint);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eg_core::destination::{Target, WebHook};

    fn endpoint_at(url: &str) -> EndpointId {
        Target::WebHook(WebHook {
            url: url.to_owned(),
            ..Default::default()
        })
        .endpoint_id()
    }

    #[test]
    fn a_clear_record_is_trusted_for_a_moment_and_a_failure_forgets_it() {
        let clear = RecentlyClear::default();
        let endpoint = endpoint_at("https://example.com/hook");
        let t0 = Instant::now();
        assert!(!clear.is_fresh(&endpoint, t0), "never seen");
        clear.saw_clear(&endpoint, t0, clear.generation());
        assert!(clear.is_fresh(&endpoint, t0 + FRESH_FOR / 2));
        assert!(!clear.is_fresh(&endpoint, t0 + FRESH_FOR), "stale");
        clear.saw_clear(&endpoint, t0, clear.generation());
        clear.forget(&endpoint);
        assert!(!clear.is_fresh(&endpoint, t0));
        // A success sent before that failure was forgotten, answered after it: ignored.
        let before_failure = clear.generation() - 1;
        clear.saw_clear(&endpoint, t0, before_failure);
        assert!(!clear.is_fresh(&endpoint, t0));
        let other = endpoint_at("https://example.org/hook");
        assert!(!clear.is_fresh(&other, t0), "per endpoint");
    }
}
