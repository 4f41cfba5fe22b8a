//! The topic/subscription catalog against a real Redis: creation and update, keys,
//! cascading deletes, limits, version propagation to partitions, snapshots, the cache,
//! and the partition-count check.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_store::catalog::{KeyName, PutSubscription, PutTopic};
use eg_store::{CatalogCache, Store, StoreError};
use std::sync::Arc;

#[tokio::test]
async fn put_topic_creates_then_updates_and_keeps_its_keys() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    let orders = topic("orders");

    assert_eq!(
        catalog.put_topic(&orders, keys("first")).await.unwrap(),
        PutTopic::Created,
        "first put creates"
    );
    assert_eq!(catalog.topic_keys(&orders.name).await.unwrap(), Some(keys("first")));

    assert_eq!(
        catalog.put_topic(&orders, keys("second")).await.unwrap(),
        PutTopic::Updated,
        "second put updates"
    );
    assert_eq!(
        catalog.topic_keys(&orders.name).await.unwrap(),
        Some(keys("first")),
        "an update must not replace the keys"
    );

    let mut redis = h.redis();
    assert_eq!(
        hget(&mut redis, "{eg:catalog}:topic-keys", "orders/key1").as_deref(),
        Some("first-key1")
    );
    assert_eq!(
        hget(&mut redis, "{eg:catalog}:topic-keys", "orders/key2").as_deref(),
        Some("first-key2")
    );
    let raw = hget(&mut redis, "{eg:catalog}:topics", "orders").unwrap();
    assert_eq!(serde_json::from_str::<eg_core::Topic>(&raw).unwrap(), orders);
    assert_eq!(catalog.get_topic(&orders.name).await.unwrap(), Some(orders));
}

#[tokio::test]
async fn create_topic_writes_only_a_missing_topic() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    let mut mine = topic("dead-letter-events");
    assert!(
        catalog.create_topic(&mine, keys("first")).await.unwrap(),
        "missing: created"
    );
    assert_eq!(catalog.get_topic(&mine.name).await.unwrap().as_ref(), Some(&mine));
    assert_eq!(catalog.topic_keys(&mine.name).await.unwrap(), Some(keys("first")));
    let version = catalog.version().await.unwrap();

    mine.input_schema = eg_core::InputSchema::CloudEventSchemaV1_0;
    assert!(
        !catalog.create_topic(&mine, keys("second")).await.unwrap(),
        "present: left alone"
    );
    let stored = catalog.get_topic(&mine.name).await.unwrap().unwrap();
    assert_eq!(stored.input_schema, eg_core::InputSchema::EventGridSchema);
    assert_eq!(catalog.topic_keys(&mine.name).await.unwrap(), Some(keys("first")));
    assert_eq!(
        catalog.version().await.unwrap(),
        version,
        "nothing written, no new version"
    );
}

#[tokio::test]
async fn list_topics_returns_every_topic_sorted_by_key() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    assert!(catalog.list_topics().await.unwrap().is_empty());
    for name in ["Zeta", "alpha", "Mid"] {
        catalog.put_topic(&topic(name), keys(name)).await.unwrap();
    }
    let names: Vec<String> = catalog
        .list_topics()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["alpha", "Mid", "Zeta"]);
}

#[tokio::test]
async fn regenerate_key_replaces_only_that_key() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    let orders = topic("orders");
    catalog.put_topic(&orders, keys("old")).await.unwrap();
    let before = catalog.version().await.unwrap();

    assert!(
        catalog
            .regenerate_key(&orders.name, KeyName::Key2, "fresh")
            .await
            .unwrap()
    );
    assert_eq!(
        catalog.topic_keys(&orders.name).await.unwrap(),
        Some(["old-key1".to_owned(), "fresh".to_owned()])
    );
    assert!(catalog.version().await.unwrap() > before);

    assert!(
        catalog
            .regenerate_key(&orders.name, KeyName::Key1, "fresh1")
            .await
            .unwrap()
    );
    assert_eq!(
        catalog.topic_keys(&orders.name).await.unwrap(),
        Some(["fresh1".to_owned(), "fresh".to_owned()])
    );

    let version = catalog.version().await.unwrap();
    assert!(
        !catalog
            .regenerate_key(&topic_name("nothing"), KeyName::Key1, "x")
            .await
            .unwrap()
    );
    assert_eq!(
        catalog.topic_keys(&topic_name("nothing")).await.unwrap(),
        None,
        "no keys for a missing topic"
    );
    assert_eq!(
        catalog.version().await.unwrap(),
        version,
        "a refused regenerate changes nothing"
    );
}

