//! Dead-letter notifications against a real Redis: the notifier creates its topic,
//! stores a `BlobCreated` event with one delivery per matching subscription of it
//! (filters apply, a catalog changed under it is re-read), announces the same object
//! with the same id, skips the notify topic's own dead letters, and creates its topic
//! again when an operator deleted it.
#![allow(clippy::unwrap_used)]

use eg_core::storage_event::WrittenObject;
use eg_core::subscription::DeadLetterStore;
use eg_core::{Subscription, SubscriptionName, Topic, TopicName, UnixMillis};
use eg_runtime::dead_letter_notice::{Announced, Notifier};
use eg_store::{Catalog, CatalogCache, Clock, RedisSettings, Store};
use eg_testkit::RedisServer;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const NOTIFY_TOPIC: &str = "dead-letter-events";
const ACCOUNT_ID: &str =
    "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/deadletters";
const PATH: &str = "BILLING/2026/11/25/16/6f1c2a9e-0000-4000-8000-000000000001.json";
const PARTITIONS: u16 = 2;

struct Harness {
    _server: RedisServer,
    store: Store,
    catalog: Catalog,
    cache: Arc<CatalogCache>,
}

impl Harness {
    async fn start() -> Self {
        let server = RedisServer::start();
        let store = Store::connect(&RedisSettings {
            partitions: PARTITIONS,
            pool_size: 4,
            command_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            ..RedisSettings::for_url(server.url())
        })
        .unwrap();
        store.check_layout().await.unwrap();
        store.ensure_groups().await.unwrap();
        let catalog = Catalog::new(store.clone());
        let cache = Arc::new(CatalogCache::load(catalog.clone()).await.unwrap());
        Self {
            _server: server,
            store,
            catalog,
            cache,
        }
    }

    async fn notifier(&self) -> Notifier {
        Notifier::start(
            self.store.clone(),
            self.cache.clone(),
            Clock::default(),
            TopicName::parse(NOTIFY_TOPIC).unwrap(),
        )
        .await
        .unwrap()
    }

    async fn subscribe(&self, topic: &Topic, name: &str, properties: Value) {
        let mut body = json!({"properties": {
            "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "http://127.0.0.1:9/hook"}},
        }});
        body["properties"]
            .as_object_mut()
            .unwrap()
            .extend(properties.as_object().unwrap().clone());
        let sub =
            Subscription::from_resource(topic, SubscriptionName::parse(name).unwrap(), &body, UnixMillis(0)).unwrap();
        self.catalog.put_subscription(&sub, 100).await.unwrap();
    }

    async fn topic(&self, name: &str) -> Option<Topic> {
        self.catalog.get_topic(&TopicName::parse(name).unwrap()).await.unwrap()
    }

    /// Every delivery waiting in the ready streams, with its stored event.
    async fn deliveries(&self) -> Vec<(String, Value)> {
        let mut found = Vec::new();
        for index in 0..PARTITIONS {
            let partition = self.store.keys().partition(index);
            let ready = self
                .store
                .read_ready(&partition, "test", 100, Duration::ZERO)
                .await
                .unwrap();
            for r in ready {
                // The event's only push delivery carries it; others share the event hash.
                let body = match r.carried_body {
                    Some(body) => body,
                    None => self
                        .store
                        .event_bodies(&partition, &[&r.delivery.event_key])
                        .await
                        .unwrap()
                        .remove(0)
                        .unwrap(),
                };
                let event = serde_json::from_str(&body).unwrap();
                found.push((r.delivery.subscription.clone(), event));
            }
        }
        found
    }
}

fn azure() -> DeadLetterStore {
    DeadLetterStore::AzureBlob {
        account: "deadletters".into(),
    }
}

fn object(store: &DeadLetterStore) -> WrittenObject<'_> {
    WrittenObject {
        store,
        account_id: None,
        container: "failed",
        path: PATH,
        url: "http://127.0.0.1:10000/deadletters/failed/BILLING/2026/11/25/16/6f1c2a9e-0000-4000-8000-000000000001.json",
        content_length: 812,
        etag: Some("\"0x8D4BCC2E4835CD0\""),
        records: 2,
        topic: "Orders",
        subscription: "Billing",
    }
}

