//! Legacy (2025-era) clients on the 2026-07-28 endpoint: each is relayed to the legacy
//! upstream as a transparent session of its own, so one URL serves both eras.
//!
//! A client's first request decides its era ([`speaks_legacy`], and an `initialize` body): a
//! legacy client is never given `input_required` (its requests never reach the MRTR bridge)
//! and a modern client is never relayed in-band (it never holds a session id). For a legacy
//! client the gateway rewrites only what it owns:
//! - the `Mcp-Session-Id` it hands out is the upstream's session sealed with the state key ring
//!   ([`crate::mrtr::session_id`]), never the upstream's id in clear, so any replica that reaches
//!   the same upstream can relay the session;
//! - the headers it sends upstream (no client credentials; the gateway's own, see [`http`]).
//!
//! Everything else is the legacy protocol itself, relayed: server requests arrive on the POST's
//! SSE stream or the GET stream and the client's answers are POSTed back upstream; the GET
//! stream, `DELETE` and resumption (`Last-Event-ID`) pass through. A Streamable HTTP upstream
//! is relayed byte for byte ([`http`], [`pump`]), a session's requests held while its GET
//! stream is on its way upstream ([`table::Entry::streams_opened`]); a stdio or HTTP+SSE
//! upstream gets a session of its own through the upstream seam ([`seam`]). Sessions are
//! bounded in number and end after an idle limit ([`table`]). The one exception to byte for
//! byte: the list results of a client the authorization rules restrict leave out what it may
//! not use ([`lists`], [`rewrite`]).

mod body;
mod error;
mod http;
mod lists;
mod metrics;
mod pump;
mod rewrite;
mod seam;
mod table;

use std::sync::Arc;

use ::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use ::http::request::Parts;
use ::http::{HeaderMap, HeaderValue, Method, Response, StatusCode};
use bytes::Bytes;
use hyper::body::Incoming;

pub use body::{label, LegacyBody, LegacyHead, LegacyRequest};
pub use error::LegacyError;
pub use lists::{ListFilter, Lists};
pub use metrics::LegacyMetrics;

use self::http::{refusal, HttpRelay};
use self::pump::Deadline;
use self::rewrite::Rewrite;
use self::seam::SeamConnector;
use self::table::{Entry, Link, Table};
use crate::body::FrontBody;
use crate::clock::Clock;
use crate::config::LegacyConfig;
use crate::defaults::LEGACY_STREAM_ORDER_WAIT;
use crate::mrtr::session_id::IdError;
use crate::mrtr::{LiveRing, Reach, SessionClaims, SessionIdError, SessionSealer};
use crate::outbound::Bound;
use crate::protocol::{headers, methods, Envelope, RequestId, FRONT_SUPPORTED_VERSIONS, MODERN_VERSION};
use crate::upstream::UpstreamSettings;

/// The legacy relay of one gateway; built once, shared by every request.
pub struct LegacyFront {
    /// The state key ring in use (session ids are sealed under their own label).
    keys: Arc<LiveRing>,
    table: Arc<Table>,
    upstream: Upstream,
    metrics: LegacyMetrics,
}

/// How sessions reach the upstream.
#[derive(Clone)]
enum Upstream {
    Http(Arc<HttpRelay>),
    Seam(SeamConnector),
}

/// The `legacy_refused_requests_total` reason of a list result too large to filter.
const LIST_TOO_LARGE: &str = "list_too_large";

/// True when the request belongs to a legacy session: it carries an `Mcp-Session-Id`, which
/// the gateway gives legacy clients only (a 2026-07-28 client never holds one).
pub fn speaks_legacy(headers: &HeaderMap) -> bool {
    headers.contains_key(headers::SESSION_ID)
}

/// True when a request without a session id comes from a legacy client: an `initialize`, or
/// a request naming a pre-2026 `MCP-Protocol-Version`, that carries no 2026-07-28 marker (the
/// modern version header or `_meta` protocol version). A modern client that sends a removed
/// method or an old version keeps its 2026-07-28 errors (-32601, -32020, -32022).
/// `modern_meta` says whether its params' `_meta` names a protocol version.
pub fn opens_legacy(headers: &HeaderMap, method: &str, modern_meta: bool) -> bool {
    let version = headers.get(headers::PROTOCOL_VERSION).and_then(|v| v.to_str().ok());
    if modern_meta || version.is_some_and(|v| FRONT_SUPPORTED_VERSIONS.contains(&v)) {
        return false;
    }
    method == methods::INITIALIZE || version.is_some_and(|v| is_date(v) && v < MODERN_VERSION)
}

