//! Event schemas end to end (behaviour.md#topics-and-publishing,
//! behaviour.md#a-delivery-attempt, behaviour.md#dead-lettering,
//! behaviour.md#namespace-topics, and the delivery properties of
//! behaviour.md#event-subscriptions): what each kind of topic accepts, what each delivery
//! schema puts on the wire, what a dead-letter record looks like in each form, the
//! namespace-topic profile, and the headers a subscription adds to its deliveries.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, Recorded, System, assert_refused, assert_subscription_refused,
    dead_letter_to, event, json_reply, subscription, wait_successes,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

const CLOUD_EVENT: &str = "application/cloudevents+json; charset=utf-8";
const JSON_UTF8: &str = "application/json; charset=utf-8";

// ----- helpers -----

/// POSTs `body` to the topic's publish endpoint with `content_type`, authenticated by `key`.
async fn publish_as(system: &System, topic: &str, key: &str, content_type: &str, body: &Value) -> (StatusCode, Value) {
    let response = system
        .http()
        .post(format!(
            "{}/topics/{topic}/api/events?api-version=2018-01-01",
            system.ingress_url()
        ))
        .header("content-type", content_type)
        .header("aeg-sas-key", key)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    json_reply(response).await
}

async fn publish_ok_as(system: &System, topic: &str, key: &str, content_type: &str, body: &Value) {
    let (status, answer) = publish_as(system, topic, key, content_type, body).await;
    assert_eq!(status, StatusCode::OK, "publish to {topic}: {answer}");
}

fn keys_of(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// The container and upper-case subscription folders of a dead-letter file's path.
fn dead_letter_folders(path: &Path) -> (String, String) {
    let mut parts = path.iter().map(|p| p.to_string_lossy().into_owned());
    let container = parts.next().unwrap_or_default();
    let subscription = parts.next().unwrap_or_default();
    assert_eq!(
        path.iter().count(),
        7,
        "<container>/<SUB>/Y/M/D/H/<guid>.json: {}",
        path.display()
    );
    (container, subscription)
}

/// The one request a receiver got whose body is the CloudEvent with `id`.
fn cloud_event_request<'a>(received: &'a [Recorded], id: &str) -> &'a Recorded {
    let found: Vec<&Recorded> = received.iter().filter(|r| r.body["id"] == id).collect();
    assert_eq!(
        found.len(),
        1,
        "exactly one request carrying CloudEvent {id}: {:?}",
        received.iter().map(|r| &r.raw_body).collect::<Vec<_>>()
    );
    found[0]
}

fn assert_timestamp(value: &Value, what: &str) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value}"));
    assert!(
        text.len() >= 20 && text.as_bytes()[4] == b'-' && text.as_bytes()[10] == b'T',
        "{what} is not an RFC 3339 timestamp: {text}"
    );
}

// ----- 1. CloudEvents topics -----

/// One CloudEvent as the CloudEvents SDKs send it in structured mode (one object).
fn structured_cloud_event() -> Value {
    json!({
        "specversion": "1.0",
        "id": "ce-single-1",
        "source": "https://contoso.example/orders",
        "type": "Contoso.Orders.Created",
        "subject": "orders/1",
        "time": "2026-01-02T03:04:05.678Z",
        "datacontenttype": "application/json",
        "data": {"orderId": 1, "total": 12.5, "note": "ünïcødé"},
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    })
}

