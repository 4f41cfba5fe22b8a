//! Traces (traces.md): an event published in a W3C trace context is followed through
//! eg into that trace — the publish span, every attempt, and the `traceparent` the
//! endpoint receives — as an OTLP/HTTP receiver decoding the official protobuf
//! definitions sees it (`eg_testkit::otlp_receiver`, standing in for a collector) — and
//! a broker message, read back from NATS JetStream, carrying its attempt's context.

use async_nats::jetstream::{self, stream};
use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, System, dead_letter_to, event, eventually, subscription,
};
use eg_testkit::otlp_receiver::ReceivedSpan;
use eg_testkit::{Nats, OtlpReceiver};
use serde_json::{Value, json};

/// The publisher's trace and span (sampled).
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PUBLISHER_SPAN: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{PUBLISHER_SPAN}-01")
}

/// A system exporting to `collector`, with its batch processor exporting every 100 ms
/// and `extra` variables on top.
async fn traced_system(collector: &OtlpReceiver, extra: &[(&str, &str)]) -> System {
    let mut options = Options::default()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint())
        .env("OTEL_BSP_SCHEDULE_DELAY", "100");
    for (key, value) in extra {
        options = options.env(key, value);
    }
    System::start(options).await
}

/// Publishes `events` to `topic` with `headers` on the request; insists on `200`.
async fn publish_with(system: &System, topic: &str, events: &Value, headers: &[(&str, &str)]) {
    let (http, url, key) = system.publisher(topic);
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("aeg-sas-key", key)
        .body(events.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let answer = request.send().await.unwrap();
    assert_eq!(
        answer.status(),
        200,
        "publish to {topic}: {}",
        answer.text().await.unwrap()
    );
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|s| s.name == name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_published_in_a_trace_is_followed_to_its_endpoint_through_a_retry() {
    let collector = OtlpReceiver::start().await;
    let system = traced_system(&collector, &[]).await;
    let endpoint = Receiver::start(Behaviour::FailFirst {
        failures: 1,
        status: 500,
    })
    .await;
    system.create_topic("traced").await;
    system
        .create_subscription("traced", "Sub", subscription(endpoint.url(), json!({})))
        .await;

    let events = json!([event("t-1", "Test.Happened", "/t/1", json!(1))]);
    publish_with(
        &system,
        "traced",
        &events,
        &[("traceparent", &traceparent()), ("tracestate", "vendor=x")],
    )
    .await;
    let requests = endpoint.wait_for(2, DEADLINE).await;

    // One trace: the publish span under the publisher's span, and two attempts under it.
    let spans = eventually(DEADLINE, "the publish span and two attempt spans", || async {
        let spans = collector.trace(TRACE_ID);
        (named(&spans, "publish").len() == 1 && named(&spans, "attempt").len() == 2).then_some(spans)
    })
    .await;
    let publish = named(&spans, "publish")[0];
    assert_eq!(
        publish.parent_span_id, PUBLISHER_SPAN,
        "the publisher's span is its parent"
    );
    assert_eq!(publish.service, "eg-ingress");
    assert_eq!(publish.attribute("eg.topic"), Some("traced"));
    let mut attempts = named(&spans, "attempt");
    attempts.sort_by_key(|s| s.attribute("eg.attempt").map(str::to_owned));
    let (failed, retried) = (attempts[0], attempts[1]);
    for attempt in [failed, retried] {
        assert_eq!(attempt.parent_span_id, publish.span_id, "attempts continue the publish");
        assert_eq!(attempt.service, "eg-sender");
        assert_eq!(attempt.attribute("eg.subscription"), Some("sub"));
        let identity = attempt.attribute("eg.endpoint").unwrap();
        assert!(
            !endpoint.url().contains(identity) && !identity.contains("127.0.0.1"),
            "never the URL"
        );
    }
    assert_eq!(failed.attribute("eg.attempt"), Some("1"));
    assert_eq!(failed.attribute("http.response.status_code"), Some("500"));
    assert!(failed.error, "a failed attempt's span is an error");
    assert!(
        failed.events.iter().any(|e| e == "retry scheduled"),
        "{:?}",
        failed.events
    );
    assert_eq!(retried.attribute("eg.attempt"), Some("2"));
    assert_eq!(retried.attribute("http.response.status_code"), Some("200"));
    assert_eq!(retried.attribute("eg.outcome"), Some("Succeeded"));
    assert!(!retried.error);

    // Each request the endpoint got carries its attempt's span as parent, in this trace.
    let mut sent: Vec<&str> = requests.iter().map(|r| r.header("traceparent").unwrap()).collect();
    let mut expected = vec![
        format!("00-{TRACE_ID}-{}-01", failed.span_id),
        format!("00-{TRACE_ID}-{}-01", retried.span_id),
    ];
    sent.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sent, expected);
    assert!(requests.iter().all(|r| r.header("tracestate") == Some("vendor=x")));
}

/// With a parent-based sampler that samples no new trace, an event published without a
/// context (or with a malformed one, which is ignored, not refused) produces no span and
/// is delivered without a `traceparent`; one published in a sampled trace still is traced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_without_a_context_is_not_traced_when_nothing_samples_it() {
    let collector = OtlpReceiver::start().await;
    let system = traced_system(&collector, &[("OTEL_TRACES_SAMPLER", "parentbased_always_off")]).await;
    let endpoint = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("quiet").await;
    system
        .create_subscription("quiet", "Sub", subscription(endpoint.url(), json!({})))
        .await;

    publish_with(&system, "quiet", &json!([event("plain", "T", "/p", json!(1))]), &[]).await;
    let malformed = [("traceparent", "00-not-a-trace-01")];
    publish_with(
        &system,
        "quiet",
        &json!([event("garbled", "T", "/g", json!(1))]),
        &malformed,
    )
    .await;
    let untraced = endpoint.wait_for(2, DEADLINE).await;
    assert!(
        untraced.iter().all(|r| r.header("traceparent").is_none()),
        "{untraced:?}"
    );

    // A process exports its spans in the order they end: once the traced event's publish
    // and attempt spans are received, anything the first two events made would have been.
    let events = json!([event("traced", "T", "/t", json!(1))]);
    publish_with(&system, "quiet", &events, &[("traceparent", &traceparent())]).await;
    endpoint.wait_for(3, DEADLINE).await;
    eventually(DEADLINE, "the traced event's publish and attempt spans", || async {
        let spans = collector.trace(TRACE_ID);
        (!named(&spans, "publish").is_empty() && !named(&spans, "attempt").is_empty()).then_some(())
    })
    .await;
    let strays: Vec<ReceivedSpan> = collector
        .spans()
        .into_iter()
        .filter(|s| s.trace_id != TRACE_ID)
        .collect();
    assert!(strays.is_empty(), "spans of untraced events: {strays:?}");
}

