//! Every way eg reaches Redis, against real servers: each URL form the docs name
//! (`redis://`, `rediss://`, `redis+unix://`, with and without user and password), TLS
//! to one server and to every node of a Cluster with a CA made for the test, mutual TLS,
//! and a handshake that fails saying which setting to change — never with a password in
//! the message.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use eg_store::{Catalog, Credentials, PublishOutcome, RedisSettings, Store, TlsFiles};
use eg_testkit::redis_server::{Options, TlsListen};
use eg_testkit::tls::TestCa;
use eg_testkit::{RedisCluster, RedisServer, ports};
use std::time::Duration;

const PASSWORD: &str = "s3cret-Pa55word";

fn ca_files(ca: &TestCa) -> TlsFiles {
    TlsFiles {
        ca_file: Some(ca.ca.clone()),
        ..TlsFiles::default()
    }
}

/// Connects as a tier does and stores and reads back one event: the whole path works.
async fn round_trip(settings: &RedisSettings) -> Result<(), String> {
    let store = Store::connect(settings).map_err(|e| e.to_string())?;
    store.check_layout().await.map_err(|e| e.to_string())?;
    store.ensure_groups().await.map_err(|e| e.to_string())?;
    let catalog = Catalog::new(store.clone());
    catalog
        .put_topic(&topic("orders"), keys("o"))
        .await
        .map_err(|e| e.to_string())?;
    let version = catalog.version().await.map_err(|e| e.to_string())?;
    let p = store.keys().partition(0);
    let stored = store
        .publish(&p, version, &[event("e1", 1)])
        .await
        .map_err(|e| e.to_string())?;
    assert_eq!(stored, PublishOutcome::Stored { duplicates: vec![] });
    assert_eq!(read(&store, &p, "c1", 10).await.len(), 1);
    Ok(())
}

/// Why connecting with `settings` fails (it must).
async fn refusal(settings: &RedisSettings) -> String {
    let error = round_trip(settings).await.expect_err("the connection must be refused");
    assert!(!error.contains(PASSWORD), "the password shows in {error}");
    error
}

fn tcp_server(dir: &std::path::Path) -> (eg_testkit::redis_server::Process, u16) {
    for _ in 0..5 {
        let port = ports::free_port();
        if let Ok(process) = Options::tcp(dir.join(port.to_string()), port).start(Duration::from_secs(10)) {
            return (process, port);
        }
    }
    panic!("no redis-server on a free port");
}

