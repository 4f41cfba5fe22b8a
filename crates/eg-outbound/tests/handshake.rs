//! Validation handshakes (behaviour.md#protecting-endpoints-and-the-system) against real
//! receivers on 127.0.0.1.

mod common;

use axum::Router;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{options, post};
use common::{client, guarded_client, loopback_client, spawn};
use eg_core::AttemptOutcome;
use eg_core::address::{AddressCategory, AddressPolicy};
use eg_outbound::{Blocked, Handshake, Rate, cloudevents_handshake, event_grid_handshake};
use serde_json::{Value, json};
use std::num::NonZeroU32;
use std::time::Duration;

const CODE: &str = "512d38b6-c7b8-40c8-89fe-f46f9e9622b6";
const QUERY_SECRET: &str = "QUERYSECRET";

/// How a test receiver answers a validation request carrying `code`.
type Answer = fn(&str) -> Response;

fn validation_event() -> String {
    json!([{
        "id": "2d1781af-3a4c-4d7c-bd0c-e34b19da4e66",
        "topic": "/topics/orders",
        "subject": "",
        "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent",
        "eventTime": "2024-01-01T00:00:00Z",
        "metadataVersion": "1",
        "dataVersion": "1",
        "data": {"validationCode": CODE, "validationUrl": "https://eg.example/validate?id=1"}
    }])
    .to_string()
}

/// A receiver that checks the handshake request and answers with `answer(code)`.
async fn event_grid_receiver(answer: Answer) -> common::Receiver {
    spawn(Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: String| async move {
            let right_headers = headers
                .get("aeg-event-type")
                .is_some_and(|v| v == "SubscriptionValidation")
                && headers
                    .get(header::CONTENT_TYPE)
                    .is_some_and(|v| v == "application/json; charset=utf-8");
            let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            match parsed[0]["data"]["validationCode"].as_str() {
                Some(code) if right_headers => answer(code),
                _ => StatusCode::BAD_REQUEST.into_response(),
            }
        }),
    ))
    .await
}

async fn event_grid(receiver: &common::Receiver) -> Handshake {
    let url = receiver.url(&format!("/hook?code={QUERY_SECRET}"));
    event_grid_handshake(&loopback_client(), &url, validation_event(), CODE, 4096).await
}

