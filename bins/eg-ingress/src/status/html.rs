//! The status page's HTML, rendered on the server: no front-end build, inline CSS
//! (`page.css`) and a few lines of inline JavaScript (`live.js`) that fetch
//! `/status/live` every 2 s and swap it into `<main>`. The page and the live fragment
//! come from the same functions, so they cannot drift apart.
//!
//! Every string that reaches the HTML goes through [`esc`]. Elements carry `data-*`
//! attributes naming what they show, for tests and for anyone scraping the page.

use super::dead_letter::{DeadLetterFailure, DeadLetterTarget, FailingDeadLetters};
use super::model::{DepthCounts, QueueFigures, Status, SubscriptionStatus, TopicStatus};
use super::session::{Flash, SignIn, TOKEN_FIELD};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use eg_core::UnixMillis;
use sha2::{Digest, Sha256};
use std::fmt::Write;
use std::sync::LazyLock;

const CSS: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("live.js");

/// The page's Content-Security-Policy: nothing but the inline style and script (by
/// hash), fetches to this origin, and forms that submit here.
pub static CONTENT_SECURITY_POLICY: LazyLock<String> = LazyLock::new(|| {
    let hash = |text: &str| BASE64.encode(Sha256::digest(text.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{}'; script-src 'sha256-{}'; connect-src 'self'; \
         form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        hash(CSS),
        hash(SCRIPT)
    )
});

/// Escapes text for HTML element content and quoted attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Events per second, short: `0`, `<0.01`, `3.25`, `42.5`, `1200`.
pub fn rate(r: f64) -> String {
    if r <= 0.0 {
        "0".into()
    } else if r < 0.01 {
        "<0.01".into()
    } else if r < 10.0 {
        format!("{r:.2}")
    } else if r < 100.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.0}")
    }
}

/// A count with thousands separators: `12,345`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The noun for `n` of a thing: `one` for exactly one, `many` otherwise. The noun may
/// carry its verb (`"dead letter is"` / `"dead letters are"`). Every count the pages and
/// the actions' messages write with a noun goes through here or [`counted`].
pub fn noun<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// A count and its noun: `1 dead letter`, `1,200 dead letters`, `0 dead letters`.
pub fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", count(n), noun(n, one, many))
}

pub fn clock_time(at: UnixMillis) -> String {
    at.to_datetime().format("%H:%M:%S").to_string()
}

/// `class="num"` or `class="num zero"` (greyed out) or `class="num hot"` (a problem).
pub fn num_class(nonzero: bool, is_problem: bool) -> &'static str {
    match (nonzero, is_problem) {
        (false, _) => "num zero",
        (true, true) => "num hot",
        (true, false) => "num",
    }
}

/// Which referrer a page's links and forms send: none from the sign-in page (its address
/// may hold the token), this origin only from the signed-in pages (so the browser names
/// the origin of their forms, which the actions check).
#[derive(Clone, Copy)]
pub enum Referrer {
    None,
    SameOrigin,
}

impl Referrer {
    pub fn policy(self) -> &'static str {
        match self {
            Self::None => "no-referrer",
            Self::SameOrigin => "same-origin",
        }
    }
}

pub fn head(out: &mut String, title: &str, referrer: Referrer) {
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"referrer\" content=\"{}\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n",
        referrer.policy(),
        esc(title)
    );
}

/// The bar at the top of every signed-in page; `trail` links back up (already HTML).
pub fn top_bar(out: &mut String, trail: &str, live: bool) {
    let _ = write!(
        out,
        "<body>\n<header class=\"top\"><div class=\"brand\"><a href=\"/status\"><span class=\"logo\">eg</span>status</a>{trail}</div>"
    );
    if live {
        out.push_str("<div class=\"conn\" id=\"conn\" role=\"status\">live, refreshed every 2 s</div>");
    }
    out.push_str("</header>\n");
}

/// An action's result, once, at the top of the page it led to.
pub fn flash(out: &mut String, flash: Option<&Flash>) {
    if let Some(f) = flash {
        let class = if f.ok { "flash ok" } else { "flash bad" };
        let _ = writeln!(
            out,
            "<div class=\"{class}\" id=\"flash\" role=\"status\">{}</div>",
            esc(&f.message)
        );
    }
}

/// A path segment, percent-encoded (event ids may hold anything).
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Where a subscription's page is.
pub fn subscription_path(topic: &str, name: &str) -> String {
    format!("/status/topics/{}/subscriptions/{}", segment(topic), segment(name))
}

/// The whole page: header, the live sections, and the refresh script.
pub fn page(status: &Status, shown: Option<&Flash>) -> String {
    let mut out = String::with_capacity(16 * 1024);
    head(&mut out, "eg status", Referrer::SameOrigin);
    top_bar(&mut out, "", true);
    out.push_str("<div class=\"wrap\">");
    flash(&mut out, shown);
    out.push_str("</div>\n<main id=\"live\">\n");
    out.push_str(&live(status));
    out.push_str(
        "</main>\n<footer>Rates are per second over the last minute, summed over every eg process; \
         counts and queue depths are read from Redis at each refresh. The same data as JSON: \
         <code>GET /admin/status</code> with the admin token.</footer>\n",
    );
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
    out
}

