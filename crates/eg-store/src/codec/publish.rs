//! The **publish call**: the positional KEYS and ARGV of one `publish.lua` call, built
//! in the order the script's header lists them, as [`super::SettleCall`] is for
//! `settle.lua`. The script reads them by position, so they are built in one place and a
//! test holds them to the header.

use super::{encode_carried_delivery, encode_delivery, encode_fan_out, line_member};
use crate::keyspace::Partition;
use crate::scripts;
use eg_core::subscription::BatchSettings;
use eg_core::{Delivery, UnixMillis};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// One event of a publish request, ready to store: its body and its deliveries.
pub struct EventToStore {
    pub event_key: String,
    pub body: String,
    pub deliveries: Vec<Delivery>,
}

/// Where a publish puts deliveries other than one push entry each, by subscription
/// (`<topic>/<subscription>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routes {
    /// Queue-mode subscriptions: their deliveries go to their queue stream, for pull
    /// receivers.
    pub queued: HashSet<String>,
    /// Push subscriptions that batch (`maxEventsPerBatch` > 1): the lone push deliveries
    /// of one request to such a subscription are stored together, one `Batch` entry per
    /// request the sender will make of them (`eg_core::batch::plan`), so they are read,
    /// sent and settled as one.
    pub batched: HashMap<String, BatchSettings>,
}

impl Routes {
    /// Routes with `queued` queue-mode subscriptions and no batching one.
    pub fn queued(queued: HashSet<String>) -> Self {
        Self {
            queued,
            batched: HashMap::new(),
        }
    }
}

/// Most events in one `Batch` entry, whatever a subscription's batch size: what one
/// `XADD` in `publish.lua` may carry (Lua's `unpack` takes a few thousand values).
const MOST_PER_BATCH_ENTRY: usize = 1000;

/// The duplicate check of one publish call (deduplication.md): the topic's window and
/// each event's identity, in event order. The script skips an event whose identity the
/// topic's seen set holds from within the window, and remembers the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateCheck {
    /// The topic's key: its seen set is `Partition::seen(topic)`.
    pub topic: String,
    /// One identity per event (`eg_core::topic::duplicate_identity`).
    pub identities: Vec<String>,
    pub window: Duration,
    /// The caller's clock: the score an identity is remembered with.
    pub now: UnixMillis,
}

/// A topic's archive in one publish call (archive.md): every event not skipped as a
/// duplicate is appended to the partition's archive stream, in the same atomic step,
/// bounded by `max_backlog` entries per partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveAppend {
    /// The topic's key, written in each entry (`t`).
    pub topic: String,
    pub max_backlog: u64,
    pub when_full: WhenFull,
}

/// What a publish of an archived topic does when its partition's backlog is at the bound
/// (`EG__ARCHIVE__WHEN_FULL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WhenFull {
    /// Refused (`503 ArchiveBacklogFull`), nothing stored: never a gap.
    #[default]
    Refuse,
    /// Stored, and the oldest waiting entries trimmed (counted).
    DropOldest,
}

impl WhenFull {
    /// The word `publish.lua` takes (ARGV[7]).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Refuse => "refuse",
            Self::DropOldest => "drop-oldest",
        }
    }
}

/// `publish.lua`'s number of deliveries for an event that has none and is only archived.
const ARCHIVE_ONLY_MARKER: &str = "-1";

/// Where `publish.lua` puts a delivery (ARGV's target): the partition's ready stream, for
/// the senders, the q-th queue stream of the call, for pull receivers, or the l-th
/// ordering line of the call (numbered after the Q queues in ARGV).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Destination {
    Ready,
    Queue(usize),
    Line(usize),
}

/// `publish.lua`'s marker for "no event hash: one fan-out record follows" where an
/// event's number of deliveries stands (the `FanOut` layout).
const FAN_OUT_MARKER: &str = "0";

/// `publish.lua`'s marker for "no event hash: a batch number and one carried record
/// follow" where an event's number of deliveries stands (the `Batch` layout).
const BATCH_MARKER: &str = "-2";