/// A batch exactly as Python's azure-eventgrid sends `CloudEvent`s (a msrest model per
/// event: `None` attributes left out, `bytes` data as `data_base64`, `time` with
/// microseconds, extensions at the top level) and as the .NET SDK sends them.
fn sdk_batch() -> Value {
    json!([
        {
            "id": "9d6e5d02-5f1c-4b1e-9a0b-3f8b8a4e6c21",
            "source": "/sdk/python/orders",
            "data_base64": "aGVsbG8gZXZlbnQgZ3JpZA==",
            "type": "Contoso.Orders.Blob",
            "time": "2026-01-02T03:04:05.123456Z",
            "specversion": "1.0",
            "datacontenttype": "application/octet-stream",
            "subject": "orders/blob/7",
            "partitionkey": "eu-1"
        },
        {
            "id": "b2c7f3a4-8d9e-4f10-a1b2-c3d4e5f60718",
            "source": "/sdk/dotnet/orders",
            "type": "Contoso.Orders.Created",
            "data": {"orderId": 7, "lines": [{"sku": "a-1", "qty": 2}]},
            "time": "2026-01-02T03:04:05.1234567+00:00",
            "specversion": "1.0",
            "dataschema": "https://schemas.contoso.example/order.json",
            "datacontenttype": "application/json",
            "sampled": true,
            "priority": 3
        }
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_events_topic_takes_what_the_azure_sdks_send_and_delivers_it_unchanged() {
    let system = System::start(Options::default()).await;
    let consumer = Receiver::start(Behaviour::Status(200)).await;
    let batched = Receiver::start(Behaviour::Status(200)).await;
    let failing = Receiver::start(Behaviour::Status(500)).await;
    let topic = "ce-orders";
    let key = system
        .create_topic_with(topic, json!({"inputSchema": "CloudEventSchemaV1_0"}))
        .await;
    let (_, shown) = system.get(&format!("/topics/{topic}")).await;
    assert_eq!(shown["properties"]["inputSchema"], "CloudEventSchemaV1_0", "{shown}");

    // A CloudEvents topic delivers CloudEvents only (the schema table of
    // behaviour.md#topics-and-publishing).
    for schema in ["EventGridSchema", "CustomInputSchema"] {
        let body = subscription(consumer.url(), json!({"eventDeliverySchema": schema}));
        assert_subscription_refused(&system, topic, "Wrong", &body, "properties.eventDeliverySchema").await;
    }
    let (status, wrong) = system.get(&format!("/topics/{topic}/eventSubscriptions/Wrong")).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a refused subscription was stored: {wrong}"
    );

    // No eventDeliverySchema: the topic's own schema.
    let created = system
        .create_subscription(topic, "Consumer", subscription(consumer.url(), json!({})))
        .await;
    assert_eq!(
        created["properties"]["eventDeliverySchema"], "CloudEventSchemaV1_0",
        "{created}"
    );
    let failing_body = subscription(
        failing.url(),
        json!({
            "eventDeliverySchema": "CloudEventSchemaV1_0",
            "filter": {"includedEventTypes": ["Contoso.Orders.Blob"]},
            "retryPolicy": {"maxDeliveryAttempts": 2, "eventTimeToLiveInMinutes": 5},
            "deadLetterDestination": dead_letter_to("ce-dead"),
        }),
    );
    system.create_subscription(topic, "Failing", failing_body).await;
    let batched_body = subscription(
        batched.url(),
        json!({"destination": {"endpointType": "WebHook", "properties": {
            "endpointUrl": batched.url(), "maxEventsPerBatch": 10}}}),
    );
    system.create_subscription(topic, "Batched", batched_body).await;

    // Refused publishes, each naming the event and the attribute; none stores anything.
    let mut missing_source = sdk_batch();
    missing_source[1].as_object_mut().unwrap().remove("source");
    missing_source[0]["id"] = json!("refused-batch-0");
    let batch_type = "application/cloudevents-batch+json; charset=utf-8";
    let (status, answer) = publish_as(&system, topic, &key, batch_type, &missing_source).await;
    assert_refused(status, &answer, "events[1].source");
    let mut no_type = structured_cloud_event();
    no_type.as_object_mut().unwrap().remove("type");
    let (status, answer) = publish_as(&system, topic, &key, "application/cloudevents+json", &no_type).await;
    assert_refused(status, &answer, "events[0].type");
    let mut old_version = sdk_batch();
    old_version[0]["specversion"] = json!("0.3");
    let (status, answer) = publish_as(&system, topic, &key, batch_type, &old_version).await;
    assert_refused(status, &answer, "events[0].specversion");
    let mut no_id = sdk_batch();
    no_id[1].as_object_mut().unwrap().remove("id");
    let (status, answer) = publish_as(&system, topic, &key, batch_type, &no_id).await;
    assert_refused(status, &answer, "events[1].id");
    let mut both_data = sdk_batch();
    both_data[0]["data"] = json!({"a": 1});
    let (status, answer) = publish_as(&system, topic, &key, batch_type, &both_data).await;
    assert_refused(status, &answer, "events[0].data_base64");
    let mut bad_extension = sdk_batch();
    bad_extension[1]["PartitionKey"] = json!("eu");
    let (status, answer) = publish_as(&system, topic, &key, batch_type, &bad_extension).await;
    assert_refused(status, &answer, "events[1].PartitionKey");
    let mut bad_time = structured_cloud_event();
    bad_time["time"] = json!("2026-01-02 03:04");
    let (status, answer) = publish_as(&system, topic, &key, "application/cloudevents+json", &bad_time).await;
    assert_refused(status, &answer, "events[0].time");
    // One event's content type with an array.
    let (status, answer) = publish_as(&system, topic, &key, "application/cloudevents+json", &sdk_batch()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    // Event Grid events on a CloudEvents topic: refused, saying what is missing.
    let event_grid = json!([event("eg-on-ce", "Order.Created", "/orders/1", json!({"a": 1}))]);
    let (status, answer) = publish_as(&system, topic, &key, "application/json", &event_grid).await;
    let message = assert_refused(status, &answer, "events[0].specversion");
    assert!(message.contains("required"), "{message}");
    let (status, answer) = publish_as(&system, topic, &key, batch_type, &event_grid).await;
    assert_refused(status, &answer, "events[0].specversion");
    // ... and CloudEvents on an Event Grid topic, saying which topics take them.
    let plain_key = system
        .create_topic_with("plain", json!({"inputSchema": "EventGridSchema"}))
        .await;
    let (status, answer) = publish_as(&system, "plain", &plain_key, batch_type, &sdk_batch()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("CloudEventSchemaV1_0"), "{message}");

    // What the SDKs send is accepted.
    publish_ok_as(
        &system,
        topic,
        &key,
        "application/cloudevents+json",
        &structured_cloud_event(),
    )
    .await;
    publish_ok_as(&system, topic, &key, batch_type, &sdk_batch()).await;

    // Consumer gets every event, one per request, each as the object published.
    wait_successes(&system, topic, 6.0).await;
    let received = consumer.received();
    assert_eq!(received.len(), 3, "{received:?}");
    let published = [structured_cloud_event(), sdk_batch()[0].clone(), sdk_batch()[1].clone()];
    for sent in &published {
        let request = cloud_event_request(&received, sent["id"].as_str().unwrap());
        assert_eq!(&request.body, sent, "delivered differently from what was published");
        assert_eq!(request.header("content-type"), Some(CLOUD_EVENT));
        assert_eq!(request.header("aeg-event-type"), Some("Notification"));
        assert_eq!(request.header("aeg-subscription-name"), Some("CONSUMER"));
        assert_eq!(request.header("aeg-delivery-count"), Some("0"));
        assert_eq!(request.header("aeg-metadata-version"), Some("1"));
        assert_eq!(request.header("aeg-data-version"), None, "Event Grid schema only");
    }
    // All or nothing: the refused batch's valid first event went nowhere.
    assert_eq!(
        system.matched_events(topic).await,
        7.0,
        "3 to Consumer, 1 to Failing, 3 to Batched"
    );

    // With batching on, however the events were grouped: one event is an object sent
    // as application/cloudevents+json, several are an array sent as
    // application/cloudevents-batch+json.
    let mut batched_ids = Vec::new();
    for request in batched.received() {
        match &request.body {
            Value::Array(events) => {
                assert!(
                    events.len() >= 2,
                    "a batch of one should be sent as an object: {}",
                    request.raw_body
                );
                assert_eq!(
                    request.header("content-type"),
                    Some("application/cloudevents-batch+json; charset=utf-8")
                );
                batched_ids.extend(events.iter().map(|e| e["id"].as_str().unwrap().to_owned()));
            }
            Value::Object(_) => {
                assert_eq!(request.header("content-type"), Some(CLOUD_EVENT));
                batched_ids.push(request.body["id"].as_str().unwrap().to_owned());
            }
            other => panic!("neither a CloudEvent nor a batch: {other}"),
        }
    }
    batched_ids.sort();
    let mut published_ids: Vec<String> = published.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    published_ids.sort();
    assert_eq!(batched_ids, published_ids, "each event once");

    // Failing dead-letters the Blob event after two attempts, as a CloudEvent with the
    // dead-letter attributes in lower case beside its own.
    let records = system.wait_dead_letters(1, DEADLINE).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        dead_letter_folders(&records[0].path),
        ("ce-dead".to_owned(), "FAILING".to_owned())
    );
    let record = &records[0].record;
    let sent = &sdk_batch()[0];
    for (name, value) in sent.as_object().unwrap() {
        assert_eq!(
            &record[name], value,
            "attribute {name} of the dead-lettered CloudEvent: {record}"
        );
    }
    let mut expected = keys_of(sent);
    expected.extend(set(&[
        "deadletterreason",
        "deliveryattempts",
        "lastdeliveryoutcome",
        "lasthttpstatuscode",
        "publishtime",
        "lastdeliveryattempttime",
    ]));
    assert_eq!(keys_of(record), expected, "{record}");
    assert_eq!(record["deadletterreason"], "MaxDeliveryAttemptsExceeded");
    assert_eq!(record["deliveryattempts"], 2);
    assert_eq!(record["lastdeliveryoutcome"], "GenericError");
    assert_eq!(record["lasthttpstatuscode"], 500);
    assert_timestamp(&record["publishtime"], "publishtime");
    assert_timestamp(&record["lastdeliveryattempttime"], "lastdeliveryattempttime");
    let attempts = failing.received();
    assert_eq!(attempts.len(), 2, "maxDeliveryAttempts 2");
    for (i, request) in attempts.iter().enumerate() {
        assert_eq!(&request.body, sent);
        assert_eq!(request.header("aeg-delivery-count"), Some(i.to_string().as_str()));
    }
}

// ----- 2. Custom input schema -----

fn order_mapping() -> Value {
    json!({
        "inputSchemaMappingType": "Json",
        "properties": {
            "id": {"sourceField": "orderNumber"},
            "eventTime": {"sourceField": "placedAt"},
            "eventType": {"sourceField": "kind", "defaultValue": "Order.Unknown"},
            "subject": {"sourceField": "where.path", "defaultValue": "/orders"},
            "dataVersion": {"defaultValue": "2.0"}
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_schema_topic_maps_fields_and_delivers_in_every_schema() {
    let system = System::start(Options::default()).await;

    // Invalid mappings are refused at topic creation, naming the field.
    for (properties, field) in [
        (
            json!({"inputSchema": "CustomEventSchema"}),
            "properties.inputSchemaMapping",
        ),
        (
            json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": {
                "inputSchemaMappingType": "Json",
                "properties": {"eventType": {"defaultValue": ""}}}}),
            "properties.inputSchemaMapping.properties.eventType.defaultValue",
        ),
        (
            json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": {
                "inputSchemaMappingType": "Json",
                "properties": {"colour": {"sourceField": "c"}}}}),
            "properties.inputSchemaMapping.properties.colour",
        ),
        (
            json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": {
                "inputSchemaMappingType": "Json",
                "properties": {"id": {"sourceField": "n", "defaultValue": "x"}}}}),
            "properties.inputSchemaMapping.properties.id.defaultValue",
        ),
        (
            json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": {
                "inputSchemaMappingType": "Xml", "properties": {}}}),
            "properties.inputSchemaMapping.inputSchemaMappingType",
        ),
        (
            json!({"inputSchema": "EventGridSchema", "inputSchemaMapping": order_mapping()}),
            "properties.inputSchemaMapping",
        ),
    ] {
        let (status, answer) = system.put_topic("badmap", &json!({ "properties": properties })).await;
        assert_refused(status, &answer, field);
    }
    let (status, _) = system.get("/topics/badmap").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a refused topic was stored");

    let topic = "shop";
    let key = system
        .create_topic_with(
            topic,
            json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": order_mapping()}),
        )
        .await;
    let (_, shown) = system.get(&format!("/topics/{topic}")).await;
    assert_eq!(shown["properties"]["inputSchemaMapping"], order_mapping(), "{shown}");

    let as_event_grid = Receiver::start(Behaviour::Status(200)).await;
    let as_cloud = Receiver::start(Behaviour::Status(200)).await;
    let as_is = Receiver::start(Behaviour::Status(200)).await;
    let rejecting = Receiver::start(Behaviour::Status(400)).await;
    for (name, receiver, extra) in [
        (
            "AsEventGrid",
            &as_event_grid,
            json!({"eventDeliverySchema": "EventGridSchema"}),
        ),
        (
            "AsCloud",
            &as_cloud,
            json!({"eventDeliverySchema": "CloudEventSchemaV1_0"}),
        ),
        ("AsIs", &as_is, json!({})),
        (
            "Rejecting",
            &rejecting,
            json!({
                "eventDeliverySchema": "CustomInputSchema",
                "filter": {"includedEventTypes": ["Order.Placed"]},
                "deadLetterDestination": dead_letter_to("custom-dead"),
            }),
        ),
    ] {
        let created = system
            .create_subscription(topic, name, subscription(receiver.url(), extra))
            .await;
        if name == "AsIs" {
            assert_eq!(
                created["properties"]["eventDeliverySchema"], "CustomInputSchema",
                "{created}"
            );
        }
    }

    let placed = json!({
        "orderNumber": "o-1", "placedAt": "2026-01-02T03:04:05.678Z", "kind": "Order.Placed",
        "where": {"path": "/orders/1", "region": "eu"}, "total": 12.5, "lines": [{"sku": "a", "qty": 1}]
    });
    // No kind and no where.path: the defaults.
    let bare = json!({"orderNumber": "o-2", "placedAt": "2026-01-02T04:05:06Z", "total": 3});

    // Objects the mapping cannot read are refused, at the object's own field.
    let mut no_number = bare.clone();
    no_number.as_object_mut().unwrap().remove("orderNumber");
    let (status, answer) = publish_as(&system, topic, &key, "application/json", &json!([placed, no_number])).await;
    assert_refused(status, &answer, "events[1].orderNumber");
    let mut bad_time = bare.clone();
    bad_time["placedAt"] = json!("yesterday");
    let (status, answer) = publish_as(&system, topic, &key, "application/json", &json!([bad_time])).await;
    assert_refused(status, &answer, "events[0].placedAt");
    let mut numeric_kind = bare.clone();
    numeric_kind["kind"] = json!(7);
    let (status, answer) = publish_as(&system, topic, &key, "application/json", &json!([numeric_kind])).await;
    assert_refused(status, &answer, "events[0].kind");
    let cloud_event = json!([{"specversion": "1.0", "id": "c", "source": "/s", "type": "T"}]);
    let (status, answer) = publish_as(&system, topic, &key, "application/cloudevents-batch+json", &cloud_event).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("CloudEventSchemaV1_0"), "{message}");

    publish_ok_as(&system, topic, &key, "application/json", &json!([placed, bare])).await;
    wait_successes(&system, topic, 6.0).await;
    assert_eq!(
        system.matched_events(topic).await,
        7.0,
        "2 each to three subscriptions, 1 to Rejecting"
    );

    // EventGridSchema: the envelope built by the mapping, the whole object in `data`.
    let received = as_event_grid.received();
    assert_eq!(received.len(), 2);
    let envelopes: Vec<(&Recorded, &Value)> = received
        .iter()
        .map(|r| {
            let events = r
                .body
                .as_array()
                .unwrap_or_else(|| panic!("not an array: {}", r.raw_body));
            assert_eq!(events.len(), 1, "{}", r.raw_body);
            (r, &events[0])
        })
        .collect();
    let envelope_of = |id: &str| {
        *envelopes
            .iter()
            .find(|(_, e)| e["id"] == id)
            .unwrap_or_else(|| panic!("no event {id} delivered"))
    };
    let (request, first) = envelope_of("o-1");
    assert_eq!(
        *first,
        json!({
            "id": "o-1", "topic": "/topics/shop", "subject": "/orders/1", "eventType": "Order.Placed",
            "eventTime": "2026-01-02T03:04:05.678Z", "dataVersion": "2.0", "metadataVersion": "1", "data": placed
        })
    );
    assert_eq!(request.header("content-type"), Some(JSON_UTF8));
    assert_eq!(request.header("aeg-data-version"), Some("2.0"));
    let (_, second) = envelope_of("o-2");
    assert_eq!(second["eventType"], "Order.Unknown", "eventType's defaultValue");
    assert_eq!(second["subject"], "/orders", "subject's defaultValue");
    assert_eq!(second["eventTime"], "2026-01-02T04:05:06Z");
    assert_eq!(second["data"], bare);

    // CloudEventSchemaV1_0: converted from the envelope.
    let received = as_cloud.received();
    assert_eq!(received.len(), 2);
    let request = cloud_event_request(&received, "o-1");
    assert_eq!(request.header("content-type"), Some(CLOUD_EVENT));
    assert_eq!(
        request.body,
        json!({
            "specversion": "1.0", "id": "o-1", "source": "/topics/shop", "type": "Order.Placed",
            "subject": "/orders/1", "time": "2026-01-02T03:04:05.678Z", "dataversion": "2.0",
            "datacontenttype": "application/json", "data": placed
        })
    );
    let request = cloud_event_request(&received, "o-2");
    assert_eq!(request.body["type"], "Order.Unknown");
    assert_eq!(request.body["data"], bare);

    // CustomInputSchema: the objects as published, each in a JSON array.
    let received = as_is.received();
    assert_eq!(received.len(), 2);
    let mut bodies: Vec<Value> = received.iter().map(|r| r.body.clone()).collect();
    bodies.sort_by_key(|b| b[0]["orderNumber"].as_str().map(str::to_owned));
    assert_eq!(bodies, [json!([placed]), json!([bare])]);
    for request in &received {
        assert_eq!(request.header("content-type"), Some(JSON_UTF8));
        assert_eq!(request.header("aeg-subscription-name"), Some("ASIS"));
        assert_eq!(request.header("aeg-data-version"), None, "Event Grid schema only");
    }

    // Dead-lettered from a custom delivery: the Event Grid envelope with the object in `data`.
    let records = system.wait_dead_letters(1, DEADLINE).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        dead_letter_folders(&records[0].path),
        ("custom-dead".to_owned(), "REJECTING".to_owned())
    );
    let record = &records[0].record;
    assert_eq!(
        keys_of(record),
        set(&[
            "id",
            "topic",
            "subject",
            "eventType",
            "eventTime",
            "dataVersion",
            "metadataVersion",
            "data",
            "deadLetterReason",
            "deliveryAttempts",
            "lastDeliveryOutcome",
            "lastHttpStatusCode",
            "publishTime",
            "lastDeliveryAttemptTime",
        ]),
        "{record}"
    );
    assert_eq!(record["id"], "o-1");
    assert_eq!(record["topic"], "/topics/shop");
    assert_eq!(record["subject"], "/orders/1");
    assert_eq!(record["eventType"], "Order.Placed");
    assert_eq!(record["dataVersion"], "2.0");
    assert_eq!(record["metadataVersion"], "1");
    assert_eq!(record["data"], placed);
    assert_eq!(record["deadLetterReason"], "NonRetriableFailure");
    assert_eq!(record["deliveryAttempts"], 1);
    assert_eq!(record["lastDeliveryOutcome"], "BadRequest");
    assert_eq!(record["lastHttpStatusCode"], 400);
    assert_eq!(
        rejecting.received()[0].body,
        json!([placed]),
        "Rejecting was sent the object"
    );
}

