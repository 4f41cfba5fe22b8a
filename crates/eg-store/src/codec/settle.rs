//! The **settle call**: the positional KEYS and ARGV of one `settle.lua` (or
//! `queue_settle.lua`) call, built in the order the script's header lists them, and the
//! settles of a whole shared entry joined into one item. A test in `codec` holds them to
//! the header.

use super::{encode_dead_letter_entry, encode_delivery, line_marker};
use crate::error::StoreError;
use crate::keyspace::{Partition, SENDERS_GROUP};
use crate::scripts;
use crate::settlement::{Retention, Settle, Settlement, SharedHold};
use std::collections::HashMap;

/// `settle.lua`'s KEYS before the first item's: ready stream, retry set, dead-letter
/// delay set, history index, paused index, delivered log.
pub(crate) const SETTLE_FIXED_KEYS: usize = 6;
/// `settle.lua`'s KEYS per item: event hash, history list, the three archive keys,
/// paused set.
pub(crate) const SETTLE_KEYS_PER_ITEM: usize = 6;
/// `settle.lua`'s ARGV before the first item's: group, history retention, most
/// histories, most steps, most archived, item count.
pub(crate) const SETTLE_FIXED_ARGS: usize = 6;
/// `settle.lua`'s ARGV per item: entry id, action, record, time, history entry,
/// archive id, subscription, whether the entry carries the event's body.
pub(crate) const SETTLE_ARGS_PER_ITEM: usize = 8;

/// What `settle.lua` does with one item, by the name it reads in ARGV.
fn settle_action(settlement: &Settlement) -> &'static str {
    match settlement {
        Settlement::Done => "done",
        Settlement::Retry { .. } => "retry",
        Settlement::Requeue { .. } => "requeue",
        Settlement::DeadLetter { .. } => "deadletter",
        Settlement::Park { .. } => "park",
        Settlement::RenewLock => "renew",
    }
}

/// The settle call's marker of a delivery that shares its fan-out entry: `S`, its index,
/// a space, how many share the entry (settle.lua).
fn shared_marker(shared: SharedHold) -> String {
    format!("S{} {}", shared.index, shared.of)
}

/// The KEYS and ARGV of one `settle.lua` call, in the order the script's header lists
/// them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SettleCall {
    pub keys: Vec<String>,
    pub args: Vec<String>,
    /// For each settle given, the call item whose result is its own (several settles of
    /// a whole shared entry share one item, [`whole_entries`]).
    pub answers: Vec<usize>,
}

/// How the settles of one call become the script's items.
enum CallItem<'a> {
    /// One settle, one item.
    One(&'a Settle),
    /// Every delivery of one shared entry (a fan-out's or a batch's), all done with one
    /// history step (JSON, or empty to keep none): one item (marker `S* <of>`) whose
    /// record lists the deliveries' delivered-log fields in index order, so a delivered
    /// batch costs the script one item, not one per event.
    Whole {
        first: &'a Settle,
        fields: Vec<String>,
        step: String,
    },
}

/// Whether a call joins the settles of a whole shared entry into one item: `settle.lua`
/// does; `queue_settle.lua`, whose entries are never shared, does not.
#[derive(Clone, Copy)]
enum Wholes {
    Join,
    Apart,
}

/// The settle call's marker of an item settling a whole shared entry of `of` deliveries.
fn whole_marker(of: usize) -> String {
    format!("S* {of}")
}

