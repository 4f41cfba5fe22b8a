//! What the run publishes and subscribes: topics in both input schemas, subscriptions
//! with and without batching and filters, and the events. Every filter is described once
//! here, as data: the subscription's JSON is written from it, and the oracle's idea of
//! what matches ([`Filter::matches`]) is computed from it, independently of eg-core.

use serde_json::{Value, json};

/// Event types published (each event gets one at random).
pub const EVENT_TYPES: [&str; 4] = ["Order.Created", "Order.Shipped", "Payment.Made", "Audit.Logged"];
/// The subject's first segment for each event type, in the same order.
const SUBJECT_KINDS: [&str; 4] = ["orders", "orders", "payments", "audit"];
pub const REGIONS: [&str; 3] = ["eu", "us", "apac"];
/// Ordering keys (CloudEvents `partitionkey`); each event gets one at random.
pub const ORDERING_KEYS: u8 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    EventGrid,
    CloudEvents,
}

/// The fields of a published event that filters look at; the id is `ev-<seq>`.
#[derive(Debug, Clone, Copy)]
pub struct EventFacts {
    pub topic: u8,
    pub event_type: u8,
    pub region: u8,
    /// `data.amount`, 0…99.
    pub amount: u8,
    /// The ordering key, `k<n>` in CloudEvents' `partitionkey`.
    pub key: u8,
}

impl EventFacts {
    pub fn random(topic: u8) -> Self {
        Self {
            topic,
            event_type: rand::random_range(0..EVENT_TYPES.len() as u8),
            region: rand::random_range(0..REGIONS.len() as u8),
            amount: rand::random_range(0..100),
            key: rand::random_range(0..ORDERING_KEYS),
        }
    }

    pub fn type_name(&self) -> &'static str {
        EVENT_TYPES[usize::from(self.event_type)]
    }

    pub fn region_name(&self) -> &'static str {
        REGIONS[usize::from(self.region)]
    }

    pub fn subject(&self, seq: u64) -> String {
        format!(
            "/{}/{}/{seq}",
            SUBJECT_KINDS[usize::from(self.event_type)],
            self.region_name()
        )
    }
}

pub fn event_id(seq: u64) -> String {
    format!("ev-{seq}")
}

/// The sequence number of an id this run published, if it is one.
pub fn event_seq(id: &str) -> Option<u64> {
    id.strip_prefix("ev-")?.parse().ok()
}

/// A subscription filter as the scenario means it.
#[derive(Debug, Clone)]
pub enum Filter {
    All,
    /// `includedEventTypes` (exact spelling, so case rules do not matter).
    Types(&'static [&'static str]),
    /// `subjectBeginsWith` (lower case, so case rules do not matter).
    SubjectBeginsWith(&'static str),
    /// Advanced filter `NumberGreaterThan` on `data.amount`.
    AmountAbove(f64),
    /// Advanced filter `StringIn` on `data.region`.
    RegionIn(&'static [&'static str]),
    /// `includedEventTypes` and advanced `NumberLessThan` on `data.amount`, AND-ed.
    TypesAndAmountBelow(&'static [&'static str], f64),
}

impl Filter {
    pub fn matches(&self, facts: &EventFacts, seq: u64) -> bool {
        match self {
            Filter::All => true,
            Filter::Types(types) => types.contains(&facts.type_name()),
            Filter::SubjectBeginsWith(prefix) => facts.subject(seq).starts_with(prefix),
            Filter::AmountAbove(bound) => f64::from(facts.amount) > *bound,
            Filter::RegionIn(regions) => regions.contains(&facts.region_name()),
            Filter::TypesAndAmountBelow(types, bound) => {
                types.contains(&facts.type_name()) && f64::from(facts.amount) < *bound
            }
        }
    }

