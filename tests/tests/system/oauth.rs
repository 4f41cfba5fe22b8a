//! Bearer tokens on webhook delivery (docs/oauth-delivery.md), against a real OAuth 2.0
//! provider that signs JWTs (`eg_testkit::OAuthServer`) and a receiver that verifies
//! each token's signature with the provider's published keys, its audience and its
//! expiry (`BearerCheck`), answering 401 otherwise.

use eg_system_tests::{
    BearerCheck, Behaviour, DEADLINE, Options, Receiver, System, assert_subscription_refused, event, eventually,
    subscription,
};
use eg_testkit::OAuthServer;
use eg_testkit::oauth_server::{CLIENT_ID, CLIENT_KEY_PEM, CLIENT_SECRET, OTHER_KEY_PEM, client_certificate};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const APPLICATION: &str = "api://orders";
const AUDIENCE: &str = "https://partner.example/api";

/// A system with the identity `corp` (Entra ID tenant `contoso`) and `partner` (generic
/// OAuth 2.0), both clients of `idp`.
fn with_identities(options: Options, idp: &OAuthServer) -> Options {
    options
        .env("EG__IDENTITIES__CORP__TENANT_ID", "contoso.onmicrosoft.com")
        .env("EG__IDENTITIES__CORP__TOKEN_URL", &idp.token_url())
        .env("EG__IDENTITIES__CORP__CLIENT_ID", CLIENT_ID)
        .env("EG__IDENTITIES__CORP__CLIENT_SECRET", CLIENT_SECRET)
        .env("EG__IDENTITIES__PARTNER__KIND", "oauth2")
        .env("EG__IDENTITIES__PARTNER__TOKEN_URL", &idp.token_url())
        .env("EG__IDENTITIES__PARTNER__CLIENT_ID", CLIENT_ID)
        .env("EG__IDENTITIES__PARTNER__CLIENT_SECRET", CLIENT_SECRET)
}

/// Event Grid's own JSON for a webhook behind Entra ID.
fn entra_subscription(url: &str) -> Value {
    let mut body = subscription(url, json!({}));
    let props = &mut body["properties"]["destination"]["properties"];
    props["azureActiveDirectoryTenantId"] = json!("contoso.onmicrosoft.com");
    props["azureActiveDirectoryApplicationIdOrUri"] = json!(APPLICATION);
    body
}

fn bearer_token(request: &eg_system_tests::Recorded) -> String {
    let value = request.header("authorization").unwrap_or_default();
    value.strip_prefix("Bearer ").unwrap_or_default().to_owned()
}