/// The reason of a refusal, checked to be user-facing: no URL, no query secret.
fn reason(handshake: Handshake) -> String {
    match handshake {
        Handshake::Refused { reason } => {
            assert!(
                !reason.contains(QUERY_SECRET) && !reason.contains("127.0.0.1"),
                "{reason}"
            );
            reason
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn event_grid_consent_is_200_echoing_the_code() {
    let receiver = event_grid_receiver(|code| axum::Json(json!({"validationResponse": code})).into_response()).await;
    assert_eq!(event_grid(&receiver).await, Handshake::Accepted { allowed_rate: None });
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, Method::POST);
}

#[tokio::test]
async fn event_grid_code_and_property_name_compare_ignoring_case() {
    let receiver = event_grid_receiver(|code| {
        axum::Json(json!({"ValidationResponse": code.to_ascii_uppercase(), "other": 1})).into_response()
    })
    .await;
    assert_eq!(event_grid(&receiver).await, Handshake::Accepted { allowed_rate: None });
}

#[tokio::test]
async fn event_grid_wrong_code_is_refused() {
    let receiver = event_grid_receiver(|_| {
        axum::Json(json!({"validationResponse": "00000000-0000-0000-0000-000000000000"})).into_response()
    })
    .await;
    let reason = reason(event_grid(&receiver).await);
    assert!(reason.contains("does not match"), "{reason}");
    assert!(
        reason.contains("200 OK with the body `{\"validationResponse\":\"00000000-0000-0000-0000-000000000000\"}`"),
        "the endpoint's answer is quoted: {reason}"
    );
}

/// An endpoint that echoes what it was sent (a request bin) must not hand the code,
/// or its own URL, to whoever reads the reason.
#[tokio::test]
async fn event_grid_reasons_quote_the_answer_without_code_or_url() {
    let receiver = spawn(Router::new().route(
        "/hook",
        post(|uri: axum::http::Uri, body: String| async move {
            (
                StatusCode::NOT_FOUND,
                format!("no route for POST {uri}\n\u{1b}[0m sent: {body}"),
            )
        }),
    ))
    .await;
    let reason = reason(event_grid(&receiver).await);
    assert!(
        reason.contains(
            "answered 404 Not Found with the body `no route for POST <endpoint path>?<endpoint query> [0m sent: [{"
        ),
        "{reason}"
    );
    assert!(!reason.to_ascii_lowercase().contains(CODE), "{reason}");
    assert!(reason.contains("<validationCode>"), "{reason}");
    assert!(!reason.contains('\u{1b}') && !reason.contains('\n'), "{reason}");
    assert!(reason.contains('…'), "a long answer is cut short: {reason}");
}

#[tokio::test]
async fn event_grid_to_a_closed_port_is_unreachable_without_a_connection() {
    let closed = eg_testkit::RefusingPort::new();
    let url = format!("http://127.0.0.1:{}/hook", closed.port());
    let handshake = event_grid_handshake(&loopback_client(), &url, validation_event(), CODE, 4096).await;
    match handshake {
        Handshake::Unreachable {
            outcome,
            cause,
            connected,
        } => {
            assert_eq!(outcome, AttemptOutcome::SocketError);
            assert!(cause.contains("refused"), "{cause}");
            assert!(!connected);
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn event_grid_answers_without_consent_are_refused() {
    let cases: [(Answer, &str); 6] = [
        (|_| StatusCode::OK.into_response(), "empty body"),
        (|_| (StatusCode::OK, "validated!").into_response(), "not a JSON object"),
        (
            |_| axum::Json(json!([{"validationResponse": "x"}])).into_response(),
            "not a JSON object",
        ),
        (
            |_| axum::Json(json!({"status": "ok"})).into_response(),
            "no validationResponse",
        ),
        (
            |_| axum::Json(json!({"validationResponse": 42})).into_response(),
            "not a string",
        ),
        (
            |code| (StatusCode::ACCEPTED, axum::Json(json!({"validationResponse": code}))).into_response(),
            "answered 202 Accepted",
        ),
    ];
    for (answer, expected) in cases {
        let receiver = event_grid_receiver(answer).await;
        let reason = reason(event_grid(&receiver).await);
        assert!(reason.contains(expected), "expected {expected:?} in {reason:?}");
        assert!(reason.contains("validationResponse"), "says what to do: {reason}");
    }
}

#[tokio::test]
async fn event_grid_body_is_read_within_the_bound() {
    let receiver = event_grid_receiver(|code| {
        let padding = "x".repeat(10_000);
        axum::Json(json!({"validationResponse": code, "padding": padding})).into_response()
    })
    .await;
    let url = receiver.url("/hook");
    let small = event_grid_handshake(&loopback_client(), &url, validation_event(), CODE, 4096).await;
    assert!(reason(small).contains("longer than 4096 bytes"));
    let large = event_grid_handshake(&loopback_client(), &url, validation_event(), CODE, 64 * 1024).await;
    assert_eq!(large, Handshake::Accepted { allowed_rate: None });
}

#[tokio::test]
async fn event_grid_redirect_is_refused_not_followed() {
    let receiver = spawn(
        Router::new()
            .route(
                "/hook",
                post(|| async { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, "/other")]) }),
            )
            .route("/other", post(|| async { StatusCode::OK })),
    )
    .await;
    let reason = reason(event_grid(&receiver).await);
    assert!(
        reason.contains("307") && reason.contains("redirects are not followed"),
        "{reason}"
    );
    assert_eq!(receiver.seen().len(), 1);
}

#[tokio::test]
async fn event_grid_timeout_is_unreachable() {
    let slow = spawn(Router::new().route(
        "/hook",
        post(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            StatusCode::OK
        }),
    ))
    .await;
    let quick = client(AddressPolicy::parse(["127.0.0.1"]).unwrap(), Duration::from_millis(300));
    let handshake = event_grid_handshake(&quick, &slow.url("/hook"), validation_event(), CODE, 4096).await;
    assert!(
        matches!(
            handshake,
            Handshake::Unreachable {
                outcome: AttemptOutcome::TimedOut,
                connected: true,
                ..
            }
        ),
        "{handshake:?}"
    );
}

#[tokio::test]
async fn handshakes_to_forbidden_addresses_send_nothing() {
    let receiver = event_grid_receiver(|code| axum::Json(json!({"validationResponse": code})).into_response()).await;
    let by_literal = event_grid_handshake(
        &guarded_client(),
        &receiver.url("/hook"),
        validation_event(),
        CODE,
        4096,
    )
    .await;
    let by_name = event_grid_handshake(
        &guarded_client(),
        &format!("http://localhost:{}/hook", receiver.port()),
        validation_event(),
        CODE,
        4096,
    )
    .await;
    let by_options = cloudevents_handshake(&guarded_client(), &receiver.url("/hook"), "eg.example", None).await;
    for handshake in [by_literal, by_name, by_options] {
        match handshake {
            Handshake::AddressNotAllowed(Blocked::Address(r)) => assert_eq!(r.category(), AddressCategory::Loopback),
            other => panic!("expected AddressNotAllowed, got {other:?}"),
        }
    }
    receiver.assert_untouched_so_far().await;
}

const ORIGIN: &str = "eg.example.net";

/// A CloudEvents receiver answering OPTIONS with `status` and `headers`.
async fn cloudevents_receiver(
    status: StatusCode,
    headers: &'static [(&'static str, &'static str)],
) -> common::Receiver {
    spawn(Router::new().route(
        "/ce",
        options(move || async move {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                map.append(HeaderName::from_static(name), HeaderValue::from_static(value));
            }
            (status, map)
        }),
    ))
    .await
}

