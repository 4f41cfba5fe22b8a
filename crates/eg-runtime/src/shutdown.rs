//! Shutdown is designed in: every loop takes a `Shutdown` and stops taking new work
//! when it fires (SIGTERM or SIGINT), then finishes or hands back what it holds.

use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    /// A shutdown that fires on SIGTERM or SIGINT. The process then has `grace` to
    /// finish; past it, or on a second signal, it exits at once. Exiting early loses
    /// nothing: deliveries still held are reclaimed after their visibility timeout.
    pub fn on_signals(grace: Duration) -> Self {
        let shutdown = Self::default();
        let trigger = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!(?grace, "shutdown requested; finishing work in hand");
            trigger.trigger();
            tokio::select! {
                _ = tokio::time::sleep(grace) => {
                    tracing::error!(?grace, "work in hand not finished within the shutdown grace; exiting anyway");
                }
                _ = wait_for_signal() => tracing::warn!("second signal; exiting at once"),
            }
            crate::telemetry::flush();
            std::process::exit(1);
        });
        shutdown
    }

    pub fn trigger(&self) {
        self.token.cancel();
    }

    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves when shutdown has been requested.
    pub async fn requested(&self) {
        self.token.cancelled().await
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
