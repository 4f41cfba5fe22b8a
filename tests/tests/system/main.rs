//! The end-to-end tests: the four eg tiers and `egctl` as real processes on a real Redis,
//! seen from outside (HTTP, metrics, dead-letter files, logs). One test binary, one module
//! per area, so the suite links once; a test's name starts with its area
//! (`pipeline::a_published_event_is_delivered_once_as_published`), and
//! `cargo test -p eg-system-tests --test system -- pipeline::` runs one area.
//!
//! The harness (processes, admin client, receivers, waiting) is the `eg_system_tests`
//! library in `tests/src/`; a helper that a second area needs belongs there.

// A test that cannot unwrap has failed: panicking is how it says so.
#![allow(clippy::unwrap_used)]

mod access;
mod archive;
mod bad_input;
mod brokers;
mod client_certificates;
mod dead_letter_notifications;
mod dead_letter_status;
mod dead_letter_stores;
mod deduplication;
mod egctl;
mod event_hubs;
mod filtering;
mod hostile;
mod kafka;
mod management;
mod namespace_publish;
mod namespace_resources;
mod oauth;
mod openapi_client;
mod operations;
mod ordering;
mod outages;
mod pipeline;
mod protection;
mod pull_delivery;
mod queue_ops;
mod rate_limits;
mod redis_deployments;
mod replay;
mod resilience;
mod schemas;
mod signing;
mod sqs;
mod status_page;
mod storage_queue;
mod traces;
mod validation_path;
