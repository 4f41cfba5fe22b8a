//! The HTML of a subscription's page, an event's history, the redrive confirmation and
//! the pages that say why something could not be shown or done. Static pages (no live
//! refresh): an action reloads them, and so does the browser's reload.

use super::dead_letter::DeadLetterFailure;
use super::html::{
    Referrer, clock_time, count, counted, dead_letter_cell, dead_letter_target, esc, failing_since, failure_badge,
    flash, head, health_badge, noun, num_class, provisioning_badge, queue_figures, rate, segment, state_badge,
    subscription_path, top_bar,
};
use super::session::{FORM_TOKEN_FIELD, Flash};
use super::subscription::{Activity, EventPage, SubscriptionPage};
use eg_core::UnixMillis;
use serde_json::Value;
use std::fmt::Write;

fn trail(topic: &str, subscription: Option<&str>) -> String {
    let mut out = format!("<span class=\"crumb\">{}</span>", esc(topic));
    if let Some(name) = subscription {
        let _ = write!(
            out,
            "<span class=\"crumb\"><a href=\"{}\">{}</a></span>",
            esc(&subscription_path(topic, name)),
            esc(name)
        );
    }
    out
}

fn end(out: &mut String) {
    out.push_str("</main>\n</body>\n</html>\n");
}

/// A form that posts one action with the form token; `confirm_text` is its button.
fn action_form(out: &mut String, action: &str, form_token: &str, button: &str, class: &str, hidden: &[(&str, &str)]) {
    let _ = write!(
        out,
        "<form method=\"post\" action=\"{}\" class=\"action\"><input type=\"hidden\" name=\"{FORM_TOKEN_FIELD}\" value=\"{}\">",
        esc(action),
        esc(form_token)
    );
    for (name, value) in hidden {
        let _ = write!(
            out,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            esc(name),
            esc(value)
        );
    }
    let _ = write!(
        out,
        "<button type=\"submit\" class=\"{class}\" data-action=\"{}\">{}</button></form>",
        esc(button),
        esc(button)
    );
}

/// A JSON value as a short text: strings bare, the rest as JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "–".into(),
        other => other.to_string(),
    }
}

fn setting(out: &mut String, field: &str, label: &str, value_html: &str) {
    let _ = write!(
        out,
        "<tr data-setting=\"{field}\"><th>{label}</th><td>{value_html}</td></tr>"
    );
}

/// `key: value` lines of a JSON object (filter, retry policy), or `none_text`.
fn object_lines(value: &Value, none_text: &str) -> String {
    match value.as_object() {
        Some(map) if !map.is_empty() => map
            .iter()
            .map(|(k, v)| {
                format!(
                    "<div><span class=\"muted\">{}</span> <code>{}</code></div>",
                    esc(k),
                    esc(&plain(v))
                )
            })
            .collect(),
        _ => format!("<span class=\"muted\">{}</span>", esc(none_text)),
    }
}

