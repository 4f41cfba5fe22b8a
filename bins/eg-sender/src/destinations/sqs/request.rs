//! One `SendMessageBatch` request to SQS and what its answer means for each entry.
//!
//! SQS's JSON protocol: a POST to the connection's endpoint with
//! `X-Amz-Target: AmazonSQS.SendMessageBatch`, signed with AWS Signature Version 4 by
//! object_store's public signer (the crate the dead-letter tier already uses for S3), so
//! no AWS SDK is needed. The answer lists each entry as `Successful` or `Failed` (with
//! SQS's code and message); a request refused whole answers every entry alike.

use super::outcome::{Answer, outcome_of};
use eg_core::destination::FifoIds;
use eg_core::{AttemptOutcome, OutcomeName};
use eg_runtime::metrics::{DESTINATION_REQUEST_COUNT, DESTINATION_REQUEST_MESSAGE_COUNT};
use object_store::aws::{AwsAuthorizer, AwsCredentialProvider};
use object_store::client::{HttpRequest, HttpRequestBody};
use serde_json::{Map, Value, json};

/// Most bytes of an answer read: ten entries' answers, or an error, are far less.
const MAX_ANSWER: usize = 64 * 1024;
/// Most characters of an answer that is not SQS's JSON kept for the history.
const MAX_QUOTED: usize = 512;
/// The JSON protocol's content type.
const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// One message, ready to send.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The event as rendered in the delivery schema.
    pub body: String,
    /// Message attributes, each of type `String`.
    pub attributes: Vec<(String, String)>,
    /// For a FIFO queue.
    pub fifo: Option<FifoIds>,
    /// Its size as SQS counts it: the body, and each attribute's name, type and value.
    pub size: usize,
}

impl Entry {
    pub fn new(body: String, attributes: Vec<(String, String)>, fifo: Option<FifoIds>) -> Self {
        let size = body.len()
            + attributes
                .iter()
                .map(|(name, value)| name.len() + "String".len() + value.len())
                .sum::<usize>();
        Self {
            body,
            attributes,
            fifo,
            size,
        }
    }

    /// The entry as `SendMessageBatch` takes it; `id` is its place in the request.
    fn to_json(&self, id: usize) -> Value {
        let mut entry = Map::new();
        entry.insert("Id".to_owned(), json!(id.to_string()));
        entry.insert("MessageBody".to_owned(), json!(self.body));
        if !self.attributes.is_empty() {
            let attributes: Map<String, Value> = self
                .attributes
                .iter()
                .map(|(name, value)| (name.clone(), json!({"DataType": "String", "StringValue": value})))
                .collect();
            entry.insert("MessageAttributes".to_owned(), Value::Object(attributes));
        }
        if let Some(fifo) = &self.fifo {
            entry.insert("MessageGroupId".to_owned(), json!(fifo.group));
            entry.insert("MessageDeduplicationId".to_owned(), json!(fifo.deduplication));
        }
        Value::Object(entry)
    }
}

/// One queue of one connection, as its requests are made.
#[derive(Debug)]
pub struct Queue {
    pub http: reqwest::Client,
    /// The connection's endpoint (`https://sqs.<region>.amazonaws.com`).
    pub endpoint: String,
    pub region: String,
    pub credentials: AwsCredentialProvider,
    /// Sent as `QueueUrl`; the request goes to `endpoint` whatever its host.
    pub queue_url: String,
    /// For logs: `sqs://<connection>/<account>/<queue>` (no host, no secret).
    pub identity: String,
}

impl Queue {
    /// Sends `entries` in one request: one answer per entry, in order.
    pub async fn send_batch(&self, entries: &[Entry]) -> Vec<Answer> {
        metrics::counter!(DESTINATION_REQUEST_COUNT, "destination" => "sqs").increment(1);
        metrics::counter!(DESTINATION_REQUEST_MESSAGE_COUNT, "destination" => "sqs").increment(entries.len() as u64);
        match self.request(entries).await {
            Ok(answers) => answers,
            Err(whole) => vec![whole; entries.len()],
        }
    }