#[tokio::test]
async fn delete_topic_removes_the_topic_its_keys_and_all_its_subscriptions() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    let orders = topic("orders");
    // A topic whose key starts with the deleted one's: its subscriptions must survive.
    let orders_eu = topic("orders-eu");
    catalog.put_topic(&orders, keys("o")).await.unwrap();
    catalog.put_topic(&orders_eu, keys("e")).await.unwrap();
    for sub in [
        subscription("orders", "billing"),
        subscription("orders", "shipping"),
        subscription("orders-eu", "billing"),
    ] {
        assert_eq!(
            catalog.put_subscription(&sub, 10).await.unwrap(),
            PutSubscription::Created
        );
    }

    assert!(catalog.delete_topic(&orders.name).await.unwrap());

    assert_eq!(catalog.get_topic(&orders.name).await.unwrap(), None);
    assert_eq!(catalog.topic_keys(&orders.name).await.unwrap(), None);
    assert!(catalog.list_subscriptions(&orders.name).await.unwrap().is_empty());
    assert_eq!(
        catalog
            .get_subscription(&orders.name, &sub_name("billing"))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        catalog
            .put_subscription(&subscription("orders", "billing"), 10)
            .await
            .unwrap(),
        PutSubscription::NoTopic
    );
    let mut redis = h.redis();
    assert_eq!(hget(&mut redis, "{eg:catalog}:topic-keys", "orders/key1"), None);
    assert_eq!(hget(&mut redis, "{eg:catalog}:subscription-counts", "orders"), None);
    let left: Vec<String> = query(&mut redis, &["HKEYS", "{eg:catalog}:subscriptions"]);
    assert_eq!(left, ["orders-eu/billing"]);

    // The other topic is untouched.
    assert_eq!(catalog.topic_keys(&orders_eu.name).await.unwrap(), Some(keys("e")));
    assert_eq!(catalog.list_subscriptions(&orders_eu.name).await.unwrap().len(), 1);

    assert!(
        !catalog.delete_topic(&orders.name).await.unwrap(),
        "second delete finds nothing"
    );

    // Recreated, it starts from scratch: new keys and an empty subscription count.
    assert_eq!(
        catalog.put_topic(&orders, keys("new")).await.unwrap(),
        PutTopic::Created
    );
    assert_eq!(catalog.topic_keys(&orders.name).await.unwrap(), Some(keys("new")));
    assert_eq!(
        catalog
            .put_subscription(&subscription("orders", "billing"), 1)
            .await
            .unwrap(),
        PutSubscription::Created
    );
}

#[tokio::test]
async fn put_subscription_reports_created_updated_no_topic_and_limit() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    let limit = 2;

    assert_eq!(
        catalog
            .put_subscription(&subscription("orders", "a-sub"), limit)
            .await
            .unwrap(),
        PutSubscription::NoTopic
    );
    assert!(
        catalog
            .list_subscriptions(&topic_name("orders"))
            .await
            .unwrap()
            .is_empty()
    );

    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    assert_eq!(
        catalog
            .put_subscription(&subscription("orders", "a-sub"), limit)
            .await
            .unwrap(),
        PutSubscription::Created
    );
    assert_eq!(
        catalog
            .put_subscription(&subscription("orders", "b-sub"), limit)
            .await
            .unwrap(),
        PutSubscription::Created
    );
    let version = catalog.version().await.unwrap();
    assert_eq!(
        catalog
            .put_subscription(&subscription("orders", "c-sub"), limit)
            .await
            .unwrap(),
        PutSubscription::LimitReached
    );
    assert_eq!(
        catalog
            .get_subscription(&topic_name("orders"), &sub_name("c-sub"))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        catalog.version().await.unwrap(),
        version,
        "a refused put changes nothing"
    );

    // Updating an existing subscription is allowed at the limit and replaces it.
    let changed = subscription_to("orders", "a-sub", "http://127.0.0.1:9/other");
    assert_eq!(
        catalog.put_subscription(&changed, limit).await.unwrap(),
        PutSubscription::Updated
    );
    let stored = catalog
        .get_subscription(&topic_name("orders"), &sub_name("a-sub"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.webhook_url(), Some("http://127.0.0.1:9/other"));

    // Deleting one makes room again.
    assert!(
        catalog
            .delete_subscription(&topic_name("orders"), &sub_name("b-sub"))
            .await
            .unwrap()
    );
    assert_eq!(
        catalog
            .put_subscription(&subscription("orders", "c-sub"), limit)
            .await
            .unwrap(),
        PutSubscription::Created
    );

    let names: Vec<String> = catalog
        .list_subscriptions(&topic_name("orders"))
        .await
        .unwrap()
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(names, ["a-sub", "c-sub"]);
    let mut redis = h.redis();
    assert_eq!(
        hget(&mut redis, "{eg:catalog}:subscription-counts", "orders").as_deref(),
        Some("2")
    );
}

