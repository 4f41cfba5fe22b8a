//! An OTLP/HTTP trace receiver for tests: what a collector is to eg, on a free loopback
//! port, stopped when dropped.
//!
//! No OpenTelemetry Collector or Jaeger can be installed here, so the harness receives
//! what eg exports itself: `POST /v1/traces` with a protobuf `ExportTraceServiceRequest`,
//! decoded with the official OTLP definitions (`opentelemetry-proto`, prost), as a
//! collector would. Every span received is kept, flattened to what a test reads
//! ([`ReceivedSpan`]). Plain HTTP/1.1 with keep-alive; only uncompressed bodies (eg sends
//! none unless `OTEL_EXPORTER_OTLP_COMPRESSION` asks).

use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The path OTLP/HTTP trace exports are sent to.
pub const TRACES_PATH: &str = "/v1/traces";
/// The largest request head or body read (a test's exports are far smaller).
const MAX_BYTES: usize = 16 * 1024 * 1024;

/// One span as received, ids in lower-case hex.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// The resource's `service.name`.
    pub service: String,
    /// Attributes, each value written as text (strings as they are).
    pub attributes: Vec<(String, String)>,
    /// The names of the span's events.
    pub events: Vec<String>,
    /// The span's status is `ERROR`.
    pub error: bool,
}

impl ReceivedSpan {
    /// The attribute called `key`, as text.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// The receiver; stops when dropped.
pub struct OtlpReceiver {
    port: u16,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    task: JoinHandle<()>,
}

impl OtlpReceiver {
    /// Starts it on a free port of 127.0.0.1 (inside a tokio runtime).
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the OTLP receiver");
        let port = listener.local_addr().expect("OTLP receiver address").port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, kept.clone()));
            }
        });
        Self { port, spans, task }
    }

    /// What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to for eg to export here.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().expect("spans lock").clone()
    }

    /// How many spans were received so far.
    pub fn span_count(&self) -> usize {
        self.spans.lock().expect("spans lock").len()
    }

    /// The spans of trace `trace_id` received so far.
    pub fn trace(&self, trace_id: &str) -> Vec<ReceivedSpan> {
        self.spans().into_iter().filter(|s| s.trace_id == trace_id).collect()
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves one connection's requests until it closes or sends something unreadable.
async fn serve(mut stream: TcpStream, spans: Arc<Mutex<Vec<ReceivedSpan>>>) {
    let mut buffer = Vec::new();
    while let Some(Request { path, body, close }) = read_request(&mut stream, &mut buffer).await {
        let (status, answer) = if path != TRACES_PATH {
            ("404 Not Found", Vec::new())
        } else {
            match ExportTraceServiceRequest::decode(body.as_slice()) {
                Ok(request) => {
                    spans.lock().expect("spans lock").extend(flatten(request));
                    ("200 OK", ExportTraceServiceResponse::default().encode_to_vec())
                }
                Err(_) => ("400 Bad Request", Vec::new()),
            }
        };
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        );
        if stream.write_all(head.as_bytes()).await.is_err() || stream.write_all(&answer).await.is_err() || close {
            return;
        }
    }
}

/// One request read: its path, its body, and whether the client asked to close after it.
struct Request {
    path: String,
    body: Vec<u8>,
    close: bool,
}

/// Reads one request from the connection; `None` when it closed or is not an HTTP/1.1
/// request with a `content-length`. `buffer` keeps bytes read past it.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Request> {
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if buffer.len() > MAX_BYTES || !read_more(stream, buffer).await {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let path = head.split_whitespace().nth(1)?.to_owned();
    let header = |wanted: &str| {
        head.lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case(wanted))
            .map(|(_, value)| value.trim().to_owned())
    };
    let length: usize = header("content-length")?.parse().ok()?;
    let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    if length > MAX_BYTES {
        return None;
    }
    while buffer.len() < head_end + length {
        if !read_more(stream, buffer).await {
            return None;
        }
    }
    let body = buffer[head_end..head_end + length].to_vec();
    buffer.drain(..head_end + length);
    Some(Request { path, body, close })
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buffer.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

/// The spans of an export request, each with its resource's service name.
fn flatten(request: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .as_ref()
            .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
            .map(|kv| text(kv.value.as_ref()))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                out.push(ReceivedSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name,
                    service: service.clone(),
                    attributes: span.attributes.iter().map(pair).collect(),
                    events: span.events.into_iter().map(|e| e.name).collect(),
                    // STATUS_CODE_ERROR is 2 in the OTLP definitions.
                    error: span.status.is_some_and(|s| s.code == 2),
                });
            }
        }
    }
    out
}

fn pair(kv: &KeyValue) -> (String, String) {
    (kv.key.clone(), text(kv.value.as_ref()))
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};

    fn string(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.into())),
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn an_exported_span_is_decoded_and_kept() {
        let receiver = OtlpReceiver::start().await;
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![string("service.name", "eg-sender")],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans: vec![Span {
                        trace_id: vec![0xab; 16],
                        span_id: vec![0x01; 8],
                        name: "attempt".into(),
                        attributes: vec![string("eg.outcome", "Busy")],
                        status: Some(Status {
                            code: 2,
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let port = receiver.port;
        let post = move |body: Vec<u8>| {
            tokio::task::spawn_blocking(move || {
                let headers = [("content-type", "application/x-protobuf")];
                crate::http::request(port, "POST", TRACES_PATH, &headers, &body)
                    .unwrap()
                    .status
            })
        };
        for _ in 0..2 {
            assert_eq!(post(request.encode_to_vec()).await.unwrap(), 200);
        }
        let spans = receiver.trace(&"ab".repeat(16));
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].name, "attempt");
        assert_eq!(spans[0].service, "eg-sender");
        assert_eq!(spans[0].span_id, "0101010101010101");
        assert_eq!(spans[0].parent_span_id, "");
        assert_eq!(spans[0].attribute("eg.outcome"), Some("Busy"));
        assert!(spans[0].error);

        let garbage = post(vec![0xff, 0xff, 0xff]).await.unwrap();
        assert_eq!(garbage, 400, "what is not OTLP is refused, not kept");
        assert_eq!(receiver.spans().len(), 2);
    }
}
