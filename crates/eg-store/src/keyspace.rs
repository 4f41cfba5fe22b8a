//! Every Redis key eg uses, in one place (documented in docs/architecture.md).
//!
//! Keys of one partition share one hash tag (`{<prefix>:p<N>.<k>}`, see
//! [`partition_tag`]); catalog keys share `{<prefix>:catalog}`. A script only ever
//! touches keys of one tag.

/// Consumer group of the senders on every ready stream.
pub const SENDERS_GROUP: &str = "senders";
/// Consumer group of the dead-letter workers on every dead-letter stream.
pub const DEADLETTER_GROUP: &str = "deadletter";
/// Consumer group on every queue stream (pull delivery): its pending list holds the locks.
pub const RECEIVERS_GROUP: &str = "receivers";
/// The one consumer of [`RECEIVERS_GROUP`]: a lock belongs to its token, not to a
/// process, so every ingress copy claims under the same name.
pub const LOCKS_CONSUMER: &str = "locks";

/// Redis Cluster's hash slots.
pub const SLOTS: u16 = 16384;

/// Every deployment on this Redis: a hash of prefix -> partition count, written by
/// every tier when it starts and on each heartbeat. The one key outside every prefix
/// (prefixed keys all start with `{`), so a tier whose prefix has no deployment yet can
/// see the prefixes that do with one `HGETALL`: no `KEYS` or `SCAN`, which a cluster
/// would answer for one node only.
pub const DEPLOYMENTS: &str = "eg:deployments";

/// The layout of the keys, recorded in Redis beside the partition count: a process
/// refuses to run on a Redis holding keys of another layout.
pub const LAYOUT_VERSION: &str = "slot-spread-1";

#[derive(Debug, Clone)]
pub struct Keyspace {
    prefix: String,
    /// One hash tag per partition, computed once.
    tags: Vec<String>,
}

/// The cluster hash slot of a key (CRC16/XMODEM of its hash tag, or of the whole key).
pub fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = match key.find('{') {
        Some(open) => match key[open + 1..].find('}') {
            Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
            _ => bytes,
        },
        None => bytes,
    };
    crc16::State::<crc16::XMODEM>::calculate(hashed) % SLOTS
}