#[tokio::test]
async fn delete_subscription_reports_whether_it_existed() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    catalog
        .put_subscription(&subscription("orders", "billing"), 10)
        .await
        .unwrap();

    assert!(
        catalog
            .delete_subscription(&topic_name("orders"), &sub_name("billing"))
            .await
            .unwrap()
    );
    assert_eq!(
        catalog
            .get_subscription(&topic_name("orders"), &sub_name("billing"))
            .await
            .unwrap(),
        None
    );
    let version = catalog.version().await.unwrap();

    assert!(
        !catalog
            .delete_subscription(&topic_name("orders"), &sub_name("billing"))
            .await
            .unwrap()
    );
    assert_eq!(
        catalog.version().await.unwrap(),
        version,
        "deleting nothing changes nothing"
    );
    let mut redis = h.redis();
    assert_eq!(
        hget(&mut redis, "{eg:catalog}:subscription-counts", "orders").as_deref(),
        Some("0")
    );
}

#[tokio::test]
async fn every_catalog_write_bumps_the_version_and_every_partition_copy() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    let mut redis = h.redis();
    let partition_versions = |redis: &mut redis::Connection| -> Vec<Option<u64>> {
        eg_store::Keyspace::new("eg", PARTITIONS)
            .all_partitions()
            .map(|p| query(redis, &["GET", &p.catalog_version()]))
            .collect()
    };
    assert_eq!(catalog.version().await.unwrap(), 0);
    assert_eq!(partition_versions(&mut redis), [None, None]);

    let orders = topic("orders");
    let billing = subscription("orders", "billing");
    let mut last = 0;
    for step in 0..7 {
        match step {
            0 => assert_eq!(catalog.put_topic(&orders, keys("a")).await.unwrap(), PutTopic::Created),
            1 => assert_eq!(catalog.put_topic(&orders, keys("b")).await.unwrap(), PutTopic::Updated),
            2 => assert!(catalog.regenerate_key(&orders.name, KeyName::Key1, "k").await.unwrap()),
            3 => assert_eq!(
                catalog.put_subscription(&billing, 5).await.unwrap(),
                PutSubscription::Created
            ),
            4 => assert_eq!(
                catalog.put_subscription(&billing, 5).await.unwrap(),
                PutSubscription::Updated
            ),
            5 => assert!(catalog.delete_subscription(&orders.name, &billing.name).await.unwrap()),
            _ => assert!(catalog.delete_topic(&orders.name).await.unwrap()),
        }
        let version = catalog.version().await.unwrap();
        assert!(
            version > last,
            "write #{step} did not bump the version ({last} -> {version})"
        );
        assert_eq!(
            partition_versions(&mut redis),
            [Some(version), Some(version)],
            "after write #{step}"
        );
        last = version;
    }
}

