//! `egctl subscriptions …`: event subscriptions, pausing them, validating their
//! endpoint, and its delivery health. A command that leaves a subscription not
//! `Succeeded` (its endpoint has not consented, so it gets no events) fails with the
//! server's reason after printing its usual output. `show` also says where the dead
//! letters go and, above everything, when writing them fails.

use super::topics::items;
use super::{Ctx, read_resource};
use crate::cli::{SubscriptionCommand, SubscriptionCreate};
use crate::destinations::{self, BlobTarget, S3Target};
use crate::failure::Failure;
use crate::output::{cell, fields, table};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

pub async fn run(command: SubscriptionCommand, ctx: &Ctx) -> Result<String, Failure> {
    match command {
        SubscriptionCommand::Create(args) => create(args, ctx).await,
        SubscriptionCommand::List { topic } => {
            let list = ctx.api.get(&["topics", &topic, "eventSubscriptions"]).await?;
            Ok(ctx.show(&list, subscriptions_table))
        }
        SubscriptionCommand::Show { topic, name } => {
            let sub = ctx.api.get(&["topics", &topic, "eventSubscriptions", &name]).await?;
            let dead_letters = if ctx.json {
                Ok(None)
            } else {
                dead_letter_destination(ctx, &topic, &name).await
            };
            let mut shown = ctx.show(&sub, |s| shown_with_dead_letters(s, &dead_letters));
            if !ctx.json && self::shown(&sub["properties"]).mode == "Queue" {
                // Its queue now, from the same read `egctl queues` shows.
                let queue = ctx.api.get(&["queues"]).await.map(|q| {
                    q["subscriptionQueues"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|row| same_name(&row["topic"], &topic) && same_name(&row["subscription"], &name))
                        .cloned()
                });
                shown.push_str(&queue_now(
                    queue.as_ref().map(Option::as_ref).map_err(ToString::to_string),
                ));
            }
            if !ctx.json && is_ordered(&sub["properties"]) {
                let waiting = ctx.api.get(&["queues"]).await.map(|q| {
                    q["orderedSubscriptions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|row| same_name(&row["topic"], &topic) && same_name(&row["subscription"], &name))
                        .map(|row| row["waitingInLines"].clone())
                });
                shown.push_str(&waiting_now(waiting.map_err(|e| e.to_string())));
            }
            if !ctx.json && !self::shown(&sub["properties"]).delivery_limits.is_null() {
                shown.push_str(&limits_now(ctx, &topic, &name).await);
            }
            Ok(shown)
        }
        SubscriptionCommand::Delete { topic, name } => {
            let path = ["topics", &topic, "eventSubscriptions", &name];
            let answer = ctx.api.admin(Method::DELETE, &path, &[], None).await?;
            let existed = answer.status != StatusCode::NO_CONTENT;
            Ok(ctx.show(&json!({"deleted": existed}), |_| {
                if existed {
                    format!("subscription {topic}/{name} deleted\n")
                } else {
                    format!("subscription {topic}/{name} did not exist\n")
                }
            }))
        }
        SubscriptionCommand::Pause { topic, name } => switch(ctx, &topic, &name, "pause", "paused").await,
        SubscriptionCommand::Resume { topic, name } => switch(ctx, &topic, &name, "resume", "resumed").await,
        SubscriptionCommand::Validate { topic, name } => {
            let path = ["topics", &topic, "eventSubscriptions", &name, "validate"];
            let sub = ctx.api.post(&path, None).await?;
            // Not active: the failure says it all, on stderr; nothing for stdout.
            let shown = ctx.show(&sub, |s| match inactive_state(s) {
                None => format!("subscription {topic}/{name} is Succeeded\n"),
                Some(_) => String::new(),
            });
            unless_inactive(&sub, &topic, &name, shown)
        }
        SubscriptionCommand::Health { topic, name } => {
            let path = ["topics", &topic, "eventSubscriptions", &name, "deliveryHealth"];
            let health = ctx.api.get(&path).await?;
            Ok(ctx.show(&health, health_fields))
        }
    }
}

async fn create(args: SubscriptionCreate, ctx: &Ctx) -> Result<String, Failure> {
    if args.lock_duration.is_some() && !args.queue {
        return Err(Failure::usage(
            "--lock-duration is the receive lock of a queue subscription: add --queue",
        ));
    }
    let body = match &args.file {
        Some(path) => read_resource(path)?,
        None if args.queue => queue_from_flags(&args),
        None => {
            // Namespace topics name their retry fields differently
            // (behaviour.md#namespace-topics).
            let topic = ctx.api.get(&["topics", &args.topic]).await?;
            let namespace = topic["properties"]["deliveryProfile"] == "NamespaceTopic";
            from_flags(&args, namespace)
        }
    };
    let path = ["topics", &args.topic, "eventSubscriptions", &args.name];
    let answer = ctx.api.admin(Method::PUT, &path, &[], Some(&body)).await?;
    let verb = if answer.status == StatusCode::CREATED {
        "created"
    } else {
        "updated"
    };
    let (topic, name) = (&args.topic, &args.name);
    let shown = ctx.show(&answer.body, |s| {
        let mut pairs = subscription_pairs(s);
        // Not active: the failure gives the reason, on stderr; it is not said twice.
        if inactive_state(s).is_some() {
            pairs.retain(|(field, _)| *field != "provisioningMessage");
        }
        format!("subscription {topic}/{name} {verb}\n{}", fields(pairs))
    });
    unless_inactive(&answer.body, topic, name, shown)
}

/// The state of a subscription `resource` that receives no events (not `Succeeded`).
fn inactive_state(resource: &Value) -> Option<&str> {
    resource["properties"]["provisioningState"]
        .as_str()
        .filter(|state| *state != "Succeeded")
}

/// `shown`, the command's output, when the subscription `resource` receives events;
/// otherwise a failure carrying it, with the state and the server's reason.
fn unless_inactive(resource: &Value, topic: &str, name: &str, shown: String) -> Result<String, Failure> {
    match inactive_state(resource) {
        None => Ok(shown),
        Some(state) => Err(Failure::NotActive {
            message: not_active(
                topic,
                name,
                state,
                resource["properties"]["provisioningMessage"].as_str(),
            ),
            shown,
        }),
    }
}

/// Why a subscription gets no events, for stderr.
fn not_active(topic: &str, name: &str, state: &str, reason: Option<&str>) -> String {
    let reason = reason.unwrap_or("eg-ingress gave no reason; see its log");
    format!("subscription {topic}/{name} is {state}: it receives no events until its endpoint is validated. {reason}")
}

/// The subscription resource the flags describe; only what was given is sent, so the
/// server's defaults apply to the rest.
fn from_flags(args: &SubscriptionCreate, namespace: bool) -> Value {
    let mut props = Map::new();
    let mut destination = crate::endpoints::destination(&args.to, args.endpoint.as_deref(), args.max_events_per_batch);
    args.auth.apply(&mut destination);
    props.insert("destination".into(), destination);
    let mut filter = Map::new();
    if !args.event_types.is_empty() {
        filter.insert("includedEventTypes".into(), json!(args.event_types));
    }
    if let Some(prefix) = &args.subject_begins_with {
        filter.insert("subjectBeginsWith".into(), json!(prefix));
    }
    if let Some(suffix) = &args.subject_ends_with {
        filter.insert("subjectEndsWith".into(), json!(suffix));
    }
    if !filter.is_empty() {
        props.insert("filter".into(), Value::Object(filter));
    }
    let mut retry = Map::new();
    if let Some(n) = args.max_attempts {
        let key = if namespace {
            "maxDeliveryCount"
        } else {
            "maxDeliveryAttempts"
        };
        retry.insert(key.into(), json!(n));
    }
    if let Some(ttl) = &args.ttl {
        retry.insert("eventTimeToLive".into(), json!(ttl));
    }
    if let Some(minutes) = args.ttl_minutes {
        if namespace {
            retry.insert("eventTimeToLive".into(), json!(format!("PT{minutes}M")));
        } else {
            retry.insert("eventTimeToLiveInMinutes".into(), json!(minutes));
        }
    }
    if !retry.is_empty() {
        props.insert("retryPolicy".into(), Value::Object(retry));
    }
    let local = args
        .dead_letter_container
        .as_ref()
        .map(|container| json!({"endpointType": "LocalDirectory", "properties": {"containerName": container}}));
    if let Some(destination) = local.or_else(|| object_store_flag(args)) {
        props.insert("deadLetterDestination".into(), destination);
    }
    if let Some(schema) = &args.delivery_schema {
        props.insert("eventDeliverySchema".into(), json!(schema));
    }
    if args.paused {
        props.insert("paused".into(), json!(true));
    }
    if let Some(limits) = delivery_limits(args) {
        props.insert("deliveryLimits".into(), limits);
    }
    if let Some(order) = &args.order_by {
        props.insert("orderedDelivery".into(), order.clone());
    }
    json!({ "properties": props })
}

/// `deliveryLimits` from `--rate-limit`, `--burst`, `--max-concurrent-requests`, if any
/// was given (the server checks the ranges and names the field).
fn delivery_limits(args: &SubscriptionCreate) -> Option<Value> {
    let mut limits = Map::new();
    if let Some(rate) = args.rate_limit {
        limits.insert("requestsPerSecond".into(), json!(rate));
    }
    if let Some(burst) = args.burst {
        limits.insert("burst".into(), json!(burst));
    }
    if let Some(n) = args.max_concurrent_requests {
        limits.insert("maxConcurrentRequests".into(), json!(n));
    }
    (!limits.is_empty()).then_some(Value::Object(limits))
}

/// The namespace queue subscription the flags describe (`--queue`), in Event Grid's
/// namespace form. The subject flags become `subject` filters, the namespace spelling.
fn queue_from_flags(args: &SubscriptionCreate) -> Value {
    let mut queue = Map::new();
    if let Some(seconds) = args.lock_duration {
        queue.insert("receiveLockDurationInSeconds".into(), json!(seconds));
    }
    if let Some(n) = args.max_attempts {
        queue.insert("maxDeliveryCount".into(), json!(n));
    }
    if let Some(ttl) = &args.ttl {
        queue.insert("eventTimeToLive".into(), json!(ttl));
    } else if let Some(minutes) = args.ttl_minutes {
        queue.insert("eventTimeToLive".into(), json!(format!("PT{minutes}M")));
    }
    // The namespace form names the local directory as a StorageBlob without an account.
    let local = args
        .dead_letter_container
        .as_ref()
        .map(|container| json!({"endpointType": "StorageBlob", "properties": {"blobContainerName": container}}));
    if let Some(destination) = local.or_else(|| object_store_flag(args)) {
        queue.insert(
            "deadLetterDestinationWithResourceIdentity".into(),
            json!({ "deadLetterDestination": destination }),
        );
    }
    let mut props = Map::new();
    props.insert(
        "deliveryConfiguration".into(),
        json!({"deliveryMode": "Queue", "queue": queue}),
    );
    let mut filters = Vec::new();
    if let Some(prefix) = &args.subject_begins_with {
        filters.push(json!({"operatorType": "StringBeginsWith", "key": "subject", "values": [prefix]}));
    }
    if let Some(suffix) = &args.subject_ends_with {
        filters.push(json!({"operatorType": "StringEndsWith", "key": "subject", "values": [suffix]}));
    }
    if !args.event_types.is_empty() || !filters.is_empty() {
        let types = (!args.event_types.is_empty()).then_some(&args.event_types);
        props.insert(
            "filtersConfiguration".into(),
            json!({"includedEventTypes": types, "filters": filters}),
        );
    }
    if let Some(schema) = &args.delivery_schema {
        props.insert("eventDeliverySchema".into(), json!(schema));
    }
    if args.paused {
        props.insert("paused".into(), json!(true));
    }
    json!({ "properties": props })
}

/// The object-store destination `--dead-letter-blob` or `--dead-letter-s3` names (the
/// same JSON in either resource form).
fn object_store_flag(args: &SubscriptionCreate) -> Option<Value> {
    args.dead_letter_blob
        .as_ref()
        .map(BlobTarget::to_json)
        .or_else(|| args.dead_letter_s3.as_ref().map(S3Target::to_json))
}

/// `GET …/deadLetters/destination`: `None` from an eg-ingress older than that call (the
/// resource's fields then say enough), why not when it cannot be read.
async fn dead_letter_destination(ctx: &Ctx, topic: &str, name: &str) -> Result<Option<Value>, String> {
    let path = [
        "topics",
        topic,
        "eventSubscriptions",
        name,
        "deadLetters",
        "destination",
    ];
    match ctx.api.get(&path).await {
        Ok(answer) => Ok(Some(answer)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// A subscription's fields with where its dead letters go (store and container, from
/// `GET …/deadLetters/destination`) in place of the bare container, and, while writing
/// them fails, a warning above it all.
fn shown_with_dead_letters(sub: &Value, destination: &Result<Option<Value>, String>) -> String {
    let mut pairs = subscription_pairs(sub);
    let mut warning = String::new();
    match destination {
        Ok(Some(answer)) => {
            warning = destinations::failure_warning(&answer["problem"]).unwrap_or_default();
            if let Some(place) = destinations::describe(&answer["destination"]) {
                pairs.retain(|(key, _)| *key != "deadLetterContainer");
                pairs.push(("deadLetterDestination", place));
            }
            pairs.push(("deadLetterState", cell(&answer["state"])));
        }
        Ok(None) => {}
        Err(e) => pairs.push(("deadLetterDestination", format!("cannot be read now ({e})"))),
    }
    format!("{warning}{}", fields(pairs))
}

/// The container (or bucket) of a dead-letter destination in the resource's JSON.
fn container_of(destination: &Value) -> Value {
    let p = &destination["properties"];
    ["containerName", "blobContainerName", "bucket"]
        .iter()
        .map(|key| &p[*key])
        .find(|v| !v.is_null())
        .cloned()
        .unwrap_or(Value::Null)
}

/// What egctl shows of a subscription resource, read from either form: the custom-topic
/// JSON (`destination`, `retryPolicy`, `filter`) or Event Grid's namespace form
/// (`deliveryConfiguration`, `filtersConfiguration`).
struct Shown<'a> {
    /// `Push` or `Queue`.
    mode: &'a str,
    /// The webhook destination's properties (null in queue mode).
    destination: &'a Value,
    /// Holds the retry limits under their API names.
    limits: &'a Value,
    filter: &'a Value,
    advanced_filters: &'a Value,
    /// The dead-letter destination (`{endpointType, properties}`), null without one.
    dead_letter: &'a Value,
    /// `deliveryLimits`, null without.
    delivery_limits: &'a Value,
}

fn shown(p: &Value) -> Shown<'_> {
    let config = &p["deliveryConfiguration"];
    if config.is_null() {
        return Shown {
            mode: "Push",
            destination: &p["destination"]["properties"],
            limits: &p["retryPolicy"],
            filter: &p["filter"],
            advanced_filters: &p["filter"]["advancedFilters"],
            dead_letter: &p["deadLetterDestination"],
            delivery_limits: &p["deliveryLimits"],
        };
    }
    let mode = config["deliveryMode"].as_str().unwrap_or("Push");
    let settings = if mode == "Queue" {
        &config["queue"]
    } else {
        &config["push"]
    };
    Shown {
        mode,
        destination: &settings["destination"]["properties"],
        limits: settings,
        filter: &p["filtersConfiguration"],
        advanced_filters: &p["filtersConfiguration"]["filters"],
        dead_letter: &settings["deadLetterDestinationWithResourceIdentity"]["deadLetterDestination"],
        delivery_limits: &settings["deliveryLimits"],
    }
}

async fn switch(ctx: &Ctx, topic: &str, name: &str, action: &str, done: &str) -> Result<String, Failure> {
    let sub = ctx
        .api
        .post(&["topics", topic, "eventSubscriptions", name, action], None)
        .await?;
    Ok(ctx.show(&sub, |_| format!("subscription {topic}/{name} {done}\n")))
}

fn subscriptions_table(list: &Value) -> String {
    let rows = items(list)
        .iter()
        .map(|s| {
            let p = &s["properties"];
            let shown = shown(p);
            vec![
                cell(&s["name"]),
                shown.mode.to_owned(),
                crate::endpoints::describe(shown.destination),
                cell(&p["provisioningState"]),
                cell(&p["paused"]),
                cell(&shown.filter["includedEventTypes"]),
                cell(&container_of(shown.dead_letter)),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "MODE",
            "ENDPOINT",
            "STATE",
            "PAUSED",
            "EVENT TYPES",
            "DEAD-LETTER CONTAINER",
        ],
        rows,
    )
}

/// A subscription's fields as name and value, in the order shown.
fn subscription_pairs(sub: &Value) -> Vec<(&'static str, String)> {
    let p = &sub["properties"];
    let shown = shown(p);
    let (destination, filter, retry) = (shown.destination, shown.filter, shown.limits);
    let mut pairs = vec![
        ("name", cell(&sub["name"])),
        ("topic", cell(&p["topic"])),
        ("deliveryMode", shown.mode.to_owned()),
        ("endpoint", crate::endpoints::describe(destination)),
        ("provisioningState", cell(&p["provisioningState"])),
        ("paused", cell(&p["paused"])),
        ("eventDeliverySchema", cell(&p["eventDeliverySchema"])),
        ("includedEventTypes", cell(&filter["includedEventTypes"])),
        ("subjectBeginsWith", cell(&filter["subjectBeginsWith"])),
        ("subjectEndsWith", cell(&filter["subjectEndsWith"])),
    ];
    // Only a webhook that sends a bearer token says so (docs/oauth-delivery.md).
    if let Some(certificate) = destination["clientCertificate"].as_str() {
        pairs.insert(4, ("clientCertificate", certificate.to_owned()));
    }
    if let Some(token) = crate::webhook_auth::describe(destination) {
        pairs.insert(4, ("bearerToken", token));
    }
    if shown.advanced_filters.as_array().is_some_and(|a| !a.is_empty()) {
        pairs.push(("advancedFilters", cell(shown.advanced_filters)));
    }
    if !retry["receiveLockDurationInSeconds"].is_null() {
        pairs.push((
            "receiveLockDurationInSeconds",
            cell(&retry["receiveLockDurationInSeconds"]),
        ));
    }
    // Custom topics and namespace topics name their retry limits differently.
    if retry["maxDeliveryCount"].is_null() {
        pairs.push(("maxDeliveryAttempts", cell(&retry["maxDeliveryAttempts"])));
        pairs.push(("eventTimeToLiveInMinutes", cell(&retry["eventTimeToLiveInMinutes"])));
    } else {
        pairs.push(("maxDeliveryCount", cell(&retry["maxDeliveryCount"])));
        pairs.push(("eventTimeToLive", cell(&retry["eventTimeToLive"])));
    }
    pairs.push(("maxEventsPerBatch", cell(&destination["maxEventsPerBatch"])));
    let limits = if p["deliveryLimits"].is_null() {
        &retry["deliveryLimits"]
    } else {
        &p["deliveryLimits"]
    };
    if !limits.is_null() {
        pairs.push(("deliveryLimits", cell(limits)));
    }
    let order = if p["orderedDelivery"].is_null() {
        &retry["orderedDelivery"]
    } else {
        &p["orderedDelivery"]
    };
    if !order.is_null() {
        pairs.push(("orderedDelivery", cell(order)));
    }
    pairs.push(("deadLetterContainer", cell(&container_of(shown.dead_letter))));
    if let Some(message) = p["provisioningMessage"].as_str() {
        pairs.push(("provisioningMessage", message.to_owned()));
    }
    if !p["expirationTimeUtc"].is_null() {
        pairs.push(("expirationTimeUtc", cell(&p["expirationTimeUtc"])));
    }
    pairs
}

/// Names of topics and subscriptions compare without case, as the API's do.
fn same_name(value: &Value, name: &str) -> bool {
    value.as_str().is_some_and(|v| v.eq_ignore_ascii_case(name))
}

/// A queue subscription's queue now, under its settings; or why it cannot be shown.
fn queue_now(queue: Result<Option<&Value>, String>) -> String {
    match queue {
        Ok(Some(q)) => {
            let oldest = q["oldestUnacknowledgedSeconds"].as_u64().map_or_else(
                || "-".to_owned(),
                |s| humantime::format_duration(std::time::Duration::from_secs(s)).to_string(),
            );
            fields(vec![
                ("available", cell(&q["available"])),
                ("locked", cell(&q["locked"])),
                ("delayed", cell(&q["delayed"])),
                ("oldestUnacknowledged", oldest),
            ])
        }
        Ok(None) => "queue: not listed by GET /admin/queues yet; see `egctl status`\n".to_owned(),
        Err(e) => format!("queue: cannot be read now ({e}); see `egctl status`\n"),
    }
}

/// Whether a subscription's properties (either form) ask for ordered delivery.
fn is_ordered(p: &Value) -> bool {
    !p["orderedDelivery"].is_null() || !p["deliveryConfiguration"]["push"]["orderedDelivery"].is_null()
}

/// An ordered subscription's deliveries waiting behind their key's head, under its
/// settings; or why the count cannot be shown.
fn waiting_now(waiting: Result<Option<Value>, String>) -> String {
    match waiting {
        Ok(Some(n)) => fields(vec![("waitingInLines", cell(&n))]),
        Ok(None) => "waitingInLines: not listed by GET /admin/queues yet\n".to_owned(),
        Err(e) => format!("waitingInLines: cannot be read now ({e})\n"),
    }
}

/// How a limited subscription's `deliveryLimits` hold now, from `GET /admin/status` (the
/// `limits` object of its row): the current rate, the backlog waiting for the rate,
/// requests in flight and any slowdown.
async fn limits_now(ctx: &Ctx, topic: &str, name: &str) -> String {
    let status = match ctx.api.get(&["status"]).await {
        Ok(status) => status,
        Err(e) => return format!("limits now: cannot be read ({e}); see `egctl status`\n"),
    };
    let row = status["topics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| same_name(&t["name"], topic))
        .flat_map(|t| t["subscriptions"].as_array().into_iter().flatten())
        .find(|s| same_name(&s["name"], name));
    let Some(limits) = row.map(|r| &r["limits"]).filter(|l| !l.is_null()) else {
        return "limits now: not in GET /admin/status yet; see `egctl status`\n".to_owned();
    };
    fields(vec![
        ("currentRate", cell(&limits["currentRate"])),
        ("backlog", cell(&limits["backlog"])),
        ("inFlight", cell(&limits["inFlight"])),
        ("slowedUntil", cell(&limits["slowedUntil"])),
    ])
}

fn health_fields(health: &Value) -> String {
    let pairs = [
        "endpointBaseUrl",
        "state",
        "consecutiveFailures",
        "probationLevel",
        "probationUntil",
        "lastFailureOutcome",
        "lastFailureTime",
    ]
    .into_iter()
    .map(|k| (k, cell(&health[k])))
    .collect();
    fields(pairs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::cli::{Cli, Command, SubscriptionCommand};
    use clap::Parser;

    fn subscription_fields(sub: &Value) -> String {
        fields(subscription_pairs(sub))
    }

    fn args(line: &[&str]) -> SubscriptionCreate {
        let cli = Cli::try_parse_from(["egctl", "subscriptions", "create", "t", "s"].iter().chain(line)).unwrap();
        match cli.command {
            Command::Subscriptions(SubscriptionCommand::Create(a)) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_subscription_not_succeeded_fails_with_its_reason_after_the_output() {
        let ok = json!({"properties": {"provisioningState": "Succeeded"}});
        assert_eq!(unless_inactive(&ok, "t", "s", "out".into()).unwrap(), "out");
        let waiting = json!({"properties": {"provisioningState": "AwaitingManualAction",
            "provisioningMessage": "The validation handshake failed: the endpoint answered 200 OK with an empty body."}});
        let failure = unless_inactive(&waiting, "orders", "audit", "out".into()).unwrap_err();
        assert_eq!(failure.exit_code(), 4);
        assert_eq!(failure.shown(), Some("out"));
        let message = failure.to_string();
        assert!(
            message.starts_with("subscription orders/audit is AwaitingManualAction: "),
            "{message}"
        );
        assert!(message.ends_with("answered 200 OK with an empty body."), "{message}");
        let silent = json!({"properties": {"provisioningState": "Failed"}});
        let message = unless_inactive(&silent, "t", "s", String::new())
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("is Failed") && message.contains("no reason"),
            "{message}"
        );
    }

    #[test]
    fn a_queue_subscriptions_queue_is_shown_under_its_settings() {
        let q = json!({"topic": "orders", "subscription": "workers", "available": 5, "locked": 2, "delayed": 0,
                       "oldestUnacknowledgedSeconds": 61});
        let text = queue_now(Ok(Some(&q)));
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            lines,
            [
                vec!["available:", "5"],
                vec!["locked:", "2"],
                vec!["delayed:", "0"],
                vec!["oldestUnacknowledged:", "1m", "1s"]
            ],
            "{text}"
        );
        assert!(queue_now(Err("connection refused".into())).contains("(connection refused); see `egctl status`"));
        assert!(same_name(&json!("Orders"), "orders"));
        assert!(!same_name(&json!(null), "orders"));
    }

    #[test]
    fn limit_flags_build_delivery_limits_and_show_prints_them() {
        let line = [
            "--endpoint",
            "http://h/x",
            "--rate-limit",
            "2.5",
            "--burst",
            "4",
            "--max-concurrent-requests",
            "3",
        ];
        let body = from_flags(&args(&line), false);
        let limits = json!({"requestsPerSecond": 2.5, "burst": 4, "maxConcurrentRequests": 3});
        assert_eq!(body["properties"]["deliveryLimits"], limits);
        assert!(from_flags(&args(&["--endpoint", "http://h/x"]), false)["properties"]["deliveryLimits"].is_null());
        let shown = json!({"name": "s", "properties": {"deliveryLimits": limits}});
        let pairs = subscription_pairs(&shown);
        assert!(
            pairs.iter().any(|(k, v)| *k == "deliveryLimits" && v.contains("2.5")),
            "{pairs:?}"
        );
    }

    #[test]
    fn order_by_builds_ordered_delivery_and_show_prints_it() {
        let body = from_flags(
            &args(&["--endpoint", "http://h/x", "--order-by", "data:accountId"]),
            false,
        );
        let order = json!({"key": "data", "path": "accountId"});
        assert_eq!(body["properties"]["orderedDelivery"], order);
        let body = from_flags(
            &args(&["--endpoint", "http://h/x", "--order-by", "partitionkey"]),
            false,
        );
        assert_eq!(body["properties"]["orderedDelivery"], json!({"key": "partitionKey"}));
        let line = [
            "egctl",
            "subscriptions",
            "create",
            "t",
            "s",
            "--endpoint",
            "http://h/x",
            "--order-by",
            "colour",
        ];
        let refused = Cli::try_parse_from(line).unwrap_err().to_string();
        assert!(
            refused.contains("subject, type, partitionkey or data:<path>"),
            "{refused}"
        );
        let pairs = subscription_pairs(&json!({"name": "s", "properties": {"orderedDelivery": order}}));
        assert!(
            pairs
                .iter()
                .any(|(k, v)| *k == "orderedDelivery" && v.contains("accountId")),
            "{pairs:?}"
        );
    }

    #[test]
    fn show_tells_what_waits_in_an_ordered_subscriptions_lines() {
        assert!(is_ordered(&json!({"orderedDelivery": {"key": "subject"}})));
        assert!(is_ordered(
            &json!({"deliveryConfiguration": {"push": {"orderedDelivery": {"key": "subject"}}}})
        ));
        assert!(!is_ordered(&json!({"destination": {}})));
        assert_eq!(
            waiting_now(Ok(Some(json!(7)))),
            fields(vec![("waitingInLines", "7".into())])
        );
        assert!(waiting_now(Ok(None)).contains("not listed"));
        assert!(waiting_now(Err("403".into())).contains("cannot be read now (403)"));
    }

    #[test]
    fn flags_build_only_what_was_given() {
        let body = from_flags(&args(&["--endpoint", "http://h/x"]), false);
        assert_eq!(
            body,
            json!({"properties": {"destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "http://h/x"}}}})
        );
        let line = [
            "--endpoint",
            "http://h/x",
            "--max-attempts",
            "3",
            "--ttl-minutes",
            "10",
            "--event-types",
            "A,B",
            "--subject-begins-with",
            "/a",
            "--subject-ends-with",
            ".b",
            "--max-events-per-batch",
            "5",
            "--dead-letter-container",
            "dl",
            "--delivery-schema",
            "CloudEventSchemaV1_0",
            "--paused",
        ];
        let p = &from_flags(&args(&line), false)["properties"];
        assert_eq!(
            p["filter"],
            json!({"includedEventTypes": ["A", "B"], "subjectBeginsWith": "/a", "subjectEndsWith": ".b"})
        );
        assert_eq!(
            p["retryPolicy"],
            json!({"maxDeliveryAttempts": 3, "eventTimeToLiveInMinutes": 10})
        );
        assert_eq!(p["destination"]["properties"]["maxEventsPerBatch"], 5);
        assert_eq!(p["deadLetterDestination"]["properties"]["containerName"], "dl");
        assert_eq!(p["eventDeliverySchema"], "CloudEventSchemaV1_0");
        assert_eq!(p["paused"], true);
        let p = &from_flags(&args(&line), true)["properties"];
        assert_eq!(
            p["retryPolicy"],
            json!({"maxDeliveryCount": 3, "eventTimeToLive": "PT10M"})
        );
    }

    #[test]
    fn queue_flags_build_a_namespace_queue_subscription() {
        let body = from_queue(&["--queue"]);
        assert_eq!(
            body,
            json!({"properties": {"deliveryConfiguration": {"deliveryMode": "Queue", "queue": {}}}})
        );
        let line = [
            "--queue",
            "--lock-duration",
            "90",
            "--max-delivery-count",
            "4",
            "--ttl",
            "P1D",
            "--event-types",
            "A,B",
            "--subject-begins-with",
            "orders/",
            "--dead-letter-container",
            "dead",
        ];
        let p = &from_queue(&line)["properties"];
        assert_eq!(
            p["deliveryConfiguration"],
            json!({"deliveryMode": "Queue", "queue": {
                "receiveLockDurationInSeconds": 90, "maxDeliveryCount": 4, "eventTimeToLive": "P1D",
                "deadLetterDestinationWithResourceIdentity": {"deadLetterDestination":
                    {"endpointType": "StorageBlob", "properties": {"blobContainerName": "dead"}}}}})
        );
        assert_eq!(
            p["filtersConfiguration"],
            json!({"includedEventTypes": ["A", "B"], "filters": [
                {"operatorType": "StringBeginsWith", "key": "subject", "values": ["orders/"]}]})
        );
        // A queue has no webhook; a lock duration needs a queue.
        let refused = |line: &[&str]| {
            Cli::try_parse_from(["egctl", "subscriptions", "create", "t", "s"].iter().chain(line)).is_err()
        };
        assert!(refused(&["--queue", "--endpoint", "http://h/x"]));
        assert!(refused(&["--queue", "--ttl", "P1D", "--ttl-minutes", "5"]));
        assert!(refused(&[]));
    }

    #[test]
    fn object_store_flags_build_event_grids_json_in_either_form() {
        let blob = from_flags(
            &args(&["--endpoint", "http://h/x", "--dead-letter-blob", "deadletters1/dead"]),
            false,
        );
        let destination = &blob["properties"]["deadLetterDestination"];
        assert_eq!(destination["endpointType"], "StorageBlob");
        assert_eq!(destination["properties"]["blobContainerName"], "dead");
        assert!(
            destination["properties"]["resourceId"]
                .as_str()
                .unwrap()
                .ends_with("/providers/Microsoft.Storage/storageAccounts/deadletters1")
        );
        let s3 = from_queue(&["--queue", "--dead-letter-s3", "minio/eg-dead/prod"]);
        assert_eq!(
            s3["properties"]["deliveryConfiguration"]["queue"]["deadLetterDestinationWithResourceIdentity"],
            json!({"deadLetterDestination": {"endpointType": "S3", "properties": {
                "connection": "minio", "bucket": "eg-dead", "keyPrefix": "prod"}}})
        );
        let none = from_flags(&args(&["--endpoint", "http://h/x"]), false);
        assert!(none["properties"].get("deadLetterDestination").is_none());
    }

    #[test]
    fn show_puts_a_failing_destination_above_everything() {
        let sub = json!({"name": "audit", "properties": {
            "provisioningState": "Succeeded",
            "destination": {"endpointType": "WebHook", "properties": {"endpointBaseUrl": "https://h/x"}},
            "deadLetterDestination": {"endpointType": "StorageBlob", "properties": {
                "resourceId": "/subscriptions/0/resourceGroups/eg/providers/Microsoft.Storage/storageAccounts/deadletters1",
                "blobContainerName": "dead"}}}});
        let shown = subscription_fields(&sub);
        assert!(
            shown
                .lines()
                .any(|l| l.starts_with("deadLetterContainer:") && l.ends_with("dead")),
            "{shown}"
        );
        let failing = json!({"destination": {"store": "azure:deadletters1", "container": "dead"},
            "state": "Failing",
            "problem": {"store": "azure:deadletters1", "container": "dead", "kind": "ContainerNotFound",
                "message": "The specified container does not exist.",
                "failingSince": "2026-11-25T16:00:00.000Z", "lastFailureTime": "2026-11-25T16:01:00.000Z"}});
        let text = shown_with_dead_letters(&sub, &Ok(Some(failing)));
        assert!(
            text.starts_with(
                "WARNING: dead letters are not being written: ContainerNotFound at azure:deadletters1 / dead"
            ),
            "{text}"
        );
        assert!(text.contains("provisioningState:"), "{text}");
        assert!(
            !text.contains("deadLetterContainer"),
            "the destination replaces it: {text}"
        );
        let last: Vec<Vec<&str>> = text
            .lines()
            .rev()
            .take(2)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            last,
            [
                vec!["deadLetterState:", "Failing"],
                vec!["deadLetterDestination:", "azure:deadletters1", "/", "dead"]
            ],
            "{text}"
        );
        let healthy = shown_with_dead_letters(
            &sub,
            &Ok(Some(
                json!({"destination": {"store": "local", "container": "dead"}, "state": "Healthy", "problem": null}),
            )),
        );
        assert!(!healthy.contains("WARNING"), "{healthy}");
        assert!(healthy.contains("Healthy"), "{healthy}");
        // An older eg-ingress: the resource's fields only; an unreadable answer says so.
        assert_eq!(shown_with_dead_letters(&sub, &Ok(None)), shown);
        assert!(
            shown_with_dead_letters(&sub, &Err("503 Service Unavailable: redis".into()))
                .contains("cannot be read now (503 Service Unavailable: redis)")
        );
    }

    fn from_queue(line: &[&str]) -> Value {
        queue_from_flags(&args(line))
    }

    #[test]
    fn show_and_list_read_either_form_with_its_mode() {
        let queue = json!({"name": "q", "properties": {
            "provisioningState": "Succeeded", "paused": false,
            "deliveryConfiguration": {"deliveryMode": "Queue", "queue": {
                "receiveLockDurationInSeconds": 60, "maxDeliveryCount": 4, "eventTimeToLive": "P1D",
                "deadLetterDestinationWithResourceIdentity": {"deadLetterDestination":
                    {"endpointType": "StorageBlob", "properties": {"blobContainerName": "dead"}}}}},
            "filtersConfiguration": {"includedEventTypes": ["A"], "filters": []}}});
        let text = subscription_fields(&queue);
        for expected in [
            "Queue",
            "receiveLockDurationInSeconds",
            "maxDeliveryCount",
            "P1D",
            "dead",
        ] {
            assert!(text.contains(expected), "{expected}: {text}");
        }
        let push = json!({"name": "p", "properties": {
            "deliveryConfiguration": {"deliveryMode": "Push", "push": {
                "maxDeliveryCount": 3, "eventTimeToLive": "PT5M",
                "destination": {"endpointType": "WebHook", "properties": {"endpointBaseUrl": "https://h/x"}}}}}});
        let text = subscription_fields(&push);
        assert!(text.contains("https://h/x") && text.contains("PT5M"), "{text}");
        let table = subscriptions_table(&json!({"value": [queue, push]}));
        assert!(
            table.contains("MODE") && table.contains("Queue") && table.contains("Push"),
            "{table}"
        );
    }
}
