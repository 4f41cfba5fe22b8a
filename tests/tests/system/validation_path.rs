//! The newcomer's path through endpoint validation (issue 14), walked with the real
//! egctl: a receiver that does not answer the handshake is told so plainly, the events
//! published meanwhile show as unmatched, and `validate` after fixing the receiver makes
//! the subscription work. Also what an unreachable endpoint is told, and that writing a
//! subscription that is not `Succeeded` runs the handshake again.

use crate::egctl::Egctl;
use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, System, Validation, eventually, json_reply, subscription,
};
use eg_testkit::RefusingPort;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// egctl's exit code for a subscription written but not `Succeeded` (docs/egctl.md).
const NOT_ACTIVE: i32 = 4;

fn provisioning(resource: &Value) -> (&str, &str) {
    let p = &resource["properties"];
    (
        p["provisioningState"].as_str().unwrap_or_default(),
        p["provisioningMessage"].as_str().unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_sees_why_nothing_arrives_and_validates_once_the_receiver_is_fixed() {
    let system = System::start(Options::default()).await;
    // A plain receiver: 200 with an empty body to everything, the handshake included.
    let receiver = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    let ctl = Egctl::for_system(&system);
    ctl.run(&["topics", "create", "orders"]).await.ok();

    let created = ctl
        .run(&[
            "subscriptions",
            "create",
            "orders",
            "audit",
            "--endpoint",
            receiver.url(),
        ])
        .await;
    assert_eq!(created.code, NOT_ACTIVE, "{created:?}");
    assert!(
        created.stdout.contains("subscription orders/audit created"),
        "{created:?}"
    );
    let told = &created.stderr;
    for expected in [
        "egctl: subscription orders/audit is AwaitingManualAction: it receives no events",
        "the endpoint answered 200 OK with an empty body to the validation request",
        "reached the endpoint",
        "{\"validationResponse\"",
        "`egctl subscriptions validate orders audit`",
        "EG__VALIDATION__ENABLED=false",
    ] {
        assert!(told.contains(expected), "{expected:?} not in {told}");
    }
    assert!(!told.contains(receiver.url()), "the endpoint URL was shown: {told}");
    let handshakes = receiver.validations();
    assert_eq!(handshakes.len(), 1);
    let code = handshakes[0].body[0]["data"]["validationCode"].as_str().unwrap();
    assert!(!told.contains(code), "the validation code was shown: {told}");

    // Published while it waits: accepted, and matched by nothing.
    for n in 1..=3 {
        let id = format!("waiting-{n}");
        let args = [
            "publish",
            "orders",
            "--type",
            "Order.Created",
            "--subject",
            "/orders/1",
            "--id",
            id.as_str(),
        ];
        ctl.run(&args).await.ok();
    }
    let shown = eventually(DEADLINE, "egctl status to show the unmatched events", || async {
        let status = ctl.run(&["status"]).await;
        status
            .ok()
            .contains("orders: 3 events matched no active subscription in the last hour")
            .then(|| status.stdout.clone())
    })
    .await;
    assert!(
        shown.contains(
            "in the last hour; orders/audit is waiting for validation (3 events missed in the last hour): \
             The validation handshake failed: the endpoint answered 200 OK with an empty body"
        ),
        "{shown}"
    );

    // The receiver is fixed to echo the code; validate runs the handshake again.
    receiver.set_validation(Validation::Consent);
    let validated = ctl.run(&["subscriptions", "validate", "orders", "audit"]).await;
    assert!(
        validated.ok().contains("subscription orders/audit is Succeeded"),
        "{validated:?}"
    );
    assert_eq!(receiver.validations().len(), 2, "validate made a new handshake");

    ctl.run(&[
        "publish",
        "orders",
        "--type",
        "Order.Created",
        "--subject",
        "/orders/2",
        "--id",
        "after",
    ])
    .await
    .ok();
    let got = receiver.wait_for_ids(["after"], DEADLINE).await;
    assert_eq!(got, ["after"], "the events published while it waited are not delivered");
    let status = ctl.run(&["status"]).await;
    assert!(
        status
            .ok()
            .contains("orders: 3 events matched no active subscription in the last hour\n"),
        "the waiting events stay counted, and audit no longer waits: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_endpoint_is_told_that_no_validation_url_reached_it() {
    let system = System::start(Options::default().senders(0)).await;
    system.create_topic("orders").await;
    let closed = RefusingPort::new();
    let endpoint = format!("{}/hook?secret=QUERYSECRET", closed.url());
    let (status, created) = system
        .put_subscription("orders", "audit", &subscription(&endpoint, json!({})))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (state, message) = provisioning(&created);
    assert_eq!(state, "AwaitingManualAction", "{created}");
    for expected in [
        "could not reach the endpoint: the connection was refused",
        "No validation event, so no validationUrl, was delivered to it",
        "`egctl subscriptions validate orders audit`",
    ] {
        assert!(message.contains(expected), "{expected:?} not in {message}");
    }
    assert!(!message.contains("was sent"), "{message}");
    assert!(
        !message.contains("QUERYSECRET") && !message.contains(&closed.url()),
        "{message}"
    );

    // Kept with the subscription: a later GET says the same.
    let (status, shown) = system.get("/topics/orders/eventSubscriptions/audit").await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(provisioning(&shown), (state, message));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_or_validating_a_subscription_not_succeeded_runs_the_handshake_again() {
    let system = System::start(Options::default().senders(0)).await;
    let receiver = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    system.create_topic("orders").await;
    let body = subscription(receiver.url(), json!({}));

    let first = system.create_subscription("orders", "audit", body.clone()).await;
    assert_eq!(provisioning(&first).0, "AwaitingManualAction", "{first}");
    let again = system.create_subscription("orders", "audit", body.clone()).await;
    assert_eq!(provisioning(&again).0, "AwaitingManualAction", "{again}");
    assert_eq!(receiver.validations().len(), 2, "the same endpoint is asked again");

    let validate = "/topics/orders/eventSubscriptions/audit/validate";
    let (status, still) = system.post(validate, None).await;
    assert_eq!(status, StatusCode::OK, "{still}");
    assert_eq!(provisioning(&still).0, "AwaitingManualAction", "{still}");
    assert_eq!(receiver.validations().len(), 3);

    receiver.set_validation(Validation::Consent);
    let fixed = system.create_subscription("orders", "audit", body.clone()).await;
    assert_eq!(provisioning(&fixed), ("Succeeded", ""), "{fixed}");
    assert_eq!(receiver.validations().len(), 4);

    // Consent is kept while the endpoint stays the same: no handshake for a rewrite or
    // a validate of a Succeeded subscription.
    let rewritten = system.create_subscription("orders", "audit", body).await;
    assert_eq!(provisioning(&rewritten).0, "Succeeded", "{rewritten}");
    let (status, validated) = system.post(validate, None).await;
    assert_eq!(status, StatusCode::OK, "{validated}");
    assert_eq!(provisioning(&validated).0, "Succeeded", "{validated}");
    assert_eq!(receiver.validations().len(), 4, "a consent given is not asked again");

    let (status, missing) = json_reply(
        system
            .admin(Method::POST, "/topics/orders/eventSubscriptions/nobody/validate", None)
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
}

/// The validation URL is the one call made without the admin token. Without the right
/// code it must tell nothing: a missing topic, a missing subscription, a validated one
/// and a pending one all get the same answer, status and body; only the right code of a
/// pending subscription validates it (and once spent, it gets that answer too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validation_url_without_the_right_code_tells_nothing() {
    let system = System::start(Options::default().senders(0)).await;
    let silent = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    let willing = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("guarded").await;
    let pending = system
        .create_subscription("guarded", "pending", subscription(silent.url(), json!({})))
        .await;
    assert_eq!(provisioning(&pending).0, "AwaitingManualAction", "{pending}");
    let validated = system
        .create_subscription("guarded", "validated", subscription(willing.url(), json!({})))
        .await;
    assert_eq!(provisioning(&validated).0, "Succeeded", "{validated}");
    let data = &silent.validations()[0].body[0]["data"];
    let right = data["validationUrl"].as_str().unwrap().to_owned();
    let code = data["validationCode"].as_str().unwrap().to_owned();

    let url = |topic: &str, name: &str, code: Option<&str>| {
        let base = format!(
            "{}/validation/topics/{topic}/eventSubscriptions/{name}",
            system.ingress_url()
        );
        match code {
            Some(code) => format!("{base}?code={code}"),
            None => base,
        }
    };
    let wrong = "00000000-0000-0000-0000-000000000000";
    let http = system.http().clone();
    let answer = |url: String| {
        let http = http.clone();
        async move {
            let response = http.get(&url).send().await.unwrap();
            (response.status(), response.text().await.unwrap())
        }
    };
    let cases = [
        ("a missing topic", url("nothing", "pending", Some(wrong))),
        ("a topic name that is not one", url("no_such", "pending", Some(wrong))),
        ("a missing subscription", url("guarded", "nobody", Some(wrong))),
        ("a validated subscription", url("guarded", "validated", Some(wrong))),
        (
            "a validated subscription, the pending one's code",
            url("guarded", "validated", Some(&code)),
        ),
        ("a pending subscription", url("guarded", "pending", Some(wrong))),
        ("a pending subscription, no code", url("guarded", "pending", None)),
    ];
    let mut answers = Vec::new();
    for (case, url) in cases {
        answers.push((case, answer(url).await));
    }
    let (_, first) = &answers[0];
    assert_eq!(first.0, StatusCode::NOT_FOUND, "{}", first.1);
    assert!(
        first.1.contains("no subscription awaits validation with this code"),
        "{}",
        first.1
    );
    for (case, got) in &answers {
        assert_eq!(got, first, "{case} is told apart from {:?}", answers[0].0);
    }
    let (status, shown) = system.get("/topics/guarded/eventSubscriptions/pending").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(provisioning(&shown).0, "AwaitingManualAction", "{shown}");

    let (status, body) = answer(right.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, shown) = system.get("/topics/guarded/eventSubscriptions/pending").await;
    assert_eq!(provisioning(&shown).0, "Succeeded", "{shown}");
    assert_eq!(&answer(right).await, first, "a spent code tells nothing either");
}