/// The sections that refresh: what `/status/live` answers.
pub fn live(status: &Status) -> String {
    let mut out = String::with_capacity(12 * 1024);
    let _ = writeln!(
        out,
        "<p class=\"updated\">updated <time id=\"updated\" datetime=\"{}\">{}</time> UTC \
         · rates over the last {:.0} s</p>",
        esc(&status.generated_at),
        clock_time(status.generated_at_ms),
        status.rates.window_seconds
    );
    if !status.problems.is_empty() {
        out.push_str("<div class=\"problems\" id=\"problems\">");
        for problem in &status.problems {
            let _ = write!(out, "<p>{}</p>", esc(problem));
        }
        out.push_str("</div>\n");
    }
    tiles(&mut out, status);
    failing_dead_letters(&mut out, status);
    waiting(&mut out, &status.topics);
    topics(&mut out, &status.topics);
    out.push_str("<div class=\"cols\">\n");
    failures(&mut out, status);
    dead_letters(&mut out, status);
    out.push_str("</div>\n");
    queues(&mut out, status);
    tiers(&mut out, status);
    out
}

fn tiles(out: &mut String, status: &Status) {
    let r = &status.rates;
    let c = &r.last_minute;
    let tiles = [
        ("published", "Published", r.published, c.published, false),
        ("delivered", "Delivered", r.delivered, c.delivered, false),
        ("failed", "Failed attempts", r.failed, c.failed, true),
        ("deadlettered", "Dead-lettered", r.dead_lettered, c.dead_lettered, true),
        ("dropped", "Dropped", r.dropped, c.dropped, true),
    ];
    out.push_str("<section class=\"tiles\">\n");
    for (id, label, per_second, n, is_problem) in tiles {
        let class = if is_problem && n > 0 { "tile bad" } else { "tile" };
        let _ = writeln!(
            out,
            "<div class=\"{class}\" data-total=\"{id}\"><div class=\"label\">{label}</div>\
             <div class=\"value\" id=\"rate-{id}\">{}</div><div class=\"unit\">per second · {} in the last minute</div></div>",
            rate(per_second),
            count(n)
        );
    }
    out.push_str("</section>\n");
}

/// Subscriptions that do not receive events because their endpoint has not consented,
/// with the reason and how many events each missed meanwhile.
fn waiting(out: &mut String, topics: &[TopicStatus]) {
    let waiting: Vec<(&TopicStatus, &SubscriptionStatus)> = topics
        .iter()
        .flat_map(|t| t.subscriptions.iter().map(move |s| (t, s)))
        .filter(|(_, s)| s.provisioning_state != "Succeeded")
        .collect();
    if waiting.is_empty() {
        return;
    }
    out.push_str(
        "<section class=\"card attention\" id=\"waiting\"><h2>Waiting for validation</h2>\
         <p class=\"note\">These subscriptions receive no events until their endpoint answers the validation \
         handshake. Missed: events their topic accepted in the last hour that the subscription's filter takes, \
         not kept for it (another subscription may have received them).</p>\n\
         <table><thead><tr><th>Subscription</th><th>Provisioning</th><th>Why</th>\
         <th class=\"num\">Missed, last hour</th></tr></thead><tbody>\n",
    );
    for (topic, sub) in waiting {
        let _ = writeln!(
            out,
            "<tr data-waiting=\"{t}/{s}\"><td><a href=\"{href}\">{t} / {s}</a></td>\
             <td><span class=\"badge warn\">{state}</span></td><td class=\"why\" data-field=\"reason\">{why}</td>\
             <td class=\"{class}\" data-field=\"missed\">{n}</td></tr>",
            t = esc(&topic.name),
            s = esc(&sub.name),
            href = esc(&subscription_path(&topic.name, &sub.name)),
            state = esc(&sub.provisioning_state),
            why = esc(sub.provisioning_message.as_deref().unwrap_or("")),
            class = num_class(sub.missed_last_hour > 0, true),
            n = count(sub.missed_last_hour),
        );
    }
    out.push_str("</tbody></table></section>\n");
}

/// Subscriptions whose dead letters cannot be written now: what the store said, and
/// since when. First on the page, since every minute of it brings records nearer to
/// being dropped.
fn failing_dead_letters(out: &mut String, status: &Status) {
    let failing = &status.failing_dead_letter_destinations;
    if failing.is_empty() {
        return;
    }
    out.push_str(
        "<section class=\"card alarm\" id=\"dead-letter-failing\"><h2>Dead letters not being written</h2>\
         <p class=\"note\">Writing these subscriptions' dead letters to their destination fails. The records wait in \
         Redis and are retried with backoff; those still unwritten after <code>EG__DEADLETTER__GIVE_UP_AFTER</code> are \
         dropped (counted as <code>DeadLetterDestinationUnavailable</code>).</p>\n\
         <table><thead><tr><th>Subscription</th><th>Problem</th><th>Destination</th><th>What the store said</th>\
         <th class=\"num\">Failing since (UTC)</th></tr></thead><tbody>\n",
    );
    for FailingDeadLetters {
        topic,
        subscription,
        failure,
    } in failing
    {
        let _ = writeln!(
            out,
            "<tr data-dead-letter-failing=\"{t}/{s}\"><td><a href=\"{href}\">{t} / {s}</a></td>\
             <td>{kind}</td><td><code data-field=\"destination\">{destination}</code></td>\
             <td class=\"why\" data-field=\"message\">{message}</td><td class=\"num\" data-field=\"since\">{since}</td></tr>",
            t = esc(topic),
            s = esc(subscription),
            href = esc(&subscription_path(topic, subscription)),
            kind = failure_badge(failure),
            destination = esc(&format!("{} / {}", failure.store, failure.container)),
            message = esc(&failure.message),
            since = failing_since(failure, status.generated_at_ms),
        );
    }
    out.push_str("</tbody></table></section>\n");
}

