//! Event Grid's error body: `{"error":{"code","message","details":[{"code","message"}]}}`.
//!
//! Every refusal a client sees says what was wrong and where, e.g.
//! `events[3].eventTime: not an RFC 3339 timestamp`.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorDetail {
    pub(crate) code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) details: Vec<Detail>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Detail {
    pub(crate) code: String,
    pub message: String,
}

impl ApiError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            error: ErrorDetail {
                code: code.to_owned(),
                details: vec![Detail {
                    code: code.to_owned(),
                    message: message.clone(),
                }],
                message,
            },
        }
    }
}

/// A field that failed validation: where it is and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct InvalidField {
    pub field: String,
    pub problem: String,
}

impl InvalidField {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// The same problem, located inside a parent field (`properties` + `.filter`).
    pub(crate) fn within(mut self, parent: &str) -> Self {
        self.field = if self.field.is_empty() {
            parent.to_owned()
        } else if self.field.starts_with('[') {
            format!("{parent}{}", self.field)
        } else {
            format!("{parent}.{}", self.field)
        };
        self
    }
}
