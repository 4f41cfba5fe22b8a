//! The event eg publishes when it has written a dead-letter object
//! (behaviour.md#dead-lettering: Event Grid suggests an event subscription on the
//! dead-letter blob storage), shaped like Azure Storage's `Microsoft.Storage.BlobCreated`,
//! so handlers written for Event Grid's storage events read it unchanged. eg-deadletter
//! publishes it, through the ordinary pipeline, to the topic named by
//! `EG__DEADLETTER__NOTIFY_TOPIC`; users subscribe to that topic.
//!
//! The fields, against Event Grid's own event:
//! - `topic` (CloudEvents `source`): the storage account's resource id when the
//!   dead-lettering subscription named one (`StorageBlob` with `resourceId`), as Azure
//!   does; otherwise an eg id of the store ([`source`]): `/deadLetterStores/localDirectory`,
//!   `/deadLetterStores/s3/<connection>`, `/deadLetterStores/azureBlob/<account>`.
//! - `subject`: `/blobServices/default/containers/<container>/blobs/<path>`, the path
//!   inside the container (bucket, for S3; folder of the dead-letter directory, locally).
//! - `id`: derived from the store, container and path ([`notice_id`]), so the same object
//!   announced twice (the notification is at-least-once) carries the same id and a
//!   receiver can drop the second. `data.requestId` is the same id.
//! - `eventTime`: when the write was confirmed.
//! - `data`: `api` `PutBlob`, `contentType` `application/json`, `contentLength`,
//!   `blobType` `BlockBlob`, `url` (for the local directory the `file://` URL of the file,
//!   [`local_file_url`]),
//!   `eTag` when the store returned one, `sequencer` (opaque: the write time as 32 hex
//!   digits; each object is written once), `clientRequestId` (the writer's own id for the
//!   object: its file name without `.json`), `storageDiagnostics.batchId`.
//! - eg's own extra, `data.egDeadLetter`: `topic`, `subscription` (the dead-lettering
//!   subscription), `records` (how many records the object holds) and `store`
//!   (`local`, `azure:<account>`, `s3:<connection>`). Event Grid adds fields to storage
//!   events' data over time, so its consumers and SDK models ignore fields they do not
//!   know; the envelope stays exactly Event Grid's.
//!
//! Loops are refused twice over: a subscription of the notify topic may not have a
//! dead-letter destination ([`check_subscription`], a `400` at the management API), and
//! an object written for such a subscription anyway is not announced ([`is_announced`]).

use crate::api_error::InvalidField;
use crate::event::{AcceptedEvent, EventGridEvent, cloudevents};
use crate::names::TopicName;
use crate::profile::DeliveryProfile;
use crate::render::event_grid_to_cloud_event;
use crate::schema::InputSchema;
use crate::subscription::{DeadLetterStore, Subscription};
use crate::time::UnixMillis;
use crate::topic::Topic;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The event type, as Azure Storage names it.
pub(crate) const BLOB_CREATED: &str = "Microsoft.Storage.BlobCreated";

/// A dead-letter object a store has confirmed, as the notification describes it.
#[derive(Debug, Clone, Copy)]
pub struct WrittenObject<'a> {
    pub store: &'a DeadLetterStore,
    /// The storage account's resource id, when the subscription named one.
    pub account_id: Option<&'a str>,
    /// The container (blob), bucket (S3) or folder under the dead-letter directory.
    pub container: &'a str,
    /// The object's path inside the container, e.g. `BILLING/2026/11/25/16/<guid>.json`.
    pub path: &'a str,
    pub url: &'a str,
    pub content_length: u64,
    /// As the store returned it (quoted, as HTTP and Event Grid write ETags).
    pub etag: Option<&'a str>,
    pub records: usize,
    /// The dead-lettering subscription and its topic, as their owner spelled them.
    pub topic: &'a str,
    pub subscription: &'a str,
}

/// The `BlobCreated` event announcing `object`, confirmed written at `written_at`.
pub fn blob_created(object: &WrittenObject<'_>, written_at: UnixMillis) -> EventGridEvent {
    let id = notice_id(object.store, object.container, object.path);
    let mut data = json!({
        "api": "PutBlob",
        "requestId": id,
        "contentType": "application/json",
        "contentLength": object.content_length,
        "blobType": "BlockBlob",
        "url": object.url,
        "sequencer": format!("{:032x}", written_at.0.max(0)),
        "storageDiagnostics": {"batchId": id},
        "egDeadLetter": {
            "topic": object.topic,
            "subscription": object.subscription,
            "records": object.records,
            "store": object.store.label(),
        },
    });
    if let Some(etag) = object.etag {
        data["eTag"] = json!(etag);
    }
    if let Some(object_id) = object_id(object.path) {
        data["clientRequestId"] = json!(object_id);
    }
    EventGridEvent {
        id,
        topic: source(object.store, object.account_id),
        subject: subject(object.container, object.path),
        event_type: BLOB_CREATED.to_owned(),
        event_time: written_at.to_rfc3339(),
        data: Some(data),
        data_version: String::new(),
        metadata_version: "1".to_owned(),
    }
}

