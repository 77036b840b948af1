//! The HTTP exchanges with the legacy server: POST, GET (streams) and DELETE, and for the
//! deprecated HTTP+SSE transport the GET of its event stream and the POST to its endpoint.
//!
//! One keep-alive client is built per pool and cloned into every session, so the hot path
//! never builds a client or a TLS/TCP stack per request: for a plain `http://` upstream the
//! client whose connections the requests drive themselves ([`super::driven`]), for `https://`
//! `hyper-util`'s pooled client. Their connector is bounded
//! ([`super::limit`]): `max_connections` open, `max_connecting` being opened, whatever the
//! load; requests in flight are bounded below that ([`super::slots`]), so a request never
//! starts a connect that cannot get a connection slot, and one past the bound waits its turn
//! for a slot. `https://` upstreams get
//! TLS on top of the bounded TCP connections ([`crate::outbound::tls`]), with the roots and
//! client identity configured, SNI from the URL's host and HTTP/2 or HTTP/1.1 by ALPN. Every
//! request carries only
//! what the gateway itself decides: the configured extra headers and the session's own
//! `Mcp-Session-Id` and `MCP-Protocol-Version`; nothing from the front client.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use prometheus::IntGauge;

use super::super::{UpstreamError, UpstreamSettings};
use super::drain::CancelDrain;
use super::driven::{Driven, UpstreamBody};
use super::slots::{self, SlotBody, Slots};
use crate::outbound::{self, Bound};
use crate::protocol::headers;

/// The first revision whose clients send `MCP-Protocol-Version` on every request.
const VERSION_HEADER_SINCE: &str = "2025-06-18";
/// Largest error body read to explain a failed status.
const ERROR_BODY_LIMIT: usize = 4096;
const ACCEPT_BOTH: &str = "application/json, text/event-stream";
const ACCEPT_SSE: &str = "text/event-stream";
const SLOTS_CLOSED: &str = "the upstream request slots were closed";
/// Headers a request gets besides the configured ones: the session id and version, the trace
/// context and mirrored `Mcp-*` headers, `Content-Type`, `Accept`, and hyper's `Host`.
const REQUEST_HEADERS: usize = 10;

/// The client under a transport: a plain upstream's connections are driven by its requests
/// ([`super::driven`]); an `https://` one keeps `hyper-util`'s pooled client (TLS, HTTP/2).
#[derive(Clone)]
enum UpstreamClient {
    Driven(Driven),
    Pooled(Box<outbound::HttpsClient>),
}

/// A shareable handle on the upstream's HTTP endpoint.
#[derive(Clone)]
pub(crate) struct Transport {
    client: UpstreamClient,
    bound: Bound,
    slots: Slots,
    settings: Arc<UpstreamSettings>,
    /// Whether this upstream ends a cancelled call's stream (see `drain.rs`).
    cancel_drain: Arc<CancelDrain>,
}

/// The headers a session adds to every request after `initialize`.
#[derive(Clone, Default)]
pub(crate) struct SessionHeaders {
    session_id: Option<HeaderValue>,
    version: Option<HeaderValue>,
    /// The trace context of one call's POST (empty unless tracing is on).
    trace: Vec<(HeaderName, HeaderValue)>,
}

// === impl SessionHeaders ===

impl SessionHeaders {
    /// Headers for a negotiated `version`; the version header exists from 2025-06-18 on.
    pub(crate) fn new(session_id: Option<HeaderValue>, version: &str) -> Self {
        let version =
            (version >= VERSION_HEADER_SINCE).then(|| HeaderValue::from_str(version).ok()).flatten();
        Self { session_id, version, trace: Vec::new() }
    }

    /// These headers with a call's trace context added (nothing is allocated for none).
    pub(crate) fn traced(mut self, trace: &[(HeaderName, HeaderValue)]) -> Self {
        self.trace.extend_from_slice(trace);
        self
    }

    /// The session id, for a span.
    pub(crate) fn session_id(&self) -> Option<&str> {
        self.session_id.as_ref().and_then(|v| v.to_str().ok())
    }

    fn apply(&self, map: &mut HeaderMap) {
        if let Some(id) = &self.session_id {
            map.insert(headers::SESSION_ID, id.clone());
        }
        if let Some(v) = &self.version {
            map.insert(headers::PROTOCOL_VERSION, v.clone());
        }
        for (name, value) in &self.trace {
            map.insert(name, value.clone());
        }
    }

    fn has_session(&self) -> bool {
        self.session_id.is_some()
    }
}

// === impl Transport ===

