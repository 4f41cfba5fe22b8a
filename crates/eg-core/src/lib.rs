//! The domain of eg, pure: what events, topics and subscriptions are, who may publish
//! to a topic, which subscriptions an event matches, and what a delivery attempt's
//! outcome leads to.
//!
//! Every tier shares this one truth. Nothing here does I/O or knows about tokio,
//! Redis or HTTP clients: time and randomness come in as arguments, so the policy is
//! tested in microseconds with an injected clock.

pub mod address;
pub mod advanced_filter;
pub mod api_error;
pub mod batch;
pub mod capability;
pub mod dead_letter_destination;
pub mod deadletter;
pub mod delivery;
pub mod destination;
pub mod event;
pub mod fate;
pub mod filter;
pub(crate) mod header_value;
pub mod history;
pub mod identity;
pub mod json;
pub mod memo;
pub mod names;
pub mod ordering;
pub mod outcome;
pub mod policy;
pub mod probation;
pub mod profile;
pub mod publish;
pub mod publisher_auth;
pub mod pull;
pub mod render;
pub mod replay;
pub mod retry;
pub mod routing;
pub mod schema;
pub(crate) mod shape;
pub mod signing;
pub mod storage_event;
pub mod subscription;
pub mod throttle;
pub mod time;
pub mod topic;
pub mod trace_context;
pub mod validation;

pub use api_error::ApiError;
pub use delivery::{Delivery, LastAttempt};
pub use event::EventGridEvent;
pub use filter::EventFilter;
pub use names::{SubscriptionName, TopicName};
pub use outcome::{AttemptOutcome, OutcomeName, OutcomePolicy};
pub use policy::{DeadLetterReason, Decision, DeliveryPolicy};
pub use profile::DeliveryProfile;
pub use publish::PublishedBatch;
pub use retry::RetrySchedule;
pub use routing::Routing;
pub use schema::{DeliverySchema, InputSchema, StoredFormat};
pub use subscription::Subscription;
pub use time::UnixMillis;
pub use topic::Topic;
pub use trace_context::TraceContext;
