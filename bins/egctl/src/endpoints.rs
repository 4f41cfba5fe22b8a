//! Delivery destinations beyond webhooks on the command line: `--storage-queue` (a queue
//! of an Azure storage account, in Event Grid's `StorageQueue` JSON), `--rabbitmq` (an
//! exchange, eg's `RabbitMQ`), `--nats` (a JetStream subject, eg's `NatsJetStream`),
//! `--kafka` (a topic, eg's `Kafka`), `--sqs` (an Amazon SQS queue, eg's `AmazonSQS`)
//! and `--event-hub` (an Azure event hub, in Event Grid's `EventHub` JSON),
//! and how `subscriptions show` and `list` name a subscription's destination. egctl only
//! shapes the JSON; eg-ingress checks that the account or connection is configured, and
//! refuses the subscription saying so when it is not.

use crate::destinations::{BadTarget, PLACEHOLDER_ACCOUNT_ID};
use clap::Args;
use serde_json::{Value, json};

/// Where `subscriptions create` delivers when it is not a webhook (`--endpoint`). Each
/// kind's flag joins the `destination` group (at most one of `--endpoint`, `--queue` and
/// these); a kind's own options (`--message-ttl`, `--routing-key…`) require its flag's
/// own group (`to-<kind>`: clap takes any member of an arg's groups as the arg when it
/// checks a requirement), so none is silently ignored beside another destination.
#[derive(Debug, Clone, Default, Args)]
pub struct EndpointFlags {
    /// Deliver each event as a message to a queue of an Azure storage account configured
    /// in eg: ACCOUNT/QUEUE, or the account's resource id followed by /QUEUE
    #[arg(long, value_name = "ACCOUNT/QUEUE", value_parser = parse_storage_queue,
          groups = [DESTINATION, "to-storage-queue"])]
    pub storage_queue: Option<StorageQueueTarget>,
    /// Storage queue: how long a message lives, in seconds (-1: never expires; default:
    /// the queue service's 7 days)
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "to-storage-queue",
        allow_negative_numbers = true
    )]
    pub message_ttl: Option<i64>,
    /// Publish each event to an exchange through a RabbitMQ connection configured in eg:
    /// CONNECTION/EXCHANGE (CONNECTION/ for the default exchange); with --routing-key or
    /// --routing-key-from
    #[arg(long, value_name = "CONNECTION/EXCHANGE", value_parser = parse_rabbitmq,
          groups = [DESTINATION, "to-rabbitmq"], requires = "routing")]
    pub rabbitmq: Option<BrokerTarget>,
    /// RabbitMQ: the routing key of every event
    #[arg(long, value_name = "KEY", group = "routing", requires = "to-rabbitmq")]
    pub routing_key: Option<String>,
    /// RabbitMQ: route each event by this field of it (subject, type, data.region, …)
    #[arg(long, value_name = "FIELD", group = "routing", requires = "to-rabbitmq")]
    pub routing_key_from: Option<String>,
    /// Publish each event to a subject stored by JetStream, through a NATS connection
    /// configured in eg: CONNECTION/SUBJECT
    #[arg(long, value_name = "CONNECTION/SUBJECT", value_parser = parse_nats, group = DESTINATION)]
    pub nats: Option<BrokerTarget>,
    /// Produce each event as a record to a topic through a Kafka connection configured in
    /// eg: CONNECTION/TOPIC; keyed with --kafka-key or --kafka-key-from (neither: no key,
    /// records spread over the partitions)
    #[arg(long, value_name = "CONNECTION/TOPIC", value_parser = parse_kafka,
          groups = [DESTINATION, "to-kafka"])]
    pub kafka: Option<BrokerTarget>,
    /// Kafka: the key of every record
    #[arg(long, value_name = "KEY", group = "kafka-key", requires = "to-kafka")]
    pub kafka_key: Option<String>,
    /// Kafka: key each record by this field of its event (subject, type, data.accountId, …)
    #[arg(long, value_name = "FIELD", group = "kafka-key", requires = "to-kafka")]
    pub kafka_key_from: Option<String>,
    /// Send each event as a message to an Amazon SQS queue, through an SQS connection
    /// configured in eg: CONNECTION/QUEUE_URL (the queue's URL as AWS shows it)
    #[arg(long, value_name = "CONNECTION/QUEUE_URL", value_parser = parse_sqs, group = DESTINATION)]
    pub sqs: Option<BrokerTarget>,
    /// Produce each event as a record to an Azure event hub of a namespace configured in
    /// eg: NAMESPACE/HUB, or the hub's resource id; keyed by the PartitionKey delivery
    /// property when the subscription sets one
    #[arg(long, value_name = "NAMESPACE/HUB", value_parser = parse_event_hub, group = DESTINATION)]
    pub event_hub: Option<String>,
}