impl Transport {
    /// Builds the keep-alive client for an absolute `http://` or `https://` URL. `connections`
    /// follows the number of connections open.
    pub(crate) fn new(settings: Arc<UpstreamSettings>, connections: IntGauge) -> Result<Self, UpstreamError> {
        let (max, connecting, wait) =
            (settings.max_connections, settings.max_connecting, settings.connect_timeout);
        Self::with_bound(settings, Bound::new(max, connecting, wait, connections))
    }

    /// As [`Transport::new`], counting connections against a `bound` shared with other clients
    /// of the same upstream.
    pub(crate) fn with_bound(settings: Arc<UpstreamSettings>, bound: Bound) -> Result<Self, UpstreamError> {
        let https = match settings.url.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(UpstreamError::Settings(format!("upstream url {} is not http(s)", settings.url)))
            }
        };
        if settings.url.host().is_none() {
            return Err(UpstreamError::Settings(format!("upstream url {} has no host", settings.url)));
        }
        // Every session's GET stream and call stream (pooled or listening), and one more
        // request, always fit.
        let streams = 2 * (settings.pool_max_sessions + settings.listen_sessions) + 1;
        let slots = Slots::new(slots::bound(settings.max_connections, settings.max_connecting, streams));
        // A plain upstream never handshakes, so it loads no trust roots (a minimal image may
        // have none).
        let client = if https {
            let spec = outbound::ClientSpec {
                name: "upstream",
                connect_timeout: settings.connect_timeout,
                trust: outbound::Trust::Verified(&settings.tls),
                bound: &bound,
                idle_timeout: Some(settings.pool_idle_timeout),
                max_idle_per_host: Some(settings.max_connections),
            };
            let pooled =
                outbound::client(&spec).map_err(|e| UpstreamError::Settings(format!("upstream TLS: {e}")))?;
            UpstreamClient::Pooled(Box::new(pooled))
        } else {
            let (idle, max) = (settings.pool_idle_timeout, settings.max_connections);
            let connector = outbound::connector(settings.connect_timeout, &bound);
            UpstreamClient::Driven(Driven::new(connector, &settings.url, idle, max)?)
        };
        Ok(Self { client, bound, slots, settings, cancel_drain: Arc::default() })
    }

    /// The bound the upstream's connections count against, for the legacy relay to share.
    pub(crate) fn bound(&self) -> &Bound {
        &self.bound
    }

    /// What this upstream does with a cancelled call's stream, as seen so far.
    pub(crate) fn cancel_drain(&self) -> &CancelDrain {
        &self.cancel_drain
    }

    pub(crate) fn settings(&self) -> &UpstreamSettings {
        &self.settings
    }

    /// Connections open now.
    #[cfg(test)]
    pub(crate) fn connections(&self) -> usize {
        self.bound.open()
    }

    /// POSTs one JSON-RPC message; the response status is checked.
    pub(crate) async fn post(
        &self,
        session: &SessionHeaders,
        body: impl Into<Bytes>,
    ) -> Result<Response<SlotBody>, UpstreamError> {
        let resp = self.send(self.post_request(session, body.into())).await?;
        check(resp, session.has_session()).await
    }

    /// POSTs a call's request, like [`post`](Self::post) but with no timer of its own: the call
    /// is bounded by its own deadline (`Call::next_event`), which starts first and so always
    /// ends first, or by its consumer going away (the reader then stops, `exchange::drive`). A
    /// second timer here cost every call a timer wheel entry and never fired first.
    pub(crate) async fn post_call(
        &self,
        session: &SessionHeaders,
        body: Bytes,
    ) -> Result<Response<SlotBody>, UpstreamError> {
        let resp = self.exchange(self.post_request(session, body)).await?;
        check(resp, session.has_session()).await
    }

    fn post_request(&self, session: &SessionHeaders, body: Bytes) -> Request<Full<Bytes>> {
        let mut req = self.request(Method::POST, session, body);
        req.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        req.headers_mut().insert(ACCEPT, HeaderValue::from_static(ACCEPT_BOTH));
        req
    }

    /// Opens a GET stream, resuming after `last_event_id` if given. `Ok(None)` means 405: the
    /// server offers no GET stream.
    pub(crate) async fn get(
        &self,
        session: &SessionHeaders,
        last_event_id: Option<&str>,
    ) -> Result<Option<Response<SlotBody>>, UpstreamError> {
        let mut req = self.request(Method::GET, session, Bytes::new());
        req.headers_mut().insert(ACCEPT, HeaderValue::from_static(ACCEPT_SSE));
        if let Some(id) = last_event_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            req.headers_mut().insert(headers::LAST_EVENT_ID, id);
        }
        let resp = self.send(req).await?;
        if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(None);
        }
        check(resp, session.has_session()).await.map(Some)
    }

    /// Ends the session; 405 (the server does not let clients end sessions) is not an error.
    pub(crate) async fn delete(&self, session: &SessionHeaders) -> Result<(), UpstreamError> {
        let req = self.request(Method::DELETE, session, Bytes::new());
        let resp = self.send(req).await?;
        if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        check(resp, session.has_session()).await.map(drop)
    }

    /// Opens the event stream of a deprecated HTTP+SSE server at the configured URL.
    pub(crate) async fn open_event_stream(&self) -> Result<Response<SlotBody>, UpstreamError> {
        let mut req = self.request(Method::GET, &SessionHeaders::default(), Bytes::new());
        req.headers_mut().insert(ACCEPT, HeaderValue::from_static(ACCEPT_SSE));
        let resp = self.send(req).await?;
        check(resp, false).await
    }

    /// POSTs one message to a deprecated HTTP+SSE server's message endpoint, which answers with
    /// a bare status (202); the reply, if any, comes on the event stream.
    pub(crate) async fn post_to(&self, endpoint: &Uri, body: Vec<u8>) -> Result<(), UpstreamError> {
        let mut req =
            self.request_to(Method::POST, endpoint.clone(), &SessionHeaders::default(), body.into());
        req.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let resp = check(self.send(req).await?, false).await?;
        // Read the short body so that the connection can be reused.
        let body = Limited::new(resp.into_body(), ERROR_BODY_LIMIT).collect();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), body).await;
        Ok(())
    }

    fn request(&self, method: Method, session: &SessionHeaders, body: Bytes) -> Request<Full<Bytes>> {
        self.request_to(method, self.settings.url.clone(), session, body)
    }

    fn request_to(
        &self,
        method: Method,
        uri: Uri,
        session: &SessionHeaders,
        body: Bytes,
    ) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        // Sized once for what is added here and by hyper (the session's, the trace's, the
        // content's and `Host`): grown from empty, the map was reallocated on the way.
        *req.headers_mut() = HeaderMap::with_capacity(self.settings.extra_headers.len() + REQUEST_HEADERS);
        let map = req.headers_mut();
        for (name, value) in &self.settings.extra_headers {
            map.append(name, value.clone());
        }
        session.apply(map);
        req
    }

    /// Takes a request slot, sends the request and waits for the response head, all bounded by
    /// the request timeout; the body holds the slot.
    async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<SlotBody>, UpstreamError> {
        let timeout = self.settings.request_timeout;
        tokio::time::timeout(timeout, self.exchange(req))
            .await
            .unwrap_or(Err(UpstreamError::Timeout(timeout)))
    }

    /// Takes a request slot, sends the request and waits for the response head, unbounded; the
    /// body holds the slot.
    async fn exchange(&self, req: Request<Full<Bytes>>) -> Result<Response<SlotBody>, UpstreamError> {
        let slot = self.slots.take().await.ok_or_else(|| UpstreamError::Closed(SLOTS_CLOSED.to_owned()))?;
        let resp = match &self.client {
            UpstreamClient::Driven(driven) => driven.request(req).await?,
            UpstreamClient::Pooled(pooled) => match pooled.request(req).await {
                Err(e) if e.is_connect() => return Err(UpstreamError::Connect(e.into())),
                Err(e) => return Err(UpstreamError::Transport(e.into())),
                Ok(resp) => resp.map(UpstreamBody::Pooled),
            },
        };
        Ok(resp.map(|body| SlotBody::new(body, slot)))
    }
}