/// The event's `topic` (CloudEvents `source`): the storage account's resource id when
/// known, else eg's id of the store (see the module doc).
pub(crate) fn source(store: &DeadLetterStore, account_id: Option<&str>) -> String {
    match (store, account_id) {
        (DeadLetterStore::AzureBlob { .. }, Some(id)) => id.to_owned(),
        (DeadLetterStore::AzureBlob { account }, None) => format!("/deadLetterStores/azureBlob/{account}"),
        (DeadLetterStore::S3 { connection, .. }, _) => format!("/deadLetterStores/s3/{connection}"),
        (DeadLetterStore::LocalDirectory, _) => "/deadLetterStores/localDirectory".to_owned(),
    }
}

/// `/blobServices/default/containers/<container>/blobs/<path>`, as Azure Storage writes it.
pub fn subject(container: &str, path: &str) -> String {
    format!(
        "/blobServices/default/containers/{container}/blobs/{}",
        path.trim_start_matches('/')
    )
}

/// A UUID derived from where the object is: the same object always gets the same id,
/// two objects never share one.
pub(crate) fn notice_id(store: &DeadLetterStore, container: &str, path: &str) -> String {
    let digest = Sha256::new()
        .chain_update(store.label())
        .chain_update([0])
        .chain_update(container)
        .chain_update([0])
        .chain_update(path)
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid().to_string()
}

/// The `url` of an object in the local directory: the `file://` URL of its absolute
/// path (`None` for a relative path, which names no file on its own).
pub fn local_file_url(absolute_path: &std::path::Path) -> Option<String> {
    url::Url::from_file_path(absolute_path).ok().map(String::from)
}

/// The writer's id for the object: its file name without `.json`.
fn object_id(path: &str) -> Option<&str> {
    path.rsplit('/')
        .next()
        .and_then(|name| name.strip_suffix(".json"))
        .filter(|id| !id.is_empty())
}

/// The topic eg creates for the notifications when it does not exist yet: an Event
/// Grid schema custom topic, like any other.
pub fn notify_topic(name: TopicName) -> Topic {
    Topic {
        name,
        input_schema: InputSchema::EventGridSchema,
        input_mapping: None,
        profile: DeliveryProfile::CustomTopic,
        event_retention_days: None,
        duplicate_window: None,
        archive: None,
    }
}

/// Why the notification cannot be stored on the topic named for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoticeError {
    #[error(
        "topic {topic:?} (EG__DEADLETTER__NOTIFY_TOPIC) takes a custom input schema; dead-letter notifications are Event Grid or CloudEvents events: delete the topic (eg creates it again) or name another"
    )]
    CustomSchemaTopic { topic: String },
    #[error("the notification is not a valid event: {0}")]
    Invalid(InvalidField),
}

/// The notification in the form `topic` stores its events: as is on an Event Grid
/// schema topic, converted on a CloudEvents topic (a namespace topic, which queue
/// subscriptions can pull from). A custom-schema topic cannot take it.
pub fn stored_form(topic: &Topic, event: &EventGridEvent) -> Result<AcceptedEvent, NoticeError> {
    match topic.input_schema {
        InputSchema::EventGridSchema => Ok(event.accepted()),
        InputSchema::CloudEventSchemaV1_0 => {
            let fields = match serde_json::to_value(event) {
                Ok(Value::Object(fields)) => fields,
                _ => serde_json::Map::new(),
            };
            cloudevents::accept(Value::Object(event_grid_to_cloud_event(fields))).map_err(NoticeError::Invalid)
        }
        InputSchema::CustomEventSchema => Err(NoticeError::CustomSchemaTopic {
            topic: topic.name.as_str().to_owned(),
        }),
    }
}