// ----- 3. Event Grid topics delivered as CloudEvents; Event Grid dead-letters -----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_grid_topic_delivers_converted_cloud_events_and_dead_letters_in_both_forms() {
    let system = System::start(Options::default()).await;
    let as_cloud = Receiver::start(Behaviour::Status(200)).await;
    let rejecting = Receiver::start(Behaviour::Status(400)).await;
    let cloud_rejecting = Receiver::start(Behaviour::Status(400)).await;
    let topic = "legacy";
    system.create_topic(topic).await;

    let body = subscription(as_cloud.url(), json!({"eventDeliverySchema": "CustomInputSchema"}));
    assert_subscription_refused(&system, topic, "Custom", &body, "properties.eventDeliverySchema").await;
    let body = subscription(as_cloud.url(), json!({"eventDeliverySchema": "Avro"}));
    assert_subscription_refused(&system, topic, "Custom", &body, "properties.eventDeliverySchema").await;

    let cloud = json!({"eventDeliverySchema": "CloudEventSchemaV1_0"});
    system
        .create_subscription(topic, "AsCloud", subscription(as_cloud.url(), cloud))
        .await;
    let body = subscription(
        rejecting.url(),
        json!({"deadLetterDestination": dead_letter_to("eg-dead")}),
    );
    system.create_subscription(topic, "Rejecting", body).await;
    let body = subscription(
        cloud_rejecting.url(),
        json!({"eventDeliverySchema": "CloudEventSchemaV1_0", "deadLetterDestination": dead_letter_to("ce-dead")}),
    );
    system.create_subscription(topic, "CloudRejecting", body).await;

    let data = json!({"orderId": 9, "carrier": "dhl"});
    let mut published = event("legacy-1", "Order.Shipped", "/orders/9", data.clone());
    published["dataVersion"] = json!("3.1");
    system.publish_ok(topic, &json!([published])).await;

    let converted = json!({
        "specversion": "1.0", "id": "legacy-1", "source": "/topics/legacy", "type": "Order.Shipped",
        "subject": "/orders/9", "time": "2026-01-02T03:04:05.678Z", "dataversion": "3.1",
        "datacontenttype": "application/json", "data": data
    });
    let received = as_cloud.wait_for(1, DEADLINE).await;
    let request = &received[0];
    assert_eq!(request.body, converted, "{}", request.raw_body);
    assert_eq!(request.header("content-type"), Some(CLOUD_EVENT));
    assert_eq!(request.header("aeg-subscription-name"), Some("ASCLOUD"));
    assert_eq!(request.header("aeg-data-version"), None, "Event Grid schema only");

    let records = system.wait_dead_letters(2, DEADLINE).await;
    assert_eq!(records.len(), 2, "{records:?}");
    let by_container = |container: &str| {
        records
            .iter()
            .find(|r| r.path.starts_with(container))
            .unwrap_or_else(|| panic!("no record in {container}: {records:?}"))
    };

    // Event Grid form: the event's fields and the camelCase dead-letter fields.
    let dead = by_container("eg-dead");
    assert_eq!(dead_letter_folders(&dead.path).1, "REJECTING");
    let record = &dead.record;
    assert_eq!(
        keys_of(record),
        set(&[
            "id",
            "topic",
            "subject",
            "eventType",
            "eventTime",
            "data",
            "dataVersion",
            "metadataVersion",
            "deadLetterReason",
            "deliveryAttempts",
            "lastDeliveryOutcome",
            "lastHttpStatusCode",
            "publishTime",
            "lastDeliveryAttemptTime",
        ]),
        "{record}"
    );
    assert_eq!(record["id"], "legacy-1");
    assert_eq!(record["topic"], "/topics/legacy");
    assert_eq!(record["dataVersion"], "3.1");
    assert_eq!(record["data"], data);
    assert_eq!(record["deadLetterReason"], "NonRetriableFailure");
    assert_eq!(record["deliveryAttempts"], 1);
    assert_eq!(record["lastDeliveryOutcome"], "BadRequest");
    assert_eq!(record["lastHttpStatusCode"], 400);
    assert_timestamp(&record["publishTime"], "publishTime");
    assert_timestamp(&record["lastDeliveryAttemptTime"], "lastDeliveryAttemptTime");

    // CloudEvents form: the CloudEvent the subscription was sent, lower-case fields.
    let dead = by_container("ce-dead");
    assert_eq!(dead_letter_folders(&dead.path).1, "CLOUDREJECTING");
    let record = &dead.record;
    assert_eq!(cloud_rejecting.received()[0].body, converted);
    for (name, value) in converted.as_object().unwrap() {
        assert_eq!(&record[name], value, "attribute {name}: {record}");
    }
    assert_eq!(record["deadletterreason"], "NonRetriableFailure");
    assert_eq!(record["deliveryattempts"], 1);
    assert_eq!(record["lastdeliveryoutcome"], "BadRequest");
    assert_eq!(record["lasthttpstatuscode"], 400);
    assert_timestamp(&record["publishtime"], "publishtime");
    assert_timestamp(&record["lastdeliveryattempttime"], "lastdeliveryattempttime");
    assert!(record.get("deadLetterReason").is_none(), "{record}");
    assert_eq!(rejecting.count() + cloud_rejecting.count(), 2, "a 400 was retried");
}

