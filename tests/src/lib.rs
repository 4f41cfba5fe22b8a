//! System test harness: the four eg binaries as child processes sharing one real Redis,
//! a temporary dead-letter directory, and recording webhook receivers. The tests that use
//! it are one binary, `tests/system/`, with a module per area.
//!
//! * [`System::start`] starts `redis-server`, `eg-ingress`, `eg-scheduler`,
//!   `eg-deadletter` and N `eg-sender`s (from `target/<profile>/`, built by
//!   `cargo build --workspace`), each logging to a file of its own, and waits until
//!   every one answers `/healthz` (ingress also `/readyz`).
//! * [`Receiver::start`] is a webhook endpoint that records every request and answers
//!   as told ([`Behaviour`]).
//! * Every child process is killed when the [`System`] is dropped; when the test is
//!   failing, the tail of every log is printed and the logs are kept.
//! * With `EG_TEST_REDIS=cluster` in the environment, the Redis is a 3-primary Redis
//!   Cluster instead of one server (`just test-cluster` runs a part of the suite that
//!   way); tests that stop or restart Redis need the single server and are not part of
//!   that run.
//!
//! One module per job, all re-exported here:
//!
//! | module | what it does |
//! |---|---|
//! | `system` | the deployment: tier processes, Redis, admin and publish calls, metrics pages, dead-letter files, logs |
//! | `receiver` | the recording webhook endpoint and how it answers |
//! | `fixtures` | events (one, or numbered ones by the batch) and subscription bodies in the APIs' shapes |
//! | `dead_letter_operations` | list, show, redrive and purge dead letters through the management API, checked the same for every destination |
//! | `replies` | reading HTTP answers; checking Event Grid's error body |
//! | `metrics` | summing samples of Prometheus text |
//! | `object_stores` | dead letters in Azurite and the S3 server: reading objects, creating containers, `[storage]` settings |
//! | `waiting` | waiting for a condition with a deadline |
//! | `ids` | reading event ids from published events; sorting and counting them |
//! | `sas` | SAS tokens and percent encoding as Event Grid's SDKs build them |
//! | `python_sdk` | running a `tests/python/` script under a Python with Azure's `azure-eventgrid` |
//! | `openapi_client` | a client generated from the served OpenAPI document, compiled and run under Node |

mod dead_letter_operations;
mod fixtures;
mod ids;
mod metrics;
mod object_stores;
mod openapi_client;
mod python_sdk;
mod receiver;
mod replies;
mod sas;
mod system;
mod waiting;

pub use eg_testkit::tier::PROXY_VARIABLES;

pub use dead_letter_operations::{check_dead_letter_operations, order_events, refusing_three_times};
pub use fixtures::{dead_letter_to, event, numbered_events, subscription};
pub use ids::{duplicates, ids_of, sorted, strings, tally};
pub use metrics::metric;
pub use object_stores::{
    AZURITE_RESOURCE_ID, azure_dead_letter_to, azurite_container, create_container, object_layout, object_records,
    s3_bucket, s3_dead_letter_to, wait_object_records,
};
pub use openapi_client::{ClientRun, run_generated_client};
pub use python_sdk::{PYTHON_SDK_VERSION, PythonOutput, run_python_sdk};
pub use receiver::{BearerCheck, Behaviour, Receiver, Recorded, Reply, Validation};
pub use replies::{assert_refused, json_reply, text_reply};
pub use sas::{in_an_hour, percent_encode, sas_token};
pub use system::{
    ADMIN_TOKEN, DeadLettered, Options, REDIS_PASSWORD, Redis, System, TierId, UnloggedTier,
    assert_subscription_refused,
};
pub use waiting::{DEADLINE, eventually, wait_subscription_successes, wait_successes};