#[tokio::test]
async fn load_returns_topics_keys_and_subscriptions_at_one_version() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    catalog.put_topic(&topic("Audit"), keys("a")).await.unwrap();
    catalog
        .put_subscription(&subscription("orders", "billing"), 10)
        .await
        .unwrap();
    catalog
        .put_subscription(&subscription("orders", "shipping"), 10)
        .await
        .unwrap();

    let snapshot = catalog.load().await.unwrap();
    assert_eq!(snapshot.version, catalog.version().await.unwrap());
    assert_eq!(snapshot.topics.len(), 2);

    let orders = snapshot.topic("orders").unwrap();
    assert_eq!(orders.topic, topic("orders"));
    assert_eq!(orders.keys, keys("o"));
    let mut subs: Vec<String> = orders.subscriptions.iter().map(|s| s.name.key()).collect();
    subs.sort();
    assert_eq!(subs, ["billing", "shipping"]);

    let audit = snapshot.topic("audit").unwrap();
    assert_eq!(audit.topic.name.as_str(), "Audit");
    assert_eq!(audit.keys, keys("a"));
    assert!(audit.subscriptions.is_empty());

    assert_eq!(
        snapshot.subscription("orders", "billing"),
        Some(&subscription("orders", "billing"))
    );
    assert_eq!(snapshot.subscription("audit", "billing"), None);
}

#[tokio::test]
async fn catalog_cache_refresh_picks_up_a_change() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();
    let cache = CatalogCache::load(catalog.clone()).await.unwrap();
    assert!(cache.snapshot().topic("orders").is_some());
    assert_eq!(cache.snapshot().subscription("orders", "billing"), None);

    // Nothing changed: refresh keeps the very same snapshot.
    let before = cache.snapshot();
    assert!(Arc::ptr_eq(&before, &cache.refresh().await.unwrap()));

    catalog
        .put_subscription(&subscription("orders", "billing"), 10)
        .await
        .unwrap();
    assert_eq!(
        cache.snapshot().subscription("orders", "billing"),
        None,
        "the cache changes only on refresh"
    );
    let fresh = cache.refresh().await.unwrap();
    assert_eq!(fresh.version, catalog.version().await.unwrap());
    assert_eq!(
        cache.snapshot().subscription("orders", "billing"),
        Some(&subscription("orders", "billing"))
    );

    catalog
        .delete_subscription(&topic_name("orders"), &sub_name("billing"))
        .await
        .unwrap();
    cache.refresh().await.unwrap();
    assert_eq!(cache.snapshot().subscription("orders", "billing"), None);
}

#[tokio::test]
async fn a_topic_cannot_change_schema_even_when_two_writes_race() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    let cloud = |name: &str| {
        let mut t = topic(name);
        t.input_schema = eg_core::schema::InputSchema::CloudEventSchemaV1_0;
        t
    };
    // Many rounds of one topic created twice at once with two schemas: exactly one
    // schema wins each round, and the other write is refused, never silently applied.
    for round in 0..30 {
        let name = format!("race{round}");
        let (grid, cloud) = (topic(&name), cloud(&name));
        let (a, b) = tokio::join!(
            catalog.put_topic(&grid, keys("a")),
            catalog.put_topic(&cloud, keys("b"))
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let stored = catalog.get_topic(&grid.name).await.unwrap().unwrap();
        let (won, lost) = if stored == grid { (a, b) } else { (b, a) };
        assert_eq!(won, PutTopic::Created, "round {round}");
        assert!(
            matches!(&lost, PutTopic::Refused(why) if why.field == "properties.inputSchema"),
            "round {round}: {lost:?}"
        );
    }
    // Written again unchanged it is an update; with the other schema, refused.
    let stored = catalog.get_topic(&topic_name("race0")).await.unwrap().unwrap();
    let other = if stored == topic("race0") {
        cloud("race0")
    } else {
        topic("race0")
    };
    assert_eq!(catalog.put_topic(&stored, keys("x")).await.unwrap(), PutTopic::Updated);
    assert!(matches!(
        catalog.put_topic(&other, keys("x")).await.unwrap(),
        PutTopic::Refused(_)
    ));
}