/// The kind of a dead-letter failure as a red badge, what the store said as its title.
pub fn failure_badge(failure: &DeadLetterFailure) -> String {
    format!(
        "<span class=\"badge bad\" data-field=\"kind\" title=\"{}\">{}</span>",
        esc(&failure.message),
        esc(&failure.kind)
    )
}

/// `03:04:05 (12 m 3 s ago)`.
pub fn failing_since(failure: &DeadLetterFailure, now: UnixMillis) -> String {
    let ago = u64::try_from((now.0 - failure.since_ms.0).max(0) / 1000).unwrap_or(0);
    format!("{} ({} ago)", clock_time(failure.since_ms), age(ago))
}

/// Where dead letters go, for a settings row: the store and the container (the bucket
/// and key prefix for S3); never a key or an endpoint.
pub fn dead_letter_target(target: &DeadLetterTarget) -> String {
    let place = match target.store.as_str() {
        "local" => "the dead-letter directory, folder",
        s if s.starts_with("s3:") => "bucket",
        _ => "container",
    };
    let mut out = format!(
        "<code data-field=\"store\">{}</code> {place} <code data-field=\"container\">{}</code>",
        esc(&target.store),
        esc(&target.container)
    );
    if !target.key_prefix.is_empty() {
        let _ = write!(
            out,
            " under <code data-field=\"key-prefix\">{}/</code>",
            esc(&target.key_prefix)
        );
    }
    out
}

fn topics(out: &mut String, topics: &[TopicStatus]) {
    out.push_str(
        "<section class=\"card\" id=\"topics\"><h2>Topics and subscriptions</h2>\
         <p class=\"note\">Delivered and failed attempts per second over the last minute. Dead letters: waiting \
         (not redriven) of all kept, as <code>egctl deadletters</code> counts them. Open a subscription to see its \
         settings and recent deliveries, and to pause, resume, validate or redrive it. A queue subscription shows \
         its queue instead: events available to receive, locked to a consumer, released with a delay, and the \
         age of the oldest not yet acknowledged.</p>\n",
    );
    if topics.is_empty() {
        out.push_str(
            "<p class=\"empty\">No topics yet: create one with <code>PUT /admin/topics/{topic}</code>.</p></section>\n",
        );
        return;
    }
    out.push_str(
        "<table><thead><tr><th>Subscription</th><th>State</th><th>Provisioning</th><th>Endpoint health</th>\
         <th class=\"num\">Delivered/s</th><th class=\"num\">Failed/s</th><th class=\"num\">Dead letters</th></tr></thead>\n",
    );
    for topic in topics {
        let name = esc(&topic.name);
        let unmatched = if topic.unmatched_last_hour > 0 {
            format!(
                "<span class=\"unmatched hot\" data-field=\"unmatched\" title=\"events accepted in the last hour that no active subscription matched\">{} unmatched in the last hour</span>",
                count(topic.unmatched_last_hour)
            )
        } else {
            "<span class=\"unmatched muted\" data-field=\"unmatched\">0 unmatched in the last hour</span>".to_owned()
        };
        let _ = writeln!(
            out,
            "<tbody data-topic=\"{name}\"><tr class=\"topic\"><th colspan=\"4\"><span class=\"name\">{name}</span>\
             {kind}<span class=\"schema\">{}</span>{unmatched}</th><td class=\"num\" colspan=\"3\"><span data-field=\"publish-rate\">{}</span> \
             <span class=\"muted\">published/s</span></td></tr>",
            esc(&topic.input_schema),
            rate(topic.publish_rate),
            kind = if topic.namespace_topic {
                "<span class=\"badge info\" data-field=\"kind\" title=\"Event Grid namespace topic: CloudEvents in, \
                 push and queue subscriptions\">Namespace topic</span>"
            } else {
                ""
            },
        );
        if topic.subscriptions.is_empty() {
            out.push_str("<tr><td class=\"sub muted\" colspan=\"7\">no subscriptions</td></tr>\n");
        }
        for sub in &topic.subscriptions {
            subscription_row(out, &topic.name, sub);
        }
        out.push_str("</tbody>\n");
    }
    out.push_str("</table></section>\n");
}

pub fn state_badge(paused: bool) -> &'static str {
    if paused {
        "<span class=\"badge warn\">Paused</span>"
    } else {
        "<span class=\"badge ok\">Active</span>"
    }
}

pub fn provisioning_badge(sub: &SubscriptionStatus) -> String {
    if sub.provisioning_state == "Succeeded" {
        format!("<span class=\"muted\">{}</span>", esc(&sub.provisioning_state))
    } else {
        format!(
            "<span class=\"badge warn\" title=\"{}\">{}</span>",
            esc(sub.provisioning_message.as_deref().unwrap_or("")),
            esc(&sub.provisioning_state)
        )
    }
}

