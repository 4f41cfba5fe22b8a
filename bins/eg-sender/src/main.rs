//! eg-sender: reads ready deliveries from every partition, POSTs them to their
//! webhooks with bounded concurrency, and settles each attempt by the policy of
//! eg-core: done, retry at T, dead-letter, or drop. Run as many copies as load needs.

// The broker destinations, until the router (destinations.rs) sends to them.
#[cfg_attr(not(test), allow(dead_code))]
mod broker_message;
mod destination;
mod late;
#[cfg_attr(not(test), allow(dead_code))]
mod nats;
mod probation;
#[cfg_attr(not(test), allow(dead_code))]
mod rabbitmq;
mod reader;
mod settle_queue;
mod steps;
mod store;
#[cfg(test)]
mod test_subscriptions;
mod verdict;
mod webhook;

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
