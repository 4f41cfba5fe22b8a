//! The last hour's counts: the unmatched events per topic, the events each subscription
//! waiting for validation missed, and a subscription's deliveries. An hour is 360 stats
//! buckets; reading them all at every 2-second refresh would be wasteful, so the part of
//! the hour before the rate window (buckets that no longer change) is read once per
//! bucket and kept, and the page adds the rate window it reads anyway.

use eg_core::UnixMillis;
use eg_runtime::stats::{RATE_BUCKETS, Stats, StatsError, Window};
use eg_store::codec::bucket_of;
use eg_store::codec::stats::BUCKET_SECONDS;
use std::sync::Mutex;

/// Buckets in an hour (the stats buckets' own lifetime).
const HOUR_BUCKETS: u64 = 3600 / BUCKET_SECONDS;

/// The hour before the rate window, read at most once per bucket.
#[derive(Default)]
pub struct LastHour {
    /// The older part of the hour, and the newest bucket it covers.
    older: Mutex<Option<(u64, Window)>>,
}

impl LastHour {
    /// Every count of the hour up to `now`: the rate window `minute` (the newest
    /// buckets) plus the older buckets.
    pub async fn window(&self, stats: &Stats, now: UnixMillis, minute: &Window) -> Result<Window, StatsError> {
        let older = self.older(stats, now).await?;
        Ok(Window::sum(
            older.seconds + minute.seconds,
            [older.counts, minute.counts.clone()],
        ))
    }

    /// The hour's buckets before the rate window (the window of `now` adds the rest).
    async fn older(&self, stats: &Stats, now: UnixMillis) -> Result<Window, StatsError> {
        // The rate window is the newest RATE_BUCKETS buckets; the older part ends before it.
        let end = UnixMillis(now.0 - (RATE_BUCKETS * BUCKET_SECONDS * 1000) as i64);
        let newest = bucket_of(end);
        if let Some((at, window)) = self.cached()
            && at == newest
        {
            return Ok(window);
        }
        let window = stats.read(end, HOUR_BUCKETS - RATE_BUCKETS).await?;
        if let Ok(mut cache) = self.older.lock() {
            *cache = Some((newest, window.clone()));
        }
        Ok(window)
    }

    fn cached(&self) -> Option<(u64, Window)> {
        self.older.lock().ok().and_then(|cache| cache.clone())
    }
}