    fn to_json(&self) -> Option<Value> {
        Some(match self {
            Filter::All => return None,
            Filter::Types(types) => json!({"includedEventTypes": types}),
            Filter::SubjectBeginsWith(prefix) => json!({"subjectBeginsWith": prefix}),
            Filter::AmountAbove(bound) => json!({"advancedFilters": [
                {"operatorType": "NumberGreaterThan", "key": "data.amount", "value": bound}]}),
            Filter::RegionIn(regions) => json!({"advancedFilters": [
                {"operatorType": "StringIn", "key": "data.region", "values": regions}]}),
            Filter::TypesAndAmountBelow(types, bound) => json!({
                "includedEventTypes": types,
                "advancedFilters": [{"operatorType": "NumberLessThan", "key": "data.amount", "value": bound}]}),
        })
    }
}

#[derive(Debug, Clone)]
pub struct SubscriptionSpec {
    /// Unique over the whole run (dead-letter folders are named after it).
    pub name: String,
    pub topic: usize,
    pub filter: Filter,
    pub delivery_schema: Schema,
    pub max_events_per_batch: u32,
    pub max_attempts: u32,
    pub ttl_minutes: u32,
    /// Receivers answer badly this many times as often as the run's failure rate.
    pub failure_factor: f64,
    pub container: String,
    pub destination: Destination,
    pub dead_letter_to: DeadLetterTo,
    /// Delivered in order per CloudEvents `partitionkey` (`orderedDelivery`).
    pub ordered: bool,
    /// `deliveryLimits`: requests per second and burst, shared by every sender.
    pub limit: Option<RateLimit>,
}

/// A subscription's request rate cap.
#[derive(Debug, Clone, Copy)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

/// Where a subscription delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// One of the run's own receivers.
    WebHook,
    /// The run's RabbitMQ exchange, read back from a durable queue bound to it.
    RabbitMq,
    /// The run's JetStream subject, read back from its stream.
    Nats,
    /// The run's Kafka topic (tansu on S3 storage), read back from its partitions.
    Kafka,
    /// The run's SQS queue (moto), read back and emptied.
    Sqs,
}

/// Where a subscription's dead letters go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterTo {
    /// The dead-letter tier's directory (`<run>/deadletters/<container>/…`).
    LocalDirectory,
    /// A blob container of the Azurite account.
    AzureBlob,
}

/// The resource id of the emulator's account, as Event Grid subscriptions name it.
const AZURITE_RESOURCE_ID: &str = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/eg/providers/Microsoft.Storage/storageAccounts/devstoreaccount1";
/// The blob container the Azure Blob dead-lettering subscription writes to.
pub const BLOB_CONTAINER: &str = "dl-blob";
/// The local-directory container the archived topic is archived to.
pub const ARCHIVE_CONTAINER: &str = "topic-archive";
/// The run's RabbitMQ connection name, exchange and routing key.
pub const RABBITMQ_CONNECTION: &str = "main";
pub const RABBITMQ_EXCHANGE: &str = "eg-chaos";
pub const RABBITMQ_ROUTING_KEY: &str = "chaos.events";
/// The run's NATS connection name and the JetStream subject.
pub const NATS_CONNECTION: &str = "events";
pub const NATS_SUBJECT: &str = "eg-chaos.events";
/// The Kafka connection the tiers are given, and the run's topic.
pub const KAFKA_CONNECTION: &str = "stream";
pub const KAFKA_TOPIC: &str = "eg-chaos-events";
/// The Kafka subscription's attempts in flight at once, over every sender.
const KAFKA_IN_FLIGHT: u32 = 16;
/// The SQS connection the tiers are given, and the run's queue.
pub const SQS_CONNECTION: &str = "jobs";
pub const SQS_QUEUE: &str = "eg-chaos-events";
/// The queue's URL in AWS's form, as subscriptions name it: the sender sends to the
/// connection's endpoint (moto), which finds the queue by its account and name.
pub const SQS_QUEUE_URL: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/eg-chaos-events";

