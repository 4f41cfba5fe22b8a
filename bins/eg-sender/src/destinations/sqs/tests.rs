//! The SQS client against a stand-in that answers one canned request: the per-entry
//! answers moto never gives (it fails entries only for `DelaySeconds` over 900), and
//! what is decided before any request. moto itself is in the system tests.

use super::*;
use crate::destinations::storage_queue::tests::queue_service;
use crate::test_subscriptions::{batch_of, subscription_with};
use eg_core::subscription::Subscription;
use eg_runtime::settings::Secret;
use serde_json::json;

fn client(endpoint: &str, max_message_bytes: usize) -> Sqs {
    let settings = SqsConnectionSettings {
        region: "eu-west-1".into(),
        endpoint_url: endpoint.into(),
        access_key_id: "AKIDTEST".into(),
        secret_access_key: Secret::new("test-secret"),
        max_message_bytes,
        ..SqsConnectionSettings::default()
    };
    Sqs::new(
        &BTreeMap::from([("local".to_owned(), settings)]),
        Duration::from_secs(5),
    )
    .unwrap()
}

fn subscription(queue: &str) -> Subscription {
    subscription_with(json!({"endpointType": "AmazonSQS", "properties": {
        "connection": "local", "queueUrl": format!("http://127.0.0.1:1/123456789012/{queue}"),
        "deliveryAttributeMappings": [{"name": "team", "type": "Static", "properties": {"value": "billing"}}]}}))
}

/// SQS's answer with `status` and the JSON `body` (leaked: the stand-in wants it static).
fn answer(status: &str, body: Value) -> &'static str {
    let body = body.to_string();
    let text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    Box::leak(text.into_boxed_str())
}

fn event(id: &str) -> String {
    json!({"id": id, "subject": "/orders/1", "eventType": "Created", "dataVersion": "1", "data": {}}).to_string()
}

#[tokio::test]
async fn concurrent_attempts_share_one_request_and_each_gets_its_own_entry_answer() {
    let (endpoint, request) = queue_service(answer(
        "200 OK",
        json!({"Successful": [{"Id": "0", "MessageId": "m-0", "MD5OfMessageBody": "x"}],
            "Failed": [{"Id": "1", "SenderFault": true, "Code": "InvalidParameterValue", "Message": "bad"}]}),
    ))
    .await;
    let sqs = client(&endpoint, 1024 * 1024);
    let queue = subscription("orders");
    let (a, b) = (event("a"), event("b"));
    let (first, second) = tokio::join!(
        sqs.send_own(batch_of(&queue, &a, Some("1")), None),
        sqs.send_own(batch_of(&queue, &b, Some("1")), None),
    );
    assert_eq!(first.outcome, AttemptOutcome::Stored);
    assert_eq!(second.outcome, refused(OutcomeName::BadRequest, 400));
    assert_eq!(second.error.as_deref(), Some("SQS: InvalidParameterValue: bad"));

    let (head, body) = request.await.unwrap();
    let head = head.to_ascii_lowercase();
    assert!(head.contains("x-amz-target: amazonsqs.sendmessagebatch"), "{head}");
    assert!(
        head.contains("authorization: aws4-hmac-sha256 credential=akidtest/") && head.contains("/eu-west-1/sqs/"),
        "{head}"
    );
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["QueueUrl"], "http://127.0.0.1:1/123456789012/orders");
    let entries = body["Entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "one request for both attempts");
    assert_eq!(entries[0]["MessageBody"], a);
    let attributes = &entries[0]["MessageAttributes"];
    assert_eq!(
        attributes["team"],
        json!({"DataType": "String", "StringValue": "billing"})
    );
    assert_eq!(attributes["aeg-delivery-count"]["StringValue"], "3");
    assert_eq!(attributes["aeg-data-version"]["StringValue"], "1");
    assert!(
        attributes.get("aeg-event-type").is_none(),
        "constant headers are left out"
    );
    assert!(entries[0].get("MessageGroupId").is_none(), "a standard queue");
}

