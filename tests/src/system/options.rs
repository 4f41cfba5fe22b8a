//! How a [`System`](super::System) is set up: sender count and `EG__…` overrides on top
//! of the harness defaults.

/// How a [`System`](super::System) is set up. Later `env` values win over the harness defaults.
#[derive(Debug, Clone)]
pub struct Options {
    pub(super) senders: usize,
    pub(super) env: Vec<(String, String)>,
    pub(super) redis: super::Redis,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            senders: 1,
            env: Vec::new(),
            redis: super::Redis::default(),
        }
    }
}

impl Options {
    /// How many `eg-sender` processes to start (0 is fine: start them later).
    pub fn senders(mut self, count: usize) -> Self {
        self.senders = count;
        self
    }

    /// Which Redis the system runs on (default: one server, or a Cluster with
    /// `EG_TEST_REDIS=cluster`).
    pub fn redis(mut self, redis: super::Redis) -> Self {
        self.redis = redis;
        self
    }

    /// An extra `EG__…` variable for every tier, overriding the harness default.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// `EG__DELIVERY__RETRY_SCHEDULE` (the harness default is `1s`).
    pub fn retry_schedule(self, schedule: &str) -> Self {
        self.env("EG__DELIVERY__RETRY_SCHEDULE", schedule)
    }

    /// `EG__DELIVERY__TIMEOUT` and `EG__DELIVERY__VISIBILITY_TIMEOUT` (defaults `2s`, `10s`).
    pub fn delivery_timeouts(self, timeout: &str, visibility_timeout: &str) -> Self {
        self.env("EG__DELIVERY__TIMEOUT", timeout)
            .env("EG__DELIVERY__VISIBILITY_TIMEOUT", visibility_timeout)
    }
}