// ----- 5. The namespace-topic profile (and its dead-letter form, 4) -----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_topic_retries_by_its_own_policy_and_dead_letters_in_its_own_form() {
    let system = System::start(Options::default().env("EG__NAMESPACE__RETRY_SCHEDULE", "1s")).await;
    let failing = Receiver::start(Behaviour::Status(500)).await;
    let gone = Receiver::start(Behaviour::Status(404)).await;
    // Answers after the 2 s delivery timeout of the harness.
    let slow = Receiver::start(Behaviour::SlowFirst(Duration::from_secs(4))).await;
    let closing = Receiver::start(Behaviour::Status(200)).await;
    let topic = "ns-orders";

    // A namespace topic takes CloudEvents only.
    let (status, answer) = system
        .put_topic(
            topic,
            &json!({"properties": {"inputSchema": "EventGridSchema", "deliveryProfile": "NamespaceTopic"}}),
        )
        .await;
    assert_refused(status, &answer, "properties.deliveryProfile");
    let key = system
        .create_topic_with(
            topic,
            json!({"inputSchema": "CloudEventSchemaV1_0", "deliveryProfile": "NamespaceTopic"}),
        )
        .await;

    // Its limits: maxDeliveryCount 1-10, eventTimeToLive PT1M-P7D, CloudEvents delivery.
    let policy = |count: Value, ttl: &str| {
        subscription(
            failing.url(),
            json!({"retryPolicy": {"maxDeliveryCount": count, "eventTimeToLive": ttl}}),
        )
    };
    for (body, field) in [
        (policy(json!(11), "PT1M"), "properties.retryPolicy.maxDeliveryCount"),
        (policy(json!(0), "PT1M"), "properties.retryPolicy.maxDeliveryCount"),
        (policy(json!(2), "P8D"), "properties.retryPolicy.eventTimeToLive"),
        (policy(json!(2), "PT30S"), "properties.retryPolicy.eventTimeToLive"),
        (policy(json!(2), "one minute"), "properties.retryPolicy.eventTimeToLive"),
        (
            subscription(failing.url(), json!({"retryPolicy": {"maxDeliveryAttempts": 2}})),
            "properties.retryPolicy.maxDeliveryAttempts",
        ),
        (
            subscription(failing.url(), json!({"eventDeliverySchema": "EventGridSchema"})),
            "properties.eventDeliverySchema",
        ),
    ] {
        assert_subscription_refused(&system, topic, "Refused", &body, field).await;
    }

    let retrying = json!({
        "filter": {"includedEventTypes": ["Contoso.Retry"]},
        "retryPolicy": {"maxDeliveryCount": 2, "eventTimeToLive": "PT1M"},
        "deadLetterDestination": dead_letter_to("ns-dead"),
    });
    let shown = system
        .create_subscription(topic, "Retrying", subscription(failing.url(), retrying))
        .await;
    assert_eq!(
        shown["properties"]["retryPolicy"],
        json!({"maxDeliveryCount": 2, "eventTimeToLive": "PT1M"}),
        "{shown}"
    );
    assert_eq!(
        shown["properties"]["eventDeliverySchema"], "CloudEventSchemaV1_0",
        "{shown}"
    );
    let not_found = json!({
        "filter": {"includedEventTypes": ["Contoso.Gone"]},
        "deadLetterDestination": dead_letter_to("ns-dead"),
    });
    system
        .create_subscription(topic, "Gone", subscription(gone.url(), not_found))
        .await;
    for (name, receiver, event_type) in [("Slow", &slow, "Contoso.Slow"), ("Closed", &closing, "Contoso.Closed")] {
        let body = json!({
            "filter": {"includedEventTypes": [event_type]},
            "deadLetterDestination": dead_letter_to("ns-dead"),
        });
        system
            .create_subscription(topic, name, subscription(receiver.url(), body))
            .await;
    }
    // Nothing listens there any more: connection refused.
    let _closed = closing.close_refusing().await;

    let retry_event = json!({
        "specversion": "1.0", "id": "ns-1", "source": "/contoso/orders", "type": "Contoso.Retry",
        "time": "2026-01-02T03:04:05Z", "data": {"n": 1}, "tenant": "t-1"
    });
    let gone_event = json!({
        "specversion": "1.0", "id": "ns-2", "source": "/contoso/orders", "type": "Contoso.Gone",
        "data_base64": "AAEC"
    });
    let simple = |id: &str, event_type: &str| json!({"specversion": "1.0", "id": id, "source": "/contoso/orders", "type": event_type});
    let batch = json!([
        retry_event,
        gone_event,
        simple("ns-3", "Contoso.Slow"),
        simple("ns-4", "Contoso.Closed")
    ]);
    publish_ok_as(
        &system,
        topic,
        &key,
        "application/cloudevents-batch+json; charset=utf-8",
        &batch,
    )
    .await;

    let records = system.wait_dead_letters(4, DEADLINE).await;
    assert_eq!(records.len(), 4, "{records:?}");
    let by_folder = |subscription: &str| {
        let found: Vec<_> = records
            .iter()
            .filter(|r| dead_letter_folders(&r.path) == ("ns-dead".to_owned(), subscription.to_owned()))
            .collect();
        assert_eq!(found.len(), 1, "one record for {subscription}: {records:?}");
        found[0].record.clone()
    };

    // Exactly two attempts (the first at once, the second one schedule step later),
    // then dead-lettered as {"deadLetterProperties": …, "event": …}.
    let record = by_folder("RETRYING");
    assert_eq!(keys_of(&record), set(&["deadLetterProperties", "event"]), "{record}");
    assert_eq!(record["event"], retry_event);
    let properties = &record["deadLetterProperties"];
    assert_eq!(
        keys_of(properties),
        set(&[
            "deadletterreason",
            "deliveryattempts",
            "deliveryresult",
            "publishutc",
            "deliveryattemptutc"
        ]),
        "{record}"
    );
    assert_eq!(properties["deadletterreason"], "MaxDeliveryAttemptsExceeded");
    assert_eq!(properties["deliveryattempts"], 2);
    assert_eq!(properties["deliveryresult"], "GenericError");
    assert_timestamp(&properties["publishutc"], "publishutc");
    assert_timestamp(&properties["deliveryattemptutc"], "deliveryattemptutc");
    let attempts = failing.received();
    assert_eq!(attempts.len(), 2, "maxDeliveryCount 2");
    for (i, request) in attempts.iter().enumerate() {
        assert_eq!(request.body, retry_event);
        assert_eq!(request.header("content-type"), Some(CLOUD_EVENT));
        assert_eq!(request.header("aeg-delivery-count"), Some(i.to_string().as_str()));
    }
    let gap = attempts[1].at - attempts[0].at;
    assert!(
        gap >= Duration::from_millis(800),
        "retried after {gap:?}; the schedule says 1 s"
    );

    // A 404 is not retried on this profile.
    let record = by_folder("GONE");
    assert_eq!(record["event"], gone_event);
    assert_eq!(
        record["deadLetterProperties"]["deadletterreason"],
        "NonRetriableFailure"
    );
    assert_eq!(record["deadLetterProperties"]["deliveryattempts"], 1);
    assert_eq!(record["deadLetterProperties"]["deliveryresult"], "NotFound");
    assert_eq!(gone.count(), 1, "a 404 was retried on a namespace topic");

    // Neither is a timeout or a refused connection (the namespace-topic table,
    // behaviour.md#namespace-topics).
    for (folder, result) in [("SLOW", "TimedOut"), ("CLOSED", "SocketError")] {
        let record = by_folder(folder);
        let properties = &record["deadLetterProperties"];
        assert_eq!(properties["deadletterreason"], "NonRetriableFailure", "{record}");
        assert_eq!(properties["deliveryattempts"], 1, "{record}");
        assert_eq!(properties["deliveryresult"], result, "{record}");
    }
    assert_eq!(slow.count(), 1, "a timed-out attempt was retried on a namespace topic");
}

