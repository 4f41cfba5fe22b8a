//! Amazon SQS on the tests' moto server ([`S3Server`]: one moto serves S3 and SQS), for
//! the SQS destination's tests: creating a queue and reading its messages back with the
//! harness's own SigV4 signing and SQS's JSON protocol (as boto3 speaks it), so a test
//! needs no AWS SDK and shares no code with the sender's client.

use crate::http;
use crate::s3_server::{REGION, S3Server};
use crate::sigv4;
use serde_json::{Value, json};

/// A message read back: its body and its attributes as SQS gives them.
#[derive(Debug, Clone)]
pub struct SqsMessage {
    pub body: String,
    /// `String` message attributes, by name.
    pub attributes: Vec<(String, String)>,
    /// FIFO queues: `MessageGroupId`.
    pub group_id: Option<String>,
    /// FIFO queues: `MessageDeduplicationId`.
    pub deduplication_id: Option<String>,
}

impl SqsMessage {
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Calls `action` with `body` signed with the server's test credentials; the answer's
/// JSON, or the test fails naming the action.
fn call(moto: &S3Server, action: &str, body: &Value) -> Value {
    try_call(moto, action, body).unwrap_or_else(|e| panic!("{e}"))
}

/// [`call`], with a failure as the error instead: for reads repeated until they hold.
fn try_call(moto: &S3Server, action: &str, body: &Value) -> Result<Value, String> {
    let body = body.to_string().into_bytes();
    let host = format!("127.0.0.1:{}", moto.port());
    let credentials = moto.credentials();
    let signer = sigv4::Signer {
        credentials: &credentials,
        region: REGION,
        service: "sqs",
    };
    let signed = signer.sign("POST", &host, "/", &body, chrono::Utc::now());
    let target = format!("AmazonSQS.{action}");
    let mut headers: Vec<(&str, &str)> = signed.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    headers.push(("Content-Type", "application/x-amz-json-1.0"));
    headers.push(("X-Amz-Target", &target));
    let response = http::request(moto.port(), "POST", "/", &headers, &body).map_err(|e| format!("{action}: {e}"))?;
    if response.status != 200 {
        return Err(format!("{action}: {} {}", response.status, response.body));
    }
    serde_json::from_str(&response.body).map_err(|e| format!("{action}: {e}: {}", response.body))
}

/// Creates the queue `name` (a FIFO queue when it ends `.fifo`) and gives its URL.
pub fn create_queue(moto: &S3Server, name: &str) -> String {
    let mut attributes = json!({});
    if name.ends_with(".fifo") {
        attributes = json!({"FifoQueue": "true"});
    }
    let answer = call(
        moto,
        "CreateQueue",
        &json!({"QueueName": name, "Attributes": attributes}),
    );
    answer["QueueUrl"].as_str().expect("CreateQueue: a QueueUrl").to_owned()
}

/// How many messages the queue holds (visible or not).
pub fn message_count(moto: &S3Server, queue_url: &str) -> usize {
    let answer = call(
        moto,
        "GetQueueAttributes",
        &json!({"QueueUrl": queue_url, "AttributeNames": ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]}),
    );
    let count = |name: &str| {
        answer["Attributes"][name]
            .as_str()
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0)
    };
    count("ApproximateNumberOfMessages") + count("ApproximateNumberOfMessagesNotVisible")
}

/// Up to 10 of the queue's messages, each deleted once read: a reader that takes every
/// message once (its body only). An error is moto's answer when it was not 200; a
/// message read but not deleted comes back after 30 s, as from SQS.
pub fn take_messages(moto: &S3Server, queue_url: &str) -> Result<Vec<String>, String> {
    let answer = try_call(
        moto,
        "ReceiveMessage",
        &json!({"QueueUrl": queue_url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 30}),
    )?;
    let messages = answer["Messages"].as_array().cloned().unwrap_or_default();
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let entries: Vec<Value> = messages
        .iter()
        .enumerate()
        .map(|(n, m)| json!({"Id": n.to_string(), "ReceiptHandle": m["ReceiptHandle"]}))
        .collect();
    let deleted = try_call(
        moto,
        "DeleteMessageBatch",
        &json!({"QueueUrl": queue_url, "Entries": entries}),
    )?;
    if let Some(failed) = deleted["Failed"].as_array().filter(|f| !f.is_empty()) {
        return Err(format!("DeleteMessageBatch: {failed:?}"));
    }
    Ok(messages
        .iter()
        .map(|m| m["Body"].as_str().unwrap_or_default().to_owned())
        .collect())
}

/// Up to 10 of the queue's messages, left on it (visibility timeout 0): a test may read
/// them again. An error is moto's answer when it was not 200 (a test waiting for
/// messages asks again).
pub fn peek_messages(moto: &S3Server, queue_url: &str) -> Result<Vec<SqsMessage>, String> {
    let answer = try_call(
        moto,
        "ReceiveMessage",
        &json!({"QueueUrl": queue_url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 0,
            "MessageAttributeNames": ["All"], "MessageSystemAttributeNames": ["All"], "AttributeNames": ["All"]}),
    )?;
    let messages = answer["Messages"].as_array().cloned().unwrap_or_default();
    Ok(messages
        .iter()
        .map(|m| {
            let attributes = m["MessageAttributes"]
                .as_object()
                .map(|a| {
                    a.iter()
                        .map(|(name, v)| (name.clone(), v["StringValue"].as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            let system = |name: &str| m["Attributes"][name].as_str().map(str::to_owned);
            SqsMessage {
                body: m["Body"].as_str().unwrap_or_default().to_owned(),
                attributes,
                group_id: system("MessageGroupId"),
                deduplication_id: system("MessageDeduplicationId"),
            }
        })
        .collect())
}
