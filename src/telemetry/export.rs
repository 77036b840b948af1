//! The OTLP exporter's HTTP client: the SDK's batch processor exports from a thread of its own,
//! which has no async runtime, so each export is spawned onto the gateway's runtime and the
//! thread waits for it. A failed export (a dead collector, a refusal) is logged and dropped:
//! tracing is never a reason for the gateway to stop or for a request to wait.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use opentelemetry_http::{HttpClient, HttpError};
use tokio::runtime::Handle;

use crate::outbound::{self, Bound, HttpsClient, Trust};

/// Most bytes read of a collector's answer (it is only checked for its status).
const ANSWER_LIMIT: usize = 64 * 1024;

type Exported = Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'static>>;

/// Sends OTLP requests over a plain HTTP connection pool on the gateway's runtime.
#[derive(Debug, Clone)]
pub(super) struct Collector {
    client: HttpsClient,
    runtime: Handle,
    timeout: Duration,
}

// === impl Collector ===

impl Collector {
    /// A client on the runtime current now, its connections counted against `bound`; each
    /// export is bounded by `timeout`. Plain HTTP, as the exporter has always spoken.
    pub(super) fn new(runtime: Handle, timeout: Duration, bound: &Bound) -> Result<Self, outbound::TlsError> {
        let spec = outbound::ClientSpec {
            name: "otlp",
            connect_timeout: timeout,
            trust: Trust::PlainOnly,
            bound,
            idle_timeout: None,
            max_idle_per_host: Some(1),
        };
        Ok(Self { client: outbound::client(&spec)?, runtime, timeout })
    }

    fn send(&self, request: Request<Bytes>) -> Exported {
        let (client, timeout) = (self.client.clone(), self.timeout);
        let task = self.runtime.spawn(async move {
            let sent = tokio::time::timeout(timeout, exchange(client, request)).await;
            let answer = sent.unwrap_or_else(|_| Err(format!("no answer within {timeout:?}").into()));
            if let Err(e) = &answer {
                tracing::warn!(error = %e, "trace export failed; the spans are dropped");
            }
            answer
        });
        Box::pin(async move { task.await.map_err(HttpError::from)? })
    }
}

impl HttpClient for Collector {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.send(request)
    }
}

/// One POST to the collector. A refusal is logged here and still handed back, so that the
/// exporter's retry policy sees its status.
async fn exchange(client: HttpsClient, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
    let response = client.request(request.map(Full::new)).await?;
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, ANSWER_LIMIT).collect().await?.to_bytes();
    if !parts.status.is_success() {
        tracing::warn!(status = parts.status.as_u16(), "the trace collector refused an export");
    }
    Ok(Response::from_parts(parts, body))
}
