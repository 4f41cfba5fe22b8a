//! The HTML of a subscription's page, an event's history, the redrive confirmation and
//! the pages that say why something could not be shown or done. Static pages (no live
//! refresh): an action reloads them, and so does the browser's reload. Written with
//! maud like the overview (see `html`): every value is escaped as it is spliced in.

use super::dead_letter::DeadLetterFailure;
use super::html::{
    Referrer, clock_time, count, counted, dead_letter_cell, dead_letter_target, document, failing_since, failure_badge,
    flash, health_badge, noun, num_class, provisioning_badge, queue_figures, rate, segment, state_badge,
    subscription_path, top_bar,
};
use super::session::{FORM_TOKEN_FIELD, Flash};
use super::subscription::{Activity, EventPage, SubscriptionPage};
use eg_core::UnixMillis;
use eg_core::fate::DropReason;
use maud::{Markup, html};
use serde_json::Value;
use std::fmt::Write;

fn trail(topic: &str, subscription: Option<&str>) -> Markup {
    html! {
        span.crumb { (topic) }
        @if let Some(name) = subscription {
            span.crumb { a href=(subscription_path(topic, name)) { (name) } }
        }
    }
}

/// A form that posts one action with the form token; `button` is its button's text.
fn action_form(action: &str, form_token: &str, button: &str, class: &str) -> Markup {
    html! {
        form method="post" action=(action) class="action" {
            input type="hidden" name=(FORM_TOKEN_FIELD) value=(form_token);
            button type="submit" class=(class) data-action=(button) { (button) }
        }
    }
}

/// A JSON value as a short text: strings bare, the rest as JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "–".into(),
        other => other.to_string(),
    }
}

fn setting(field: &str, label: &str, value: Markup) -> Markup {
    html! { tr data-setting=(field) { th { (label) } td { (value) } } }
}

/// `key: value` lines of a JSON object (filter, retry policy), or `none_text`.
fn object_lines(value: &Value, none_text: &str) -> Markup {
    html! {
        @match value.as_object() {
            Some(map) if !map.is_empty() => {
                @for (k, v) in map { div { span.muted { (k) } " " code { (plain(v)) } } }
            }
            _ => span.muted { (none_text) },
        }
    }
}

pub fn subscription(page: &SubscriptionPage, form_token: &str, shown: Option<&Flash>) -> String {
    let sub = &page.status;
    let queue = (sub.delivery_mode == "Queue").then(|| sub.queue.unwrap_or_default());
    let body = html! {
        (top_bar(trail(&page.topic, Some(&sub.name)), false))
        main data-topic=(page.topic) data-subscription=(sub.name) {
            (flash(shown))
            p.updated { "read " time #updated { (clock_time(page.generated_at_ms)) } " UTC · reload for fresh numbers" }
            @for problem in &page.problems { div.problems { p { (problem) } } }
            @if let Some(failure) = &sub.dead_letter_failure {
                (dead_letter_failure(failure, page.generated_at_ms))
            }
            (state_card(page, queue.as_ref(), form_token))
            div.cols {
                // Settings, as the management API writes them.
                @if queue.is_some() { (queue_settings(page)) } @else { (push_settings(page)) }
                (activity(page))
            }
            (replays(page, form_token))
            (recent(page))
        }
    };
    document(
        &format!("{} / {}: eg status", page.topic, sub.name),
        Referrer::SameOrigin,
        body,
    )
}

/// The subscription's state and what can be done about it.
fn state_card(page: &SubscriptionPage, queue: Option<&super::model::QueueFigures>, form_token: &str) -> Markup {
    let sub = &page.status;
    let path = subscription_path(&page.topic, &sub.name);
    html! {
        section.card #state {
            h1 { (page.topic) " " span.muted { "/" } " " (sub.name) }
            div.facts {
                div { div.label { "State" } div data-field="state" { (state_badge(sub.paused)) } }
                div { div.label { "Provisioning" } div data-field="provisioning" { (provisioning_badge(sub)) } }
                @if let Some(q) = queue {
                    div { div.label { "Queue" } div.queue data-field="queue" { (queue_figures(q)) } }
                } @else {
                    div { div.label { "Endpoint health" } div data-field="probation" { (health_badge(sub)) } }
                }
                div { div.label { "Dead letters" } div.num-left data-field="dead-letters" { (dead_letter_cell(sub)) } }
                @if let Some(n) = sub.waiting_in_lines {
                    div { div.label { "Waiting in lines" } div.num-left data-field="waiting-in-lines" { (count(n)) } }
                }
            }
            @if let Some(message) = &sub.provisioning_message {
                p.why data-field="provisioning-message" { (message) }
            }
            div.actions #actions {
                @if sub.paused {
                    (action_form(&format!("{path}/resume"), form_token, "Resume", "primary"))
                } @else if queue.is_none() {
                    // A queue subscription cannot be paused (the management API refuses it).
                    (action_form(&format!("{path}/pause"), form_token, "Pause", ""))
                }
                @if queue.is_none() && sub.provisioning_state != "Succeeded" {
                    (action_form(&format!("{path}/validate"), form_token, "Validate again", "primary"))
                }
                @if sub.dead_letters_not_redriven > 0 {
                    a.button href={ (path) "/redrive" } data-action="Redrive dead letters" { "Redrive dead letters…" }
                }
            }
            @if queue.is_some() {
                p.note {
                    "Consumers receive this subscription's events when they ask, so it cannot be paused: stop its \
                     consumers to hold events back (their time-to-live still counts). Available: receivable now; \
                     locked: received and not yet acknowledged, released or rejected, the lock not expired; delayed: \
                     released with a delay."
                }
            } @else if sub.paused {
                p.note data-field="pause-note" {
                    "While it is paused its events still match and wait here (their time-to-live still counts); \
                     resuming hands them to the senders at once."
                }
            } @else {
                p.note data-field="pause-note" {
                    "Pausing holds back its deliveries: events still match and wait (their time-to-live still \
                     counts) until you resume it, which hands them to the senders at once."
                }
            }
        }
    }
}

