//! Every way a command can fail, each with the exit code scripts can branch on and a
//! one-line message an operator can act on.

use reqwest::StatusCode;

/// Exit codes (documented in docs/egctl.md): 1 the API refused or answered with an
/// error, 2 the command line or configuration is wrong (clap also exits 2 for bad
/// arguments), 3 eg-ingress could not be reached or did not answer in time, 4 a
/// subscription was written (or validated again) but is not `Succeeded`, so nothing is
/// delivered to it.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Wrong arguments, configuration or input files: nothing was sent.
    #[error("{0}")]
    Usage(String),
    /// The API answered with a non-success status; `message` is its Event Grid error
    /// body's message (or a short summary of whatever else it sent).
    #[error("{status}: {message}")]
    Api { status: StatusCode, message: String },
    /// No answer: connection refused, DNS, TLS, or the request timed out.
    #[error("cannot reach eg-ingress at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// Anything else that went wrong after the request was answered (an answer that
    /// is not what the API promises, a broken stdout).
    #[error("{0}")]
    Other(String),
    /// The API did what was asked, but the subscription does not receive events yet:
    /// `shown` is the command's usual output (printed first), `message` why not.
    #[error("{message}")]
    NotActive { shown: String, message: String },
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Self {
        Self::Usage(message.into())
    }

    pub fn other(message: impl Into<String>) -> Self {
        Self::Other(message.into())
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Api { .. } | Failure::Other(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Unreachable { .. } => 3,
            Failure::NotActive { .. } => 4,
        }
    }

    /// What the command would have printed had it succeeded, if it got that far.
    pub fn shown(&self) -> Option<&str> {
        match self {
            Failure::NotActive { shown, .. } => Some(shown),
            _ => None,
        }
    }

    /// Whether this is the API saying the thing (or the route) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Failure::Api { status, .. } if *status == StatusCode::NOT_FOUND)
    }
}
