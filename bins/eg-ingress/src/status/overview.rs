//! The overview (`GET /status`) and its live sections (`GET /status/live`), and the
//! sign-in page. The page and the live fragment come from the same function
//! ([`live`]), so they cannot drift apart: a few lines of inline JavaScript (`live.js`)
//! fetch `/status/live` every 2 s and swap it into `<main>`.

use super::dead_letter::FailingDeadLetters;
use super::html::{
    Referrer, SCRIPT, age, clock_time, count, counted, dead_letter_cell, document, failing_since, failure_badge, flash,
    health_badge, num_class, provisioning_badge, queue_figures, rate, state_badge, subscription_path, top_bar,
    trusted_asset,
};
use super::identities::IdentityFailure;
use super::model::{DepthCounts, QueueFigures, Status, SubscriptionStatus, TopicStatus};
use super::session::{Flash, SignIn, TOKEN_FIELD};
use eg_core::UnixMillis;
use eg_core::fate::DropReason;
use maud::{Markup, html};

/// The whole page: header, the live sections, and the refresh script.
pub fn page(status: &Status, shown: Option<&Flash>) -> String {
    let body = html! {
        (top_bar(html! {}, true))
        div.wrap { (flash(shown)) }
        main #live { (live_sections(status)) }
        footer {
            "Rates are per second over the last minute, summed over every eg process; counts and queue depths \
             are read from Redis at each refresh. The same data as JSON: "
            code { "GET /admin/status" } " with the admin token."
        }
        script { (trusted_asset(SCRIPT)) }
    };
    document("eg status", Referrer::SameOrigin, body)
}

/// The sections that refresh: what `/status/live` answers.
pub fn live(status: &Status) -> String {
    live_sections(status).into_string()
}

/// What `/status/live` answers once the session has ended, in place of the sections.
pub fn signed_out() -> String {
    html! { p { "Signed out: open /status to sign in again." } }.into_string()
}

fn live_sections(status: &Status) -> Markup {
    html! {
        p.updated {
            "updated " time #updated datetime=(status.generated_at) { (clock_time(status.generated_at_ms)) }
            " UTC · rates over the last " (format!("{:.0}", status.rates.window_seconds)) " s"
        }
        @if !status.problems.is_empty() {
            div.problems #problems { @for problem in &status.problems { p { (problem) } } }
        }
        (tiles(status))
        (failing_dead_letters(status))
        (identities_banner(&status.failing_identities, status.generated_at_ms))
        (waiting(&status.topics))
        (topics(&status.topics))
        div.cols { (failures(status)) (dead_letters(status)) }
        (queues(status))
        (tiers(status))
    }
}

fn tiles(status: &Status) -> Markup {
    let r = &status.rates;
    let c = &r.last_minute;
    let tiles = [
        ("published", "Published", r.published, c.published, false),
        ("delivered", "Delivered", r.delivered, c.delivered, false),
        ("failed", "Failed attempts", r.failed, c.failed, true),
        ("deadlettered", "Dead-lettered", r.dead_lettered, c.dead_lettered, true),
        ("dropped", "Dropped", r.dropped, c.dropped, true),
    ];
    html! {
        section.tiles {
            @for (id, label, per_second, n, is_problem) in tiles {
                div class=(if is_problem && n > 0 { "tile bad" } else { "tile" }) data-total=(id) {
                    div.label { (label) }
                    div.value id={ "rate-" (id) } { (rate(per_second)) }
                    div.unit { "per second · " (count(n)) " in the last minute" }
                }
            }
        }
    }
}

/// Every subscription with its topic, those `keep` takes.
fn rows(
    topics: &[TopicStatus],
    keep: impl Fn(&SubscriptionStatus) -> bool,
) -> Vec<(&TopicStatus, &SubscriptionStatus)> {
    topics
        .iter()
        .flat_map(|t| t.subscriptions.iter().map(move |s| (t, s)))
        .filter(|(_, s)| keep(s))
        .collect()
}

/// A link to a subscription's page, named `topic / subscription`.
fn subscription_link(topic: &str, name: &str) -> Markup {
    html! { a href=(subscription_path(topic, name)) { (topic) " / " (name) } }
}

