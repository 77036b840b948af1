//! The HTTP side of a transparent legacy session: requests to a Streamable HTTP upstream that
//! carry what the client sent, minus what the gateway owns.
//!
//! Forwarded from the client: the body, and only `Content-Type`, `Accept`,
//! `MCP-Protocol-Version`, `Last-Event-ID` (resumption) and the W3C trace context. Never the
//! client's `Authorization` or cookies (no token passthrough): the upstream gets the gateway's
//! own configured headers instead. The `Mcp-Session-Id` sent is the upstream's own, opened from
//! the sealed one the client holds. The client is its own keep-alive pool (one per gateway), so
//! a request builds nothing but the request.

use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use super::error::{error_parts, LegacyError};
use super::pump::Deadline;
use crate::outbound::{self, Bound, Trust};
use crate::protocol::{headers, RequestId};
use crate::upstream::UpstreamSettings;

/// Largest upstream error body read, for the log.
const ERROR_BODY_LIMIT: usize = 4096;
/// Longest spent reading an upstream error body.
const ERROR_BODY_TIME: Duration = Duration::from_secs(2);

/// Client headers a legacy request carries upstream.
const FORWARDED: [HeaderName; 6] = [
    CONTENT_TYPE,
    ACCEPT,
    headers::PROTOCOL_VERSION,
    headers::LAST_EVENT_ID,
    HeaderName::from_static("traceparent"),
    HeaderName::from_static("tracestate"),
];

/// The relay's handle on the upstream endpoint; clones share the connections.
#[derive(Clone)]
pub(super) struct HttpRelay {
    client: outbound::HttpsClient,
    url: Uri,
    extra: HeaderMap,
    /// Bound on the response head.
    head_timeout: Duration,
    /// Bound on a POST's whole response stream (a call's life).
    call_timeout: Duration,
}

// === impl HttpRelay ===

impl HttpRelay {
    /// A relay to the upstream of `settings`, its connections counted against `bound`: the
    /// upstream's own, so that `upstream.max_connections` covers the relay too.
    pub(super) fn new(settings: &UpstreamSettings, bound: &Bound) -> Result<Self, LegacyError> {
        let https = settings.url.scheme_str() == Some("https");
        let spec = outbound::ClientSpec {
            name: "legacy",
            connect_timeout: settings.connect_timeout,
            trust: if https { Trust::Verified(&settings.tls) } else { Trust::PlainOnly },
            bound,
            idle_timeout: Some(settings.pool_idle_timeout),
            max_idle_per_host: None,
        };
        let client =
            outbound::client(&spec).map_err(|e| LegacyError::Settings(format!("upstream TLS: {e}")))?;
        Ok(Self {
            client,
            url: settings.url.clone(),
            extra: settings.extra_headers.clone(),
            head_timeout: settings.request_timeout,
            call_timeout: settings.request_timeout,
        })
    }

    /// The deadline of a POST's response stream starting now; `id` is the POST's one request,
    /// answered with a timeout error if its stream is still open then.
    pub(super) fn deadline(&self, id: Option<RequestId>) -> Deadline {
        Deadline::new(self.call_timeout, id)
    }

    /// Sends one request of session `upstream_session` (or of none, for `initialize`).
    pub(super) async fn send(
        &self,
        method: Method,
        front: &HeaderMap,
        upstream_session: Option<&str>,
        body: Bytes,
    ) -> Result<Response<Incoming>, LegacyError> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = self.url.clone();
        let map = req.headers_mut();
        for name in FORWARDED {
            for value in front.get_all(&name) {
                map.append(name.clone(), value.clone());
            }
        }
        for (name, value) in &self.extra {
            map.append(name, value.clone());
        }
        if let Some(id) = upstream_session {
            let value = HeaderValue::from_str(id)
                .map_err(|_| LegacyError::Settings("the upstream session id is not a header value".into()))?;
            map.insert(headers::SESSION_ID, value);
        }
        match tokio::time::timeout(self.head_timeout, self.client.request(req)).await {
            Err(_) => Err(LegacyError::Timeout(self.head_timeout)),
            Ok(Err(e)) => Err(LegacyError::Transport(e)),
            Ok(Ok(resp)) => Ok(resp),
        }
    }

    /// Ends an upstream session (DELETE) at protocol `version`; a refusal is logged, never fatal.
    pub(super) async fn delete(&self, upstream_session: &str, version: Option<HeaderValue>) {
        let mut map = HeaderMap::new();
        map.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        if let Some(v) = version {
            map.insert(headers::PROTOCOL_VERSION, v);
        }
        match self.send(Method::DELETE, &map, Some(upstream_session), Bytes::new()).await {
            Ok(resp) => tracing::debug!(status = %resp.status(), "legacy session deleted upstream"),
            Err(e) => tracing::warn!(error = %e.detail(), "deleting a legacy session upstream failed"),
        }
    }
}

/// The error for an upstream refusal, with an excerpt of its body for the log.
pub(super) async fn refusal(resp: Response<Incoming>) -> LegacyError {
    let status = resp.status();
    let json = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").contains("json");
    let read = Limited::new(resp.into_body(), ERROR_BODY_LIMIT).collect();
    let body = match tokio::time::timeout(ERROR_BODY_TIME, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        _ => Bytes::new(),
    };
    let (code, id) = if json { error_parts(&body) } else { (None, None) };
    LegacyError::Status { status, code, id, body: String::from_utf8_lossy(&body).chars().take(512).collect() }
}
