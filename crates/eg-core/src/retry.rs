//! The custom-topic retry schedule (behaviour.md#retry-schedule-and-policy): the delay
//! after each failed attempt. The last step repeats until attempts or the time-to-live run
//! out.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule {
    steps: Vec<Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("retry schedule {input:?}: {problem}")]
pub struct ScheduleError {
    input: String,
    problem: String,
}

impl Default for RetrySchedule {
    /// 10 s, 30 s, 1 min, 5 min, 10 min, 30 min, 1 h, 3 h, 6 h, then every 12 h.
    fn default() -> Self {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        Self {
            steps: vec![
                Duration::from_secs(10),
                Duration::from_secs(30),
                minutes(1),
                minutes(5),
                minutes(10),
                minutes(30),
                minutes(60),
                minutes(180),
                minutes(360),
                minutes(720),
            ],
        }
    }
}

impl RetrySchedule {
    /// The namespace-topic schedule (behaviour.md#namespace-topics): the first attempt is
    /// immediate, then 10 s, 30 s, 1 min, 5 min, and every 5 min after that.
    pub fn namespace_topic() -> Self {
        Self {
            steps: vec![
                Duration::from_secs(10),
                Duration::from_secs(30),
                Duration::from_secs(60),
                Duration::from_secs(300),
            ],
        }
    }

    /// Parses comma-separated durations such as `1s,2s,5s`.
    pub fn parse(input: &str) -> Result<Self, ScheduleError> {
        let error = |problem: String| ScheduleError {
            input: input.to_owned(),
            problem,
        };
        let steps = input
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| humantime::parse_duration(s).map_err(|e| error(format!("{s:?}: {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        if steps.is_empty() {
            return Err(error("needs at least one duration".into()));
        }
        Ok(Self { steps })
    }

    /// The delay after the `failed_attempts`-th failure (1-based); the last step repeats.
    pub fn delay_after(&self, failed_attempts: u32) -> Duration {
        let index = (failed_attempts.max(1) as usize - 1).min(self.steps.len() - 1);
        self.steps[index]
    }

    pub fn steps(&self) -> &[Duration] {
        &self.steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_schedule_ends_repeating_every_twelve_hours() {
        let s = RetrySchedule::default();
        assert_eq!(s.delay_after(1), Duration::from_secs(10));
        assert_eq!(s.delay_after(4), Duration::from_secs(300));
        assert_eq!(s.delay_after(10), Duration::from_secs(12 * 3600));
        assert_eq!(s.delay_after(25), Duration::from_secs(12 * 3600));
    }

    #[test]
    fn parses_and_repeats_the_last_step() {
        let s = RetrySchedule::parse("1s, 2s,500ms").unwrap();
        assert_eq!(s.delay_after(1), Duration::from_secs(1));
        assert_eq!(s.delay_after(3), Duration::from_millis(500));
        assert_eq!(s.delay_after(9), Duration::from_millis(500));
    }

    #[test]
    fn refuses_garbage() {
        assert!(RetrySchedule::parse("").is_err());
        assert!(
            RetrySchedule::parse("1s,soon")
                .unwrap_err()
                .to_string()
                .contains("\"soon\"")
        );
    }
}
