//! The check's HTTP client of the embedded gateway (its front and its admin listener), built
//! by the one outbound client factory ([`crate::outbound`]): loopback, plain HTTP, a few
//! connections, every request and body bounded in time and size.

use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use prometheus::IntGauge;
use serde_json::Value;

use crate::defaults::MAX_EVENT_BYTES;
use crate::outbound::{self, Bound, ClientSpec, HttpsClient, Trust};
use crate::upstream::sse::SseParser;

/// Connections the check opens to its gateway at most (it makes one request at a time).
const MAX_CONNECTIONS: usize = 4;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client of the embedded gateway.
pub(super) struct Http {
    client: HttpsClient,
    /// Bound on one request, its whole body included.
    timeout: Duration,
}

// === impl Http ===

impl Http {
    pub(super) fn new(timeout: Duration) -> Result<Self, String> {
        let gauge =
            IntGauge::new("check_connections", "connections of the check").map_err(|e| e.to_string())?;
        let bound = Bound::new(MAX_CONNECTIONS, MAX_CONNECTIONS, CONNECT_TIMEOUT, gauge);
        let spec = ClientSpec {
            name: "check",
            connect_timeout: CONNECT_TIMEOUT,
            trust: Trust::PlainOnly,
            bound: &bound,
            idle_timeout: None,
            max_idle_per_host: None,
        };
        let client = outbound::client(&spec).map_err(|e| e.to_string())?;
        Ok(Self { client, timeout })
    }

    /// POSTs `body` with `headers` and returns the JSON-RPC message it answered: the JSON body,
    /// or the last message of an SSE body.
    pub(super) async fn post(
        &self,
        url: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Vec<u8>,
    ) -> Result<Value, String> {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let request = request.body(Full::new(Bytes::from(body))).map_err(|e| e.to_string())?;
        let (content_type, bytes) = self.send(request).await?;
        if content_type.starts_with("text/event-stream") {
            return last_message(&bytes);
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("the answer is not JSON: {e}"))
    }

    /// GETs `url` and parses its JSON body.
    pub(super) async fn get_json(&self, url: &str) -> Result<Value, String> {
        let request = Request::get(url).body(Full::new(Bytes::new())).map_err(|e| e.to_string())?;
        let (_, bytes) = self.send(request).await?;
        serde_json::from_slice(&bytes).map_err(|e| format!("the answer is not JSON: {e}"))
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> Result<(String, Bytes), String> {
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| crate::logging::chain(&e))?;
            let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
            let content_type = content_type.unwrap_or_default().to_owned();
            let body = Limited::new(response.into_body(), MAX_EVENT_BYTES).collect().await;
            let bytes = body.map_err(|e| format!("reading the answer: {e}"))?.to_bytes();
            Ok::<_, String>((content_type, bytes))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| format!("no answer within {:?}", self.timeout))?
    }
}

/// The last JSON-RPC response of an SSE body.
fn last_message(bytes: &[u8]) -> Result<Value, String> {
    let events = SseParser::new(MAX_EVENT_BYTES).feed(bytes).map_err(|e| e.to_string())?;
    events
        .iter()
        .rev()
        .filter_map(|e| serde_json::from_str::<Value>(&e.data).ok())
        .find(|m| m.get("method").is_none() && m.get("id").is_some())
        .ok_or_else(|| "the event stream ended without a response".to_owned())
}