/// Which destinations outside eg the scenario takes in (each needs its server).
#[derive(Debug, Clone, Copy)]
pub struct Outside {
    /// A subscription dead-lettering to Azure Blob (Azurite).
    pub blob: bool,
    /// A RabbitMQ, a NATS JetStream and an SQS subscription.
    pub brokers: bool,
    /// A Kafka subscription (with `brokers` only).
    pub kafka: bool,
}

#[derive(Debug, Clone)]
pub struct TopicSpec {
    pub name: String,
    pub schema: Schema,
    /// An Event Grid namespace topic (CloudEvents): it has only queue subscriptions.
    pub namespace: bool,
    /// Archived to the local directory's [`ARCHIVE_CONTAINER`] (docs/archive.md).
    pub archived: bool,
}

/// A queue-mode (pull delivery) subscription of a namespace topic; every event published
/// to its topic is owed to it (no filter).
#[derive(Debug, Clone)]
pub struct QueueSpec {
    /// Unique over the whole run (dead-letter folders are named after it).
    pub name: String,
    pub topic: usize,
    pub max_delivery_count: u32,
    pub lock_seconds: u32,
    /// The dead-letter container; `None`: what ends unacknowledged is dropped.
    pub container: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub topics: Vec<TopicSpec>,
    pub subscriptions: Vec<SubscriptionSpec>,
    pub queues: Vec<QueueSpec>,
}

