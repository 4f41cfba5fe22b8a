//! Advanced filters and subscription expiry end to end (behaviour.md#event-subscriptions):
//! what the ingress routes to each subscription, seen at the endpoints.

use eg_system_tests::{
    Behaviour, Options, Receiver, System, assert_subscription_refused, event, eventually, json_reply, sorted, strings,
    subscription, wait_successes,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn filter(operator: &str, key: &str, operand: (&str, Value)) -> Value {
    let mut f = json!({"operatorType": operator, "key": key});
    f[operand.0] = operand.1;
    f
}

/// `SystemTime` as RFC 3339 UTC with milliseconds.
fn rfc3339(at: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(at)
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

#[test]
fn formats_rfc3339() {
    assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    let at = UNIX_EPOCH + Duration::from_millis(1_772_600_767_250);
    assert_eq!(rfc3339(at), "2026-03-04T05:06:07.250Z");
    let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
    assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advanced_filters_route_each_event_to_the_subscriptions_it_passes() {
    let system = System::start(Options::default()).await;
    let topic = "catalog";
    system.create_topic(topic).await;

    // Limits are refused, naming the place.
    let with_filters = |filters: Value| {
        subscription(
            "http://127.0.0.1:9/never",
            json!({"filter": {"advancedFilters": filters}}),
        )
    };
    let one = filter("NumberIn", "data.n", ("values", json!([1])));
    let twenty_six = Value::Array(vec![one.clone(); 26]);
    assert_subscription_refused(
        &system,
        topic,
        "Refused",
        &with_filters(twenty_six),
        "properties.filter.advancedFilters",
    )
    .await;
    let long = filter("StringIn", "data.s", ("values", json!(["x".repeat(513)])));
    assert_subscription_refused(
        &system,
        topic,
        "Refused",
        &with_filters(json!([one, long])),
        "properties.filter.advancedFilters[1].values[0]",
    )
    .await;
    let long = filter(
        "StringBeginsWith",
        "subject",
        ("values", json!(["ok", "é".repeat(513)])),
    );
    assert_subscription_refused(
        &system,
        topic,
        "Refused",
        &with_filters(json!([long])),
        "properties.filter.advancedFilters[0].values[1]",
    )
    .await;
    let many: Vec<String> = (0..26).map(|i| format!("v{i}")).collect();
    let too_many_values = filter("StringIn", "data.s", ("values", json!(many)));
    assert_subscription_refused(
        &system,
        topic,
        "Refused",
        &with_filters(json!([too_many_values])),
        "properties.filter.advancedFilters[0].values[25]",
    )
    .await;
    let unknown = filter("StringLike", "data.s", ("values", json!(["a"])));
    assert_subscription_refused(
        &system,
        topic,
        "Refused",
        &with_filters(json!([unknown])),
        "properties.filter.advancedFilters[0].operatorType",
    )
    .await;

    // Twenty-five filters and a 512-character value are allowed.
    let range = Receiver::start(Behaviour::Status(200)).await;
    let mut at_limits = vec![filter("StringNotIn", "data.s", ("values", json!(["x".repeat(512)])))];
    at_limits.extend(std::iter::repeat_n(
        filter("NumberInRange", "data.price", ("values", json!([[10, 20]]))),
        23,
    ));
    at_limits.push(filter("StringContains", "subject", ("values", json!(["/eu/"]))));
    let body = subscription(range.url(), json!({"filter": {"advancedFilters": at_limits}}));
    system.create_subscription(topic, "Range", body).await;

    let no_coupon = Receiver::start(Behaviour::Status(200)).await;
    let red_arrays = Receiver::start(Behaviour::Status(200)).await;
    let red_scalars = Receiver::start(Behaviour::Status(200)).await;
    let not_level_one = Receiver::start(Behaviour::Status(200)).await;
    let vip = Receiver::start(Behaviour::Status(200)).await;
    for (name, receiver, filter_body) in [
        (
            "NoCoupon",
            &no_coupon,
            json!({"advancedFilters": [{"operatorType": "IsNullOrUndefined", "key": "data.coupon"}]}),
        ),
        (
            "RedArrays",
            &red_arrays,
            json!({"enableAdvancedFilteringOnArrays": true,
                   "advancedFilters": [filter("StringIn", "data.tags", ("values", json!(["RED", "GREEN"])))]}),
        ),
        (
            "RedScalars",
            &red_scalars,
            json!({"advancedFilters": [filter("StringIn", "data.tags", ("values", json!(["red"])))]}),
        ),
        (
            "NotLevelOne",
            &not_level_one,
            json!({"advancedFilters": [filter("NumberNotIn", "data.level", ("values", json!([1])))]}),
        ),
        (
            "Vip",
            &vip,
            json!({"includedEventTypes": ["Order.Created"], "advancedFilters": [
                filter("BoolEquals", "data.customer.vip", ("value", json!(true))),
                filter("NumberGreaterThanOrEquals", "data.price", ("value", json!(15))),
                filter("StringNotBeginsWith", "subject", ("values", json!(["/US/"]))),
            ]}),
        ),
    ] {
        let body = subscription(receiver.url(), json!({ "filter": filter_body }));
        system.create_subscription(topic, name, body).await;
    }
    let (_, shown) = system
        .get(&format!("/topics/{topic}/eventSubscriptions/RedArrays"))
        .await;
    assert_eq!(
        shown["properties"]["filter"]["enableAdvancedFilteringOnArrays"], true,
        "{shown}"
    );
    assert_eq!(
        shown["properties"]["filter"]["advancedFilters"][0],
        json!({"operatorType": "StringIn", "key": "data.tags", "values": ["RED", "GREEN"]}),
        "{shown}"
    );

    system
        .publish_ok(
            topic,
            &json!([
                event(
                    "e1",
                    "Order.Created",
                    "/EU/orders/1",
                    json!({
                        "price": 15, "tags": ["blue", "Red"], "level": 1, "coupon": null,
                        "customer": {"vip": true}
                    })
                ),
                event(
                    "e2",
                    "Order.Created",
                    "/us/orders/2",
                    json!({
                        "price": 15, "tags": "red", "level": 2, "coupon": "X", "customer": {"vip": true}
                    })
                ),
                event(
                    "e3",
                    "Order.Created",
                    "/orders/eu/3",
                    json!({
                        "price": 25, "tags": [], "customer": {"vip": "true"}
                    })
                ),
                event(
                    "e4",
                    "Order.Updated",
                    "/eu/4",
                    json!({
                        "price": 10, "coupon": "Y", "tags": ["green"], "customer": {"vip": true}
                    })
                ),
                event("e5", "Order.Created", "/eu/5", json!("just a string")),
            ]),
        )
        .await;

    let expected = [
        // price within [10, 20] and subject containing "/eu/" (any case); e5 has no price.
        (&range, strings(&["e1", "e4"])),
        // null or missing, including when data is not an object.
        (&no_coupon, strings(&["e1", "e3", "e5"])),
        // any element of an array (on arrays), or a plain string; case-insensitive;
        // the values of one filter are OR-ed.
        (&red_arrays, strings(&["e1", "e2", "e4"])),
        // without enableAdvancedFilteringOnArrays an array never matches StringIn.
        (&red_scalars, strings(&["e2"])),
        // missing keys pass NumberNotIn; 1 is excluded.
        (&not_level_one, strings(&["e2", "e3", "e4", "e5"])),
        // a boolean true (not the string "true"), price >= 15, subject not "/us/…".
        (&vip, strings(&["e1"])),
    ];
    let total: usize = expected.iter().map(|(_, ids)| ids.len()).sum();
    assert_eq!(system.matched_events(topic).await, total as f64);
    wait_successes(&system, topic, total as f64).await;
    for (receiver, ids) in expected {
        assert_eq!(sorted(receiver.event_ids()), ids, "at {}", receiver.url());
    }

    // On a CloudEvents topic, filters read the CloudEvent's attributes and extensions.
    let ce_topic = "ce-catalog";
    let put = json!({"properties": {"inputSchema": "CloudEventSchemaV1_0"}});
    let (status, answer) = json_reply(
        system
            .admin(Method::PUT, &format!("/topics/{ce_topic}"), Some(&put))
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let europe = Receiver::start(Behaviour::Status(200)).await;
    let body = subscription(
        europe.url(),
        json!({"filter": {"advancedFilters": [
            filter("StringBeginsWith", "partitionkey", ("values", json!(["EU-"]))),
            filter("NumberLessThan", "data.weight", ("value", json!(5))),
            filter("StringEndsWith", "type", ("values", json!([".created"]))),
        ]}}),
    );
    system.create_subscription(ce_topic, "Europe", body).await;
    let (_, keys) = system.post(&format!("/topics/{ce_topic}/listKeys"), None).await;
    let cloud_event = |id: &str, partition: &str, weight: f64| {
        json!({"specversion": "1.0", "id": id, "source": "/parcels", "type": "Parcel.Created",
               "partitionkey": partition, "data": {"weight": weight}})
    };
    let response = system
        .http()
        .post(format!("{}/topics/{ce_topic}/api/events", system.ingress_url()))
        .header("content-type", "application/cloudevents-batch+json; charset=utf-8")
        .header("aeg-sas-key", keys["key1"].as_str().unwrap())
        .body(
            json!([
                cloud_event("p1", "eu-1", 1.5),
                cloud_event("p2", "us-1", 1.5),
                cloud_event("p3", "eu-2", 7.0),
            ])
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    wait_successes(&system, ce_topic, 1.0).await;
    assert_eq!(system.matched_events(ce_topic).await, 1.0);
    assert_eq!(europe.received()[0].body["id"], "p1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_stops_getting_events_once_it_expires() {
    let system = System::start(Options::default()).await;
    let always = Receiver::start(Behaviour::Status(200)).await;
    let soon = Receiver::start(Behaviour::Status(200)).await;
    let topic = "expiring";
    system.create_topic(topic).await;

    let expiring = |at: &str| subscription(soon.url(), json!({"expirationTimeUtc": at}));
    let past = rfc3339(SystemTime::now() - Duration::from_secs(60));
    assert_subscription_refused(
        &system,
        topic,
        "Refused",
        &expiring(&past),
        "properties.expirationTimeUtc",
    )
    .await;
    assert_subscription_refused(
        &system,
        topic,
        "Refused",
        &expiring("tomorrow"),
        "properties.expirationTimeUtc",
    )
    .await;

    system
        .create_subscription(topic, "Always", subscription(always.url(), json!({})))
        .await;
    // Room for the subscription PUT (with its handshake) and the first publish on a busy
    // machine.
    let expires = SystemTime::now() + Duration::from_secs(15);
    let shown = system
        .create_subscription(topic, "Soon", expiring(&rfc3339(expires)))
        .await;
    assert_eq!(shown["properties"]["expirationTimeUtc"], rfc3339(expires), "{shown}");

    system
        .publish_ok(topic, &json!([event("before", "Tick", "/t/1", json!(1))]))
        .await;
    assert!(
        SystemTime::now() < expires,
        "the machine is too slow for this test: the subscription expired before the first publish"
    );
    assert_eq!(
        system.matched_events(topic).await,
        2.0,
        "both subscriptions match before expiry"
    );
    wait_successes(&system, topic, 2.0).await;

    eventually(
        Duration::from_secs(20),
        "the subscription's expiration time",
        || async { (SystemTime::now() > expires + Duration::from_millis(200)).then_some(()) },
    )
    .await;
    system
        .publish_ok(topic, &json!([event("after", "Tick", "/t/2", json!(2))]))
        .await;
    assert_eq!(
        system.matched_events(topic).await,
        3.0,
        "only Always matches after expiry"
    );
    wait_successes(&system, topic, 3.0).await;
    assert_eq!(sorted(always.event_ids()), strings(&["after", "before"]));
    assert_eq!(soon.event_ids(), ["before"]);
}