/// Subscriptions that do not receive events because their endpoint has not consented,
/// with the reason and how many events each missed meanwhile.
fn waiting(topics: &[TopicStatus]) -> Markup {
    let waiting = rows(topics, |s| s.provisioning_state != "Succeeded");
    if waiting.is_empty() {
        return html! {};
    }
    html! {
        section.card.attention #waiting {
            h2 { "Waiting for validation" }
            p.note {
                "These subscriptions receive no events until their endpoint answers the validation handshake. \
                 Missed: events their topic accepted in the last hour that the subscription's filter takes, not \
                 kept for it (another subscription may have received them)."
            }
            table {
                thead { tr { th { "Subscription" } th { "Provisioning" } th { "Why" } th.num { "Missed, last hour" } } }
                tbody {
                    @for (topic, sub) in waiting {
                        tr data-waiting={ (topic.name) "/" (sub.name) } {
                            td { (subscription_link(&topic.name, &sub.name)) }
                            td { span.badge.warn { (sub.provisioning_state) } }
                            td.why data-field="reason" { (sub.provisioning_message.as_deref().unwrap_or("")) }
                            td class=(num_class(sub.missed_last_hour > 0, true)) data-field="missed" {
                                (count(sub.missed_last_hour))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Subscriptions whose dead letters cannot be written now: what the store said, and
/// since when. First on the page, since every minute of it brings records nearer to
/// being dropped.
fn failing_dead_letters(status: &Status) -> Markup {
    let failing = &status.failing_dead_letter_destinations;
    if failing.is_empty() {
        return html! {};
    }
    html! {
        section.card.alarm #dead-letter-failing {
            h2 { "Dead letters not being written" }
            p.note {
                "Writing these subscriptions' dead letters to their destination fails. The records wait in Redis \
                 and are retried with backoff; those still unwritten after " code { "EG__DEADLETTER__GIVE_UP_AFTER" }
                " are dropped (counted as " code { (DropReason::DeadLetterDestinationUnavailable.as_str()) } ")."
            }
            table {
                thead { tr {
                    th { "Subscription" } th { "Problem" } th { "Destination" } th { "What the store said" }
                    th.num { "Failing since (UTC)" }
                } }
                tbody {
                    @for FailingDeadLetters { topic, subscription, failure } in failing {
                        tr data-dead-letter-failing={ (topic) "/" (subscription) } {
                            td { (subscription_link(topic, subscription)) }
                            td { (failure_badge(failure)) }
                            td { code data-field="destination" { (failure.store) " / " (failure.container) } }
                            td.why data-field="message" { (failure.message) }
                            td.num data-field="since" { (failing_since(failure, status.generated_at_ms)) }
                        }
                    }
                }
            }
        }
    }
}

/// The banner listing failing identities; nothing when there are none.
fn identities_banner(failing: &[IdentityFailure], now: UnixMillis) -> Markup {
    if failing.is_empty() {
        return html! {};
    }
    html! {
        section.card.alarm #identities-failing {
            h2 { "Delivery identities without tokens" }
            p.note {
                "These identities' token endpoints are down or refuse eg's requests. Deliveries to the webhooks \
                 that use them are not sent (" code { "TokenUnavailable" } ") and are retried on their schedule; \
                 the problem clears when a token is obtained again. See docs/oauth-delivery.md."
            }
            table {
                thead { tr {
                    th { "Identity" } th { "Problem" } th { "What the token endpoint said" }
                    th.num { "Subscriptions" } th.num { "Failing since (UTC)" } th.num { "Last seen (UTC)" }
                } }
                tbody {
                    @for f in failing {
                        tr data-identity-failing=(f.identity) {
                            td { code { (f.identity) } }
                            td { span.badge.bad data-field="kind" { (f.kind) } }
                            td.why data-field="message" { (f.message) }
                            td.num data-field="subscriptions" { (f.subscriptions) }
                            td.num data-field="since" {
                                (clock_time(f.since_ms)) " (" (age(seconds_between(f.since_ms, now))) " ago)"
                            }
                            td.num data-field="last" { (last_seen(f)) }
                        }
                    }
                }
            }
        }
    }
}

/// The time of day of the latest report, from its RFC 3339 form.
fn last_seen(f: &IdentityFailure) -> &str {
    f.last_failure_time
        .split_once('T')
        .map_or(f.last_failure_time.as_str(), |(_, time)| time.get(..8).unwrap_or(time))
}

fn seconds_between(from: UnixMillis, to: UnixMillis) -> u64 {
    u64::try_from((to.0 - from.0).max(0) / 1000).unwrap_or(0)
}

fn topics(topics: &[TopicStatus]) -> Markup {
    html! {
        section.card #topics {
            h2 { "Topics and subscriptions" }
            p.note {
                "Delivered and failed attempts per second over the last minute. Dead letters: waiting (not \
                 redriven) of all kept, as " code { "egctl deadletters" } " counts them. Open a subscription to see \
                 its settings and recent deliveries, and to pause, resume, validate or redrive it. A queue \
                 subscription shows its queue instead: events available to receive, locked to a consumer, released \
                 with a delay, and the age of the oldest not yet acknowledged."
            }
            @if topics.is_empty() {
                p.empty { "No topics yet: create one with " code { "PUT /admin/topics/{topic}" } "." }
            } @else {
                table {
                    thead { tr {
                        th { "Subscription" } th { "State" } th { "Provisioning" } th { "Endpoint health" }
                        th.num { "Delivered/s" } th.num { "Failed/s" } th.num { "Dead letters" }
                    } }
                    @for topic in topics { (topic_rows(topic)) }
                }
            }
        }
    }
}

fn topic_rows(topic: &TopicStatus) -> Markup {
    html! {
        tbody data-topic=(topic.name) {
            tr.topic {
                th colspan="4" {
                    span.name { (topic.name) }
                    @if topic.namespace_topic {
                        span.badge.info data-field="kind"
                            title="Event Grid namespace topic: CloudEvents in, push and queue subscriptions" {
                            "Namespace topic"
                        }
                    }
                    span.schema { (topic.input_schema) }
                    @if topic.unmatched_last_hour > 0 {
                        span.unmatched.hot data-field="unmatched"
                            title="events accepted in the last hour that no active subscription matched" {
                            (count(topic.unmatched_last_hour)) " unmatched in the last hour"
                        }
                    } @else {
                        span.unmatched.muted data-field="unmatched" { "0 unmatched in the last hour" }
                    }
                }
                td.num colspan="3" {
                    span data-field="publish-rate" { (rate(topic.publish_rate)) } " " span.muted { "published/s" }
                }
            }
            @if let Some(archive) = &topic.archive {
                tr data-field="archive" {
                    td.sub colspan="7" {
                        "Archive to " code data-field="archive-store" { (archive.store) "/" (archive.container) }
                        span.muted { ", kept " (archive.retention_days) " days" } ": "
                        span data-field="archive-backlog" { (count(archive.backlog)) } " waiting"
                        @if let Some(ms) = archive.oldest_waiting_ms {
                            span.muted { " (oldest " (ms / 1000) " s)" }
                        }
                        @if let Some(error) = &archive.last_error {
                            " " span.hot data-field="archive-error" { "last write failed: " (error) }
                        }
                        @if archive.dropped_last_hour > 0 {
                            " " span.hot data-field="archive-dropped" {
                                (count(archive.dropped_last_hour)) " dropped at the backlog's bound in the last hour: \
                                 never archived (EG__ARCHIVE__WHEN_FULL=drop-oldest)"
                            }
                        }
                    }
                }
            }
            @if topic.subscriptions.is_empty() {
                tr { td.sub.muted colspan="7" { "no subscriptions" } }
            }
            @for sub in &topic.subscriptions { (subscription_row(&topic.name, sub)) }
        }
    }
}

/// A queue subscription's row: its mode and queue instead of an endpoint and push rates.
fn queue_row(topic: &str, sub: &SubscriptionStatus, q: &QueueFigures) -> Markup {
    html! {
        tr data-topic=(topic) data-subscription=(sub.name) data-mode="Queue" {
            td.sub {
                a.subname href=(subscription_path(topic, &sub.name)) { (sub.name) }
                div.endpoint data-field="mode" { "Queue: consumers pull" }
            }
            td data-field="state" { (state_badge(sub.paused)) }
            td data-field="provisioning" { (provisioning_badge(sub)) }
            td.queue colspan="3" data-field="queue" { (queue_figures(q)) }
            td.num data-field="dead-letters" { (dead_letter_cell(sub)) }
        }
    }
}

fn subscription_row(topic: &str, sub: &SubscriptionStatus) -> Markup {
    if sub.delivery_mode == "Queue" {
        // Figures unread (a problem is shown above): zeros rather than a push row.
        return queue_row(topic, sub, &sub.queue.unwrap_or_default());
    }
    html! {
        tr data-topic=(topic) data-subscription=(sub.name) {
            td.sub {
                a.subname href=(subscription_path(topic, &sub.name)) { (sub.name) }
                div.endpoint data-field="endpoint" { (sub.destination_label()) }
                @if let Some(n) = sub.waiting_in_lines {
                    div.endpoint data-field="waiting-in-lines" { "ordered: " (count(n)) " waiting in lines" }
                }
                @if let Some(limits) = &sub.limits {
                    div.endpoint data-field="limit-backlog" {
                        "rate-limited · " (counted(limits.backlog, "delivery waits", "deliveries wait")) " for the limit"
                    }
                }
            }
            td data-field="state" { (state_badge(sub.paused)) }
            td data-field="provisioning" { (provisioning_badge(sub)) }
            td data-field="probation" { (health_badge(sub)) }
            td class=(num_class(sub.delivery_rate > 0.0, false)) data-field="delivery-rate" { (rate(sub.delivery_rate)) }
            td class=(num_class(sub.failure_rate > 0.0, true)) data-field="failure-rate" { (rate(sub.failure_rate)) }
            td.num data-field="dead-letters" { (dead_letter_cell(sub)) }
        }
    }
}

fn failures(status: &Status) -> Markup {
    let r = &status.rates;
    let mut by_count: Vec<_> = r.last_minute.failures_by_outcome.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    html! {
        section.card #failures {
            h2 { "Failures by outcome" }
            p.note { "Failed delivery attempts in the last minute, every subscription." }
            @if by_count.is_empty() {
                p.empty { "No failed attempts in the last minute." }
            } @else {
                table {
                    thead { tr { th { "Outcome" } th.num { "Attempts" } th.num { "Per second" } } }
                    tbody {
                        @for (outcome, n) in by_count {
                            tr data-outcome=(outcome) {
                                td { (outcome) }
                                td.num.hot data-field="count" { (count(*n)) }
                                td.num data-field="rate" {
                                    (rate(r.failures_by_outcome.get(outcome).copied().unwrap_or(0.0)))
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn dead_letters(status: &Status) -> Markup {
    let with_dead_letters = rows(&status.topics, |s| s.dead_letters > 0 || s.dead_letter_rate > 0.0);
    let c = &status.rates.last_minute;
    let reasons: Vec<(&str, &String, &u64)> = c
        .dead_lettered_by_reason
        .iter()
        .map(|(r, n)| ("Dead-lettered", r, n))
        .chain(c.dropped_by_reason.iter().map(|(r, n)| ("Dropped", r, n)))
        .collect();
    html! {
        section.card #dead-letters {
            h2 { "Dead letters" }
            p.note {
                "Per subscription: waiting to be redriven, and all kept (redriven ones included); and why \
                 deliveries ended without reaching their endpoint in the last minute."
            }
            @if with_dead_letters.is_empty() {
                p.empty { "No subscription has dead letters." }
            } @else {
                table {
                    thead { tr {
                        th { "Subscription" } th.num { "Not redriven" } th.num { "Kept" } th.num { "Dead-lettered/s" }
                    } }
                    tbody {
                        @for (topic, sub) in with_dead_letters {
                            tr data-dead-letters={ (topic.name) "/" (sub.name) } {
                                td { (subscription_link(&topic.name, &sub.name)) }
                                td class=(num_class(sub.dead_letters_not_redriven > 0, true)) data-field="not-redriven" {
                                    (count(sub.dead_letters_not_redriven))
                                }
                                td.num data-field="total" { (count(sub.dead_letters)) }
                                td.num { (rate(sub.dead_letter_rate)) }
                            }
                        }
                    }
                }
            }
            @if !reasons.is_empty() {
                h3 { "Last minute, by reason" }
                table {
                    thead { tr { th { "What" } th { "Reason" } th.num { "Deliveries" } } }
                    tbody {
                        @for (what, reason, n) in reasons {
                            tr data-reason=(reason) { td { (what) } td { (reason) } td.num.hot { (count(*n)) } }
                        }
                    }
                }
            }
        }
    }
}

fn depth_cells(d: &DepthCounts) -> Markup {
    let cells = [
        ("ready", d.ready, false),
        ("in-flight", d.in_flight, false),
        ("retry", d.retry, false),
        ("paused", d.paused, false),
        ("dead-letter-backlog", d.dead_letter_backlog, true),
    ];
    html! {
        @for (field, n, is_problem) in cells {
            td class=(num_class(n > 0, is_problem)) data-field=(field) { (count(n)) }
        }
    }
}

fn queues(status: &Status) -> Markup {
    html! {
        section.card #queues {
            h2 { "Queues" }
            p.note {
                "Deliveries per partition now: waiting to be sent, held by a sender, waiting for a retry, set aside \
                 for paused subscriptions, and dead-letter records not yet written."
            }
            table {
                thead { tr {
                    th { "Partition" } th.num { "Ready" } th.num { "In flight" } th.num { "Retry" }
                    th.num { "Paused" } th.num { "Dead-letter backlog" }
                } }
                tbody {
                    @for p in &status.queues.partitions {
                        tr data-partition=(p.partition) { td { (p.partition) } (depth_cells(&p.depths)) }
                    }
                }
                tfoot { tr data-partition="total" { td { "Total" } (depth_cells(&status.queues.total)) } }
            }
        }
    }
}

fn tiers(status: &Status) -> Markup {
    let heard = |last_seen: eg_core::UnixMillis| {
        age(u64::try_from((status.generated_at_ms.0 - last_seen.0).max(0) / 1000).unwrap_or(0))
    };
    html! {
        section.card #tiers {
            h2 { "Tiers" }
            p.note {
                "The eg processes running now: each announces itself every 5 s and is listed while heard from \
                 within 20 s. A scaled tier shows each copy."
            }
            table {
                thead { tr {
                    th { "Tier" } th { "Copy" } th { "Version" } th.num { "Up for" } th.num { "Last heard" }
                } }
                @for tier in &status.tiers {
                    @let n = tier.copies.len();
                    tbody data-tier=(tier.tier) {
                        tr {
                            th rowspan=(n.max(1)) class="tier" {
                                div { (tier.tier) }
                                @if n == 0 {
                                    span.hot data-field="copies" { "none running" }
                                } @else {
                                    span.muted data-field="copies" { (counted(n as u64, "copy", "copies")) }
                                }
                            }
                            @if n == 0 { td.muted colspan="4" { "–" } }
                            @if let Some(first) = tier.copies.first() { (copy_cells(first, &heard)) }
                        }
                        @for copy in tier.copies.iter().skip(1) { tr { (copy_cells(copy, &heard)) } }
                    }
                }
            }
        }
    }
}

fn copy_cells(copy: &super::tiers::CopyStatus, heard: &dyn Fn(eg_core::UnixMillis) -> String) -> Markup {
    html! {
        td data-copy=(copy.instance) { code { (copy.instance) } }
        td { (copy.version) }
        td.num title={ "started " (copy.started_at) } { (age(copy.uptime_seconds)) }
        td.num { (heard(copy.last_seen_ms)) " ago" }
    }
}

/// Why the page is not shown, and how to sign in: the form submits the token to the page
/// asked for (with the rest of its query), which signs in and shows it.
pub fn sign_in(page: &SignIn, wrong_token: bool) -> String {
    let body = html! {
        main { section.card.signin {
            h1 { "Sign in to the status page" }
            @if wrong_token { p.error #wrong-token { "That is not this deployment's admin token." } }
            p {
                "This page shows topics, subscriptions, rates and queues to holders of the admin token ("
                code { "EG__ADMIN__TOKEN" } "). Signing in sets a cookie for these pages only and takes the token \
                out of the address bar."
            }
            form method="get" action=(page.path) {
                @for (name, value) in &page.kept { input type="hidden" name=(name) value=(value); }
                input type="password" name=(TOKEN_FIELD) placeholder="admin token" autocomplete="off"
                    aria-label="admin token" required;
                button type="submit" { "Sign in" }
            }
            p.muted {
                "Scripts can send " code { "Authorization: Bearer <token>" } " instead, or read the same data as \
                 JSON from " code { "GET /admin/status" } "."
            }
        } }
    };
    document("eg status: sign in", Referrer::None, body)
}

#[cfg(test)]
mod tests {
    use super::super::dead_letter::DeadLetterFailure;
    use super::super::html::{counted, noun};
    use super::super::model::{ProbationStatus, Queues, Rates};
    use super::*;
    use eg_core::UnixMillis;

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
                archive: None,
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
                    limits: None,
                    waiting_in_lines: None,
                }],
            }],
            rates: Rates::default(),
            queues: Queues::default(),
            tiers: super::super::tiers::tiers_of(Vec::new(), UnixMillis(0)),
            failing_dead_letter_destinations: Vec::new(),
            failing_identities: Vec::new(),
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
    fn archive_entries_dropped_at_the_bound_show_in_red_and_none_show_nothing() {
        let mut status = status_with("orders", "audit", "x");
        let mut archive = crate::status::model::ArchiveStatus {
            store: "local".into(),
            container: "archive".into(),
            retention_days: 7,
            backlog: 10,
            oldest_waiting_ms: None,
            last_error: None,
            dropped_last_hour: 0,
        };
        status.topics[0].archive = Some(archive.clone());
        assert!(!page(&status, None).contains("archive-dropped"));
        archive.dropped_last_hour = 1500;
        status.topics[0].archive = Some(archive);
        let html = page(&status, None);
        assert!(
            html.contains("class=\"hot\" data-field=\"archive-dropped\">1,500 dropped at the backlog's bound"),
            "{html}"
        );
    }

    #[test]
    fn an_ordered_subscription_shows_what_waits_in_its_lines_and_an_unordered_one_nothing() {
        let mut status = status_with("orders", "ledger", "x");
        assert!(!page(&status, None).contains("waiting-in-lines"));
        status.topics[0].subscriptions[0].waiting_in_lines = Some(1234);
        let html = page(&status, None);
        assert!(
            html.contains("data-field=\"waiting-in-lines\">ordered: 1,234 waiting in lines<"),
            "{html}"
        );
    }

    #[test]
    fn a_rate_limited_subscriptions_row_says_how_many_deliveries_wait_for_the_limit() {
        let mut status = status_with("orders", "partner", "x");
        let html = page(&status, None);
        assert!(!html.contains("limit-backlog"), "{html}");
        status.topics[0].subscriptions[0].limits = Some(super::super::limits::LimitsStatus {
            requests_per_second: Some(5.0),
            burst: Some(5),
            max_concurrent_requests: None,
            current_rate: 5.0,
            backlog: 1_234,
            in_flight: 0,
            slowed_until: None,
        });
        let html = page(&status, None);
        assert!(
            html.contains("data-field=\"limit-backlog\">rate-limited · 1,234 deliveries wait for the limit<"),
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
                .into_string()
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
    fn a_hostile_name_comes_out_escaped_on_the_overview_and_the_sign_in_page() {
        let hostile = "<script>alert('x')</script>\" onclick=\"y\" & z";
        let escaped = "&lt;script&gt;alert('x')&lt;/script&gt;&quot; onclick=&quot;y&quot; &amp; z";
        let mut status = status_with(hostile, hostile, hostile);
        status.topics[0].subscriptions[0].provisioning_message = Some(hostile.into());
        status.failing_dead_letter_destinations = vec![FailingDeadLetters {
            topic: hostile.into(),
            subscription: hostile.into(),
            failure: failure(hostile),
        }];
        let pages = [
            page(&status, Some(&Flash::failed(hostile))),
            sign_in(
                &SignIn::of(
                    "/status",
                    Some("x=%3Cscript%3Ealert('x')%3C%2Fscript%3E%22%20onclick%3D%22y%22%20%26%20z"),
                ),
                true,
            ),
        ];
        for html in pages {
            assert!(!html.contains("<script>alert"), "{html}");
            assert!(!html.contains("\" onclick=\""), "{html}");
            assert!(html.contains(escaped), "{html}");
        }
    }

    #[test]
    fn the_banner_shows_only_when_an_identity_fails_and_escapes_what_the_provider_said() {
        assert!(identities_banner(&[], UnixMillis(0)).into_string().is_empty());
        let html = identities_banner(
            &[super::super::identities::tests::failure("<b>down</b>")],
            UnixMillis(126_000),
        )
        .into_string();
        for needle in [
            "id=\"identities-failing\"",
            "<tr data-identity-failing=\"partner\">",
            ">Unreachable</span>",
            "&lt;b&gt;down&lt;/b&gt;",
            "data-field=\"since\">00:00:01 (2 m 5 s ago)</td>",
            "data-field=\"last\">00:01:01</td>",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
    }
}
