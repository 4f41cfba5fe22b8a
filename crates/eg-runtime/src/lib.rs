//! Process plumbing shared by every eg binary: configuration, telemetry, metric names,
//! the health/readiness/metrics endpoints, shutdown on SIGTERM/SIGINT, the system-wide
//! counts behind the status page (`stats`), the global allocator, and the start-up
//! every tier shares (`startup`).
//!
//! Nothing here knows about delivery policy; bins wire these pieces to `eg-store`.

pub mod allocator;
pub mod metrics;
pub mod ops;
pub mod settings;
pub mod shutdown;
pub mod startup;
pub mod stats;
pub mod telemetry;

pub use settings::Settings;
pub use shutdown::Shutdown;
pub use startup::{Process, Startup};
