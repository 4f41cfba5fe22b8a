//! What the kinds that answer at once share about an attempt's answer: its outcome and
//! what to tell the operator beyond the outcome's name ([`Told`]), made into the [`Sent`]
//! the steps get when nothing is listened for after the timeout.

use crate::destination::Sent;
use eg_core::{AttemptOutcome, OutcomeName};
use std::time::Instant;

/// An attempt's outcome, and what to tell the operator beyond its name, if anything.
pub struct Told {
    pub outcome: AttemptOutcome,
    pub error: Option<String>,
}

impl Told {
    pub fn with_error(outcome: AttemptOutcome, error: String) -> Self {
        Self {
            outcome,
            error: Some(error),
        }
    }

    /// The attempt that began at `started`, with no late answer to listen for: a retry
    /// learns whatever would come late.
    pub fn sent(self, started: Instant) -> Sent {
        Sent {
            outcome: self.outcome,
            error: self.error,
            took: started.elapsed(),
            late: None,
        }
    }
}

impl From<AttemptOutcome> for Told {
    fn from(outcome: AttemptOutcome) -> Self {
        Self { outcome, error: None }
    }
}

/// A refusal with Event Grid's outcome name and the HTTP status the retry table treats
/// it as.
pub fn refused(outcome: OutcomeName, as_status: u16) -> AttemptOutcome {
    AttemptOutcome::Refused { outcome, as_status }
}