pub fn subscription(page: &SubscriptionPage, form_token: &str, shown: Option<&Flash>) -> String {
    let sub = &page.status;
    let queue = (sub.delivery_mode == "Queue").then(|| sub.queue.unwrap_or_default());
    let path = subscription_path(&page.topic, &sub.name);
    let mut out = String::with_capacity(16 * 1024);
    head(
        &mut out,
        &format!("{} / {}: eg status", page.topic, sub.name),
        Referrer::SameOrigin,
    );
    top_bar(&mut out, &trail(&page.topic, Some(&sub.name)), false);
    let _ = write!(
        out,
        "<main data-topic=\"{}\" data-subscription=\"{}\">",
        esc(&page.topic),
        esc(&sub.name)
    );
    flash(&mut out, shown);
    let _ = writeln!(
        out,
        "<p class=\"updated\">read <time id=\"updated\">{}</time> UTC · reload for fresh numbers</p>",
        clock_time(page.generated_at_ms)
    );
    for problem in &page.problems {
        let _ = write!(out, "<div class=\"problems\"><p>{}</p></div>", esc(problem));
    }
    if let Some(failure) = &sub.dead_letter_failure {
        dead_letter_failure(&mut out, failure, page.generated_at_ms);
    }

    // State and what can be done about it.
    let _ = write!(
        out,
        "<section class=\"card\" id=\"state\"><h1>{} <span class=\"muted\">/</span> {}</h1>\
         <div class=\"facts\"><div><div class=\"label\">State</div><div data-field=\"state\">{}</div></div>\
         <div><div class=\"label\">Provisioning</div><div data-field=\"provisioning\">{}</div></div>\
         {third}\
         <div><div class=\"label\">Dead letters</div><div class=\"num-left\" data-field=\"dead-letters\">{}</div></div></div>",
        esc(&page.topic),
        esc(&sub.name),
        state_badge(sub.paused),
        provisioning_badge(sub),
        dead_letter_cell(sub),
        third = match &queue {
            Some(q) => format!(
                "<div><div class=\"label\">Queue</div><div class=\"queue\" data-field=\"queue\">{}</div></div>",
                queue_figures(q)
            ),
            None => format!(
                "<div><div class=\"label\">Endpoint health</div><div data-field=\"probation\">{}</div></div>",
                health_badge(sub)
            ),
        },
    );
    if let Some(message) = &sub.provisioning_message {
        let _ = write!(
            out,
            "<p class=\"why\" data-field=\"provisioning-message\">{}</p>",
            esc(message)
        );
    }
    out.push_str("<div class=\"actions\" id=\"actions\">");
    if sub.paused {
        action_form(
            &mut out,
            &format!("{path}/resume"),
            form_token,
            "Resume",
            "primary",
            &[],
        );
    } else if queue.is_none() {
        // A queue subscription cannot be paused (the management API refuses it).
        action_form(&mut out, &format!("{path}/pause"), form_token, "Pause", "", &[]);
    }
    if queue.is_none() && sub.provisioning_state != "Succeeded" {
        action_form(
            &mut out,
            &format!("{path}/validate"),
            form_token,
            "Validate again",
            "primary",
            &[],
        );
    }
    if sub.dead_letters_not_redriven > 0 {
        let _ = write!(
            out,
            "<a class=\"button\" href=\"{}/redrive\" data-action=\"Redrive dead letters\">Redrive dead letters…</a>",
            esc(&path)
        );
    }
    out.push_str(if queue.is_some() {
        "</div><p class=\"note\">Consumers receive this subscription's events when they ask, so it cannot be paused: \
         stop its consumers to hold events back (their time-to-live still counts). Available: receivable now; locked: \
         received and not yet acknowledged, released or rejected, the lock not expired; delayed: released with a delay.</p></section>\n"
    } else if sub.paused {
        "</div><p class=\"note\" data-field=\"pause-note\">While it is paused its events still match and wait here \
         (their time-to-live still counts); resuming hands them to the senders at once.</p></section>\n"
    } else {
        "</div><p class=\"note\" data-field=\"pause-note\">Pausing holds back its deliveries: events still match and \
         wait (their time-to-live still counts) until you resume it, which hands them to the senders at once.</p></section>\n"
    });

    // Settings, as the management API writes them.
    if queue.is_some() {
        queue_settings(&mut out, page);
    } else {
        push_settings(&mut out, page);
    }

    // What it did.
    out.push_str(
        "<section class=\"card\" id=\"activity\"><h2>Deliveries</h2><p class=\"note\">Counted by every eg process; \
         failed attempts include those retried later.</p><table><thead><tr><th></th><th class=\"num\">Last minute</th>\
         <th class=\"num\">Last hour</th></tr></thead><tbody>",
    );
    type Row = (&'static str, &'static str, fn(&Activity) -> u64, bool);
    let rows: [Row; 4] = [
        ("delivered", "Delivered", |a| a.delivered, false),
        ("failed", "Failed attempts", |a| a.failed, true),
        ("dead-lettered", "Dead-lettered", |a| a.dead_lettered, true),
        ("dropped", "Dropped", |a| a.dropped, true),
    ];
    for (field, label, of, is_problem) in rows {
        let (minute, hour) = (of(&page.last_minute), of(&page.last_hour));
        let _ = write!(
            out,
            "<tr data-activity=\"{field}\"><td>{label}</td><td class=\"{}\">{}</td><td class=\"{}\">{}</td></tr>",
            num_class(minute > 0, is_problem),
            count(minute),
            num_class(hour > 0, is_problem),
            count(hour)
        );
    }
    let _ = write!(
        out,
        "</tbody></table><p class=\"note\">Now: {}/s delivered, {}/s failed attempts.</p></section></div>",
        rate(sub.delivery_rate),
        rate(sub.failure_rate)
    );

    // Recent deliveries, and any event's history.
    let _ = write!(
        out,
        "<section class=\"card\" id=\"recent\"><h2>Recent deliveries</h2><p class=\"note\">The newest events of this \
         subscription with a kept history (each with its latest step); open one for every step. Histories are kept \
         for <code>EG__HISTORY__RETENTION</code>.</p>\
         <form method=\"get\" action=\"/status/topics/{}/events\" class=\"lookup\"><input type=\"hidden\" name=\"subscription\" value=\"{}\">\
         <input type=\"text\" name=\"id\" placeholder=\"event id\" aria-label=\"event id\" required>\
         <button type=\"submit\">Show history</button></form>",
        segment(&page.topic),
        esc(&sub.name)
    );
    if page.recent.is_empty() {
        out.push_str("<p class=\"empty\">No delivery history yet.</p>");
    } else {
        out.push_str(
            "<table><thead><tr><th>Event</th><th>State</th><th class=\"num\">Attempt</th><th>Outcome</th>\
             <th class=\"num\">HTTP</th><th>At (UTC)</th><th>Next / why</th></tr></thead><tbody>\n",
        );
        for d in &page.recent {
            let e = d.latest.to_resource();
            let state = plain(&e["state"]);
            let class = match state.as_str() {
                "Delivered" => "ok",
                "DeadLettered" | "Dropped" => "bad",
                _ => "warn",
            };
            let _ = writeln!(
                out,
                "<tr data-event=\"{id}\"><td><a class=\"event\" href=\"{href}\"><code>{id}</code></a></td>\
                 <td><span class=\"badge {class}\">{state}</span></td><td class=\"num\">{}</td><td>{}</td>\
                 <td class=\"num\">{}</td><td>{}</td><td class=\"muted\">{}</td></tr>",
                d.latest.attempt,
                esc(&plain(&e["outcome"])),
                esc(&plain(&e["httpStatus"])),
                clock_time(d.latest.at),
                esc(&next_or_why(&e)),
                id = esc(&d.event_id),
                href = esc(&event_path(&page.topic, &d.event_id, Some(&sub.name))),
                state = esc(&state),
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>\n");
    end(&mut out);
    out
}

/// The warning that this subscription's dead letters cannot be written: what the store
/// said, since when, what happens to the records meanwhile, and what to check.
fn dead_letter_failure(out: &mut String, failure: &DeadLetterFailure, now: UnixMillis) {
    let _ = writeln!(
        out,
        "<section class=\"card alarm\" id=\"dead-letter-failure\"><h2>Dead letters are not being written</h2>\
         <p>Writing to <code data-field=\"destination\">{destination}</code> fails {kind} since \
         <strong data-field=\"since\">{since}</strong> UTC.</p>\
         <p class=\"error\" data-field=\"message\">{message}</p>\
         <p data-field=\"remedy\">{remedy}</p>\
         <p class=\"note\">Meanwhile the records wait in Redis and are tried again with backoff; a record still \
         unwritten after <code>EG__DEADLETTER__GIVE_UP_AFTER</code> (4 h by default) is dropped and counted \
         (<code>DroppedEventCount</code>, reason <code>DeadLetterDestinationUnavailable</code>). This subscription's \
         dead letters can still be listed and redriven: eg keeps them in Redis whatever the destination.</p></section>",
        destination = esc(&format!("{} / {}", failure.store, failure.container)),
        kind = failure_badge(failure),
        since = failing_since(failure, now),
        message = esc(&failure.message),
        remedy = esc(remedy(&failure.kind)),
    );
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
fn dead_letter_setting(out: &mut String, page: &SubscriptionPage, without: &str) {
    let shown = match &page.status.dead_letter_destination {
        Some(target) => dead_letter_target(target),
        None => format!("<span class=\"muted\">{}</span>", esc(without)),
    };
    setting(out, "dead-letter-destination", "Dead-letter destination", &shown);
}

/// A push subscription's settings: where it delivers and how.
fn push_settings(out: &mut String, page: &SubscriptionPage) {
    let sub = &page.status;
    let p = &page.properties;
    out.push_str("<div class=\"cols\"><section class=\"card\" id=\"settings\"><h2>Settings</h2><table class=\"settings\"><tbody>");
    let destination = &p["destination"]["properties"];
    setting(
        out,
        "endpoint",
        "Endpoint",
        &format!("<code>{}</code>", esc(&sub.destination_label())),
    );
    setting(
        out,
        "schema",
        "Delivery schema",
        &esc(&plain(&p["eventDeliverySchema"])),
    );
    setting(
        out,
        "filter",
        "Filter",
        &object_lines(&filter_shown(&p["filter"]), "every event"),
    );
    setting(
        out,
        "retry-policy",
        "Retry policy",
        &object_lines(&p["retryPolicy"], "default"),
    );
    let batching = match destination["maxEventsPerBatch"].as_u64() {
        Some(1) | None => "one event per request".to_owned(),
        Some(n) => format!(
            "up to {} per request, {} KB preferred",
            counted(n, "event", "events"),
            esc(&plain(&destination["preferredBatchSizeInKilobytes"]))
        ),
    };
    setting(out, "batching", "Batching", &batching);
    dead_letter_setting(out, page, "none: dead letters are kept in the archive only");
    setting(out, "paused", "Paused", if sub.paused { "yes" } else { "no" });
    setting(out, "provisioning", "Provisioning", &esc(&sub.provisioning_state));
    if let Some(at) = p["expirationTimeUtc"].as_str() {
        setting(out, "expiration", "Expires", &esc(at));
    }
    out.push_str("</tbody></table></section>\n");
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
fn queue_settings(out: &mut String, page: &SubscriptionPage) {
    let sub = &page.status;
    let p = &page.properties;
    let q = &p["deliveryConfiguration"]["queue"];
    out.push_str("<div class=\"cols\"><section class=\"card\" id=\"settings\"><h2>Settings</h2><table class=\"settings\"><tbody>");
    setting(
        out,
        "mode",
        "Delivery mode",
        "Queue: consumers receive, acknowledge, release or reject",
    );
    setting(
        out,
        "receive-lock",
        "Receive lock",
        &format!("{} s", esc(&plain(&q["receiveLockDurationInSeconds"]))),
    );
    setting(
        out,
        "max-delivery-count",
        "Max delivery count",
        &esc(&plain(&q["maxDeliveryCount"])),
    );
    setting(out, "ttl", "Event time-to-live", &esc(&plain(&q["eventTimeToLive"])));
    setting(
        out,
        "schema",
        "Delivery schema",
        &esc(&plain(&p["eventDeliverySchema"])),
    );
    setting(
        out,
        "filter",
        "Filter",
        &object_lines(&given(&p["filtersConfiguration"]), "every event"),
    );
    dead_letter_setting(out, page, "none: events that end are dropped");
    setting(out, "provisioning", "Provisioning", &esc(&sub.provisioning_state));
    if let Some(at) = p["expirationTimeUtc"].as_str() {
        setting(out, "expiration", "Expires", &esc(at));
    }
    out.push_str("</tbody></table></section>\n");
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
    let mut out = String::with_capacity(8 * 1024);
    head(
        &mut out,
        &format!("event {}: eg status", page.event_id),
        Referrer::SameOrigin,
    );
    top_bar(&mut out, &trail(&page.topic, page.subscription.as_deref()), false);
    let _ = write!(
        out,
        "<main><section class=\"card\" id=\"history\"><h1>Event <code>{}</code></h1><p class=\"note\">Every kept step of \
         its deliveries{}, oldest first, read <time id=\"updated\">{}</time> UTC.</p>",
        esc(&page.event_id),
        page.subscription
            .as_deref()
            .map(|s| format!(" to {}", esc(s)))
            .unwrap_or_else(|| " to every subscription of the topic".into()),
        clock_time(page.generated_at_ms)
    );
    if page.subscription.is_some() {
        let _ = write!(
            out,
            "<p><a href=\"{}\">every subscription's steps</a></p>",
            esc(&event_path(&page.topic, &page.event_id, None))
        );
    }
    if page.steps.is_empty() {
        out.push_str(
            "<p class=\"empty\" id=\"no-history\">No delivery history for this event: none yet, not an event of this \
             topic, or older than the retention (<code>EG__HISTORY__RETENTION</code>).</p>",
        );
    } else {
        out.push_str(
            "<table><thead><tr><th>At (UTC)</th><th>Subscription</th><th class=\"num\">Attempt</th><th>State</th>\
             <th>Outcome</th><th class=\"num\">HTTP</th><th class=\"num\">Took</th><th>Next / why</th></tr></thead><tbody>\n",
        );
        for step in &page.steps {
            let took = step["durationMs"]
                .as_u64()
                .map(|ms| format!("{ms} ms"))
                .unwrap_or_else(|| "–".into());
            let _ = writeln!(
                out,
                "<tr data-step=\"{}\"><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"muted\">{}</td></tr>",
                esc(&plain(&step["state"])),
                esc(&plain(&step["time"])),
                esc(&plain(&step["subscription"])),
                esc(&plain(&step["attempt"])),
                esc(&plain(&step["state"])),
                esc(&plain(&step["outcome"])),
                esc(&plain(&step["httpStatus"])),
                esc(&took),
                esc(&next_or_why(step)),
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>\n");
    end(&mut out);
    out
}

/// The confirmation step before a redrive.
pub fn confirm_redrive(topic: &str, page: &SubscriptionPage, form_token: &str, chunk: u64) -> String {
    let sub = &page.status;
    let path = subscription_path(topic, &sub.name);
    let mut out = String::with_capacity(4 * 1024);
    head(
        &mut out,
        &format!("redrive {} / {}: eg status", topic, sub.name),
        Referrer::SameOrigin,
    );
    top_bar(&mut out, &trail(topic, Some(&sub.name)), false);
    let n = sub.dead_letters_not_redriven;
    let _ = write!(
        out,
        "<main><section class=\"card narrow\" id=\"confirm\"><h1>Redrive dead letters of {} / {}?</h1>\
         <p><strong data-field=\"not-redriven\">{}</strong> {} waiting (not redriven). Redriving sends {} \
         back into delivery with fresh attempts, keeping {} event {}; each record is redriven at most once.{}</p>\
         <div class=\"actions\">",
        esc(topic),
        esc(&sub.name),
        count(n),
        noun(n, "dead letter is", "dead letters are"),
        noun(n, "it", "them"),
        noun(n, "its", "their"),
        noun(n, "id", "ids"),
        if n > chunk {
            format!(" This sends {} of them now; repeat for the rest.", count(chunk))
        } else {
            String::new()
        }
    );
    action_form(
        &mut out,
        &format!("{path}/redrive"),
        form_token,
        &format!("Redrive {}", count(n.min(chunk))),
        "primary",
        &[],
    );
    let _ = write!(
        out,
        "<a class=\"button\" href=\"{}\" id=\"cancel\">Cancel</a></div></section>",
        esc(&path)
    );
    end(&mut out);
    out
}

/// Why a page cannot be shown or an action was refused, with a way back.
pub fn problem(title: &str, message: &str, back: Option<&str>) -> String {
    let mut out = String::with_capacity(2 * 1024);
    head(&mut out, &format!("{title}: eg status"), Referrer::SameOrigin);
    top_bar(&mut out, "", false);
    let _ = write!(
        out,
        "<main><section class=\"card narrow\" id=\"problem\"><h1>{}</h1><p class=\"error\">{}</p>",
        esc(title),
        esc(message)
    );
    let back = back.unwrap_or("/status");
    let _ = write!(out, "<p><a href=\"{}\">Back</a></p></section>", esc(back));
    end(&mut out);
    out
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
            },
            last_minute: Activity::default(),
            last_hour: Activity::default(),
            recent: Vec::new(),
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
        assert!(waiting.contains("<div class=\"flash ok\" id=\"flash\" role=\"status\">Paused &lt;x&gt;</div>"));
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
}
