//! What a store said when it refused a write, read from the error `object_store` returns.
//!
//! `object_store` turns every 403 into one `PermissionDenied`, but a 403 means two things
//! an operator fixes in different places: the credentials themselves were refused (a
//! wrong account key or secret), or valid credentials lack the rights (a firewall rule, a
//! bucket policy). Azure and S3 say which in the error body they send, as an XML `<Code>`
//! and `<Message>`; `object_store` keeps that body in the error's text. This module reads
//! it back, as plain text so it does not depend on `object_store`'s private error types.

/// The parts of a store's error answer that matter to an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSaid<'a> {
    /// The HTTP status, when the error names one.
    pub status: Option<u16>,
    /// The store's error code: `AuthenticationFailed`, `SignatureDoesNotMatch`, …
    pub code: &'a str,
    /// The first line of the store's message (Azure adds request id and time below it).
    pub message: Option<&'a str>,
}

/// Codes meaning the credentials themselves were refused: Azure's for a wrong key or a
/// bad signature, S3's for an unknown access key id or a wrong secret.
const CREDENTIALS_REFUSED: [&str; 3] = ["AuthenticationFailed", "InvalidAccessKeyId", "SignatureDoesNotMatch"];

/// The message Azure gives with `AuthenticationFailed`. Azurite answers a wrong key with
/// this message under the code `AuthorizationFailure`, which Azure itself uses for
/// firewall refusals with another message: the message decides.
const AZURE_AUTHENTICATION_MESSAGE: &str = "Server failed to authenticate the request";

/// Reads the store's answer from an error's text, if it quotes one.
pub fn read(text: &str) -> Option<StoreSaid<'_>> {
    let code = element(text, "Code")?;
    let message = element(text, "Message")
        .and_then(|m| m.lines().next())
        .map(str::trim)
        .filter(|m| !m.is_empty());
    Some(StoreSaid {
        status: status(text),
        code,
        message,
    })
}

impl StoreSaid<'_> {
    /// Whether the store refused the credentials, rather than what they may do.
    pub fn credentials_refused(&self) -> bool {
        CREDENTIALS_REFUSED.contains(&self.code)
            || self
                .message
                .is_some_and(|m| m.starts_with(AZURE_AUTHENTICATION_MESSAGE))
    }

    /// For a person: `<message> (<status> <code>)`, as the store's own tools print it.
    pub fn describe(&self) -> String {
        let status = self.status.map(|s| format!("{s} ")).unwrap_or_default();
        match self.message {
            Some(message) => format!("{message} ({status}{})", self.code),
            None => format!("{status}{}", self.code),
        }
    }
}

/// The trimmed text of the first `<name>…</name>` element.
fn element<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&format!("</{name}>"))?;
    Some(text[start..end].trim()).filter(|s| !s.is_empty())
}

/// The status in `object_store`'s "… status code: 403 Forbidden: …".
fn status(text: &str) -> Option<u16> {
    const MARK: &str = "status code: ";
    let start = text.find(MARK)? + MARK.len();
    text.get(start..start + 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As `object_store` words a refused put, with the store's body at the end.
    fn refused(body: &str) -> String {
        format!(
            "The operation lacked the necessary privileges to complete for path SUB/x.json: \
             Error performing PUT http://127.0.0.1:10000/acct/dead/SUB/x.json in 3ms - \
             Server returned non-2xx status code: 403 Forbidden: {body}"
        )
    }

    #[test]
    fn azure_answers_are_read_with_the_first_line_of_the_message() {
        let text = refused(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>AuthenticationFailed</Code>\
             <Message>Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.\n\
             RequestId:7c8e\nTime:2026-11-25T16:42:22Z</Message></Error>",
        );
        let said = read(&text).unwrap();
        assert_eq!(said.status, Some(403));
        assert_eq!(said.code, "AuthenticationFailed");
        assert!(said.credentials_refused());
        assert_eq!(
            said.describe(),
            "Server failed to authenticate the request. Make sure the value of Authorization \
             header is formed correctly including the signature. (403 AuthenticationFailed)"
        );
    }

    #[test]
    fn refused_credentials_are_told_from_missing_rights() {
        let said = |code: &str, message: &str| {
            let text = refused(&format!(
                "<Error><Code>{code}</Code><Message>{message}</Message></Error>"
            ));
            read(&text).unwrap().credentials_refused()
        };
        assert!(said(
            "InvalidAccessKeyId",
            "The AWS Access Key Id you provided does not exist in our records."
        ));
        assert!(said(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match."
        ));
        // Azurite's wrong-key answer.
        assert!(said(
            "AuthorizationFailure",
            "Server failed to authenticate the request. Make sure the value of the Authorization header is formed correctly including the signature."
        ));
        // Valid credentials without the rights.
        assert!(!said(
            "AuthorizationFailure",
            "This request is not authorized to perform this operation."
        ));
        assert!(!said(
            "AuthorizationPermissionMismatch",
            "This request is not authorized to perform this operation using this permission."
        ));
        assert!(!said("AccessDenied", "Access Denied"));
    }

    #[test]
    fn text_without_a_store_answer_reads_as_nothing() {
        assert_eq!(read("error sending request: connection refused"), None);
        assert_eq!(read(&refused("")), None);
        assert_eq!(read("<Code></Code>"), None, "an empty code");
        let bare = read("<Error><Code>AccessDenied</Code></Error>").unwrap();
        assert_eq!((bare.status, bare.message), (None, None));
        assert_eq!(bare.describe(), "AccessDenied");
    }
}