/// Turns a failed status into an error: 404 on a request with a session id means the session
/// expired (the spec makes the client start a new one); other failures keep a body excerpt.
async fn check(resp: Response<SlotBody>, has_session: bool) -> Result<Response<SlotBody>, UpstreamError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    if status == StatusCode::NOT_FOUND && has_session {
        return Err(UpstreamError::SessionExpired);
    }
    let body = Limited::new(resp.into_body(), ERROR_BODY_LIMIT).collect();
    let text = match tokio::time::timeout(std::time::Duration::from_secs(2), body).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        _ => Bytes::new(),
    };
    Err(UpstreamError::http(status, &text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_sessions_two_streams_and_one_more_request_fit_in_the_request_slots() {
        let mut settings = UpstreamSettings::new("http://127.0.0.1:1/mcp".parse().unwrap());
        (settings.pool_max_sessions, settings.listen_sessions) = (3, 2);
        // No room left for connects: the floor, the sessions' streams, decides.
        (settings.max_connections, settings.max_connecting) = (20, 20);
        let gauge = IntGauge::new("connections", "upstream connections").unwrap();
        let transport = Transport::new(Arc::new(settings), gauge).unwrap();
        assert_eq!(transport.slots.available(), 2 * (3 + 2) + 1);
    }
}