// ----- 7. Delivery properties -----

/// Every log file of `system`'s processes. The harness writes each tier's output to
/// `<temp>/eg-logs-*/<tier>.log` and does not say where; the tiers are this test
/// process's children, started with `EG__DEADLETTER__DIR` = this system's dead-letter
/// directory, so their stderr links lead to the folder.
fn process_log_files(system: &System) -> Vec<PathBuf> {
    let me = std::process::id();
    let marker = format!("EG__DEADLETTER__DIR={}", system.dead_letter_dir().display());
    let mut dirs = BTreeSet::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent != Some(me) {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ.split(|b| *b == 0).any(|var| var == marker.as_bytes()) {
            continue;
        }
        if let Some(dir) = std::fs::read_link(format!("/proc/{pid}/fd/2"))
            .ok()
            .and_then(|log| log.parent().map(Path::to_path_buf))
        {
            dirs.insert(dir);
        }
    }
    assert_eq!(dirs.len(), 1, "this system's log folder: {dirs:?}");
    let dir = dirs.pop_first().unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    files.sort();
    files
}

/// A value nobody else would write.
fn unique_secret() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("s3cr3t-{}-{nanos:x}", std::process::id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_properties_add_static_secret_and_dynamic_headers() {
    // Debug logs: the secret must stay out of them too.
    let system = System::start(Options::default().env("EG__LOG__LEVEL", "debug")).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let topic = "props";
    system.create_topic(topic).await;
    let secret = unique_secret();
    let mapping =
        |name: &str, kind: &str, properties: Value| json!({"name": name, "type": kind, "properties": properties});
    let destination = |mappings: Value| {
        json!({"properties": {"destination": {"endpointType": "WebHook", "properties": {
            "endpointUrl": receiver.url(), "deliveryAttributeMappings": mappings}}}})
    };
    let field = "properties.destination.properties.deliveryAttributeMappings";

    // Refusals, each naming the mapping and its field.
    let static_header = |name: &str, value: &str| mapping(name, "Static", json!({"value": value}));
    for (mappings, at) in [
        (json!([static_header("X Bad", "v")]), format!("{field}[0].name")),
        (
            json!([static_header("X-Ok", "v"), static_header("X:Colon", "v")]),
            format!("{field}[1].name"),
        ),
        (json!([static_header("aeg-custom", "v")]), format!("{field}[0].name")),
        (json!([static_header("AEG-Upper", "v")]), format!("{field}[0].name")),
        (
            // 2,049 characters but 4,097 bytes: the limit is in bytes.
            json!([static_header("X-Long", &format!("{}a", "é".repeat(2048)))]),
            format!("{field}[0].properties.value"),
        ),
        (
            json!([static_header("X-Long", &"v".repeat(4097))]),
            format!("{field}[0].properties.value"),
        ),
        (
            json!([mapping("X-Dyn", "Dynamic", json!({}))]),
            format!("{field}[0].properties.sourceField"),
        ),
        (
            json!([mapping("X-What", "Computed", json!({"value": "v"}))]),
            format!("{field}[0].type"),
        ),
        (
            Value::Array((0..11).map(|i| static_header(&format!("X-H{i}"), "v")).collect()),
            field.to_owned(),
        ),
    ] {
        assert_subscription_refused(&system, topic, "Refused", &destination(mappings), &at).await;
    }
    // The limits themselves are allowed: ten headers, a 4,096-byte value.
    let mut ten: Vec<Value> = (0..9).map(|i| static_header(&format!("X-H{i}"), "v")).collect();
    ten.push(static_header("X-Long", &"v".repeat(4096)));
    system.create_topic("props-limits").await;
    system
        .create_subscription("props-limits", "AtTheLimits", destination(Value::Array(ten)))
        .await;

    let mappings = json!([
        mapping("X-Team", "Static", json!({"value": "billing", "isSecret": false})),
        mapping("X-Api-Key", "Static", json!({"value": secret, "isSecret": true})),
        mapping("X-Order", "Dynamic", json!({"sourceField": "data.orderId"})),
        mapping("X-Amount", "Dynamic", json!({"sourceField": "data.amount"})),
        mapping("X-Express", "Dynamic", json!({"sourceField": "data.express"})),
        mapping("X-Customer", "Dynamic", json!({"sourceField": "data.customer"})),
        mapping("X-Missing", "Dynamic", json!({"sourceField": "data.nothing"})),
        mapping("X-Subject", "Dynamic", json!({"sourceField": "subject"})),
    ]);
    let path = format!("/topics/{topic}/eventSubscriptions/Headers");
    let response = system.admin(Method::PUT, &path, Some(&destination(mappings))).await;
    let status = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{text}");
    assert!(!text.contains(&secret), "PUT answered with the secret value: {text}");

    // Neither GET nor the list shows the secret value; both say it is one.
    for shown_path in [path.clone(), format!("/topics/{topic}/eventSubscriptions")] {
        let response = system.admin(Method::GET, &shown_path, None).await;
        assert_eq!(response.status(), StatusCode::OK);
        let text = response.text().await.unwrap();
        assert!(
            !text.contains(&secret),
            "GET {shown_path} shows the secret value: {text}"
        );
        assert!(
            text.contains("X-Api-Key"),
            "GET {shown_path} lost the secret header: {text}"
        );
    }
    let (_, shown) = system.get(&path).await;
    let shown_mappings = shown["properties"]["destination"]["properties"]["deliveryAttributeMappings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let shown_of = |name: &str| {
        shown_mappings
            .iter()
            .find(|m| m["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no mapping {name} in {shown}"))
    };
    assert_eq!(shown_of("X-Api-Key")["properties"]["isSecret"], true, "{shown}");
    assert_eq!(shown_of("X-Team")["properties"]["value"], "billing", "{shown}");
    assert_eq!(
        shown_of("X-Order")["properties"]["sourceField"],
        "data.orderId",
        "{shown}"
    );

    let data = json!({
        "orderId": "o-77", "amount": 12.5, "express": true,
        "customer": {"id": "c-1"}, "note": "no header"
    });
    system
        .publish_ok(topic, &json!([event("h-1", "Order.Created", "/orders/77", data)]))
        .await;
    let request = receiver.wait_for(1, DEADLINE).await.remove(0);
    assert_eq!(request.event_ids(), ["h-1"]);
    assert_eq!(request.header("x-team"), Some("billing"));
    assert_eq!(request.header("x-api-key"), Some(secret.as_str()), "the secret is sent");
    assert_eq!(request.header("x-order"), Some("o-77"), "a string field");
    assert_eq!(request.header("x-amount"), Some("12.5"), "a number field");
    assert_eq!(request.header("x-express"), Some("true"), "a boolean field");
    assert_eq!(request.header("x-customer"), None, "an object field gives no header");
    assert_eq!(request.header("x-missing"), None, "a missing field gives no header");
    assert_eq!(request.header("x-subject"), Some("/orders/77"));
    assert_eq!(
        request.header("aeg-event-type"),
        Some("Notification"),
        "reserved headers stay"
    );
    wait_successes(&system, topic, 1.0).await;

    // No process wrote the secret to its log.
    let logs = process_log_files(&system);
    let names: Vec<String> = logs
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    for tier in ["ingress.log", "sender-0.log", "scheduler.log", "deadletter.log"] {
        assert!(names.iter().any(|n| n == tier), "no {tier} among {names:?}");
    }
    let mut everything = String::new();
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(
            !text.contains(&secret),
            "{} holds the secret header value",
            log.display()
        );
        everything.push_str(&text);
    }
    // These are the right logs, and they were written (debug level included).
    assert!(
        everything.contains("subscription written"),
        "the ingress log is not there"
    );
    assert!(everything.contains("DEBUG"), "debug logging is not on");
}

