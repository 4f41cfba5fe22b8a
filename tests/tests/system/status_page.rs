//! The status page in a real browser: headless Chromium driven through chromedriver
//! (WebDriver) against a whole running system. The first test signs in through the form
//! of a subscription's page (landing on that page) and with `/status?token=`, checks that
//! topics, subscriptions, rates, failures by outcome, dead letters and queue depths
//! show, that the page refreshes itself without a reload, and that a wrong token gets
//! the 401 sign-in page; also `GET /admin/status` (JSON) and the refusals. The second is
//! an operator at work: a link to a subscription's page with `?token=`, a subscription
//! waiting for validation and the events it missed, a click through to a subscription's
//! page (settings, recent deliveries, an event's history), pause, redrive with its
//! confirmation, resume, validate again, one dead letter read as one, and actions
//! refused without the form token or from another site. The third is a namespace topic
//! with a queue subscription whose consumers hold locks: the overview marks the topic and
//! shows available and locked events instead of an endpoint, and the subscription's page
//! shows its queue settings without pause or validate. The last needs no browser: what
//! subscriptions waiting for validation missed, in `GET /admin/status` and `/metrics`.
//!
//! Needs `chromium` and `chromedriver` (Debian: `apt-get install chromium chromium-driver`;
//! CI installs them). Without them the test fails and says so: it never skips.
//! `EG_UPDATE_SCREENSHOT=1` saves the signed-in page to `docs/status-page.png` and a
//! subscription's page to `docs/status-page-subscription.png`.

use eg_system_tests::{
    ADMIN_TOKEN, Behaviour, DEADLINE, Options, Receiver, System, Validation, dead_letter_to, event, eventually, metric,
    numbered_events, subscription,
};
use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where a program is: `$<variable>` if set, else the first of `names` on `PATH`.
fn find_program(variable: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(variable) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// chromedriver, started on a free port; killed when dropped.
struct Driver {
    child: Child,
    url: String,
    chromium: PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    /// Finds Chromium and chromedriver (or fails the test saying how to install them)
    /// and starts chromedriver.
    async fn start() -> Self {
        let install = "install them (Debian: `apt-get install -y chromium chromium-driver`; CI's .ci/run does), \
                       or point CHROME_BIN and CHROMEDRIVER at them";
        let chromium = find_program("CHROME_BIN", &["chromium", "chromium-browser", "google-chrome"])
            .unwrap_or_else(|| panic!("the status-page test needs Chromium, which is not on PATH: {install}"));
        let chromedriver = find_program("CHROMEDRIVER", &["chromedriver"])
            .unwrap_or_else(|| panic!("the status-page test needs chromedriver, which is not on PATH: {install}"));
        // reqwest is built without a default TLS crypto provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .unwrap();
            let child = Command::new(&chromedriver)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {} ({e}): {install}", chromedriver.display()));
            let mut driver = Driver {
                child,
                url: format!("http://127.0.0.1:{port}"),
                chromium: chromium.clone(),
            };
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline {
                if driver.child.try_wait().unwrap().is_some() {
                    break; // the port was taken meanwhile: try another
                }
                let ready = http.get(format!("{}/status", driver.url)).send().await;
                if let Ok(answer) = ready {
                    let body: Value =
                        serde_json::from_str(&answer.text().await.unwrap_or_default()).unwrap_or_default();
                    if body["value"]["ready"] == true {
                        return driver;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        panic!("chromedriver ({}) did not start", chromedriver.display());
    }

    /// A new headless Chromium session.
    async fn browser(&self) -> Client {
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": self.chromium.display().to_string(),
                "args": ["--headless", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                         "--window-size=1280,1000", "--force-device-scale-factor=1", "--no-proxy-server"],
            },
        });
        let capabilities = capabilities.as_object().cloned().unwrap();
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("cannot start headless Chromium through chromedriver: {e}"))
    }
}

/// The text of the first element matching `css`, if there is one now.
/// The page replaces its tables in place on every refresh, so finding an element and then
/// reading it can meet a node already gone; one script finds and reads in a single step.
async fn text(browser: &Client, css: &str) -> Option<String> {
    let script = "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;";
    let value = browser.execute(script, vec![css.into()]).await.ok()?;
    value.as_str().map(|t| t.trim().to_string())
}

/// Waits until the element matching `css` shows text that satisfies `wanted`; returns it.
async fn wait_text(browser: &Client, css: &str, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let wanted = &wanted;
    eventually(DEADLINE, &format!("{what} (`{css}`)"), || async move {
        text(browser, css).await.filter(|t| wanted(t))
    })
    .await
}