/// What the subscription did in the last minute and hour.
fn activity(page: &SubscriptionPage) -> Markup {
    type Row = (&'static str, &'static str, fn(&Activity) -> u64, bool);
    let rows: [Row; 4] = [
        ("delivered", "Delivered", |a| a.delivered, false),
        ("failed", "Failed attempts", |a| a.failed, true),
        ("dead-lettered", "Dead-lettered", |a| a.dead_lettered, true),
        ("dropped", "Dropped", |a| a.dropped, true),
    ];
    html! {
        section.card #activity {
            h2 { "Deliveries" }
            p.note { "Counted by every eg process; failed attempts include those retried later." }
            table {
                thead { tr { th {} th.num { "Last minute" } th.num { "Last hour" } } }
                tbody {
                    @for (field, label, of, is_problem) in rows {
                        @let (minute, hour) = (of(&page.last_minute), of(&page.last_hour));
                        tr data-activity=(field) {
                            td { (label) }
                            td class=(num_class(minute > 0, is_problem)) { (count(minute)) }
                            td class=(num_class(hour > 0, is_problem)) { (count(hour)) }
                        }
                    }
                }
            }
            p.note {
                "Now: " (rate(page.status.delivery_rate)) "/s delivered, " (rate(page.status.failure_rate))
                "/s failed attempts."
            }
        }
    }
}

