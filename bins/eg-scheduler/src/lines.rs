//! Sweeping stuck ordering lines (docs/ordered-delivery.md#stuck-lines): once per
//! interval, a whole pass over each partition's line index, a bounded step per script
//! call. A line whose head Redis lost gets the head back (or, its event gone too, the
//! next event released); each such line is counted and logged. The script decides what
//! is lost, atomically, so any number of schedulers may sweep at once.

use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_store::{Census, Partition, Store, SweepBounds};
use std::time::Duration;

pub async fn sweep_loop(store: Store, partition: Partition, every: Duration, shutdown: Shutdown) {
    let mut tick = tokio::time::interval(every);
    // The first tick is at once: a pass then only notes each line's head.
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.requested() => return,
        }
        sweep_pass(&store, &partition, &shutdown).await;
    }
}

/// One pass over the partition's lines, from the start of its index to the end.
async fn sweep_pass(store: &Store, partition: &Partition, shutdown: &Shutdown) {
    let mut cursor = "0".to_owned();
    let mut busy = false;
    loop {
        let step = match store.sweep_lines(partition, &cursor, SweepBounds::default()).await {
            Ok(step) => step,
            Err(e) => {
                tracing::warn!(error = %e, partition = partition.index, "cannot sweep ordering lines");
                return;
            }
        };
        busy |= step.census == Census::Busy;
        for line in &step.swept {
            let (topic, subscription) = line.subscription.split_once('/').unwrap_or((&line.subscription, ""));
            metrics::counter!(m::ORDERED_LINE_SWEPT_COUNT, "topic" => topic.to_owned(), "subscription" => subscription.to_owned(), "action" => line.action.as_str()).increment(1);
            tracing::warn!(
                partition = partition.index,
                topic,
                subscription,
                delivery = %line.delivery,
                action = line.action.as_str(),
                "swept an ordering line whose head Redis lost"
            );
        }
        if step.cursor == "0" || shutdown.is_triggered() {
            break;
        }
        cursor = step.cursor;
    }
    if busy {
        tracing::info!(
            partition = partition.index,
            "ordering lines not checked this pass: the partition's backlog is larger than one sweep may read"
        );
    }
}
