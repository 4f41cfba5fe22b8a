//! The **stats bucket**: one hash per [`BUCKET_SECONDS`]-second bucket, numbered by unix
//! seconds / [`BUCKET_SECONDS`] (the number ends its key), field `<kind>|<label>` (e.g.
//! `delivered|orders/audit`, `failed-by|NotFound`) → count, added to by
//! `stats_flush.lua`.

use eg_core::UnixMillis;

/// Width of one bucket.
pub const BUCKET_SECONDS: u64 = 10;
/// What separates a field's kind from its label (labels may hold it too: the first one
/// separates).
const FIELD_SEPARATOR: char = '|';

/// What a count counts. Its label is a topic, `<topic>/<subscription>`, an outcome or a
/// reason, as [`Kind::label`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Events accepted, by topic.
    Published,
    /// Deliveries created by fan-out, by topic.
    Matched,
    /// Published events no subscription wanted, by topic.
    Unmatched,
    /// Deliveries the endpoint accepted, by topic/subscription.
    Delivered,
    /// Failed attempts, by topic/subscription.
    Failed,
    /// Failed attempts, by outcome.
    FailedBy,
    /// Deliveries dead-lettered, by topic/subscription.
    DeadLettered,
    /// Deliveries dead-lettered, by reason.
    DeadLetteredBy,
    /// Deliveries dropped, by topic/subscription.
    Dropped,
    /// Deliveries dropped, by reason.
    DroppedBy,
    /// Published events a subscription waiting for validation would have matched, and
    /// so missed, by topic/subscription.
    Missed,
    /// Archive backlog entries dropped at the bound (`EG__ARCHIVE__WHEN_FULL=drop-oldest`),
    /// by partition: a partition's backlog mixes topics.
    ArchiveDropped,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
        Kind::Published,
        Kind::Matched,
        Kind::Unmatched,
        Kind::Delivered,
        Kind::Failed,
        Kind::FailedBy,
        Kind::DeadLettered,
        Kind::DeadLetteredBy,
        Kind::Dropped,
        Kind::DroppedBy,
        Kind::Missed,
        Kind::ArchiveDropped,
    ];

    /// The kind as stored, before the separator of a field.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Published => "published",
            Kind::Matched => "matched",
            Kind::Unmatched => "unmatched",
            Kind::Delivered => "delivered",
            Kind::Failed => "failed",
            Kind::FailedBy => "failed-by",
            Kind::DeadLettered => "deadlettered",
            Kind::DeadLetteredBy => "deadlettered-by",
            Kind::Dropped => "dropped",
            Kind::DroppedBy => "dropped-by",
            Kind::Missed => "missed",
            Kind::ArchiveDropped => "archive-dropped",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == raw)
    }

    /// What the label of this kind is.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Published | Kind::Matched | Kind::Unmatched => "topic",
            Kind::Delivered | Kind::Failed | Kind::DeadLettered | Kind::Dropped | Kind::Missed => "topic/subscription",
            Kind::FailedBy => "outcome",
            Kind::DeadLetteredBy | Kind::DroppedBy => "reason",
            Kind::ArchiveDropped => "partition",
        }
    }
}

/// The hash field of a count: `<kind>|<label>`.
pub fn encode_stats_field(kind: Kind, label: &str) -> String {
    format!("{}{FIELD_SEPARATOR}{label}", kind.as_str())
}

/// The kind and label of a hash field; `None` for a field this version does not know.
pub fn decode_stats_field(field: &str) -> Option<(Kind, &str)> {
    let (kind, label) = field.split_once(FIELD_SEPARATOR)?;
    Some((Kind::parse(kind)?, label))
}

/// The number of the bucket holding time `at`.
pub fn bucket_of(at: UnixMillis) -> u64 {
    u64::try_from(at.0).unwrap_or(0) / 1000 / BUCKET_SECONDS
}

/// The buckets to sum for a window of `buckets` ending at `now` (oldest first), and how
/// many seconds they cover: the full ones before the current one, plus the part of the
/// current one that has passed (at least one second, so a rate is never a division by
/// almost nothing).
pub fn window_span(now: UnixMillis, buckets: u64) -> (Vec<u64>, f64) {
    let buckets = buckets.max(1);
    let current = bucket_of(now);
    let first = current.saturating_sub(buckets - 1);
    let now_ms = u64::try_from(now.0).unwrap_or(0);
    let into_current = now_ms.saturating_sub(current * BUCKET_SECONDS * 1000);
    let full = (current - first) * BUCKET_SECONDS * 1000;
    let seconds = ((full + into_current) as f64 / 1000.0).max(1.0);
    ((first..=current).collect(), seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_fields_keep_the_stored_bytes() {
        // Fields as every earlier version wrote them: a change here loses the counts of
        // the last hour at an upgrade.
        let stored = [
            (Kind::Published, "orders", "published|orders"),
            (Kind::Matched, "orders", "matched|orders"),
            (Kind::Unmatched, "orders", "unmatched|orders"),
            (Kind::Delivered, "orders/audit", "delivered|orders/audit"),
            (Kind::Failed, "orders/audit", "failed|orders/audit"),
            (Kind::FailedBy, "NotFound", "failed-by|NotFound"),
            (Kind::DeadLettered, "t/s", "deadlettered|t/s"),
            (
                Kind::DeadLetteredBy,
                "TimeToLiveExceeded",
                "deadlettered-by|TimeToLiveExceeded",
            ),
            (Kind::Dropped, "t/s", "dropped|t/s"),
            (Kind::DroppedBy, "EventMissing", "dropped-by|EventMissing"),
            (Kind::Missed, "signups/welcome", "missed|signups/welcome"),
            (Kind::ArchiveDropped, "3", "archive-dropped|3"),
        ];
        assert_eq!(stored.len(), Kind::ALL.len());
        for (kind, label, field) in stored {
            assert_eq!(encode_stats_field(kind, label), field);
            assert_eq!(decode_stats_field(field), Some((kind, label)));
        }
    }

    #[test]
    fn stats_fields_parse_back() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                decode_stats_field(&encode_stats_field(kind, "a/b|c")),
                Some((kind, "a/b|c"))
            );
        }
        assert_eq!(decode_stats_field("nonsense"), None);
        assert_eq!(decode_stats_field("future-kind|x"), None);
    }

    #[test]
    fn buckets_are_ten_seconds_of_unix_time() {
        assert_eq!(bucket_of(UnixMillis(1_700_000_005_000)), 170_000_000);
        assert_eq!(bucket_of(UnixMillis(1_700_000_009_999)), 170_000_000);
        assert_eq!(bucket_of(UnixMillis(1_700_000_010_000)), 170_000_001);
        assert_eq!(bucket_of(UnixMillis(-5)), 0);
    }

    #[test]
    fn windows_end_now_and_cover_the_passed_part_of_the_current_bucket() {
        // 2.5 s into bucket 100 (1000 s … 1010 s): five full buckets and 2.5 s.
        let (buckets, seconds) = window_span(UnixMillis(1_002_500), 6);
        assert_eq!(buckets, vec![95, 96, 97, 98, 99, 100]);
        assert!((seconds - 52.5).abs() < 1e-9, "{seconds}");
        // At the very start of a bucket the window is never shorter than a second.
        let (buckets, seconds) = window_span(UnixMillis(1_000_000), 1);
        assert_eq!(buckets, vec![100]);
        assert!((seconds - 1.0).abs() < 1e-9);
        // Near the epoch the window is simply shorter.
        let (buckets, _) = window_span(UnixMillis(15_000), 6);
        assert_eq!(buckets, vec![0, 1]);
    }
}