    async fn request(&self, entries: &[Entry]) -> Result<Vec<Answer>, Answer> {
        let body = json!({
            "QueueUrl": self.queue_url,
            "Entries": entries.iter().enumerate().map(|(i, e)| e.to_json(i)).collect::<Vec<_>>(),
        });
        let body = body.to_string().into_bytes();
        let headers = self.signed_headers(&body).await?;
        let response = self
            .http
            .post(format!("{}/", self.endpoint))
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                let outcome = eg_outbound::classify(&e);
                tracing::info!(queue = %self.identity, outcome = %outcome.name(), "SQS was not reached");
                Answer::from(outcome)
            })?;
        let status = response.status().as_u16();
        let error_type = response
            .headers()
            .get("x-amzn-errortype")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = read_bounded(response).await;
        if status != 200 {
            let (code, message) = error_of(error_type.as_deref(), &text);
            let outcome = outcome_of(status, &code, &message);
            tracing::info!(
                queue = %self.identity, status, code = %code, outcome = %outcome.name(),
                "SQS refused the request"
            );
            return Err(Answer::refused(outcome, format!("SQS: {code}: {message}")));
        }
        Ok(entry_answers(&text, entries.len()))
    }

    /// The request's headers, SigV4-signed for `body`.
    async fn signed_headers(&self, body: &[u8]) -> Result<reqwest::header::HeaderMap, Answer> {
        let credential = self.credentials.get_credential().await.map_err(|e| {
            tracing::warn!(queue = %self.identity, error = %e, "no AWS credentials");
            Answer::refused(
                AttemptOutcome::Refused {
                    outcome: OutcomeName::GenericError,
                    as_status: 500,
                },
                format!("no AWS credentials for SQS: {e}"),
            )
        })?;
        let mut request = HttpRequest::new(HttpRequestBody::from(body.to_vec()));
        *request.method_mut() = reqwest::Method::POST;
        *request.uri_mut() = format!("{}/", self.endpoint)
            .parse()
            .map_err(|e| Answer::refused(generic(), format!("the SQS endpoint is not a URI: {e}")))?;
        let headers = request.headers_mut();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static(CONTENT_TYPE),
        );
        headers.insert(
            "x-amz-target",
            reqwest::header::HeaderValue::from_static("AmazonSQS.SendMessageBatch"),
        );
        AwsAuthorizer::new(&credential, "sqs", &self.region)
            .try_authorize(&mut request, None)
            .map_err(|e| Answer::refused(generic(), format!("cannot sign the SQS request: {e}")))?;
        Ok(request.headers().clone())
    }
}

fn generic() -> AttemptOutcome {
    AttemptOutcome::Refused {
        outcome: OutcomeName::GenericError,
        as_status: 500,
    }
}

/// At most [`MAX_ANSWER`] bytes of the answer, as text.
async fn read_bounded(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ANSWER {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The code and message of an error answer: the JSON protocol's
/// (`{"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "…"}`, or the code in
/// `x-amzn-errortype`), else the XML `<Code>` and `<Message>` some refusals of
/// credentials come as; the code without its namespace.
pub fn error_of(error_type: Option<&str>, text: &str) -> (String, String) {
    let parsed: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let bare = |t: &str| {
        let t = t.split(':').next().unwrap_or(t);
        t.rsplit('#').next().unwrap_or(t).to_owned()
    };
    let code = parsed
        .get("__type")
        .or_else(|| parsed.get("code"))
        .and_then(Value::as_str)
        .map(bare)
        .or_else(|| error_type.map(bare))
        .or_else(|| xml_element(text, "Code"))
        .unwrap_or_else(|| "Unknown".to_owned());
    let message = parsed
        .get("message")
        .or_else(|| parsed.get("Message"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| xml_element(text, "Message"))
        .unwrap_or_else(|| text.chars().take(MAX_QUOTED).collect());
    (code, message)
}

/// The text of the first `<name>…</name>` in `text`.
fn xml_element(text: &str, name: &str) -> Option<String> {
    let (_, after) = text.split_once(&format!("<{name}>"))?;
    let (inner, _) = after.split_once(&format!("</{name}>"))?;
    Some(inner.trim().to_owned())
}

/// Each entry's answer from a `200`'s `Successful` and `Failed` lists (by `Id`, its
/// place in the request); an entry in neither was not answered, and is retried.
pub fn entry_answers(text: &str, entries: usize) -> Vec<Answer> {
    let unanswered = || {
        Answer::refused(
            generic(),
            "SQS answered without this message in Successful or Failed".to_owned(),
        )
    };
    let mut answers = vec![unanswered(); entries];
    let Ok(parsed) = serde_json::from_str::<Value>(text) else {
        return answers;
    };
    let index = |entry: &Value| {
        entry
            .get("Id")
            .and_then(Value::as_str)
            .and_then(|id| id.parse::<usize>().ok())
            .filter(|i| *i < entries)
    };
    for ok in parsed.get("Successful").and_then(Value::as_array).into_iter().flatten() {
        if let Some(i) = index(ok) {
            answers[i] = Answer::from(AttemptOutcome::Stored);
        }
    }
    for failed in parsed.get("Failed").and_then(Value::as_array).into_iter().flatten() {
        let Some(i) = index(failed) else { continue };
        let code = failed.get("Code").and_then(Value::as_str).unwrap_or("Unknown");
        let message = failed.get("Message").and_then(Value::as_str).unwrap_or("");
        let sender_fault = failed.get("SenderFault").and_then(Value::as_bool).unwrap_or(true);
        // An entry SQS failed on its own side is retried whatever its code says.
        let outcome = if sender_fault {
            outcome_of(400, code, message)
        } else {
            outcome_of(500, code, message)
        };
        answers[i] = Answer::refused(outcome, format!("SQS: {code}: {message}"));
    }
    answers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_read_from_json_the_error_type_header_or_xml() {
        let json =
            r#"{"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "The specified queue does not exist."}"#;
        assert_eq!(
            error_of(None, json),
            ("QueueDoesNotExist".into(), "The specified queue does not exist.".into())
        );
        assert_eq!(
            error_of(Some("InvalidClientTokenId:http://internal.amazon.com/"), "{}").0,
            "InvalidClientTokenId"
        );
        let xml = "<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code><Message>bad sig</Message></Error></ErrorResponse>";
        assert_eq!(error_of(None, xml), ("SignatureDoesNotMatch".into(), "bad sig".into()));
        assert_eq!(error_of(None, "oops").0, "Unknown");
    }
}
