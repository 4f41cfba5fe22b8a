//! The Lua scripts, loaded once per process. `redis::Script` sends `EVALSHA` and falls
//! back to `EVAL` when the server does not know the script (after a restart).

use redis::Script;
use std::sync::LazyLock;

/// A script sent as the text of its files joined, in order: the helpers it uses first
/// (`stream_steps.lua`, `settle_steps.lua`, `next_catalog_version.lua`,
/// `object_naming.lua`), then its own.
macro_rules! script {
    ($name:ident, $($file:literal),+) => {
        pub static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(concat!($(include_str!(concat!("scripts/", $file))),+)));
    };
}

script!(PUBLISH, "publish.lua");
/// The publish script's text, for sending it with `EVAL` in one pipeline with `WAIT`.
pub const PUBLISH_SOURCE: &str = include_str!("scripts/publish.lua");
script!(
    SETTLE,
    "stream_steps.lua",
    "line_steps.lua",
    "settle_steps.lua",
    "settle.lua"
);
script!(QUEUE_SETTLE, "stream_steps.lua", "settle_steps.lua", "queue_settle.lua");
script!(QUEUE_RECEIVE, "queue_receive.lua");
script!(QUEUE_DROP, "queue_drop.lua");
script!(PROMOTE, "promote.lua");
script!(ACK_DELETE, "ack_delete.lua");
script!(EXPAND_FAN_OUT, "stream_steps.lua", "expand_fan_out.lua");
script!(
    NAME_DEAD_LETTER_OBJECTS,
    "object_naming.lua",
    "name_dead_letter_objects.lua"
);
script!(FINISH_DEAD_LETTERS, "finish_dead_letters.lua");
script!(NAME_ARCHIVE_OBJECTS, "object_naming.lua", "name_archive_objects.lua");
script!(FINISH_ARCHIVED, "finish_archived.lua");
script!(RAISE_VERSION, "raise_version.lua");
script!(PUT_TOPIC, "next_catalog_version.lua", "put_topic.lua");
script!(DELETE_TOPIC, "next_catalog_version.lua", "delete_topic.lua");
script!(REGENERATE_KEY, "next_catalog_version.lua", "regenerate_key.lua");
script!(PUT_SUBSCRIPTION, "next_catalog_version.lua", "put_subscription.lua");
script!(
    DELETE_SUBSCRIPTION,
    "next_catalog_version.lua",
    "delete_subscription.lua"
);
script!(LOAD_CATALOG, "load_catalog.lua");
script!(ENDPOINT_GATE, "endpoint_gate.lua");
script!(ENDPOINT_RECORD, "endpoint_record.lua");
script!(DELIVERY_GATE, "delivery_gate.lua");
script!(DELIVERY_FEEDBACK, "delivery_feedback.lua");
script!(CANCEL_RETRY, "line_steps.lua", "cancel_retry.lua");
script!(SWEEP_LINES, "line_steps.lua", "sweep_lines.lua");
script!(HEARTBEAT, "heartbeat.lua");
script!(UNPARK, "unpark.lua");
script!(REDRIVE, "redrive.lua");
script!(LAYOUT, "layout.lua");
script!(PURGE, "purge.lua");
script!(STATS_FLUSH, "stats_flush.lua");
script!(REPLAY_CHUNK, "replay_chunk.lua");
script!(REPLAY_FINISH, "replay_finish.lua");
script!(TAKE_LEASE, "take_lease.lua");
