//! Ordering lines kept moving: the stuck-line sweep (docs/ordered-delivery.md#stuck-lines).
//! A line whose head delivery Redis lost would keep its key waiting for ever; the
//! scheduler walks each partition's line index with `sweep_lines.lua`, a few lines per
//! call, and puts a lost head back (or, when its event is gone too, releases the next).
//! What counts as lost, and why a live head is never taken for one, is the script's
//! header; this module only carries the cursor and reads the answer.

use crate::connection::Store;
use crate::error::StoreError;
use crate::keyspace::Partition;
use crate::scripts;
use std::collections::HashMap;

/// What the sweep did with a lost head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepAction {
    /// Its event survives: the head's own record went back to the ready stream.
    Requeued,
    /// Its event is gone too: the head left its line and the next event was released.
    Dropped,
}

impl SweepAction {
    /// The word the script answers with, and the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requeued => "requeued",
            Self::Dropped => "dropped",
        }
    }
}

/// One line the sweep unstuck.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweptLine {
    /// `<topic>/<subscription>`.
    pub subscription: String,
    /// The lost head's delivery id.
    pub delivery: String,
    pub action: SweepAction,
}

/// Whether a sweep call checked its suspects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Census {
    /// No line it looked at was suspect.
    None,
    /// Suspects were checked against the whole partition.
    Done,
    /// Suspects were left alone: the partition held more records than one call may read.
    Busy,
}

/// The answer of one sweep call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineSweep {
    /// Where the next call goes on; `"0"` when this pass over the index is over.
    pub cursor: String,
    /// Lines looked at.
    pub looked: u64,
    pub census: Census,
    pub swept: Vec<SweptLine>,
}

/// How much one sweep call may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepBounds {
    /// About how many lines one call looks at.
    pub lines: usize,
    /// Most records (ready entries, retries, paused records) one call's census reads.
    pub census: usize,
}

impl Default for SweepBounds {
    fn default() -> Self {
        Self {
            lines: 200,
            census: 50_000,
        }
    }
}

impl Store {
    /// One step of a sweep of `partition`'s lines from `cursor` (`"0"` starts a pass).
    pub async fn sweep_lines(
        &self,
        partition: &Partition,
        cursor: &str,
        bounds: SweepBounds,
    ) -> Result<LineSweep, StoreError> {
        let mut conn = self.conn().await?;
        let (cursor, looked, census, swept): (String, u64, String, Vec<String>) = scripts::SWEEP_LINES
            .key(partition.line_index())
            .key(partition.ready())
            .key(partition.retry())
            .key(partition.lines_waiting())
            .arg(cursor)
            .arg(bounds.lines.max(1))
            .arg(bounds.census)
            .arg(partition.tag())
            .invoke_async(&mut conn)
            .await?;
        let census = match census.as_str() {
            "done" => Census::Done,
            "busy" => Census::Busy,
            _ => Census::None,
        };
        let swept = swept
            .chunks_exact(3)
            .map(|c| SweptLine {
                subscription: c[0].clone(),
                delivery: c[1].clone(),
                action: if c[2] == SweepAction::Dropped.as_str() {
                    SweepAction::Dropped
                } else {
                    SweepAction::Requeued
                },
            })
            .collect();
        Ok(LineSweep {
            cursor,
            looked,
            census,
            swept,
        })
    }
}

impl Store {
    /// Deliveries waiting behind their line's head in `partition`, by subscription
    /// (`<topic>/<subscription>`); a subscription with none waiting is absent.
    pub async fn waiting_in_lines_of(&self, partition: &Partition) -> Result<HashMap<String, u64>, StoreError> {
        let mut conn = self.conn().await?;
        Ok(redis::AsyncCommands::hgetall(&mut conn, partition.lines_waiting()).await?)
    }

    /// [`Store::waiting_in_lines_of`] summed over every partition (a subscription's lines
    /// all live in its topic's home partition, but a change of partition count may leave
    /// some elsewhere).
    pub async fn waiting_in_lines(&self) -> Result<HashMap<String, u64>, StoreError> {
        let mut total = HashMap::new();
        for partition in self.keys().all_partitions() {
            for (subscription, n) in self.waiting_in_lines_of(&partition).await? {
                *total.entry(subscription).or_default() += n;
            }
        }
        Ok(total)
    }
}