/// The event's history steps; none while it has none yet (a 404).
async fn history(system: &System, topic: &str, event_id: &str) -> Vec<Value> {
    let (status, body) = system.get(&format!("/topics/{topic}/events/{event_id}/history")).await;
    if status == 404 {
        return Vec::new();
    }
    assert_eq!(status, 200, "{body}");
    body["value"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_event_grid_json_unchanged_gets_every_request_a_verified_token() {
    let idp = OAuthServer::start(Duration::from_secs(3600));
    let system = System::start(with_identities(Options::default(), &idp)).await;
    let receiver =
        Receiver::start_verifying(Behaviour::Status(200), BearerCheck::new(&idp.jwks_url(), APPLICATION)).await;
    system.create_topic("orders").await;
    let created = system
        .create_subscription("orders", "audit", entra_subscription(receiver.url()))
        .await;
    // Shown back as Event Grid writes it.
    let shown = &created["properties"]["destination"]["properties"];
    assert_eq!(
        shown["azureActiveDirectoryTenantId"], "contoso.onmicrosoft.com",
        "{created}"
    );
    assert_eq!(
        shown["azureActiveDirectoryApplicationIdOrUri"], APPLICATION,
        "{created}"
    );
    // The validation handshake carried a good token too, as Event Grid's does.
    assert_eq!(created["properties"]["provisioningState"], "Succeeded", "{created}");
    let validations = receiver.validations();
    assert_eq!(validations.len(), 1, "{validations:?}");
    assert_eq!(validations[0].status, 200, "the handshake's token verified");

    let events: Vec<Value> = (1..=3)
        .map(|i| event(&format!("e{i}"), "Order.Placed", "/orders", json!({"n": i})))
        .collect();
    system.publish_ok("orders", &json!(events)).await;
    receiver.wait_for_ids(["e1", "e2", "e3"], DEADLINE).await;
    let received = receiver.received();
    assert!(
        received.iter().all(|r| r.status == 200),
        "every request verified: {received:?}"
    );
    let tokens: BTreeSet<String> = received.iter().map(bearer_token).collect();
    assert_eq!(tokens.len(), 1, "one token, cached for the three deliveries");

    // The receiver revokes that token: eg's next request is refused once, eg asks the
    // provider again and sends again in the same attempt, which is accepted.
    let first = tokens.into_iter().next().unwrap();
    receiver.bearer().unwrap().refuse(&first);
    system
        .publish_ok("orders", &json!([event("e4", "Order.Placed", "/orders", json!({}))]))
        .await;
    receiver.wait_for_ids(["e4"], DEADLINE).await;
    let e4 = eventually(DEADLINE, "e4 accepted", || async {
        let e4: Vec<_> = receiver
            .received()
            .into_iter()
            .filter(|r| r.event_ids() == ["e4"])
            .collect();
        e4.iter().any(|r| r.status == 200).then_some(e4)
    })
    .await;
    let statuses: Vec<u16> = e4.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [401, 200], "one refusal, one renewal");
    assert_eq!(
        e4[0].header("aeg-delivery-count"),
        e4[1].header("aeg-delivery-count"),
        "the resend is part of the same attempt"
    );
    assert_ne!(bearer_token(&e4[1]), first, "a new token");

    // Neither the client secret nor a token reaches a log or the status answers.
    let mut secrets: Vec<String> = receiver.received().iter().map(bearer_token).collect();
    secrets.push(CLIENT_SECRET.to_owned());
    let (_, status) = system.get("/status").await;
    let (_, sub) = system.get("/topics/orders/eventSubscriptions/audit").await;
    let answers = format!("{status}{sub}");
    for secret in &secrets {
        assert!(!answers.contains(secret.as_str()), "an answer holds a secret");
        for (log, text) in system.logs() {
            assert!(!text.contains(secret.as_str()), "{log} holds a secret");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_the_generic_form_renews_short_lived_tokens_before_they_end() {
    // Tokens live 3 s: renewed after half their life, so none is ever sent expired.
    let idp = OAuthServer::start(Duration::from_secs(3));
    let system = System::start(with_identities(Options::default(), &idp)).await;
    let receiver = Receiver::start_verifying(Behaviour::Status(200), BearerCheck::new(&idp.jwks_url(), AUDIENCE)).await;
    system.create_topic("orders").await;
    let mut body = subscription(receiver.url(), json!({}));
    let props = &mut body["properties"]["destination"]["properties"];
    props["deliveryIdentity"] = json!("partner");
    props["tokenAudience"] = json!(AUDIENCE);
    let created = system.create_subscription("orders", "partner", body).await;
    assert_eq!(
        created["properties"]["destination"]["properties"]["tokenAudience"],
        AUDIENCE
    );

    // One event after another until three tokens were used (about 4 s of deliveries).
    let mut published = 0;
    eventually(Duration::from_secs(60), "three tokens used", || {
        published += 1;
        let id = format!("p{published}");
        let system = &system;
        let receiver = &receiver;
        async move {
            system
                .publish_ok("orders", &json!([event(&id, "Order.Placed", "/orders", json!({}))]))
                .await;
            receiver.wait_for_ids([id], DEADLINE).await;
            let tokens: BTreeSet<String> = receiver.received().iter().map(bearer_token).collect();
            (tokens.len() >= 3).then_some(())
        }
    })
    .await;
    let received = receiver.received();
    let refused: Vec<_> = received.iter().filter(|r| r.status != 200).collect();
    assert!(refused.is_empty(), "no request with an expired token: {refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_the_identity_provider_down_is_its_own_outcome_retried_without_probation() {
    let mut idp = OAuthServer::start(Duration::from_secs(3600));
    let options =
        with_identities(Options::default().retry_schedule("1s"), &idp).env("EG__PROBATION__FAILURE_THRESHOLD", "1");
    let system = System::start(options).await;
    let receiver =
        Receiver::start_verifying(Behaviour::Status(200), BearerCheck::new(&idp.jwks_url(), APPLICATION)).await;
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "audit", entra_subscription(receiver.url()))
        .await;
    idp.kill();
    system
        .publish_ok("orders", &json!([event("d1", "Order.Placed", "/orders", json!({}))]))
        .await;
    let steps = eventually(DEADLINE, "two TokenUnavailable steps in history", || async {
        let steps = history(&system, "orders", "d1").await;
        let failed = steps.iter().filter(|s| s["outcome"] == "TokenUnavailable").count();
        (failed >= 2).then_some(steps)
    })
    .await;
    let step = steps.iter().find(|s| s["outcome"] == "TokenUnavailable").unwrap();
    assert!(
        step["error"]
            .as_str()
            .is_some_and(|e| e.contains("\"corp\"") && e.contains("token endpoint")),
        "{step}"
    );
    assert_eq!(receiver.count(), 0, "nothing sent without a token");
    let logged = system
        .logs()
        .into_iter()
        .any(|(name, text)| name.contains("sender") && text.contains("cannot get a webhook delivery token"));
    assert!(logged, "the sender's log names the identity problem");
    let (status, health) = system
        .get("/topics/orders/eventSubscriptions/audit/deliveryHealth")
        .await;
    assert_eq!(status, 200, "{health}");
    assert_ne!(health["state"], "Probation", "the endpoint is not to blame: {health}");
    assert_eq!(health["consecutiveFailures"], 0, "{health}");

    idp.start_again();
    receiver.wait_for_ids(["d1"], Duration::from_secs(90)).await;
    assert!(receiver.received().iter().all(|r| r.status == 200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_a_certificate_credential_signs_in_and_a_wrong_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let registered = client_certificate(dir.path(), "registered", CLIENT_KEY_PEM, false);
    let stranger = client_certificate(dir.path(), "stranger", OTHER_KEY_PEM, false);
    // The provider verifies each client assertion against the registered certificate.
    let idp = OAuthServer::start_with_certificate(Duration::from_secs(3600), &registered.cert);
    let path = |p: &std::path::Path| p.display().to_string();
    let options = Options::default()
        .env("EG__IDENTITIES__CORP__TENANT_ID", "contoso.onmicrosoft.com")
        .env("EG__IDENTITIES__CORP__TOKEN_URL", &idp.token_url())
        .env("EG__IDENTITIES__CORP__CLIENT_ID", CLIENT_ID)
        .env("EG__IDENTITIES__CORP__CERTIFICATE_FILE", &path(&registered.cert))
        .env("EG__IDENTITIES__CORP__KEY_FILE", &path(&registered.key))
        // The same client id with a certificate and key of its own, never registered.
        .env("EG__IDENTITIES__STRANGER__TOKEN_URL", &idp.token_url())
        .env("EG__IDENTITIES__STRANGER__CLIENT_ID", CLIENT_ID)
        .env("EG__IDENTITIES__STRANGER__CERTIFICATE_FILE", &path(&stranger.cert))
        .env("EG__IDENTITIES__STRANGER__KEY_FILE", &path(&stranger.key));
    let system = System::start(options).await;
    let receiver =
        Receiver::start_verifying(Behaviour::Status(200), BearerCheck::new(&idp.jwks_url(), APPLICATION)).await;
    system.create_topic("orders").await;
    let created = system
        .create_subscription("orders", "audit", entra_subscription(receiver.url()))
        .await;
    assert_eq!(created["properties"]["provisioningState"], "Succeeded", "{created}");
    system
        .publish_ok(
            "orders",
            &json!([
                event("c1", "Order.Placed", "/orders", json!({})),
                event("c2", "Order.Placed", "/orders", json!({}))
            ]),
        )
        .await;
    receiver.wait_for_ids(["c1", "c2"], DEADLINE).await;
    assert!(
        receiver.received().iter().all(|r| r.status == 200),
        "every token verified: {:?}",
        receiver.received()
    );

    // A key the provider does not know: no token, so the handshake cannot be made and
    // the subscription is refused with what the provider said.
    let mut body = subscription(receiver.url(), json!({}));
    let props = &mut body["properties"]["destination"]["properties"];
    props["deliveryIdentity"] = json!("stranger");
    props["tokenAudience"] = json!(AUDIENCE);
    let problem = assert_subscription_refused(
        &system,
        "orders",
        "stranger",
        &body,
        "properties.destination.properties.deliveryIdentity",
    )
    .await;
    assert!(
        problem.contains("client assertion refused: the signature does not verify"),
        "{problem}"
    );

    // The keys never reach a log.
    let key_line = |pem: &str| pem.lines().nth(1).unwrap_or_default().to_owned();
    for (log, text) in system.logs() {
        for key in [CLIENT_KEY_PEM, OTHER_KEY_PEM] {
            assert!(!text.contains(&key_line(key)), "{log} holds a private key");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_a_subscription_naming_an_identity_eg_lacks_is_refused_naming_the_setting() {
    let system = System::start(Options::default()).await;
    system.create_topic("orders").await;
    let mut generic = subscription("https://partner.example/hook", json!({}));
    generic["properties"]["destination"]["properties"]["deliveryIdentity"] = json!("partner");
    generic["properties"]["destination"]["properties"]["tokenScope"] = json!("orders.write");
    let problem = assert_subscription_refused(
        &system,
        "orders",
        "generic",
        &generic,
        "properties.destination.properties.deliveryIdentity",
    )
    .await;
    assert!(problem.contains("EG__IDENTITIES__PARTNER__CLIENT_ID"), "{problem}");
    let problem = assert_subscription_refused(
        &system,
        "orders",
        "entra",
        &entra_subscription("https://partner.example/hook"),
        "properties.destination.properties.azureActiveDirectoryTenantId",
    )
    .await;
    assert!(problem.contains("EG__IDENTITIES__<NAME>__TENANT_ID"), "{problem}");
}

/// A status page as HTML, with the admin token.
async fn status_page(system: &System) -> String {
    let response = system
        .http()
        .get(format!("{}/status", system.ingress_url()))
        .bearer_auth(eg_system_tests::ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_an_identity_without_tokens_is_shown_in_status_and_egctl_until_it_gets_one() {
    let mut idp = OAuthServer::start(Duration::from_secs(3600));
    let system = System::start(with_identities(Options::default().retry_schedule("1s"), &idp)).await;
    let receiver =
        Receiver::start_verifying(Behaviour::Status(200), BearerCheck::new(&idp.jwks_url(), APPLICATION)).await;
    let ctl = crate::egctl::Egctl::for_system(&system);
    system.create_topic("orders").await;
    system
        .create_subscription("orders", "audit", entra_subscription(receiver.url()))
        .await;
    let (_, quiet) = system.get("/status").await;
    assert_eq!(quiet["failingIdentities"], json!([]), "{quiet}");

    // The provider down: the sender's deliveries get no token, and it reports so.
    idp.kill();
    system
        .publish_ok("orders", &json!([event("d1", "Order.Placed", "/orders", json!({}))]))
        .await;
    let overview = eventually(DEADLINE, "corp in failingIdentities", || async {
        let (_, overview) = system.get("/status").await;
        (overview["failingIdentities"][0]["identity"] == "corp").then_some(overview)
    })
    .await;
    let failing = &overview["failingIdentities"][0];
    assert_eq!(failing["kind"], "Unreachable", "{overview}");
    assert_eq!(
        failing["subscriptions"], 1,
        "the Entra ID webhook names its tenant: {overview}"
    );
    assert!(
        failing["message"]
            .as_str()
            .is_some_and(|m| m.contains("token endpoint")),
        "{overview}"
    );
    assert!(
        failing["failingSince"].as_str().is_some_and(|s| s.ends_with('Z')),
        "{overview}"
    );
    assert!(failing["lastFailureTime"].as_str().is_some(), "{overview}");
    assert_eq!(
        overview["failingIdentities"].as_array().map(Vec::len),
        Some(1),
        "partner is unused"
    );

    let status = ctl.run(&["status"]).await;
    let text = status.ok();
    assert!(
        text.contains("delivery identities without tokens (1 identity;"),
        "{status:?}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("corp"))
        .unwrap_or_else(|| panic!("no identity row: {status:?}"));
    assert!(row.contains("Unreachable") && row.contains("token endpoint"), "{row}");
    let html = status_page(&system).await;
    for needle in [
        "id=\"identities-failing\"",
        "<tr data-identity-failing=\"corp\">",
        ">Unreachable</span>",
    ] {
        assert!(html.contains(needle), "missing {needle:?} in\n{html}");
    }
    for (what, answer) in [
        ("GET /admin/status", &overview.to_string()),
        ("egctl status", &status.stdout),
        ("the status page", &html),
    ] {
        assert!(
            !answer.contains(CLIENT_SECRET),
            "{what} shows the client secret: {answer}"
        );
    }

    // A token obtained again clears it everywhere.
    idp.start_again();
    receiver.wait_for_ids(["d1"], Duration::from_secs(90)).await;
    eventually(DEADLINE, "failingIdentities empty again", || async {
        let (_, overview) = system.get("/status").await;
        (overview["failingIdentities"] == json!([])).then_some(())
    })
    .await;
    assert!(!ctl.run(&["status"]).await.ok().contains("without tokens"));
    assert!(!status_page(&system).await.contains("identities-failing"));
}