#[tokio::test]
async fn a_subscription_write_decided_from_a_basis_is_refused_once_the_basis_changed() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    let billing = subscription("orders", "billing");
    let (t, n) = (billing.topic.clone(), billing.name.clone());
    assert!(
        catalog.subscription_basis(&t, &n).await.unwrap().is_none(),
        "no topic yet"
    );
    catalog.put_topic(&topic("orders"), keys("o")).await.unwrap();

    // Created over "no such subscription"; a second creation decided from the same basis
    // finds it exists now.
    let basis = catalog.subscription_basis(&t, &n).await.unwrap().unwrap();
    assert_eq!(basis.previous, None);
    assert_eq!(
        catalog.put_subscription_over(&billing, 5, &basis).await.unwrap(),
        PutSubscription::Created
    );
    assert_eq!(
        catalog.put_subscription_over(&billing, 5, &basis).await.unwrap(),
        PutSubscription::Changed
    );

    // Updated over what is stored; then paused in between: the pause is not undone.
    let basis = catalog.subscription_basis(&t, &n).await.unwrap().unwrap();
    assert_eq!(basis.previous.as_ref(), Some(&billing));
    let paused = eg_core::Subscription {
        paused: true,
        ..billing.clone()
    };
    catalog.put_subscription(&paused, 5).await.unwrap();
    let moved = subscription_to("orders", "billing", "http://127.0.0.1:10/elsewhere");
    assert_eq!(
        catalog.put_subscription_over(&moved, 5, &basis).await.unwrap(),
        PutSubscription::Changed
    );
    assert_eq!(catalog.get_subscription(&t, &n).await.unwrap(), Some(paused));

    // Deleted in between: not brought back.
    let basis = catalog.subscription_basis(&t, &n).await.unwrap().unwrap();
    assert!(catalog.delete_subscription(&t, &n).await.unwrap());
    assert_eq!(
        catalog.put_subscription_over(&moved, 5, &basis).await.unwrap(),
        PutSubscription::Changed
    );
    assert_eq!(catalog.get_subscription(&t, &n).await.unwrap(), None);

    // The topic replaced in between (deleted and created again): decided again.
    let basis = catalog.subscription_basis(&t, &n).await.unwrap().unwrap();
    assert!(catalog.delete_topic(&t).await.unwrap());
    let mut cloud = topic("orders");
    cloud.input_schema = eg_core::schema::InputSchema::CloudEventSchemaV1_0;
    catalog.put_topic(&cloud, keys("c")).await.unwrap();
    assert_eq!(
        catalog.put_subscription_over(&moved, 5, &basis).await.unwrap(),
        PutSubscription::Changed
    );
    // Decided again on the current basis, it goes through.
    let basis = catalog.subscription_basis(&t, &n).await.unwrap().unwrap();
    assert_eq!(basis.topic, cloud);
    assert_eq!(
        catalog.put_subscription_over(&moved, 5, &basis).await.unwrap(),
        PutSubscription::Created
    );
}

#[tokio::test]
async fn names_are_case_insensitive() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    assert_eq!(
        catalog.put_topic(&topic("Orders"), keys("o")).await.unwrap(),
        PutTopic::Created
    );

    let got = catalog.get_topic(&topic_name("orders")).await.unwrap().unwrap();
    assert_eq!(got.name.as_str(), "Orders", "shown as first spelled");
    assert_eq!(
        catalog.topic_keys(&topic_name("ORDERS")).await.unwrap(),
        Some(keys("o"))
    );
    assert_eq!(
        catalog.put_topic(&topic("ORDERS"), keys("x")).await.unwrap(),
        PutTopic::Updated,
        "same topic, other case"
    );
    assert_eq!(catalog.list_topics().await.unwrap().len(), 1);

    assert_eq!(
        catalog
            .put_subscription(&subscription("orders", "Billing"), 10)
            .await
            .unwrap(),
        PutSubscription::Created
    );
    assert_eq!(
        catalog
            .put_subscription(&subscription("ORDERS", "BILLING"), 10)
            .await
            .unwrap(),
        PutSubscription::Updated
    );
    assert!(
        catalog
            .get_subscription(&topic_name("oRdErS"), &sub_name("billing"))
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        catalog.list_subscriptions(&topic_name("Orders")).await.unwrap().len(),
        1
    );
    assert!(
        catalog
            .delete_subscription(&topic_name("orders"), &sub_name("bIlLiNg"))
            .await
            .unwrap()
    );
    assert!(catalog.delete_topic(&topic_name("oRDERS")).await.unwrap());
    assert!(catalog.list_topics().await.unwrap().is_empty());
}