async fn cloudevents(receiver: &common::Receiver, rate: Option<Rate>) -> Handshake {
    let url = receiver.url(&format!("/ce?code={QUERY_SECRET}"));
    cloudevents_handshake(&loopback_client(), &url, ORIGIN, rate).await
}

fn per_minute(n: u32) -> Option<Rate> {
    NonZeroU32::new(n).map(Rate::PerMinute)
}

#[tokio::test]
async fn cloudevents_consent_echoes_the_origin() {
    let receiver = cloudevents_receiver(
        StatusCode::OK,
        &[("webhook-allowed-origin", ORIGIN), ("webhook-allowed-rate", "120")],
    )
    .await;
    assert_eq!(
        cloudevents(&receiver, per_minute(100)).await,
        Handshake::Accepted {
            allowed_rate: per_minute(120)
        }
    );
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, Method::OPTIONS);
    assert_eq!(seen[0].headers["webhook-request-origin"], ORIGIN);
    assert_eq!(seen[0].headers["webhook-request-rate"], "100");

    // Without a requested rate the header is not sent.
    cloudevents(&receiver, None).await;
    assert!(receiver.seen()[1].headers.get("webhook-request-rate").is_none());
}

#[tokio::test]
async fn cloudevents_star_and_204_are_consent() {
    let receiver = cloudevents_receiver(
        StatusCode::NO_CONTENT,
        &[("webhook-allowed-origin", "*"), ("webhook-allowed-rate", "*")],
    )
    .await;
    assert_eq!(
        cloudevents(&receiver, None).await,
        Handshake::Accepted {
            allowed_rate: Some(Rate::Unlimited)
        }
    );
    // Origin compared as a DNS name; a malformed rate is reported as none.
    let receiver = cloudevents_receiver(
        StatusCode::OK,
        &[
            ("webhook-allowed-origin", "EG.Example.NET"),
            ("webhook-allowed-rate", "lots"),
        ],
    )
    .await;
    assert_eq!(
        cloudevents(&receiver, None).await,
        Handshake::Accepted { allowed_rate: None }
    );
}

#[tokio::test]
async fn cloudevents_without_consent_is_refused() {
    let receiver = cloudevents_receiver(StatusCode::OK, &[]).await;
    assert!(reason(cloudevents(&receiver, None).await).contains("no WebHook-Allowed-Origin header"));

    let receiver = cloudevents_receiver(StatusCode::OK, &[("webhook-allowed-origin", "someone-else.example")]).await;
    let why = reason(cloudevents(&receiver, None).await);
    assert!(
        why.contains("does not name this origin") && why.contains(ORIGIN),
        "{why}"
    );

    let receiver = cloudevents_receiver(StatusCode::NOT_FOUND, &[("webhook-allowed-origin", "*")]).await;
    assert!(reason(cloudevents(&receiver, None).await).contains("404 Not Found"));

    // An endpoint that does not handle OPTIONS at all (axum answers 405).
    let receiver = spawn(Router::new().route("/ce", post(|| async { StatusCode::OK }))).await;
    assert!(reason(cloudevents(&receiver, None).await).contains("405"));
}