impl Scenario {
    /// Two Event Grid schema topics and two CloudEvents topics with 20 subscriptions (an
    /// ordered and a rate-limited one on each CloudEvents topic) and those of `outside`;
    /// a topic whose one subscription batches; one namespace topic with two queue
    /// subscriptions.
    pub fn standard(outside: Outside) -> Self {
        let mut topics = vec![
            TopicSpec {
                name: "chaos-eg-a".into(),
                schema: Schema::EventGrid,
                namespace: false,
                archived: false,
            },
            TopicSpec {
                name: "chaos-eg-b".into(),
                schema: Schema::EventGrid,
                namespace: false,
                archived: true,
            },
            TopicSpec {
                name: "chaos-ce-a".into(),
                schema: Schema::CloudEvents,
                namespace: false,
                archived: false,
            },
            TopicSpec {
                name: "chaos-ce-b".into(),
                schema: Schema::CloudEvents,
                namespace: false,
                archived: false,
            },
        ];
        let mut subscriptions = Vec::new();
        for (index, topic) in topics.iter().enumerate() {
            let short = topic.name.trim_start_matches("chaos-");
            let container = format!("dl-{short}");
            let sub =
                |suffix: &str, filter: Filter, schema: Schema, batch: u32, attempts: u32, ttl: u32, factor: f64| {
                    SubscriptionSpec {
                        name: format!("{short}-{suffix}"),
                        topic: index,
                        filter,
                        delivery_schema: schema,
                        max_events_per_batch: batch,
                        max_attempts: attempts,
                        ttl_minutes: ttl,
                        failure_factor: factor,
                        container: container.clone(),
                        destination: Destination::WebHook,
                        dead_letter_to: DeadLetterTo::LocalDirectory,
                        ordered: false,
                        limit: None,
                    }
                };
            match topic.schema {
                Schema::EventGrid => {
                    subscriptions.extend([
                        sub("all", Filter::All, Schema::EventGrid, 1, 3, 1440, 1.0),
                        sub(
                            "orders",
                            Filter::Types(&["Order.Created", "Order.Shipped"]),
                            Schema::EventGrid,
                            10,
                            4,
                            1440,
                            1.0,
                        ),
                        // Fails twice as often: probation, and many dead letters after 2 attempts.
                        sub(
                            "eu-orders",
                            Filter::SubjectBeginsWith("/orders/eu/"),
                            Schema::EventGrid,
                            1,
                            2,
                            1440,
                            2.0,
                        ),
                        // Converted to CloudEvents on delivery.
                        sub("big", Filter::AmountAbove(50.0), Schema::CloudEvents, 5, 3, 1440, 1.0),
                        // Many attempts but a one-minute time-to-live, and an endpoint
                        // that fails most of the time: probation stretches the retries
                        // until the time-to-live runs out.
                        sub(
                            "ttl",
                            Filter::RegionIn(&["us", "apac"]),
                            Schema::EventGrid,
                            3,
                            30,
                            1,
                            2.5,
                        ),
                    ]);
                }
                Schema::CloudEvents => {
                    subscriptions.extend([
                        sub("all", Filter::All, Schema::CloudEvents, 1, 3, 1440, 1.0),
                        // One event per key at a time, in the order eg accepted them,
                        // batched (a batch holds one event per key); many attempts so
                        // a head is mostly retried, not dead-lettered.
                        SubscriptionSpec {
                            ordered: true,
                            ..sub("ordered", Filter::All, Schema::CloudEvents, 4, 30, 1440, 1.0)
                        },
                        // Capped a little above the topic's share of the publish rate:
                        // the cap bites when retries and outages pile deliveries up.
                        SubscriptionSpec {
                            limit: Some(RateLimit {
                                per_second: 20.0,
                                burst: 10,
                            }),
                            ..sub("limited", Filter::All, Schema::CloudEvents, 1, 30, 1440, 1.0)
                        },
                        sub(
                            "payments",
                            Filter::Types(&["Payment.Made"]),
                            Schema::CloudEvents,
                            8,
                            3,
                            1440,
                            1.0,
                        ),
                        sub(
                            "small-orders",
                            Filter::TypesAndAmountBelow(&["Order.Created", "Order.Shipped"], 30.0),
                            Schema::CloudEvents,
                            4,
                            2,
                            1440,
                            2.0,
                        ),
                    ]);
                }
            }
        }
        if outside.blob {
            // Fails twice as often with one attempt: dead letters all through the run,
            // some written while Azurite is stopped.
            subscriptions.push(SubscriptionSpec {
                name: "eg-b-blob".into(),
                topic: 1,
                filter: Filter::Types(&["Order.Created", "Payment.Made"]),
                delivery_schema: Schema::EventGrid,
                max_events_per_batch: 1,
                max_attempts: 1,
                ttl_minutes: 1440,
                failure_factor: 2.0,
                container: BLOB_CONTAINER.into(),
                destination: Destination::WebHook,
                dead_letter_to: DeadLetterTo::AzureBlob,
                ordered: false,
                limit: None,
            });
        }
        if outside.brokers {
            // Enough attempts to outlast a broker restart (3–6 s for RabbitMQ).
            let broker = |name: &str, topic: usize, destination: Destination, schema: Schema| SubscriptionSpec {
                name: name.into(),
                topic,
                filter: Filter::All,
                delivery_schema: schema,
                max_events_per_batch: 1,
                max_attempts: 30,
                ttl_minutes: 1440,
                failure_factor: 0.0,
                container: format!("dl-{}", topics[topic].name.trim_start_matches("chaos-")),
                destination,
                dead_letter_to: DeadLetterTo::LocalDirectory,
                ordered: false,
                limit: None,
            };
            subscriptions.push(broker("ce-b-rabbitmq", 3, Destination::RabbitMq, Schema::CloudEvents));
            subscriptions.push(broker("eg-a-nats", 0, Destination::Nats, Schema::EventGrid));
            if outside.kafka {
                subscriptions.push(broker("eg-b-kafka", 1, Destination::Kafka, Schema::EventGrid));
            }
            subscriptions.push(broker("eg-a-sqs", 0, Destination::Sqs, Schema::EventGrid));
        }
        // A topic whose one subscription batches: each publish's events to it are stored as
        // batch entries (the `Batch` layout), read, sent and settled as one, and split
        // when a killed sender's entry is taken back.
        let batched = topics.len();
        topics.push(TopicSpec {
            name: "chaos-batched".into(),
            schema: Schema::EventGrid,
            namespace: false,
            archived: false,
        });
        subscriptions.push(SubscriptionSpec {
            name: "batched-all".into(),
            topic: batched,
            filter: Filter::All,
            delivery_schema: Schema::EventGrid,
            max_events_per_batch: 10,
            max_attempts: 3,
            ttl_minutes: 1440,
            failure_factor: 1.0,
            container: "dl-batched".into(),
            destination: Destination::WebHook,
            dead_letter_to: DeadLetterTo::LocalDirectory,
            ordered: false,
            limit: None,
        });
        // Pull delivery: a short max delivery count with a dead-letter destination (so
        // max-count and reject dead-letters happen), and the default count without one
        // (so rejects are dropped). The lock is Event Grid's minimum, 60 s.
        let namespace = topics.len();
        topics.push(TopicSpec {
            name: "chaos-ns".into(),
            schema: Schema::CloudEvents,
            namespace: true,
            archived: false,
        });
        let queues = vec![
            QueueSpec {
                name: "ns-q-dl".into(),
                topic: namespace,
                max_delivery_count: 2,
                lock_seconds: 60,
                container: Some("dl-ns".into()),
            },
            QueueSpec {
                name: "ns-q-drop".into(),
                topic: namespace,
                max_delivery_count: 10,
                lock_seconds: 60,
                container: None,
            },
        ];
        Self {
            topics,
            subscriptions,
            queues,
        }
    }