/// The hash tag of partition `index` of `partitions`: `<prefix>:p<index>.<k>` with the
/// smallest `k` whose slot lies in the middle half of the partition's equal share of the
/// 16,384 slots. So partitions spread evenly over the slot space and a cluster whose
/// shards own contiguous equal slot ranges (what `redis-cli --cluster create` makes) gets
/// the same number of partitions per shard when the count is a multiple of the shard
/// count; the middle half keeps each partition clear of a shard boundary.
pub fn partition_tag(prefix: &str, index: u16, partitions: u16) -> String {
    let share = u32::from(SLOTS) / u32::from(partitions.max(1));
    let low = u32::from(index) * share + share / 4;
    let high = low + (share / 2).max(1);
    (1u32..)
        .map(|k| format!("{prefix}:p{index}.{k}"))
        .find(|tag| (low..high).contains(&u32::from(slot(tag))))
        .unwrap_or_else(|| format!("{prefix}:p{index}"))
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
    /// The object each dead-letter record is written in, once named: hash entry id →
    /// object name (`dead_letter_objects`). Only records still in the dead-letter stream.
    pub fn deadletter_object_of(&self) -> String {
        format!("{}:deadletter:objects", self.tag)
    }
    /// The records of each named dead-letter object still in the dead-letter stream: hash
    /// object name → their entry ids, space-separated.
    pub fn deadletter_object_members(&self) -> String {
        format!("{}:deadletter:object-members", self.tag)
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
    /// The delivered log: its buckets (`<this key>:<first entry id logged>`, hashes of
    /// `<topic>/<event id>` -> the history step of an event delivered by its only
    /// delivery, or the name of a `#<entry id>` field holding a step several share;
    /// `codec::shared_step_record`), scored by when each was created (ms).
    pub fn delivered_log(&self) -> String {
        format!("{}:delivered", self.tag)
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
    /// The queue of one queue-mode subscription (`<topic>/<subscription>`) in this
    /// partition: a stream (field `d` = delivery record) with group `receivers`, whose
    /// pending entries are the locks held.
    pub fn queue(&self, subscription: &str) -> String {
        format!("{}:queue:{subscription}", self.tag)
    }
    /// Released-with-delay deliveries of one queue subscription, scored by when they
    /// become receivable again (ms).
    pub fn queue_delayed(&self, subscription: &str) -> String {
        format!("{}:queue:{subscription}:delayed", self.tag)
    }
    /// Where the next receive's scan for expired locks of one queue goes on from (an
    /// entry id; absent: from the start).
    pub fn queue_cursor(&self, subscription: &str) -> String {
        format!("{}:queue:{subscription}:cursor", self.tag)
    }
    /// The subscriptions (`<topic>/<subscription>`) with a queue in this partition.
    /// An ordering line (list, head first): the unsettled deliveries of one key of an
    /// ordered subscription, as `codec::line_member`s. Only the head is ever in the
    /// ready stream, retry set or paused set.
    pub fn line(&self, subscription: &str, line_id: &str) -> String {
        format!("{}:line:{subscription}:{line_id}", self.tag)
    }

    /// How many deliveries wait behind their line's head, per subscription (hash,
    /// `<topic>/<subscription>` -> count): the status page's and backlog gauge's figure.
    pub fn lines_waiting(&self) -> String {
        format!("{}:lines", self.tag)
    }

    /// Every ordering line of the partition, for the stuck-line sweep (hash, line key ->
    /// the head delivery id the last sweep saw there, `''` when none has looked yet).
    /// `publish.lua` adds a line when it starts one; `line_steps.lua` removes it when it
    /// empties.
    pub fn line_index(&self) -> String {
        format!("{}:lines:index", self.tag)
    }

    /// The identities a topic with a duplicate detection window accepted within it
    /// (sorted set, identity -> accepted at in ms): read and written by `publish.lua` on
    /// the topic's home partition only; it expires a window after the topic's last publish.
    pub fn seen(&self, topic: &str) -> String {
        format!("{}:seen:{topic}", self.tag)
    }

    /// The partition's archive backlog (stream; entries t = topic, b = event body): the
    /// accepted events of archived topics waiting to be written to their object store
    /// (archive.md). Appended by `publish.lua`, bounded there; read by eg-deadletter.
    pub fn archive_backlog(&self) -> String {
        format!("{}:archive", self.tag)
    }

    /// The entries of each named archive object still in the backlog: hash object name →
    /// their entry ids, space-separated (`name_archive_objects.lua`). Only objects being
    /// written: a batch's worth per writer.
    pub fn archive_object_members(&self) -> String {
        format!("{}:archive:object-members", self.tag)
    }

    /// The archive writers' last problem per topic (hash, topic -> message), on the
    /// topic's home partition; a topic's field is removed when a write succeeds.
    pub fn archive_problems(&self) -> String {
        format!("{}:archive-problems", self.tag)
    }

    /// One replay job (hash: `spec`, `state`, `position`, `read`, `replayed`, `filtered`,
    /// `problem`, `updated`, `finished`; archive.md, "Replay"), in the partition its events
    /// are enqueued on, so `replay_chunk.lua` moves it in the step that enqueues them.
    pub fn replay(&self, id: &str) -> String {
        format!("{}:replay:{id}", self.tag)
    }

    /// The lease of the eg-deadletter copy working a replay job (string, PX).
    pub fn replay_lease(&self, id: &str) -> String {
        format!("{}:replay:{id}:lease", self.tag)
    }

    /// The partition's hash tag with its braces, which scripts that name keys of their
    /// own partition (the stuck-line sweep) put in front of a key's tail.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    pub fn queues_index(&self) -> String {
        format!("{}:queues", self.tag)
    }
    /// Wake-up hints for waiting receivers: one entry per publish or promotion naming
    /// the subscriptions that got events (capped; losing a hint costs latency only).
    pub fn queue_signal(&self) -> String {
        format!("{}:queue-signal", self.tag)
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
        let partitions = partitions.max(1);
        Self {
            prefix: prefix.to_owned(),
            tags: (0..partitions)
                .map(|i| format!("{{{}}}", partition_tag(prefix, i, partitions)))
                .collect(),
        }
    }

    pub fn partitions(&self) -> u16 {
        u16::try_from(self.tags.len()).unwrap_or(u16::MAX)
    }

    /// The partition every publish to `topic` (its key) is stored in while the topic
    /// has an ordered subscription, so each of its keys' lines lives under one hash tag.
    /// Stable for a given partition count.
    pub fn home_partition(&self, topic: &str) -> Partition {
        self.partition(slot(topic) % self.partitions())
    }

    /// Partition `index`; an index past the last wraps around (callers pick indexes below
    /// [`Keyspace::partitions`]).
    pub fn partition(&self, index: u16) -> Partition {
        let index = index % self.partitions();
        Partition {
            index,
            tag: self.tags[usize::from(index)].clone(),
        }
    }

    pub fn all_partitions(&self) -> impl Iterator<Item = Partition> + '_ {
        (0..self.partitions()).map(|i| self.partition(i))
    }

    /// The hash tag of every partition with its cluster slot, in partition order.
    pub fn slot_map(&self) -> Vec<(String, u16)> {
        self.tags.iter().map(|tag| (tag.clone(), slot(tag))).collect()
    }

    /// The recorded key layout (see [`LAYOUT_VERSION`]).
    pub fn layout_version(&self) -> String {
        self.catalog("layout")
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
    /// The partition count the deployment was first started with: this prefix's
    /// deployment marker. Recorded again on every heartbeat, so a Redis that lost its
    /// data gets it back while tiers run.
    pub fn layout(&self) -> String {
        self.catalog("partitions")
    }
    /// This prefix, as the deployments of this Redis know it (the field of
    /// [`DEPLOYMENTS`]).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    /// The secret lock tokens are signed with (pull delivery), created once.
    pub fn lock_secret(&self) -> String {
        self.catalog("lock-secret")
    }
    /// The status page's counts of one time bucket (numbered `<unix seconds / 10>`):
    /// field `<kind>|<label>` -> count. All stats keys share one hash tag.
    pub fn stats_bucket(&self, bucket: u64) -> String {
        format!("{{{}:stats}}:{bucket}", self.prefix)
    }
    /// The last stats flush applied of one writing process.
    pub fn stats_writer(&self, writer: &str) -> String {
        format!("{{{}:stats}}:writer:{writer}", self.prefix)
    }
    /// Every running tier process's heartbeat (`codec::heartbeat`): field
    /// `<tier>/<instance>`. One key, in a hash tag of its own.
    pub fn heartbeats(&self) -> String {
        format!("{{{}:heartbeats}}", self.prefix)
    }
    /// Dead-letter destinations that are failing (`dead_letter_health`): field
    /// `<topic>/<subscription>` (lower case) → the problem as JSON. One key, in a hash tag
    /// of its own.
    pub fn dead_letter_problems(&self) -> String {
        format!("{{{}:deadletter:problems}}", self.prefix)
    }
    /// Delivery identities that get no tokens (`identity_health`): field the identity's
    /// name → the problem as JSON. One key, in a hash tag of its own.
    pub fn identity_problems(&self) -> String {
        format!("{{{}:identity:problems}}", self.prefix)
    }
    /// One endpoint's probation record (`eg_core::probation`), in a hash tag of its own, so endpoints
    /// spread over a cluster's slots. The id is a hash: the key never shows the URL.
    pub fn endpoint(&self, id: &eg_core::probation::EndpointId) -> String {
        format!("{{{}:endpoint:{id}}}", self.prefix)
    }
    /// One subscription's pace under `deliveryLimits` (`eg_core::throttle`): a hash, in a
    /// hash tag of its own shared only with [`Keyspace::leases`], so subscriptions spread
    /// over a cluster's slots and one script reads both.
    pub fn limit(&self, id: &eg_core::throttle::ThrottleId) -> String {
        format!("{{{}:sub:{id}}}:limit", self.prefix)
    }
    /// The attempts in flight of one subscription with `maxConcurrentRequests`: a sorted set,
    /// lease id → expiry (ms).
    /// The archive retention sweep's lease (string, the holder's name, PX): one
    /// eg-deadletter copy sweeps at a time (archive.md).
    pub fn archive_sweep_lease(&self) -> String {
        format!("{{{}:archive-sweep}}", self.prefix)
    }

    /// Every replay job (hash, job id -> `<partition> <topic>/<subscription>`): where each
    /// lives, for listing them and for the workers looking for running ones.
    pub fn replays(&self) -> String {
        format!("{{{}:replays}}", self.prefix)
    }

    pub fn leases(&self, id: &eg_core::throttle::ThrottleId) -> String {
        format!("{{{}:sub:{id}}}:leases", self.prefix)
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
            p.deadletter_object_of(),
            p.deadletter_object_members(),
            p.archive_object_members(),
            p.catalog_version(),
            p.event("x"),
            p.history("orders", "{e1}"),
            p.history_index(),
            p.delivered_log(),
            p.paused("orders/billing"),
            p.paused_index(),
            p.archive("orders/billing").all,
            p.archive("orders/billing").waiting,
            p.archive("orders/billing").records,
            p.queue("orders/billing"),
            p.queue_delayed("orders/billing"),
            p.queue_cursor("orders/billing"),
            p.queues_index(),
            p.queue_signal(),
            p.line("orders/billing", "00ff"),
            p.lines_waiting(),
            p.line_index(),
        ] {
            assert!(key.starts_with("{eg:p3."), "{key}");
            assert_eq!(slot(&key), slot(&p.ready()), "{key}");
        }
    }

    #[test]
    fn slots_match_redis_cluster() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_eq!(slot("foo{}{bar}"), slot("foo{}{bar}"));
        assert_eq!(slot("{}foo"), 9500);
        assert_eq!(slot("{eg:p0.12}:ready"), 2763);
        assert_eq!(slot("123456789"), 12739);
    }

    #[test]
    fn partitions_spread_evenly_over_slots_and_three_shards() {
        for partitions in [1u16, 3, 4, 6, 12, 16, 48, 64] {
            let keys = Keyspace::new("eg", partitions);
            let share = u32::from(SLOTS) / u32::from(partitions);
            for (index, (tag, slot)) in keys.slot_map().iter().enumerate() {
                let owner = u32::from(*slot) / share;
                assert_eq!(
                    owner, index as u32,
                    "partition {index} ({tag}) at slot {slot} of {partitions}"
                );
            }
            if partitions % 3 == 0 {
                // Shards of a 3-primary cluster: 0-5460, 5461-10922, 10923-16383.
                let mut per_shard = [0u16; 3];
                for (_, slot) in keys.slot_map() {
                    per_shard[match slot {
                        0..=5460 => 0,
                        5461..=10922 => 1,
                        _ => 2,
                    }] += 1;
                }
                assert_eq!(per_shard, [partitions / 3; 3], "{partitions} partitions");
            }
        }
    }
}