/// True when `content_type` names the media type `expected` (its parameters aside); media
/// types are case-insensitive in HTTP.
fn is_media(content_type: &str, expected: &str) -> bool {
    content_type.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case(expected)
}

fn is_date(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() })
}

// === impl LegacyFront ===

impl LegacyFront {
    /// Builds the relay for the configured upstream; inside a Tokio runtime it also starts the
    /// task that ends idle sessions.
    pub fn new(
        cfg: &LegacyConfig,
        settings: Arc<UpstreamSettings>,
        keys: Arc<LiveRing>,
        metrics: LegacyMetrics,
        bound: Option<Bound>,
    ) -> Result<Arc<Self>, LegacyError> {
        let upstream = match (settings.stdio.is_some(), settings.legacy_sse, bound) {
            (true, _, _) => Upstream::Seam(SeamConnector::new(settings, None)),
            (false, true, Some(bound)) => Upstream::Seam(SeamConnector::new(settings, Some(bound))),
            (false, false, Some(bound)) => Upstream::Http(Arc::new(HttpRelay::new(&settings, &bound)?)),
            (false, _, None) => {
                return Err(LegacyError::Settings("a network upstream needs its connection bound".into()))
            }
        };
        let table =
            Table::new(cfg.max_sessions, cfg.max_sessions_per_principal, cfg.idle, metrics.sessions.clone());
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let ender = upstream.clone();
            handle.spawn(table::reap(Arc::downgrade(&table), move |entry| {
                let ender = ender.clone();
                async move { ender.end(&entry).await }
            }));
        }
        Ok(Arc::new(Self { keys, table, upstream, metrics }))
    }

    /// A sealer over the key ring current now.
    fn sealer(&self) -> SessionSealer {
        SessionSealer::shared(self.keys.current())
    }

    /// The list filtering of a request of a client whose lists `filter` restricts (see
    /// [`lists`]): a POST's list requests, or a stream resumed with `Last-Event-ID`; `None`
    /// when nothing in the response can be a list result to filter.
    pub fn lists(filter: Arc<dyn ListFilter>, parts: &Parts, body: &LegacyBody) -> Option<Lists> {
        match parts.method {
            Method::POST => Lists::for_post(filter, body),
            Method::GET if parts.headers.contains_key(headers::LAST_EVENT_ID) => {
                Some(Lists::for_resumed(filter))
            }
            _ => None,
        }
    }

    /// Relays one legacy request and counts it; `id` is its one request's
    /// ([`LegacyHead::id`]), answered with an error when the upstream's stream reaches the
    /// call's deadline first; `lists`, from [`LegacyFront::lists`], filters the list results
    /// in its response.
    pub async fn handle(
        &self,
        parts: &Parts,
        principal: &str,
        (body, id): (Bytes, Option<RequestId>),
        lists: Option<Lists>,
    ) -> Response<FrontBody> {
        let kind = match &parts.method {
            m if *m == Method::GET => "get",
            m if *m == Method::DELETE => "delete",
            _ if !parts.headers.contains_key(headers::SESSION_ID) => "initialize",
            _ => "post",
        };
        let lists = lists.map(|l| l.counting(self.metrics.refused.with_label_values(&[LIST_TOO_LARGE])));
        match self.route(parts, principal, (body, id), lists).await {
            Ok(response) => {
                self.metrics.relayed.with_label_values(&[kind]).inc();
                response
            }
            Err(e) => {
                self.metrics.refused.with_label_values(&[e.label()]).inc();
                if let LegacyError::PrincipalShare(_) = e {
                    let share = crate::limits::share::LEGACY_SESSIONS;
                    self.metrics.share_refusals.with_label_values(&[share]).inc();
                }
                if e.status().is_server_error() {
                    tracing::warn!(request = kind, error = %e.detail(), "legacy request failed");
                } else {
                    tracing::debug!(request = kind, error = %e.detail(), "legacy request refused");
                }
                e.response(None)
            }
        }
    }

    /// Ends every session this replica opened (at shutdown).
    pub async fn close_all(&self) {
        for entry in self.table.drain() {
            if entry.owned {
                self.upstream.end(&entry).await;
            }
        }
    }

    async fn route(
        &self,
        parts: &Parts,
        principal: &str,
        (body, id): (Bytes, Option<RequestId>),
        lists: Option<Lists>,
    ) -> Result<Response<FrontBody>, LegacyError> {
        if ![Method::POST, Method::GET, Method::DELETE].contains(&parts.method) {
            return Err(LegacyError::MethodNotAllowed(parts.method.to_string()));
        }
        let Some(front_id) = parts.headers.get(headers::SESSION_ID) else {
            return match parts.method == Method::POST {
                true => self.initialize(parts, principal, (body, id)).await,
                false => Err(LegacyError::MissingSession),
            };
        };
        let token = front_id.to_str().map_err(|_| malformed("not visible ASCII"))?;
        let claims = self.sealer().open(token, principal).map_err(LegacyError::BadSessionId)?;
        let entry = self.table.find_or_adopt(claims, |c| self.adopt(&c))?;
        if entry.is_ended() {
            return Err(LegacyError::NotHere);
        }
        match &entry.link {
            Link::Http => self.http_request(&entry, parts, (front_id, body, id), lists).await,
            Link::Seam(session) if !session.is_healthy() => {
                // The process exited or the stream broke: the client must start a new session.
                self.table.remove(&entry.claims.handle);
                session.close().await;
                Err(LegacyError::UpstreamForgot)
            }
            Link::Seam(session) => match parts.method {
                Method::DELETE => {
                    self.table.remove(&entry.claims.handle);
                    session.close().await;
                    Ok(empty(StatusCode::OK))
                }
                _ => session.handle(&entry, parts, body, lists).await,
            },
        }
    }

    /// A session opened by another replica: relayed only when its upstream is shared.
    fn adopt(&self, claims: &SessionClaims) -> Option<Link> {
        match (&self.upstream, claims.reach) {
            (Upstream::Http(_), Reach::Shared) => Some(Link::Http),
            _ => None,
        }
    }

    /// A POST without a session id: the client's `initialize`, on a new upstream session.
    async fn initialize(
        &self,
        parts: &Parts,
        principal: &str,
        (body, id): (Bytes, Option<RequestId>),
    ) -> Result<Response<FrontBody>, LegacyError> {
        let requested = check_initialize(&body)?;
        let reservation = self.table.reserve(principal)?;
        let relay = match &self.upstream {
            Upstream::Http(relay) => relay,
            Upstream::Seam(connector) => {
                let (session, response) = connector.open(&body).await?;
                let claims = SessionClaims::new(None, Reach::Local, principal, Clock::System.unix_now());
                let token = self.sealer().seal(&claims).map_err(seal_failed)?;
                reservation.fill(Entry::new(claims, Link::Seam(session), true));
                return with_session(response, &token);
            }
        };
        let resp = relay.send(Method::POST, &parts.headers, None, body).await?;
        if !resp.status().is_success() {
            return Err(refusal(resp).await);
        }
        let upstream_id =
            resp.headers().get(headers::SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let claims = SessionClaims::new(upstream_id, Reach::Shared, principal, Clock::System.unix_now());
        let token = match self.sealer().seal(&claims) {
            Ok(token) => HeaderValue::from_str(&token).map_err(|_| malformed("sealed id"))?,
            Err(e) => {
                if let Some(id) = &claims.upstream {
                    relay.delete(id, requested).await;
                }
                return Err(seal_failed(e));
            }
        };
        let entry = reservation.fill(Entry::new(claims, Link::Http, true));
        entry.set_version(requested);
        tracing::info!(session = %entry.claims.handle, "legacy session opened");
        Ok(relayed(resp, &entry, &token, Some(relay.deadline(id)), None))
    }

    /// A request of a session relayed to a Streamable HTTP upstream.
    async fn http_request(
        &self,
        entry: &Arc<Entry>,
        parts: &Parts,
        (front_id, body, id): (&HeaderValue, Bytes, Option<RequestId>),
        lists: Option<Lists>,
    ) -> Result<Response<FrontBody>, LegacyError> {
        let Upstream::Http(relay) = &self.upstream else { return Err(LegacyError::NotHere) };
        let active = entry.begin();
        // The upstream sees the session's requests in the order this replica received them,
        // as far as a GET stream goes (see `Entry::streams_opened`).
        let opening = match parts.method == Method::GET {
            true => Some(entry.opening_stream()),
            false => {
                entry.streams_opened(LEGACY_STREAM_ORDER_WAIT).await;
                None
            }
        };
        entry.set_version(parts.headers.get(headers::PROTOCOL_VERSION).cloned());
        let upstream_id = entry.claims.upstream.as_deref();
        let resp = relay.send(parts.method.clone(), &parts.headers, upstream_id, body).await?;
        drop((opening, active));
        if resp.status() == StatusCode::NOT_FOUND && upstream_id.is_some() {
            self.table.remove(&entry.claims.handle);
            return Err(LegacyError::UpstreamForgot);
        }
        if !resp.status().is_success() {
            return Err(refusal(resp).await);
        }
        if parts.method == Method::DELETE {
            self.table.remove(&entry.claims.handle);
            tracing::info!(session = %entry.claims.handle, "legacy session deleted by its client");
            return Ok(empty(resp.status()));
        }
        let deadline = (parts.method == Method::POST).then(|| relay.deadline(id));
        Ok(relayed(resp, entry, front_id, deadline, lists))
    }
}

