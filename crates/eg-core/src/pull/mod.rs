//! Pull delivery (Event Grid namespaces' queue mode), pure: the lock token a receiver
//! gets ([`token`]), the request parameters of receive and of the four lock operations
//! with their ranges ([`request`]), the answers' JSON shapes ([`answer`]), and what
//! becomes of a queued event at receive, release, reject and at the scheduler's sweep
//! ([`decide`]). The Redis side (queue streams, locks as pending entries) is in
//! `eg_store::pull`; the HTTP side in the ingress's `pull` module.

pub mod answer;
pub mod decide;
pub mod request;
pub mod token;

pub use answer::{LockAnswer, LockOutcome, ReceiveAnswer, ReceivedEvent};
pub use decide::{QueueStep, ReleaseStep, on_receive, on_reject, on_release, on_sweep};
pub use request::{Action, ReceiveOptions, ReleaseDelay, lock_tokens, parse_action, require_api_version};
pub use token::{BadToken, LockToken, TokenKey};
