//! The resolver behind the guarded client: resolves a host name with tokio and keeps
//! only the addresses the policy allows.
//!
//! hyper asks the resolver at every new connection, so the check follows the name's
//! current addresses: a name that resolved to a public address yesterday and to
//! 127.0.0.1 now (DNS rebinding) is refused now. When no address is left the
//! connection fails with [`ResolvedAddressRefused`], which [`refusal_in`] finds again
//! in hyper's error so the failure is reported as a refusal; any other failure is
//! wrapped in [`ResolutionFailed`], so it is reported as a name that did not resolve.

use eg_core::address::{AddressPolicy, AddressRefusal};
use hyper_util::client::legacy::connect::dns::Name;
use std::error::Error;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

type BoxError = Box<dyn Error + Send + Sync>;

/// hyper-util's `HttpConnector` resolver: a `Service` from a host name to addresses.
#[derive(Clone)]
pub(crate) struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

impl GuardedResolver {
    pub(crate) fn new(policy: Arc<AddressPolicy>) -> Self {
        Self { policy }
    }
}

impl tower_service::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let policy = Arc::clone(&self.policy);
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0))
                .await
                .map_err(|e| Box::new(ResolutionFailed(e)) as BoxError)?
                .collect();
            Ok(allowed_addresses(&policy, resolved)?.into_iter())
        })
    }
}

/// The host name did not resolve (or resolved to nothing).
#[derive(Debug, thiserror::Error)]
#[error("the host name did not resolve: {0}")]
pub(crate) struct ResolutionFailed(io::Error);

/// Whether a [`ResolutionFailed`] is among `error`'s causes.
pub(crate) fn resolution_failed_in(error: &(dyn Error + 'static)) -> bool {
    causes(error).any(|e| e.is::<ResolutionFailed>())
}

/// `error` and its causes. An `io::Error` wrapping an error reports that error's
/// source, not the error itself, so this looks inside it explicitly.
pub(crate) fn causes<'a>(error: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(error), |&e: &&'a (dyn Error + 'static)| {
        match e.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(inner) => Some(inner as &(dyn Error + 'static)),
            None => e.source(),
        }
    })
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(crate) struct ResolvedAddressRefused(AddressRefusal);

/// The resolved addresses the policy allows, in resolver order; an error when none are.
pub(crate) fn allowed_addresses(
    policy: &AddressPolicy,
    resolved: Vec<SocketAddr>,
) -> Result<Vec<SocketAddr>, BoxError> {
    let mut first_refusal = None;
    let allowed: Vec<SocketAddr> = resolved
        .into_iter()
        .filter(|addr| match policy.check(addr.ip()) {
            Ok(()) => true,
            Err(refusal) => {
                first_refusal.get_or_insert(refusal);
                false
            }
        })
        .collect();
    match (allowed.is_empty(), first_refusal) {
        (false, _) => Ok(allowed),
        (true, Some(refusal)) => Err(Box::new(ResolvedAddressRefused(refusal))),
        (true, None) => Err(Box::new(ResolutionFailed(io::Error::new(
            io::ErrorKind::NotFound,
            "it resolved to no addresses",
        )))),
    }
}

/// The refusal a failed request carries, if the resolver refused its addresses.
pub(crate) fn refusal_in(error: &(dyn Error + 'static)) -> Option<AddressRefusal> {
    causes(error).find_map(|e| e.downcast_ref::<ResolvedAddressRefused>().map(|refused| refused.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use eg_core::address::AddressCategory;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| SocketAddr::new(a.parse().unwrap(), 0)).collect()
    }

    #[test]
    fn keeps_only_allowed_addresses() {
        let p = AddressPolicy::default();
        let kept = allowed_addresses(
            &p,
            addrs(&[
                "127.0.0.1",
                "93.184.215.14",
                "::1",
                "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
            ]),
        )
        .unwrap();
        assert_eq!(
            kept,
            addrs(&["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"])
        );
    }

    #[test]
    fn refuses_a_name_with_only_forbidden_addresses_and_the_error_is_recognised() {
        let p = AddressPolicy::default();
        let err = allowed_addresses(&p, addrs(&["10.0.0.5", "127.0.0.1"])).unwrap_err();
        let refusal = refusal_in(err.as_ref()).unwrap();
        assert_eq!(refusal.category(), AddressCategory::Private);
        assert_eq!(refusal.address(), "10.0.0.5".parse::<std::net::IpAddr>().unwrap());
        // Found through a chain of wrappers, as reqwest and hyper wrap it.
        let wrapped = io::Error::other(err);
        assert!(refusal_in(&wrapped).is_some());
    }

    #[test]
    fn no_addresses_at_all_is_a_resolution_failure_not_a_refusal() {
        let err = allowed_addresses(&AddressPolicy::default(), Vec::new()).unwrap_err();
        assert!(refusal_in(err.as_ref()).is_none());
        assert!(resolution_failed_in(err.as_ref()));
    }

    #[test]
    fn the_allow_list_lets_addresses_through() {
        let p = AddressPolicy::parse(["127.0.0.1/32"]).unwrap();
        assert_eq!(
            allowed_addresses(&p, addrs(&["::1", "127.0.0.1"])).unwrap(),
            addrs(&["127.0.0.1"])
        );
    }
}
