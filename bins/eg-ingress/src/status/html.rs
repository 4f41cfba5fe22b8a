//! What every status page shares: the document around a page (head, style, the bar at
//! the top, an action's flash), the badges and cells the overview and a subscription's
//! page both show, and the text forms of numbers, times and paths.
//!
//! Pages are written with [maud](https://maud.lambda.xyz): HTML as Rust syntax, checked
//! when the crate compiles, and every value spliced in with `(…)` escaped unless it is
//! wrapped in `PreEscaped`. maud over askama (templates in files, also compile-time
//! checked) because the pages are made of small functions that compose, which maud
//! writes as plain Rust functions returning `Markup`, and over minijinja because a
//! misspelled field should fail the build, not a page view. It adds two small crates.
//!
//! Escaped by construction: the only unescaped text is the page's own inline style and
//! script, through [`trusted_asset`], which takes `&'static str` so nothing read at run
//! time can reach it. `Markup` from these functions is composed as it is (it is already
//! escaped). Elements carry `data-*` attributes naming what they show, for tests and for
//! anyone scraping the page.

use super::dead_letter::{DeadLetterFailure, DeadLetterTarget};
use super::model::{QueueFigures, SubscriptionStatus};
use super::session::Flash;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use eg_core::UnixMillis;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use sha2::{Digest, Sha256};
use std::fmt::Write;
use std::sync::LazyLock;

const CSS: &str = include_str!("page.css");
pub const SCRIPT: &str = include_str!("live.js");

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

/// The one way to put text into a page unescaped: the page's own style and script,
/// compiled in. `'static` keeps anything read at run time out.
pub fn trusted_asset(text: &'static str) -> PreEscaped<&'static str> {
    PreEscaped(text)
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

/// `class="num"` or `class="num zero"` (greyed out) or `class="num hot"` (a problem).
pub fn num_class(nonzero: bool, is_problem: bool) -> &'static str {
    match (nonzero, is_problem) {
        (false, _) => "num zero",
        (true, true) => "num hot",
        (true, false) => "num",
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

/// A whole page: the head with its style, then `body`'s contents.
pub fn document(title: &str, referrer: Referrer, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content=(referrer.policy());
                title { (title) }
                style { (trusted_asset(CSS)) }
            }
            body { (body) }
        }
    }
    .into_string()
}