pub fn health_badge(sub: &SubscriptionStatus) -> String {
    match &sub.probation {
        None => "<span class=\"badge ok\">Healthy</span>".to_owned(),
        Some(p) => {
            let detail = format!(
                "{}, probation level {}{}",
                counted(
                    u64::from(p.consecutive_failures),
                    "consecutive failure",
                    "consecutive failures"
                ),
                p.level,
                p.last_failure_outcome
                    .as_deref()
                    .map(|o| format!(", last failure {o}"))
                    .unwrap_or_default()
            );
            let text = match p.until_ms {
                Some(until) => format!("{} until {} UTC", p.state, clock_time(until)),
                None => p.state.to_owned(),
            };
            let class = if p.state == "Probation" { "bad" } else { "warn" };
            format!(
                "<span class=\"badge {class}\" title=\"{}\">{}</span>",
                esc(&detail),
                esc(&text)
            )
        }
    }
}

/// Dead letters as `egctl deadletters` counts them: those waiting to be redriven (the
/// number that matters, red when any), and all kept; flagged when their destination
/// is failing.
pub fn dead_letter_cell(sub: &SubscriptionStatus) -> String {
    let failing = match &sub.dead_letter_failure {
        Some(f) => format!(
            "<div><span class=\"badge bad\" data-field=\"dead-letter-failing\" title=\"{}: {}\">destination failing</span></div>",
            esc(&f.kind),
            esc(&f.message)
        ),
        None => String::new(),
    };
    format!(
        "<span class=\"{}\" data-field=\"not-redriven\">{}</span><span class=\"kept\" data-field=\"kept\"> of {} kept</span>{failing}",
        num_class(sub.dead_letters_not_redriven > 0, true),
        count(sub.dead_letters_not_redriven),
        count(sub.dead_letters)
    )
}

/// A queue subscription's figures, as cells' contents: what is receivable, locked to a
/// consumer, released with a delay, and how old the oldest unacknowledged event is.
pub fn queue_figures(q: &QueueFigures) -> String {
    let oldest = q.oldest_unacknowledged_seconds.map_or_else(|| "none".to_owned(), age);
    format!(
        "<span class=\"{}\" data-field=\"available\">{}</span> available · \
         <span class=\"{}\" data-field=\"locked\">{}</span> locked · \
         <span class=\"{}\" data-field=\"delayed\">{}</span> delayed · \
         oldest unacknowledged <span data-field=\"oldest\">{}</span>",
        num_class(q.available > 0, false),
        count(q.available),
        num_class(q.locked > 0, false),
        count(q.locked),
        num_class(q.delayed > 0, false),
        count(q.delayed),
        esc(&oldest)
    )
}

/// A queue subscription's row: its mode and queue instead of an endpoint and push rates.
fn queue_row(out: &mut String, topic: &str, sub: &SubscriptionStatus, q: &QueueFigures) {
    let _ = writeln!(
        out,
        "<tr data-topic=\"{t}\" data-subscription=\"{name}\" data-mode=\"Queue\"><td class=\"sub\"><a class=\"subname\" href=\"{href}\">{name}</a>\
         <div class=\"endpoint\" data-field=\"mode\">Queue: consumers pull</div></td>\
         <td data-field=\"state\">{state}</td><td data-field=\"provisioning\">{provisioning}</td>\
         <td class=\"queue\" colspan=\"3\" data-field=\"queue\">{figures}</td>\
         <td class=\"num\" data-field=\"dead-letters\">{dead}</td></tr>",
        t = esc(topic),
        name = esc(&sub.name),
        href = esc(&subscription_path(topic, &sub.name)),
        state = state_badge(sub.paused),
        provisioning = provisioning_badge(sub),
        figures = queue_figures(q),
        dead = dead_letter_cell(sub),
    );
}

fn subscription_row(out: &mut String, topic: &str, sub: &SubscriptionStatus) {
    if sub.delivery_mode == "Queue" {
        // Figures unread (a problem is shown above): zeros rather than a push row.
        return queue_row(out, topic, sub, &sub.queue.unwrap_or_default());
    }
    let _ = writeln!(
        out,
        "<tr data-topic=\"{t}\" data-subscription=\"{name}\"><td class=\"sub\"><a class=\"subname\" href=\"{href}\">{name}</a>\
         <div class=\"endpoint\" data-field=\"endpoint\">{endpoint}</div></td>\
         <td data-field=\"state\">{state}</td><td data-field=\"provisioning\">{provisioning}</td>\
         <td data-field=\"probation\">{health}</td>\
         <td class=\"{}\" data-field=\"delivery-rate\">{}</td><td class=\"{}\" data-field=\"failure-rate\">{}</td>\
         <td class=\"num\" data-field=\"dead-letters\">{dead}</td></tr>",
        num_class(sub.delivery_rate > 0.0, false),
        rate(sub.delivery_rate),
        num_class(sub.failure_rate > 0.0, true),
        rate(sub.failure_rate),
        t = esc(topic),
        name = esc(&sub.name),
        href = esc(&subscription_path(topic, &sub.name)),
        endpoint = esc(&sub.destination_label()),
        state = state_badge(sub.paused),
        provisioning = provisioning_badge(sub),
        health = health_badge(sub),
        dead = dead_letter_cell(sub),
    );
}