/// The batch entry (numbered from 1 in the call) each event joins, if any: the events
/// whose only delivery is a push one to a subscription in `batched`, cut per
/// subscription as its sender will cut requests (`eg_core::batch::plan`), at most
/// [`MOST_PER_BATCH_ENTRY`] each.
fn batch_numbers(events: &[EventToStore], routes: &Routes) -> Vec<Option<usize>> {
    let mut numbers = vec![None; events.len()];
    let batched = &routes.batched;
    if batched.is_empty() {
        return numbers;
    }
    // Per subscription, in the order first met: its settings and its events.
    let mut members: Vec<(&String, BatchSettings, Vec<usize>)> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let [d] = e.deliveries.as_slice() else {
            continue;
        };
        if d.line.is_some() {
            continue;
        }
        let key = subscription_key(d);
        let Some((name, settings)) = batched.get_key_value(&key).filter(|_| !routes.queued.contains(&key)) else {
            continue;
        };
        match members.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, _, list)) => list.push(i),
            None => members.push((name, *settings, vec![i])),
        }
    }
    let mut next = 1;
    for (_, settings, list) in members {
        let settings = settings.at_most(MOST_PER_BATCH_ENTRY as u32);
        let sizes: Vec<usize> = list.iter().map(|&i| events[i].body.len()).collect();
        for range in eg_core::batch::plan(&sizes, settings) {
            for &i in &list[range] {
                numbers[i] = Some(next);
            }
            next += 1;
        }
    }
    numbers
}

/// The KEYS and ARGV of one `publish.lua` call. The bodies are borrowed from the events:
/// they are copied once, into the command sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PublishCall<'a> {
    pub keys: Vec<String>,
    pub args: Vec<Cow<'a, str>>,
}

impl<'a> PublishCall<'a> {
    /// Stores `events` on `partition`, matched against `catalog_version`; deliveries go
    /// where `routes` says. With `check`, an event already seen within the topic's
    /// window is skipped.
    pub fn new(
        partition: &Partition,
        catalog_version: u64,
        events: &'a [EventToStore],
        routes: &Routes,
        check: Option<&'a DuplicateCheck>,
        archive: Option<&'a ArchiveAppend>,
    ) -> Self {
        let queued = &routes.queued;
        // The queue streams and lines written to, each numbered from 1 in the order first met.
        let mut queues: Vec<String> = Vec::new();
        // (line key, its subscription)
        let mut lines: Vec<(String, String)> = Vec::new();
        let mut destination_of = |d: &Delivery| -> Destination {
            let key = subscription_key(d);
            if let Some(line_id) = &d.line {
                let line = partition.line(&key, line_id);
                return match lines.iter().position(|(l, _)| *l == line) {
                    Some(at) => Destination::Line(at + 1),
                    None => {
                        lines.push((line, key));
                        Destination::Line(lines.len())
                    }
                };
            }
            if !queued.contains(&key) {
                return Destination::Ready;
            }
            match queues.iter().position(|q| *q == key) {
                Some(at) => Destination::Queue(at + 1),
                None => {
                    queues.push(key);
                    Destination::Queue(queues.len())
                }
            }
        };
        // Every destination first, so a line's number after the queues is known below.
        let destinations: Vec<Vec<Destination>> = events
            .iter()
            .map(|e| e.deliveries.iter().map(&mut destination_of).collect())
            .collect();
        let batch_numbers = batch_numbers(events, routes);
        let mut per_event: Vec<Cow<'a, str>> = Vec::new();
        let mut identities = check.map(|c| c.identities.iter());
        for ((e, destinations), batch) in events.iter().zip(&destinations).zip(batch_numbers) {
            if let Some(identities) = identities.as_mut() {
                per_event.push(identities.next().map_or("", String::as_str).into());
            }
            per_event.push(e.body.as_str().into());
            if e.deliveries.is_empty() {
                // Matched nothing: stored only because the topic is archived.
                per_event.push(ARCHIVE_ONLY_MARKER.into());
                continue;
            }
            if let (Some(number), [d]) = (batch, e.deliveries.as_slice()) {
                per_event.extend([
                    BATCH_MARKER.into(),
                    number.to_string().into(),
                    encode_carried_delivery(d).into(),
                ]);
                continue;
            }
            // A fan-out entry lists plain push deliveries only: an ordered one waits in its line.
            let all_push = e
                .deliveries
                .iter()
                .all(|d| d.line.is_none() && !queued.contains(&subscription_key(d)));
            if let Some(fan_out) = all_push.then(|| encode_fan_out(&e.event_key, &e.deliveries)).flatten() {
                per_event.extend([FAN_OUT_MARKER.into(), fan_out.into()]);
                continue;
            }
            per_event.push(e.deliveries.len().to_string().into());
            let lone = e.deliveries.len() == 1;
            for (d, destination) in e.deliveries.iter().zip(destinations) {
                let (target, record) = match *destination {
                    // A lone push delivery carries the body in its entry (`Carried` layout).
                    Destination::Ready if lone => (0, encode_carried_delivery(d)),
                    Destination::Ready => (0, encode_delivery(d)),
                    Destination::Queue(q) => (q, encode_delivery(d)),
                    Destination::Line(l) => (queues.len() + l, line_member(d)),
                };
                per_event.extend([target.to_string().into(), record.into()]);
            }
        }

        let mut keys = vec![partition.catalog_version(), partition.ready()];
        keys.extend(events.iter().map(|e| partition.event(&e.event_key)));
        keys.push(partition.queues_index());
        keys.push(partition.queue_signal());
        keys.extend(queues.iter().map(|q| partition.queue(q)));
        keys.extend(lines.iter().map(|(line, _)| line.clone()));
        if !lines.is_empty() {
            keys.push(partition.lines_waiting());
            keys.push(partition.line_index());
        }
        if let Some(check) = check {
            keys.push(partition.seen(&check.topic));
        }
        if archive.is_some() {
            keys.push(partition.archive_backlog());
        }
        // Without a check the window is 0, and the script reads no identities.
        let (window, now) = check.map_or((0, 0), |c| (c.window.as_millis(), c.now.0));
        let mut args: Vec<Cow<'a, str>> = vec![
            catalog_version.to_string().into(),
            events.len().to_string().into(),
            queues.len().to_string().into(),
            window.to_string().into(),
            now.to_string().into(),
            archive.map_or(0, |a| a.max_backlog.max(1)).to_string().into(),
            archive.map_or(WhenFull::Refuse, |a| a.when_full).as_str().into(),
            archive.map_or("", |a| a.topic.as_str()).into(),
        ];
        args.extend(per_event);
        args.extend(queues.into_iter().map(Cow::Owned));
        args.extend(lines.into_iter().map(|(_, subscription)| Cow::Owned(subscription)));
        Self { keys, args }
    }

    /// The script call, ready to send (EVALSHA, loading the script when Redis lacks it).
    pub fn invocation(&self) -> redis::ScriptInvocation<'static> {
        let mut call = scripts::PUBLISH.prepare_invoke();
        for key in &self.keys {
            call.key(key);
        }
        for arg in &self.args {
            call.arg(arg.as_ref());
        }
        call
    }

    /// The call as one `EVAL` of the script's source into `pipe`: for a pipeline whose
    /// commands must stay together (a `NOSCRIPT` reply to EVALSHA would part them).
    pub fn eval_into(&self, pipe: &mut redis::Pipeline) {
        pipe.cmd("EVAL")
            .arg(scripts::PUBLISH_SOURCE)
            .arg(self.keys.len())
            .arg(&self.keys);
        for arg in &self.args {
            pipe.arg(arg.as_ref());
        }
    }
}