    /// The namespace subscription resource of a queue subscription.
    pub fn queue_body(&self, queue: &QueueSpec) -> Value {
        let mut settings = json!({
            "receiveLockDurationInSeconds": queue.lock_seconds,
            "maxDeliveryCount": queue.max_delivery_count,
            "eventTimeToLive": "P1D",
        });
        if let Some(container) = &queue.container {
            settings["deadLetterDestinationWithResourceIdentity"] = json!({"deadLetterDestination": {
                "endpointType": "StorageBlob", "properties": {"blobContainerName": container}}});
        }
        json!({"properties": {
            "deliveryConfiguration": {"deliveryMode": "Queue", "queue": settings},
            "eventDeliverySchema": "CloudEventSchemaV1_0",
        }})
    }

    /// The queue subscription whose dead-letter folder is `<container>/<FOLDER>`.
    pub fn queue_by_folder(&self, container: &str, folder: &str) -> Option<usize> {
        self.queues
            .iter()
            .position(|q| q.container.as_deref() == Some(container) && q.name.eq_ignore_ascii_case(folder))
    }

    /// The subscription resource for `PUT …/eventSubscriptions/{name}`.
    pub fn subscription_body(&self, sub: &SubscriptionSpec, endpoint_url: &str) -> Value {
        let destination = match sub.destination {
            Destination::WebHook => {
                let mut properties = json!({"endpointUrl": endpoint_url});
                if sub.max_events_per_batch > 1 {
                    properties["maxEventsPerBatch"] = json!(sub.max_events_per_batch);
                }
                json!({"endpointType": "WebHook", "properties": properties})
            }
            Destination::RabbitMq => json!({"endpointType": "RabbitMQ", "properties": {
                "connection": RABBITMQ_CONNECTION, "exchange": RABBITMQ_EXCHANGE, "routingKey": RABBITMQ_ROUTING_KEY}}),
            Destination::Nats => json!({"endpointType": "NatsJetStream", "properties": {
                "connection": NATS_CONNECTION, "subject": NATS_SUBJECT}}),
            Destination::Kafka => json!({"endpointType": "Kafka", "properties": {
                "connection": KAFKA_CONNECTION, "topic": KAFKA_TOPIC, "keyFrom": "subject"}}),
            Destination::Sqs => json!({"endpointType": "AmazonSQS", "properties": {
                "connection": SQS_CONNECTION, "queueUrl": SQS_QUEUE_URL}}),
        };
        let dead_letter = match sub.dead_letter_to {
            DeadLetterTo::LocalDirectory => {
                json!({"endpointType": "LocalDirectory", "properties": {"containerName": sub.container}})
            }
            DeadLetterTo::AzureBlob => json!({"endpointType": "StorageBlob", "properties": {
                "resourceId": AZURITE_RESOURCE_ID, "blobContainerName": sub.container}}),
        };
        let mut properties = json!({
            "destination": destination,
            "eventDeliverySchema": schema_name(sub.delivery_schema),
            "retryPolicy": {"maxDeliveryAttempts": sub.max_attempts, "eventTimeToLiveInMinutes": sub.ttl_minutes},
            "deadLetterDestination": dead_letter,
        });
        if let Some(filter) = sub.filter.to_json() {
            properties["filter"] = filter;
        }
        if sub.ordered {
            properties["orderedDelivery"] = json!({"key": "partitionKey"});
        }
        if let Some(limit) = sub.limit {
            properties["deliveryLimits"] = json!({"requestsPerSecond": limit.per_second, "burst": limit.burst});
        }
        if sub.destination == Destination::Kafka {
            // tansu writes each produce request to S3 (moto): a flood of records in flight
            // times out under the run's 1 s attempt bound, and every timeout costs the
            // producer its epoch. A cap every sender shares keeps the broker's pace.
            properties["deliveryLimits"] = json!({ "maxConcurrentRequests": KAFKA_IN_FLIGHT });
        }
        json!({ "properties": properties })
    }