/// `items` as the script's items, in order (a whole entry where its first settle is), and
/// for each settle the item that answers it. A shared entry's settles make one item when
/// the call holds every one of its deliveries, each once, all done, with one step.
fn whole_entries<'a>(
    partition: &Partition,
    items: &'a [Settle],
    step_of: impl Fn(&Settle) -> String,
    keep_history: bool,
) -> (Vec<CallItem<'a>>, Vec<usize>) {
    let mut by_entry: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        if item.shared.is_some() {
            by_entry.entry(item.entry_id.as_str()).or_default().push(i);
        }
    }
    let log_prefix = format!("{}:", partition.history_index());
    // Each settle of a whole entry -> the entry's first settle; at that first settle, the
    // entry's fields and step.
    let mut joined: HashMap<usize, usize> = HashMap::new();
    let mut wholes: HashMap<usize, (Vec<String>, String)> = HashMap::new();
    for positions in by_entry.values() {
        let first = &items[positions[0]];
        let Some(of) = first.shared.map(|s| s.of) else {
            continue;
        };
        let mut by_index: Vec<Option<&Settle>> = vec![None; of];
        let mut complete = positions.len() == of;
        for &i in positions {
            let item = &items[i];
            match item.shared {
                Some(shared) if complete && shared.of == of && matches!(item.settlement, Settlement::Done) => {
                    match by_index.get_mut(shared.index) {
                        Some(slot @ None) => *slot = Some(item),
                        _ => complete = false,
                    }
                }
                _ => complete = false,
            }
        }
        if !complete {
            continue;
        }
        let step = step_of(first);
        let mut fields = Vec::with_capacity(of);
        for item in by_index.into_iter().flatten() {
            let list = partition.history(&item.delivery.topic, &item.delivery.event_id);
            match list.strip_prefix(&log_prefix) {
                // Steps compared as values: serialising each would cost more than the join saves.
                Some(field) if !field.contains('\n') && (!keep_history || item.history == first.history) => {
                    fields.push(field.to_owned())
                }
                _ => break,
            }
        }
        if fields.len() == of {
            joined.extend(positions.iter().map(|&i| (i, positions[0])));
            wholes.insert(positions[0], (fields, step));
        }
    }
    let mut call_items = Vec::with_capacity(items.len());
    let mut answers = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match (joined.get(&i), wholes.remove(&i)) {
            (_, Some((fields, step))) => {
                answers.push(call_items.len());
                call_items.push(CallItem::Whole {
                    first: item,
                    fields,
                    step,
                });
            }
            // A later settle of a whole entry: answered by the entry's item, placed at its
            // first settle (which comes earlier).
            (Some(first), None) => answers.push(answers.get(*first).copied().unwrap_or_default()),
            (None, None) => {
                answers.push(call_items.len());
                call_items.push(CallItem::One(item));
            }
        }
    }
    (call_items, answers)
}

impl SettleCall {
    /// Settles `items` of `partition` within `retention`. Each push below is one line
    /// of the script's header.
    pub fn new(partition: &Partition, items: &[Settle], retention: &Retention) -> Result<Self, StoreError> {
        if items.iter().any(|i| matches!(i.settlement, Settlement::RenewLock)) {
            return Err(StoreError::corrupt(
                partition.ready(),
                "a lock renewal is for queue streams only",
            ));
        }
        let fixed = [
            partition.ready(),
            partition.retry(),
            partition.deadletter_delay(),
            partition.history_index(),
            partition.paused_index(),
            partition.delivered_log(),
        ];
        Self::build(partition, fixed, SENDERS_GROUP, items, retention, Wholes::Join)
    }

    /// The same layout for holds on another stream: `fixed` are KEYS[1..6] (the stream,
    /// the set a retry goes into, the dead-letter delay set, the history index, the
    /// paused index or what stands in its place, the delivered log), `group` ARGV[1].
    pub fn on_stream(
        partition: &Partition,
        fixed: [String; SETTLE_FIXED_KEYS],
        group: &str,
        items: &[Settle],
        retention: &Retention,
    ) -> Result<Self, StoreError> {
        Self::build(partition, fixed, group, items, retention, Wholes::Apart)
    }

