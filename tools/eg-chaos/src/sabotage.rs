//! Sabotage (`--sabotage N`): deleting queued deliveries and queue-subscription entries
//! behind the tiers' backs after the faults stop, so a run shows that the oracle notices
//! losses.

use crate::deployment;
use crate::redis_state::partition_keys;
use crate::scenario::Scenario;
use eg_store::keyspace::{self, Keyspace};

/// Deletes up to `count` queued deliveries behind the tiers' backs (due retries first,
/// then ready entries), so a run can show that the oracle notices losses.
pub async fn deliveries(url: &str, count: usize) -> anyhow::Result<usize> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut deleted = 0;
    let partitions = partition_keys(&mut conn).await?;
    for partition in &partitions {
        let popped: Vec<String> = redis::cmd("ZPOPMIN")
            .arg(partition.retry())
            .arg(count - deleted)
            .query_async(&mut conn)
            .await?;
        deleted += popped.len() / 2; // member, score, member, score …
        if deleted >= count {
            return Ok(deleted);
        }
    }
    for partition in &partitions {
        let stream = partition.ready();
        let entries: redis::Value = redis::cmd("XRANGE")
            .arg(&stream)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(count - deleted)
            .query_async(&mut conn)
            .await?;
        let redis::Value::Array(entries) = entries else {
            continue;
        };
        for entry in entries {
            let redis::Value::Array(parts) = entry else { continue };
            let Some(redis::Value::BulkString(id)) = parts.first() else {
                continue;
            };
            let id = String::from_utf8_lossy(id).into_owned();
            let _: i64 = redis::cmd("XACK")
                .arg(&stream)
                .arg(keyspace::SENDERS_GROUP)
                .arg(&id)
                .query_async(&mut conn)
                .await?;
            let _: i64 = redis::cmd("XDEL").arg(&stream).arg(&id).query_async(&mut conn).await?;
            deleted += 1;
        }
        if deleted >= count {
            break;
        }
    }
    Ok(deleted)
}

/// Deletes up to `count` entries of the queue subscriptions' streams (received or not)
/// behind the tiers' backs: their events can never be received or acknowledged again.
pub async fn queue_entries(url: &str, scenario: &Scenario, count: usize) -> anyhow::Result<usize> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut deleted = 0;
    for partition in Keyspace::new(deployment::PREFIX, deployment::PARTITIONS).all_partitions() {
        for queue in &scenario.queues {
            if deleted >= count {
                return Ok(deleted);
            }
            let stream = partition.queue(&format!("{}/{}", scenario.topics[queue.topic].name, queue.name));
            let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
                .arg(&stream)
                .arg("-")
                .arg("+")
                .arg("COUNT")
                .arg(count - deleted)
                .query_async(&mut conn)
                .await?;
            for (id, _) in entries {
                let _: i64 = redis::cmd("XACK")
                    .arg(&stream)
                    .arg(keyspace::RECEIVERS_GROUP)
                    .arg(&id)
                    .query_async(&mut conn)
                    .await?;
                let _: i64 = redis::cmd("XDEL").arg(&stream).arg(&id).query_async(&mut conn).await?;
                deleted += 1;
            }
        }
    }
    Ok(deleted)
}