#[tokio::test]
async fn a_request_refused_whole_answers_every_attempt_in_it() {
    let (endpoint, _request) = queue_service(answer(
        "400 Bad Request",
        json!({"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "The specified queue does not exist."}),
    ))
    .await;
    let sqs = client(&endpoint, 1024 * 1024);
    let fifo = subscription("orders.fifo");
    let (a, b) = (event("a"), event("b"));
    let (first, second) = tokio::join!(
        sqs.send_own(batch_of(&fifo, &a, Some("1")), None),
        sqs.send_own(batch_of(&fifo, &b, Some("1")), None),
    );
    for sent in [first, second] {
        assert_eq!(sent.outcome, refused(OutcomeName::NotFound, 404));
        assert_eq!(
            sent.error.as_deref(),
            Some("SQS: QueueDoesNotExist: The specified queue does not exist.")
        );
    }
}

#[tokio::test]
async fn a_message_over_the_limit_is_refused_before_sending_and_fifo_entries_carry_their_ids() {
    // Nothing listens at this endpoint: a request would end as SocketError.
    let sqs = client("http://127.0.0.1:1", 1024);
    let queue = subscription("orders");
    let big = json!({"id": "big", "subject": "s", "data": {"pad": "x".repeat(1024)}}).to_string();
    let sent = sqs.send_own(batch_of(&queue, &big, Some("1")), None).await;
    assert_eq!(sent.outcome, refused(OutcomeName::PayloadTooLarge, 413));
    assert!(sent.error.unwrap().contains("sends at most 1024"));

    let fifo = subscription("orders.fifo");
    let subscription = &fifo;
    let batch = batch_of(subscription, &event("e-1"), Some("1"));
    let Some(eg_core::destination::Target::AmazonSqs(target)) = subscription.target() else {
        panic!()
    };
    let message = messages(&batch).unwrap().remove(0);
    let entry = entry_of(target, &batch, message);
    let fifo_ids = entry.fifo.unwrap();
    assert_eq!(
        (fifo_ids.group.as_str(), fifo_ids.deduplication.as_str()),
        ("/orders/1", "e-1")
    );
}

/// A stand-in SQS that answers every request it gets with all its entries `Successful`
/// (closing each connection), and reports each request's entry count.
async fn accepting_sqs() -> (String, tokio::sync::mpsc::UnboundedReceiver<usize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (counts, received) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counts = counts.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = vec![0u8; 64 * 1024];
                let body = loop {
                    let n = socket.read(&mut buf).await.unwrap();
                    assert!(n > 0, "the connection closed before a whole request came");
                    request.extend_from_slice(&buf[..n]);
                    let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break request[end + 4..end + 4 + length].to_vec();
                    }
                };
                let body: Value = serde_json::from_slice(&body).unwrap();
                let ids: Vec<Value> = body["Entries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| json!({"Id": e["Id"], "MessageId": "m", "MD5OfMessageBody": "x"}))
                    .collect();
                counts.send(ids.len()).unwrap();
                let answer = json!({"Successful": ids, "Failed": []}).to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{answer}",
                    answer.len()
                );
                socket.write_all(response.as_bytes()).await.unwrap();
            });
        }
    });
    (endpoint, received)
}

#[tokio::test]
async fn a_message_that_would_take_a_request_over_one_mib_opens_the_next_request() {
    let (endpoint, mut counts) = accepting_sqs().await;
    let sqs = client(&endpoint, 1024 * 1024);
    let queue = subscription("orders");
    let big = |id: &str| json!({"id": id, "subject": "s", "data": {"pad": "x".repeat(400 * 1024)}}).to_string();
    let events = [big("a"), big("b"), big("c")];
    let (a, b, c) = tokio::join!(
        sqs.send_own(batch_of(&queue, &events[0], Some("1")), None),
        sqs.send_own(batch_of(&queue, &events[1], Some("1")), None),
        sqs.send_own(batch_of(&queue, &events[2], Some("1")), None),
    );
    for sent in [a, b, c] {
        assert_eq!(sent.outcome, AttemptOutcome::Stored, "{:?}", sent.error);
    }
    // Each request was counted before it was answered.
    let mut sizes = Vec::new();
    while let Ok(size) = counts.try_recv() {
        sizes.push(size);
    }
    sizes.sort_unstable();
    assert_eq!(
        sizes,
        [1, 2],
        "two of 400 KiB fit in 1 MiB, the third waits for the next"
    );
}

#[test]
fn the_trace_context_goes_along_only_where_the_attributes_leave_room() {
    let named =
        |names: &[&str]| -> Vec<(String, String)> { names.iter().map(|n| (n.to_string(), "v".to_owned())).collect() };
    let mut roomy = named(&["aeg-subscription-name", "traceparent", "tracestate"]);
    super::make_room(&mut roomy);
    assert_eq!(roomy.len(), 3, "nothing dropped when there is room");

    let properties: Vec<String> = (0..7).map(|i| format!("p{i}")).collect();
    let mut full: Vec<&str> = vec!["aeg-subscription-name", "aeg-delivery-count", "aeg-data-version"];
    full.extend(properties.iter().map(String::as_str));
    full.extend(["traceparent", "tracestate"]);
    let mut crowded = named(&full);
    super::make_room(&mut crowded);
    let names: Vec<&str> = crowded.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 10);
    assert!(
        !names.contains(&"traceparent") && !names.contains(&"tracestate"),
        "{names:?}"
    );
    assert!(names.contains(&"p6"), "delivery properties are kept: {names:?}");

    // Six delivery properties: room for traceparent once tracestate is gone.
    let six: Vec<&str> = full.iter().copied().filter(|n| *n != "p6").collect();
    let mut one_over = named(&six);
    super::make_room(&mut one_over);
    let names: Vec<&str> = one_over.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 10);
    assert!(
        names.contains(&"traceparent") && !names.contains(&"tracestate"),
        "{names:?}"
    );
}
