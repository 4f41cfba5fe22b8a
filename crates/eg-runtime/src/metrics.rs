//! Every metric eg exposes, named in one place (Event Grid's names, behaviour.md#metrics),
//! and the Prometheus recorder. Labels: `topic`, `subscription`, and `outcome` / `reason` /
//! `error` where the name says "by …". Never a key, token or URL in a label.

use metrics::Recorder;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use std::sync::LazyLock;

pub const PUBLISH_SUCCESS_COUNT: &str = "PublishSuccessCount";
pub const PUBLISH_FAIL_COUNT: &str = "PublishFailCount";
pub const PUBLISH_SUCCESS_LATENCY_MS: &str = "PublishSuccessLatencyInMs";
pub const UNMATCHED_EVENT_COUNT: &str = "UnmatchedEventCount";
pub const MATCHED_EVENT_COUNT: &str = "MatchedEventCount";
/// Published events a subscription waiting for validation would have matched: not kept
/// for it (labels `topic`, `subscription`). Not one of Event Grid's metrics.
pub const MISSED_EVENT_COUNT: &str = "MissedEventCount";
/// Published events skipped as duplicates of one the topic accepted within its duplicate
/// detection window (label `topic`; deduplication.md). Not one of Event Grid's metrics.
pub const DUPLICATE_EVENT_COUNT: &str = "DuplicateEventCount";
/// Archive backlog entries dropped to stay within `EG__ARCHIVE__MAX_BACKLOG` with
/// `WHEN_FULL=drop-oldest` (label `partition`; archive.md): events accepted but never
/// archived. Not one of Event Grid's metrics.
pub const ARCHIVE_DROPPED_COUNT: &str = "ArchiveDroppedCount";
/// Published events of an archived topic refused because the archive backlog was full
/// (`WHEN_FULL=refuse`; label `topic`; archive.md). Not one of Event Grid's metrics.
pub const ARCHIVE_REFUSED_COUNT: &str = "ArchiveRefusedCount";
/// Entries waiting in a partition's archive backlog (label `partition`; eg-deadletter).
pub const ARCHIVE_BACKLOG: &str = "ArchiveBacklog";
/// How long the oldest entry of a partition's archive backlog has waited (label `partition`).
pub const ARCHIVE_OLDEST_WAITING_MS: &str = "ArchiveOldestWaitingInMs";
/// Events written to their topic's archive (label `topic`).
pub const ARCHIVE_WRITTEN_COUNT: &str = "ArchiveWrittenCount";
/// Archive objects a store did not take, retried (labels `topic`, `kind`).
pub const ARCHIVE_WRITE_FAILURE_COUNT: &str = "ArchiveWriteFailureCount";
pub const DELIVERY_SUCCESS_COUNT: &str = "DeliverySuccessCount";
pub const DELIVERY_ATTEMPT_FAIL_COUNT: &str = "DeliveryAttemptFailCount";
pub const DEAD_LETTERED_COUNT: &str = "DeadLetteredCount";
pub const DROPPED_EVENT_COUNT: &str = "DroppedEventCount";
pub const DESTINATION_PROCESSING_DURATION_MS: &str = "DestinationProcessingDurationInMs";
pub const RECLAIMED_DELIVERY_COUNT: &str = "ReclaimedDeliveryCount";
/// Ordering lines whose head Redis lost, swept by a scheduler (labels `topic`,
/// `subscription`, `action`: `requeued`, `dropped`). Not one of Event Grid's metrics.
pub const ORDERED_LINE_SWEPT_COUNT: &str = "OrderedLineSweptCount";
pub const DEAD_LETTER_WRITE_FAIL_COUNT: &str = "DeadLetterWriteFailCount";
pub const QUEUE_READY_DEPTH: &str = "QueueReadyDepth";
pub const QUEUE_IN_FLIGHT_DEPTH: &str = "QueueInFlightDepth";
pub const QUEUE_RETRY_DEPTH: &str = "QueueRetryDepth";
pub const QUEUE_PAUSED_DEPTH: &str = "QueuePausedDepth";
/// Deliveries of ordered subscriptions waiting behind their key's head (label `partition`).
pub const QUEUE_ORDERED_WAITING_DEPTH: &str = "QueueOrderedWaitingDepth";
/// The same per ordered subscription (labels `topic`, `subscription`): one series per
/// ordered subscription that ever had a delivery waiting, from its topic's home
/// partition only, so the partition count does not multiply it.
pub const QUEUE_ORDERED_WAITING_SUBSCRIPTION_DEPTH: &str = "QueueOrderedWaitingSubscriptionDepth";
/// Pull delivery's queues (labels `topic`, `subscription`).
pub const QUEUE_AVAILABLE_DEPTH: &str = "QueueAvailableDepth";
pub const QUEUE_LOCKED_DEPTH: &str = "QueueLockedDepth";
pub const QUEUE_DELAYED_DEPTH: &str = "QueueDelayedDepth";
pub const QUEUE_OLDEST_UNACKNOWLEDGED_SECONDS: &str = "QueueOldestUnacknowledgedSeconds";
pub const DEAD_LETTER_BACKLOG_DEPTH: &str = "DeadLetterBacklogDepth";
pub const ENDPOINT_PROBATION_COUNT: &str = "EndpointProbationCount";
pub const DELIVERY_DELAYED_COUNT: &str = "DeliveryDelayedCount";
/// Deliveries handed back by `deliveryLimits` (labels `topic`, `subscription`, `reason`:
/// `rate`, `concurrency`, `slowedDown`), and the time they were handed back for.
pub const DELIVERY_THROTTLED_COUNT: &str = "DeliveryThrottledCount";
pub const DELIVERY_THROTTLED_MS: &str = "DeliveryThrottledMilliseconds";
/// Deliveries waiting for a subscription's rate limit (labels `topic`, `subscription`;
/// only subscriptions with a rate), published by the scheduler.
pub const DELIVERY_THROTTLED_BACKLOG: &str = "DeliveryThrottledBacklog";
pub const ENDPOINT_ON_PROBATION: &str = "EndpointOnProbation";
pub const ENDPOINT_PROBATION_REMAINING_SECONDS: &str = "EndpointProbationRemainingSeconds";
pub const LATE_SUCCESS_COUNT: &str = "LateSuccessCount";
pub const DEAD_LETTER_ARCHIVE_EVICTED_COUNT: &str = "DeadLetterArchiveEvictedCount";
pub const REDRIVEN_EVENT_COUNT: &str = "RedrivenEventCount";
/// Events a broker destination already held when eg published them again (label
/// `destination`: `nats`, whose duplicate window absorbed the redelivery).
pub const DESTINATION_DUPLICATE_COUNT: &str = "DestinationDuplicateCount";
/// Requests a destination that packs several attempts' messages into one request made,
/// and the messages they carried (label `destination`: `sqs`, `SendMessageBatch`): their
/// ratio is the messages per request.
pub const DESTINATION_REQUEST_COUNT: &str = "DestinationRequestCount";
pub const DESTINATION_REQUEST_MESSAGE_COUNT: &str = "DestinationRequestMessageCount";
/// Requests for webhook delivery tokens (labels `identity`, `result`: `issued`,
/// `refused`, `unreachable`) and how long they took (label `identity`). Not Event Grid's.
pub const TOKEN_REQUEST_COUNT: &str = "TokenRequestCount";
pub const TOKEN_REQUEST_DURATION_MS: &str = "TokenRequestDurationInMs";

