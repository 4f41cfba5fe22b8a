//! What every eg tier shares as a process: settings (`settings`), accepting events into
//! a topic (`accept`: match and store, for the ingress and eg-deadletter's notifications), the
//! announcement of each dead-letter object written (`dead_letter_notice`), telemetry
//! (`telemetry`), OpenTelemetry traces when `OTEL_*` asks for them (`traces`), metric names (`metrics`), the ops endpoints (`/healthz`, `/readyz`,
//! `/metrics`) and the HTTP server loop (`ops`), shutdown on SIGTERM/SIGINT (`shutdown`),
//! the status page's tally and its flusher (`stats`), pull delivery's counts (`pull_tally`),
//! webhook bearer tokens from the configured identities (`bearer`), AWS credentials for
//! the connections that reach AWS (`aws_chain`), the global allocator
//! (`allocator`), and the start-up every tier shares (`startup`: connect to Redis, check
//! its layout and consumer groups, sync the clock, load the catalog and keep it fresh,
//! waiting for Redis instead of exiting).
//!
//! It must not decide delivery policy (that is `eg-core`'s) nor build a Redis key or
//! ship a script: it calls `eg-store` for everything in Redis.

pub mod accept;
pub mod allocator;
pub mod aws_chain;
pub mod bearer;
pub mod dead_letter_notice;
pub mod metrics;
pub mod ops;
pub mod pull_tally;
pub mod settings;
pub mod shutdown;
pub mod startup;
pub mod stats;
pub mod telemetry;
pub mod traces;

pub use settings::Settings;
pub use shutdown::Shutdown;
pub use startup::{Process, Startup};