fn subscription_key(d: &Delivery) -> String {
    format!("{}/{}", d.topic, d.subscription)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::keyspace::Keyspace;
    use eg_core::UnixMillis;

    fn delivery(id: &str, event_key: &str, subscription: &str) -> Delivery {
        Delivery::new(
            id.into(),
            event_key.into(),
            "orders".into(),
            subscription.into(),
            UnixMillis(5),
        )
        .for_event("evt")
    }

    fn event(event_key: &str, deliveries: Vec<Delivery>) -> EventToStore {
        EventToStore {
            event_key: event_key.into(),
            body: format!("{{\"id\":\"{event_key}\"}}"),
            deliveries,
        }
    }

    /// The positions publish.lua's header lists: KEYS[1] catalog version, KEYS[2] ready
    /// stream, KEYS[3..2+N] event hashes, then the queues index, the signal stream and
    /// the Q queue streams; ARGV[1] version, ARGV[2] N, ARGV[3] Q, ARGV[4] W (0: no
    /// duplicate check), ARGV[5] now, then per event its
    /// body, M and M (target, record) pairs — or body, 0 and a fan-out record — then the
    /// Q subscription names.
    #[test]
    fn the_call_follows_the_scripts_header() {
        let p = Keyspace::new("eg", 4).partition(0);
        let queued: HashSet<String> = ["orders/pull".to_owned()].into();
        let events = [
            // A lone push delivery: carried in its entry.
            event("e1", vec![delivery("e1", "e1", "hook")]),
            // One push and one queue delivery: an event hash, two targets.
            event(
                "e2",
                vec![delivery("e2-0", "e2", "hook"), delivery("e2-1", "e2", "pull")],
            ),
            // Push only, several: one fan-out record.
            event(
                "e3",
                vec![delivery("e3-0", "e3", "hook"), delivery("e3-1", "e3", "audit")],
            ),
        ];
        let call = PublishCall::new(&p, 7, &events, &Routes::queued(queued), None, None);

        assert_eq!(
            call.keys,
            [
                p.catalog_version(),
                p.ready(),
                p.event("e1"),
                p.event("e2"),
                p.event("e3"),
                p.queues_index(),
                p.queue_signal(),
                p.queue("orders/pull"),
            ]
        );
        let fan_out = encode_fan_out("e3", &events[2].deliveries).unwrap();
        assert_eq!(
            call.args,
            [
                "7".to_owned(),
                "3".to_owned(),
                "1".to_owned(),
                "0".to_owned(),
                "0".to_owned(),
                "0".to_owned(),
                "refuse".to_owned(),
                String::new(),
                events[0].body.clone(),
                "1".to_owned(),
                "0".to_owned(),
                encode_carried_delivery(&events[0].deliveries[0]),
                events[1].body.clone(),
                "2".to_owned(),
                "0".to_owned(),
                encode_delivery(&events[1].deliveries[0]),
                "1".to_owned(),
                encode_delivery(&events[1].deliveries[1]),
                events[2].body.clone(),
                FAN_OUT_MARKER.to_owned(),
                fan_out,
                "orders/pull".to_owned(),
            ]
        );
    }

    /// The lone push deliveries to a batching subscription carry a batch number (from 1,
    /// cut per subscription as its requests are) and a carried record after the marker;
    /// every other event is stored as before.
    #[test]
    fn lone_deliveries_to_a_batching_subscription_are_numbered_into_batches() {
        let p = Keyspace::new("eg", 4).partition(0);
        let settings: BatchSettings =
            serde_json::from_value(serde_json::json!({"maxEventsPerBatch": 2, "preferredBatchSizeInKilobytes": 64}))
                .unwrap();
        let routes = Routes {
            batched: [
                ("orders/hook".to_owned(), settings),
                ("orders/audit".to_owned(), settings),
            ]
            .into(),
            ..Routes::default()
        };
        let events = [
            event("e1", vec![delivery("e1", "e1", "hook")]),
            event("e2", vec![delivery("e2", "e2", "audit")]),
            event("e3", vec![delivery("e3", "e3", "hook")]),
            // Ordered: in its line, never batched.
            event("e4", vec![delivery("e4", "e4", "hook").in_line(Some("A".into()))]),
            event("e5", vec![delivery("e5", "e5", "hook")]),
            // Not a batching subscription: carried alone.
            event("e6", vec![delivery("e6", "e6", "other")]),
        ];
        let call = PublishCall::new(&p, 7, &events, &routes, None, None);
        let batched = |e: usize, number: &str| {
            vec![
                events[e].body.clone(),
                BATCH_MARKER.to_owned(),
                number.to_owned(),
                encode_carried_delivery(&events[e].deliveries[0]),
            ]
        };
        let mut expected = Vec::new();
        expected.extend(batched(0, "1"));
        expected.extend(batched(1, "3"));
        expected.extend(batched(2, "1"));
        expected.extend([
            events[3].body.clone(),
            "1".to_owned(),
            "1".to_owned(),
            super::super::line_member(&events[3].deliveries[0]),
        ]);
        expected.extend(batched(4, "2"));
        expected.extend([
            events[5].body.clone(),
            "1".to_owned(),
            "0".to_owned(),
            encode_carried_delivery(&events[5].deliveries[0]),
        ]);
        expected.push("orders/hook".to_owned());
        assert_eq!(call.args[8..], expected);
    }

    /// Lines follow the queue streams in KEYS (then the waiting hash), are numbered
    /// Q + l in targets, carry line members, and their subscriptions follow the queues'.
    #[test]
    fn ordered_deliveries_go_to_their_lines_after_the_queues() {
        let p = Keyspace::new("eg", 4).partition(0);
        let queued: HashSet<String> = ["orders/pull".to_owned()].into();
        let line = |d: Delivery, id: &str| d.in_line(Some(id.into()));
        let events = [
            // One ordered delivery and one queue delivery: never carried, never fanned out.
            event(
                "e1",
                vec![
                    line(delivery("e1-0", "e1", "hook"), "A"),
                    delivery("e1-1", "e1", "pull"),
                ],
            ),
            event("e2", vec![line(delivery("e2", "e2", "hook"), "B")]),
            event("e3", vec![line(delivery("e3", "e3", "hook"), "A")]),
        ];
        let call = PublishCall::new(&p, 7, &events, &Routes::queued(queued), None, None);
        assert_eq!(
            call.keys[5..],
            [
                p.queues_index(),
                p.queue_signal(),
                p.queue("orders/pull"),
                p.line("orders/hook", "A"),
                p.line("orders/hook", "B"),
                p.lines_waiting(),
                p.line_index(),
            ]
        );
        let d = |e: usize, i: usize| &events[e].deliveries[i];
        assert_eq!(
            call.args[8..],
            [
                events[0].body.clone(),
                "2".to_owned(),
                "2".to_owned(),
                super::super::line_member(d(0, 0)),
                "1".to_owned(),
                encode_delivery(d(0, 1)),
                events[1].body.clone(),
                "1".to_owned(),
                "3".to_owned(),
                super::super::line_member(d(1, 0)),
                events[2].body.clone(),
                "1".to_owned(),
                "2".to_owned(),
                super::super::line_member(d(2, 0)),
                "orders/pull".to_owned(),
                "orders/hook".to_owned(),
                "orders/hook".to_owned(),
            ]
        );
    }

    #[test]
    fn queue_streams_are_numbered_in_the_order_first_met() {
        let p = Keyspace::new("eg", 4).partition(1);
        let queued: HashSet<String> = ["orders/b".to_owned(), "orders/a".to_owned()].into();
        let events = [
            event("e1", vec![delivery("e1-0", "e1", "b"), delivery("e1-1", "e1", "a")]),
            event("e2", vec![delivery("e2-0", "e2", "a")]),
        ];
        let call = PublishCall::new(&p, 1, &events, &Routes::queued(queued), None, None);
        // e1: b is queue 1, a is queue 2; e2 (a lone queue delivery, never carried): a is 2.
        assert_eq!(call.args[10], "1");
        assert_eq!(call.args[12], "2");
        assert_eq!(call.args[15], "1", "e2's M");
        assert_eq!(call.args[16], "2");
        assert_eq!(call.args[17], encode_delivery(&events[1].deliveries[0]));
        assert_eq!(call.args[18..], ["orders/b".to_owned(), "orders/a".to_owned()]);
        assert_eq!(
            call.keys[call.keys.len() - 2..],
            [p.queue("orders/b"), p.queue("orders/a")]
        );
    }

    /// A check puts the seen set last in KEYS (after the lines' tail keys), the window
    /// and now in ARGV[4] and ARGV[5], and each event's identity before its body.
    #[test]
    fn a_duplicate_check_adds_the_seen_set_last_and_an_identity_per_event() {
        let p = Keyspace::new("eg", 4).partition(2);
        let events = [
            event("e1", vec![delivery("e1", "e1", "hook").in_line(Some("A".into()))]),
            event("e2", vec![delivery("e2", "e2", "other")]),
        ];
        let check = DuplicateCheck {
            topic: "orders".into(),
            identities: vec!["id-1".into(), "id-2".into()],
            window: Duration::from_secs(600),
            now: UnixMillis(1_000),
        };
        let call = PublishCall::new(&p, 3, &events, &Routes::default(), Some(&check), None);
        assert_eq!(
            call.keys[4..],
            [
                p.queues_index(),
                p.queue_signal(),
                p.line("orders/hook", "A"),
                p.lines_waiting(),
                p.line_index(),
                p.seen("orders"),
            ]
        );
        assert_eq!(
            call.args,
            [
                "3".to_owned(),
                "2".to_owned(),
                "0".to_owned(),
                "600000".to_owned(),
                "1000".to_owned(),
                "0".to_owned(),
                "refuse".to_owned(),
                String::new(),
                "id-1".to_owned(),
                events[0].body.clone(),
                "1".to_owned(),
                "1".to_owned(),
                super::super::line_member(&events[0].deliveries[0]),
                "id-2".to_owned(),
                events[1].body.clone(),
                "1".to_owned(),
                "0".to_owned(),
                encode_carried_delivery(&events[1].deliveries[0]),
                "orders/hook".to_owned(),
            ]
        );
    }
}
