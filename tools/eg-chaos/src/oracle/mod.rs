//! The oracle: from what the publisher was told (the ledger), what each receiver
//! accepted, and the dead-letter files on disk, it decides whether the promise held —
//! every event answered `200` reached every subscription it matches (the scenario's own
//! filter model says which), or was dead-lettered for that subscription with a reason
//! that fits what happened; none lost, none delivered where it does not match.
//!
//! Dead-letter reasons it accepts:
//! * `NonRetriableFailure` — only if that subscription's receiver answered that event
//!   with a status the tiers do not retry (400), and the record's last status says so;
//! * `MaxDeliveryAttemptsExceeded` — only with at least `maxDeliveryAttempts` attempts;
//! * `TimeToLiveExceeded` — only if the file was written after publish time + TTL.
//!
//! Any other reason is a violation.
//!
//! Queue-mode (pull) subscriptions are judged in [`queues`], from the consumers' log and
//! the namespace dead-letter records read here.
//!
//! Here is the judgement of push delivery; the records it judges are read in
//! [`dead_letters`], counted in [`violations`] and summed by destination kind in
//! [`figures`].
//!
//! Subscriptions delivering to a broker are judged like webhooks, with what their
//! broker's reader took from the broker ([`crate::broker_readers`]) as what arrived.
//! Dead letters written to Azure Blob are read back from Azurite
//! ([`crate::blob_reader`]); each must be in the store its subscription names.
//!
//! Ordered subscriptions are also judged for order ([`ordering`]), rate-limited ones for
//! their rate ([`rates`]); the archived topic's archive holds every event it accepted
//! ([`archive`]).

mod archive;
mod dead_letters;
mod figures;
mod ordering;
mod queues;
mod rates;
mod violations;

use crate::broker_readers::BrokerLog;
use crate::consumer::Consumers;
use crate::publisher::{Fate, Ledger, Published, refusal_name};
use crate::receiver::{Receivers, Seen, lock};
use crate::scenario::{Destination, Scenario};
use dead_letters::DeadRecord;
use figures::{KindFigures, kind_name};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use violations::Violations;

/// Slack allowed between the clocks of the file system and Redis's `TIME` (same host).
const CLOCK_SLACK: Duration = Duration::from_secs(1);

/// The readers of the broker destinations, when the scenario has them.
#[derive(Clone, Default)]
pub struct BrokerLogs {
    pub rabbitmq: Option<Arc<BrokerLog>>,
    pub nats: Option<Arc<BrokerLog>>,
    pub kafka: Option<Arc<BrokerLog>>,
    pub sqs: Option<Arc<BrokerLog>>,
}

impl BrokerLogs {
    fn of(&self, destination: Destination) -> Option<&Arc<BrokerLog>> {
        match destination {
            Destination::WebHook => None,
            Destination::RabbitMq => self.rabbitmq.as_ref(),
            Destination::Nats => self.nats.as_ref(),
            Destination::Kafka => self.kafka.as_ref(),
            Destination::Sqs => self.sqs.as_ref(),
        }
    }

    /// Each reader's log, by the name of its kind.
    fn named(&self) -> [(&'static str, &Option<Arc<BrokerLog>>); 4] {
        [
            ("rabbitmq", &self.rabbitmq),
            ("nats", &self.nats),
            ("kafka", &self.kafka),
            ("sqs", &self.sqs),
        ]
    }
}

pub struct Oracle {
    scenario: Arc<Scenario>,
    consumers: Arc<Consumers>,
    /// Dead-letter records of queue subscriptions (`sub` indexes the scenario's queues).
    queue_records: Vec<DeadRecord>,
    ledger: Arc<Ledger>,
    receivers: Arc<Receivers>,
    brokers: BrokerLogs,
    root: PathBuf,
    parsed: HashSet<PathBuf>,
    records: Vec<DeadRecord>,
    /// Problems with dead-letter files themselves, by kind, with examples.
    file_problems: Vec<(&'static str, String)>,
    /// Files that did not parse yet (retried; a violation if they never do).
    unreadable: HashMap<PathBuf, String>,
    /// Why the last read of the dead-letter blobs failed, if it did.
    blob_store_problem: Option<String>,
}

/// The oracle's findings.
pub struct Verdict {
    pub json: Value,
    pub violations: u64,
    pub owed: u64,
    pub delivered: u64,
    pub dead_lettered: u64,
    pub lost: u64,
    pub duplicates: u64,
    /// (event, queue subscription) pairs owed, and of them neither acknowledged,
    /// dead-lettered nor dropped with a reason.
    pub queue_owed: u64,
    pub queue_lost: u64,
}

impl Oracle {
    pub fn new(
        scenario: Arc<Scenario>,
        ledger: Arc<Ledger>,
        receivers: Arc<Receivers>,
        consumers: Arc<Consumers>,
        brokers: BrokerLogs,
        root: &Path,
    ) -> Self {
        Self {
            scenario,
            consumers,
            queue_records: Vec::new(),
            ledger,
            receivers,
            brokers,
            root: root.to_path_buf(),
            parsed: HashSet::new(),
            records: Vec::new(),
            file_problems: Vec::new(),
            unreadable: HashMap::new(),
            blob_store_problem: None,
        }
    }

