//! Leases: one key naming the copy that works something (a replay job, the archive
//! sweep) for a while. Taken when free, renewed by its holder, and taken over by
//! another copy only once it expired (its holder died or stopped renewing).

use crate::Store;
use crate::error::StoreError;
use crate::scripts;
use std::time::Duration;

impl Store {
    /// Takes the lease `key` for `holder` for `ttl` when no copy holds it, or renews it
    /// when `holder` does (`take_lease.lua`); whether `holder` holds it now.
    pub(crate) async fn take_lease(&self, key: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut conn = self.conn().await?;
        let held: u8 = scripts::TAKE_LEASE
            .key(key)
            .arg(holder)
            .arg(ttl)
            .invoke_async(&mut conn)
            .await?;
        Ok(held == 1)
    }
}
