//! The Lua scripts, loaded once per process. `redis::Script` sends `EVALSHA` and falls
//! back to `EVAL` when the server does not know the script (after a restart).

use redis::Script;
use std::sync::LazyLock;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!(concat!("scripts/", $file))));
    };
}

/// A script that changes the catalog: `next_catalog_version.lua` goes first.
macro_rules! catalog_script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("scripts/next_catalog_version.lua"),
                include_str!(concat!("scripts/", $file))
            ))
        });
    };
}

script!(PUBLISH, "publish.lua");
/// The publish script's text, for sending it with `EVAL` in one pipeline with `WAIT`.
pub const PUBLISH_SOURCE: &str = include_str!("scripts/publish.lua");
/// A script that works on stream entries: `stream_steps.lua` (helpers) goes first.
macro_rules! stream_script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("scripts/stream_steps.lua"),
                include_str!(concat!("scripts/", $file))
            ))
        });
    };
}

/// A script that settles holds: `stream_steps.lua`, then `settle_steps.lua` (the steps
/// every settle shares) go first.
macro_rules! settle_script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("scripts/stream_steps.lua"),
                include_str!("scripts/settle_steps.lua"),
                include_str!(concat!("scripts/", $file))
            ))
        });
    };
}

settle_script!(SETTLE, "settle.lua");
settle_script!(QUEUE_SETTLE, "queue_settle.lua");
script!(QUEUE_RECEIVE, "queue_receive.lua");
script!(QUEUE_DROP, "queue_drop.lua");
script!(PROMOTE, "promote.lua");
script!(ACK_DELETE, "ack_delete.lua");
stream_script!(EXPAND_FAN_OUT, "expand_fan_out.lua");
script!(NAME_DEAD_LETTER_OBJECTS, "name_dead_letter_objects.lua");
script!(FINISH_DEAD_LETTERS, "finish_dead_letters.lua");
script!(RAISE_VERSION, "raise_version.lua");
catalog_script!(PUT_TOPIC, "put_topic.lua");
catalog_script!(DELETE_TOPIC, "delete_topic.lua");
catalog_script!(REGENERATE_KEY, "regenerate_key.lua");
catalog_script!(PUT_SUBSCRIPTION, "put_subscription.lua");
catalog_script!(DELETE_SUBSCRIPTION, "delete_subscription.lua");
script!(LOAD_CATALOG, "load_catalog.lua");
script!(ENDPOINT_GATE, "endpoint_gate.lua");
script!(ENDPOINT_RECORD, "endpoint_record.lua");
script!(CANCEL_RETRY, "cancel_retry.lua");
script!(HEARTBEAT, "heartbeat.lua");
script!(UNPARK, "unpark.lua");
script!(REDRIVE, "redrive.lua");
script!(LAYOUT, "layout.lua");
script!(PURGE, "purge.lua");
script!(STATS_FLUSH, "stats_flush.lua");
