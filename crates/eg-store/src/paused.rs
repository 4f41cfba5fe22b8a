//! Deliveries of paused subscriptions. The sender sets them aside (`Settlement::Park`)
//! into one sorted set per subscription and partition, scored by the end of their
//! time-to-live; whoever resumes (the ingress right after the API call, and every
//! scheduler on each pass, in case the ingress stopped half-way) moves them back.

use crate::connection::Store;
use crate::error::StoreError;
use crate::keyspace::Partition;
use crate::scripts;
use eg_core::UnixMillis;

impl Store {
    /// The subscriptions (`<topic>/<subscription>`) with deliveries set aside in `partition`.
    pub async fn paused_subscriptions(&self, partition: &Partition) -> Result<Vec<String>, StoreError> {
        let mut conn = self.conn().await?;
        Ok(redis::AsyncCommands::smembers(&mut conn, partition.paused_index()).await?)
    }

    /// Moves up to `max` set-aside deliveries of `subscription` back into the ready
    /// stream: those whose time-to-live ended by `expired_by`, or all when `None`.
    /// Returns how many moved.
    pub async fn unpark(
        &self,
        partition: &Partition,
        subscription: &str,
        expired_by: Option<UnixMillis>,
        max: usize,
    ) -> Result<u64, StoreError> {
        let highest = expired_by.map_or("+inf".to_owned(), |t| t.0.to_string());
        let mut conn = self.conn().await?;
        Ok(scripts::UNPARK
            .key(partition.paused(subscription))
            .key(partition.ready())
            .key(partition.paused_index())
            .arg(highest)
            .arg(max)
            .arg(subscription)
            .invoke_async(&mut conn)
            .await?)
    }

    /// [`Store::unpark`] in batches of `batch` until nothing more is due; returns how
    /// many moved in all.
    pub async fn unpark_all(
        &self,
        partition: &Partition,
        subscription: &str,
        expired_by: Option<UnixMillis>,
        batch: usize,
    ) -> Result<u64, StoreError> {
        let mut moved = 0;
        loop {
            let n = self.unpark(partition, subscription, expired_by, batch).await?;
            moved += n;
            if (n as usize) < batch {
                return Ok(moved);
            }
        }
    }
}