    /// What each subscription's destination took, by event: the receiver's log for a
    /// webhook, the broker reader's copies (each counted arrived and accepted) for a
    /// broker.
    fn arrivals(&self) -> Vec<HashMap<u64, Seen>> {
        let endpoints = self.receivers.endpoints();
        self.scenario
            .subscriptions
            .iter()
            .enumerate()
            .map(|(sub, spec)| match self.brokers.of(spec.destination) {
                None => lock(&endpoints[sub].seen).clone(),
                Some(log) => lock(&log.copies)
                    .iter()
                    .map(|(seq, copies)| {
                        let seen = Seen {
                            arrivals: *copies,
                            accepted: *copies,
                            ..Seen::default()
                        };
                        (*seq, seen)
                    })
                    .collect(),
            })
            .collect()
    }

    /// The queue subscriptions' side, judged now.
    fn queue_verdict(&self) -> queues::QueueVerdict {
        let events = lock(&self.ledger.events).clone();
        let records: Vec<queues::DeadLetter> = self
            .queue_records
            .iter()
            .map(|r| queues::DeadLetter {
                queue: r.sub,
                seq: r.seq,
                reason: r.reason.clone(),
                attempts: r.attempts,
                path: r.path.display().to_string(),
            })
            .collect();
        queues::judge(&self.scenario, &events, &self.consumers, &records)
    }

    /// Acknowledged (event, subscription) pairs that have neither been accepted by the
    /// receiver nor dead-lettered yet.
    pub fn unresolved(&mut self) -> u64 {
        self.scan();
        let dead: HashSet<(usize, u64)> = self.records.iter().map(|r| (r.sub, r.seq)).collect();
        let events = lock(&self.ledger.events).clone();
        let seen = self.arrivals();
        let mut open = 0;
        for (seq, event) in events.iter().enumerate() {
            if event.fate != Fate::Acknowledged {
                continue;
            }
            let seq = seq as u64;
            for sub in self.scenario.matching(seq, &event.facts) {
                let accepted = seen[sub].get(&seq).is_some_and(|s| s.accepted > 0);
                if !accepted && !dead.contains(&(sub, seq)) {
                    open += 1;
                }
            }
        }
        open + self.queue_verdict().open
    }

