//! `egctl topics …`: topics and their access keys.

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
            vec![
                cell(&t["name"]),
                cell(&p["inputSchema"]),
                cell(&p["deliveryProfile"]),
                cell(&p["endpoint"]),
            ]
        })
        .collect();
    table(&["NAME", "INPUT SCHEMA", "PROFILE", "ENDPOINT"], rows)
}

fn topic_fields(topic: &Value) -> String {
    let p = &topic["properties"];
    let mut pairs = vec![
        ("name", cell(&topic["name"])),
        ("inputSchema", cell(&p["inputSchema"])),
        ("deliveryProfile", cell(&p["deliveryProfile"])),
        ("endpoint", cell(&p["endpoint"])),
        ("provisioningState", cell(&p["provisioningState"])),
    ];
    if !p["eventRetentionInDays"].is_null() {
        pairs.push(("eventRetentionInDays", cell(&p["eventRetentionInDays"])));
    }
    if !p["inputSchemaMapping"].is_null() {
        pairs.push(("inputSchemaMapping", cell(&p["inputSchemaMapping"])));
    }
    fields(pairs)
}

fn keys_fields(keys: &Value) -> String {
    fields(vec![("key1", cell(&keys["key1"])), ("key2", cell(&keys["key2"]))])
}

/// The `value` array of a list answer (empty if it has none).
pub fn items(list: &Value) -> &[Value] {
    list["value"].as_array().map_or(&[], Vec::as_slice)
}
