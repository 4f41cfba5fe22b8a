//! What may travel as the value of a delivery header: an `aeg-*` header or a delivery
//! property of a webhook request, or a header of a broker message.
//!
//! A value that breaks this rule would fail every attempt of every delivery carrying it:
//! servers commonly answer `431` to a header line past 8 KiB, and a control character is
//! not allowed in a header at all (a line break would even end it). Retrying cannot help,
//! and the failures would count against the endpoint's probation. So every value that
//! goes into a header is checked against this one rule where it is written (a publish's
//! `dataVersion` and `id`, a static delivery property), and a value read from an event at
//! delivery time (a dynamic delivery property) is checked again there and left out.

use crate::api_error::InvalidField;

/// The most bytes a value sent as a header may have.
pub const MAX_HEADER_VALUE_BYTES: usize = 4096;

/// What an event's `dataVersion` is sent as (Event Grid schema deliveries).
pub(crate) const DATA_VERSION_HEADER: &str = "the aeg-data-version header";
/// What an event's `id` is sent as (message-broker deliveries: NATS's `Nats-Msg-Id`).
pub(crate) const ID_HEADER: &str = "a broker message's id header";

/// Why a string cannot be sent as a header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeaderValueProblem {
    #[error("is {bytes} bytes; a value sent as a header has at most {MAX_HEADER_VALUE_BYTES}")]
    TooLong { bytes: usize },
    #[error("holds the control character U+{code:04X} at byte {at}; a value sent as a header holds none")]
    ControlCharacter { code: u32, at: usize },
}

impl HeaderValueProblem {
    /// A short name for logs and records: `too_long`, `control_character`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::TooLong { .. } => "too_long",
            Self::ControlCharacter { .. } => "control_character",
        }
    }
}

/// Whether `value` can be sent as a header value: at most [`MAX_HEADER_VALUE_BYTES`]
/// bytes, and no control character (U+0000 to U+001F, tab included, and U+007F to U+009F).
pub fn check(value: &str) -> Result<(), HeaderValueProblem> {
    if value.len() > MAX_HEADER_VALUE_BYTES {
        return Err(HeaderValueProblem::TooLong { bytes: value.len() });
    }
    match value.char_indices().find(|(_, c)| c.is_control()) {
        Some((at, c)) => Err(HeaderValueProblem::ControlCharacter { code: c.into(), at }),
        None => Ok(()),
    }
}

/// Checks a field written to be sent as a header (`sent_as` says as which), naming it
/// in the refusal: `dataVersion: is 70000 bytes; … (sent as the aeg-data-version header)`.
pub(crate) fn check_field(field: &str, value: &str, sent_as: &str) -> Result<(), InvalidField> {
    check(value).map_err(|problem| InvalidField::new(field, format!("{problem} (sent as {sent_as})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_value_is_bounded_and_has_no_control_characters() {
        for fine in ["", "1.0", "héllo wörld", "a\"b", &"x".repeat(MAX_HEADER_VALUE_BYTES)] {
            assert_eq!(check(fine), Ok(()), "{fine:?}");
        }
        assert_eq!(
            check(&"x".repeat(70_000)),
            Err(HeaderValueProblem::TooLong { bytes: 70_000 })
        );
        // Counted in bytes, as sent: 2049 two-byte characters are 4098 bytes.
        assert_eq!(
            check(&"é".repeat(2049)),
            Err(HeaderValueProblem::TooLong { bytes: 4098 })
        );
        for (value, code, at) in [
            ("\u{0}", 0x00, 0),
            ("a\u{1}", 0x01, 1),
            ("ab\u{7f}", 0x7f, 2),
            ("a\r\nb", 0x0d, 1),
            ("tab\there", 0x09, 3),
            ("é\u{85}", 0x85, 2),
        ] {
            assert_eq!(
                check(value),
                Err(HeaderValueProblem::ControlCharacter { code, at }),
                "{value:?}"
            );
        }
        let message = check("a\u{0}").unwrap_err().to_string();
        assert_eq!(
            message,
            "holds the control character U+0000 at byte 1; a value sent as a header holds none"
        );
    }
}
