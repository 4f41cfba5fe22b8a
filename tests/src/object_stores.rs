//! Dead letters in object storage, seen from outside: the records of every object in an
//! Azurite container or an S3 bucket (read with `object_store`, as any client would),
//! containers created the way an operator would (Azure's Create Container REST call,
//! signed with the account key), and the `[storage]` settings and dead-letter
//! destinations that point eg at them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use eg_testkit::{Azurite, S3Server, azurite};
use futures_util::TryStreamExt;
use hmac::{Hmac, Mac};
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::{DeadLettered, Options, eventually};

/// The Azure resource id of the emulator's account, as Event Grid subscriptions name it.
pub const AZURITE_RESOURCE_ID: &str = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/eg-tests/providers/Microsoft.Storage/storageAccounts/devstoreaccount1";

/// `deadLetterDestination` for a container of the emulator's account (Event Grid's JSON).
pub fn azure_dead_letter_to(container: &str) -> Value {
    json!({"endpointType": "StorageBlob", "properties": {
        "resourceId": AZURITE_RESOURCE_ID,
        "blobContainerName": container,
    }})
}

/// `deadLetterDestination` for a bucket through the S3 connection `connection`.
pub fn s3_dead_letter_to(connection: &str, bucket: &str, key_prefix: &str) -> Value {
    json!({"endpointType": "S3", "properties": {
        "connection": connection,
        "bucket": bucket,
        "keyPrefix": key_prefix,
    }})
}

impl Options {
    /// The emulator's account in `[storage]`, as its connection string.
    pub fn azurite(self, azurite: &Azurite) -> Self {
        self.env(
            "EG__STORAGE__ACCOUNTS__DEVSTOREACCOUNT1__CONNECTION_STRING",
            &azurite.connection_string(),
        )
    }

    /// The emulator's account with `key` instead of its own (wrong credentials).
    pub fn azurite_with_key(self, azurite: &Azurite, key: &str) -> Self {
        let connection_string = azurite.connection_string().replace(azurite::ACCOUNT_KEY, key);
        self.env(
            "EG__STORAGE__ACCOUNTS__DEVSTOREACCOUNT1__CONNECTION_STRING",
            &connection_string,
        )
    }

    /// The S3 server as the connection `name`, with its user's keys.
    pub fn s3_server(self, s3: &S3Server, name: &str) -> Self {
        self.s3_server_with_secret(s3, name, &s3.credentials().secret_access_key)
    }

    /// The S3 server as the connection `name`, with a secret of the test's choosing.
    pub fn s3_server_with_secret(self, s3: &S3Server, name: &str, secret: &str) -> Self {
        let setting = |field: &str| format!("EG__STORAGE__S3__{}__{field}", name.to_ascii_uppercase());
        self.env(&setting("ENDPOINT_URL"), &s3.endpoint())
            .env(&setting("REGION"), s3.region())
            .env(&setting("ACCESS_KEY_ID"), &s3.credentials().access_key_id)
            .env(&setting("SECRET_ACCESS_KEY"), secret)
    }
}

/// A client for `container` of the emulator's account.
pub fn azurite_container(azurite: &Azurite, container: &str) -> Arc<dyn ObjectStore> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let store = MicrosoftAzureBuilder::new()
        .with_client_options(ClientOptions::new().with_allow_http(true))
        .with_endpoint(azurite.blob_endpoint())
        .with_account(azurite::ACCOUNT)
        .with_access_key(azurite::ACCOUNT_KEY)
        .with_container_name(container)
        .build()
        .expect("an Azurite client");
    Arc::new(store)
}

/// A client for `bucket` of the S3 server, with its user's keys.
pub fn s3_bucket(s3: &S3Server, bucket: &str) -> Arc<dyn ObjectStore> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let credentials = s3.credentials();
    let store = AmazonS3Builder::new()
        .with_client_options(ClientOptions::new().with_allow_http(true))
        .with_endpoint(s3.endpoint())
        .with_region(s3.region())
        .with_access_key_id(credentials.access_key_id)
        .with_secret_access_key(credentials.secret_access_key)
        .with_bucket_name(bucket)
        .build()
        .expect("an S3 client");
    Arc::new(store)
}