    fn build(
        partition: &Partition,
        fixed: [String; SETTLE_FIXED_KEYS],
        group: &str,
        items: &[Settle],
        retention: &Retention,
        wholes: Wholes,
    ) -> Result<Self, StoreError> {
        let keep_history = !retention.history_for.is_zero() && retention.histories_per_partition > 0;
        let step_of = |item: &Settle| match &item.history {
            Some(entry) if keep_history => entry.to_json(),
            _ => String::new(),
        };
        let (call_items, answers) = match wholes {
            Wholes::Join => whole_entries(partition, items, step_of, keep_history),
            Wholes::Apart => (items.iter().map(CallItem::One).collect(), (0..items.len()).collect()),
        };
        let mut keys = Vec::with_capacity(SETTLE_FIXED_KEYS + SETTLE_KEYS_PER_ITEM * call_items.len());
        let mut args = Vec::with_capacity(SETTLE_FIXED_ARGS + SETTLE_ARGS_PER_ITEM * call_items.len());
        keys.extend(fixed);
        args.extend([
            group.to_owned(),
            (retention.history_for.as_millis().max(1) as u64).to_string(),
            retention.histories_per_partition.to_string(),
            retention.steps_per_history.max(1).to_string(),
            retention.archived_per_partition.to_string(),
            call_items.len().to_string(),
        ]);
        for call_item in call_items {
            let item = match call_item {
                CallItem::One(item) => item,
                CallItem::Whole { first, fields, step } => {
                    // The item's keys are its first delivery's; the script names each
                    // event's history list from the history index and its field.
                    let delivery = &first.delivery;
                    let subscription = format!("{}/{}", delivery.topic, delivery.subscription);
                    let archive = partition.archive(&subscription);
                    keys.extend([
                        partition.event(&delivery.event_key),
                        partition.history(&delivery.topic, &delivery.event_id),
                        archive.all,
                        archive.waiting,
                        archive.records,
                        partition.paused(&subscription),
                    ]);
                    args.extend([
                        first.entry_id.clone(),
                        settle_action(&Settlement::Done).to_owned(),
                        fields.join("\n"),
                        "0".to_owned(),
                        step,
                        String::new(),
                        subscription,
                        whole_marker(fields.len()),
                    ]);
                    continue;
                }
            };
            let delivery = &item.delivery;
            let subscription = format!("{}/{}", delivery.topic, delivery.subscription);
            let (record, time) = match &item.settlement {
                Settlement::Done | Settlement::RenewLock => (String::new(), 0),
                Settlement::Retry { delivery, due } => (encode_delivery(delivery), due.0),
                Settlement::Requeue { delivery } => (encode_delivery(delivery), 0),
                Settlement::Park { delivery, until } => (encode_delivery(delivery), until.0),
                Settlement::DeadLetter { entry } => (
                    encode_dead_letter_entry(entry)
                        .map_err(|e| StoreError::corrupt(partition.deadletter_delay(), e))?,
                    entry.dead_lettered_at.0,
                ),
            };
            let history = step_of(item);
            let archive_id = match &item.settlement {
                Settlement::DeadLetter { .. } if retention.archived_per_partition > 0 => delivery.id.clone(),
                _ => String::new(),
            };
            let archive = partition.archive(&subscription);
            keys.extend([
                partition.event(&delivery.event_key),
                partition.history(&delivery.topic, &delivery.event_id),
                archive.all,
                archive.waiting,
                archive.records,
                partition.paused(&subscription),
            ]);
            args.extend([
                item.entry_id.clone(),
                settle_action(&item.settlement).to_owned(),
                record,
                time.to_string(),
                history,
                archive_id,
                subscription,
                match (line_marker(partition, delivery), item.shared) {
                    (Some(marker), _) => marker,
                    (None, Some(shared)) => shared_marker(shared),
                    (None, None) if item.carries_body => "1".to_owned(),
                    (None, None) => String::new(),
                },
            ]);
        }
        Ok(Self { keys, args, answers })
    }

    /// How many items the script is given (and answers).
    pub fn items(&self) -> usize {
        self.args.len().saturating_sub(SETTLE_FIXED_ARGS) / SETTLE_ARGS_PER_ITEM
    }

    /// The script call, ready to send.
    pub fn invocation(&self) -> redis::ScriptInvocation<'static> {
        self.invocation_of(&scripts::SETTLE)
    }

    /// The call of `script`, which reads this layout.
    pub fn invocation_of(&self, script: &'static redis::Script) -> redis::ScriptInvocation<'static> {
        let mut call = script.prepare_invoke();
        for key in &self.keys {
            call.key(key);
        }
        for arg in &self.args {
            call.arg(arg);
        }
        call
    }
}
