//! Output batching (behaviour.md#output-batching): how ready deliveries for one
//! subscription are cut into requests. Optimistic: batches are cut from what is ready now
//! and nothing waits to fill one. A batch holds at most `max_events_per_batch` events and
//! stays under the preferred size, except that an event bigger than the preferred size goes
//! alone.

use crate::subscription::BatchSettings;
use std::ops::Range;

/// Cuts events of the given serialized sizes (in order) into consecutive batches.
pub fn plan(sizes: &[usize], settings: BatchSettings) -> Vec<Range<usize>> {
    let max_events = settings.max_events_per_batch.max(1) as usize;
    let preferred_bytes = settings.preferred_batch_size_in_kilobytes as usize * 1024;
    let mut batches = Vec::new();
    let mut start = 0;
    // The body is a JSON array: brackets plus a comma between events.
    let mut bytes = 2;
    for (i, size) in sizes.iter().enumerate() {
        let count = i - start;
        let grown = bytes + size + usize::from(count > 0);
        if count > 0 && (count == max_events || grown > preferred_bytes) {
            batches.push(start..i);
            start = i;
            bytes = 2 + size;
        } else {
            bytes = grown;
        }
    }
    if start < sizes.len() {
        batches.push(start..sizes.len());
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn settings(max_events: u32, kb: u32) -> BatchSettings {
        BatchSettings {
            max_events_per_batch: max_events,
            preferred_batch_size_in_kilobytes: kb,
        }
    }

    #[test]
    fn batching_off_means_one_event_per_request() {
        assert_eq!(plan(&[10, 10, 10], BatchSettings::default()), vec![0..1, 1..2, 2..3]);
    }

    #[test]
    fn respects_the_event_count() {
        assert_eq!(plan(&[10; 5], settings(2, 64)), vec![0..2, 2..4, 4..5]);
    }

    #[test]
    fn stays_under_the_preferred_size_and_sends_oversize_events_alone() {
        // 1 KB preferred: two 400-byte events fit (2 + 400 + 1 + 400), a third does not.
        assert_eq!(plan(&[400, 400, 400], settings(10, 1)), vec![0..2, 2..3]);
        assert_eq!(plan(&[100, 5000, 100], settings(10, 1)), vec![0..1, 1..2, 2..3]);
        assert_eq!(plan(&[], settings(10, 1)), Vec::<Range<usize>>::new());
    }

    proptest! {
        #[test]
        fn every_event_in_exactly_one_batch_within_limits(
            sizes in proptest::collection::vec(1usize..3000, 0..60),
            max_events in 1u32..8,
            kb in 1u32..4,
        ) {
            let batches = plan(&sizes, settings(max_events, kb));
            let mut next = 0;
            for b in &batches {
                prop_assert_eq!(b.start, next);
                prop_assert!(!b.is_empty());
                prop_assert!(b.len() <= max_events as usize);
                let bytes: usize = 2 + sizes[b.clone()].iter().sum::<usize>() + b.len() - 1;
                prop_assert!(b.len() == 1 || bytes <= kb as usize * 1024);
                next = b.end;
            }
            prop_assert_eq!(next, sizes.len());
        }
    }
}