/// Every record of every object in `store`, `path` being `<container>/<object path>` (the
/// dead-letter directory's layout). An object that is not a JSON array fails the test.
pub async fn object_records(store: &dyn ObjectStore, container: &str) -> Vec<DeadLettered> {
    let objects: Vec<object_store::ObjectMeta> = store
        .list(None)
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("list {container}: {e}"));
    let mut records = Vec::new();
    for object in objects {
        let got = store
            .get(&object.location)
            .await
            .unwrap_or_else(|e| panic!("get {}: {e}", object.location));
        let bytes = got
            .bytes()
            .await
            .unwrap_or_else(|e| panic!("read {}: {e}", object.location));
        let text = String::from_utf8_lossy(&bytes);
        let value: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON ({e}): {text}", object.location));
        let items = value
            .as_array()
            .unwrap_or_else(|| panic!("{} is not a JSON array: {text}", object.location));
        let path = PathBuf::from(container).join(object.location.as_ref());
        records.extend(items.iter().map(|record| DeadLettered {
            path: path.clone(),
            record: record.clone(),
        }));
    }
    records
}

/// Waits until `container` holds `count` records, and returns them.
pub async fn wait_object_records(
    store: &dyn ObjectStore,
    container: &str,
    count: usize,
    timeout: Duration,
) -> Vec<DeadLettered> {
    eventually(
        timeout,
        &format!("{count} dead-letter record(s) in {container}"),
        || async {
            let records = object_records(store, container).await;
            (records.len() >= count).then_some(records)
        },
    )
    .await
}

/// Creates `container` in the emulator's account (Azure's Create Container, signed with
/// the account key); fails the test when the emulator refuses.
pub fn create_container(azurite: &Azurite, container: &str) {
    let path = format!("/{}/{container}?restype=container", azurite::ACCOUNT);
    let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT").to_string();
    let version = "2021-08-06";
    let string_to_sign = format!(
        "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{version}\n/{}/{}/{container}\nrestype:container",
        azurite::ACCOUNT,
        azurite::ACCOUNT
    );
    let engine = base64::engine::general_purpose::STANDARD;
    let key = engine.decode(azurite::ACCOUNT_KEY).expect("the account key is base64");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("an HMAC key");
    mac.update(string_to_sign.as_bytes());
    let authorization = format!(
        "SharedKey {}:{}",
        azurite::ACCOUNT,
        engine.encode(mac.finalize().into_bytes())
    );
    let response = eg_testkit::http::request(
        azurite.blob_port(),
        "PUT",
        &path,
        &[
            ("x-ms-date", &date),
            ("x-ms-version", version),
            ("Authorization", &authorization),
        ],
        b"",
    )
    .unwrap_or_else(|e| panic!("create container {container}: {e}"));
    assert_eq!(response.status, 201, "create container {container}: {}", response.body);
}

/// The container and subscription folder of a dead-letter object's `path`
/// (`<container>/[<key prefix>/]<SUBSCRIPTION>/YYYY/M/D/H/<guid>.json`, as
/// [`object_records`] gives it), failing the test when the path is laid out otherwise.
pub fn object_layout(path: &std::path::Path, key_prefix: &str) -> (String, String) {
    let parts: Vec<String> = path.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let prefix: Vec<&str> = key_prefix.split('/').filter(|p| !p.is_empty()).collect();
    let shown = path.display();
    assert_eq!(
        parts.len(),
        7 + prefix.len(),
        "<container>/[{key_prefix}/]<SUB>/Y/M/D/H/<guid>.json: {shown}"
    );
    assert_eq!(parts[1..=prefix.len()], prefix[..], "the key prefix: {shown}");
    let rest = &parts[1 + prefix.len()..];
    let number = |part: &str, range: std::ops::RangeInclusive<u32>| {
        let n: u32 = part
            .parse()
            .unwrap_or_else(|_| panic!("{part:?} is not a number: {shown}"));
        assert!(
            range.contains(&n) && !part.starts_with('0') || part == "0",
            "{part:?}: {shown}"
        );
    };
    number(&rest[1], 2000..=2100);
    number(&rest[2], 1..=12);
    number(&rest[3], 1..=31);
    number(&rest[4], 0..=23);
    let guid = rest[5]
        .strip_suffix(".json")
        .unwrap_or_else(|| panic!("not a .json object: {shown}"));
    let groups: Vec<usize> = guid.split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12], "not a guid: {shown}");
    assert!(
        guid.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
        "not a guid: {shown}"
    );
    (parts[0].clone(), rest[0].clone())
}