// ----- Bugs found while writing these tests (see the report); each test states what
// docs/behaviour.md asks for and is ignored until the product does it. -----

/// The schema table of behaviour.md#topics-and-publishing and the "CloudEvents only" of
/// behaviour.md#namespace-topics hold for a subscription's whole life, and every accepted
/// event is delivered or dead-lettered (behaviour.md#dead-lettering). Today
/// `PUT /admin/topics/{t}` on an existing topic replaces its input schema and profile
/// without looking at its subscriptions: an Event Grid topic becomes a CloudEvents topic
/// under an EventGridSchema subscription, and every event published afterwards is dropped by the
/// sender as `EventUnrenderable` (the publisher got 200; the dead-letter destination gets
/// nothing). A profile change leaves the subscriptions on the old profile's policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_cannot_change_its_schema_or_profile_under_its_subscriptions() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let topic = "switching";
    system.create_topic(topic).await;
    let body = subscription(
        receiver.url(),
        json!({"deadLetterDestination": dead_letter_to("switch-dead")}),
    );
    system.create_subscription(topic, "Classic", body).await;

    for (properties, fields) in [
        (
            json!({"inputSchema": "CloudEventSchemaV1_0"}),
            &["properties.inputSchema"][..],
        ),
        (
            json!({"inputSchema": "CloudEventSchemaV1_0", "deliveryProfile": "NamespaceTopic"}),
            &["properties.inputSchema", "properties.deliveryProfile"][..],
        ),
    ] {
        let (status, answer) = system.put_topic(topic, &json!({ "properties": properties })).await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "changed {properties} under an EventGridSchema subscription: {answer}"
        );
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            fields.iter().any(|f| message.starts_with(&format!("{f}:"))),
            "the refusal should name one of {fields:?}: {message:?}"
        );
    }
    let (_, shown) = system.get(&format!("/topics/{topic}")).await;
    assert_eq!(shown["properties"]["inputSchema"], "EventGridSchema", "{shown}");
    assert_eq!(shown["properties"]["deliveryProfile"], "CustomTopic", "{shown}");

    // A custom topic's CustomInputSchema subscription pins it the same way.
    let custom = "custom-switching";
    system
        .create_topic_with(
            custom,
            json!({"inputSchema": "CustomEventSchema", "inputSchemaMapping": order_mapping()}),
        )
        .await;
    system
        .create_subscription(custom, "AsIs", subscription(receiver.url(), json!({})))
        .await;
    let (status, answer) = system
        .put_topic(custom, &json!({"properties": {"inputSchema": "EventGridSchema"}}))
        .await;
    assert_refused(status, &answer, "properties.inputSchema");

    // And the topic still delivers what it accepted before.
    system
        .publish_ok(topic, &json!([event("still-1", "T", "/s", json!(1))]))
        .await;
    let received = receiver.wait_for(1, DEADLINE).await;
    assert_eq!(received[0].event_ids(), ["still-1"]);
}

