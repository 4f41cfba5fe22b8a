//! Moving due retries into a partition's ready stream (`promote.lua`, atomic, so any
//! number of schedulers share the work with no leader), as soon as they fall due.

use eg_runtime::Shutdown;
use eg_store::{Partition, Store};
use std::time::Duration;

/// Shortest sleep between passes that did not move a whole batch: retries falling due
/// one by one (a retry storm) are moved in groups, at most this late, instead of one
/// script call per retry.
const MIN_PAUSE: Duration = Duration::from_millis(10);

/// Moves due retries into the ready stream; keeps going while whole batches come back.
/// Between passes it sleeps until the earliest retry left falls due, at most `every`
/// (which also bounds how late it sees a retry written after its last pass) and at least
/// [`MIN_PAUSE`]: a retry fires within ~10 ms of its due time, not up to a whole interval late.
pub async fn promote_loop(store: Store, partition: Partition, every: Duration, batch: usize, shutdown: Shutdown) {
    let mut pause = every;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.requested() => return,
        }
        pause = every;
        loop {
            match store.promote_retries(&partition, batch).await {
                Ok(promoted) if promoted.moved >= batch => continue,
                Ok(promoted) => {
                    if let Some(next_in) = promoted.next_in {
                        pause = next_in.clamp(MIN_PAUSE, every);
                    }
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, partition = partition.index, "cannot promote due retries");
                    break;
                }
            }
        }
    }
}