/// A broker destination's message carries the attempt's context as headers, as a
/// webhook request does: the message JetStream stored names the attempt span, which the
/// receiver got in the publisher's trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_message_carries_the_context_of_the_attempt_that_published_it() {
    let collector = OtlpReceiver::start().await;
    let server = Nats::start();
    let client = async_nats::connect(server.url()).await.unwrap();
    let stream = jetstream::new(client)
        .get_or_create_stream(stream::Config {
            name: "TRACED".into(),
            subjects: vec!["traced.>".into()],
            ..stream::Config::default()
        })
        .await
        .unwrap();
    let system = traced_system(&collector, &[("EG__BROKERS__NATS__EVENTS__URL", &server.url())]).await;
    system.create_topic("traced").await;
    let destination = json!({"endpointType": "NatsJetStream",
        "properties": {"connection": "events", "subject": "traced.orders"}});
    system
        .create_subscription("traced", "Audit", json!({"properties": {"destination": destination}}))
        .await;

    let events = json!([event("n-1", "Order.Created", "/o/1", json!(1))]);
    publish_with(
        &system,
        "traced",
        &events,
        &[("traceparent", &traceparent()), ("tracestate", "vendor=x")],
    )
    .await;
    let message = eventually(DEADLINE, "the message in the stream", || async {
        stream.get_raw_message(1).await.ok()
    })
    .await;
    let header = |name: &str| message.headers.get(name).map(|v| v.as_str().to_owned());

    let spans = eventually(DEADLINE, "the attempt span", || async {
        let spans = collector.trace(TRACE_ID);
        (!named(&spans, "attempt").is_empty()).then_some(spans)
    })
    .await;
    let attempt = named(&spans, "attempt")[0];
    assert_eq!(attempt.attribute("eg.subscription"), Some("audit"));
    assert_eq!(attempt.attribute("eg.outcome"), Some("Succeeded"));
    assert_eq!(
        header("traceparent"),
        Some(format!("00-{TRACE_ID}-{}-01", attempt.span_id)),
        "the message names its attempt's span in the publisher's trace"
    );
    assert_eq!(header("tracestate").as_deref(), Some("vendor=x"));
}

/// The dead-letter tier's write of a record is a span of the event's trace, under the
/// context stored with it (the publish span), naming the store and the outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dead_letter_write_is_a_span_of_the_events_trace() {
    let collector = OtlpReceiver::start().await;
    let system = traced_system(&collector, &[]).await;
    let endpoint = Receiver::start(Behaviour::Status(400)).await;
    system.create_topic("doomed").await;
    let extra = json!({"deadLetterDestination": dead_letter_to("dead")});
    system
        .create_subscription("doomed", "Sub", subscription(endpoint.url(), extra))
        .await;

    let events = json!([event("d-1", "T", "/d", json!(1))]);
    publish_with(&system, "doomed", &events, &[("traceparent", &traceparent())]).await;
    let spans = eventually(DEADLINE * 2, "the publish and dead-letter write spans", || async {
        let spans = collector.trace(TRACE_ID);
        (!named(&spans, "publish").is_empty() && !named(&spans, "dead-letter write").is_empty()).then_some(spans)
    })
    .await;
    let publish = named(&spans, "publish")[0];
    let write = named(&spans, "dead-letter write")[0];
    assert_eq!(
        write.parent_span_id, publish.span_id,
        "the stored context is its parent"
    );
    assert_eq!(write.service, "eg-deadletter");
    assert_eq!(write.attribute("eg.store"), Some("local"));
    assert_eq!(write.attribute("eg.subscription"), Some("sub"));
    assert_eq!(write.attribute("eg.records"), Some("1"));
    assert_eq!(write.attribute("eg.outcome"), Some("written"));
    assert!(!write.error);
}
