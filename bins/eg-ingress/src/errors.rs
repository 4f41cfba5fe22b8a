//! Every refusal in Event Grid's error body, with the right status.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use eg_core::ApiError;

/// Messages may quote what the client sent (a bad timestamp, a key): a quote of a huge
/// value is cut so an answer stays small.
const MAX_MESSAGE_CHARS: usize = 1024;

pub struct Refusal {
    status: StatusCode,
    body: ApiError,
}

impl Refusal {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            body: ApiError::new(code, shortened(message.into())),
        }
    }

    /// A refusal with the error code Event Grid uses for `status`.
    pub fn of_status(status: StatusCode, message: impl Into<String>) -> Self {
        Self::new(status, code_of(status), message)
    }

    /// What the client is told.
    #[cfg(test)]
    pub fn message(&self) -> &str {
        &self.body.error.message
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NotFound", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "PayloadTooLarge", message)
    }

    /// The client did not send its body in time.
    pub fn timed_out(message: impl Into<String>) -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, "RequestTimeout", message)
    }

    /// Redis could not be reached or answered an error: nothing was accepted. Or the
    /// events reached the primary but not the replicas `EG__REDIS__REPLICA_ACKS` asks
    /// for: not durable as promised, so not accepted either (a retry may duplicate them).
    pub fn unavailable(error: &eg_store::StoreError) -> Self {
        tracing::error!(%error, "storage unavailable");
        let message = match error {
            eg_store::StoreError::NotReplicated { .. } => {
                "the events reached Redis but not enough replicas confirmed them in time; \
                 they are not accepted: retry later (they may then be delivered twice)"
            }
            _ => "storage is unavailable; nothing was accepted, retry later",
        };
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", message)
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

impl From<eg_store::StoreError> for Refusal {
    fn from(e: eg_store::StoreError) -> Self {
        Self::unavailable(&e)
    }
}

/// Event Grid's error code for a status.
pub fn code_of(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "BadRequest",
        StatusCode::UNAUTHORIZED => "Unauthorized",
        StatusCode::FORBIDDEN => "Forbidden",
        StatusCode::NOT_FOUND => "NotFound",
        StatusCode::METHOD_NOT_ALLOWED => "MethodNotAllowed",
        StatusCode::REQUEST_TIMEOUT => "RequestTimeout",
        StatusCode::CONFLICT => "Conflict",
        StatusCode::LENGTH_REQUIRED => "LengthRequired",
        StatusCode::PAYLOAD_TOO_LARGE => "PayloadTooLarge",
        StatusCode::URI_TOO_LONG => "UriTooLong",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "UnsupportedMediaType",
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "RequestHeaderFieldsTooLarge",
        StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
        s if s.is_client_error() => "BadRequest",
        _ => "InternalServerError",
    }
}

/// `message`, cut to [`MAX_MESSAGE_CHARS`] characters (marked with `…`).
fn shortened(message: String) -> String {
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => message,
        Some((cut, _)) => format!("{}…", &message[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
        let cut = shortened(long);
        assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(shortened("short".into()), "short");
    }
}