/// The destination flags that are no webhook, which a webhook's own flags (its bearer
/// token, `webhook_auth`) conflict with: clap counts any member of the destination group
/// as `--endpoint`, so "requires endpoint" would not refuse them.
pub const NOT_WEBHOOKS: [&str; 7] = [
    "storage_queue",
    "rabbitmq",
    "nats",
    "kafka",
    "queue",
    "sqs",
    "event_hub",
];

/// The subscription and resource group of a hub's resource id built from
/// NAMESPACE/HUB: eg reads only the namespace and hub from it.
const PLACEHOLDER_NAMESPACES: &str =
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/eg/providers/Microsoft.EventHub/namespaces/";

/// The clap group of the flags that say where a subscription delivers: at most one.
pub const DESTINATION: &str = "destination";

/// `--storage-queue`: a queue of an Azure storage account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageQueueTarget {
    /// The account's resource id, as given or built from its name.
    pub resource_id: String,
    pub queue: String,
}

/// `--rabbitmq` or `--nats`: a connection configured in eg and what to publish to
/// through it (an exchange, a subject).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerTarget {
    pub connection: String,
    pub target: String,
}

/// Reads `ACCOUNT/QUEUE`, or an account's resource id followed by `/QUEUE`.
pub fn parse_storage_queue(raw: &str) -> Result<StorageQueueTarget, BadTarget> {
    let Some((account, queue)) = raw.trim_end_matches('/').rsplit_once('/') else {
        return Err(BadTarget::new(format!(
            "{raw:?}: give ACCOUNT/QUEUE (or the account's resource id followed by /QUEUE)"
        )));
    };
    if queue.is_empty() || account.is_empty() {
        return Err(BadTarget::new(format!("{raw:?}: give ACCOUNT/QUEUE")));
    }
    let resource_id = if account.starts_with('/') {
        account.to_owned()
    } else {
        format!("{PLACEHOLDER_ACCOUNT_ID}{account}")
    };
    Ok(StorageQueueTarget {
        resource_id,
        queue: queue.to_owned(),
    })
}

/// Reads `CONNECTION/EXCHANGE`; the exchange may be empty (RabbitMQ's default exchange).
pub fn parse_rabbitmq(raw: &str) -> Result<BrokerTarget, BadTarget> {
    match raw.split_once('/') {
        Some((connection, exchange)) if !connection.is_empty() => Ok(BrokerTarget {
            connection: connection.to_owned(),
            target: exchange.to_owned(),
        }),
        _ => Err(BadTarget::new(format!(
            "{raw:?}: give CONNECTION/EXCHANGE, a connection configured in eg and an exchange (CONNECTION/ for the default exchange)"
        ))),
    }
}

/// Reads `CONNECTION/SUBJECT`.
pub fn parse_nats(raw: &str) -> Result<BrokerTarget, BadTarget> {
    match raw.split_once('/') {
        Some((connection, subject)) if !connection.is_empty() && !subject.is_empty() => Ok(BrokerTarget {
            connection: connection.to_owned(),
            target: subject.to_owned(),
        }),
        _ => Err(BadTarget::new(format!(
            "{raw:?}: give CONNECTION/SUBJECT, a connection configured in eg and a subject (orders.created)"
        ))),
    }
}

/// Reads `NAMESPACE/HUB` into the hub's resource id, or takes a resource id as given.
pub fn parse_event_hub(raw: &str) -> Result<String, BadTarget> {
    if raw.starts_with('/') {
        return Ok(raw.to_owned());
    }
    match raw.split_once('/') {
        Some((namespace, hub)) if !namespace.is_empty() && !hub.is_empty() && !hub.contains('/') => {
            Ok(format!("{PLACEHOLDER_NAMESPACES}{namespace}/eventhubs/{hub}"))
        }
        _ => Err(BadTarget::new(format!(
            "{raw:?}: give NAMESPACE/HUB, an Event Hubs namespace configured in eg and an event hub (or the hub's resource id)"
        ))),
    }
}