/// A delivery property must not take over the request's framing or routing
/// (behaviour.md#a-delivery-attempt: the body is the JSON array of events; "at least
/// once"). Today `Host`, `Content-Length`, `Transfer-Encoding`, `Connection` … are accepted
/// as header names; with a static `Content-Length: 3` every delivery reaches the endpoint
/// as the first 3 bytes of its body (`[{"`) and, when the endpoint answers 200, is counted
/// as delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_properties_cannot_set_headers_that_frame_or_route_the_request() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let topic = "framing";
    system.create_topic(topic).await;
    let field = "properties.destination.properties.deliveryAttributeMappings[0].name";
    for (name, kind, properties) in [
        ("Content-Length", "Static", json!({"value": "3"})),
        ("Host", "Static", json!({"value": "other.example"})),
        ("Transfer-Encoding", "Static", json!({"value": "chunked"})),
        ("Connection", "Static", json!({"value": "close"})),
        ("content-length", "Dynamic", json!({"sourceField": "data.size"})),
    ] {
        let mappings = json!([{"name": name, "type": kind, "properties": properties}]);
        let body = json!({"properties": {"destination": {"endpointType": "WebHook", "properties": {
            "endpointUrl": receiver.url(), "deliveryAttributeMappings": mappings}}}});
        assert_subscription_refused(&system, topic, "Framing", &body, field).await;
    }
}

