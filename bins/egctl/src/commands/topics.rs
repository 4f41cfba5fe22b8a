//! `egctl topics …`: topics and their access keys. A namespace topic is shown with what
//! a namespace client needs, the namespace endpoint (eg's base URL) and the topic's
//! name, and its `:publish` route: the custom-topic URL the API also sends as
//! `endpoint` (`…/topics/<name>/api/events`), handed to an SDK's namespace client, only
//! earns a misleading error.

use super::{Ctx, read_resource};
use crate::cli::TopicCommand;
use crate::failure::Failure;
use crate::output::{cell, fields, table};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

pub async fn run(command: TopicCommand, ctx: &Ctx) -> Result<String, Failure> {
    match command {
        TopicCommand::Create {
            name,
            input_schema,
            namespace,
            retention_days,
            duplicate_window,
            archive_container,
            archive_retention_days,
            file,
        } => {
            let mut body = match &file {
                Some(path) => read_resource(path)?,
                None => json!({"properties": {}}),
            };
            if namespace {
                body["properties"]["publisherType"] = json!("Custom");
                body["properties"]["inputSchema"] = json!("CloudEventSchemaV1_0");
            }
            if let Some(days) = retention_days {
                body["properties"]["eventRetentionInDays"] = json!(days);
            }
            if let Some(schema) = input_schema {
                body["properties"]["inputSchema"] = json!(schema.as_str());
            }
            if let Some(window) = duplicate_window {
                body["properties"]["duplicateDetectionHistoryTimeWindow"] = json!(window);
            }
            if let (Some(container), Some(days)) = (archive_container, archive_retention_days) {
                body["properties"]["archive"] = json!({
                    "destination": {"endpointType": "LocalDirectory", "properties": {"containerName": container}},
                    "retentionDays": days,
                });
            }
            let answer = ctx.api.admin(Method::PUT, &["topics", &name], &[], Some(&body)).await?;
            let verb = if answer.status == StatusCode::CREATED {
                "created"
            } else {
                "updated"
            };
            Ok(ctx.show(&answer.body, |t| format!("topic {name} {verb}\n{}", topic_fields(t))))
        }
        TopicCommand::List => {
            let list = ctx.api.get(&["topics"]).await?;
            Ok(ctx.show(&list, topics_table))
        }
        TopicCommand::Show { name } => {
            let topic = ctx.api.get(&["topics", &name]).await?;
            Ok(ctx.show(&topic, topic_fields))
        }
        TopicCommand::Delete { name } => {
            let answer = ctx.api.admin(Method::DELETE, &["topics", &name], &[], None).await?;
            let existed = answer.status != StatusCode::NO_CONTENT;
            Ok(ctx.show(&json!({"deleted": existed}), |_| {
                if existed {
                    format!("topic {name} deleted, with its subscriptions\n")
                } else {
                    format!("topic {name} did not exist\n")
                }
            }))
        }
        TopicCommand::Keys { name } => {
            let keys = ctx.api.post(&["topics", &name, "listKeys"], None).await?;
            Ok(ctx.show(&keys, keys_fields))
        }
        TopicCommand::Regenerate { name, key } => {
            let body = json!({"keyName": key.as_str()});
            let keys = ctx.api.post(&["topics", &name, "regenerateKey"], Some(&body)).await?;
            Ok(ctx.show(&keys, |k| {
                format!("{} of topic {name} regenerated\n{}", key.as_str(), keys_fields(k))
            }))
        }
    }
}

fn topics_table(list: &Value) -> String {
    let rows = items(list)
        .iter()
        .map(|t| {
            let p = &t["properties"];
            let endpoint = match NamespaceRoutes::of(t) {
                Some(routes) => routes.endpoint,
                None => cell(&p["endpoint"]),
            };
            vec![
                cell(&t["name"]),
                cell(&p["inputSchema"]),
                cell(&p["deliveryProfile"]),
                endpoint,
            ]
        })
        .collect();
    table(&["NAME", "INPUT SCHEMA", "PROFILE", "ENDPOINT"], rows)
}

