//! Refuses a subscription using a delivery control that a running copy of a tier cannot
//! honour yet (an older release during a rolling upgrade): `409`, naming the copy and
//! the tiers to upgrade first (`eg_core::capability`).

use crate::errors::Refusal;
use crate::state::App;
use axum::http::StatusCode;
use eg_core::capability::{Capability, RunningCopy, first_lacking};

/// `Ok` when every running copy can do everything in `needed` (nothing read when it is
/// empty, so a plain subscription costs no Redis round trip).
pub(crate) async fn check(app: &App, needed: &[Capability]) -> Result<(), Refusal> {
    if needed.is_empty() {
        return Ok(());
    }
    let copies = app.store.live_copies(app.clock.now()).await?;
    let running = copies.iter().map(|copy| RunningCopy {
        tier: &copy.tier,
        instance: &copy.instance,
        version: &copy.version,
        capabilities: &copy.capabilities,
    });
    match first_lacking(needed, running) {
        Some(message) => Err(Refusal::new(StatusCode::CONFLICT, "Conflict", message)),
        None => Ok(()),
    }
}
