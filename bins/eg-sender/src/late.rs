//! Late success (behaviour.md#retry-schedule-and-policy): an attempt that timed out is
//! still listened to for a while. If the endpoint's success arrives after all, the retries
//! queued for the batch are cancelled where they are still queued, so the endpoint does not
//! get the events again. A retry already handed back to the ready stream cannot be
//! cancelled: that is the duplicate at-least-once delivery allows, and it is counted.

use crate::destination::LateAnswer;
use crate::store::DeliveryStore;
use eg_core::Delivery;
use eg_core::subscription::Subscription;
use eg_runtime::metrics as m;
use eg_store::Partition;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// A retry an attempt queued, which a late success of that attempt cancels.
pub struct QueuedRetry {
    pub partition: Partition,
    /// The retry's record, as settled.
    pub delivery: Delivery,
    /// The body the attempt sent, when its entry carried it: the retry then waits beside
    /// it (a carried retry), and is named by both.
    pub carried_body: Option<String>,
}

pub struct LateListeners {
    window: Duration,
    slots: Arc<Semaphore>,
}

impl LateListeners {
    pub fn new(window: Duration, max: usize) -> Self {
        Self {
            window,
            slots: Arc::new(Semaphore::new(max)),
        }
    }

    /// Whether a timed-out attempt can be listened to now (a listener slot is free).
    pub fn window(&self) -> Option<Duration> {
        (!self.window.is_zero() && self.slots.available_permits() > 0).then_some(self.window)
    }

    /// Waits (in the background) for the pending response; on success cancels `retries`.
    pub fn listen(
        &self,
        store: impl DeliveryStore,
        subscription: Arc<Subscription>,
        mut pending: LateAnswer,
        retries: Vec<QueuedRetry>,
    ) {
        let Ok(permit) = self.slots.clone().try_acquire_owned() else {
            pending.abort();
            return;
        };
        let window = self.window;
        tokio::spawn(async move {
            let _permit = permit;
            let outcome = match tokio::time::timeout(window, &mut pending).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => return,
                Err(_) => {
                    pending.abort();
                    return;
                }
            };
            if !outcome.is_success() {
                return;
            }
            let (topic, sub) = (subscription.topic.key(), subscription.name.key());
            for QueuedRetry {
                partition,
                delivery,
                carried_body,
            } in retries
            {
                let result = match store.cancel_retry(&partition, &delivery, carried_body.as_deref()).await {
                    Ok(true) => {
                        metrics::counter!(m::DELIVERY_SUCCESS_COUNT, "topic" => topic.clone(), "subscription" => sub.clone())
                            .increment(1);
                        "retry_cancelled"
                    }
                    Ok(false) => "too_late",
                    Err(e) => {
                        tracing::warn!(error = %e, delivery = %delivery.id, "cannot cancel the retry after a late success");
                        "too_late"
                    }
                };
                tracing::info!(delivery = %delivery.id, result, "late success");
                metrics::counter!(m::LATE_SUCCESS_COUNT, "topic" => topic.clone(), "subscription" => sub.clone(), "result" => result)
                    .increment(1);
            }
        });
    }
}