    pub fn topic_body(&self, topic: &TopicSpec) -> Value {
        if topic.namespace {
            return json!({"properties": {"publisherType": "Custom", "inputSchema": "CloudEventSchemaV1_0",
                "eventRetentionInDays": 1}});
        }
        let mut properties = json!({"inputSchema": schema_name(topic.schema)});
        if topic.archived {
            properties["archive"] = json!({"retentionDays": 1, "destination":
                {"endpointType": "LocalDirectory", "properties": {"containerName": ARCHIVE_CONTAINER}}});
        }
        json!({ "properties": properties })
    }

    /// One published event in its topic's input schema.
    pub fn event_json(&self, seq: u64, facts: &EventFacts) -> Value {
        let data = json!({"amount": facts.amount, "region": facts.region_name(), "seq": seq});
        let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        match self.topics[usize::from(facts.topic)].schema {
            Schema::EventGrid => json!({
                "id": event_id(seq),
                "eventType": facts.type_name(),
                "subject": facts.subject(seq),
                "eventTime": time,
                "dataVersion": "1.0",
                "data": data,
            }),
            Schema::CloudEvents => json!({
                "specversion": "1.0",
                "id": event_id(seq),
                "source": "/eg-chaos",
                "type": facts.type_name(),
                "subject": facts.subject(seq),
                "time": time,
                "datacontenttype": "application/json",
                "partitionkey": format!("k{}", facts.key),
                "data": data,
            }),
        }
    }

    /// Which subscriptions an event is owed to.
    pub fn matching(&self, seq: u64, facts: &EventFacts) -> impl Iterator<Item = usize> + '_ {
        let facts = *facts;
        self.subscriptions
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.topic == usize::from(facts.topic) && s.filter.matches(&facts, seq))
            .map(|(i, _)| i)
    }

    /// The subscription whose dead-letter folder is `<container>/<FOLDER>`.
    pub fn subscription_by_folder(&self, container: &str, folder: &str) -> Option<usize> {
        self.subscriptions
            .iter()
            .position(|s| s.container == container && s.name.eq_ignore_ascii_case(folder))
    }
}

