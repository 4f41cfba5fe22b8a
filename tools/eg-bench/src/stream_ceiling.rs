//! The raw Redis ceiling of pull delivery: what consumers reading a Redis stream through a
//! consumer group get with nothing of eg in between. The same number of entries of the
//! same size as the pull benchmark's events are added to one stream; then `clients`
//! connections each loop `XREADGROUP COUNT 100` → `XACK` + `XDEL` of what they read
//! (the two pipelined, as a client would) until the stream is empty. Measured on the
//! deployment's own Redis, in the same run, so the pull API's rate has a ceiling from
//! the same machine at the same moment.

use anyhow::bail;
use redis::aio::MultiplexedConnection;
use redis::streams::StreamReadReply;
use std::time::Instant;

const KEY: &str = "egbench:pull-ceiling";
const GROUP: &str = "egbench";
/// Entries per `XREADGROUP`: the pull benchmark's `maxEvents`.
const COUNT: usize = 100;

/// Entries read, acknowledged and deleted per second.
pub async fn read_ack_delete(
    mut conn: MultiplexedConnection,
    clients: Vec<MultiplexedConnection>,
    entries: u64,
    entry: &str,
) -> anyhow::Result<f64> {
    redis::cmd("DEL").arg(KEY).query_async::<()>(&mut conn).await?;
    let mut added = 0;
    while added < entries {
        let chunk = (entries - added).min(1000);
        let mut pipe = redis::pipe();
        for _ in 0..chunk {
            pipe.cmd("XADD").arg(KEY).arg("*").arg("d").arg(entry).ignore();
        }
        pipe.query_async::<()>(&mut conn).await?;
        added += chunk;
    }
    redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(KEY)
        .arg(GROUP)
        .arg("0")
        .query_async::<()>(&mut conn)
        .await?;

    let started = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, conn)| tokio::spawn(consume(conn, format!("c{i}"))))
        .collect();
    let mut consumed = 0;
    for task in tasks {
        consumed += task.await??;
    }
    let seconds = started.elapsed().as_secs_f64();
    redis::cmd("DEL").arg(KEY).query_async::<()>(&mut conn).await?;
    if consumed != entries {
        bail!("the stream ceiling consumed {consumed} entries of {entries} added");
    }
    Ok(consumed as f64 / seconds)
}

/// One client: read 100, acknowledge and delete them, until a read comes back empty.
async fn consume(mut conn: MultiplexedConnection, consumer: String) -> anyhow::Result<u64> {
    let mut consumed = 0;
    loop {
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&consumer)
            .arg("COUNT")
            .arg(COUNT)
            .arg("STREAMS")
            .arg(KEY)
            .arg(">")
            .query_async(&mut conn)
            .await?;
        let ids: Vec<String> = reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| k.ids)
            .map(|e| e.id)
            .collect();
        if ids.is_empty() {
            return Ok(consumed);
        }
        redis::pipe()
            .cmd("XACK")
            .arg(KEY)
            .arg(GROUP)
            .arg(&ids)
            .ignore()
            .cmd("XDEL")
            .arg(KEY)
            .arg(&ids)
            .ignore()
            .query_async::<()>(&mut conn)
            .await?;
        consumed += ids.len() as u64;
    }
}