/// The bar at the top of every signed-in page; `trail` links back up.
pub fn top_bar(trail: Markup, live: bool) -> Markup {
    html! {
        header.top {
            div.brand { a href="/status" { span.logo { "eg" } "status" } (trail) }
            @if live { div.conn #conn role="status" { "live, refreshed every 2 s" } }
        }
    }
}

/// An action's result, once, at the top of the page it led to.
pub fn flash(flash: Option<&Flash>) -> Markup {
    html! {
        @if let Some(f) = flash {
            div class=(if f.ok { "flash ok" } else { "flash bad" }) id="flash" role="status" { (f.message) }
        }
    }
}

/// The kind of a dead-letter failure as a red badge, what the store said as its title.
pub fn failure_badge(failure: &DeadLetterFailure) -> Markup {
    html! { span.badge.bad data-field="kind" title=(failure.message) { (failure.kind) } }
}

/// `03:04:05 (12 m 3 s ago)`.
pub fn failing_since(failure: &DeadLetterFailure, now: UnixMillis) -> String {
    let ago = u64::try_from((now.0 - failure.since_ms.0).max(0) / 1000).unwrap_or(0);
    format!("{} ({} ago)", clock_time(failure.since_ms), age(ago))
}

/// Where dead letters go, for a settings row: the store and the container (the bucket
/// and key prefix for S3); never a key or an endpoint.
pub fn dead_letter_target(target: &DeadLetterTarget) -> Markup {
    let place = match target.store.as_str() {
        "local" => "the dead-letter directory, folder",
        s if s.starts_with("s3:") => "bucket",
        _ => "container",
    };
    html! {
        code data-field="store" { (target.store) } " " (place) " " code data-field="container" { (target.container) }
        @if !target.key_prefix.is_empty() {
            " under " code data-field="key-prefix" { (target.key_prefix) "/" }
        }
    }
}

pub fn state_badge(paused: bool) -> Markup {
    html! {
        @if paused { span.badge.warn { "Paused" } } @else { span.badge.ok { "Active" } }
    }
}

pub fn provisioning_badge(sub: &SubscriptionStatus) -> Markup {
    html! {
        @if sub.provisioning_state == "Succeeded" {
            span.muted { (sub.provisioning_state) }
        } @else {
            span.badge.warn title=(sub.provisioning_message.as_deref().unwrap_or("")) { (sub.provisioning_state) }
        }
    }
}

pub fn health_badge(sub: &SubscriptionStatus) -> Markup {
    let Some(p) = &sub.probation else {
        return html! { span.badge.ok { "Healthy" } };
    };
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
    let class = if p.state == "Probation" {
        "badge bad"
    } else {
        "badge warn"
    };
    html! { span class=(class) title=(detail) { (text) } }
}

/// Dead letters as `egctl deadletters` counts them: those waiting to be redriven (the
/// number that matters, red when any), and all kept; flagged when their destination
/// is failing.
pub fn dead_letter_cell(sub: &SubscriptionStatus) -> Markup {
    html! {
        span class=(num_class(sub.dead_letters_not_redriven > 0, true)) data-field="not-redriven" {
            (count(sub.dead_letters_not_redriven))
        }
        span.kept data-field="kept" { " of " (count(sub.dead_letters)) " kept" }
        @if let Some(f) = &sub.dead_letter_failure {
            div {
                span.badge.bad data-field="dead-letter-failing" title={ (f.kind) ": " (f.message) } {
                    "destination failing"
                }
            }
        }
    }
}

/// A queue subscription's figures, as cells' contents: what is receivable, locked to a
/// consumer, released with a delay, and how old the oldest unacknowledged event is.
pub fn queue_figures(q: &QueueFigures) -> Markup {
    let oldest = q.oldest_unacknowledged_seconds.map_or_else(|| "none".to_owned(), age);
    html! {
        span class=(num_class(q.available > 0, false)) data-field="available" { (count(q.available)) }
        " available · "
        span class=(num_class(q.locked > 0, false)) data-field="locked" { (count(q.locked)) }
        " locked · "
        span class=(num_class(q.delayed > 0, false)) data-field="delayed" { (count(q.delayed)) }
        " delayed · oldest unacknowledged "
        span data-field="oldest" { (oldest) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_everything_that_could_break_out() {
        let hostile = "<script>alert('x') & \"y\"</script>";
        let markup = html! { p title=(hostile) { (hostile) } }.into_string();
        assert_eq!(
            markup,
            "<p title=\"&lt;script&gt;alert('x') &amp; &quot;y&quot;&lt;/script&gt;\">\
             &lt;script&gt;alert('x') &amp; &quot;y&quot;&lt;/script&gt;</p>"
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
    fn a_destination_shows_its_store_and_container() {
        let s3 = DeadLetterTarget {
            store: "s3:minio".into(),
            container: "eg-dead".into(),
            key_prefix: "prod".into(),
        };
        assert_eq!(
            dead_letter_target(&s3).into_string(),
            "<code data-field=\"store\">s3:minio</code> bucket <code data-field=\"container\">eg-dead</code> \
             under <code data-field=\"key-prefix\">prod/</code>"
        );
        let local = DeadLetterTarget {
            store: "local".into(),
            container: "dead".into(),
            key_prefix: String::new(),
        };
        assert!(
            dead_letter_target(&local)
                .into_string()
                .contains("the dead-letter directory, folder")
        );
    }

    #[test]
    fn the_policy_allows_exactly_the_inline_style_and_script() {
        let policy = CONTENT_SECURITY_POLICY.as_str();
        assert!(policy.starts_with("default-src 'none'; style-src 'sha256-"));
        assert!(!policy.contains("unsafe-inline"));
        assert!(!SCRIPT.contains("</script"));
        assert!(!CSS.contains("</style"));
    }

    #[test]
    fn nothing_but_the_trusted_assets_is_written_unescaped() {
        let raw = concat!("Pre", "Escaped");
        let others = [
            include_str!("overview.rs"),
            include_str!("pages.rs"),
            include_str!("../status.rs"),
        ];
        for source in others {
            assert!(
                !source.contains(raw),
                "only html::trusted_asset may write unescaped text"
            );
        }
        // Here: the module doc, the import, and trusted_asset's signature and body.
        assert_eq!(include_str!("html.rs").matches(raw).count(), 4);
    }
}