/// Reads `CONNECTION/TOPIC`.
pub fn parse_kafka(raw: &str) -> Result<BrokerTarget, BadTarget> {
    match raw.split_once('/') {
        Some((connection, topic)) if !connection.is_empty() && !topic.is_empty() => Ok(BrokerTarget {
            connection: connection.to_owned(),
            target: topic.to_owned(),
        }),
        _ => Err(BadTarget::new(format!(
            "{raw:?}: give CONNECTION/TOPIC, a connection configured in eg and a topic (orders)"
        ))),
    }
}

/// Reads `CONNECTION/QUEUE_URL`.
pub fn parse_sqs(raw: &str) -> Result<BrokerTarget, BadTarget> {
    match raw.split_once('/') {
        Some((connection, url)) if !connection.is_empty() && url.starts_with("http") => Ok(BrokerTarget {
            connection: connection.to_owned(),
            target: url.to_owned(),
        }),
        _ => Err(BadTarget::new(format!(
            "{raw:?}: give CONNECTION/QUEUE_URL, a connection configured in eg and the queue's URL (aws/https://sqs.eu-west-1.amazonaws.com/123456789012/orders)"
        ))),
    }
}

/// The `destination` the flags describe: a storage queue, a RabbitMQ exchange or a NATS
/// subject when one is given, else the webhook at `endpoint`. `maxEventsPerBatch` is
/// sent as given, for the server to refuse where a destination does not batch.
pub fn destination(flags: &EndpointFlags, endpoint: Option<&str>, max_events_per_batch: Option<u32>) -> Value {
    let (endpoint_type, mut props) = if let Some(queue) = &flags.storage_queue {
        let mut props = json!({"resourceId": queue.resource_id, "queueName": queue.queue});
        if let Some(ttl) = flags.message_ttl {
            props["queueMessageTimeToLiveInSeconds"] = json!(ttl);
        }
        ("StorageQueue", props)
    } else if let Some(rabbitmq) = &flags.rabbitmq {
        let mut props = json!({"connection": rabbitmq.connection, "exchange": rabbitmq.target});
        if let Some(key) = &flags.routing_key {
            props["routingKey"] = json!(key);
        }
        if let Some(field) = &flags.routing_key_from {
            props["routingKeyFrom"] = json!(field);
        }
        ("RabbitMQ", props)
    } else if let Some(nats) = &flags.nats {
        (
            "NatsJetStream",
            json!({"connection": nats.connection, "subject": nats.target}),
        )
    } else if let Some(kafka) = &flags.kafka {
        let mut props = json!({"connection": kafka.connection, "topic": kafka.target});
        if let Some(key) = &flags.kafka_key {
            props["key"] = json!(key);
        }
        if let Some(field) = &flags.kafka_key_from {
            props["keyFrom"] = json!(field);
        }
        ("Kafka", props)
    } else if let Some(sqs) = &flags.sqs {
        (
            "AmazonSQS",
            json!({"connection": sqs.connection, "queueUrl": sqs.target}),
        )
    } else if let Some(resource_id) = &flags.event_hub {
        ("EventHub", json!({ "resourceId": resource_id }))
    } else {
        ("WebHook", json!({"endpointUrl": endpoint}))
    };
    if let Some(n) = max_events_per_batch {
        props["maxEventsPerBatch"] = json!(n);
    }
    json!({"endpointType": endpoint_type, "properties": props})
}