const LATENCY_BUCKETS_MS: [f64; 14] = [
    1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0,
];

/// The standard Prometheus process metrics every exporter is expected to have
/// (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`,
/// `process_max_fds`, `process_threads`, `process_start_time_seconds`, …), read from
/// `/proc` at each scrape: CPU and memory per tier copy without a node exporter.
static PROCESS: LazyLock<metrics_process::Collector> = LazyLock::new(metrics_process::Collector::default);

/// Refreshes the process metrics; called before each `/metrics` render.
pub fn collect_process_metrics() {
    PROCESS.collect();
}

/// How often histogram samples are folded into their buckets when nothing scrapes.
const UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Installs the process-wide recorder and describes every metric. Must run inside
/// the tokio runtime: it starts the upkeep task that keeps histogram memory bounded
/// (samples are buffered until folded into buckets, by a scrape or by the upkeep).
///
/// The recorder installed is Prometheus's as `wrap` returns it: the caller wraps it
/// (in `crate::stats`'s tallying recorder) so the counters the status page shows are
/// also tallied; this module only names metrics and does not know that tally.
/// Returns the handle that renders `/metrics`.
pub fn install<R>(wrap: impl FnOnce(PrometheusRecorder) -> R) -> anyhow::Result<PrometheusHandle>
where
    R: Recorder + Send + Sync + 'static,
{
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("InMs".into()), &LATENCY_BUCKETS_MS)?
        .build_recorder();
    let handle = prometheus.handle();
    metrics::set_global_recorder(wrap(prometheus))
        .map_err(|_| anyhow::anyhow!("a metrics recorder was already installed in this process"))?;
    describe();
    PROCESS.describe();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(PUBLISH_SUCCESS_COUNT, "Events accepted (durable) by topic");
    describe_counter!(
        PUBLISH_FAIL_COUNT,
        "Events refused or not made durable, by topic and error"
    );
    describe_histogram!(PUBLISH_SUCCESS_LATENCY_MS, "Time to accept a publish request, ms");
    describe_counter!(UNMATCHED_EVENT_COUNT, "Published events that matched no subscription");
    describe_counter!(
        MATCHED_EVENT_COUNT,
        "Deliveries created (event x matching subscription)"
    );
    describe_counter!(
        MISSED_EVENT_COUNT,
        "Published events a subscription waiting for validation would have matched (not kept for it)"
    );
    describe_counter!(
        DUPLICATE_EVENT_COUNT,
        "Published events not stored: the topic accepted one of the same identity within its window"
    );
    describe_counter!(
        ARCHIVE_DROPPED_COUNT,
        "Archive backlog entries dropped at the bound (drop-oldest): accepted, never archived"
    );
    describe_counter!(
        ARCHIVE_REFUSED_COUNT,
        "Published events of an archived topic refused: the archive backlog was full"
    );
    describe_gauge!(
        ARCHIVE_BACKLOG,
        "Accepted events of archived topics waiting in Redis for the object store"
    );
    describe_gauge!(
        ARCHIVE_OLDEST_WAITING_MS,
        "Age of the oldest event waiting in the archive backlog"
    );
    describe_counter!(ARCHIVE_WRITTEN_COUNT, "Events written to a topic's archive");
    describe_counter!(
        ARCHIVE_WRITE_FAILURE_COUNT,
        "Archive objects a store did not take (retried)"
    );
    describe_counter!(DELIVERY_SUCCESS_COUNT, "Deliveries the endpoint accepted");
    describe_counter!(
        ENDPOINT_PROBATION_COUNT,
        "Times a subscription's endpoint was put on probation (or had it extended)"
    );
    describe_counter!(
        DELIVERY_DELAYED_COUNT,
        "Deliveries held back, uncharged, because their endpoint is on probation"
    );
    describe_counter!(
        DELIVERY_THROTTLED_COUNT,
        "Deliveries handed back, uncharged, by their subscription's delivery limits"
    );
    describe_counter!(
        DELIVERY_THROTTLED_MS,
        "Time deliveries were handed back for, or waited in a sender for a reserved turn, ms, by their subscription's delivery limits"
    );
    describe_gauge!(
        DELIVERY_THROTTLED_BACKLOG,
        "Deliveries waiting for their subscription's rate limit (an estimate from the turns handed out)"
    );
    describe_gauge!(
        ENDPOINT_ON_PROBATION,
        "1 while a subscription's endpoint is on probation or probing, else 0"
    );
    describe_gauge!(
        ENDPOINT_PROBATION_REMAINING_SECONDS,
        "Seconds until a subscription's endpoint's probation ends"
    );
    describe_counter!(
        LATE_SUCCESS_COUNT,
        "Timed-out attempts answered with success later, by result: retry_cancelled or too_late (a duplicate)"
    );
    describe_counter!(DELIVERY_ATTEMPT_FAIL_COUNT, "Failed attempts, by outcome");
    describe_counter!(DEAD_LETTERED_COUNT, "Deliveries dead-lettered, by reason");
    describe_counter!(
        DEAD_LETTER_ARCHIVE_EVICTED_COUNT,
        "Oldest dead-letter records removed from the Redis archive to stay within deadletter.archive_max (files are kept)"
    );
    describe_counter!(REDRIVEN_EVENT_COUNT, "Dead-lettered events sent back into delivery");
    describe_counter!(
        DESTINATION_DUPLICATE_COUNT,
        "Redelivered events a broker destination recognised as duplicates and stored once, by destination"
    );
    describe_counter!(
        DESTINATION_REQUEST_COUNT,
        "Requests made by a destination that packs several attempts' messages into one, by destination"
    );
    describe_counter!(
        DESTINATION_REQUEST_MESSAGE_COUNT,
        "Messages those requests carried, by destination"
    );
    describe_counter!(DROPPED_EVENT_COUNT, "Deliveries dropped, by reason");
    describe_counter!(
        TOKEN_REQUEST_COUNT,
        "Requests for webhook delivery tokens, by identity and result"
    );
    describe_histogram!(
        TOKEN_REQUEST_DURATION_MS,
        "Time a delivery token request took, by identity, ms"
    );
    describe_histogram!(
        DESTINATION_PROCESSING_DURATION_MS,
        "Time the endpoint took to answer, ms"
    );
    describe_counter!(
        RECLAIMED_DELIVERY_COUNT,
        "Deliveries taken back from a holder that did not settle them in time"
    );
    describe_counter!(
        ORDERED_LINE_SWEPT_COUNT,
        "Ordering lines whose head Redis lost, swept, by action (`requeued`: the head again, `dropped`: its event was gone, the next released)"
    );
    describe_counter!(
        DEAD_LETTER_WRITE_FAIL_COUNT,
        "Failed writes to a dead-letter destination, by store (`local`, `azure:<account>`, `s3:<connection>`) and kind (`Unauthenticated`, `PermissionDenied`, `ContainerNotFound`, `Unavailable`, `NotConfigured`, `Rejected`)"
    );
    describe_gauge!(
        QUEUE_PAUSED_DEPTH,
        "Deliveries set aside for paused subscriptions, by partition"
    );
    describe_gauge!(
        QUEUE_ORDERED_WAITING_DEPTH,
        "Deliveries of ordered subscriptions waiting behind their key's head, by partition"
    );
    describe_gauge!(
        QUEUE_ORDERED_WAITING_SUBSCRIPTION_DEPTH,
        "Deliveries of an ordered subscription waiting behind their key's head"
    );
    describe_gauge!(QUEUE_READY_DEPTH, "Deliveries waiting to be sent, by partition");
    describe_gauge!(
        QUEUE_AVAILABLE_DEPTH,
        "Events of a queue-mode subscription a receive can get now (never received, or their lock expired)"
    );
    describe_gauge!(
        QUEUE_LOCKED_DEPTH,
        "Events of a queue-mode subscription locked to a receiver"
    );
    describe_gauge!(
        QUEUE_DELAYED_DEPTH,
        "Events of a queue-mode subscription released with a delay that has not passed yet"
    );
    describe_gauge!(
        QUEUE_OLDEST_UNACKNOWLEDGED_SECONDS,
        "Age of the oldest unacknowledged event of a queue-mode subscription"
    );
    describe_gauge!(QUEUE_IN_FLIGHT_DEPTH, "Deliveries held by a sender, by partition");
    describe_gauge!(QUEUE_RETRY_DEPTH, "Deliveries waiting for a retry, by partition");
    describe_gauge!(
        DEAD_LETTER_BACKLOG_DEPTH,
        "Dead-letter records not yet written, by partition"
    );
}
