//! Reading delivery history. Entries are written by `settle.lua` in the partition the
//! delivery lives in; an event's deliveries all live in the partition it was published
//! to (redriven ones too), but the caller does not know which, so all are asked at once.

use crate::connection::Store;
use crate::error::StoreError;
use eg_core::history::HistoryEntry;

impl Store {
    /// Every kept step of the deliveries of event `event_id` published to `topic` (topic
    /// key), oldest first. Entries that do not decode are skipped and logged.
    pub async fn event_history(&self, topic: &str, event_id: &str) -> Result<Vec<HistoryEntry>, StoreError> {
        // One read per partition, all at once (their keys are in different slots).
        let (_held, link) = self.link().await?;
        let reads = self.keys().all_partitions().map(|p| {
            let key = p.history(topic, event_id);
            let mut link = link.clone();
            async move { redis::AsyncCommands::lrange::<_, Vec<String>>(&mut link, key, 0, -1).await }
        });
        let lists = futures_util::future::try_join_all(reads).await?;
        let mut entries: Vec<HistoryEntry> = lists
            .iter()
            .flatten()
            .filter_map(|raw| match serde_json::from_str(raw) {
                Ok(entry) => Some(entry),
                Err(e) => {
                    tracing::warn!(error = %e, %topic, "skipping a history entry that does not decode");
                    None
                }
            })
            .collect();
        entries.sort_by_key(|e| e.at);
        Ok(entries)
    }
}
