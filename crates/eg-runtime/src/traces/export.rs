//! The OTLP exporter and its HTTP client: eg's own `reqwest` (rustls with ring, as
//! everywhere in eg), run on the process's tokio runtime.
//!
//! The SDK's batch processor exports from a thread of its own, outside any runtime, so
//! the client hands each request to the runtime it was built on and waits for the answer.

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig, WithHttpConfig};
use std::time::Duration;

/// The OTLP default for one export request (`OTEL_EXPORTER_OTLP_TIMEOUT`, milliseconds).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The span exporter the `OTEL_EXPORTER_OTLP_*` variables describe (endpoint, headers,
/// compression are read by the exporter itself); the timeout bounds each request here.
pub(super) fn span_exporter() -> Result<SpanExporter, Box<dyn std::error::Error + Send + Sync>> {
    let timeout = timeout_from(|name| std::env::var(name).ok());
    let client = OnRuntime::new(timeout)?;
    Ok(SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(timeout)
        .with_http_client(client)
        .build()?)
}

/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT`, in milliseconds;
/// the default when neither is a number.
fn timeout_from(var: impl Fn(&str) -> Option<String>) -> Duration {
    ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"]
        .iter()
        .find_map(|name| var(name)?.trim().parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
}

/// An HTTP client whose requests run on the tokio runtime it was made on.
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl OnRuntime {
    /// Must be called inside the runtime.
    fn new(timeout: Duration) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        // reqwest is built without a default crypto provider; use ring. An error only
        // means a provider is installed already, which reqwest then uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder().timeout(timeout).build()?;
        Ok(Self {
            client,
            runtime: tokio::runtime::Handle::try_current()?,
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let (status, headers, body) = self
            .runtime
            .spawn(async move {
                let response = client.execute(request).await?;
                let status = response.status();
                let headers = response.headers().clone();
                // A collector answers with a small protobuf status; the timeout bounds it.
                let body = response.bytes().await?;
                Ok::<_, reqwest::Error>((status, headers, body))
            })
            .await??;
        let mut response = Response::builder().status(status).body(body)?;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_is_read_in_milliseconds_per_signal_first() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        };
        assert_eq!(timeout_from(vars(&[])), DEFAULT_TIMEOUT);
        assert_eq!(
            timeout_from(vars(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "2500")])),
            Duration::from_millis(2500)
        );
        assert_eq!(
            timeout_from(vars(&[
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
                ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "700")
            ])),
            Duration::from_millis(700)
        );
        assert_eq!(
            timeout_from(vars(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")])),
            DEFAULT_TIMEOUT
        );
    }
}