/// Refuses a dead-letter destination on a subscription of the notify topic: its dead
/// letters would be announced on the topic it failed to deliver from, and so on.
pub fn check_subscription(sub: &Subscription, notify_topic: Option<&TopicName>) -> Result<(), InvalidField> {
    if sub.dead_letter.is_none() || notify_topic != Some(&sub.topic) {
        return Ok(());
    }
    Err(InvalidField::new(
        sub.dead_letter_field(),
        format!(
            "topic {:?} carries eg's dead-letter notifications (EG__DEADLETTER__NOTIFY_TOPIC), so its subscriptions cannot dead-letter: each dead letter would be announced on this topic again, a loop; leave the destination out (undeliverable notifications are dropped and counted)",
            sub.topic.as_str()
        ),
    ))
}

/// Whether an object written for a subscription of `dead_lettered_topic` is announced:
/// not when that is the notify topic itself (a subscription from before the topic
/// became the notify topic may still dead-letter).
pub fn is_announced(dead_lettered_topic: &str, notify_topic: &TopicName) -> bool {
    !dead_lettered_topic.eq_ignore_ascii_case(notify_topic.as_str())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const AZURE_ID: &str =
        "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/deadletters";

    fn azure() -> DeadLetterStore {
        DeadLetterStore::AzureBlob {
            account: "deadletters".into(),
        }
    }

    fn written<'a>(store: &'a DeadLetterStore, account_id: Option<&'a str>) -> WrittenObject<'a> {
        WrittenObject {
            store,
            account_id,
            container: "failed",
            path: "BILLING/2026/11/25/16/6f1c2a9e-0000-4000-8000-000000000001.json",
            url: "https://deadletters.blob.core.windows.net/failed/BILLING/2026/11/25/16/6f1c2a9e-0000-4000-8000-000000000001.json",
            content_length: 524,
            etag: Some("\"0x8D4BCC2E4835CD0\""),
            records: 3,
            topic: "Orders",
            subscription: "Billing",
        }
    }

    fn at() -> UnixMillis {
        UnixMillis(1_795_000_000_123)
    }

    #[test]
    fn is_shaped_like_azure_storages_blob_created() {
        let store = azure();
        let event = blob_created(&written(&store, Some(AZURE_ID)), at());
        assert_eq!(event.event_type, "Microsoft.Storage.BlobCreated");
        assert_eq!(event.topic, AZURE_ID);
        assert_eq!(
            event.subject,
            "/blobServices/default/containers/failed/blobs/BILLING/2026/11/25/16/6f1c2a9e-0000-4000-8000-000000000001.json"
        );
        assert_eq!(event.event_time, at().to_rfc3339());
        assert_eq!(event.data_version, "");
        assert_eq!(event.metadata_version, "1");
        let data = event.data.unwrap();
        assert_eq!(data["api"], "PutBlob");
        assert_eq!(data["contentType"], "application/json");
        assert_eq!(data["contentLength"], 524);
        assert_eq!(data["blobType"], "BlockBlob");
        assert_eq!(data["url"], written(&store, None).url);
        assert_eq!(data["eTag"], "\"0x8D4BCC2E4835CD0\"");
        assert_eq!(data["requestId"], event.id);
        assert_eq!(data["clientRequestId"], "6f1c2a9e-0000-4000-8000-000000000001");
        assert_eq!(data["sequencer"].as_str().unwrap().len(), 32);
        assert!(data["storageDiagnostics"].is_object());
        assert_eq!(
            data["egDeadLetter"],
            json!({"topic": "Orders", "subscription": "Billing", "records": 3, "store": "azure:deadletters"})
        );
    }

    #[test]
    fn an_event_grid_publisher_would_send_it_as_is() {
        let store = azure();
        let event = blob_created(&written(&store, Some(AZURE_ID)), at());
        let published = serde_json::to_value(&event).unwrap();
        let reread = EventGridEvent::from_published(published, AZURE_ID).unwrap();
        assert_eq!(reread, event);
    }

    #[test]
    fn the_same_object_gets_the_same_id_and_other_objects_other_ids() {
        let store = azure();
        let object = written(&store, Some(AZURE_ID));
        let first = blob_created(&object, at());
        let again = blob_created(&object, at().plus(std::time::Duration::from_secs(60)));
        assert_eq!(first.id, again.id, "announced twice, the id must not change");
        assert!(uuid::Uuid::parse_str(&first.id).is_ok(), "{}", first.id);
        let other_path = WrittenObject {
            path: "BILLING/2026/11/25/16/other.json",
            ..object
        };
        let other_container = WrittenObject {
            container: "failed2",
            ..object
        };
        let local = DeadLetterStore::LocalDirectory;
        let other_store = WrittenObject {
            store: &local,
            ..object
        };
        for other in [other_path, other_container, other_store] {
            assert_ne!(blob_created(&other, at()).id, first.id, "{other:?}");
        }
    }

    #[test]
    fn a_local_object_is_named_by_its_file_url() {
        let path = std::path::Path::new("/var/lib/eg/dead letters/failed/BILLING/2026/11/25/16/x.json");
        assert_eq!(
            local_file_url(path).as_deref(),
            Some("file:///var/lib/eg/dead%20letters/failed/BILLING/2026/11/25/16/x.json")
        );
        assert_eq!(local_file_url(std::path::Path::new("deadletters/x.json")), None);
    }

    #[test]
    fn the_source_names_the_store() {
        assert_eq!(source(&azure(), Some(AZURE_ID)), AZURE_ID);
        assert_eq!(source(&azure(), None), "/deadLetterStores/azureBlob/deadletters");
        let s3 = DeadLetterStore::S3 {
            connection: "minio".into(),
            key_prefix: String::new(),
            region: None,
            endpoint_url: None,
        };
        assert_eq!(source(&s3, None), "/deadLetterStores/s3/minio");
        assert_eq!(
            source(&DeadLetterStore::LocalDirectory, Some(AZURE_ID)),
            "/deadLetterStores/localDirectory"
        );
    }

    #[test]
    fn without_an_etag_or_a_json_file_name_those_fields_are_left_out() {
        let local = DeadLetterStore::LocalDirectory;
        let object = WrittenObject {
            etag: None,
            path: "BILLING/2026/11/25/16/",
            ..written(&local, None)
        };
        let data = blob_created(&object, at()).data.unwrap();
        assert!(data.get("eTag").is_none(), "{data}");
        assert!(data.get("clientRequestId").is_none(), "{data}");
    }

    fn topic(schema: InputSchema) -> Topic {
        Topic {
            input_schema: schema,
            ..notify_topic(TopicName::parse("dead-letter-events").unwrap())
        }
    }

    #[test]
    fn is_stored_in_the_topics_form() {
        let store = azure();
        let event = blob_created(&written(&store, Some(AZURE_ID)), at());

        let as_event_grid = stored_form(&topic(InputSchema::EventGridSchema), &event).unwrap();
        assert_eq!(as_event_grid.fields()["eventType"], BLOB_CREATED);
        assert_eq!(as_event_grid.subject, event.subject);

        let as_cloud_event = stored_form(&topic(InputSchema::CloudEventSchemaV1_0), &event).unwrap();
        assert_eq!(as_cloud_event.fields()["type"], BLOB_CREATED);
        assert_eq!(as_cloud_event.fields()["source"], AZURE_ID);
        assert_eq!(as_cloud_event.fields()["subject"], event.subject.as_str());
        assert_eq!(as_cloud_event.fields()["data"]["url"], written(&store, None).url);

        let refused = stored_form(&topic(InputSchema::CustomEventSchema), &event).unwrap_err();
        assert!(refused.to_string().contains("dead-letter-events"), "{refused}");
    }

    fn subscription_of(topic: &str, dead_letter: bool) -> Subscription {
        let mut properties = json!({
            "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://example.com/h"}},
        });
        if dead_letter {
            properties["deadLetterDestination"] =
                json!({"endpointType": "LocalDirectory", "properties": {"containerName": "loops"}});
        }
        let topic = notify_topic(TopicName::parse(topic).unwrap());
        Subscription::from_resource(
            &topic,
            crate::SubscriptionName::parse("watch").unwrap(),
            &json!({"properties": properties}),
            UnixMillis(0),
        )
        .unwrap()
    }

    #[test]
    fn a_notify_topic_subscription_cannot_dead_letter() {
        let notify = TopicName::parse("Dead-Letter-Events").unwrap();
        let refused = check_subscription(&subscription_of("dead-letter-events", true), Some(&notify)).unwrap_err();
        assert_eq!(refused.field, "properties.deadLetterDestination");
        assert!(refused.problem.contains("loop"), "{}", refused.problem);

        assert!(check_subscription(&subscription_of("dead-letter-events", false), Some(&notify)).is_ok());
        assert!(check_subscription(&subscription_of("orders", true), Some(&notify)).is_ok());
        assert!(check_subscription(&subscription_of("dead-letter-events", true), None).is_ok());
    }

    #[test]
    fn objects_of_the_notify_topics_own_subscriptions_are_not_announced() {
        let notify = TopicName::parse("dead-letter-events").unwrap();
        assert!(!is_announced("Dead-Letter-Events", &notify));
        assert!(is_announced("orders", &notify));
    }
}
