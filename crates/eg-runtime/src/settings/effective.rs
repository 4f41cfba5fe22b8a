//! The delivery settings as the tiers apply them, for people: what `--print-settings`
//! prints (every tier reads the same settings, so any tier's binary can be asked), and
//! the warning for a configured retry schedule whose steps a retry minimum raises.
//!
//! Everything here is read back from the parsed policies of eg-core, never from a second
//! list of defaults, so what is printed is what a sender does.

use super::{Settings, SettingsError};
use eg_core::AttemptOutcome;
use eg_core::outcome::{Handling, OutcomeName, OutcomePolicy};
use eg_core::policy::{DeliveryPolicy, ProfilePolicies};
use eg_core::probation::{ProbationPolicy, Signal};
use eg_core::subscription::{NAMESPACE_DEFAULT_TTL, NAMESPACE_MAX_DELIVERY_COUNT, RetryPolicy};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

/// How long a retry waits at least after a failing HTTP status, by status.
struct Minimums {
    /// The minimum most failing statuses get (the `*` rule, unless overridden widely).
    common: Duration,
    /// Statuses whose minimum differs from `common`, by minimum.
    exceptions: BTreeMap<Duration, Vec<u16>>,
}

impl Minimums {
    /// Read back from the outcome table by classifying every retried status.
    fn of(outcomes: &OutcomePolicy) -> Self {
        let mut by_minimum: BTreeMap<Duration, Vec<u16>> = BTreeMap::new();
        for code in 100..=599u16 {
            let status = AttemptOutcome::Status {
                code,
                retry_after: None,
            };
            if let Handling::Retry { at_least } = outcomes.classify(&status) {
                by_minimum.entry(at_least).or_default().push(code);
            }
        }
        let common = by_minimum
            .iter()
            .max_by_key(|(_, codes)| codes.len())
            .map_or(Duration::ZERO, |(minimum, _)| *minimum);
        by_minimum.remove(&common);
        Self {
            common,
            exceptions: by_minimum,
        }
    }

    fn describe(&self) -> String {
        if self.common.is_zero() && self.exceptions.is_empty() {
            return "none".to_owned();
        }
        let mut text = format!("{} for most failing statuses", human(self.common));
        for (minimum, codes) in &self.exceptions {
            let _ = write!(text, ", {} for {}", human(*minimum), statuses(codes));
        }
        text
    }
}