fn schema_name(schema: Schema) -> &'static str {
    match schema {
        Schema::EventGrid => "EventGridSchema",
        Schema::CloudEvents => "CloudEventSchemaV1_0",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_OUTSIDE: Outside = Outside {
        blob: true,
        brokers: true,
        kafka: true,
    };

    #[test]
    fn the_oracle_matches_from_the_scenario_model() {
        let scenario = Scenario::standard(ALL_OUTSIDE);
        let facts = EventFacts {
            topic: 0,
            event_type: 0, // Order.Created
            region: 0,     // eu
            amount: 70,
            key: 0,
        };
        let names: Vec<&str> = scenario
            .matching(7, &facts)
            .map(|i| scenario.subscriptions[i].name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "eg-a-all",
                "eg-a-orders",
                "eg-a-eu-orders",
                "eg-a-big",
                "eg-a-nats",
                "eg-a-sqs"
            ]
        );
        let payment = EventFacts {
            topic: 2,
            event_type: 2,
            region: 2,
            amount: 10,
            key: 0,
        };
        let names: Vec<&str> = scenario
            .matching(8, &payment)
            .map(|i| scenario.subscriptions[i].name.as_str())
            .collect();
        assert_eq!(names, ["ce-a-all", "ce-a-ordered", "ce-a-limited", "ce-a-payments"]);
        assert_eq!(event_seq(&event_id(42)), Some(42));
        assert_eq!(event_seq("other"), None);
    }

    #[test]
    fn subscription_bodies_carry_the_filter_and_the_batch_size() {
        let scenario = Scenario::standard(ALL_OUTSIDE);
        let sub = &scenario.subscriptions[1];
        let body = scenario.subscription_body(sub, "http://127.0.0.1:1/hook/1");
        assert_eq!(body["properties"]["filter"]["includedEventTypes"][1], "Order.Shipped");
        assert_eq!(body["properties"]["destination"]["properties"]["maxEventsPerBatch"], 10);
        assert_eq!(body["properties"]["retryPolicy"]["maxDeliveryAttempts"], 4);
        assert_eq!(scenario.subscription_by_folder("dl-eg-a", "EG-A-ORDERS"), Some(1));
    }

    #[test]
    fn outside_destinations_are_written_as_event_grid_spells_them() {
        let scenario = Scenario::standard(ALL_OUTSIDE);
        let named = |name: &str| {
            let sub = scenario.subscriptions.iter().find(|s| s.name == name).expect(name);
            scenario.subscription_body(sub, "http://127.0.0.1:1/hook/1")["properties"].clone()
        };
        let blob = named("eg-b-blob");
        assert_eq!(blob["deadLetterDestination"]["endpointType"], "StorageBlob");
        assert_eq!(
            blob["deadLetterDestination"]["properties"]["blobContainerName"],
            BLOB_CONTAINER
        );
        let rabbit = named("ce-b-rabbitmq");
        assert_eq!(rabbit["destination"]["endpointType"], "RabbitMQ");
        assert_eq!(rabbit["destination"]["properties"]["exchange"], RABBITMQ_EXCHANGE);
        let nats = named("eg-a-nats");
        assert_eq!(nats["destination"]["properties"]["subject"], NATS_SUBJECT);
        let kafka = named("eg-b-kafka");
        assert_eq!(kafka["destination"]["endpointType"], "Kafka");
        assert_eq!(kafka["destination"]["properties"]["topic"], KAFKA_TOPIC);
        assert_eq!(kafka["deliveryLimits"]["maxConcurrentRequests"], KAFKA_IN_FLIGHT);
        let sqs = named("eg-a-sqs");
        assert_eq!(sqs["destination"]["endpointType"], "AmazonSQS");
        assert_eq!(sqs["destination"]["properties"]["queueUrl"], SQS_QUEUE_URL);
        let ordered = named("ce-a-ordered");
        assert_eq!(ordered["orderedDelivery"]["key"], "partitionKey");
        let limited = named("ce-b-limited");
        assert_eq!(limited["deliveryLimits"]["requestsPerSecond"], 20.0);
        assert_eq!(limited["deliveryLimits"]["burst"], 10);
        let facts = EventFacts {
            key: 42,
            ..EventFacts::random(2)
        };
        assert_eq!(scenario.event_json(1, &facts)["partitionkey"], "k42");
        let without = Scenario::standard(Outside {
            blob: false,
            brokers: false,
            kafka: false,
        });
        assert_eq!(without.subscriptions.len() + 5, scenario.subscriptions.len());
    }
}