/// Recent deliveries, and any event's history.
fn recent(page: &SubscriptionPage) -> Markup {
    let sub = &page.status;
    html! {
        section.card #recent {
            h2 { "Recent deliveries" }
            p.note {
                "The newest events of this subscription with a kept history (each with its latest step); open one \
                 for every step. Histories are kept for " code { "EG__HISTORY__RETENTION" } "."
            }
            form method="get" action={ "/status/topics/" (segment(&page.topic)) "/events" } class="lookup" {
                input type="hidden" name="subscription" value=(sub.name);
                input type="text" name="id" placeholder="event id" aria-label="event id" required;
                button type="submit" { "Show history" }
            }
            @if page.recent.is_empty() {
                p.empty { "No delivery history yet." }
            } @else {
                table {
                    thead { tr {
                        th { "Event" } th { "State" } th.num { "Attempt" } th { "Outcome" } th.num { "HTTP" }
                        th { "At (UTC)" } th { "Next / why" }
                    } }
                    tbody {
                        @for d in &page.recent {
                            @let e = d.latest.to_resource();
                            @let state = plain(&e["state"]);
                            tr data-event=(d.event_id) {
                                td { a.event href=(event_path(&page.topic, &d.event_id, Some(&sub.name))) {
                                    code { (d.event_id) }
                                } }
                                td { span class={ "badge " (state_class(&state)) } { (state) } }
                                td.num { (d.latest.attempt) }
                                td { (plain(&e["outcome"])) }
                                td.num { (plain(&e["httpStatus"])) }
                                td { (clock_time(d.latest.at)) }
                                td.muted { (next_or_why(&e)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The subscription's replays (archive.md, "Replay"): each job's progress, a cancel
/// button while it runs, and the form that starts one when the topic is archived.
fn replays(page: &SubscriptionPage, form_token: &str) -> Markup {
    let path = subscription_path(&page.topic, &page.status.name);
    let now = page.generated_at_ms;
    let hour_ago = UnixMillis(now.0 - 3_600_000).to_rfc3339();
    html! {
        section.card #replays {
            h2 { "Replays" }
            @if page.archived {
                p.note {
                    "Send the events the topic accepted in a window to this subscription again, through its filter \
                     (and an event type, if given), each marked " code { "aeg-replay-job" } ". Times are RFC 3339, UTC; \
                     reload for fresh progress."
                }
                form method="post" action={ (path) "/replay" } class="lookup" #replay-form {
                    input type="hidden" name=(FORM_TOKEN_FIELD) value=(form_token);
                    input type="text" name="from" value=(hour_ago) aria-label="from" required;
                    input type="text" name="to" value=(now.to_rfc3339()) aria-label="to";
                    input type="text" name="eventType" placeholder="event type (optional)" aria-label="event type";
                    input type="text" name="maxEventsPerSecond" placeholder="events/s (1000)" aria-label="events per second";
                    button type="submit" data-action="Replay" { "Replay" }
                }
            } @else {
                p.empty { "The topic is not archived: there is nothing to replay. Set properties.archive on the topic." }
            }
            @if !page.replays.is_empty() {
                table {
                    thead { tr {
                        th { "Job" } th { "State" } th { "Window (UTC)" } th.num { "Replayed" } th.num { "Read" }
                        th.num { "Filtered" } th.num { "Events/s" } th { "" }
                    } }
                    tbody {
                        @for job in &page.replays {
                            @let state = job.state.as_str();
                            tr data-replay=(job.id) {
                                td { code { (job.id.get(..8).unwrap_or(&job.id)) } }
                                td {
                                    span class={ "badge " (replay_class(state)) } { (state) }
                                    @if let Some(problem) = &job.problem { div.why { (problem) } }
                                }
                                td { (clock_time(job.spec.from)) " – " (clock_time(job.spec.to)) }
                                td.num { (count(job.replayed)) }
                                td.num { (count(job.read)) }
                                td.num { (count(job.filtered)) }
                                td.num { (format!("{:.1}", job.rate(now))) }
                                td {
                                    @if state == "Running" {
                                        (action_form(&format!("{path}/replays/{}/cancel", job.id), form_token, "Cancel", ""))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn replay_class(state: &str) -> &'static str {
    match state {
        "Succeeded" => "ok",
        "Failed" => "bad",
        _ => "warn",
    }
}

fn state_class(state: &str) -> &'static str {
    match state {
        "Delivered" => "ok",
        "DeadLettered" | "Dropped" => "bad",
        _ => "warn",
    }
}

/// The warning that this subscription's dead letters cannot be written: what the store
/// said, since when, what happens to the records meanwhile, and what to check.
fn dead_letter_failure(failure: &DeadLetterFailure, now: UnixMillis) -> Markup {
    html! {
        section.card.alarm #dead-letter-failure {
            h2 { "Dead letters are not being written" }
            p {
                "Writing to " code data-field="destination" { (failure.store) " / " (failure.container) }
                " fails " (failure_badge(failure)) " since " strong data-field="since" { (failing_since(failure, now)) }
                " UTC."
            }
            p.error data-field="message" { (failure.message) }
            p data-field="remedy" { (remedy(&failure.kind)) }
            p.note {
                "Meanwhile the records wait in Redis and are tried again with backoff; a record still unwritten \
                 after " code { "EG__DEADLETTER__GIVE_UP_AFTER" } " (4 h by default) is dropped and counted ("
                code { "DroppedEventCount" } ", reason " code { (DropReason::DeadLetterDestinationUnavailable.as_str()) } "). This \
                 subscription's dead letters can still be listed and redriven: eg keeps them in Redis whatever the \
                 destination."
            }
        }
    }
}

/// What to check for each kind of failure the dead-letter worker records.
fn remedy(kind: &str) -> &'static str {
    match kind {
        "Unauthenticated" => {
            "The store refused eg's credentials: check the account key or connection string (Azure), or the access \
             keys (S3) configured for this store, then restart the dead-letter workers."
        }
        "PermissionDenied" => {
            "The credentials are valid but may not write here: on Azure, check the storage account's firewall and \
             network rules; on S3, allow s3:PutObject on this bucket."
        }
        "ContainerNotFound" => {
            "The container or bucket does not exist: create it, or point the subscription at one that does. eg \
             does not create it."
        }
        "Unavailable" => {
            "The store did not answer, or answered with a server error or throttling: check the network path \
             from the dead-letter workers and the store's health. Writes resume on their own."
        }
        _ => "See the dead-letter workers' log lines for this subscription and store.",
    }
}

/// A subscription's dead-letter destination for the settings table.
fn dead_letter_setting(page: &SubscriptionPage, without: &str) -> Markup {
    let shown = match &page.status.dead_letter_destination {
        Some(target) => dead_letter_target(target),
        None => html! { span.muted { (without) } },
    };
    setting("dead-letter-destination", "Dead-letter destination", shown)
}

/// The rows both kinds of subscription end their settings with.
fn common_tail(page: &SubscriptionPage) -> Markup {
    html! {
        (setting("provisioning", "Provisioning", html! { (page.status.provisioning_state) }))
        @if let Some(at) = page.properties["expirationTimeUtc"].as_str() {
            (setting("expiration", "Expires", html! { (at) }))
        }
    }
}

/// A push subscription's settings: where it delivers and how.
fn push_settings(page: &SubscriptionPage) -> Markup {
    let sub = &page.status;
    let p = &page.properties;
    let destination = &p["destination"]["properties"];
    let batching = match destination["maxEventsPerBatch"].as_u64() {
        Some(1) | None => "one event per request".to_owned(),
        Some(n) => format!(
            "up to {} per request, {} KB preferred",
            counted(n, "event", "events"),
            plain(&destination["preferredBatchSizeInKilobytes"])
        ),
    };
    html! {
        section.card #settings {
            h2 { "Settings" }
            table.settings { tbody {
                (setting("endpoint", "Endpoint", html! { code { (sub.destination_label()) } }))
                (setting("schema", "Delivery schema", html! { (plain(&p["eventDeliverySchema"])) }))
                (setting("filter", "Filter", object_lines(&filter_shown(&p["filter"]), "every event")))
                (setting("retry-policy", "Retry policy", object_lines(&p["retryPolicy"], "default")))
                (setting("batching", "Batching", html! { (batching) }))
                (delivery_controls(p))
                (dead_letter_setting(page, "none: dead letters are kept in the archive only"))
                (setting("paused", "Paused", html! { (if sub.paused { "yes" } else { "no" }) }))
                (common_tail(page))
            } }
        }
    }
}

/// The delivery controls of a push subscription (docs/delivery.md#delivery-controls-beyond-event-grid):
/// its rate limit, ordering, bearer token and client certificate; names only, never a
/// secret (the API shows none).
fn delivery_controls(p: &Value) -> Markup {
    let destination = &p["destination"]["properties"];
    let token_fields = [
        "azureActiveDirectoryTenantId",
        "azureActiveDirectoryApplicationIdOrUri",
        "deliveryIdentity",
        "tokenScope",
        "tokenAudience",
    ];
    let token: serde_json::Map<String, Value> = token_fields
        .iter()
        .filter(|k| !destination[**k].is_null())
        .map(|k| ((*k).to_owned(), destination[*k].clone()))
        .collect();
    let certificate = destination["clientCertificate"].as_str();
    html! {
        (setting("rate-limit", "Rate limit", object_lines(&p["deliveryLimits"], "none")))
        (setting("ordering", "Ordered delivery", object_lines(&p["orderedDelivery"], "no: events may arrive in any order")))
        (setting("token", "Bearer token", object_lines(&Value::Object(token), "none")))
        (setting("client-certificate", "Client certificate", html! {
            @match certificate { Some(name) => code { (name) }, None => span.muted { "none" } }
        }))
    }
}

/// An object without its null and empty members (a filter nobody set shows as none).
fn given(value: &Value) -> Value {
    let Some(map) = value.as_object() else {
        return Value::Null;
    };
    let empty = |v: &Value| v.is_null() || v.as_array().is_some_and(Vec::is_empty);
    Value::Object(
        map.iter()
            .filter(|(_, v)| !empty(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// The parts of a push subscription's filter that choose events: a flag that only
/// qualifies another part (`isSubjectCaseSensitive`, `enableAdvancedFilteringOnArrays`)
/// is shown only with that part, so a subscription without a filter shows none.
fn filter_shown(filter: &Value) -> Value {
    let mut shown = given(filter);
    if let Some(map) = shown.as_object_mut() {
        let qualified = [
            ("isSubjectCaseSensitive", &["subjectBeginsWith", "subjectEndsWith"][..]),
            ("enableAdvancedFilteringOnArrays", &["advancedFilters"][..]),
        ];
        for (flag, parts) in qualified {
            if !parts.iter().any(|part| map.get(*part).is_some_and(|v| v != "")) {
                map.remove(flag);
            }
        }
    }
    shown
}

/// A queue subscription's settings, in the namespace form's terms.
fn queue_settings(page: &SubscriptionPage) -> Markup {
    let p = &page.properties;
    let q = &p["deliveryConfiguration"]["queue"];
    html! {
        section.card #settings {
            h2 { "Settings" }
            table.settings { tbody {
                (setting("mode", "Delivery mode", html! { "Queue: consumers receive, acknowledge, release or reject" }))
                (setting("receive-lock", "Receive lock", html! { (plain(&q["receiveLockDurationInSeconds"])) " s" }))
                (setting("max-delivery-count", "Max delivery count", html! { (plain(&q["maxDeliveryCount"])) }))
                (setting("ttl", "Event time-to-live", html! { (plain(&q["eventTimeToLive"])) }))
                (setting("schema", "Delivery schema", html! { (plain(&p["eventDeliverySchema"])) }))
                (setting("filter", "Filter", object_lines(&given(&p["filtersConfiguration"]), "every event")))
                (dead_letter_setting(page, "none: events that end are dropped"))
                (common_tail(page))
            } }
        }
    }
}

/// What comes next for a step, or why it ended: a retry's time, a reason.
fn next_or_why(step: &Value) -> String {
    let parts: Vec<String> = [
        "nextAttemptTime",
        "heldBecause",
        "heldUntil",
        "expiresAt",
        "reason",
        "error",
    ]
    .iter()
    .filter_map(|field| step.get(*field).filter(|v| !v.is_null()).map(|v| (*field, plain(v))))
    .map(|(field, v)| match field {
        "nextAttemptTime" => format!("next attempt {v}"),
        "heldUntil" => format!("until {v}"),
        "expiresAt" => format!("expires {v}"),
        _ => v,
    })
    .collect();
    parts.join(" · ")
}

pub fn event_path(topic: &str, event_id: &str, subscription: Option<&str>) -> String {
    let mut path = format!("/status/topics/{}/events/{}", segment(topic), segment(event_id));
    if let Some(name) = subscription {
        let _ = write!(path, "?subscription={}", segment(name));
    }
    path
}

pub fn event(page: &EventPage) -> String {
    let to = page.subscription.as_deref().map_or_else(
        || " to every subscription of the topic".to_owned(),
        |s| format!(" to {s}"),
    );
    let body = html! {
        (top_bar(trail(&page.topic, page.subscription.as_deref()), false))
        main { section.card #history {
            h1 { "Event " code { (page.event_id) } }
            p.note {
                "Every kept step of its deliveries" (to) ", oldest first, read "
                time #updated { (clock_time(page.generated_at_ms)) } " UTC."
            }
            @if page.subscription.is_some() {
                p { a href=(event_path(&page.topic, &page.event_id, None)) { "every subscription's steps" } }
            }
            @if page.steps.is_empty() {
                p.empty #no-history {
                    "No delivery history for this event: none yet, not an event of this topic, or older than the \
                     retention (" code { "EG__HISTORY__RETENTION" } ")."
                }
            } @else {
                table {
                    thead { tr {
                        th { "At (UTC)" } th { "Subscription" } th.num { "Attempt" } th { "State" } th { "Outcome" }
                        th.num { "HTTP" } th.num { "Took" } th { "Next / why" }
                    } }
                    tbody { @for step in &page.steps { (step_row(step)) } }
                }
            }
        } }
    };
    document(
        &format!("event {}: eg status", page.event_id),
        Referrer::SameOrigin,
        body,
    )
}

fn step_row(step: &Value) -> Markup {
    let took = step["durationMs"]
        .as_u64()
        .map_or_else(|| "–".to_owned(), |ms| format!("{ms} ms"));
    html! {
        tr data-step=(plain(&step["state"])) {
            td { (plain(&step["time"])) }
            td { (plain(&step["subscription"])) }
            td.num { (plain(&step["attempt"])) }
            td { (plain(&step["state"])) }
            td { (plain(&step["outcome"])) }
            td.num { (plain(&step["httpStatus"])) }
            td.num { (took) }
            td.muted { (next_or_why(step)) }
        }
    }
}

/// The confirmation step before a redrive.
pub fn confirm_redrive(topic: &str, page: &SubscriptionPage, form_token: &str, chunk: u64) -> String {
    let sub = &page.status;
    let path = subscription_path(topic, &sub.name);
    let n = sub.dead_letters_not_redriven;
    let body = html! {
        (top_bar(trail(topic, Some(&sub.name)), false))
        main { section.card.narrow #confirm {
            h1 { "Redrive dead letters of " (topic) " / " (sub.name) "?" }
            p {
                strong data-field="not-redriven" { (count(n)) } " " (noun(n, "dead letter is", "dead letters are"))
                " waiting (not redriven). Redriving sends " (noun(n, "it", "them")) " back into delivery with fresh \
                attempts, keeping " (noun(n, "its", "their")) " event " (noun(n, "id", "ids"))
                "; each record is redriven at most once."
                @if n > chunk { " This sends " (count(chunk)) " of them now; repeat for the rest." }
            }
            div.actions {
                (action_form(&format!("{path}/redrive"), form_token, &format!("Redrive {}", count(n.min(chunk))), "primary"))
                a.button href=(path) #cancel { "Cancel" }
            }
        } }
    };
    document(
        &format!("redrive {} / {}: eg status", topic, sub.name),
        Referrer::SameOrigin,
        body,
    )
}

/// Why a page cannot be shown or an action was refused, with a way back.
pub fn problem(title: &str, message: &str, back: Option<&str>) -> String {
    let body = html! {
        (top_bar(html! {}, false))
        main { section.card.narrow #problem {
            h1 { (title) }
            p.error { (message) }
            p { a href=(back.unwrap_or("/status")) { "Back" } }
        } }
    };
    document(&format!("{title}: eg status"), Referrer::SameOrigin, body)
}

#[cfg(test)]
mod tests {
    use super::super::model::{QueueFigures, SubscriptionStatus};
    use super::*;
    use eg_core::UnixMillis;
    use serde_json::json;

    #[test]
    fn a_failed_step_says_what_the_destination_answered() {
        let step = json!({"state": "DeadLettered", "reason": "MaxDeliveryAttemptsExceeded",
            "error": "no JetStream stream captures subject \"late.orders\""});
        assert_eq!(
            next_or_why(&step),
            "MaxDeliveryAttemptsExceeded · no JetStream stream captures subject \"late.orders\""
        );
    }

    fn page(paused: bool, provisioning: &str, waiting: u64) -> SubscriptionPage {
        SubscriptionPage {
            generated_at_ms: UnixMillis(0),
            topic: "orders".into(),
            properties: json!({
                "eventDeliverySchema": "EventGridSchema",
                "filter": {"subjectBeginsWith": "<img>"},
                "destination": {"properties": {"maxEventsPerBatch": 1}},
            }),
            status: SubscriptionStatus {
                name: "audit".into(),
                delivery_mode: "Push",
                queue: None,
                endpoint_base_url: "https://example.test/hook".into(),
                destination_type: "WebHook",
                paused,
                provisioning_state: provisioning.into(),
                provisioning_message: (provisioning != "Succeeded").then(|| "it answered <nothing>".into()),
                delivery_rate: 0.0,
                failure_rate: 0.0,
                dead_letter_rate: 0.0,
                probation: None,
                dead_letters: 5,
                dead_letters_not_redriven: waiting,
                dead_letter_destination: None,
                dead_letter_failure: None,
                missed_last_hour: 0,
                limits: None,
                waiting_in_lines: None,
            },
            last_minute: Activity::default(),
            last_hour: Activity::default(),
            recent: Vec::new(),
            archived: false,
            replays: Vec::new(),
            problems: Vec::new(),
        }
    }

    #[test]
    fn the_actions_offered_follow_the_state_and_carry_the_form_token() {
        let active = subscription(&page(false, "Succeeded", 0), "tok3n", None);
        assert!(active.contains("action=\"/status/topics/orders/subscriptions/audit/pause\""));
        assert!(active.contains("<input type=\"hidden\" name=\"form_token\" value=\"tok3n\">"));
        assert!(!active.contains("/resume\""), "{active}");
        assert!(!active.contains("/validate\""), "{active}");
        assert!(!active.contains("/redrive\""), "nothing to redrive: {active}");
        assert!(active.contains("&lt;img&gt;"), "the filter is escaped: {active}");

        let waiting = subscription(
            &page(true, "AwaitingManualAction", 2),
            "tok3n",
            Some(&Flash::ok("Paused <x>")),
        );
        assert!(waiting.contains("/resume\""));
        assert!(waiting.contains("/validate\""));
        assert!(waiting.contains("href=\"/status/topics/orders/subscriptions/audit/redrive\""));
        assert!(waiting.contains("it answered &lt;nothing&gt;"));
        assert!(
            waiting.contains("<div class=\"flash ok\" id=\"flash\" role=\"status\">Paused &lt;x&gt;</div>"),
            "{waiting}"
        );
    }

    #[test]
    fn the_note_under_the_actions_says_what_pausing_does_or_what_paused_means() {
        let active = subscription(&page(false, "Succeeded", 0), "tok3n", None);
        let note = |html: &str| {
            let at = html.find("data-field=\"pause-note\">").unwrap();
            html[at..].split("</p>").next().unwrap().to_owned()
        };
        assert!(note(&active).contains(">Pausing holds back its deliveries"), "{active}");
        assert!(
            !note(&active).contains("Paused"),
            "an active subscription reads as paused: {active}"
        );
        let paused = subscription(&page(true, "Succeeded", 0), "tok3n", None);
        assert!(note(&paused).contains(">While it is paused"), "{paused}");
    }

    #[test]
    fn the_delivery_controls_show_by_name_and_none_when_unused() {
        let mut p = page(false, "Succeeded", 0);
        let html = subscription(&p, "tok3n", None);
        for field in ["rate-limit", "ordering", "token", "client-certificate"] {
            assert!(
                html.contains(&format!("<tr data-setting=\"{field}\">")),
                "{field}: {html}"
            );
        }
        assert!(html.contains("events may arrive in any order"), "{html}");
        p.properties["deliveryLimits"] = json!({"requestsPerSecond": 5.0, "burst": 2});
        p.properties["orderedDelivery"] = json!({"key": "partitionKey"});
        p.properties["destination"]["properties"]["clientCertificate"] = json!("partner");
        p.properties["destination"]["properties"]["azureActiveDirectoryTenantId"] = json!("contoso");
        let html = subscription(&p, "tok3n", None);
        assert!(html.contains("requestsPerSecond</span> <code>5.0</code>"), "{html}");
        assert!(html.contains("key</span> <code>partitionKey</code>"), "{html}");
        assert!(
            html.contains("azureActiveDirectoryTenantId</span> <code>contoso</code>"),
            "{html}"
        );
        assert!(
            html.contains("<th>Client certificate</th><td><code>partner</code>"),
            "{html}"
        );
    }

    #[test]
    fn a_subscription_without_a_filter_shows_none() {
        let mut p = page(false, "Succeeded", 0);
        p.properties["filter"] = json!({"isSubjectCaseSensitive": false});
        let html = subscription(&p, "tok3n", None);
        assert!(
            html.contains("<tr data-setting=\"filter\"><th>Filter</th><td><span class=\"muted\">every event</span>"),
            "{html}"
        );
        assert!(!html.contains("isSubjectCaseSensitive"), "{html}");

        // A flag shows next to what it qualifies.
        p.properties["filter"] = json!({"subjectEndsWith": ".jpg", "isSubjectCaseSensitive": false,
            "enableAdvancedFilteringOnArrays": true});
        let html = subscription(&p, "tok3n", None);
        assert!(html.contains("subjectEndsWith</span> <code>.jpg</code>"), "{html}");
        assert!(
            html.contains("isSubjectCaseSensitive</span> <code>false</code>"),
            "{html}"
        );
        assert!(!html.contains("enableAdvancedFilteringOnArrays"), "{html}");
    }

    fn queue_page(paused: bool) -> SubscriptionPage {
        let mut p = page(paused, "Succeeded", 0);
        p.properties = json!({
            "eventDeliverySchema": "CloudEventSchemaV1_0",
            "deliveryConfiguration": {"deliveryMode": "Queue", "queue": {
                "receiveLockDurationInSeconds": 90, "maxDeliveryCount": 4, "eventTimeToLive": "PT2H",
            }},
            "filtersConfiguration": {"includedEventTypes": ["orders.created"], "filters": []},
        });
        p.status.delivery_mode = "Queue";
        p.status.endpoint_base_url = String::new();
        p.status.queue = Some(QueueFigures {
            available: 7,
            locked: 2,
            delayed: 1,
            oldest_unacknowledged_seconds: Some(42),
        });
        p
    }

    #[test]
    fn a_queue_subscription_shows_its_queue_settings_and_figures_and_cannot_be_paused() {
        let html = subscription(&queue_page(false), "tok3n", None);
        for needle in [
            "<tr data-setting=\"mode\"><th>Delivery mode</th><td>Queue:",
            "<tr data-setting=\"receive-lock\"><th>Receive lock</th><td>90 s</td></tr>",
            "<tr data-setting=\"max-delivery-count\"><th>Max delivery count</th><td>4</td></tr>",
            "<tr data-setting=\"ttl\"><th>Event time-to-live</th><td>PT2H</td></tr>",
            "<code>[&quot;orders.created&quot;]</code>",
            "data-field=\"available\">7</span>",
            "data-field=\"locked\">2</span>",
            "data-field=\"delayed\">1</span>",
            "data-field=\"oldest\">42 s</span>",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
        assert!(!html.contains("filters"), "an empty filter list is not shown: {html}");
        assert!(!html.contains("/pause\""), "{html}");
        assert!(!html.contains("/validate\""), "{html}");
        assert!(!html.contains("data-setting=\"endpoint\""), "{html}");
        assert!(!html.contains("data-field=\"probation\""), "{html}");
        // One paused before it could not be (a PUT with paused) can still be resumed.
        assert!(subscription(&queue_page(true), "tok3n", None).contains("/resume\""));
    }

    #[test]
    fn a_failing_dead_letter_destination_gets_a_warning_above_everything_else() {
        let quiet = subscription(&page(false, "Succeeded", 0), "tok3n", None);
        assert!(!quiet.contains("dead-letter-failure"), "{quiet}");
        assert!(
            quiet.contains("none: dead letters are kept in the archive only"),
            "{quiet}"
        );

        let mut p = page(false, "Succeeded", 2);
        p.generated_at_ms = UnixMillis(3_600_000);
        p.status.dead_letter_destination = Some(super::super::dead_letter::DeadLetterTarget {
            store: "azure:deadletters1".into(),
            container: "dead".into(),
            key_prefix: String::new(),
        });
        p.status.dead_letter_failure = Some(DeadLetterFailure {
            store: "azure:deadletters1".into(),
            container: "dead".into(),
            kind: "ContainerNotFound".into(),
            message: "The specified container <dead> does not exist.".into(),
            failing_since: String::new(),
            last_failure_time: String::new(),
            since_ms: UnixMillis(1_800_000),
        });
        let html = subscription(&p, "tok3n", None);
        for needle in [
            "<section class=\"card alarm\" id=\"dead-letter-failure\">",
            "<code data-field=\"destination\">azure:deadletters1 / dead</code>",
            ">ContainerNotFound</span>",
            "<strong data-field=\"since\">00:30:00 (30 m 0 s ago)</strong>",
            "The specified container &lt;dead&gt; does not exist.",
            "create it, or point the subscription at one that does",
            "<code data-field=\"store\">azure:deadletters1</code> container <code data-field=\"container\">dead</code>",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
        let warning = html.find("id=\"dead-letter-failure\"").unwrap();
        assert!(warning < html.find("id=\"state\"").unwrap(), "above the state card");
    }

    #[test]
    fn the_redrive_confirmation_says_how_many_and_posts_with_the_token() {
        let html = confirm_redrive("orders", &page(true, "Succeeded", 2_500), "tok3n", 1_000);
        assert!(html.contains("<strong data-field=\"not-redriven\">2,500</strong>"));
        assert!(html.contains("sends 1,000 of them now"));
        assert!(html.contains("data-action=\"Redrive 1,000\""));
        assert!(html.contains("name=\"form_token\" value=\"tok3n\""));
        assert!(html.contains("method=\"post\" action=\"/status/topics/orders/subscriptions/audit/redrive\""));
        assert!(html.contains("2,500</strong> dead letters are waiting"), "{html}");

        let one = confirm_redrive("orders", &page(true, "Succeeded", 1), "tok3n", 1_000);
        assert!(
            one.contains(
                "<strong data-field=\"not-redriven\">1</strong> dead letter is waiting (not redriven). \
             Redriving sends it back into delivery with fresh attempts, keeping its event id;"
            ),
            "{one}"
        );
    }

    /// A name that would break out of text or an attribute if spliced in raw.
    const HOSTILE: &str = "<script>alert('x')</script>\" onclick=\"y\" & z";

    fn assert_escaped(html: &str) {
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(!html.contains("\" onclick=\""), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert('x')&lt;/script&gt;&quot; onclick=&quot;y&quot; &amp; z"),
            "{html}"
        );
    }

    #[test]
    fn a_hostile_name_comes_out_escaped_on_every_page() {
        let mut p = page(true, "AwaitingManualAction", 3);
        p.topic = HOSTILE.into();
        p.status.name = HOSTILE.into();
        p.status.provisioning_message = Some(HOSTILE.into());
        assert_escaped(&subscription(&p, HOSTILE, Some(&Flash::failed(HOSTILE))));
        assert_escaped(&confirm_redrive(HOSTILE, &p, HOSTILE, 1_000));
        assert_escaped(&problem(HOSTILE, HOSTILE, Some(HOSTILE)));
        let history = EventPage {
            generated_at_ms: UnixMillis(0),
            topic: HOSTILE.into(),
            event_id: HOSTILE.into(),
            subscription: Some(HOSTILE.into()),
            steps: vec![json!({"state": HOSTILE, "subscription": HOSTILE, "error": HOSTILE})],
        };
        assert_escaped(&event(&history));
    }

    #[test]
    fn a_running_replay_has_a_cancel_button_and_its_problem_is_escaped() {
        use eg_core::replay::{ReplaySpec, ReplayState, ReplayView};
        let mut page = page(false, "Succeeded", 0);
        page.archived = true;
        let spec = ReplaySpec::from_request(
            &json!({"from": "1970-01-01T00:00:00Z"}),
            "orders",
            "audit",
            UnixMillis(60_000),
        )
        .unwrap();
        page.replays = vec![ReplayView {
            id: "0123456789abcdef".into(),
            spec,
            state: ReplayState::Running,
            read: 10,
            replayed: 7,
            filtered: 3,
            problem: Some("waiting for <the store>".into()),
            updated_at: None,
            finished_at: None,
        }];
        let html = subscription(&page, "form-token", None);
        assert!(html.contains("id=\"replay-form\""), "{html}");
        assert!(
            html.contains("/status/topics/orders/subscriptions/audit/replays/0123456789abcdef/cancel"),
            "{html}"
        );
        assert!(html.contains("waiting for &lt;the store&gt;"), "{html}");
        assert!(!html.contains("<the store>"), "{html}");
        page.archived = false;
        page.replays.clear();
        let html = subscription(&page, "form-token", None);
        assert!(!html.contains("replay-form") && html.contains("not archived"), "{html}");
    }
}