fn topic_fields(topic: &Value) -> String {
    let p = &topic["properties"];
    let namespace = NamespaceRoutes::of(topic);
    let mut pairs = vec![
        ("name", cell(&topic["name"])),
        ("inputSchema", cell(&p["inputSchema"])),
        ("deliveryProfile", cell(&p["deliveryProfile"])),
    ];
    match &namespace {
        Some(routes) => {
            pairs.push(("namespaceEndpoint", routes.endpoint.clone()));
            pairs.push(("publish", routes.publish.clone()));
        }
        None => pairs.push(("endpoint", cell(&p["endpoint"]))),
    }
    pairs.push(("provisioningState", cell(&p["provisioningState"])));
    if !p["eventRetentionInDays"].is_null() {
        pairs.push(("eventRetentionInDays", cell(&p["eventRetentionInDays"])));
    }
    if !p["duplicateDetectionHistoryTimeWindow"].is_null() {
        let window = &p["duplicateDetectionHistoryTimeWindow"];
        pairs.push(("duplicateDetectionHistoryTimeWindow", cell(window)));
    }
    if !p["archive"].is_null() {
        pairs.push(("archive", cell(&p["archive"])));
    }
    if !p["inputSchemaMapping"].is_null() {
        pairs.push(("inputSchemaMapping", cell(&p["inputSchemaMapping"])));
    }
    let mut text = fields(pairs);
    if let Some(routes) = namespace {
        text.push_str(&format!(
            "a namespace client (the SDKs' EventGridPublisherClient, EventGridSenderClient) takes endpoint {} and topic name {}\n",
            routes.endpoint,
            cell(&topic["name"])
        ));
    }
    text
}

/// Where a namespace topic's clients go: the namespace endpoint (eg's base URL, the same
/// for every topic) and the topic's `:publish` route.
struct NamespaceRoutes {
    endpoint: String,
    publish: String,
}

impl NamespaceRoutes {
    /// The routes of `topic`, if it is a namespace topic. The base URL is its `endpoint`
    /// without the custom-topic path.
    fn of(topic: &Value) -> Option<Self> {
        let p = &topic["properties"];
        if p["deliveryProfile"] != "NamespaceTopic" {
            return None;
        }
        let name = topic["name"].as_str()?;
        let endpoint = p["endpoint"].as_str()?;
        let base = endpoint.strip_suffix(&format!("/topics/{name}/api/events"))?;
        Some(Self {
            endpoint: base.to_owned(),
            publish: format!("POST {base}/topics/{name}:publish?api-version=2024-06-01"),
        })
    }
}

fn keys_fields(keys: &Value) -> String {
    fields(vec![("key1", cell(&keys["key1"])), ("key2", cell(&keys["key2"]))])
}

/// The `value` array of a list answer (empty if it has none).
pub fn items(list: &Value) -> &[Value] {
    list["value"].as_array().map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value shown for `field` in a field list.
    fn value<'a>(text: &'a str, field: &str) -> Option<&'a str> {
        let prefix = format!("{field}:");
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .map(str::trim)
    }

    #[test]
    fn a_namespace_topic_shows_its_namespace_endpoint_and_publish_route() {
        let topic = json!({"name": "sensors", "properties": {
            "publisherType": "Custom", "inputSchema": "CloudEventSchemaV1_0",
            "deliveryProfile": "NamespaceTopic", "provisioningState": "Succeeded",
            "endpoint": "http://127.0.0.1:8080/topics/sensors/api/events",
        }});
        let text = topic_fields(&topic);
        assert_eq!(
            value(&text, "namespaceEndpoint"),
            Some("http://127.0.0.1:8080"),
            "{text}"
        );
        assert_eq!(
            value(&text, "publish"),
            Some("POST http://127.0.0.1:8080/topics/sensors:publish?api-version=2024-06-01"),
            "{text}"
        );
        assert!(!text.contains("/api/events"), "{text}");
        assert!(
            text.contains("takes endpoint http://127.0.0.1:8080 and topic name sensors"),
            "{text}"
        );
        let list = topics_table(&json!({"value": [topic]}));
        let row = list.lines().nth(1).unwrap_or_default();
        assert!(row.ends_with("NamespaceTopic  http://127.0.0.1:8080"), "{list}");
    }

    #[test]
    fn a_custom_topic_shows_its_api_events_endpoint() {
        let topic = json!({"name": "orders", "properties": {
            "inputSchema": "EventGridSchema", "deliveryProfile": "CustomTopic",
            "endpoint": "http://127.0.0.1:8080/topics/orders/api/events",
        }});
        let text = topic_fields(&topic);
        assert_eq!(
            value(&text, "endpoint"),
            Some("http://127.0.0.1:8080/topics/orders/api/events"),
            "{text}"
        );
        assert_eq!(value(&text, "namespaceEndpoint"), None, "{text}");
    }
}
