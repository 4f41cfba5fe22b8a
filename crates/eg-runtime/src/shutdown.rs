//! Shutdown is designed in: every loop takes a `Shutdown` and stops taking new work
//! when it fires (SIGTERM or SIGINT), then finishes or hands back what it holds.

use tokio_util::sync::CancellationToken;

#[derive(Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    /// A shutdown that fires on SIGTERM or SIGINT.
    pub fn on_signals() -> Self {
        let shutdown = Self::default();
        let trigger = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("shutdown requested; finishing work in hand");
            trigger.trigger();
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
