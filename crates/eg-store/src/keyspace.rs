//! Every Redis key eg uses, in one place (documented in docs/architecture.md).
//!
//! Keys of one partition share the hash tag `{<prefix>:p<N>}`; catalog keys share
//! `{<prefix>:catalog}`. A script only ever touches keys of one tag.

/// Consumer group of the senders on every ready stream.
pub const SENDERS_GROUP: &str = "senders";
/// Consumer group of the dead-letter workers on every dead-letter stream.
pub const DEADLETTER_GROUP: &str = "deadletter";

#[derive(Debug, Clone)]
pub struct Keyspace {
    prefix: String,
    partitions: u16,
}

/// The keys of one partition.
#[derive(Debug, Clone)]
pub struct Partition {
    pub index: u16,
    tag: String,
}

impl Partition {
    /// Ready deliveries, read by senders through the `senders` group.
    pub fn ready(&self) -> String {
        format!("{}:ready", self.tag)
    }
    /// Scheduled retries: sorted set of delivery records scored by due time (ms).
    pub fn retry(&self) -> String {
        format!("{}:retry", self.tag)
    }
    /// Dead-letter records waiting out the batching delay, scored by dead-letter time (ms).
    pub fn deadletter_delay(&self) -> String {
        format!("{}:deadletter:delay", self.tag)
    }
    /// Dead-letter records ready to write, read through the `deadletter` group.
    pub fn deadletter(&self) -> String {
        format!("{}:deadletter", self.tag)
    }
    /// This partition's copy of the catalog version, checked by the publish script.
    pub fn catalog_version(&self) -> String {
        format!("{}:catalog-version", self.tag)
    }
    /// One stored event: `b` = body, `r` = deliveries still outstanding.
    pub fn event(&self, event_key: &str) -> String {
        format!("{}:event:{event_key}", self.tag)
    }
    /// Delivery history of one event (list of `eg_core::history` entries, oldest first).
    pub fn history(&self, topic: &str, event_id: &str) -> String {
        format!("{}:history:{topic}/{event_id}", self.tag)
    }
    /// Every history list of the partition, scored by its last write (ms): the oldest go
    /// first when the partition holds more than its share of histories.
    pub fn history_index(&self) -> String {
        format!("{}:history", self.tag)
    }
    /// Deliveries of a paused subscription (`<topic>/<subscription>`), scored by the end
    /// of their time-to-live (ms).
    pub fn paused(&self, subscription: &str) -> String {
        format!("{}:paused:{subscription}", self.tag)
    }
    /// The subscriptions (`<topic>/<subscription>`) with deliveries in a paused set.
    pub fn paused_index(&self) -> String {
        format!("{}:paused", self.tag)
    }
    /// The dead-letter archive of one subscription (`<topic>/<subscription>`).
    pub fn archive(&self, subscription: &str) -> Archive {
        Archive {
            all: format!("{}:dl:{subscription}:all", self.tag),
            waiting: format!("{}:dl:{subscription}:waiting", self.tag),
            records: format!("{}:dl:{subscription}:records", self.tag),
        }
    }
}

/// The keys of one subscription's dead-letter archive in one partition.
#[derive(Debug, Clone)]
pub struct Archive {
    /// Every archived record id, scored by dead-letter time (ms).
    pub all: String,
    /// The ids not redriven yet, scored the same way.
    pub waiting: String,
    /// Record id -> dead-letter entry JSON + `\n` + event body; `<id>:r` -> redrive time (ms).
    pub records: String,
}

impl Keyspace {
    pub fn new(prefix: &str, partitions: u16) -> Self {
        Self {
            prefix: prefix.to_owned(),
            partitions: partitions.max(1),
        }
    }

    pub fn partitions(&self) -> u16 {
        self.partitions
    }

    pub fn partition(&self, index: u16) -> Partition {
        Partition {
            index,
            tag: format!("{{{}:p{index}}}", self.prefix),
        }
    }

    pub fn all_partitions(&self) -> impl Iterator<Item = Partition> + '_ {
        (0..self.partitions).map(|i| self.partition(i))
    }

    fn catalog(&self, name: &str) -> String {
        format!("{{{}:catalog}}:{name}", self.prefix)
    }
    /// Topic key -> topic JSON.
    pub fn topics(&self) -> String {
        self.catalog("topics")
    }
    /// `<topic>/key1`, `<topic>/key2` -> access key.
    pub fn topic_keys(&self) -> String {
        self.catalog("topic-keys")
    }
    /// `<topic>/<subscription>` -> subscription JSON.
    pub fn subscriptions(&self) -> String {
        self.catalog("subscriptions")
    }
    /// Topic key -> number of subscriptions.
    pub fn subscription_counts(&self) -> String {
        self.catalog("subscription-counts")
    }
    /// Incremented by every catalog change.
    pub fn catalog_version(&self) -> String {
        self.catalog("version")
    }
    /// The partition count the deployment was first started with.
    pub fn layout(&self) -> String {
        self.catalog("partitions")
    }
    /// One endpoint's health (`eg_core::probation`), in a hash tag of its own, so endpoints
    /// spread over a cluster's slots. The id is a hash: the key never shows the URL.
    pub fn endpoint(&self, id: &eg_core::probation::EndpointId) -> String {
        format!("{{{}:endpoint:{id}}}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_keys_share_one_hash_tag() {
        let p = Keyspace::new("eg", 4).partition(3);
        for key in [
            p.ready(),
            p.retry(),
            p.deadletter(),
            p.deadletter_delay(),
            p.catalog_version(),
            p.event("x"),
            p.history("orders", "{e1}"),
            p.history_index(),
            p.paused("orders/billing"),
            p.paused_index(),
            p.archive("orders/billing").all,
            p.archive("orders/billing").waiting,
            p.archive("orders/billing").records,
        ] {
            assert!(key.starts_with("{eg:p3}:"), "{key}");
        }
    }
}