// === impl Upstream ===

impl Upstream {
    /// Ends a session upstream (DELETE, or closing its own upstream session).
    async fn end(&self, entry: &Entry) {
        match (self, &entry.link) {
            (Self::Http(relay), Link::Http) => {
                if let Some(id) = &entry.claims.upstream {
                    relay.delete(id, entry.version()).await;
                }
            }
            (_, Link::Seam(session)) => session.close().await,
            (Self::Seam(_), Link::Http) => {}
        }
    }
}

/// The upstream's response as the client gets it: its status, its body streamed (its list
/// results filtered by `lists`), its `Content-Type` and `Cache-Control`, and the sealed session
/// id in place of the upstream's.
fn relayed(
    resp: Response<Incoming>,
    entry: &Arc<Entry>,
    front_id: &HeaderValue,
    deadline: Option<Deadline>,
    lists: Option<Lists>,
) -> Response<FrontBody> {
    let (head, body) = resp.into_parts();
    let content_type = head.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let deadline = deadline.map(|d| d.for_stream(content_type));
    let rewrite = lists.and_then(|l| Rewrite::new(l, content_type));
    let mut out = Response::new(pump::stream(body, entry.begin(), entry.ended(), deadline, rewrite));
    *out.status_mut() = head.status;
    for name in [CONTENT_TYPE, CACHE_CONTROL] {
        if let Some(v) = head.headers.get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    out.headers_mut().insert(headers::SESSION_ID, front_id.clone());
    out
}

fn with_session(mut resp: Response<FrontBody>, token: &str) -> Result<Response<FrontBody>, LegacyError> {
    let value = HeaderValue::from_str(token).map_err(|_| malformed("sealed id"))?;
    resp.headers_mut().insert(headers::SESSION_ID, value);
    Ok(resp)
}

fn empty(status: StatusCode) -> Response<FrontBody> {
    let mut r = Response::new(FrontBody::empty());
    *r.status_mut() = status;
    r
}

/// A POST that opens a session must be an `initialize` request; returns the version it asks.
fn check_initialize(body: &[u8]) -> Result<Option<HeaderValue>, LegacyError> {
    match Envelope::parse(body) {
        Ok(Envelope::Request(r)) if r.method == methods::INITIALIZE => {
            let version = r.params.as_ref().and_then(|p| p.get("protocolVersion")).and_then(|v| v.as_str());
            Ok(version.and_then(|v| HeaderValue::from_str(v).ok()))
        }
        _ => Err(LegacyError::MissingSession),
    }
}

fn malformed(what: &'static str) -> LegacyError {
    LegacyError::BadSessionId(SessionIdError::Id(IdError::Malformed(what)))
}

fn seal_failed(e: SessionIdError) -> LegacyError {
    LegacyError::Settings(format!("sealing the session id: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::jsonrpc::Request;
    use crate::protocol::meta;

    fn with(name: ::http::HeaderName, value: &'static str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(name, HeaderValue::from_static(value));
        map
    }

    fn request(method: &str, params: serde_json::Value) -> Request {
        Request { id: crate::protocol::RequestId::Number(1), method: method.to_owned(), params: Some(params) }
    }

    fn opens_request(headers: &HeaderMap, r: &Request) -> bool {
        let modern_meta =
            r.params.as_ref().and_then(|p| p.get("_meta")?.get(meta::PROTOCOL_VERSION)).is_some();
        opens_legacy(headers, &r.method, modern_meta)
    }

    #[test]
    fn era_detection() {
        assert!(speaks_legacy(&with(headers::SESSION_ID, "anything")));
        assert!(!speaks_legacy(&with(headers::PROTOCOL_VERSION, "2025-06-18")));
        let none = HeaderMap::new();
        let old = with(headers::PROTOCOL_VERSION, "2025-06-18");
        let new = with(headers::PROTOCOL_VERSION, MODERN_VERSION);
        let modern_meta = serde_json::json!({"_meta": {meta::PROTOCOL_VERSION: MODERN_VERSION}});
        assert!(opens_request(&none, &request("initialize", serde_json::json!({}))));
        assert!(opens_request(&old, &request("tools/list", serde_json::json!({}))));
        assert!(opens_request(
            &with(headers::PROTOCOL_VERSION, "2024-11-05"),
            &request("ping", serde_json::json!({}))
        ));
        // A modern client sending a removed method or an old version header stays modern.
        assert!(!opens_request(&new, &request("initialize", serde_json::json!({}))));
        assert!(!opens_request(&none, &request("initialize", modern_meta.clone())));
        assert!(!opens_request(&old, &request("tools/call", modern_meta)));
        // Only a date names a version: not garbage, nor a date with a digit too many.
        for not_a_date in ["garbage", "2025-06-180"] {
            assert!(!opens_request(
                &with(headers::PROTOCOL_VERSION, not_a_date),
                &request("tools/list", serde_json::json!({}))
            ));
        }
        assert!(!opens_request(&none, &request("tools/list", serde_json::json!({}))));
    }

    /// A filter that keeps everything: only whether one applies is looked at.
    struct KeepAll;

    impl ListFilter for KeepAll {
        fn retain_listed(&self, _: &str, _: &mut serde_json::Value) -> usize {
            0
        }
    }

    fn parts(method: Method, headers: HeaderMap) -> Parts {
        let mut request = ::http::Request::new(());
        *request.method_mut() = method;
        *request.headers_mut() = headers;
        request.into_parts().0
    }

    #[test]
    fn lists_are_filtered_in_a_posts_answer_or_a_resumed_stream_only() {
        let filter: Arc<dyn ListFilter> = Arc::new(KeepAll);
        let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let post = LegacyBody::Messages(vec![list]);
        let resumed = with(headers::LAST_EVENT_ID, "7");
        assert!(LegacyFront::lists(filter.clone(), &parts(Method::POST, HeaderMap::new()), &post).is_some());
        assert!(LegacyFront::lists(filter.clone(), &parts(Method::GET, resumed.clone()), &LegacyBody::Empty)
            .is_some());
        // A fresh GET stream carries no response, nor does anything a DELETE answers.
        let fresh = parts(Method::GET, HeaderMap::new());
        assert!(LegacyFront::lists(filter.clone(), &fresh, &LegacyBody::Empty).is_none());
        assert!(LegacyFront::lists(filter, &parts(Method::DELETE, resumed), &post).is_none());
    }

    #[test]
    fn only_initialize_opens_a_session() {
        assert!(check_initialize(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#).is_ok());
        assert!(check_initialize(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_err());
        assert!(check_initialize(b"[]").is_err());
    }
}