/// What a sender should warn about at start: for each profile, the retry schedule steps
/// that the retry minimum of most failing statuses raises, so the schedule as written
/// does not apply.
pub fn schedule_warnings(policies: &ProfilePolicies) -> Vec<String> {
    [
        raised_schedule_steps(&policies.custom_topic, "delivery"),
        raised_schedule_steps(&policies.namespace_topic, "namespace"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The warning for one profile's policy, if a step is raised; `setting` names its
/// section (`delivery` or `namespace`).
fn raised_schedule_steps(policy: &DeliveryPolicy, setting: &str) -> Option<String> {
    let minimums = Minimums::of(&policy.outcomes);
    let steps = policy.schedule.steps();
    let raised: Vec<String> = steps
        .iter()
        .enumerate()
        .filter(|(_, step)| **step < minimums.common)
        .map(|(i, step)| format!("step {} ({})", i + 1, human(*step)))
        .collect();
    if raised.is_empty() {
        return None;
    }
    let variable = setting.to_ascii_uppercase();
    Some(format!(
        "{setting}.retry_schedule {}: {} raised to {} by {setting}.retry_minimums after a failing HTTP status \
         (timeouts and connection failures keep the schedule); set EG__{variable}__RETRY_MINIMUMS \
         (e.g. *=0s) for the schedule to apply",
        schedule(steps),
        raised.join(", "),
        human(minimums.common),
    ))
}

impl Settings {
    /// The warnings about these settings ([`schedule_warnings`]).
    pub fn delivery_warnings(&self) -> Result<Vec<String>, SettingsError> {
        Ok(schedule_warnings(&self.delivery_policies()?))
    }

    /// The effective delivery settings in words: retries per profile and how their
    /// delays come about, the per-subscription limits, probation, dead-lettering and
    /// validation, then any warnings.
    pub fn describe_delivery(&self) -> Result<String, SettingsError> {
        let policies = self.delivery_policies()?;
        let mut out = String::new();
        let custom = RetryPolicy::default();
        let _ = writeln!(out, "Delivery settings (defaults, then --config, then EG__ variables):");
        let _ = writeln!(out);
        let _ = writeln!(out, "Retries, custom topics (EG__DELIVERY__…):");
        describe_profile(&mut out, &policies.custom_topic, &self.delivery.not_retried);
        let _ = writeln!(
            out,
            "  per subscription:  retryPolicy maxDeliveryAttempts (default {}) and eventTimeToLiveInMinutes \
             (default {}); whichever runs out first dead-letters",
            custom.max_delivery_attempts(),
            custom.event_time_to_live().as_secs() / 60,
        );
        let _ = writeln!(out, "Retries, namespace topics (EG__NAMESPACE__…):");
        describe_profile(&mut out, &policies.namespace_topic, &self.namespace.not_retried);
        let _ = writeln!(
            out,
            "  per subscription:  maxDeliveryCount (default {NAMESPACE_MAX_DELIVERY_COUNT}) and eventTimeToLive \
             (default {})",
            human(NAMESPACE_DEFAULT_TTL),
        );
        let _ = writeln!(out, "Both:");
        let _ = writeln!(
            out,
            "  every delay:       the schedule step, raised to the status's minimum and to a 429/503 \
             Retry-After (at most {}), plus jitter (a tenth, at most {})",
            human(self.delivery.max_retry_after),
            human(self.delivery.max_jitter),
        );
        let _ = writeln!(out, "  attempt timeout:   {}", human(self.delivery.timeout));
        let _ = writeln!(out);
        self.describe_probation(&mut out)?;
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Dead letters (EG__DEADLETTER__…): written {} after dead-lettering, to {}",
            human(self.deadletter.delay),
            self.deadletter.dir.display(),
        );
        let _ = writeln!(
            out,
            "Endpoint validation (EG__VALIDATION__ENABLED): {}",
            if self.validation.enabled {
                "on: an endpoint must answer the handshake before it gets events"
            } else {
                "off: every endpoint is trusted"
            }
        );
        for warning in self.delivery_warnings()? {
            let _ = writeln!(out);
            let _ = writeln!(out, "WARNING: {warning}");
        }
        Ok(out)
    }

    fn describe_probation(&self, out: &mut String) -> Result<(), SettingsError> {
        let Some(policy) = self.probation_policy()? else {
            let _ = writeln!(out, "Endpoint probation (EG__PROBATION__…): off");
            return Ok(());
        };
        let _ = writeln!(
            out,
            "Endpoint probation (EG__PROBATION__…): after {} consecutive failed attempts to one endpoint \
             (all its subscriptions and events together)",
            policy.failure_threshold(),
        );
        let _ = writeln!(out, "  first probation:   {}", probation_lengths(&policy));
        let _ = writeln!(
            out,
            "  then:              each further one {}× longer, at most {}; one success ends it",
            self.probation.growth,
            human(policy.max()),
        );
        let _ = writeln!(
            out,
            "  meanwhile:         deliveries are held back (history state HeldBack), not charged an \
             attempt; their time-to-live still runs"
        );
        Ok(())
    }
}

fn describe_profile(out: &mut String, policy: &DeliveryPolicy, not_retried: &str) {
    let minimums = Minimums::of(&policy.outcomes);
    let steps = policy.schedule.steps();
    let used: Vec<Duration> = steps.iter().map(|step| (*step).max(minimums.common)).collect();
    let _ = writeln!(
        out,
        "  schedule:          {} (the delay after each failed attempt; the last repeats)",
        schedule(steps)
    );
    let _ = writeln!(out, "  minimums:          {}", minimums.describe());
    if used == steps {
        let _ = writeln!(out, "  delays used:       as scheduled, after any failure");
    } else {
        let _ = writeln!(
            out,
            "  delays used:       {} after a failing status; {} after a timeout or connection failure",
            schedule(&used),
            schedule(steps),
        );
    }
    let not_retried: Vec<&str> = not_retried
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let _ = writeln!(
        out,
        "  not retried:       {} (dead-lettered at once)",
        if not_retried.is_empty() {
            "nothing".to_owned()
        } else {
            not_retried.join(", ")
        }
    );
}

/// The first probation's length per failure outcome, grouped by length.
fn probation_lengths(policy: &ProbationPolicy) -> String {
    let mut by_length: BTreeMap<Duration, Vec<&str>> = BTreeMap::new();
    for outcome in OutcomeName::ALL {
        if Signal::of(outcome) == Signal::Failure {
            by_length
                .entry(policy.base(outcome).min(policy.max()))
                .or_default()
                .push(outcome.as_str());
        }
    }
    by_length
        .iter()
        .map(|(length, outcomes)| format!("{} ({})", human(*length), outcomes.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

fn schedule(steps: &[Duration]) -> String {
    steps.iter().map(|step| human(*step)).collect::<Vec<_>>().join(", ")
}

/// `500ms`, `10s`, `2m`, `1h 30m`, `24h`: durations as the settings are written.
fn human(duration: Duration) -> String {
    let millis = duration.subsec_millis();
    let secs = duration.as_secs();
    if secs == 0 {
        return if millis == 0 {
            "0s".to_owned()
        } else {
            format!("{millis}ms")
        };
    }
    let parts = [(secs / 3600, "h"), (secs / 60 % 60, "m"), (secs % 60, "s")];
    let mut text: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    if millis > 0 {
        text.push(format!("{millis}ms"));
    }
    text.join(" ")
}

/// Status codes, consecutive ones as ranges: `408`, `500-599`.
fn statuses(codes: &[u16]) -> String {
    let mut ranges: Vec<(u16, u16)> = Vec::new();
    for &code in codes {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == code => *end = code,
            _ => ranges.push((code, code)),
        }
    }
    ranges
        .iter()
        .map(|(start, end)| {
            if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        Settings::load(None, pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap()
    }

    #[test]
    fn the_default_floor_raising_a_configured_quick_schedule_is_warned_about() {
        let s = settings(&[("EG__DELIVERY__RETRY_SCHEDULE", "2s,5s,10s")]);
        let warnings = s.delivery_warnings().unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("step 1 (2s), step 2 (5s) raised to 10s"),
            "{}",
            warnings[0]
        );
        assert!(warnings[0].contains("EG__DELIVERY__RETRY_MINIMUMS"), "{}", warnings[0]);
        assert!(
            s.describe_delivery()
                .unwrap()
                .contains("WARNING: delivery.retry_schedule")
        );
    }

    #[test]
    fn a_schedule_the_minimums_do_not_raise_is_not_warned_about() {
        let quick = settings(&[
            ("EG__DELIVERY__RETRY_SCHEDULE", "2s,5s,10s"),
            ("EG__DELIVERY__RETRY_MINIMUMS", "*=0s"),
        ]);
        assert!(quick.delivery_warnings().unwrap().is_empty());
        // The defaults: Event Grid's schedule starts at the 10 s floor, 408 and 503 are
        // meant to wait longer.
        assert!(settings(&[]).delivery_warnings().unwrap().is_empty());
    }

    #[test]
    fn the_description_shows_the_delays_really_used() {
        let text = settings(&[("EG__DELIVERY__RETRY_SCHEDULE", "2s,5s,30s")])
            .describe_delivery()
            .unwrap();
        assert!(
            text.contains("schedule:          2s, 5s, 30s (the delay after each failed attempt; the last repeats)"),
            "{text}"
        );
        assert!(
            text.contains("10s for most failing statuses, 30s for 503, 2m for 408"),
            "{text}"
        );
        assert!(
            text.contains("10s, 10s, 30s after a failing status; 2s, 5s, 30s after a timeout"),
            "{text}"
        );
        assert!(text.contains("after 10 consecutive failed attempts"), "{text}");
        assert!(text.contains("maxDeliveryAttempts (default 30)"), "{text}");
        assert!(text.contains("written 5m after dead-lettering"), "{text}");
    }

    #[test]
    fn probation_lengths_are_read_back_from_the_policy() {
        let text = settings(&[("EG__PROBATION__LENGTHS", "*=5s,NotFound=20s")])
            .describe_delivery()
            .unwrap();
        assert!(
            text.contains("5s (BadRequest, PayloadTooLarge, GenericError)"),
            "{text}"
        );
        assert!(text.contains("20s (NotFound)"), "{text}");
        let off = settings(&[("EG__PROBATION__ENABLED", "false")])
            .describe_delivery()
            .unwrap();
        assert!(off.contains("Endpoint probation (EG__PROBATION__…): off"), "{off}");
    }

    #[test]
    fn durations_are_written_as_the_settings_take_them() {
        assert_eq!(human(Duration::from_millis(500)), "500ms");
        assert_eq!(human(Duration::ZERO), "0s");
        assert_eq!(human(Duration::from_secs(90)), "1m 30s");
        assert_eq!(human(Duration::from_secs(86_400)), "24h");
    }

    #[test]
    fn status_lists_are_written_as_ranges() {
        assert_eq!(statuses(&[408, 500, 501, 502, 504]), "408, 500-502, 504");
    }
}