/// Types `token` into the sign-in page's form and submits it.
async fn sign_in_with_form(browser: &Client, token: &str) {
    let field = eventually(DEADLINE, "the sign-in form", || async {
        browser.find(Locator::Css("form input[name=\"token\"]")).await.ok()
    })
    .await;
    field.send_keys(token).await.unwrap();
    browser
        .find(Locator::Css("form button[type=\"submit\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// The number in a count as the page writes it (`1,234`).
fn number(text: &str) -> u64 {
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    digits.parse().unwrap_or(0)
}

async fn admin_status(system: &System) -> Value {
    let (status, body) = system.get("/status").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn subscription_of<'a>(status: &'a Value, topic: &str, name: &str) -> &'a Value {
    status["topics"]
        .as_array()
        .and_then(|topics| topics.iter().find(|t| t["name"] == topic))
        .and_then(|t| t["subscriptions"].as_array())
        .and_then(|subs| subs.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no subscription {topic}/{name} in {status}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_the_system_live_in_a_real_browser() {
    // First, so a machine without a browser fails at once, saying what to install.
    let driver = Driver::start().await;
    let system = System::start(
        Options::default()
            .senders(1)
            .env("EG__PROBATION__FAILURE_THRESHOLD", "3")
            .env("EG__PROBATION__LENGTHS", "Busy=2m,*=2m"),
    )
    .await;
    let ok = Receiver::start(Behaviour::Status(200)).await;
    let busy = Receiver::start(Behaviour::Status(503)).await;
    let refusing = Receiver::start(Behaviour::Status(400)).await;
    let silent = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    system.create_topic("orders").await;
    system.create_topic("billing").await;
    // Waits for validation (the endpoint does not answer the handshake): what the topic
    // accepts is unmatched.
    system.create_topic("signups").await;
    let (status, answer) = system
        .put_subscription("signups", "welcome", &subscription(silent.url(), json!({})))
        .await;
    assert!(status.is_success(), "{status} {answer}");
    for (topic, name, url, extra) in [
        ("orders", "fulfillment", ok.url(), json!({})),
        ("orders", "analytics", ok.url(), json!({})),
        ("orders", "legacy-erp", busy.url(), json!({})),
        ("billing", "invoices", ok.url(), json!({})),
        (
            "billing",
            "tax-export",
            refusing.url(),
            json!({"deadLetterDestination": dead_letter_to("dead-letters")}),
        ),
    ] {
        system.create_subscription(topic, name, subscription(url, extra)).await;
    }
    for batch in 0..3 {
        system
            .publish_ok("orders", &Value::from(numbered_events(&format!("o{batch}"), 0..5)))
            .await;
        system
            .publish_ok("billing", &Value::from(numbered_events(&format!("b{batch}"), 0..4)))
            .await;
    }
    system
        .publish_ok("signups", &Value::from(numbered_events("s", 0..2)))
        .await;

    // The JSON first: once every tier's counts reached Redis, the page has them too.
    let status = eventually(
        DEADLINE,
        "rates, failures, dead letters and probation in /admin/status",
        || async {
            let status = admin_status(&system).await;
            let rates = &status["rates"];
            // All 29 published: the ingress may have flushed them in two goes.
            let ready = rates["lastMinute"]["published"] == 29
                && rates["published"].as_f64() > Some(0.0)
                && rates["delivered"].as_f64() > Some(0.0)
                && rates["failuresByOutcome"]["Busy"].as_f64() > Some(0.0)
                && rates["failuresByOutcome"]["BadRequest"].as_f64() > Some(0.0)
                && rates["deadLettered"].as_f64() > Some(0.0)
                && subscription_of(&status, "billing", "tax-export")["deadLetters"].as_u64() > Some(0)
                && !subscription_of(&status, "orders", "legacy-erp")["probation"].is_null();
            ready.then_some(status)
        },
    )
    .await;
    let orders = &status["topics"][1];
    assert_eq!(status["topics"][2]["unmatchedLastHour"], 2, "{status}");
    assert_eq!(orders["name"], "orders", "topics are sorted: {status}");
    assert_eq!(orders["inputSchema"], "EventGridSchema");
    assert!(orders["publishRate"].as_f64() > Some(0.0), "{status}");
    let erp = subscription_of(&status, "orders", "legacy-erp");
    assert_eq!(erp["paused"], false);
    assert_eq!(erp["provisioningState"], "Succeeded");
    assert_eq!(erp["probation"]["state"], "Probation", "{erp}");
    assert!(erp["probation"]["until"].is_string(), "{erp}");
    assert!(erp["failureRate"].as_f64() > Some(0.0), "{erp}");
    assert!(subscription_of(&status, "orders", "fulfillment")["deliveryRate"].as_f64() > Some(0.0));
    assert!(subscription_of(&status, "orders", "fulfillment")["probation"].is_null());
    assert_eq!(
        status["queues"]["partitions"].as_array().map(Vec::len),
        Some(2),
        "{status}"
    );
    for field in ["ready", "inFlight", "retry", "paused", "deadLetterBacklog"] {
        assert!(
            status["queues"]["total"][field].is_u64(),
            "queues.total.{field}: {status}"
        );
    }

    // The refusals, seen by a plain HTTP client.
    let http = system.http();
    let base = system.ingress_url();
    let answer = http.get(format!("{base}/status")).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    assert!(answer.text().await.unwrap().contains("Sign in to the status page"));
    let answer = http.get(format!("{base}/status/live")).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    let answer = http
        .get(format!("{base}/admin/status"))
        .bearer_auth("not-the-token")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    let answer = http
        .get(format!("{base}/status"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK, "a bearer token opens the page too");
    let policy = answer.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(policy.contains("default-src 'none'"), "{policy}");

    let browser = driver.browser().await;

    // A wrong token: the 401 sign-in page, saying so.
    browser.goto(&format!("{base}/status?token=wrong")).await.unwrap();
    wait_text(&browser, "#wrong-token", "the wrong-token message", |t| {
        t.contains("not this deployment's admin token")
    })
    .await;
    assert!(
        browser.find(Locator::Css("#live")).await.is_err(),
        "no status behind a wrong token"
    );
    let answer = http.get(format!("{base}/status?token=wrong")).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);

    // A subscription's page opened signed out: the sign-in page, whose form signs in and
    // lands on that page (not the overview), the token gone from the address bar.
    let erp_page = "/status/topics/orders/subscriptions/legacy-erp";
    browser.goto(&format!("{base}{erp_page}")).await.unwrap();
    sign_in_with_form(&browser, "wrong").await;
    wait_text(&browser, "#wrong-token", "the wrong-token message", |t| {
        t.contains("not this deployment's admin token")
    })
    .await;
    assert_eq!(browser.current_url().await.unwrap().path(), erp_page);
    sign_in_with_form(&browser, ADMIN_TOKEN).await;
    wait_text(&browser, "#state h1", "the subscription's page, signed in", |t| {
        t.contains("legacy-erp")
    })
    .await;
    let url = browser.current_url().await.unwrap();
    assert_eq!((url.path(), url.query()), (erp_page, None), "{url}");

    // Sign in: a cookie for /status, and the token is gone from the address bar.
    browser
        .goto(&format!("{base}/status?token={ADMIN_TOKEN}"))
        .await
        .unwrap();
    let url = browser.current_url().await.unwrap();
    assert_eq!(url.path(), "/status");
    assert_eq!(url.query(), None, "the token must leave the address bar: {url}");
    let cookies = browser.get_all_cookies().await.unwrap();
    let cookie = cookies
        .iter()
        .find(|c| c.name() == "eg_status")
        .unwrap_or_else(|| panic!("no eg_status cookie in {cookies:?}"));
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(cookie.path(), Some("/status"));
    assert_ne!(cookie.value(), ADMIN_TOKEN, "the cookie must not be the token");

    // Everything shows.
    for topic in ["orders", "billing"] {
        wait_text(
            &browser,
            &format!("tbody[data-topic=\"{topic}\"] tr.topic .name"),
            "a topic",
            |t| t == topic,
        )
        .await;
    }
    for (topic, sub) in [
        ("orders", "fulfillment"),
        ("orders", "analytics"),
        ("orders", "legacy-erp"),
        ("billing", "invoices"),
        ("billing", "tax-export"),
    ] {
        let row = format!("tr[data-topic=\"{topic}\"][data-subscription=\"{sub}\"]");
        wait_text(&browser, &format!("{row} td.sub a.subname"), "a subscription", |t| {
            t == sub
        })
        .await;
        wait_text(&browser, &format!("{row} [data-field=\"state\"]"), "its state", |t| {
            t == "Active"
        })
        .await;
        wait_text(
            &browser,
            &format!("{row} [data-field=\"provisioning\"]"),
            "its provisioning",
            |t| t == "Succeeded",
        )
        .await;
    }
    wait_text(
        &browser,
        "#waiting tr[data-waiting=\"signups/welcome\"] [data-field=\"missed\"]",
        "a subscription waiting for validation, and the events it missed",
        |t| t == "2",
    )
    .await;
    let erp = "tr[data-topic=\"orders\"][data-subscription=\"legacy-erp\"]";
    wait_text(
        &browser,
        &format!("{erp} [data-field=\"probation\"]"),
        "probation",
        |t| t.starts_with("Probation until"),
    )
    .await;
    wait_text(
        &browser,
        &format!("{erp} [data-field=\"failure-rate\"]"),
        "a failure rate",
        |t| t != "0",
    )
    .await;
    let fulfillment = "tr[data-topic=\"orders\"][data-subscription=\"fulfillment\"]";
    wait_text(
        &browser,
        &format!("{fulfillment} [data-field=\"probation\"]"),
        "a healthy endpoint",
        |t| t == "Healthy",
    )
    .await;
    wait_text(
        &browser,
        &format!("{fulfillment} [data-field=\"delivery-rate\"]"),
        "a delivery rate",
        |t| t != "0",
    )
    .await;
    wait_text(
        &browser,
        "tbody[data-topic=\"orders\"] [data-field=\"publish-rate\"]",
        "a publish rate",
        |t| t != "0",
    )
    .await;
    let tax = "tr[data-topic=\"billing\"][data-subscription=\"tax-export\"]";
    // Dead letters as egctl counts them: waiting (not redriven), of all kept.
    let waiting = wait_text(
        &browser,
        &format!("{tax} [data-field=\"not-redriven\"]"),
        "dead letters waiting",
        |t| number(t) > 0,
    )
    .await;
    let kept = text(&browser, &format!("{tax} [data-field=\"kept\"]")).await.unwrap();
    assert!(number(&kept) >= number(&waiting), "{waiting} waiting, {kept}");
    for total in ["published", "delivered", "failed", "deadlettered"] {
        wait_text(&browser, &format!("#rate-{total}"), "a total rate", |t| t != "0").await;
    }
    for outcome in ["Busy", "BadRequest"] {
        wait_text(
            &browser,
            &format!("#failures tr[data-outcome=\"{outcome}\"] [data-field=\"count\"]"),
            "failures by outcome",
            |t| number(t) > 0,
        )
        .await;
    }
    wait_text(
        &browser,
        "#dead-letters tr[data-reason=\"NonRetriableFailure\"]",
        "a reason",
        |t| t.contains("Dead-lettered"),
    )
    .await;
    for partition in ["0", "1", "total"] {
        wait_text(
            &browser,
            &format!("#queues tr[data-partition=\"{partition}\"] [data-field=\"ready\"]"),
            "queue depths",
            |_| true,
        )
        .await;
    }
    // legacy-erp's deliveries wait out its endpoint's probation in the retry sets.
    wait_text(
        &browser,
        "#queues tr[data-partition=\"total\"] [data-field=\"retry\"]",
        "deliveries waiting for a retry",
        |t| number(t) > 0,
    )
    .await;

    // Live: more happens, and the page shows it without a reload.
    browser
        .execute("window.egMarker = 'not reloaded'; return true;", vec![])
        .await
        .unwrap();
    let updated = text(&browser, "#updated").await.unwrap();
    let published_before = number(&text(&browser, "[data-total=\"published\"] .unit").await.unwrap());
    system.create_topic("late-arrivals").await;
    system
        .create_subscription("late-arrivals", "archive", subscription(ok.url(), json!({})))
        .await;
    system
        .publish_ok("late-arrivals", &Value::from(numbered_events("late", 0..6)))
        .await;
    wait_text(
        &browser,
        "tbody[data-topic=\"late-arrivals\"] tr.topic .name",
        "a topic created after the page loaded",
        |t| t == "late-arrivals",
    )
    .await;
    wait_text(
        &browser,
        "[data-total=\"published\"] .unit",
        "the published count rising",
        |t| number(t) >= published_before + 6,
    )
    .await;
    wait_text(&browser, "#updated", "a newer update time", |t| t != updated).await;
    let marker = browser.execute("return window.egMarker;", vec![]).await.unwrap();
    assert_eq!(
        marker, "not reloaded",
        "the page reloaded instead of refreshing in place"
    );
    let conn = text(&browser, "#conn").await.unwrap();
    assert!(conn.starts_with("live"), "the refresh reported a problem: {conn}");

    if updating_screenshots() {
        save_screenshot(&browser, "status-page.png", true).await;
    }
    browser.close().await.unwrap();
}

fn updating_screenshots() -> bool {
    std::env::var_os("EG_UPDATE_SCREENSHOT").is_some_and(|v| v == "1")
}

/// Saves the whole page, as it is now, to docs/`name`; `live`: after one refresh.
async fn save_screenshot(browser: &Client, name: &str, live: bool) {
    // A screenshot shows the viewport: grow the window until the page fits in it.
    let js = |script: &'static str| async move {
        let value = browser.execute(script, vec![]).await.unwrap();
        u32::try_from(value.as_u64().unwrap_or(0)).unwrap_or(0)
    };
    for _ in 0..4 {
        let (page, viewport) = (
            js("return document.documentElement.scrollHeight;").await,
            js("return window.innerHeight;").await,
        );
        if page <= viewport {
            break;
        }
        let (_, _, _, window) = browser.get_window_rect().await.unwrap();
        let window = u32::try_from(window).unwrap_or(1000);
        browser
            .set_window_size(1280, (window + page - viewport).min(4000))
            .await
            .unwrap();
    }
    if live {
        // Let one refresh pass so the page is laid out at the new size with fresh numbers.
        let updated = text(browser, "#updated").await.unwrap();
        wait_text(browser, "#updated", "a refresh before the screenshot", |t| t != updated).await;
    }
    let png = browser.screenshot().await.unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(name);
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot saved to {}", path.display());
}

/// Clicks the element matching `css` (found again on each try: the overview swaps its
/// sections every 2 s) and waits until the browser is at `path`.
async fn click_to(browser: &Client, css: &str, path: &str) {
    eventually(DEADLINE, &format!("a click on `{css}` leading to {path}"), || async {
        if browser.current_url().await.ok()?.path() == path {
            return Some(());
        }
        if let Ok(element) = browser.find(Locator::Css(css)).await {
            let _ = element.click().await;
        }
        None
    })
    .await;
}

/// Clicks an action's button (a form that posts) and waits for the page it leads back to
/// to show the action's result; returns the flash message.
async fn act(browser: &Client, css: &str, wanted: &str) -> String {
    let before = browser.current_url().await.unwrap();
    browser.find(Locator::Css(css)).await.unwrap().click().await.unwrap();
    let flash = wait_text(browser, "#flash", "the action's result", |t| t.contains(wanted)).await;
    let after = browser.current_url().await.unwrap();
    assert_eq!(after.query(), None, "{before} led to {after}");
    flash
}

/// Reloads a (static) page until the element matching `css` shows what is `wanted`.
async fn wait_reloading(browser: &Client, css: &str, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let wanted = &wanted;
    eventually(DEADLINE, &format!("{what} (`{css}`), reloading"), || async move {
        let found = text(browser, css).await.filter(|t| wanted(t));
        if found.is_none() {
            browser.refresh().await.ok()?;
        }
        found
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_pauses_redrives_resumes_and_validates_from_the_status_page() {
    let driver = Driver::start().await;
    // A scaled sender: the tiers section lists both copies.
    let system = System::start(Options::default().senders(2)).await;
    let ok = Receiver::start(Behaviour::Status(200)).await;
    let refusing = Receiver::start(Behaviour::Status(400)).await;
    let silent = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    system.create_topic("billing").await;
    system.create_topic("signups").await;
    system.create_topic("payouts").await;
    // The query string may hold a secret: the page never shows it.
    let endpoint = format!("{}?code=hunter2", refusing.url());
    system
        .create_subscription(
            "billing",
            "tax-export",
            subscription(
                &endpoint,
                json!({"deadLetterDestination": dead_letter_to("dead-letters")}),
            ),
        )
        .await;
    // One dead letter, to read the page's words for one.
    system
        .create_subscription(
            "payouts",
            "ledger",
            subscription(
                refusing.url(),
                json!({"deadLetterDestination": dead_letter_to("dead-letters")}),
            ),
        )
        .await;
    // An endpoint that answers the handshake with an empty 200: it waits for validation,
    // and misses what its topic accepts meanwhile, though another subscription takes it.
    let (status, answer) = system
        .put_subscription("signups", "welcome", &subscription(silent.url(), json!({})))
        .await;
    assert!(status.is_success(), "{status} {answer}");
    system
        .create_subscription("signups", "crm", subscription(ok.url(), json!({})))
        .await;
    system
        .publish_ok("billing", &Value::from(numbered_events("tax", 0..4)))
        .await;
    system
        .publish_ok("signups", &Value::from(numbered_events("signup", 0..3)))
        .await;
    system
        .publish_ok("payouts", &Value::from(numbered_events("payout", 0..1)))
        .await;

    let status = eventually(DEADLINE, "dead letters and missed events in /admin/status", || async {
        let status = admin_status(&system).await;
        let tax = subscription_of(&status, "billing", "tax-export");
        let ledger = subscription_of(&status, "payouts", "ledger");
        let welcome = subscription_of(&status, "signups", "welcome");
        (tax["deadLettersNotRedriven"] == 4 && ledger["deadLettersNotRedriven"] == 1 && welcome["missedLastHour"] == 3)
            .then_some(status)
    })
    .await;
    let signups = status["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "signups")
        .unwrap();
    assert_eq!(signups["unmatchedLastHour"], 0, "crm took every event: {signups}");
    let tax = subscription_of(&status, "billing", "tax-export");
    let base = tax["endpointBaseUrl"].as_str().unwrap().to_owned();
    assert!(!base.contains("hunter2") && endpoint.starts_with(&base), "{tax}");
    assert!(tax["provisioningMessage"].is_null(), "{tax}");
    let welcome = subscription_of(&status, "signups", "welcome");
    assert_eq!(welcome["provisioningState"], "AwaitingManualAction", "{welcome}");
    // Every tier process announced itself (one heartbeat each, right at start).
    let copies = |status: &Value, tier: &str| {
        status["tiers"]
            .as_array()
            .and_then(|tiers| tiers.iter().find(|t| t["tier"] == tier))
            .and_then(|t| t["copies"].as_array())
            .map_or(0, Vec::len)
    };
    for (tier, expected) in [
        ("eg-ingress", 1),
        ("eg-scheduler", 1),
        ("eg-sender", 2),
        ("eg-deadletter", 1),
    ] {
        assert_eq!(copies(&status, tier), expected, "copies of {tier}: {}", status["tiers"]);
    }
    let reason = welcome["provisioningMessage"]
        .as_str()
        .unwrap_or_else(|| panic!("no reason: {welcome}"));

    let browser = driver.browser().await;
    let ingress = system.ingress_url();
    // A link to a subscription's page carrying the token signs in and lands on that page,
    // the token gone from the address bar.
    let page = "/status/topics/billing/subscriptions/tax-export";
    browser
        .goto(&format!("{ingress}{page}?token={ADMIN_TOKEN}"))
        .await
        .unwrap();
    wait_text(
        &browser,
        "#state [data-field=\"state\"]",
        "the subscription's page",
        |t| t == "Active",
    )
    .await;
    let url = browser.current_url().await.unwrap();
    assert_eq!((url.path(), url.query()), (page, None), "{url}");
    browser.goto(&format!("{ingress}/status")).await.unwrap();

    // The overview: the waiting subscription with its reason, and the events it missed.
    let waiting = "#waiting tr[data-waiting=\"signups/welcome\"]";
    wait_text(
        &browser,
        &format!("{waiting} [data-field=\"reason\"]"),
        "the reason",
        |t| t == reason,
    )
    .await;
    wait_text(
        &browser,
        &format!("{waiting} [data-field=\"missed\"]"),
        "the events it missed",
        |t| t == "3",
    )
    .await;
    wait_text(
        &browser,
        "tbody[data-topic=\"signups\"] [data-field=\"unmatched\"]",
        "the topic's unmatched count",
        |t| t.starts_with("0 unmatched"),
    )
    .await;
    let row = "tr[data-topic=\"billing\"][data-subscription=\"tax-export\"]";
    wait_text(
        &browser,
        &format!("{row} [data-field=\"endpoint\"]"),
        "the endpoint",
        |t| t == base,
    )
    .await;
    wait_text(
        &browser,
        &format!("{row} [data-field=\"not-redriven\"]"),
        "dead letters",
        |t| t == "4",
    )
    .await;
    assert!(
        !browser.source().await.unwrap().contains("hunter2"),
        "the endpoint's query shows"
    );

    // A click through to the subscription's page: its settings and recent deliveries.
    click_to(&browser, &format!("{row} a.subname"), page).await;
    wait_text(&browser, "[data-setting=\"endpoint\"] td", "the endpoint", |t| {
        t == base
    })
    .await;
    wait_text(
        &browser,
        "[data-setting=\"dead-letter-destination\"]",
        "the destination",
        |t| t.contains("dead-letters"),
    )
    .await;
    wait_text(&browser, "#state [data-field=\"state\"]", "the state", |t| {
        t == "Active"
    })
    .await;
    // No filter, and a note that says what pausing would do, not that it is paused.
    let filter = text(&browser, "[data-setting=\"filter\"] td").await.unwrap();
    assert_eq!(filter, "every event");
    let note = text(&browser, "#state [data-field=\"pause-note\"]").await.unwrap();
    assert!(note.starts_with("Pausing holds back"), "{note}");
    assert!(
        !browser.source().await.unwrap().contains("hunter2"),
        "the endpoint's query shows"
    );
    let recent = wait_reloading(&browser, "#recent tr[data-event]", "a recent delivery", |t| {
        t.contains("DeadLettered")
    })
    .await;
    assert!(recent.contains("BadRequest") && recent.contains("400"), "{recent}");
    let event_id = browser
        .find(Locator::Css("#recent tr[data-event]"))
        .await
        .unwrap()
        .attr("data-event")
        .await
        .unwrap()
        .unwrap();
    assert!(event_id.starts_with("tax"), "{event_id}");
    // An event's history, one click away.
    browser
        .find(Locator::Css("#recent tr[data-event] a.event"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let step = wait_text(
        &browser,
        "#history tr[data-step=\"DeadLettered\"]",
        "the event's history",
        |_| true,
    )
    .await;
    assert!(step.contains("tax-export") && step.contains("BadRequest"), "{step}");
    browser.back().await.unwrap();
    wait_text(
        &browser,
        "#state [data-field=\"state\"]",
        "the subscription's page again",
        |t| t == "Active",
    )
    .await;

    // Actions need the form token, and must come from this page's origin.
    let session = browser
        .get_all_cookies()
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.name() == "eg_status")
        .unwrap()
        .value()
        .to_owned();
    let form_token = browser
        .find(Locator::Css("form.action input[name=\"form_token\"]"))
        .await
        .unwrap()
        .attr("value")
        .await
        .unwrap()
        .unwrap();
    let pause_url = format!("{ingress}{page}/pause");
    let post = |body: String, site: &'static str| {
        system
            .http()
            .post(&pause_url)
            .header("cookie", format!("eg_status={session}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("sec-fetch-site", site)
            .body(body)
            .send()
    };
    let answer = post(String::new(), "same-origin").await.unwrap();
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    assert!(answer.text().await.unwrap().contains("form token"));
    let answer = post(format!("form_token={form_token}"), "cross-site").await.unwrap();
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    assert!(answer.text().await.unwrap().contains("another site"));
    let tax = subscription_of(&admin_status(&system).await, "billing", "tax-export").clone();
    assert_eq!(tax["paused"], false, "a refused action changed something: {tax}");

    // Pause, and see it paused.
    let flash = act(&browser, "button[data-action=\"Pause\"]", "Paused billing / tax-export").await;
    assert!(!flash.contains("Not"), "{flash}");
    wait_text(&browser, "#state [data-field=\"state\"]", "the state", |t| {
        t == "Paused"
    })
    .await;
    let note = text(&browser, "#state [data-field=\"pause-note\"]").await.unwrap();
    assert!(note.starts_with("While it is paused"), "{note}");
    assert_eq!(
        subscription_of(&admin_status(&system).await, "billing", "tax-export")["paused"],
        true
    );

    // Redrive, with its confirmation: paused, the redriven deliveries wait.
    click_to(
        &browser,
        "a[data-action=\"Redrive dead letters\"]",
        &format!("{page}/redrive"),
    )
    .await;
    wait_text(
        &browser,
        "#confirm [data-field=\"not-redriven\"]",
        "what a redrive takes",
        |t| t == "4",
    )
    .await;
    act(
        &browser,
        "#confirm button[data-action=\"Redrive 4\"]",
        "Redrove 4 dead letters",
    )
    .await;
    wait_text(
        &browser,
        "#state [data-field=\"not-redriven\"]",
        "no dead letters waiting",
        |t| t == "0",
    )
    .await;
    wait_text(&browser, "#state [data-field=\"kept\"]", "all still kept", |t| {
        number(t) == 4
    })
    .await;

    // Resume: the redriven deliveries are attempted, refused again and dead-lettered again.
    act(
        &browser,
        "button[data-action=\"Resume\"]",
        "Resumed billing / tax-export",
    )
    .await;
    wait_text(&browser, "#state [data-field=\"state\"]", "the state", |t| {
        t == "Active"
    })
    .await;
    wait_reloading(
        &browser,
        "#state [data-field=\"not-redriven\"]",
        "dead letters again",
        |t| t == "4",
    )
    .await;
    wait_text(
        &browser,
        "#state [data-field=\"kept\"]",
        "every dead letter kept",
        |t| number(t) == 8,
    )
    .await;
    if updating_screenshots() {
        save_screenshot(&browser, "status-page-subscription.png", false).await;
    }

    // One dead letter reads as one, in the confirmation and in the result.
    let ledger = "/status/topics/payouts/subscriptions/ledger";
    browser.goto(&format!("{ingress}{ledger}")).await.unwrap();
    click_to(
        &browser,
        "a[data-action=\"Redrive dead letters\"]",
        &format!("{ledger}/redrive"),
    )
    .await;
    let confirm = wait_text(&browser, "#confirm p", "what a redrive takes", |t| !t.is_empty()).await;
    assert!(confirm.starts_with("1 dead letter is waiting"), "{confirm}");
    let flash = act(
        &browser,
        "#confirm button[data-action=\"Redrive 1\"]",
        "Redrove 1 dead letter of payouts / ledger",
    )
    .await;
    assert!(flash.contains(": it is back in delivery"), "{flash}");

    // Validate again: the endpoint still does not answer the handshake, and the page says so.
    browser.goto(&format!("{ingress}/status")).await.unwrap();
    click_to(
        &browser,
        &format!("{waiting} a"),
        "/status/topics/signups/subscriptions/welcome",
    )
    .await;
    let before = silent.validations().len();
    let flash = act(&browser, "button[data-action=\"Validate again\"]", "still").await;
    assert!(flash.contains("AwaitingManualAction"), "{flash}");
    let class = browser
        .find(Locator::Css("#flash"))
        .await
        .unwrap()
        .attr("class")
        .await
        .unwrap();
    assert_eq!(class.as_deref(), Some("flash bad"));
    assert!(silent.validations().len() > before, "the handshake did not run again");
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_subscription_shows_its_queue_on_the_status_page() {
    use crate::queue_ops::{namespace_topic, publish, queue_subscription, receive_locked};
    let driver = Driver::start().await;
    let system = System::start(Options::default()).await;
    let key = namespace_topic(&system, "jobs").await;
    queue_subscription(&system, "jobs", "workers").await;
    publish(&system, "jobs", &key, 6).await;
    // Two consumers' receives, holding their locks.
    receive_locked(&system, "jobs", &key, "workers", 2).await;
    receive_locked(&system, "jobs", &key, "workers", 2).await;

    let browser = driver.browser().await;
    let ingress = system.ingress_url();
    browser
        .goto(&format!("{ingress}/status?token={ADMIN_TOKEN}"))
        .await
        .unwrap();
    let topic = wait_text(
        &browser,
        "tbody[data-topic=\"jobs\"] [data-field=\"kind\"]",
        "the topic's kind",
        |t| t == "Namespace topic",
    )
    .await;
    assert_eq!(topic, "Namespace topic");
    let row = "tr[data-subscription=\"workers\"][data-mode=\"Queue\"]";
    wait_text(
        &browser,
        &format!("{row} [data-field=\"available\"]"),
        "available events",
        |t| number(t) == 2,
    )
    .await;
    let locked = text(&browser, &format!("{row} [data-field=\"locked\"]")).await.unwrap();
    assert_eq!(number(&locked), 4, "locked events");
    let mode = text(&browser, &format!("{row} [data-field=\"mode\"]")).await.unwrap();
    assert!(mode.starts_with("Queue"), "{mode}");
    assert!(
        browser
            .find(Locator::Css(&format!("{row} [data-field=\"endpoint\"]")))
            .await
            .is_err(),
        "a queue subscription has no endpoint to show"
    );

    // Its page: the queue settings and figures; no pause, no validate.
    click_to(
        &browser,
        &format!("{row} a.subname"),
        "/status/topics/jobs/subscriptions/workers",
    )
    .await;
    let lock = wait_text(
        &browser,
        "tr[data-setting=\"receive-lock\"] td",
        "the receive lock",
        |t| !t.is_empty(),
    )
    .await;
    assert_eq!(lock, "90 s");
    assert_eq!(
        text(&browser, "tr[data-setting=\"max-delivery-count\"] td")
            .await
            .as_deref(),
        Some("4")
    );
    assert_eq!(
        text(&browser, "tr[data-setting=\"ttl\"] td").await.as_deref(),
        Some("PT2H")
    );
    let available = text(&browser, "#state [data-field=\"available\"]").await.unwrap();
    let locked = text(&browser, "#state [data-field=\"locked\"]").await.unwrap();
    assert_eq!((number(&available), number(&locked)), (2, 4));
    let actions = text(&browser, "#actions").await.unwrap_or_default();
    assert!(!actions.contains("Pause") && !actions.contains("Validate"), "{actions}");
    browser.close().await.unwrap();
}

/// An event published while a subscription waits for validation is counted under that
/// subscription when its filter takes it, also when another subscription matched it (so
/// the topic's unmatched count, Event Grid's, does not have it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_waiting_for_validation_counts_the_events_it_missed() {
    let system = System::start(Options::default()).await;
    let ok = Receiver::start(Behaviour::Status(200)).await;
    let silent = Receiver::start_with(Behaviour::Status(200), Validation::Ignore).await;
    system.create_topic("signups").await;
    system
        .create_subscription("signups", "crm", subscription(ok.url(), json!({})))
        .await;
    for (name, extra) in [
        ("welcome", json!({})),
        ("vip", json!({"filter": {"subjectBeginsWith": "/things/vip/"}})),
    ] {
        let (status, answer) = system
            .put_subscription("signups", name, &subscription(silent.url(), extra))
            .await;
        assert!(status.is_success(), "{status} {answer}");
    }
    system
        .publish_ok("signups", &Value::from(numbered_events("plain", 0..3)))
        .await;
    system
        .publish_ok("signups", &Value::from(numbered_events("vip", 0..2)))
        .await;

    let missed = |status: &Value, name: &str| subscription_of(status, "signups", name)["missedLastHour"].clone();
    let status = eventually(DEADLINE, "the missed events in /admin/status", || async {
        let status = admin_status(&system).await;
        (missed(&status, "welcome") == 5 && missed(&status, "vip") == 2).then_some(status)
    })
    .await;
    assert_eq!(missed(&status, "crm"), 0, "{status}");
    let signups = &status["topics"][0];
    assert_eq!(signups["unmatchedLastHour"], 0, "crm took every event: {signups}");
    let ingress = system.ingress_metrics().await;
    for (name, n) in [("welcome", 5.0), ("vip", 2.0), ("crm", 0.0)] {
        let labels = [("topic", "signups"), ("subscription", name)];
        assert_eq!(metric(&ingress, "MissedEventCount", &labels), n, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_without_tokens_shows_on_the_live_page_until_it_clears() {
    let driver = Driver::start().await;
    let system = System::start(Options::default()).await;
    // As a sender reports it (`eg_store::identity_health`); the OAuth tests report it for real.
    let store = crate::dead_letter_status::store_of(&system);
    let now = eg_core::UnixMillis(
        i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap(),
    );
    let problem = eg_store::IdentityProblem {
        kind: "Refused".into(),
        message: "the token endpoint answered 401: invalid_client".into(),
        since: now,
        last: now,
    };
    store.record_identity_problem("corp", problem).await.unwrap();

    let browser = driver.browser().await;
    browser
        .goto(&format!("{}/status?token={ADMIN_TOKEN}", system.ingress_url()))
        .await
        .unwrap();
    let css = "#identities-failing tr[data-identity-failing=\"corp\"]";
    wait_text(
        &browser,
        &format!("{css} [data-field=\"kind\"]"),
        "the identity's problem",
        |t| t == "Refused",
    )
    .await;
    let message = text(&browser, &format!("{css} [data-field=\"message\"]")).await;
    assert_eq!(
        message.as_deref(),
        Some("the token endpoint answered 401: invalid_client")
    );

    // Cleared (a token obtained): the next refresh drops the banner.
    store.clear_identity_problem("corp").await.unwrap();
    eventually(DEADLINE, "the banner gone", || async {
        text(&browser, "#identities-failing h2").await.is_none().then_some(())
    })
    .await;
    let _ = browser.close().await;
}

/// A replay started from a subscription's page shows in its table with its progress, a
/// slow one can be cancelled there, and a topic without an archive says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_replays_a_window_and_cancels_a_replay_from_the_status_page() {
    let driver = Driver::start().await;
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    system
        .create_topic_with(
            "orders",
            json!({"archive": {
                "destination": {"endpointType": "LocalDirectory", "properties": {"containerName": "archive"}},
                "retentionDays": 1
            }}),
        )
        .await;
    system
        .create_subscription("orders", "audit", subscription(receiver.url(), json!({})))
        .await;
    system.create_topic("plain").await;
    system
        .create_subscription("plain", "all", subscription(receiver.url(), json!({})))
        .await;
    let events: Vec<Value> = (0..30)
        .map(|n| event(&format!("r-{n}"), if n == 0 { "A" } else { "B" }, "/r", json!({})))
        .collect();
    system.publish_ok("orders", &json!(events)).await;
    receiver.wait_for(30, DEADLINE).await;

    let browser = driver.browser().await;
    let ingress = system.ingress_url();
    browser
        .goto(&format!(
            "{ingress}/status/topics/orders/subscriptions/audit?token={ADMIN_TOKEN}"
        ))
        .await
        .unwrap();
    wait_text(&browser, "#replays h2", "the replays section", |t| t == "Replays").await;
    // Type A only: one event.
    browser
        .find(Locator::Css("#replay-form input[name=\"eventType\"]"))
        .await
        .unwrap()
        .send_keys("A")
        .await
        .unwrap();
    let flash = act(&browser, "#replay-form button", "started").await;
    assert!(flash.contains("Replay"), "{flash}");
    let state = wait_reloading(
        &browser,
        "#replays tbody tr td:nth-child(2) .badge",
        "the replay's end",
        |t| t == "Succeeded",
    )
    .await;
    assert_eq!(state, "Succeeded");
    let replayed = text(&browser, "#replays tbody tr td:nth-child(4)").await.unwrap();
    assert_eq!(replayed, "1", "one event of type A");
    receiver.wait_for(31, DEADLINE).await;

    // A slow one (one event a second), cancelled from its row.
    browser
        .find(Locator::Css("#replay-form input[name=\"maxEventsPerSecond\"]"))
        .await
        .unwrap()
        .send_keys("1")
        .await
        .unwrap();
    act(&browser, "#replay-form button", "started").await;
    let flash = act(
        &browser,
        "#replays tbody tr button[data-action=\"Cancel\"]",
        "Cancelled",
    )
    .await;
    assert!(flash.contains("stays enqueued"), "{flash}");
    let state = text(&browser, "#replays tbody tr:first-child td:nth-child(2) .badge")
        .await
        .unwrap();
    assert_eq!(state, "Cancelled");
    // A bad rate is said back; a topic without an archive offers no form.
    browser
        .find(Locator::Css("#replay-form input[name=\"maxEventsPerSecond\"]"))
        .await
        .unwrap()
        .send_keys("lots")
        .await
        .unwrap();
    let flash = act(&browser, "#replay-form button", "Not started").await;
    assert!(flash.contains("not a whole number"), "{flash}");
    browser
        .goto(&format!("{ingress}/status/topics/plain/subscriptions/all"))
        .await
        .unwrap();
    let empty = wait_text(&browser, "#replays .empty", "no archive", |t| !t.is_empty()).await;
    assert!(empty.contains("not archived"), "{empty}");
    browser.close().await.unwrap();
}
