//! Pull delivery's spans: one per receive, acknowledge, release, reject or renewLock
//! call whose events carry a trace context, so an event's trace shows when a consumer
//! took it and what it did with it (traces.md).
//!
//! The parent is the context stored with the call's first event that has one; a call
//! whose events have none makes no span, as an attempt at such events makes none. The
//! span is recorded when the call is done ([`traces::record_finished`]), since only then
//! are its events known. It names the topic and subscription and counts events and lock
//! tokens; it never holds a lock token (a token is a credential to settle the event).

use super::Target;
use eg_core::TraceContext;
use eg_core::pull::{Action, LockOutcome};
use eg_runtime::traces::{self, KeyValue};
use std::time::SystemTime;

/// A call's trace: when it began and the context of its first traced event.
pub struct CallTrace {
    action: Action,
    started: SystemTime,
    parent: Option<TraceContext>,
}

impl CallTrace {
    /// Begins `action`'s trace (costs a clock read; spans are made only at the end).
    pub fn begin(action: Action) -> Self {
        Self {
            action,
            started: SystemTime::now(),
            parent: None,
        }
    }

    /// Notes an event the call handled: the first context seen becomes the parent.
    pub fn saw(&mut self, context: Option<&TraceContext>) {
        if self.parent.is_none() {
            self.parent = context.cloned();
        }
    }

    /// Records the receive's span: `events` handed to the consumer.
    pub fn received(self, target: &Target, events: usize) {
        self.record(target, events, Vec::new(), false);
    }

    /// Records a lock operation's span with its tokens' outcomes; an error when any
    /// token failed.
    pub fn settled(self, target: &Target, outcomes: &[LockOutcome]) {
        let succeeded = outcomes.iter().filter(|o| matches!(o, LockOutcome::Succeeded)).count();
        let failed = outcomes.len() - succeeded;
        let counts = vec![
            KeyValue::new("eg.succeeded", succeeded as i64),
            KeyValue::new("eg.failed", failed as i64),
        ];
        self.record(target, outcomes.len(), counts, failed > 0);
    }

    fn record(self, target: &Target, events: usize, mut attributes: Vec<KeyValue>, failed: bool) {
        let Some(parent) = &self.parent else { return };
        let subscription = &target.subscription;
        attributes.extend([
            KeyValue::new("eg.topic", subscription.topic.key()),
            KeyValue::new("eg.subscription", subscription.name.key()),
            KeyValue::new("eg.events", events as i64),
        ]);
        traces::record_finished(self.action.as_str(), parent, self.started, attributes, failed);
    }
}