    /// Checks everything; `max_examples` ids are listed per violation kind.
    pub fn verdict(&mut self, max_examples: usize) -> Verdict {
        self.scan();
        let mut violations = Violations::new(max_examples);
        for (kind, example) in &self.file_problems {
            violations.add(kind, || example.clone());
        }
        for (path, problem) in &self.unreadable {
            violations.add("unreadable_dead_letter_file", || {
                format!("{}: {problem}", path.display())
            });
        }
        let events: Vec<Published> = lock(&self.ledger.events).clone();
        if let Some(problem) = &self.blob_store_problem {
            violations.add("dead_letter_blobs_unreadable", || problem.clone());
        }
        for (name, log) in self.brokers.named() {
            for id in log.iter().flat_map(|log| lock(&log.strangers).clone()) {
                violations.add("broker_message_of_an_unknown_id", || format!("{id} in {name}"));
            }
        }
        let endpoints = self.receivers.endpoints();
        let seen = self.arrivals();
        let mut dead: HashMap<(usize, u64), Vec<&DeadRecord>> = HashMap::new();
        for record in &self.records {
            dead.entry((record.sub, record.seq)).or_default().push(record);
        }
        let name = |sub: usize| self.scenario.subscriptions[sub].name.as_str();
        let matches = |sub: usize, seq: u64| {
            events.get(seq as usize).is_some_and(|e| {
                let spec = &self.scenario.subscriptions[sub];
                spec.topic == usize::from(e.facts.topic) && spec.filter.matches(&e.facts, seq)
            })
        };

        let sink = self.receivers.sink_requests();
        if sink > 0 {
            violations.add("delivered_to_a_throwaway_subscription_that_matches_nothing", || {
                format!("{sink} request(s) to the churn sink")
            });
        }

        // What the receivers got.
        let mut delivered_unowed: BTreeMap<String, u64> = BTreeMap::new();
        let mut duplicates = 0u64;
        let mut accepted_total = 0u64;
        for (sub, endpoint) in endpoints.iter().enumerate() {
            for id in lock(&endpoint.strangers).iter() {
                violations.add("delivery_of_an_unknown_id", || format!("{id} to {}", name(sub)));
            }
            for problem in lock(&endpoint.malformed).iter() {
                violations.add("malformed_delivery", || format!("to {}: {problem}", name(sub)));
            }
            for (seq, s) in &seen[sub] {
                if (*seq as usize) >= events.len() {
                    violations.add("delivery_of_an_unknown_id", || format!("ev-{seq} to {}", name(sub)));
                    continue;
                }
                if !matches(sub, *seq) {
                    violations.add("delivered_to_a_subscription_it_does_not_match", || {
                        format!("ev-{seq} to {} ({:?})", name(sub), events[*seq as usize].facts)
                    });
                }
                accepted_total += u64::from(s.accepted);
                duplicates += u64::from(s.accepted.saturating_sub(1));
                let event = &events[*seq as usize];
                if s.accepted > 0 && event.fate != Fate::Acknowledged {
                    *delivered_unowed.entry(refusal_name(event.refusal)).or_default() += 1;
                }
            }
        }

        // More requests than attempts allowed: a frozen sender woke up and sent what had
        // been taken back from it meanwhile (at least once allows it; counted).
        let mut beyond_max_attempts = Vec::new();
        for (sub, spec) in self.scenario.subscriptions.iter().enumerate() {
            for (seq, s) in &seen[sub] {
                if s.arrivals > spec.max_attempts {
                    beyond_max_attempts.push(format!("ev-{seq} to {}: {} requests", spec.name, s.arrivals));
                }
            }
        }

        // What was dead-lettered.
        let mut by_reason: BTreeMap<String, u64> = BTreeMap::new();
        let mut dead_letter_duplicates = 0u64;
        let mut delivered_and_dead_lettered = 0u64;
        let mut also_delivered_late_only = 0u64;
        let mut fewer_requests = Vec::new();
        let mut never_attempted = Vec::new();
        for ((sub, seq), records) in &dead {
            let (sub, seq) = (*sub, *seq);
            dead_letter_duplicates += records.len() as u64 - 1;
            let spec = &self.scenario.subscriptions[sub];
            let s = seen[sub].get(&seq).copied().unwrap_or_default();
            if s.accepted > 0 {
                delivered_and_dead_lettered += 1;
                if s.accepted == s.late {
                    also_delivered_late_only += 1;
                }
            }
            if !matches(sub, seq) {
                violations.add("dead_lettered_for_a_subscription_it_does_not_match", || {
                    format!("ev-{seq} for {} in {}", name(sub), records[0].path.display())
                });
            }
            for record in records {
                *by_reason.entry(record.reason.clone()).or_default() += 1;
                let example = || {
                    format!(
                        "ev-{seq} for {}: {} after {:?} attempts, last status {:?}; receiver saw it {}x, \
                         accepted {}x, answered 400 {}x ({})",
                        name(sub),
                        record.reason,
                        record.attempts,
                        record.last_status,
                        s.arrivals,
                        s.accepted,
                        s.refused,
                        record.path.display()
                    )
                };
                match record.reason.as_str() {
                    "NonRetriableFailure" => {
                        if s.refused == 0 {
                            violations.add("non_retriable_without_a_non_retried_answer", example);
                        } else if record.last_status != Some(400) {
                            violations.add("non_retriable_with_another_last_status", example);
                        }
                    }
                    "MaxDeliveryAttemptsExceeded" => {
                        if record.attempts.is_none_or(|a| a < u64::from(spec.max_attempts)) {
                            violations.add("max_attempts_before_max_attempts", example);
                        } else if s.arrivals < spec.max_attempts {
                            // Attempts the scheduler charged as Aborted when it took a
                            // delivery back from a holder that never sent it.
                            if s.arrivals == 0 {
                                never_attempted.push(example());
                            }
                            fewer_requests.push(example());
                        }
                    }
                    "TimeToLiveExceeded" => {
                        let ttl = Duration::from_secs(60 * u64::from(spec.ttl_minutes));
                        let early = match record.publish_time {
                            Some(published) => {
                                let due: SystemTime = published.into();
                                record.written_at + CLOCK_SLACK < due + ttl
                            }
                            None => true,
                        };
                        if early {
                            violations.add("time_to_live_exceeded_before_the_time_to_live", example);
                        }
                    }
                    _ => violations.add("unexpected_dead_letter_reason", example),
                }
            }
        }

        // What was owed.
        let mut owed = 0u64;
        let mut delivered = 0u64;
        let mut dead_lettered = 0u64;
        let mut lost = 0u64;
        let mut acknowledged = 0u64;
        let mut not_acknowledged = 0u64;
        let mut by_kind: BTreeMap<&'static str, KindFigures> = BTreeMap::new();
        for (seq, event) in events.iter().enumerate() {
            match event.fate {
                Fate::Acknowledged => acknowledged += 1,
                _ => {
                    not_acknowledged += 1;
                    continue;
                }
            }
            let seq = seq as u64;
            for sub in self.scenario.matching(seq, &event.facts) {
                owed += 1;
                let spec = &self.scenario.subscriptions[sub];
                let figures = by_kind
                    .entry(kind_name(spec.destination, spec.dead_letter_to))
                    .or_default();
                figures.owed += 1;
                let s = seen[sub].get(&seq).copied().unwrap_or_default();
                figures.duplicates += u64::from(s.accepted.saturating_sub(1));
                if let Some(records) = dead.get(&(sub, seq)) {
                    figures.duplicate_dead_letters += records.len() as u64 - 1;
                }
                if s.accepted > 0 {
                    delivered += 1;
                    figures.delivered += 1;
                } else if dead.contains_key(&(sub, seq)) {
                    dead_lettered += 1;
                    figures.dead_lettered += 1;
                } else {
                    lost += 1;
                    figures.lost += 1;
                    violations.add("lost", || {
                        format!(
                            "ev-{seq} to {}: acknowledged at {}, receiver saw it {}x (accepted 0x), no dead letter",
                            name(sub),
                            chrono::DateTime::from_timestamp_millis(event.answered_at)
                                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                                .unwrap_or_default(),
                            s.arrivals
                        )
                    });
                }
            }
        }

        let unique_delivered: u64 = seen
            .iter()
            .map(|s| s.values().filter(|s| s.accepted > 0).count() as u64)
            .sum();
        let requests: u64 = endpoints
            .iter()
            .map(|e| e.requests.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        let batched: u64 = endpoints
            .iter()
            .map(|e| e.batched_requests.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        let replies: serde_json::Map<String, Value> = self
            .receivers
            .replies()
            .into_iter()
            .map(|(reply, n)| (reply.name().to_owned(), json!(n)))
            .collect();
        let per_subscription: serde_json::Map<String, Value> = self
            .scenario
            .subscriptions
            .iter()
            .enumerate()
            .map(|(sub, spec)| {
                let dead_here = dead.keys().filter(|(s, _)| *s == sub).count();
                let delivered_here = seen[sub].values().filter(|s| s.accepted > 0).count();
                (
                    spec.name.clone(),
                    json!({"delivered": delivered_here, "dead_lettered": dead_here,
                           "requests": endpoints[sub].requests.load(std::sync::atomic::Ordering::Relaxed)}),
                )
            })
            .collect();
        let (ordering, rate_limits) = self.judge_controls(&events, &seen, &dead, &mut violations);
        let queues = self.queue_verdict();
        for (kind, example) in &queues.violations {
            violations.add(kind, || example.clone());
        }
        let mut by_kind: serde_json::Map<String, Value> = by_kind
            .into_iter()
            .map(|(kind, f)| (kind.to_owned(), f.to_json()))
            .collect();
        for (kind, log) in self.brokers.named() {
            if let (Some(log), Some(Value::Object(figures))) = (log, by_kind.get_mut(kind)) {
                figures.insert(
                    "reader_reconnects".into(),
                    json!(log.reconnects.load(std::sync::atomic::Ordering::Relaxed)),
                );
                if kind == "rabbitmq" {
                    figures.insert(
                        "redelivered_to_the_reader".into(),
                        json!(log.redelivered_to_reader.load(std::sync::atomic::Ordering::Relaxed)),
                    );
                }
            }
        }
        let archive = archive::judge(&self.scenario, &events, &self.root, &mut violations);
        let json = json!({
            "by_destination_kind": by_kind,
            "queues": queues.json,
            "acknowledged": acknowledged,
            "not_acknowledged": not_acknowledged,
            "owed_deliveries": owed,
            "delivered": delivered,
            "dead_lettered_not_delivered": dead_lettered,
            "lost": lost,
            "deliveries": {
                "requests": requests,
                "batched_requests": batched,
                "events_accepted": accepted_total,
                "unique": unique_delivered,
                "duplicates": duplicates,
                "duplicate_rate": if unique_delivered == 0 { 0.0 } else { duplicates as f64 / unique_delivered as f64 },
                // Deliveries of events whose publish was not answered 200, by that answer.
                "of_unacknowledged_events": delivered_unowed,
                "more_requests_than_max_attempts": beyond_max_attempts.len(),
                "more_requests_than_max_attempts_examples": beyond_max_attempts.iter().take(max_examples).collect::<Vec<_>>(),
                "receiver_answers": replies,
            },
            "dead_letters": {
                "records": self.records.len(),
                "files": self.parsed.len(),
                "records_read_from_azure_blob": self.records.iter().filter(|r| r.from_blob).count(),
                "by_reason": by_reason,
                "duplicate_records": dead_letter_duplicates,
                // Dead-lettered although the receiver accepted it at some point (at least
                // once allows it): e.g. the last attempt timed out and its success came late.
                "also_delivered": delivered_and_dead_lettered,
                "also_delivered_only_by_late_successes": also_delivered_late_only,
                // MaxDeliveryAttemptsExceeded although the endpoint got fewer requests than
                // maxDeliveryAttempts (some attempts were charged without a request).
                "max_attempts_with_fewer_requests": fewer_requests.len(),
                "max_attempts_never_requested": never_attempted.len(),
                "max_attempts_with_fewer_requests_examples": fewer_requests.iter().take(max_examples).collect::<Vec<_>>(),
            },
            "per_subscription": per_subscription,
            "ordering": ordering,
            "rate_limits": rate_limits,
            "archive": archive,
            "violations": violations.to_json(),
        });
        Verdict {
            json,
            violations: violations.total(),
            owed,
            delivered,
            dead_lettered,
            lost,
            duplicates,
            queue_owed: queues.owed,
            queue_lost: queues.lost,
        }
    }

    /// The order of ordered subscriptions and the rate of rate-limited ones: their
    /// figures, and their violations added to `violations`.
    fn judge_controls(
        &self,
        events: &[Published],
        seen: &[HashMap<u64, Seen>],
        dead: &HashMap<(usize, u64), Vec<&DeadRecord>>,
        violations: &mut Violations,
    ) -> (Value, Value) {
        let endpoints = self.receivers.endpoints();
        let mut ordering = serde_json::Map::new();
        let mut rate_limits = serde_json::Map::new();
        for (sub, spec) in self.scenario.subscriptions.iter().enumerate() {
            if spec.ordered {
                let dead_here: HashSet<u64> = dead.keys().filter(|(s, _)| *s == sub).map(|(_, seq)| *seq).collect();
                let owed = events
                    .iter()
                    .enumerate()
                    .filter(|(seq, e)| {
                        spec.topic == usize::from(e.facts.topic) && spec.filter.matches(&e.facts, *seq as u64)
                    })
                    .map(|(seq, _)| seq as u64);
                let findings = ordering::judge(&spec.name, events, owed, &seen[sub], &dead_here);
                for early in &findings.early {
                    violations.add("delivered_before_an_earlier_event_of_its_key", || early.clone());
                }
                ordering.insert(
                    spec.name.clone(),
                    json!({"keys": findings.keys, "ordered_pairs_checked": findings.pairs_checked,
                           "delivered_too_early": findings.early.len()}),
                );
            }
            if let Some(limit) = spec.limit {
                let findings = rates::judge(limit, lock(&endpoints[sub].request_times).clone());
                if findings.exceeded() {
                    violations.add("rate_limit_exceeded", || {
                        format!(
                            "{}: {} requests in one 10 s window, at most {} allowed ({}/s, burst {})",
                            spec.name, findings.busiest_window, findings.bound, limit.per_second, limit.burst
                        )
                    });
                }
                rate_limits.insert(
                    spec.name.clone(),
                    json!({"requests_per_second": limit.per_second, "burst": limit.burst,
                           "requests": findings.requests, "busiest_10s_window": findings.busiest_window,
                           "window_bound": findings.bound}),
                );
            }
        }
        (Value::Object(ordering), Value::Object(rate_limits))
    }
}
