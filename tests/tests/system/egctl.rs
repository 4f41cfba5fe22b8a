//! egctl, the operators' CLI, run as a process against a real system: what it prints,
//! what it sends, and how it fails.

use eg_system_tests::{ADMIN_TOKEN, Behaviour, DEADLINE, Options, PROXY_VARIABLES, Receiver, System, eventually};
use eg_testkit::RefusingPort;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tempfile::TempDir;

/// `target/<profile>/egctl`, next to the tiers the harness runs (built by
/// `cargo build --workspace`).
fn binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().and_then(Path::parent).unwrap().join("egctl");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace` first",
        path.display()
    );
    path
}

/// What one egctl run did.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// Insists on exit 0; returns stdout.
    pub(crate) fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "egctl failed: {self:?}");
        &self.stdout
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(self.ok()).unwrap_or_else(|e| panic!("--json output is not JSON ({e}): {self:?}"))
    }
}

/// An egctl invocation with nothing from the developer's environment: its own HOME and
/// XDG_CONFIG_HOME (so no real config file is read), no EGCTL_* variables, no proxies.
pub(crate) struct Egctl {
    home: TempDir,
    env: Vec<(String, String)>,
}

impl Egctl {
    fn new() -> Self {
        Self {
            home: tempfile::Builder::new().prefix("egctl-home-").tempdir().unwrap(),
            env: Vec::new(),
        }
    }

    /// Pointed at `system` through the environment, with the right token.
    pub(crate) fn for_system(system: &System) -> Self {
        Self::new()
            .env("EGCTL_URL", system.ingress_url())
            .env("EGCTL_TOKEN", ADMIN_TOKEN)
    }

    fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Writes `text` to a file in this invocation's home; returns its path.
    fn file(&self, name: &str, text: &str) -> String {
        let path = self.home.path().join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    pub(crate) async fn run(&self, args: &[&str]) -> Run {
        let mut command = tokio::process::Command::new(binary());
        for (key, _) in std::env::vars() {
            if key.starts_with("EGCTL_") {
                command.env_remove(key);
            }
        }
        for key in PROXY_VARIABLES {
            command.env_remove(key);
        }
        command
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = command.spawn().unwrap();
        let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("egctl {args:?} did not finish within 60 s"))
            .unwrap();
        let run = Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        // Whatever it did, egctl never shows the admin token.
        assert!(
            !run.stdout.contains(ADMIN_TOKEN) && !run.stderr.contains(ADMIN_TOKEN),
            "egctl {args:?} printed the admin token: {run:?}"
        );
        run
    }
}

/// Polls an egctl command (with `--json`) until `check` accepts its output. A `404`
/// (what it asks about does not exist yet: no step of a delivery not yet attempted) is
/// polled again like an output `check` refuses; any other failure fails the test.
async fn until_json(ctl: &Egctl, args: &[&str], what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(DEADLINE, what, || async {
        let run = ctl.run(args).await;
        if run.code != 0 && run.stderr.contains("404 Not Found") {
            tokio::time::sleep(Duration::from_millis(200)).await;
            return None;
        }
        let value = run.json();
        if check(&value) {
            return Some(value);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        None
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manages_topics_and_subscriptions_and_publishes() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let ctl = Egctl::for_system(&system);

    // Topics.
    let created = ctl.run(&["topics", "create", "orders"]).await;
    assert!(created.ok().contains("topic orders created"), "{created:?}");
    assert!(created.stdout.contains("EventGridSchema"), "{created:?}");
    let list = ctl.run(&["topics", "list"]).await;
    let line = list.ok().lines().find(|l| l.starts_with("orders")).unwrap_or_default();
    assert!(
        line.contains("EventGridSchema") && line.contains("/topics/orders/api/events"),
        "{list:?}"
    );
    assert!(list.stdout.starts_with("NAME"), "{list:?}");
    let shown = ctl.run(&["--json", "topics", "show", "orders"]).await.json();
    assert_eq!(shown["name"], "orders");
    assert_eq!(shown["properties"]["inputSchema"], "EventGridSchema");
    let listed = ctl.run(&["topics", "list", "--json"]).await.json();
    assert_eq!(listed["value"].as_array().map(Vec::len), Some(1), "{listed}");

    let keys = ctl.run(&["topics", "keys", "orders", "--json"]).await.json();
    let key1 = keys["key1"].as_str().unwrap().to_owned();
    let human = ctl.run(&["topics", "keys", "orders"]).await;
    assert!(human.ok().contains(&key1), "{human:?}");
    let regenerated = ctl
        .run(&["topics", "regenerate", "orders", "key1", "--json"])
        .await
        .json();
    assert_ne!(regenerated["key1"], key1.as_str(), "key1 was not replaced");
    assert_eq!(regenerated["key2"], keys["key2"], "key2 changed too");

    // Subscriptions, from flags and from a file.
    let created = ctl
        .run(&[
            "subscriptions",
            "create",
            "orders",
            "audit",
            "--endpoint",
            receiver.url(),
            "--event-types",
            "Order.Created,Order.Paid",
            "--subject-begins-with",
            "/orders/",
            "--max-attempts",
            "5",
            "--ttl-minutes",
            "60",
            "--dead-letter-container",
            "audit-dl",
        ])
        .await;
    assert!(
        created.ok().contains("subscription orders/audit created"),
        "{created:?}"
    );
    let shown = ctl
        .run(&["subscriptions", "show", "orders", "audit", "--json"])
        .await
        .json();
    let p = &shown["properties"];
    assert_eq!(
        p["filter"]["includedEventTypes"],
        json!(["Order.Created", "Order.Paid"])
    );
    assert_eq!(p["filter"]["subjectBeginsWith"], "/orders/");
    assert_eq!(p["retryPolicy"]["maxDeliveryAttempts"], 5);
    assert_eq!(p["retryPolicy"]["eventTimeToLiveInMinutes"], 60);
    assert_eq!(p["deadLetterDestination"]["properties"]["containerName"], "audit-dl");
    let human = ctl.run(&["subscriptions", "show", "orders", "audit"]).await;
    assert!(human.ok().contains("Order.Created,Order.Paid"), "{human:?}");

    let file = ctl.file(
        "sub.json",
        &json!({"properties": {
            "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": receiver.url()}},
            "filter": {"includedEventTypes": ["Order.Shipped"]},
        }})
        .to_string(),
    );
    let created = ctl
        .run(&["subscriptions", "create", "orders", "shipping", "--file", &file])
        .await;
    assert!(
        created.ok().contains("subscription orders/shipping created"),
        "{created:?}"
    );
    let list = ctl.run(&["subscriptions", "list", "orders"]).await;
    let names: Vec<&str> = list
        .ok()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names.len(), 2, "{list:?}");
    assert!(names.contains(&"audit") && names.contains(&"shipping"), "{list:?}");

    // Publishing from flags and from a file, with the regenerated key fetched by egctl.
    let published = ctl
        .run(&[
            "publish",
            "orders",
            "--type",
            "Order.Created",
            "--subject",
            "/orders/1",
            "--id",
            "flag-1",
            "--data",
            r#"{"total": 12}"#,
        ])
        .await;
    assert!(published.ok().contains("flag-1"), "{published:?}");
    // Text that is not JSON is refused before anything is sent, with what to type instead.
    let refused = ctl
        .run(&[
            "publish",
            "orders",
            "--type",
            "Order.Created",
            "--subject",
            "/orders/9",
            "--data",
            "not json",
        ])
        .await;
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("--data is not valid JSON: expected ident at line 1 column 2")
            && refused.stderr.contains(r#"--data '"hello"'"#),
        "{refused:?}"
    );
    let events = json!([
        {"id": "file-1", "eventType": "Order.Paid", "subject": "/orders/2", "eventTime": "2026-01-02T03:04:05Z", "data": {}, "dataVersion": "1"},
        {"id": "file-2", "eventType": "Order.Shipped", "subject": "/orders/3", "eventTime": "2026-01-02T03:04:05Z", "data": {}, "dataVersion": "1"},
    ]);
    let file = ctl.file("events.json", &events.to_string());
    let published = ctl.run(&["publish", "orders", "--file", &file, "--json"]).await.json();
    assert_eq!(published["published"], json!(["file-1", "file-2"]));
    let delivered = eventually(DEADLINE, "three events delivered", || async {
        let mut ids = receiver.delivered_ids();
        ids.sort();
        (ids.len() >= 3).then_some(ids)
    })
    .await;
    assert_eq!(delivered, ["file-1", "file-2", "flag-1"]);
    let flag_event = receiver
        .received()
        .into_iter()
        .find(|r| r.event_ids() == ["flag-1"])
        .unwrap();
    assert_eq!(flag_event.body[0]["data"], json!({"total": 12}));
    assert_eq!(flag_event.body[0]["subject"], "/orders/1");
    assert_eq!(flag_event.header("aeg-subscription-name"), Some("AUDIT"));

    // Deleting.
    let deleted = ctl.run(&["subscriptions", "delete", "orders", "shipping"]).await;
    assert!(deleted.ok().contains("deleted"), "{deleted:?}");
    let again = ctl.run(&["subscriptions", "delete", "orders", "shipping"]).await;
    assert!(again.ok().contains("did not exist"), "{again:?}");
    let deleted = ctl.run(&["topics", "delete", "orders"]).await;
    assert!(deleted.ok().contains("topic orders deleted"), "{deleted:?}");
    let gone = ctl.run(&["topics", "show", "orders"]).await;
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(gone.stderr.starts_with("egctl: 404 Not Found: "), "{gone:?}");
    assert!(gone.stderr.contains("orders"), "{gone:?}");
    assert_eq!(gone.stderr.lines().count(), 1, "not one line: {gone:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_exit_non_zero_with_a_one_line_message() {
    let system = System::start(Options::default().senders(0)).await;

    let wrong = Egctl::for_system(&system).env("EGCTL_TOKEN", "not-the-token");
    let run = wrong.run(&["topics", "list"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("401"), "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
    assert!(!run.stderr.contains("not-the-token"), "the token was printed: {run:?}");

    // A port nothing listens on.
    let refusing = RefusingPort::new();
    let closed = refusing.url();
    let run = Egctl::for_system(&system)
        .env("EGCTL_URL", &closed)
        .run(&["topics", "list"])
        .await;
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains(&closed), "the URL is not named: {run:?}");

    let run = Egctl::new()
        .env("EGCTL_URL", system.ingress_url())
        .run(&["topics", "list"])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("EGCTL_TOKEN") && run.stderr.contains("--token"),
        "{run:?}"
    );

    let ctl = Egctl::for_system(&system);
    let run = ctl
        .run(&[
            "subscriptions",
            "create",
            "missing",
            "sub",
            "--endpoint",
            "http://127.0.0.1:9/x",
        ])
        .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("404"), "{run:?}");
    ctl.run(&["topics", "create", "topic1"]).await.ok();
    let run = ctl
        .run(&[
            "subscriptions",
            "create",
            "topic1",
            "sub",
            "--endpoint",
            "http://127.0.0.1:9/x",
            "--max-attempts",
            "99",
        ])
        .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("400") && run.stderr.contains("maxDeliveryAttempts"),
        "{run:?}"
    );
    let run = ctl
        .run(&["topics", "create", "topic2", "--file", "/nonexistent/topic.json"])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("/nonexistent/topic.json"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_beat_environment_beat_config_file() {
    let system = System::start(Options::default().senders(0)).await;
    let refusing = RefusingPort::new();
    let closed = refusing.url();

    // The default config file, with a token file relative to it.
    let ctl = Egctl::new();
    ctl.file("config/egctl/token", &format!("{ADMIN_TOKEN}\n"));
    ctl.file(
        "config/egctl/config.toml",
        &format!("url = \"{}\"\ntoken_file = \"token\"\n", system.ingress_url()),
    );
    ctl.run(&["topics", "list"]).await.ok();

    // The environment beats the file…
    let run = Egctl::new().env("EGCTL_TOKEN", "wrong");
    run.file("config/egctl/token", ADMIN_TOKEN);
    run.file(
        "config/egctl/config.toml",
        &format!("url = \"{}\"\ntoken_file = \"token\"\n", system.ingress_url()),
    );
    let answer = run.run(&["topics", "list"]).await;
    assert_eq!(answer.code, 1, "EGCTL_TOKEN did not win over the file: {answer:?}");
    assert!(answer.stderr.contains("401"), "{answer:?}");
    // …and flags beat the environment.
    run.run(&["topics", "list", "--token", ADMIN_TOKEN]).await.ok();
    let token_file = run.file("flag-token", ADMIN_TOKEN);
    run.run(&["topics", "list", "--token-file", &token_file]).await.ok();

    let env_url = Egctl::new().env("EGCTL_URL", &closed);
    env_url.file(
        "config/egctl/config.toml",
        &format!("url = \"{}\"\ntoken = \"{ADMIN_TOKEN}\"\n", system.ingress_url()),
    );
    let answer = env_url.run(&["topics", "list"]).await;
    assert_eq!(answer.code, 3, "EGCTL_URL did not win over the file: {answer:?}");
    env_url
        .run(&["topics", "list", "--url", system.ingress_url()])
        .await
        .ok();

    // An explicitly named config file (flag or EGCTL_CONFIG) beats the default one.
    let named = Egctl::new();
    named.file(
        "config/egctl/config.toml",
        &format!("url = \"{closed}\"\ntoken = \"x\"\n"),
    );
    let other = named.file(
        "elsewhere.toml",
        &format!("url = \"{}\"\ntoken = \"{ADMIN_TOKEN}\"\n", system.ingress_url()),
    );
    named.run(&["topics", "list", "--config", &other]).await.ok();
    let named = named.env("EGCTL_CONFIG", &other);
    named.run(&["topics", "list"]).await.ok();
    let run = named
        .run(&["topics", "list", "--config", "/nonexistent/egctl.toml"])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_and_status_show_waiting_work() {
    // No sender: published deliveries wait in the ready streams.
    let system = System::start(Options::default().senders(0)).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let ctl = Egctl::for_system(&system);
    ctl.run(&["topics", "create", "cloud", "--input-schema", "CloudEventSchemaV1_0"])
        .await
        .ok();
    ctl.run(&["subscriptions", "create", "cloud", "sub", "--endpoint", receiver.url()])
        .await
        .ok();
    ctl.run(&["publish", "cloud", "--type", "A", "--subject", "/a"])
        .await
        .ok();
    let batch = json!([
        {"specversion": "1.0", "id": "b1", "type": "B", "source": "/t", "data": {}},
        {"specversion": "1.0", "id": "b2", "type": "B", "source": "/t", "data": {}},
    ]);
    let file = ctl.file("batch.json", &batch.to_string());
    let published = ctl.run(&["publish", "cloud", "--file", &file]).await;
    assert!(published.ok().contains("b1, b2"), "{published:?}");

    let queues = ctl.run(&["queues", "--json"]).await.json();
    assert_eq!(queues["total"]["ready"], 3, "{queues}");
    assert_eq!(queues["partitions"].as_array().map(Vec::len), Some(2), "{queues}");
    let human = ctl.run(&["queues"]).await;
    let sender_line = human
        .ok()
        .lines()
        .find(|l| l.starts_with("eg-sender"))
        .unwrap_or_default();
    assert_eq!(sender_line.split_whitespace().nth(1), Some("3"), "{human:?}");
    assert!(human.stdout.contains("PARTITION"), "{human:?}");

    let status = ctl.run(&["status"]).await;
    assert!(!status.ok().trim().is_empty(), "{status:?}");
    ctl.run(&["status", "--json"]).await.json();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_subscription_holds_its_events_until_resumed() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let ctl = Egctl::for_system(&system);
    ctl.run(&["topics", "create", "orders"]).await.ok();
    ctl.run(&[
        "subscriptions",
        "create",
        "orders",
        "audit",
        "--endpoint",
        receiver.url(),
    ])
    .await
    .ok();

    let paused = ctl.run(&["subscriptions", "pause", "orders", "audit"]).await;
    assert!(paused.ok().contains("paused"), "{paused:?}");
    let shown = ctl
        .run(&["subscriptions", "show", "orders", "audit", "--json"])
        .await
        .json();
    assert_eq!(shown["properties"]["paused"], true, "{shown}");
    ctl.run(&["publish", "orders", "--type", "A", "--subject", "/a", "--id", "held"])
        .await
        .ok();
    // The sender sets the delivery aside as paused instead of attempting it.
    until_json(&ctl, &["queues", "--json"], "a paused delivery", |q| {
        q["total"]["paused"].as_u64() == Some(1)
    })
    .await;
    assert_eq!(receiver.count(), 0, "delivered while paused");

    let resumed = ctl.run(&["subscriptions", "resume", "orders", "audit"]).await;
    assert!(resumed.ok().contains("resumed"), "{resumed:?}");
    receiver.wait_for(1, DEADLINE).await;
    assert_eq!(receiver.delivered_ids(), ["held"]);
    let shown = ctl
        .run(&["subscriptions", "show", "orders", "audit", "--json"])
        .await
        .json();
    assert_eq!(shown["properties"]["paused"], false, "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_is_started_followed_listed_and_a_bad_one_refused() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let ctl = Egctl::for_system(&system);
    ctl.run(&[
        "topics",
        "create",
        "orders",
        "--archive-container",
        "replays",
        "--archive-retention-days",
        "1",
    ])
    .await
    .ok();
    ctl.run(&[
        "subscriptions",
        "create",
        "orders",
        "audit",
        "--endpoint",
        receiver.url(),
    ])
    .await
    .ok();
    for (id, event_type) in [("a-1", "A"), ("b-1", "B")] {
        ctl.run(&["publish", "orders", "--type", event_type, "--subject", "/s", "--id", id])
            .await
            .ok();
    }
    receiver.wait_for(2, DEADLINE).await;

    let started = ctl
        .run(&[
            "replays",
            "start",
            "orders",
            "audit",
            "--from",
            "10m",
            "--event-type",
            "A",
            "--follow",
        ])
        .await;
    let shown = started.ok();
    assert!(shown.contains("Succeeded"), "{started:?}");
    assert!(
        started.stderr.contains("replayed of"),
        "progress on stderr: {started:?}"
    );
    receiver.wait_for(3, DEADLINE).await;
    let replayed: Vec<_> = receiver
        .received()
        .into_iter()
        .filter(|r| r.header("aeg-replay-job").is_some())
        .flat_map(|r| r.event_ids())
        .collect();
    assert_eq!(replayed, ["a-1"], "only the type asked for");

    let list = ctl.run(&["replays", "list", "orders", "audit", "--json"]).await.json();
    let id = list["value"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(list["value"][0]["progress"]["replayed"], 1, "{list}");
    let table = ctl.run(&["replays", "list", "orders", "audit"]).await;
    assert!(table.ok().contains(&id), "{table:?}");
    let cancelled = ctl.run(&["replays", "cancel", "orders", "audit", &id]).await;
    assert!(
        cancelled.ok().contains("Succeeded"),
        "an ended job keeps its end: {cancelled:?}"
    );

    let future = ctl
        .run(&[
            "replays",
            "start",
            "orders",
            "audit",
            "--from",
            "10m",
            "--to",
            "2999-01-01T00:00:00Z",
        ])
        .await;
    assert_ne!(future.code, 0, "{future:?}");
    assert!(future.stderr.contains("to: must not be in the future"), "{future:?}");
}

/// The line of `egctl history`'s table for `subscription`'s step in `state`.
fn history_row<'a>(table: &'a str, subscription: &str, state: &str) -> &'a str {
    table
        .lines()
        .find(|line| line.starts_with(&format!("{subscription} ")) && line.contains(state))
        .unwrap_or_else(|| panic!("no {state} row of {subscription}:\n{table}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_rows_say_why_a_delivery_waits_and_until_when() {
    // One failure puts an endpoint on probation, for an hour: the retry is held back.
    let system = System::start(
        Options::default()
            .env("EG__PROBATION__FAILURE_THRESHOLD", "1")
            .env("EG__PROBATION__LENGTHS", "*=1h"),
    )
    .await;
    let failing = Receiver::start(Behaviour::Status(500)).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let ctl = Egctl::for_system(&system);
    ctl.run(&["topics", "create", "orders"]).await.ok();
    for (name, endpoint) in [("flaky", failing.url()), ("parked", receiver.url())] {
        ctl.run(&["subscriptions", "create", "orders", name, "--endpoint", endpoint])
            .await
            .ok();
    }
    ctl.run(&["subscriptions", "pause", "orders", "parked"]).await.ok();
    ctl.run(&["publish", "orders", "--type", "A", "--subject", "/a", "--id", "ev-1"])
        .await
        .ok();

    let history = until_json(
        &ctl,
        &["history", "orders", "ev-1", "--json"],
        "a held-back step of flaky and a paused step of parked",
        |h| {
            let steps = h["value"].as_array().cloned().unwrap_or_default();
            let has = |sub: &str, state: &str| steps.iter().any(|s| s["subscription"] == sub && s["state"] == state);
            has("flaky", "HeldBack") && has("parked", "Paused")
        },
    )
    .await;
    let steps = history["value"].as_array().unwrap();
    let held = steps.iter().find(|s| s["state"] == "HeldBack").unwrap();
    assert_eq!(held["heldBecause"], "EndpointProbation", "{held}");
    let held_until = held["heldUntil"]
        .as_str()
        .unwrap_or_else(|| panic!("no heldUntil: {held}"));
    assert!(held["nextAttemptTime"].is_string(), "{held}");
    let paused = steps.iter().find(|s| s["state"] == "Paused").unwrap();
    assert!(
        paused["nextAttemptTime"].is_null(),
        "a paused step waits for the resume: {paused}"
    );
    let expires = paused["expiresAt"]
        .as_str()
        .unwrap_or_else(|| panic!("no expiresAt: {paused}"));

    let table = ctl.run(&["history", "orders", "ev-1"]).await;
    let table = table.ok();
    let held_row = history_row(table, "flaky", "HeldBack");
    assert!(
        held_row.contains(&format!("endpoint on probation until {held_until}")),
        "{held_row}"
    );
    let paused_row = history_row(table, "parked", "Paused");
    assert!(
        paused_row.contains(&format!("waits for resume (expires at {expires})")),
        "{paused_row}"
    );
    assert!(paused_row.contains("subscription paused"), "{paused_row}");
    assert_eq!(receiver.count(), 0, "delivered while paused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_redriven_once_and_purged() {
    let system = System::start(Options::default()).await;
    // 400 is not retried: the first attempts dead-letter at once; then the endpoint is
    // "fixed" and answers 200.
    let receiver = Receiver::start(Behaviour::FailFirst {
        failures: 2,
        status: 400,
    })
    .await;
    let ctl = Egctl::for_system(&system);
    ctl.run(&["topics", "create", "orders"]).await.ok();
    ctl.run(&[
        "subscriptions",
        "create",
        "orders",
        "audit",
        "--endpoint",
        receiver.url(),
        "--dead-letter-container",
        "audit-dl",
    ])
    .await
    .ok();
    ctl.run(&["publish", "orders", "--type", "A", "--subject", "/a", "--id", "ev-1"])
        .await
        .ok();
    receiver.wait_for(1, DEADLINE).await;
    ctl.run(&["publish", "orders", "--type", "A", "--subject", "/a", "--id", "ev-2"])
        .await
        .ok();
    receiver.wait_for(2, DEADLINE).await;

    let listed = until_json(
        &ctl,
        &["deadletters", "list", "orders", "audit", "--json"],
        "the dead letters listed",
        |l| l["value"].as_array().is_some_and(|v| v.len() == 2),
    )
    .await;
    // Oldest first.
    let record = &listed["value"][0];
    assert_eq!(record["eventId"], "ev-1", "{listed}");
    assert_eq!(record["deadLetterReason"], "NonRetriableFailure", "{listed}");
    assert_eq!(record["lastHttpStatusCode"], 400, "{listed}");
    let record_id = record["id"].as_str().unwrap().to_owned();
    let human = ctl
        .run(&["deadletters", "list", "orders", "audit", "--from", "1h"])
        .await;
    assert!(
        human.ok().contains(&record_id) && human.stdout.contains("NonRetriableFailure"),
        "{human:?}"
    );
    let none = ctl
        .run(&["deadletters", "list", "orders", "audit", "--to", "1h", "--json"])
        .await
        .json();
    assert_eq!(
        none["value"],
        json!([]),
        "--to 1h (an hour ago) still listed it: {none}"
    );
    let shown = ctl
        .run(&["deadletters", "show", "orders", "audit", &record_id, "--json"])
        .await
        .json();
    assert_eq!(shown["eventId"], "ev-1", "{shown}");
    assert_eq!(shown["record"]["id"], "ev-1", "{shown}");
    let first = ctl
        .run(&["deadletters", "list", "orders", "audit", "--limit", "1"])
        .await;
    assert_eq!(first.ok().lines().count(), 2, "a header and one record: {first:?}");
    assert!(first.stderr.contains("more dead letters match"), "{first:?}");

    // One record per call: egctl loops until none remains, showing progress.
    let run = ctl
        .run(&[
            "deadletters",
            "redrive",
            "orders",
            "audit",
            "--all",
            "--chunk",
            "1",
            "--json",
        ])
        .await;
    assert_eq!(run.json(), json!({"redriven": 2, "remaining": 0}));
    assert!(run.stderr.contains("redriven 1, 1 remaining"), "{run:?}");
    receiver.wait_for(4, DEADLINE).await;
    let mut delivered = receiver.delivered_ids();
    delivered.sort();
    assert_eq!(delivered, ["ev-1", "ev-2"], "redriven and delivered once each");

    // A record is redriven at most once.
    let again = ctl.run(&["deadletters", "redrive", "orders", "audit", "--all"]).await;
    assert!(again.ok().contains("redriven 0 dead letters"), "{again:?}");
    tokio::time::sleep(Duration::from_secs(2)).await; // nothing should arrive: give it the chance
    assert_eq!(receiver.count(), 4, "a second redrive delivered again");

    let history = until_json(
        &ctl,
        &["history", "orders", "ev-1", "--json"],
        "the redriven delivery in the history",
        |h| {
            h["value"]
                .as_array()
                .is_some_and(|v| v.iter().any(|a| a["state"] == "Delivered"))
        },
    )
    .await;
    let states: Vec<&str> = history["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["state"].as_str())
        .collect();
    assert!(states.contains(&"DeadLettered"), "{history}");
    assert!(
        history["value"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["httpStatus"] == 400),
        "{history}"
    );
    let human = ctl.run(&["history", "orders", "ev-1", "--subscription", "audit"]).await;
    assert!(
        human.ok().contains("DeadLettered") && human.stdout.contains("Delivered"),
        "{human:?}"
    );
    let missing = ctl.run(&["history", "orders", "no-such-event"]).await;
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(missing.stderr.contains("404"), "{missing:?}");

    // Purge asks first; without a terminal it refuses unless told --yes.
    let refused = ctl.run(&["deadletters", "purge", "orders", "audit", "--all"]).await;
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("--yes"), "{refused:?}");
    let purged = ctl
        .run(&["deadletters", "purge", "orders", "audit", "--id", &record_id, "--yes"])
        .await;
    assert!(
        purged.ok().contains("purged 1 dead letter of orders/audit"),
        "{purged:?}"
    );
    let purged = ctl
        .run(&[
            "deadletters",
            "purge",
            "orders",
            "audit",
            "--event-id",
            "ev-2",
            "--yes",
            "--json",
        ])
        .await
        .json();
    assert_eq!(purged, json!({"purged": 1, "remaining": 0}));
    let listed = ctl
        .run(&["deadletters", "list", "orders", "audit", "--json"])
        .await
        .json();
    assert_eq!(listed["value"], json!([]), "{listed}");
}

/// Under `just egctl` (EGCTL_HINT_PREFIX) hints name the command to type there, a
/// failed validation is said once (stderr), not also on stdout, and a remark that is no
/// failure does not start `egctl:` as errors do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_just_egctl_hints_say_just_egctl_and_a_failed_validation_is_said_once() {
    let system = System::start(Options::default()).await;
    let receiver =
        eg_system_tests::Receiver::start_with(Behaviour::Status(200), eg_system_tests::Validation::Ignore).await;
    let ctl = Egctl::for_system(&system).env("EGCTL_HINT_PREFIX", "just egctl");
    ctl.run(&["topics", "create", "orders"]).await.ok();

    let why = "the endpoint answered 200 OK with an empty body";
    let created = ctl
        .run(&[
            "subscriptions",
            "create",
            "orders",
            "audit",
            "--endpoint",
            receiver.url(),
            "--dead-letter-container",
            "audit-dl",
        ])
        .await;
    assert_eq!(created.code, 4, "{created:?}");
    assert!(
        created.stdout.contains("subscription orders/audit created"),
        "{created:?}"
    );
    assert_eq!(
        format!("{}{}", created.stdout, created.stderr).matches(why).count(),
        1,
        "the reason is not said exactly once: {created:?}"
    );
    assert!(
        created
            .stderr
            .starts_with("egctl: subscription orders/audit is AwaitingManualAction"),
        "{created:?}"
    );
    assert!(
        created
            .stderr
            .contains("`just egctl subscriptions validate orders audit`")
            && !created.stderr.contains("`egctl "),
        "{created:?}"
    );

    let validated = ctl.run(&["subscriptions", "validate", "orders", "audit"]).await;
    assert_eq!(validated.code, 4, "{validated:?}");
    assert_eq!(validated.stdout, "", "said on stderr, not twice: {validated:?}");
    assert_eq!(validated.stderr.matches(why).count(), 1, "{validated:?}");
    assert!(validated.stderr.contains("is AwaitingManualAction"), "{validated:?}");
    let json = ctl
        .run(&["subscriptions", "validate", "orders", "audit", "--json"])
        .await;
    assert_eq!(json.code, 4, "{json:?}");
    let answer: Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(
        answer["properties"]["provisioningMessage"]
            .as_str()
            .is_some_and(|m| m.contains("`egctl subscriptions validate orders audit`")),
        "--json output is the API's, as it came: {answer}"
    );

    let listed = ctl.run(&["deadletters", "list", "orders", "audit"]).await;
    listed.ok();
    assert!(
        listed.stderr.starts_with(
            "note: orders/audit dead-letters to local / audit-dl; `just egctl subscriptions show orders audit`"
        ),
        "{listed:?}"
    );
    assert!(!listed.stderr.contains("egctl:"), "a note is no error: {listed:?}");
}

