//! [`Target::endpoint_id`] remembered per destination. A webhook's id parses and
//! normalises its URL, and a sender asks for it at every attempt: done each time, the
//! parse alone was ~3 % of the sender's CPU per delivery (docs/performance.md).

use super::Target;
use crate::memo::BoundedMemo;
use crate::probation::EndpointId;

/// Most destinations remembered; past it the memory starts again (the ids are
/// computed again as attempts need them).
const MOST_REMEMBERED: usize = 10_000;

/// The endpoint ids of the destinations seen, by their identity.
#[derive(Debug)]
pub struct EndpointIds {
    known: BoundedMemo<String, EndpointId>,
}

impl Default for EndpointIds {
    fn default() -> Self {
        Self {
            known: BoundedMemo::new(MOST_REMEMBERED),
        }
    }
}

impl EndpointIds {
    /// `target.endpoint_id()`, computed once per destination.
    pub fn of(&self, target: &Target) -> EndpointId {
        self.known
            .get_or_insert_with(target.identity(), |identity| EndpointId::of(identity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destination::WebHook;

    fn hook(url: &str) -> Target {
        Target::WebHook(WebHook {
            url: url.to_owned(),
            ..Default::default()
        })
    }

    #[test]
    fn gives_what_the_target_computes_and_stays_bounded() {
        let ids = EndpointIds::default();
        for url in [
            "https://a.example/in",
            "https://A.example:443/in",
            "https://b.example/in",
        ] {
            assert_eq!(ids.of(&hook(url)), hook(url).endpoint_id(), "{url}");
            assert_eq!(ids.of(&hook(url)), hook(url).endpoint_id(), "{url}, remembered");
        }
        for i in 0..=MOST_REMEMBERED {
            ids.of(&hook(&format!("https://h{i}.example/")));
        }
        assert!(ids.known.len() <= MOST_REMEMBERED);
    }
}
