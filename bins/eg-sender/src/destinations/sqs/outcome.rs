//! What SQS's answers mean, as Event Grid's outcome names with the HTTP status the
//! retry table treats each as ([`outcome_of`]), and one attempt's answer ([`Answer`]).

use crate::destinations::told::{Told, refused};
use eg_core::{AttemptOutcome, OutcomeName};

/// One message's answer: its outcome and SQS's own words when it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub outcome: AttemptOutcome,
    pub error: Option<String>,
}

impl Answer {
    pub fn refused(outcome: AttemptOutcome, error: String) -> Self {
        Self {
            outcome,
            error: Some(error),
        }
    }

    /// The batcher stopped before answering (the process is ending): retried.
    pub fn gone() -> Self {
        Self::refused(
            refused(OutcomeName::Aborted, 500),
            "the SQS client stopped before sending".to_owned(),
        )
    }
}

impl From<AttemptOutcome> for Answer {
    fn from(outcome: AttemptOutcome) -> Self {
        Self { outcome, error: None }
    }
}

impl From<Answer> for Told {
    fn from(answer: Answer) -> Self {
        Self {
            outcome: answer.outcome,
            error: answer.error,
        }
    }
}

/// What an SQS error means, by the answer's status, SQS's code (without its namespace,
/// with or without the `AWS.SimpleQueueService.` prefix of the query protocol's codes)
/// and its message. A missing queue is `NotFound` (404: retried, it may be created),
/// refused or unknown credentials `Unauthorized` (401, not retried by default), a
/// refused permission `Forbidden` (403), a message or request too large
/// `PayloadTooLarge` (413, not retried), throttling and SQS's own failures `Busy` (503,
/// retried), a disabled KMS key `Disabled` (503), and any other refusal `BadRequest`.
pub fn outcome_of(status: u16, code: &str, message: &str) -> AttemptOutcome {
    let code = code.strip_prefix("AWS.SimpleQueueService.").unwrap_or(code);
    match code {
        "QueueDoesNotExist" | "NonExistentQueue" | "QueueDeletedRecently" => refused(OutcomeName::NotFound, 404),
        "InvalidClientTokenId"
        | "UnrecognizedClientException"
        | "SignatureDoesNotMatch"
        | "IncompleteSignature"
        | "MissingAuthenticationToken"
        | "ExpiredToken"
        | "InvalidSecurity"
        | "AuthFailure" => refused(OutcomeName::Unauthorized, 401),
        "AccessDenied" | "AccessDeniedException" | "KmsAccessDenied" => refused(OutcomeName::Forbidden, 403),
        "BatchRequestTooLong" => refused(OutcomeName::PayloadTooLarge, 413),
        "InvalidParameterValue" if message.contains("must be shorter") => refused(OutcomeName::PayloadTooLarge, 413),
        "RequestThrottled" | "ThrottlingException" | "KmsThrottled" | "OverLimit" => refused(OutcomeName::Busy, 503),
        "KmsDisabled" => refused(OutcomeName::Disabled, 503),
        _ if status == 401 => refused(OutcomeName::Unauthorized, 401),
        _ if status == 403 => refused(OutcomeName::Forbidden, 403),
        _ if status >= 500 => refused(OutcomeName::Busy, 503),
        _ => refused(OutcomeName::BadRequest, 400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqs_codes_become_event_grid_outcomes() {
        let name = |status, code, message| outcome_of(status, code, message);
        let table = [
            (400, "QueueDoesNotExist", "", OutcomeName::NotFound, 404),
            (
                400,
                "AWS.SimpleQueueService.NonExistentQueue",
                "",
                OutcomeName::NotFound,
                404,
            ),
            (400, "InvalidClientTokenId", "", OutcomeName::Unauthorized, 401),
            (403, "SignatureDoesNotMatch", "", OutcomeName::Unauthorized, 401),
            (400, "AccessDeniedException", "", OutcomeName::Forbidden, 403),
            (400, "BatchRequestTooLong", "", OutcomeName::PayloadTooLarge, 413),
            (
                400,
                "InvalidParameterValue",
                "Message must be shorter than 1048576 bytes.",
                OutcomeName::PayloadTooLarge,
                413,
            ),
            (
                400,
                "InvalidParameterValue",
                "Value x for DelaySeconds",
                OutcomeName::BadRequest,
                400,
            ),
            (400, "RequestThrottled", "", OutcomeName::Busy, 503),
            (500, "InternalError", "", OutcomeName::Busy, 503),
            (400, "KmsDisabled", "", OutcomeName::Disabled, 503),
            (400, "MissingParameter", "", OutcomeName::BadRequest, 400),
            (403, "Unknown", "", OutcomeName::Forbidden, 403),
        ];
        for (status, code, message, outcome, as_status) in table {
            assert_eq!(
                name(status, code, message),
                AttemptOutcome::Refused { outcome, as_status },
                "{status} {code}"
            );
        }
    }
}
