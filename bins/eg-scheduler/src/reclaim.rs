//! Taking back deliveries whose holder did not settle them within the visibility
//! timeout (a sender killed mid-delivery). The interrupted attempt is counted, with
//! outcome `Aborted`, and the delivery goes back to the ready stream; the sender that
//! picks it up decides whether attempts or time are left.

use eg_core::{LastAttempt, OutcomeName};
use eg_runtime::Shutdown;
use eg_runtime::metrics as m;
use eg_store::{Clock, Partition, Retention, Settlement, Store};
use std::time::Duration;

const CLAIM_BATCH: usize = 100;

pub async fn reclaim_loop(
    store: Store,
    clock: Clock,
    partition: Partition,
    consumer: String,
    visibility: Duration,
    every: Duration,
    shutdown: Shutdown,
) {
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.requested() => return,
        }
        loop {
            let claimed = match store
                .claim_abandoned(&partition, &consumer, visibility, CLAIM_BATCH)
                .await
            {
                Ok(c) => c,
                Err(e) => {
                    if e.is_missing_group() {
                        let _ = store.ensure_groups().await;
                    } else {
                        tracing::warn!(error = %e, partition = partition.index, "cannot look for abandoned deliveries");
                    }
                    break;
                }
            };
            let full = claimed.len() >= CLAIM_BATCH;
            for ready in claimed {
                let d = &ready.delivery;
                let requeued = d.after_attempt(LastAttempt {
                    outcome: OutcomeName::Aborted,
                    status: None,
                    at: clock.now(),
                });
                // Back to the ready stream with no history step: no attempt ended here.
                let item = ready.settle(Settlement::Requeue { delivery: requeued }, None);
                match store.settle_many(&partition, &[item], &Retention::NONE).await {
                    Ok(settled) if settled.first().is_some_and(|s| s.took_effect) => {
                        metrics::counter!(m::RECLAIMED_DELIVERY_COUNT, "topic" => d.topic.clone(), "subscription" => d.subscription.clone()).increment(1);
                        tracing::warn!(delivery = %d.id, topic = %d.topic, subscription = %d.subscription, "took back an abandoned delivery");
                    }
                    Ok(_) => {}
                    // Still pending under this scheduler: taken back again after the visibility timeout.
                    Err(e) => tracing::warn!(error = %e, delivery = %d.id, "cannot requeue an abandoned delivery"),
                }
            }
            if !full {
                break;
            }
        }
    }
}