/// How a destination is named in `show` and `list`, from its properties as the API shows
/// them (each kind has its own): a webhook's base URL, else the destination's identity
/// as eg names it (`storagequeue://ACCOUNT/QUEUE`, `rabbitmq://CONNECTION/EXCHANGE`,
/// `nats://CONNECTION/SUBJECT`, `kafka://CONNECTION/TOPIC`, `eventhub://NAMESPACE/HUB`)
/// with what else decides where a message goes.
pub fn describe(props: &Value) -> String {
    let text = |key: &str| props[key].as_str().unwrap_or_default();
    let Some(props_map) = props.as_object() else {
        return "-".to_owned();
    };
    if let Some((namespace, hub)) = text("resourceId").split_once("/namespaces/").and_then(|(_, rest)| {
        rest.split_once("/eventhubs/")
            .or_else(|| rest.split_once("/EventHubs/"))
    }) {
        return format!("eventhub://{namespace}/{hub}");
    }
    if props_map.contains_key("queueName") {
        let account = text("resourceId").rsplit('/').next().unwrap_or_default();
        let ttl = match &props["queueMessageTimeToLiveInSeconds"] {
            Value::Number(n) if n.as_i64() == Some(-1) => " (messages never expire)".to_owned(),
            Value::Number(n) => format!(" (messages live {n}s)"),
            _ => String::new(),
        };
        return format!("storagequeue://{account}/{}{ttl}", text("queueName"));
    }
    if props_map.contains_key("exchange") {
        let routing = match (props_map.get("routingKey"), props_map.get("routingKeyFrom")) {
            (Some(key), _) => format!(" (routing key {})", key.as_str().unwrap_or_default()),
            (None, Some(field)) => format!(" (routing key from {})", field.as_str().unwrap_or_default()),
            (None, None) => String::new(),
        };
        return format!("rabbitmq://{}/{}{routing}", text("connection"), text("exchange"));
    }
    if props_map.contains_key("topic") && props_map.contains_key("connection") {
        let key = match (props_map.get("key"), props_map.get("keyFrom")) {
            (Some(key), _) => format!(" (key {})", key.as_str().unwrap_or_default()),
            (None, Some(field)) => format!(" (key from {})", field.as_str().unwrap_or_default()),
            (None, None) => String::new(),
        };
        return format!("kafka://{}/{}{key}", text("connection"), text("topic"));
    }
    if props_map.contains_key("subject") && props_map.contains_key("connection") {
        return format!("nats://{}/{}", text("connection"), text("subject"));
    }
    if props_map.contains_key("queueUrl") && props_map.contains_key("connection") {
        let queue: Vec<&str> = text("queueUrl").rsplitn(3, '/').take(2).collect();
        return format!(
            "sqs://{}/{}",
            text("connection"),
            queue.iter().rev().copied().collect::<Vec<_>>().join("/")
        );
    }
    match props_map
        .get("endpointBaseUrl")
        .or_else(|| props_map.get("endpointUrl"))
    {
        Some(Value::String(url)) if !url.is_empty() => url.clone(),
        _ => "-".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command, SubscriptionCommand};
    use clap::Parser;

    fn create(args: &[&str]) -> Result<Value, clap::Error> {
        let line = ["egctl", "subscriptions", "create", "orders", "audit"]
            .iter()
            .chain(args);
        match Cli::try_parse_from(line)?.command {
            Command::Subscriptions(SubscriptionCommand::Create(a)) => {
                Ok(destination(&a.to, a.endpoint.as_deref(), a.max_events_per_batch))
            }
            other => panic!("not a create: {other:?}"),
        }
    }

    #[test]
    fn each_destination_flag_builds_its_json() {
        assert_eq!(
            create(&["--storage-queue", "queues1/orders", "--message-ttl", "-1"]).unwrap(),
            json!({"endpointType": "StorageQueue", "properties": {
                "resourceId": format!("{PLACEHOLDER_ACCOUNT_ID}queues1"), "queueName": "orders",
                "queueMessageTimeToLiveInSeconds": -1}})
        );
        let id = "/subscriptions/1/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/queues1";
        assert_eq!(
            create(&["--storage-queue", &format!("{id}/orders")]).unwrap()["properties"]["resourceId"],
            id
        );
        assert_eq!(
            create(&["--rabbitmq", "main/events", "--routing-key", "orders"]).unwrap(),
            json!({"endpointType": "RabbitMQ", "properties": {
                "connection": "main", "exchange": "events", "routingKey": "orders"}})
        );
        assert_eq!(
            create(&[
                "--rabbitmq",
                "main/",
                "--routing-key-from",
                "subject",
                "--max-events-per-batch",
                "10"
            ])
            .unwrap(),
            json!({"endpointType": "RabbitMQ", "properties": {
                "connection": "main", "exchange": "", "routingKeyFrom": "subject", "maxEventsPerBatch": 10}})
        );
        assert_eq!(
            create(&["--nats", "main/orders.created"]).unwrap(),
            json!({"endpointType": "NatsJetStream", "properties": {"connection": "main", "subject": "orders.created"}})
        );
        assert_eq!(
            create(&["--kafka", "stream/orders", "--kafka-key-from", "subject"]).unwrap(),
            json!({"endpointType": "Kafka", "properties": {
                "connection": "stream", "topic": "orders", "keyFrom": "subject"}})
        );
        assert_eq!(
            create(&["--kafka", "stream/orders", "--kafka-key", "all"]).unwrap()["properties"]["key"],
            "all"
        );
        assert_eq!(
            create(&["--kafka", "stream/orders"]).unwrap(),
            json!({"endpointType": "Kafka", "properties": {"connection": "stream", "topic": "orders"}})
        );
        assert_eq!(
            create(&[
                "--sqs",
                "aws/https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"
            ])
            .unwrap(),
            json!({"endpointType": "AmazonSQS", "properties": {"connection": "aws",
                "queueUrl": "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"}})
        );
        let hub = format!("{PLACEHOLDER_NAMESPACES}contoso-events/eventhubs/orders");
        assert_eq!(
            create(&["--event-hub", "contoso-events/orders"]).unwrap(),
            json!({"endpointType": "EventHub", "properties": {"resourceId": hub}})
        );
        assert_eq!(
            create(&["--event-hub", &hub]).unwrap()["properties"]["resourceId"],
            hub.as_str()
        );
        assert_eq!(
            describe(&json!({"resourceId": hub})),
            "eventhub://contoso-events/orders"
        );
        assert_eq!(
            create(&["--endpoint", "https://h/x"]).unwrap(),
            json!({"endpointType": "WebHook", "properties": {"endpointUrl": "https://h/x"}})
        );
    }

    #[test]
    fn one_destination_at_most_and_each_checked_on_the_command_line() {
        for refused in [
            &["--storage-queue", "queues1/orders", "--endpoint", "https://h/x"][..],
            &["--storage-queue", "queues1/orders", "--nats", "main/a"],
            &["--rabbitmq", "main/events", "--nats", "main/a", "--routing-key", "k"],
            &["--rabbitmq", "main/events"],
            &[
                "--rabbitmq",
                "main/events",
                "--routing-key",
                "k",
                "--routing-key-from",
                "subject",
            ],
            &["--routing-key", "k", "--endpoint", "https://h/x"],
            &["--message-ttl", "60", "--endpoint", "https://h/x"],
            &["--message-ttl", "60", "--nats", "main/a"],
            &["--routing-key-from", "subject", "--storage-queue", "queues1/orders"],
            &["--storage-queue", "orders"],
            &["--nats", "main"],
            &["--kafka", "stream"],
            &["--kafka", "stream/orders", "--nats", "main/a"],
            &[
                "--kafka",
                "stream/orders",
                "--kafka-key",
                "k",
                "--kafka-key-from",
                "subject",
            ],
            &["--kafka-key", "k", "--endpoint", "https://h/x"],
            &["--kafka-key-from", "subject", "--nats", "main/a"],
            &["--kafka", "stream/orders", "--routing-key", "k"],
            &["--queue", "--nats", "main/a"],
            &["--sqs", "aws/orders"],
            &["--sqs", "aws/http://h/1/q", "--nats", "main/a"],
            &["--event-hub", "contoso-events"],
            &["--event-hub", "contoso-events/orders", "--kafka", "stream/orders"],
            &["--file", "f.json", "--storage-queue", "queues1/orders"],
            &[],
        ] {
            assert!(create(refused).is_err(), "{refused:?}");
        }
        let bad = create(&["--storage-queue", "orders"]).unwrap_err();
        assert_eq!(bad.exit_code(), 2, "a usage error");
        assert!(bad.to_string().contains("ACCOUNT/QUEUE"), "{bad}");
    }

    #[test]
    fn show_names_the_destination_by_its_identity() {
        let queue = json!({"resourceId": format!("{PLACEHOLDER_ACCOUNT_ID}queues1"), "queueName": "orders",
            "queueMessageTimeToLiveInSeconds": 300});
        assert_eq!(describe(&queue), "storagequeue://queues1/orders (messages live 300s)");
        let rabbitmq = json!({"connection": "main", "exchange": "events", "routingKeyFrom": "subject"});
        assert_eq!(describe(&rabbitmq), "rabbitmq://main/events (routing key from subject)");
        let nats = json!({"connection": "main", "subject": "orders.created", "maxEventsPerBatch": 1});
        assert_eq!(describe(&nats), "nats://main/orders.created");
        let kafka = json!({"connection": "stream", "topic": "orders", "keyFrom": "data.accountId"});
        assert_eq!(describe(&kafka), "kafka://stream/orders (key from data.accountId)");
        assert_eq!(
            describe(&json!({"connection": "stream", "topic": "orders"})),
            "kafka://stream/orders"
        );
        let sqs = json!({"connection": "aws", "queueUrl": "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"});
        assert_eq!(describe(&sqs), "sqs://aws/123456789012/orders");
        assert_eq!(describe(&json!({"endpointBaseUrl": "https://h/x"})), "https://h/x");
        assert_eq!(describe(&Value::Null), "-", "a queue-mode subscription has none");
    }
}