#[tokio::test]
async fn check_layout_refuses_another_partition_count() {
    let h = Harness::start().await;
    let mut redis = h.redis();
    assert_eq!(
        query::<String>(&mut redis, &["GET", "{eg:catalog}:partitions"]),
        PARTITIONS.to_string()
    );

    let other = Store::connect(&settings(h.server.url(), PARTITIONS + 1)).unwrap();
    match other.check_layout().await {
        Err(StoreError::Layout(message)) => {
            assert!(message.contains("EG__REDIS__PARTITIONS"), "{message}");
            assert!(
                message.contains(&format!("EG__REDIS__PARTITIONS={PARTITIONS}")),
                "{message}"
            );
        }
        other => panic!("expected a layout error, got {other:?}"),
    }
    // The recorded layout is not overwritten, and an agreeing process still passes.
    assert_eq!(
        query::<String>(&mut redis, &["GET", "{eg:catalog}:partitions"]),
        PARTITIONS.to_string()
    );
    let same = Store::connect(&settings(h.server.url(), PARTITIONS)).unwrap();
    same.check_layout().await.unwrap();
}

/// A prefix with no deployment on a Redis that holds another prefix's is refused (a
/// typo), unless a new deployment is meant; an empty Redis and a recorded prefix pass.
#[tokio::test]
async fn check_prefix_refuses_a_prefix_of_no_deployment_beside_another() {
    let server = eg_testkit::RedisServer::start();
    let mut redis = server.client();
    let prefixed = |prefix: &str| {
        Store::connect(&eg_store::RedisSettings {
            prefix: prefix.into(),
            ..settings(server.url(), PARTITIONS)
        })
        .unwrap()
    };
    let first = prefixed("eg");
    first.check_prefix(false).await.unwrap();
    first.check_layout().await.unwrap();
    assert_eq!(
        query::<Vec<String>>(&mut redis, &["HGETALL", eg_store::keyspace::DEPLOYMENTS]),
        ["eg", &PARTITIONS.to_string()]
    );

    let mistyped = prefixed("eg-prdo");
    match mistyped.check_prefix(false).await {
        Err(StoreError::Layout(message)) => {
            assert!(message.contains(r#"EG__REDIS__PREFIX="eg-prdo""#), "{message}");
            assert!(message.contains(r#""eg" (2 partitions)"#), "{message}");
        }
        other => panic!("expected a layout error, got {other:?}"),
    }
    let second = prefixed("eg-two");
    second.check_prefix(true).await.unwrap();
    second.check_layout().await.unwrap();
    // Recorded now: its next tiers start without being told.
    second.check_prefix(false).await.unwrap();
    first.check_prefix(false).await.unwrap();
}

#[tokio::test]
async fn check_layout_refuses_a_redis_written_with_the_old_partition_tags() {
    let server = eg_testkit::RedisServer::start();
    let mut redis = server.client();
    // What a build from before versioned layouts left: the count, no layout version.
    let _: () = query(&mut redis, &["SET", "{eg:catalog}:partitions", &PARTITIONS.to_string()]);
    let store = Store::connect(&settings(server.url(), PARTITIONS)).unwrap();
    match store.check_layout().await {
        Err(StoreError::Layout(message)) => assert!(message.contains("another key layout"), "{message}"),
        other => panic!("expected a layout error, got {other:?}"),
    }
}

#[tokio::test]
async fn the_version_keeps_rising_after_redis_lost_its_data() {
    let h = Harness::start().await;
    let catalog = h.catalog();
    let mut redis = h.redis();
    let orders = topic("orders");
    for _ in 0..3 {
        catalog.put_topic(&orders, keys("a")).await.unwrap();
    }
    let before = catalog.version().await.unwrap();
    let cache = CatalogCache::load(catalog.clone()).await.unwrap();
    assert_eq!(cache.snapshot().version, before);

    let _: () = query(&mut redis, &["FLUSHALL"]);
    // Rebuilt with fewer writes than before: a counter would now be behind the cache.
    catalog.put_topic(&topic("billing"), keys("b")).await.unwrap();
    let after = catalog.version().await.unwrap();
    assert!(
        after > before,
        "version went back from {before} to {after} after data loss"
    );

    let snapshot = cache.refresh().await.unwrap();
    assert_eq!(snapshot.version, after);
    assert!(snapshot.topic("orders").is_none(), "the lost topic is forgotten");
    assert!(snapshot.topic("billing").is_some());
}
