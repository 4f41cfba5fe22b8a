//! Errors of the Redis layer.

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("redis connection pool: {0}")]
    Pool(#[from] deadpool::managed::PoolError<redis::RedisError>),
    #[error("unexpected data in redis at {key}: {problem}")]
    Corrupt { key: String, problem: String },
    #[error("{0}")]
    Layout(String),
    /// A Redis setting that cannot work (a TLS file that cannot be read, a URL that is
    /// not one); names the setting.
    #[error("{0}")]
    Config(String),
    #[error("stored on the primary, but only {acked} of {wanted} replicas confirmed it in time")]
    NotReplicated { acked: u16, wanted: u16 },
    #[error("redis did not answer within {0:?}")]
    Timeout(std::time::Duration),
}

impl StoreError {
    pub(crate) fn corrupt(key: impl Into<String>, problem: impl ToString) -> Self {
        Self::Corrupt {
            key: key.into(),
            problem: problem.to_string(),
        }
    }

    /// A consumer group is missing (Redis came back empty): recreate groups and go on.
    pub fn is_missing_group(&self) -> bool {
        matches!(self, Self::Redis(e) if e.code() == Some("NOGROUP"))
    }
}
