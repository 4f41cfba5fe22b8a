//! eg-sender: reads ready deliveries from every partition, sends them to their
//! destinations (webhooks, storage queues, brokers) with bounded concurrency, and
//! settles each attempt by the policy of eg-core: done, retry at T, dead-letter, or
//! drop. Run as many copies as load needs.

mod attempt_trace;
mod destination;
mod destinations;
mod endpoint_records;
mod identities;
mod late;
mod limits;
mod probation;
mod reader;
mod settle_queue;
mod steps;
mod store;
#[cfg(test)]
mod test_redis;
#[cfg(test)]
mod test_subscriptions;
mod verdict;

use eg_runtime::Startup;
use std::sync::Arc;

eg_runtime::use_mimalloc!();

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let process = Startup::tier("eg-sender", |s| s.sender.listen.clone()).start().await?;
    let sender = reader::Sender::build(&process).await?;
    process.keep_catalog_fresh(sender.catalog());
    Arc::clone(&sender).run(process.shutdown.clone()).await;
    process.finish().await
}
