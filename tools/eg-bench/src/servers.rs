//! The servers eg-testkit starts for a scenario (Azurite, moto's S3 server, RabbitMQ,
//! NATS). eg-testkit's helpers are written for tests: they block, and panic when a server
//! is missing or refuses a setup call. Here each runs off the async threads and a panic
//! becomes the scenario's error, so `eg-bench all` reports the row as failed (saying what
//! to install) and goes on with the others.

/// Runs `start` (a server's start and its setup calls) on a blocking thread.
pub async fn start<T, F>(what: &str, start: F) -> anyhow::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::task::spawn_blocking(start).await {
        Ok(started) => Ok(started),
        Err(e) if e.is_panic() => {
            let payload = e.into_panic();
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "no message".to_owned());
            anyhow::bail!("cannot start {what}: {message}")
        }
        Err(e) => anyhow::bail!("cannot start {what}: {e}"),
    }
}