fn failures(out: &mut String, status: &Status) {
    let r = &status.rates;
    out.push_str(
        "<section class=\"card\" id=\"failures\"><h2>Failures by outcome</h2>\
         <p class=\"note\">Failed delivery attempts in the last minute, every subscription.</p>\n",
    );
    if r.last_minute.failures_by_outcome.is_empty() {
        out.push_str("<p class=\"empty\">No failed attempts in the last minute.</p></section>\n");
        return;
    }
    out.push_str(
        "<table><thead><tr><th>Outcome</th><th class=\"num\">Attempts</th><th class=\"num\">Per second</th></tr></thead><tbody>\n",
    );
    let mut by_count: Vec<_> = r.last_minute.failures_by_outcome.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (outcome, n) in by_count {
        let per_second = r.failures_by_outcome.get(outcome).copied().unwrap_or(0.0);
        let _ = writeln!(
            out,
            "<tr data-outcome=\"{o}\"><td>{o}</td><td class=\"num hot\" data-field=\"count\">{}</td>\
             <td class=\"num\" data-field=\"rate\">{}</td></tr>",
            count(*n),
            rate(per_second),
            o = esc(outcome)
        );
    }
    out.push_str("</tbody></table></section>\n");
}

fn dead_letters(out: &mut String, status: &Status) {
    out.push_str(
        "<section class=\"card\" id=\"dead-letters\"><h2>Dead letters</h2>\
         <p class=\"note\">Per subscription: waiting to be redriven, and all kept (redriven ones included); and why \
         deliveries ended without reaching their endpoint in the last minute.</p>\n",
    );
    let with_dead_letters: Vec<(&TopicStatus, &SubscriptionStatus)> = status
        .topics
        .iter()
        .flat_map(|t| t.subscriptions.iter().map(move |s| (t, s)))
        .filter(|(_, s)| s.dead_letters > 0 || s.dead_letter_rate > 0.0)
        .collect();
    if with_dead_letters.is_empty() {
        out.push_str("<p class=\"empty\">No subscription has dead letters.</p>\n");
    } else {
        out.push_str(
            "<table><thead><tr><th>Subscription</th><th class=\"num\">Not redriven</th><th class=\"num\">Kept</th>\
             <th class=\"num\">Dead-lettered/s</th></tr></thead><tbody>\n",
        );
        for (topic, sub) in with_dead_letters {
            let _ = writeln!(
                out,
                "<tr data-dead-letters=\"{t}/{s}\"><td><a href=\"{href}\">{t} / {s}</a></td>\
                 <td class=\"{}\" data-field=\"not-redriven\">{}</td><td class=\"num\" data-field=\"total\">{}</td>\
                 <td class=\"num\">{}</td></tr>",
                num_class(sub.dead_letters_not_redriven > 0, true),
                count(sub.dead_letters_not_redriven),
                count(sub.dead_letters),
                rate(sub.dead_letter_rate),
                t = esc(&topic.name),
                s = esc(&sub.name),
                href = esc(&subscription_path(&topic.name, &sub.name))
            );
        }
        out.push_str("</tbody></table>\n");
    }
    let c = &status.rates.last_minute;
    let reasons: Vec<(&str, &String, &u64)> = c
        .dead_lettered_by_reason
        .iter()
        .map(|(r, n)| ("Dead-lettered", r, n))
        .chain(c.dropped_by_reason.iter().map(|(r, n)| ("Dropped", r, n)))
        .collect();
    if !reasons.is_empty() {
        out.push_str(
            "<h3>Last minute, by reason</h3><table><thead><tr><th>What</th><th>Reason</th>\
             <th class=\"num\">Deliveries</th></tr></thead><tbody>\n",
        );
        for (what, reason, n) in reasons {
            let _ = writeln!(
                out,
                "<tr data-reason=\"{r}\"><td>{what}</td><td>{r}</td><td class=\"num hot\">{}</td></tr>",
                count(*n),
                r = esc(reason)
            );
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("</section>\n");
}

fn depth_cells(out: &mut String, d: &DepthCounts) {
    let cells = [
        ("ready", d.ready, false),
        ("in-flight", d.in_flight, false),
        ("retry", d.retry, false),
        ("paused", d.paused, false),
        ("dead-letter-backlog", d.dead_letter_backlog, true),
    ];
    for (field, n, is_problem) in cells {
        let _ = write!(
            out,
            "<td class=\"{}\" data-field=\"{field}\">{}</td>",
            num_class(n > 0, is_problem),
            count(n)
        );
    }
}

fn queues(out: &mut String, status: &Status) {
    out.push_str(
        "<section class=\"card\" id=\"queues\"><h2>Queues</h2>\
         <p class=\"note\">Deliveries per partition now: waiting to be sent, held by a sender, waiting for a retry, \
         set aside for paused subscriptions, and dead-letter records not yet written.</p>\n\
         <table><thead><tr><th>Partition</th><th class=\"num\">Ready</th><th class=\"num\">In flight</th>\
         <th class=\"num\">Retry</th><th class=\"num\">Paused</th><th class=\"num\">Dead-letter backlog</th></tr></thead><tbody>\n",
    );
    for p in &status.queues.partitions {
        let _ = write!(out, "<tr data-partition=\"{0}\"><td>{0}</td>", p.partition);
        depth_cells(out, &p.depths);
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody><tfoot><tr data-partition=\"total\"><td>Total</td>");
    depth_cells(out, &status.queues.total);
    out.push_str("</tr></tfoot></table></section>\n");
}

/// A length of time, short: `42 s`, `5 m 3 s`, `3 h 12 m`, `2 d 4 h`.
pub fn age(seconds: u64) -> String {
    let (m, h, d) = (seconds / 60, seconds / 3600, seconds / 86_400);
    if d > 0 {
        format!("{d} d {} h", h % 24)
    } else if h > 0 {
        format!("{h} h {} m", m % 60)
    } else if m > 0 {
        format!("{m} m {} s", seconds % 60)
    } else {
        format!("{seconds} s")
    }
}

fn tiers(out: &mut String, status: &Status) {
    out.push_str(
        "<section class=\"card\" id=\"tiers\"><h2>Tiers</h2>\
         <p class=\"note\">The eg processes running now: each announces itself every 5 s and is listed while heard \
         from within 20 s. A scaled tier shows each copy.</p>\n\
         <table><thead><tr><th>Tier</th><th>Copy</th><th>Version</th><th class=\"num\">Up for</th>\
         <th class=\"num\">Last heard</th></tr></thead>\n",
    );
    for tier in &status.tiers {
        let n = tier.copies.len();
        let copies = match n {
            0 => "<span class=\"hot\" data-field=\"copies\">none running</span>".to_owned(),
            n => format!(
                "<span class=\"muted\" data-field=\"copies\">{}</span>",
                counted(n as u64, "copy", "copies")
            ),
        };
        let _ = write!(
            out,
            "<tbody data-tier=\"{t}\"><tr><th rowspan=\"{}\" class=\"tier\"><div>{t}</div>{copies}</th>",
            n.max(1),
            t = esc(&tier.tier)
        );
        if n == 0 {
            out.push_str("<td colspan=\"4\" class=\"muted\">–</td></tr>\n");
        }
        for (i, copy) in tier.copies.iter().enumerate() {
            if i > 0 {
                out.push_str("<tr>");
            }
            let heard = u64::try_from((status.generated_at_ms.0 - copy.last_seen_ms.0).max(0) / 1000).unwrap_or(0);
            let _ = writeln!(
                out,
                "<td data-copy=\"{i}\"><code>{}</code></td><td>{}</td><td class=\"num\" title=\"started {}\">{}</td>\
                 <td class=\"num\">{} ago</td></tr>",
                esc(&copy.instance),
                esc(&copy.version),
                esc(&copy.started_at),
                age(copy.uptime_seconds),
                age(heard),
                i = esc(&copy.instance)
            );
        }
        out.push_str("</tbody>\n");
    }
    out.push_str("</table></section>\n");
}

/// Why the page is not shown, and how to sign in: the form submits the token to the page
/// asked for (with the rest of its query), which signs in and shows it.
pub fn sign_in(page: &SignIn, wrong_token: bool) -> String {
    let mut out = String::with_capacity(8 * 1024);
    head(&mut out, "eg status: sign in", Referrer::None);
    out.push_str("<body>\n<main><section class=\"card signin\"><h1>Sign in to the status page</h1>\n");
    if wrong_token {
        out.push_str("<p class=\"error\" id=\"wrong-token\">That is not this deployment's admin token.</p>\n");
    }
    out.push_str(
        "<p>This page shows topics, subscriptions, rates and queues to holders of the admin token \
         (<code>EG__ADMIN__TOKEN</code>). Signing in sets a cookie for these pages only and takes the \
         token out of the address bar.</p>\n",
    );
    let _ = write!(out, "<form method=\"get\" action=\"{}\">", esc(&page.path));
    for (name, value) in &page.kept {
        let _ = write!(
            out,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            esc(name),
            esc(value)
        );
    }
    let _ = writeln!(
        out,
        "<input type=\"password\" name=\"{TOKEN_FIELD}\" placeholder=\"admin token\" autocomplete=\"off\" \
         aria-label=\"admin token\" required><button type=\"submit\">Sign in</button></form>"
    );
    out.push_str(
        "<p class=\"muted\">Scripts can send <code>Authorization: Bearer &lt;token&gt;</code> instead, \
         or read the same data as JSON from <code>GET /admin/status</code>.</p>\n\
         </section></main>\n</body>\n</html>\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::super::model::{ProbationStatus, Queues, Rates};
    use super::*;

    #[test]
    fn escapes_everything_that_could_break_out() {
        assert_eq!(
            esc("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(rate(0.0), "0");
        assert_eq!(rate(0.004), "<0.01");
        assert_eq!(rate(3.256), "3.26");
        assert_eq!(rate(42.46), "42.5");
        assert_eq!(rate(1234.4), "1234");
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1234567), "1,234,567");
    }

    fn status_with(topic: &str, sub: &str, problem: &str) -> Status {
        Status {
            generated_at: "2026-01-02T03:04:05.000Z".into(),
            generated_at_ms: UnixMillis(1_767_323_045_000),
            topics: vec![TopicStatus {
                name: topic.into(),
                input_schema: "EventGridSchema".into(),
                namespace_topic: false,
                publish_rate: 2.5,
                unmatched_last_hour: 7,
                subscriptions: vec![SubscriptionStatus {
                    name: sub.into(),
                    delivery_mode: "Push",
                    queue: None,
                    endpoint_base_url: "https://example.test/hook".into(),
                    destination_type: "WebHook",
                    paused: true,
                    provisioning_state: "AwaitingManualAction".into(),
                    provisioning_message: Some("the endpoint answered <200> with an empty body".into()),
                    delivery_rate: 1.0,
                    failure_rate: 0.5,
                    dead_letter_rate: 0.0,
                    probation: Some(ProbationStatus {
                        state: "Probation",
                        until: Some("2026-01-02T03:05:00.000Z".into()),
                        until_ms: Some(UnixMillis(1_767_323_100_000)),
                        consecutive_failures: 10,
                        level: 1,
                        last_failure_outcome: Some("<Busy>".into()),
                    }),
                    dead_letters: 1200,
                    dead_letters_not_redriven: 3,
                    dead_letter_destination: None,
                    dead_letter_failure: None,
                    missed_last_hour: 4,
                }],
            }],
            rates: Rates::default(),
            queues: Queues::default(),
            tiers: super::super::tiers::tiers_of(Vec::new(), UnixMillis(0)),
            failing_dead_letter_destinations: Vec::new(),
            problems: vec![problem.into()],
        }
    }

    #[test]
    fn every_name_and_message_is_escaped() {
        let html = page(&status_with("t<b>", "s\"onmouseover=\"x", "redis: <down>"), None);
        assert!(!html.contains("t<b>"), "{html}");
        assert!(html.contains("t&lt;b&gt;"));
        assert!(!html.contains("s\"onmouseover"));
        assert!(html.contains("s&quot;onmouseover=&quot;x"));
        assert!(html.contains("redis: &lt;down&gt;"));
        assert!(html.contains("last failure &lt;Busy&gt;"));
        assert!(html.contains("/status/topics/t%3Cb%3E/subscriptions/s%22onmouseover%3D%22x"));
    }

    #[test]
    fn a_count_of_one_takes_the_singular() {
        assert_eq!(counted(1, "dead letter", "dead letters"), "1 dead letter");
        assert_eq!(counted(0, "dead letter", "dead letters"), "0 dead letters");
        assert_eq!(counted(1_200, "copy", "copies"), "1,200 copies");
        assert_eq!(noun(1, "it is", "they are"), "it is");

        let mut status = status_with("orders", "audit", "x");
        let probation = status.topics[0].subscriptions[0].probation.as_mut().unwrap();
        probation.consecutive_failures = 1;
        let html = page(&status, None);
        assert!(html.contains("1 consecutive failure, probation level 1"), "{html}");
        assert!(!html.contains("1 consecutive failures"), "{html}");
        assert!(!html.contains("1 copies"), "{html}");
    }

    #[test]
    fn the_sign_in_form_leads_back_to_the_page_asked_for() {
        let asked = SignIn::of(
            "/status/topics/orders/events/e%221",
            Some("subscription=a%22b&token=wrong"),
        );
        let html = sign_in(&asked, true);
        assert!(
            html.contains("<form method=\"get\" action=\"/status/topics/orders/events/e%221\">"),
            "{html}"
        );
        assert!(
            html.contains("<input type=\"hidden\" name=\"subscription\" value=\"a&quot;b\">"),
            "{html}"
        );
        assert!(!html.contains("wrong\""), "the token presented is not kept: {html}");
        assert!(html.contains("id=\"wrong-token\""));
    }

    #[test]
    fn ages_read_well() {
        assert_eq!(age(0), "0 s");
        assert_eq!(age(59), "59 s");
        assert_eq!(age(303), "5 m 3 s");
        assert_eq!(age(3 * 3600 + 12 * 60 + 5), "3 h 12 m");
        assert_eq!(age(2 * 86_400 + 4 * 3600), "2 d 4 h");
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(segment("orders-2"), "orders-2");
        assert_eq!(segment("a b/c?d#é"), "a%20b%2Fc%3Fd%23%C3%A9");
    }

    #[test]
    fn the_page_shows_each_section() {
        let html = page(&status_with("orders", "audit", "x"), None);
        for needle in [
            "updated <time id=\"updated\" datetime=\"2026-01-02T03:04:05.000Z\">03:04:05</time> UTC",
            "data-topic=\"orders\" data-subscription=\"audit\"",
            "<span class=\"badge warn\">Paused</span>",
            "AwaitingManualAction",
            "Probation until 03:05:00 UTC",
            // Dead letters as egctl counts them: 3 waiting, red, of 1,200 kept.
            "<span class=\"num hot\" data-field=\"not-redriven\">3</span><span class=\"kept\" data-field=\"kept\"> of 1,200 kept</span>",
            "href=\"/status/topics/orders/subscriptions/audit\"",
            "data-field=\"endpoint\">https://example.test/hook<",
            "7 unmatched in the last hour",
            "<tr data-waiting=\"orders/audit\">",
            // What the waiting subscription missed, not its topic's unmatched count.
            "<td class=\"num hot\" data-field=\"missed\">4</td>",
            "the endpoint answered &lt;200&gt; with an empty body",
            "id=\"failures\"",
            "id=\"queues\"",
            "data-partition=\"total\"",
            "<tbody data-tier=\"eg-sender\"><tr><th rowspan=\"1\" class=\"tier\"><div>eg-sender</div><span class=\"hot\" data-field=\"copies\">none running</span>",
            "<script>",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
        // The live fragment is the page's <main>, nothing more.
        let fragment = live(&status_with("orders", "audit", "x"));
        assert!(html.contains(&fragment));
        assert!(!fragment.contains("<script"));
        assert!(!fragment.contains("<html"));
    }

    #[test]
    fn a_storage_queue_or_broker_destination_shows_its_kind_and_identity() {
        let mut status = status_with("orders", "archive", "x");
        let sub = &mut status.topics[0].subscriptions[0];
        sub.destination_type = "StorageQueue";
        sub.endpoint_base_url = "storagequeue://queues1/orders".into();
        let html = page(&status, None);
        assert!(
            html.contains("data-field=\"endpoint\">StorageQueue storagequeue://queues1/orders<"),
            "{html}"
        );
    }

    #[test]
    fn a_queue_subscription_shows_its_queue_instead_of_an_endpoint() {
        let mut status = status_with("orders", "workers", "x");
        status.topics[0].namespace_topic = true;
        let sub = &mut status.topics[0].subscriptions[0];
        sub.delivery_mode = "Queue";
        sub.endpoint_base_url = String::new();
        sub.queue = Some(QueueFigures {
            available: 1_500,
            locked: 3,
            delayed: 0,
            oldest_unacknowledged_seconds: Some(303),
        });
        let html = page(&status, None);
        for needle in [
            "data-field=\"kind\"",
            ">Namespace topic</span>",
            "data-subscription=\"workers\" data-mode=\"Queue\"",
            "data-field=\"mode\">Queue: consumers pull<",
            "<span class=\"num\" data-field=\"available\">1,500</span> available",
            "<span class=\"num\" data-field=\"locked\">3</span> locked",
            "<span class=\"num zero\" data-field=\"delayed\">0</span> delayed",
            "oldest unacknowledged <span data-field=\"oldest\">5 m 3 s</span>",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
        assert!(!html.contains("data-field=\"endpoint\""), "{html}");
        assert!(!html.contains("data-field=\"delivery-rate\""), "{html}");

        // An empty queue has no oldest event; a push topic is not marked.
        assert!(
            queue_figures(&QueueFigures::default())
                .contains("oldest unacknowledged <span data-field=\"oldest\">none</span>")
        );
        assert!(!page(&status_with("orders", "audit", "x"), None).contains("Namespace topic</span>"));
    }

    fn failure(message: &str) -> DeadLetterFailure {
        DeadLetterFailure {
            store: "azure:deadletters1".into(),
            container: "dead".into(),
            kind: "Unauthenticated".into(),
            message: message.into(),
            failing_since: String::new(),
            last_failure_time: String::new(),
            // 12 minutes 3 seconds before the status was read.
            since_ms: UnixMillis(1_767_323_045_000 - 723_000),
        }
    }

    #[test]
    fn a_failing_dead_letter_destination_is_flagged_at_the_top_and_on_its_row() {
        let quiet = page(&status_with("orders", "audit", "x"), None);
        assert!(
            !quiet.contains("dead-letter-failing"),
            "nothing failing, nothing shown: {quiet}"
        );

        let mut status = status_with("orders", "audit", "x");
        let f = failure("Server failed to authenticate <the request>");
        status.topics[0].subscriptions[0].dead_letter_failure = Some(f.clone());
        status.failing_dead_letter_destinations = vec![FailingDeadLetters {
            topic: "orders".into(),
            subscription: "audit".into(),
            failure: f,
        }];
        let html = page(&status, None);
        for needle in [
            "<section class=\"card alarm\" id=\"dead-letter-failing\">",
            "<tr data-dead-letter-failing=\"orders/audit\"><td><a href=\"/status/topics/orders/subscriptions/audit\">",
            ">Unauthenticated</span>",
            "<code data-field=\"destination\">azure:deadletters1 / dead</code>",
            "Server failed to authenticate &lt;the request&gt;",
            "data-field=\"since\">02:52:02 (12 m 3 s ago)</td>",
            "data-field=\"dead-letter-failing\"",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
        let alarm = html.find("id=\"dead-letter-failing\"").unwrap();
        assert!(alarm < html.find("id=\"topics\"").unwrap(), "before the topics");
    }

    #[test]
    fn a_destination_shows_its_store_and_container() {
        let s3 = DeadLetterTarget {
            store: "s3:minio".into(),
            container: "eg-dead".into(),
            key_prefix: "prod".into(),
        };
        assert_eq!(
            dead_letter_target(&s3),
            "<code data-field=\"store\">s3:minio</code> bucket <code data-field=\"container\">eg-dead</code> \
             under <code data-field=\"key-prefix\">prod/</code>"
        );
        let local = DeadLetterTarget {
            store: "local".into(),
            container: "dead".into(),
            key_prefix: String::new(),
        };
        assert!(dead_letter_target(&local).contains("the dead-letter directory, folder"));
    }

    #[test]
    fn the_policy_allows_exactly_the_inline_style_and_script() {
        let policy = CONTENT_SECURITY_POLICY.as_str();
        assert!(policy.starts_with("default-src 'none'; style-src 'sha256-"));
        assert!(!policy.contains("unsafe-inline"));
        assert!(!SCRIPT.contains("</script"));
        assert!(!CSS.contains("</style"));
    }
}