/// A secret must never be shown (behaviour.md#event-subscriptions), and settings are
/// refused rather than silently ignored (README). Today `"isSecret": "true"` (or `1`) is
/// read as `false`, so GET and the list show the value; unknown fields of a mapping
/// (`"secret": true`) are ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_flag_that_is_not_a_boolean_is_refused_not_ignored() {
    let system = System::start(Options::default()).await;
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let topic = "secrets";
    system.create_topic(topic).await;
    let field = "properties.destination.properties.deliveryAttributeMappings[0]";
    for (mapping, at) in [
        (
            json!({"name": "X-Key", "type": "Static", "properties": {"value": "hunter2", "isSecret": "true"}}),
            format!("{field}.properties.isSecret"),
        ),
        (
            json!({"name": "X-Key", "type": "Static", "properties": {"value": "hunter2", "isSecret": 1}}),
            format!("{field}.properties.isSecret"),
        ),
        (
            json!({"name": "X-Key", "type": "Static", "properties": {"value": "hunter2", "secret": true}}),
            format!("{field}.properties.secret"),
        ),
        (
            json!({"name": "X-Key", "type": "Static", "properties": {"value": "hunter2"}, "isSecret": true}),
            format!("{field}.isSecret"),
        ),
    ] {
        let body = json!({"properties": {"destination": {"endpointType": "WebHook", "properties": {
            "endpointUrl": receiver.url(), "deliveryAttributeMappings": [mapping]}}}});
        let (status, answer) = system.put_subscription(topic, "Secretive", &body).await;
        assert!(
            !answer.to_string().contains("hunter2"),
            "the value meant to be secret is shown: {answer}"
        );
        assert_refused(status, &answer, &at);
    }
}
