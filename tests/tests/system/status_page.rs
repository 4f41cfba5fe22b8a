//! The status page in a real browser: headless Chromium driven through chromedriver
//! (WebDriver) against a whole running system. Signs in with `/status?token=`, checks
//! that topics, subscriptions, rates, failures by outcome, dead letters and queue depths
//! show, that the page refreshes itself without a reload, and that a wrong token gets
//! the 401 sign-in page. Also checks `GET /admin/status` (JSON) and the refusals.
//!
//! Needs `chromium` and `chromedriver` (Debian: `apt-get install chromium chromium-driver`;
//! CI installs them). Without them the test fails and says so: it never skips.
//! `EG_UPDATE_SCREENSHOT=1` saves the signed-in page to `docs/status-page.png`.

use eg_system_tests::{
    ADMIN_TOKEN, Behaviour, DEADLINE, Options, Receiver, System, dead_letter_to, eventually, numbered_events,
    subscription,
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
async fn text(browser: &Client, css: &str) -> Option<String> {
    let element = browser.find(Locator::Css(css)).await.ok()?;
    element.text().await.ok()
}

/// Waits until the element matching `css` shows text that satisfies `wanted`; returns it.
async fn wait_text(browser: &Client, css: &str, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let wanted = &wanted;
    eventually(DEADLINE, &format!("{what} (`{css}`)"), || async move {
        text(browser, css).await.filter(|t| wanted(t))
    })
    .await
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
    system.create_topic("orders").await;
    system.create_topic("billing").await;
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

    // The JSON first: once every tier's counts reached Redis, the page has them too.
    let status = eventually(
        DEADLINE,
        "rates, failures, dead letters and probation in /admin/status",
        || async {
            let status = admin_status(&system).await;
            let rates = &status["rates"];
            // All 27 published: the ingress may have flushed them in two goes.
            let ready = rates["lastMinute"]["published"] == 27
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
        wait_text(&browser, &format!("{row} td.sub"), "a subscription", |t| t == sub).await;
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
    wait_text(
        &browser,
        &format!("{tax} [data-field=\"dead-letters\"]"),
        "dead letters",
        |t| number(t) > 0,
    )
    .await;
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

    if std::env::var_os("EG_UPDATE_SCREENSHOT").is_some_and(|v| v == "1") {
        save_screenshot(&browser).await;
    }
    browser.close().await.unwrap();
}

/// Saves the whole page, as it is now, to docs/status-page.png.
async fn save_screenshot(browser: &Client) {
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
    // Let one refresh pass so the page is laid out at the new size with fresh numbers.
    let updated = text(browser, "#updated").await.unwrap();
    wait_text(browser, "#updated", "a refresh before the screenshot", |t| t != updated).await;
    let png = browser.screenshot().await.unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/status-page.png");
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot saved to {}", path.display());
}
