//! The **probation record**: one hash per endpoint, written only by `endpoint_gate.lua`
//! and `endpoint_record.lua` (their headers list these fields), read back here for
//! display and gauges. Counts and times are decimal strings; times are unix ms.

use eg_core::UnixMillis;
use eg_core::probation::{ProbationRecord, parse_outcome};
use std::collections::HashMap;

/// Consecutive failures (a count; missing is 0).
pub const FAILURES_FIELD: &str = "f";
/// Probation level: how many probations in a row (a count; missing is 0).
pub const LEVEL_FIELD: &str = "l";
/// When the current probation ends (a time; missing: never on probation).
pub const PROBATION_UNTIL_FIELD: &str = "u";
/// When the current prober's lease ends (a time; missing: nobody probes).
pub const PROBE_LEASE_UNTIL_FIELD: &str = "p";
/// The outcome of the last failure (an outcome name).
pub const LAST_FAILURE_FIELD: &str = "o";
/// When the last failure happened (a time).
pub const LAST_FAILURE_AT_FIELD: &str = "t";

/// An endpoint's probation record from its hash; `None` for an empty hash (a missing
/// key: the endpoint has a clear record). The error says which field is not what it
/// should be.
pub fn decode_probation_record(fields: &HashMap<String, String>) -> Result<Option<ProbationRecord>, String> {
    if fields.is_empty() {
        return Ok(None);
    }
    let get = |name: &str| fields.get(name).map(String::as_str);
    let count = |name: &str| -> Result<u32, String> {
        get(name).map_or(Ok(0), |v| {
            v.parse().map_err(|_| format!("field {name} = {v:?} is not a count"))
        })
    };
    let time = |name: &str| -> Result<Option<UnixMillis>, String> {
        get(name)
            .map(|v| {
                v.parse()
                    .map(UnixMillis)
                    .map_err(|_| format!("field {name} = {v:?} is not a time"))
            })
            .transpose()
    };
    let last_failure = get(LAST_FAILURE_FIELD)
        .map(|v| parse_outcome(v).ok_or_else(|| format!("field {LAST_FAILURE_FIELD} = {v:?} is not an outcome")))
        .transpose()?;
    Ok(Some(ProbationRecord {
        consecutive_failures: count(FAILURES_FIELD)?,
        level: count(LEVEL_FIELD)?,
        probation_until: time(PROBATION_UNTIL_FIELD)?,
        probe_lease_until: time(PROBE_LEASE_UNTIL_FIELD)?,
        last_failure,
        last_failure_at: time(LAST_FAILURE_AT_FIELD)?,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use eg_core::OutcomeName;

    fn hash(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn probation_records_keep_the_stored_fields() {
        // A hash as the scripts write it: a change here makes stored records unreadable.
        let stored = hash(&[
            ("f", "12"),
            ("l", "2"),
            ("u", "1700000020000"),
            ("p", "1700000030000"),
            ("o", "Busy"),
            ("t", "1700000000000"),
        ]);
        assert_eq!(
            decode_probation_record(&stored),
            Ok(Some(ProbationRecord {
                consecutive_failures: 12,
                level: 2,
                probation_until: Some(UnixMillis(1_700_000_020_000)),
                probe_lease_until: Some(UnixMillis(1_700_000_030_000)),
                last_failure: Some(OutcomeName::Busy),
                last_failure_at: Some(UnixMillis(1_700_000_000_000)),
            }))
        );
        // Only a lease (a prober took it): counts read as zero, the rest as absent.
        assert_eq!(
            decode_probation_record(&hash(&[("p", "5")])),
            Ok(Some(ProbationRecord {
                consecutive_failures: 0,
                level: 0,
                probation_until: None,
                probe_lease_until: Some(UnixMillis(5)),
                last_failure: None,
                last_failure_at: None,
            }))
        );
    }

    #[test]
    fn scripts_write_the_fields_named_here() {
        let gate = include_str!("../scripts/endpoint_gate.lua");
        let record = include_str!("../scripts/endpoint_record.lua");
        for field in [PROBATION_UNTIL_FIELD, PROBE_LEASE_UNTIL_FIELD] {
            assert!(gate.contains(&format!("'{field}'")), "endpoint_gate.lua: {field}");
        }
        for field in [
            FAILURES_FIELD,
            LEVEL_FIELD,
            PROBATION_UNTIL_FIELD,
            PROBE_LEASE_UNTIL_FIELD,
            LAST_FAILURE_FIELD,
            LAST_FAILURE_AT_FIELD,
        ] {
            assert!(record.contains(&format!("'{field}'")), "endpoint_record.lua: {field}");
        }
    }

    #[test]
    fn a_hash_that_is_not_a_probation_record_is_corrupt() {
        assert!(decode_probation_record(&hash(&[("o", "Nope")])).is_err());
        assert!(decode_probation_record(&hash(&[("u", "soon")])).is_err());
        assert!(decode_probation_record(&hash(&[("f", "-1")])).is_err());
        assert_eq!(decode_probation_record(&HashMap::new()), Ok(None));
    }
}
