//! Every HTTP request eg makes to a user's endpoint goes through this crate.
//!
//! It owns:
//!
//! - the one guarded HTTP client ([`Client`]): no redirects, no proxies, and the
//!   deployment's [`AddressPolicy`](eg_core::address::AddressPolicy) applied to every
//!   address a connection is about to use — IP literals in the URL before the request
//!   is built, and every address a host name resolves to at every new connection, so a
//!   name that resolves (or re-resolves, DNS rebinding) to 127.0.0.1 is refused too;
//! - what a transport failure means ([`classify`]), `Retry-After` ([`retry_after`]) and
//!   reading a response body without holding more than a bound ([`drain`]);
//! - the endpoint validation handshakes of behaviour.md#protecting-endpoints-and-the-system
//!   ([`event_grid_handshake`], [`cloudevents_handshake`]);
//! - webhook delivery tokens ([`Tokens`]): asked of the operator's identity providers,
//!   cached and renewed (`tokens`), the client proving itself with a secret or with a
//!   certificate's signed assertion ([`CertificateCredential`]).
//!
//! It must not: hand out a `reqwest::Client` (a caller could then skip the checks);
//! decide retries or dead-lettering (that is `eg_core::OutcomePolicy`); build event
//! bodies or know about subscriptions; log or put into an error a full endpoint URL
//! (query strings carry secrets).

mod assertion;
mod checked_urls;
mod client;
mod handshake;
mod resolve;
mod response;
mod settings;
mod tokens;
mod transport;

#[cfg(test)]
mod http2_tests;

pub use assertion::CertificateCredential;
pub use client::{Blocked, Client, Clients, RequestBuilder, SendError, check_url};
pub use handshake::{
    Handshake, Rate, cloudevents_handshake, cloudevents_handshake_with_token, event_grid_handshake,
    event_grid_handshake_with_token,
};
pub use response::{classify, drain, retry_after};
pub use settings::{BuildError, ClientCertificate, OutboundSettings};
pub use tokens::{Credential, IdentityProblem, RequestObserver, RequestResult, TokenError, TokenSource, Tokens};
pub use transport::{Response, TransportError};
