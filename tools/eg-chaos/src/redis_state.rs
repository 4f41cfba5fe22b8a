//! What Redis holds, read behind the tiers' backs with eg-store's key names: the queue
//! subscriptions' depth (the drain waits for it to reach zero) and, after the drain,
//! every partition's leftovers for the report.

use crate::deployment;
use crate::scenario::Scenario;
use eg_store::keyspace::{self, Keyspace, Partition};
use serde_json::{Value, json};

/// Deliveries still queued, locked or delayed on the queue subscriptions, and archive
/// entries not yet written to their store, over every partition.
pub async fn queue_depth(url: &str, scenario: &Scenario) -> anyhow::Result<u64> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut depth = 0u64;
    for partition in Keyspace::new(deployment::PREFIX, deployment::PARTITIONS).all_partitions() {
        for queue in &scenario.queues {
            let name = format!("{}/{}", scenario.topics[queue.topic].name, queue.name);
            let queued: u64 = redis::cmd("XLEN")
                .arg(partition.queue(&name))
                .query_async(&mut conn)
                .await?;
            let delayed: u64 = redis::cmd("ZCARD")
                .arg(partition.queue_delayed(&name))
                .query_async(&mut conn)
                .await?;
            depth += queued + delayed;
        }
        let archive: u64 = redis::cmd("XLEN")
            .arg(partition.archive_backlog())
            .query_async(&mut conn)
            .await?;
        depth += archive;
    }
    Ok(depth)
}

/// The partitions' keys, named by eg-store's keyspace (the one thing this program takes
/// from the code under test), after checking that every ready stream exists: every tier
/// creates them at start, so a missing one means the names disagree with the tiers', and
/// counting leftovers under wrong names would find none.
pub async fn partition_keys(conn: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<Vec<Partition>> {
    let partitions: Vec<Partition> = Keyspace::new(deployment::PREFIX, deployment::PARTITIONS)
        .all_partitions()
        .collect();
    for partition in &partitions {
        let exists: bool = redis::cmd("EXISTS").arg(partition.ready()).query_async(conn).await?;
        anyhow::ensure!(
            exists,
            "the ready stream {} does not exist: eg-store's keyspace and the tiers disagree",
            partition.ready()
        );
    }
    Ok(partitions)
}

/// What is left in Redis after the drain: every queue should be empty and every event
/// body freed.
pub async fn redis_state(url: &str) -> anyhow::Result<Value> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut partitions = Vec::new();
    let mut leftovers = 0u64;
    for partition in partition_keys(&mut conn).await? {
        let ready: u64 = redis::cmd("XLEN").arg(partition.ready()).query_async(&mut conn).await?;
        let retry: u64 = redis::cmd("ZCARD")
            .arg(partition.retry())
            .query_async(&mut conn)
            .await?;
        let delay: u64 = redis::cmd("ZCARD")
            .arg(partition.deadletter_delay())
            .query_async(&mut conn)
            .await?;
        let deadletter: u64 = redis::cmd("XLEN")
            .arg(partition.deadletter())
            .query_async(&mut conn)
            .await?;
        let ready_pending = pending(&mut conn, &partition.ready(), keyspace::SENDERS_GROUP).await?;
        let deadletter_pending = pending(&mut conn, &partition.deadletter(), keyspace::DEADLETTER_GROUP).await?;
        let mut events = 0u64;
        let mut cursor: u64 = 0;
        let mut examples = Vec::new();
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(partition.event("*"))
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await?;
            events += keys.len() as u64;
            for key in keys.iter().take(5usize.saturating_sub(examples.len())) {
                examples.push(leftover_body(&mut conn, key).await?);
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        leftovers += ready + retry + delay + deadletter + events;
        partitions.push(json!({
            "partition": partition.index, "ready": ready, "ready_pending": ready_pending, "retry": retry,
            "deadletter_delay": delay, "deadletter": deadletter, "deadletter_pending": deadletter_pending,
            "event_bodies": events, "event_body_examples": examples,
        }));
    }
    Ok(json!({ "leftovers": leftovers, "partitions": partitions }))
}

/// A leftover event hash, for the report: its key, its count of outstanding deliveries
/// and the id of the event it holds (so the journal and the logs can be searched).
async fn leftover_body(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> anyhow::Result<Value> {
    let (body, outstanding): (Option<String>, Option<String>) =
        redis::cmd("HMGET").arg(key).arg("b").arg("r").query_async(conn).await?;
    let event_id = body
        .as_deref()
        .and_then(|b| serde_json::from_str::<Value>(b).ok())
        .and_then(|v| v.get("id").cloned());
    Ok(json!({ "key": key, "outstanding": outstanding, "event_id": event_id }))
}

/// How many entries of a stream's consumer group are pending (read, not acknowledged).
async fn pending(conn: &mut redis::aio::MultiplexedConnection, stream: &str, group: &str) -> anyhow::Result<i64> {
    let summary: redis::Value = redis::cmd("XPENDING").arg(stream).arg(group).query_async(conn).await?;
    Ok(match summary {
        redis::Value::Array(items) => match items.first() {
            Some(redis::Value::Int(n)) => *n,
            _ => -1,
        },
        _ => -1,
    })
}