fn set_password(url: &str, user_rule: Option<&str>) {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    match user_rule {
        Some(rule) => {
            let mut cmd = redis::cmd("ACL");
            cmd.arg("SETUSER")
                .arg("eg")
                .arg("reset")
                .arg("on")
                .arg(format!(">{PASSWORD}"));
            for part in rule.split_whitespace() {
                cmd.arg(part);
            }
            cmd.query::<()>(&mut conn).unwrap();
        }
        None => redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg(PASSWORD)
            .query::<()>(&mut conn)
            .unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_plain_url_form_connects_with_and_without_user_and_password() {
    let dir = tempfile::tempdir().unwrap();
    let (_process, port) = tcp_server(dir.path());
    let plain = format!("redis://127.0.0.1:{port}");
    round_trip(&settings(plain.clone(), PARTITIONS)).await.unwrap();

    // The default user's password (`requirepass`), in the URL or in the settings.
    set_password(&plain, None);
    let error = refusal(&settings(plain.clone(), PARTITIONS)).await;
    assert!(error.contains("NOAUTH") || error.contains("Authentication"), "{error}");
    round_trip(&settings(format!("redis://:{PASSWORD}@127.0.0.1:{port}"), PARTITIONS))
        .await
        .unwrap();
    let wrong = refusal(&settings(
        format!("redis://:wrong-{PASSWORD}@127.0.0.1:{port}"),
        PARTITIONS,
    ))
    .await;
    assert!(
        wrong.contains("EG__REDIS__URL") && wrong.contains("refused eg's credentials"),
        "{wrong}"
    );
    let from_settings = RedisSettings {
        credentials: Credentials {
            username: None,
            password: Some(PASSWORD.into()),
        },
        ..settings(plain.clone(), PARTITIONS)
    };
    round_trip(&from_settings).await.unwrap();

    // An ACL user, in the URL or in the settings.
    let admin = format!("redis://:{PASSWORD}@127.0.0.1:{port}");
    set_password(&admin, Some("~* &* +@all"));
    round_trip(&settings(format!("redis://eg:{PASSWORD}@127.0.0.1:{port}"), PARTITIONS))
        .await
        .unwrap();
    let as_user = RedisSettings {
        credentials: Credentials {
            username: Some("eg".into()),
            password: Some(PASSWORD.into()),
        },
        ..settings(plain, PARTITIONS)
    };
    round_trip(&as_user).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_socket_url_connects_with_and_without_user_and_password() {
    let server = RedisServer::start();
    round_trip(&settings(server.url(), PARTITIONS)).await.unwrap();
    let socket = server.socket().display().to_string();
    set_password(&server.url(), Some("~* &* +@all"));
    round_trip(&settings(
        format!("redis+unix://{socket}?user=eg&pass={PASSWORD}"),
        PARTITIONS,
    ))
    .await
    .unwrap();
    let wrong = refusal(&settings(
        format!("redis+unix://{socket}?user=eg&pass=nope"),
        PARTITIONS,
    ))
    .await;
    assert!(
        wrong.contains("EG__REDIS__URL") && wrong.contains("refused eg's credentials"),
        "{wrong}"
    );
    // requirepass on the default user.
    set_password(&server.url(), None);
    round_trip(&settings(format!("redis+unix://{socket}?pass={PASSWORD}"), PARTITIONS))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_one_server_with_the_ca_file_and_an_acl_user() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(dir.path(), "eg-test");
    let server = RedisServer::start_tls(&ca, false);
    let tls = RedisSettings {
        tls: ca_files(&ca),
        ..settings(server.tls_url(), PARTITIONS)
    };
    round_trip(&tls).await.unwrap();

    set_password(&server.url(), Some("~* &* +@all"));
    let as_user = RedisSettings {
        tls: ca_files(&ca),
        ..settings(
            format!("rediss://eg:{PASSWORD}@127.0.0.1:{}", tls_port(&server)),
            PARTITIONS,
        )
    };
    round_trip(&as_user).await.unwrap();
}

fn tls_port(server: &RedisServer) -> u16 {
    server.tls_url().rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_eg_must_not_trust_is_refused_naming_the_ca_setting() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(dir.path(), "eg-test");
    let other = TestCa::generate(&dir.path().join("other"), "someone-else");
    let server = RedisServer::start_tls(&ca, false);

    // The system's roots do not hold the test CA; another CA does not either.
    for files in [TlsFiles::default(), ca_files(&other)] {
        let error = refusal(&RedisSettings {
            tls: files,
            ..settings(
                format!("rediss://:{PASSWORD}@127.0.0.1:{}", tls_port(&server)),
                PARTITIONS,
            )
        })
        .await;
        assert!(error.contains("EG__REDIS__TLS_CA_FILE"), "{error}");
        assert!(error.contains("not signed by a CA eg trusts"), "{error}");
    }

    // `#insecure` skips the check (and warns).
    round_trip(&settings(format!("{}/#insecure", server.tls_url()), PARTITIONS))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_name_is_refused_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(dir.path(), "eg-test");
    let elsewhere = ca.issue("elsewhere", &["redis.elsewhere.test"]);
    let server = RedisServer::start_with(|options| {
        options.tls(TlsListen {
            cert: elsewhere.cert.clone(),
            key: elsewhere.key.clone(),
            ..TlsListen::new(ports::free_port(), &ca)
        })
    });
    let port = tls_port(&server);
    let error = refusal(&RedisSettings {
        tls: ca_files(&ca),
        ..settings(format!("rediss://127.0.0.1:{port}"), PARTITIONS)
    })
    .await;
    assert!(error.contains("does not name the host"), "{error}");
    assert!(error.contains("EG__REDIS__URL"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_a_plain_server_is_refused_saying_it_speaks_plain_redis() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(dir.path(), "eg-test");
    let (_process, port) = tcp_server(dir.path());
    let error = refusal(&RedisSettings {
        tls: ca_files(&ca),
        ..settings(format!("rediss://127.0.0.1:{port}"), PARTITIONS)
    })
    .await;
    assert!(
        error.contains("did not complete a TLS handshake") && error.contains("tls-port"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_needs_the_client_certificate_settings() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(dir.path(), "eg-test");
    let server = RedisServer::start_tls(&ca, true);
    let error = refusal(&RedisSettings {
        tls: ca_files(&ca),
        ..settings(server.tls_url(), PARTITIONS)
    })
    .await;
    assert!(error.contains("EG__REDIS__TLS_CERT_FILE"), "{error}");
    round_trip(&RedisSettings {
        tls: TlsFiles {
            ca_file: Some(ca.ca.clone()),
            cert_file: Some(ca.client.cert.clone()),
            key_file: Some(ca.client.key.clone()),
        },
        ..settings(server.tls_url(), PARTITIONS)
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_files_are_checked_when_the_store_is_built() {
    let missing = Store::connect(&RedisSettings {
        tls: TlsFiles {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..TlsFiles::default()
        },
        ..settings("rediss://127.0.0.1:1".into(), PARTITIONS)
    })
    .err()
    .unwrap()
    .to_string();
    assert!(
        missing.contains("EG__REDIS__TLS_CA_FILE") && missing.contains("/nonexistent/ca.pem"),
        "{missing}"
    );
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(dir.path(), "eg-test");
    let not_tls = Store::connect(&RedisSettings {
        tls: ca_files(&ca),
        ..settings(format!("redis://:{PASSWORD}@127.0.0.1:1"), PARTITIONS)
    })
    .err()
    .unwrap()
    .to_string();
    assert!(not_tls.contains("not a rediss:// URL"), "{not_tls}");
    assert!(!not_tls.contains(PASSWORD), "{not_tls}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_every_node_of_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(dir.path(), "eg-test");
    let cluster = RedisCluster::start_tls(3, 0, &ca);
    let tls = RedisSettings {
        cluster_nodes: cluster.urls(),
        tls: ca_files(&ca),
        ..settings(String::new(), 3)
    };
    let store = Store::connect(&tls).unwrap();
    assert!(store.is_cluster());
    round_trip(&tls).await.unwrap();
    // Every partition, so every primary, over TLS.
    let catalog = Catalog::new(store.clone());
    let version = catalog.version().await.unwrap();
    for p in store.keys().all_partitions() {
        let stored = store
            .publish(&p, version, &[event(&format!("x{}", p.index), 1)])
            .await
            .unwrap();
        assert_eq!(stored, PublishOutcome::Stored { duplicates: vec![] });
    }
    let untrusted = refusal(&RedisSettings {
        tls: TlsFiles::default(),
        ..tls
    })
    .await;
    assert!(untrusted.contains("EG__REDIS__TLS_CA_FILE"), "{untrusted}");
}