#[tokio::test]
async fn a_written_object_reaches_the_matching_subscriptions_of_the_notify_topic_as_blob_created() {
    let h = Harness::start().await;
    // The dead-lettering subscription names its account by resource id.
    let orders = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
    h.catalog.put_topic(&orders, ["k1".into(), "k2".into()]).await.unwrap();
    h.subscribe(
        &orders,
        "billing",
        json!({"deadLetterDestination": {"endpointType": "StorageBlob", "properties": {
            "resourceId": ACCOUNT_ID, "blobContainerName": "failed"}}}),
    )
    .await;

    let notifier = h.notifier().await;
    let notify_topic = h.topic(NOTIFY_TOPIC).await.expect("created at start");
    assert_eq!(notify_topic.input_schema, eg_core::InputSchema::EventGridSchema);

    // Subscribed after the notifier's catalog copy was read: the store refuses the stale
    // copy and the event is matched again against these.
    h.subscribe(
        &notify_topic,
        "failed-watch",
        json!({"filter": {"subjectBeginsWith": "/blobServices/default/containers/failed/"}}),
    )
    .await;
    h.subscribe(
        &notify_topic,
        "elsewhere",
        json!({"filter": {"subjectBeginsWith": "/blobServices/default/containers/elsewhere/"}}),
    )
    .await;

    let store = azure();
    let announced = notifier.announce(&object(&store)).await.unwrap();
    assert_eq!(announced, Announced::Stored { deliveries: 1 });

    let deliveries = h.deliveries().await;
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    let (subscription, event) = &deliveries[0];
    assert_eq!(subscription, "failed-watch");
    assert_eq!(event["eventType"], "Microsoft.Storage.BlobCreated");
    assert_eq!(event["topic"], ACCOUNT_ID, "the account as the subscription named it");
    assert_eq!(
        event["subject"],
        format!("/blobServices/default/containers/failed/blobs/{PATH}")
    );
    assert_eq!(event["data"]["url"], object(&store).url);
    assert_eq!(event["data"]["contentLength"], 812);
    assert_eq!(event["data"]["eTag"], "\"0x8D4BCC2E4835CD0\"");
    assert_eq!(event["data"]["egDeadLetter"]["subscription"], "Billing");
    assert_eq!(event["data"]["egDeadLetter"]["records"], 2);

    // Announced again (its records were kept after a failure): the same id.
    notifier.announce(&object(&store)).await.unwrap();
    let again = h.deliveries().await;
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].1["id"], event["id"]);
}

#[tokio::test]
async fn the_notify_topics_own_dead_letters_are_not_announced() {
    let h = Harness::start().await;
    let notifier = h.notifier().await;
    let notify_topic = h.topic(NOTIFY_TOPIC).await.unwrap();
    h.subscribe(&notify_topic, "everything", json!({})).await;
    let store = DeadLetterStore::LocalDirectory;
    let own = WrittenObject {
        topic: "Dead-Letter-Events",
        subscription: "everything",
        ..object(&store)
    };
    assert_eq!(notifier.announce(&own).await.unwrap(), Announced::Skipped);
    assert!(h.deliveries().await.is_empty());
}

#[tokio::test]
async fn a_deleted_notify_topic_is_created_again_and_an_existing_one_kept() {
    let h = Harness::start().await;
    // An operator made it first, as a CloudEvents topic: kept as it is.
    let cloud = Topic::from_resource(
        TopicName::parse(NOTIFY_TOPIC).unwrap(),
        &json!({"properties": {"inputSchema": "CloudEventSchemaV1_0"}}),
    )
    .unwrap();
    h.catalog.put_topic(&cloud, ["k1".into(), "k2".into()]).await.unwrap();
    let notifier = h.notifier().await;
    assert_eq!(h.topic(NOTIFY_TOPIC).await.as_ref(), Some(&cloud));
    h.subscribe(&cloud, "everything", json!({})).await;
    let store = DeadLetterStore::LocalDirectory;
    notifier.announce(&object(&store)).await.unwrap();
    let deliveries = h.deliveries().await;
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    let event = &deliveries[0].1;
    assert_eq!(
        event["type"], "Microsoft.Storage.BlobCreated",
        "stored as a CloudEvent: {event}"
    );
    assert_eq!(event["source"], "/deadLetterStores/localDirectory");

    h.catalog.delete_topic(&cloud.name).await.unwrap();
    let announced = notifier.announce(&object(&store)).await.unwrap();
    assert_eq!(
        announced,
        Announced::Stored { deliveries: 0 },
        "a new topic has no subscriptions"
    );
    let created = h.topic(NOTIFY_TOPIC).await.expect("created again");
    assert_eq!(created.input_schema, eg_core::InputSchema::EventGridSchema);
}
