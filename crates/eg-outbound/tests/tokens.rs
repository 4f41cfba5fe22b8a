//! Delivery tokens (`eg_outbound::Tokens`) against a token endpoint on 127.0.0.1 that
//! counts its requests: one request for many deliveries at once, a forgotten token asked
//! for again, a failing provider left alone for a while.

#![allow(clippy::unwrap_used)]

use axum::Router;
use axum::routing::post;
use eg_core::identity::TokenTarget;
use eg_outbound::{Credential, RequestResult, TokenError, TokenSource, Tokens};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A token endpoint answering `status` with a fresh token each time (after a short
/// pause, so concurrent callers overlap); returns its URL and request count.
async fn provider(status: u16) -> (String, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    let app = Router::new().route(
        "/token",
        post(move |body: String| {
            let counted = counted.clone();
            async move {
                let n = counted.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                assert!(body.contains("grant_type=client_credentials"), "{body}");
                let answer = format!(r#"{{"access_token":"t{n}","token_type":"Bearer","expires_in":3600}}"#);
                (axum::http::StatusCode::from_u16(status).unwrap(), answer)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, count)
}

fn tokens(url: &str) -> (Tokens, Arc<Mutex<Vec<RequestResult>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let observed = seen.clone();
    let source = TokenSource {
        token_url: url.to_owned(),
        client_id: "eg".into(),
        credential: Credential::Secret("s3cret".into()),
        default_target: TokenTarget::default(),
        refresh_before: Duration::from_secs(300),
    };
    let observe = Arc::new(move |_: &str, result, _, _: Option<&str>| observed.lock().unwrap().push(result));
    (
        Tokens::new(BTreeMap::from([("corp".to_owned(), source)]), observe).unwrap(),
        seen,
    )
}

#[tokio::test]
async fn many_deliveries_at_once_wait_for_one_request_and_share_its_token() {
    let (url, count) = provider(200).await;
    let (tokens, seen) = tokens(&url);
    let tokens = Arc::new(tokens);
    let target = TokenTarget::entra_application("api://orders");
    let asks: Vec<_> = (0..10)
        .map(|_| {
            let (tokens, target) = (tokens.clone(), target.clone());
            tokio::spawn(async move { tokens.token("corp", &target, Duration::from_secs(5)).await.unwrap() })
        })
        .collect();
    for ask in asks {
        assert_eq!(ask.await.unwrap().expose(), "t0");
    }
    assert_eq!(count.load(Ordering::SeqCst), 1, "one request for ten deliveries");
    assert_eq!(*seen.lock().unwrap(), [RequestResult::Issued]);

    // A token the endpoint refused is forgotten: the next delivery gets a new one.
    let first = tokens.token("corp", &target, Duration::from_secs(5)).await.unwrap();
    tokens.forget("corp", &target, &first);
    let second = tokens.token("corp", &target, Duration::from_secs(5)).await.unwrap();
    assert_eq!(second.expose(), "t1");
    // Forgetting a token already replaced keeps the new one.
    tokens.forget("corp", &target, &first);
    assert_eq!(
        tokens
            .token("corp", &target, Duration::from_secs(5))
            .await
            .unwrap()
            .expose(),
        "t1"
    );
    assert_eq!(count.load(Ordering::SeqCst), 2);

    // Another target is another token.
    let other = TokenTarget::entra_application("api://billing");
    assert_eq!(
        tokens
            .token("corp", &other, Duration::from_secs(5))
            .await
            .unwrap()
            .expose(),
        "t2"
    );
}

#[tokio::test]
async fn a_refusing_provider_is_said_so_and_not_asked_again_at_once() {
    let (url, count) = provider(401).await;
    let (tokens, seen) = tokens(&url);
    let target = TokenTarget::default();
    let err = tokens.token("corp", &target, Duration::from_secs(5)).await.unwrap_err();
    assert!(
        matches!(&err, TokenError::Unavailable { identity, .. } if identity == "corp"),
        "{err}"
    );
    assert!(err.to_string().contains("answered 401"), "{err}");
    assert!(!err.to_string().contains("s3cret"), "{err}");
    // Within the backoff, the same problem comes back without a request.
    let again = tokens.token("corp", &target, Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(again, err);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(*seen.lock().unwrap(), [RequestResult::Refused]);
    assert_eq!(tokens.problems().len(), 1);
    assert_eq!(tokens.problems()[0].result, RequestResult::Refused);
    assert!(matches!(
        tokens.token("nobody", &target, Duration::from_secs(5)).await,
        Err(TokenError::UnknownIdentity(_))
    ));
}