/// A namespace topic is shown with what a namespace client needs: eg's base URL as the
/// namespace endpoint, and the `:publish` route, which takes a CloudEvent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_topic_shows_its_namespace_endpoint_and_a_publish_route_that_works() {
    let system = System::start(Options::default()).await;
    let ctl = Egctl::for_system(&system);
    let created = ctl.run(&["topics", "create", "sensors", "--namespace"]).await;
    let shown = created.ok();
    let field = |name: &str| {
        shown
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}:")))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {name} in {shown}"))
            .to_owned()
    };
    let base = system.ingress_url().trim_end_matches('/');
    assert_eq!(field("namespaceEndpoint"), base, "{shown}");
    assert!(!shown.contains("/api/events"), "the custom-topic URL is shown: {shown}");
    assert!(
        shown.contains(&format!("takes endpoint {base} and topic name sensors")),
        "{shown}"
    );
    let list = ctl.run(&["topics", "list"]).await;
    let row = list.ok().lines().find(|l| l.starts_with("sensors")).unwrap_or_default();
    assert!(row.ends_with(base), "{list:?}");

    let publish = field("publish");
    let url = publish.strip_prefix("POST ").unwrap_or_else(|| panic!("{publish}"));
    let keys = ctl.run(&["topics", "keys", "sensors", "--json"]).await.json();
    let answer = reqwest::Client::new()
        .post(url)
        .header(
            "authorization",
            format!("SharedAccessKey {}", keys["key1"].as_str().unwrap()),
        )
        .header("content-type", "application/cloudevents+json")
        .body(json!({"specversion": "1.0", "id": "1", "source": "/egctl-test", "type": "T"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{publish}: {:?}", answer.text().await);
}
