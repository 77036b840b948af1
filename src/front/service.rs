//! The front request handler: HTTP checks, body, JSON-RPC parse, `_meta` and header
//! validation, dispatch, and the one log line and metrics of every request. Built once at start
//! and shared by every connection; a request clones an `Arc` and nothing else. The limits a
//! request meets before it gets here (concurrency, time, body size) are the stack's.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;
use opentelemetry::context::FutureExt as _;
use tokio::time::Instant;
use tower::{BoxError, Service};

use super::guard::{self, Accepts};
use super::outcome::{Outcome, OutcomeLabel};
use super::tool_headers::{Limits as HeaderLimits, ToolHeaders};
use super::validate::{self, RequestMeta};
use super::{discover, relay, respond, stream};
use crate::auth::{Auth, Grants, Identity};
use crate::body::FrontBody;
use crate::bridge::{upstream_params, upstream_raw, Bridge, MrtrRequest, Reply};
use crate::capabilities::ClientCaps;
use crate::config::FrontConfig;
use crate::error::FrontError;
use crate::legacy::{LegacyBody, LegacyFront, LegacyHead};
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::mrtr::{input_responses, request_state, LegacyVersion};
use crate::protocol::jsonrpc::{Envelope, Request as RpcRequest};
use crate::protocol::log_level::LogLevel;
use crate::protocol::methods::{self, FrontMethod, MrtrMethod, RelayMethod};
use crate::protocol::params::{Params, ParamsError, Read};
use crate::protocol::{RequestId, FRONT_SUPPORTED_VERSIONS};
use crate::schema::OutputSchema;
use crate::subscriptions::Subscriptions;
use crate::tasks::Tasks;
use crate::telemetry::{request_id, FrontRequest, FrontTrace, Tracing};
use crate::upstream::Pool;

/// Everything a front request needs, built once.
pub struct FrontState {
    pub cfg: FrontConfig,
    pub auth: Auth,
    pub metrics: Arc<Metrics>,
    pub pool: Arc<Pool>,
    pub bridge: Arc<Bridge>,
    /// Protocol version proposed upstream (shapes the declared capabilities).
    pub upstream_version: LegacyVersion,
    cache_fields: String,
    /// The relay of legacy (2025-era) clients; `None` when they are refused.
    legacy: Option<Arc<LegacyFront>>,
    /// The upstream's `x-mcp-header` annotations, learnt from its tool lists.
    tool_headers: ToolHeaders,
    /// Whether `tools/call` headers are checked against them (not on the stdio front, whose
    /// headers are made from the body).
    param_headers: bool,
    /// `[limits]`: taken by every request, an MRTR chain's retries included.
    limits: Limits,
    /// The `subscriptions/listen` bridge; `None` when it is off (the method is then unknown).
    pub(super) subscriptions: Option<Arc<Subscriptions>>,
    /// OpenTelemetry spans of each request; `None` when tracing is off.
    tracing: Option<Arc<Tracing>>,
    /// The task bridge; `None` when it is off (the `tasks/*` methods are then unknown). The
    /// internal listener serves other replicas' task requests with it too.
    pub(crate) tasks: Option<Arc<Tasks>>,
}

/// Where a request enters (see [`FrontState::entrance`]).
enum Entrance<'a> {
    /// A GET of the RFC 9728 metadata document, answered at once.
    Metadata(Response<FrontBody>),
    /// A request of a legacy session.
    Legacy(&'a Arc<LegacyFront>),
    /// The 2026-07-28 front (or a legacy client's first request, known once parsed).
    Modern,
}

/// A request as parsed at the front: its params indexed, or why they could not be (the
/// validation refuses it then, unless it is a legacy client's, relayed as its bytes).
pub(super) type Indexed = RpcRequest<Result<Params, ParamsError>>;

/// A parsed request, its params' index unwrapped.
fn index(r: RpcRequest<Read>) -> Indexed {
    RpcRequest { id: r.id, method: r.method, params: r.params.map(|read| read.0) }
}

/// A validated request on its way to dispatch.
pub(super) struct Call {
    pub id: RequestId,
    pub kind: FrontMethod,
    /// The params as the client sent them, indexed (an object: validation sees to it).
    pub params: Params,
    pub meta: RequestMeta,
    pub caps: ClientCaps,
    pub principal: Arc<str>,
    /// What the principal may call (checked in dispatch, applied to list results).
    pub grants: Grants,
    pub accepts: Accepts,
    /// The `_meta` log level: the request's opt-in to log messages.
    pub log_level: Option<LogLevel>,
    /// A `tools/call`'s tool's compiled `outputSchema`, once the catalogue knows it.
    pub output: Option<Arc<OutputSchema>>,
}

// === impl FrontState ===

impl FrontState {
    pub fn new(
        cfg: FrontConfig,
        auth: Auth,
        metrics: Arc<Metrics>,
        pool: Arc<Pool>,
        bridge: Bridge,
        upstream_version: LegacyVersion,
    ) -> Self {
        let cache_fields = respond::cache_fields(cfg.cache_ttl_ms, cfg.cache_scope.as_str());
        let tool_headers = ToolHeaders::new(HeaderLimits::default(), pool.tools_changed().clone());
        let limits = Limits::new(&crate::config::LimitsConfig::default());
        Self {
            cfg,
            auth,
            metrics,
            pool,
            bridge: Arc::new(bridge),
            upstream_version,
            cache_fields,
            legacy: None,
            tool_headers,
            param_headers: true,
            limits,
            subscriptions: None,
            tracing: None,
            tasks: None,
        }
    }

    /// Makes a span of every request with `tracing`.
    pub fn with_tracing(mut self, tracing: Option<Arc<Tracing>>) -> Self {
        self.tracing = tracing;
        self
    }

    /// Applies `limits` to every request.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Skips the `Mcp-Param-*` checks: for a front whose headers are made from the body, which
    /// the spec lets ignore `x-mcp-header` (tools with invalid annotations stay hidden).
    pub fn without_param_headers(mut self) -> Self {
        self.param_headers = false;
        self
    }

    /// Bridges `subscriptions/listen` with `subscriptions` (and says so in `server/discover`).
    /// `None` (the bridge off) leaves `subscriptions/listen` unknown.
    pub fn with_subscriptions(mut self, subscriptions: Option<Arc<Subscriptions>>) -> Self {
        self.subscriptions = subscriptions;
        self
    }

    /// Serves legacy task tools as tasks with `tasks` (and says so in `server/discover`).
    /// `None` (the bridge off) hides the tools that can only run as legacy tasks.
    pub fn with_tasks(mut self, tasks: Option<Arc<Tasks>>) -> Self {
        self.tasks = tasks;
        self
    }

    /// The `x-mcp-header` catalogue, which the tool lists teach.
    pub(super) fn tool_headers(&self) -> &ToolHeaders {
        &self.tool_headers
    }

    /// What the task bridge learns from the tool lists, when it is on.
    pub(super) fn task_catalogue(&self) -> Option<&crate::tasks::Catalogue> {
        self.tasks.as_deref().map(Tasks::catalogue)
    }

    /// Relays legacy clients with `legacy` instead of refusing them.
    pub fn with_legacy(mut self, legacy: Arc<LegacyFront>) -> Self {
        self.legacy = Some(legacy);
        self
    }

    /// [`Self::handle`] for the stack, which wants a `Result` and a future owning its state.
    async fn serve<B>(self: Arc<Self>, req: Request<B>) -> Result<Response<FrontBody>, Infallible>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        Ok(self.handle(req).await)
    }

    async fn handle<B>(self: &Arc<Self>, req: Request<B>) -> Response<FrontBody>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let started = Instant::now();
        let (parts, body) = req.into_parts();
        // Boxed, and only made when tracing is on, so it costs an untraced request nothing.
        let mut trace = self.tracing.as_ref().map(|t| Box::new(t.front(&parts.headers)));
        let (method, outcome) = match self.entrance(&parts) {
            Entrance::Metadata(doc) => return doc,
            // The legacy relay's futures are boxed so that they do not size the future of
            // every modern request, which is held for as long as the request runs.
            Entrance::Legacy(legacy) => Box::pin(self.legacy_request(legacy, &parts, body)).await,
            Entrance::Modern => self.modern(parts, body, trace.as_deref_mut()).await,
        };
        // A streamed request is recorded when its stream ends, with its real outcome.
        if outcome.label != OutcomeLabel::Streamed {
            self.record(method, &outcome, started);
        }
        if let Some(t) = trace {
            t.end(method, outcome.ended());
        }
        outcome.response
    }

    /// Which entrance serves a request, decided once from its head: the metadata document, a
    /// legacy session (it carries an `Mcp-Session-Id`), or the 2026-07-28 front, which hands a
    /// legacy client's first request to the relay once its body is parsed. Every entrance meets
    /// the same stack layers, authentication, rules, limits and outcome record.
    fn entrance(&self, parts: &Parts) -> Entrance<'_> {
        if let Some(doc) = self.metadata(parts) {
            return Entrance::Metadata(doc);
        }
        match self.legacy.as_ref() {
            Some(legacy)
                if parts.uri.path() == self.cfg.path && crate::legacy::speaks_legacy(&parts.headers) =>
            {
                Entrance::Legacy(legacy)
            }
            _ => Entrance::Modern,
        }
    }

    /// A request of the 2026-07-28 front, up to its outcome (a legacy client's first request is
    /// relayed from here, after the one parse of its body).
    async fn modern<B>(
        self: &Arc<Self>,
        parts: Parts,
        body: B,
        trace: Option<&mut FrontTrace>,
    ) -> (&'static str, Outcome)
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        match self.prepare(&parts, body).await {
            Ok((Envelope::Request(r), identity, bytes)) => {
                let r = index(r);
                match self.legacy_opener(&parts, &r) {
                    Some(legacy) => Box::pin(self.legacy_call(legacy, &parts, identity, bytes)).await,
                    None => {
                        // The body is parsed; held, it would keep hyper's read buffer for the call.
                        drop(bytes);
                        match trace {
                            None => self.request(parts, r, identity).await,
                            Some(t) => {
                                let cx = t.request(front_request(&parts, &r, &request_id(&r.id)));
                                Box::pin(self.request(parts, r, identity).with_context(cx)).await
                            }
                        }
                    }
                }
            }
            Ok((Envelope::Notification(_), _, _)) => {
                ("notification", Outcome::plain(OutcomeLabel::Accepted, respond::accepted()))
            }
            Ok((Envelope::Response(_), _, _)) => {
                let e = FrontError::InvalidRequest("clients must not send JSON-RPC responses".into());
                ("response", Outcome::error(None, &e))
            }
            Err(e) => ("invalid", self.refused(None, &e)),
        }
    }

    /// HTTP checks, authentication (before the body is read) and the body, up to a parsed
    /// envelope and the principal.
    async fn prepare<B>(
        &self,
        parts: &Parts,
        body: B,
    ) -> Result<(Envelope<Read>, Identity, Bytes), FrontError>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        if parts.uri.path() != self.cfg.path {
            return Err(FrontError::PathNotFound(format!("the MCP endpoint is {}", self.cfg.path)));
        }
        if parts.method != Method::POST {
            return Err(FrontError::HttpMethodNotAllowed(parts.method.to_string()));
        }
        guard::check_origin(&parts.headers, &self.cfg.origins)?;
        let identity = self.auth.authenticate(&parts.headers).await?;
        guard::check_content_type(&parts.headers)?;
        let bytes = self.read(body).await?;
        let envelope = Envelope::parse_indexed(&bytes)?;
        Ok((envelope, identity, bytes))
    }

    async fn read<B>(&self, body: B) -> Result<Bytes, FrontError>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        tokio::time::timeout(self.cfg.read_timeout, read_body(body, self.cfg.max_body_bytes))
            .await
            .map_err(|_| FrontError::BodyTimeout(self.cfg.read_timeout))?
    }

    /// A legacy client's first request (see [`crate::legacy::opens_legacy`]), relayed when
    /// legacy clients are.
    fn legacy_opener(&self, parts: &Parts, r: &Indexed) -> Option<&Arc<LegacyFront>> {
        let modern_meta =
            matches!(&r.params, Some(Ok(p)) if p.meta(crate::protocol::meta::PROTOCOL_VERSION).is_some());
        self.legacy.as_ref().filter(|_| crate::legacy::opens_legacy(&parts.headers, &r.method, modern_meta))
    }

    /// A request of a legacy session (any HTTP method): origin, authentication and the body,
    /// then the relay. It never reaches the MRTR bridge.
    async fn legacy_request<B>(&self, legacy: &LegacyFront, parts: &Parts, body: B) -> (&'static str, Outcome)
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let ready = async {
            guard::check_origin(&parts.headers, &self.cfg.origins)?;
            let identity = self.auth.authenticate(&parts.headers).await?;
            Ok::<_, FrontError>((identity, self.read(body).await?))
        };
        match ready.await {
            Ok((identity, bytes)) => self.legacy_call(legacy, parts, identity, bytes).await,
            Err(e) => (crate::legacy::label(&parts.method, b""), self.refused(None, &e)),
        }
    }

    /// Relays a legacy request once the authorization rules allow every method in it and each
    /// request in it has taken its rate-limit tokens, as a 2026-07-28 request does; the list
    /// results in its response leave out what the rules hide, as a 2026-07-28 client's do.
    async fn legacy_call(
        &self,
        legacy: &LegacyFront,
        parts: &Parts,
        identity: Identity,
        bytes: Bytes,
    ) -> (&'static str, Outcome) {
        let LegacyHead { label: method, id } = LegacyHead::read(&parts.method, &bytes);
        let mut lists = None;
        // Parsed only when something looks at it: an open gateway relays the bytes untouched.
        if identity.grants.is_restricted() || !self.limits.is_off() {
            let body = LegacyBody::parse(&bytes);
            if let Err(denied) = crate::auth::check_legacy_body(&identity.grants, &body) {
                self.auth.count_denial(&denied);
                return (method, Outcome::error(None, &FrontError::from(denied)));
            }
            if let Err(e) = self.limit_legacy(&identity.principal, &body) {
                return (method, Outcome::error(None, &e));
            }
            if identity.grants.is_restricted() {
                lists = LegacyFront::lists(Arc::new(identity.grants.clone()), parts, &body);
            }
        }
        (method, Outcome::relayed(legacy.handle(parts, &identity.principal, (bytes, id), lists).await))
    }

    /// Takes the rate-limit tokens of a legacy body: one per request in it (and one of its
    /// tool's for a `tools/call`), like a 2026-07-28 request; notifications and the client's
    /// answers take none. A body that is not JSON takes one: it is still sent upstream.
    fn limit_legacy(&self, principal: &Arc<str>, body: &LegacyBody) -> Result<(), FrontError> {
        if matches!(body, LegacyBody::NotJson) {
            return self.limits.check(principal, None).map_err(|e| self.rate_limited(e));
        }
        for request in body.requests() {
            self.limits.check(principal, request.tool).map_err(|e| self.rate_limited(e))?;
        }
        Ok(())
    }

    /// The RFC 9728 metadata document, for a GET of one of its paths.
    fn metadata(&self, parts: &Parts) -> Option<Response<FrontBody>> {
        if parts.method != Method::GET {
            return None;
        }
        let doc = self.auth.metadata_at(parts.uri.path())?;
        Some(respond::json(StatusCode::OK, doc.to_vec()))
    }

    /// An error outcome; a 401 carries the challenge naming the metadata document.
    fn refused(&self, id: Option<&RequestId>, e: &FrontError) -> Outcome {
        let mut outcome = Outcome::error(id, e);
        if let FrontError::Unauthorized(a) = e {
            if outcome.response.status() == StatusCode::UNAUTHORIZED {
                outcome.response.headers_mut().insert(http::header::WWW_AUTHENTICATE, self.auth.challenge(a));
            }
        }
        outcome
    }

    /// Validates and dispatches a request. The request head is dropped before the dispatch:
    /// its header values are slices of the connection's read buffer, which hyper replaces
    /// while the request runs, so holding them would keep two buffers per busy connection.
    async fn request(
        self: &Arc<Self>,
        parts: Parts,
        r: Indexed,
        identity: Identity,
    ) -> (&'static str, Outcome) {
        let id = r.id.clone();
        let Some(kind) = FrontMethod::parse(&r.method) else {
            return ("unknown", Outcome::error(Some(&id), &unknown_method(&r.method)));
        };
        let outcome = match Self::validate(&parts, kind, r, identity).and_then(|c| self.limit(c)) {
            Ok(mut call) => match self.check_tool(&parts, &call).await {
                Ok(output) => {
                    drop(parts);
                    call.output = output;
                    // Boxed: each function of the dispatch below keeps its own slot for a
                    // `Call` passed by value, for as long as the request runs.
                    self.dispatch(Box::new(call)).await
                }
                Err(e) => Outcome::error(Some(&id), &e),
            },
            Err(e) => Outcome::error(Some(&id), &e),
        };
        (kind.label(), outcome)
    }

    /// Validates the request envelope and headers into a [`Call`].
    fn validate(
        parts: &Parts,
        kind: FrontMethod,
        r: Indexed,
        identity: Identity,
    ) -> Result<Call, FrontError> {
        let mut params = validate::indexed_params(r.params)?;
        let meta = validate::request_meta(&params)?;
        validate::check_headers(&parts.headers, &r.method, kind, &params, &meta.protocol_version)?;
        validate::check_version(&meta)?;
        let caps = ClientCaps::from_modern(&meta.capabilities)?;
        let accepts = guard::accepts(&parts.headers)?;
        let log_level = LogLevel::from_params(&params)?;
        let Identity { principal, grants } = identity;
        if kind == FrontMethod::Mrtr(MrtrMethod::ToolsCall) {
            upstream_tool_name(&mut params);
        }
        let output = None;
        Ok(Call { id: r.id, kind, params, meta, caps, principal, grants, accepts, log_level, output })
    }

    /// What the catalogue says of a `tools/call`'s tool: refused when it is not offered, its
    /// `Mcp-Param-*` headers checked against its annotations (unless this front's headers are
    /// made from the body), and its compiled `outputSchema`, which its result is checked
    /// against. The upstream's tools are listed first (once, shared) when the tool has not
    /// been seen.
    async fn check_tool(&self, parts: &Parts, call: &Call) -> Result<Option<Arc<OutputSchema>>, FrontError> {
        if call.kind != FrontMethod::Mrtr(MrtrMethod::ToolsCall) {
            return Ok(None);
        }
        let Ok(Some(name)) = call.params.str("name") else { return Ok(None) };
        let name = &*name;
        let arguments = call.params.get("arguments");
        let key = (call.principal.clone(), call.caps.fingerprint());
        let headers = self.param_headers.then_some(&parts.headers);
        if let Some(checked) = self.tool_headers.lookup(&key, name, headers, arguments) {
            return checked;
        }
        let (caps, version) = (call.caps, self.upstream_version);
        let list = || {
            let init = move || caps.legacy_initialize(version);
            relay::list_tools(
                &self.pool,
                &self.metrics,
                key.clone(),
                init,
                (&self.tool_headers, self.task_catalogue()),
            )
        };
        self.tool_headers.fetch_once(&key, name, list).await?;
        // A tool the upstream does not list has nothing to check: its answer is the upstream's.
        self.tool_headers.lookup(&key, name, headers, arguments).unwrap_or(Ok(None))
    }

    /// Takes the call's rate-limit tokens. A retry of an MRTR chain (it carries a
    /// `requestState`) takes them like any request: a sealed state may be replayed until it
    /// expires, and each replay runs the upstream call again. The default burst holds a whole
    /// chain (see [`crate::defaults::limit_burst`]).
    fn limit(&self, call: Call) -> Result<Call, FrontError> {
        let tool = match call.kind {
            FrontMethod::Mrtr(MrtrMethod::ToolsCall) => call.params.str("name").ok().flatten(),
            _ => None,
        };
        self.limits.check(&call.principal, tool.as_deref()).map_err(|e| self.rate_limited(e))?;
        drop(tool);
        Ok(call)
    }

    fn rate_limited(&self, e: crate::limits::LimitError) -> FrontError {
        self.metrics.rate_limited.with_label_values(&[&e.limit.label()]).inc();
        e.into()
    }

    async fn dispatch(self: &Arc<Self>, call: Box<Call>) -> Outcome {
        let id = call.id.clone();
        // The rules read the params' tree only when there are rules.
        let params = match call.grants.is_restricted().then(|| call.params.tree()).transpose() {
            Ok(params) => params,
            Err(e) => return Outcome::error(Some(&id), &e.into()),
        };
        if let Err(denied) = call.grants.check(call.kind.label(), params) {
            self.auth.count_denial(&denied);
            return Outcome::error(Some(&id), &denied.into());
        }
        let result = match call.kind {
            FrontMethod::Discover => self.discover(&call).await,
            FrontMethod::Relay(m) => self.relay(&call, m).await,
            FrontMethod::Mrtr(MrtrMethod::ToolsCall) => return super::tasks::tools_call(self, call).await,
            FrontMethod::Mrtr(m) => return self.mrtr(call, m).await,
            FrontMethod::Listen => return Box::pin(super::listen::listen(self, call)).await,
            FrontMethod::Task(m) => return super::tasks::task_request(self, &call, m).await,
        };
        match result {
            Ok(bytes) => Outcome::plain(OutcomeLabel::Complete, respond::json(StatusCode::OK, bytes)),
            Err(e) => Outcome::error(Some(&id), &e),
        }
    }

    async fn discover(&self, call: &Call) -> Result<Vec<u8>, FrontError> {
        let caps = call.caps.legacy_initialize(self.upstream_version);
        let key = (call.principal.clone(), call.caps.fingerprint());
        let init = self.pool.discover(key, &caps).await?;
        let listens = self.subscriptions.is_some();
        let mut result =
            discover::discover_result(&init, self.cfg.cache_ttl_ms, self.cfg.cache_scope.as_str(), listens);
        if self.tasks.is_some() {
            discover::advertise_tasks(&mut result);
        }
        let raw = serde_json::value::to_raw_value(&result).map_err(FrontError::internal)?;
        Ok(crate::protocol::jsonrpc::result_bytes(&call.id, &raw))
    }

    async fn relay(&self, call: &Call, method: RelayMethod) -> Result<Vec<u8>, FrontError> {
        let (caps, version) = (call.caps, self.upstream_version);
        let key = (call.principal.clone(), call.caps.fingerprint());
        let params = upstream_params(Some(call.params.tree()?));
        let relayed = relay::relay(
            &self.pool,
            &self.metrics,
            key,
            || caps.legacy_initialize(version),
            method,
            params,
            (&self.tool_headers, self.task_catalogue()),
        )
        .await?;
        let relay::Relayed { raw, checks } = relayed;
        checks.record(&self.metrics.tools);
        let raw = call.grants.filter_list(method.name(), raw);
        let raw = checks.encode_names(raw, &self.metrics.tools);
        // A list filtered for this principal must not be shared by a cache.
        let private =
            call.grants.is_restricted().then(|| respond::cache_fields(self.cfg.cache_ttl_ms, "private"));
        let extra = match (method.cacheable(), &private) {
            (false, _) => "",
            (true, Some(p)) => p.as_str(),
            (true, None) => self.cache_fields.as_str(),
        };
        Ok(respond::complete_bytes(&call.id, &raw, extra))
    }

    pub(super) async fn mrtr(self: &Arc<Self>, mut call: Box<Call>, method: MrtrMethod) -> Outcome {
        let id = call.id.clone();
        let req = match mrtr_request(&mut call, method) {
            Ok(r) => r,
            Err(e) => return Outcome::error(Some(&id), &e),
        };
        let cache = if method == MrtrMethod::ResourcesRead && req.state.is_none() {
            self.cache_fields.clone()
        } else {
            String::new()
        };
        // Notifications need an SSE response: without one, nothing is streamed (and no log
        // level is set upstream).
        let (token, level, sse) = (call.meta.progress_token.clone(), call.log_level, call.accepts.sse);
        // `req` has what the run needs; the parsed params and envelope are not held for it.
        drop(call);
        if sse && (token.is_some() || level.is_some()) {
            stream::run_streaming(self.clone(), id, req, token, level, cache).await
        } else {
            reply_outcome(&id, self.bridge.run(req, None).await, &cache)
        }
    }

    pub(super) fn record(&self, method: &'static str, outcome: &Outcome, started: Instant) {
        outcome.record(&self.metrics, method, started);
    }
}

/// The handler as the innermost service of the front stack.
pub(super) fn handler<B>(
    state: Arc<FrontState>,
) -> impl Service<Request<B>, Response = Response<FrontBody>, Error = Infallible, Future: Send + 'static>
       + Clone
       + Send
       + 'static
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    tower::service_fn(move |req| {
        // Boxed here, innermost: a request's future is several KB, and every layer of the
        // stack wraps and moves the future of the layer inside it. Unboxed, each layer's
        // `call` copied those KB once more (callgrind: about 55 KB more memcpy per plain
        // call). The box is allocated before the future is made, so that the compiler builds
        // the future in it: `Box::pin(future)` made it on the stack and copied all its KB in.
        Box::into_pin(Box::write(Box::new_uninit(), FrontState::serve(state.clone(), req)))
    })
}

/// What a request's span names: its method (a fixed name), id, target and protocol version.
fn front_request<'a>(parts: &'a Parts, r: &'a Indexed, id: &'a str) -> FrontRequest<'a> {
    let header = |name| parts.headers.get(name).and_then(|v: &http::HeaderValue| v.to_str().ok());
    let params = match &r.params {
        Some(Ok(p)) => p.tree().ok(),
        _ => None,
    };
    let meta_version = || params?.get("_meta")?.get(crate::protocol::meta::PROTOCOL_VERSION)?.as_str();
    FrontRequest {
        method: FrontMethod::parse(&r.method).map_or("unknown", FrontMethod::label),
        id,
        params,
        protocol_version: header(crate::protocol::headers::PROTOCOL_VERSION).or_else(meta_version),
        session_id: header(crate::protocol::headers::SESSION_ID),
    }
}

/// Builds the bridge's request from a validated call, moving its params upstream.
fn mrtr_request(call: &mut Call, method: MrtrMethod) -> Result<MrtrRequest, FrontError> {
    let params = &call.params;
    let target = params
        .str(method.target_field())
        .ok()
        .flatten()
        .ok_or_else(|| {
            FrontError::InvalidParams(format!("params.{} must be a string", method.target_field()))
        })?
        .into_owned();
    let state = request_state(params)?.map(Cow::into_owned);
    let responses = input_responses(params)?;
    Ok(MrtrRequest {
        principal: call.principal.clone(),
        caps: call.caps,
        method,
        target,
        upstream_params: upstream_raw(params),
        state,
        responses,
        output: call.output.take(),
    })
}

/// Maps a `tools/call` of a name the gateway encoded for `Mcp-Name` back to the upstream's
/// name (see [`crate::schema::name`]), before anything reads it: limits, rules, the catalogue
/// and the migration report all know the tool by the upstream's name.
fn upstream_tool_name(params: &mut Params) {
    let Ok(Some(name)) = params.str("name") else { return };
    if !name.starts_with(crate::schema::name::PREFIX) {
        return;
    }
    if let Some(upstream) = crate::schema::name::decode(&name) {
        params.set_str("name", &upstream);
    }
}

/// The outcome of a bridge run as a JSON response.
pub(super) fn reply_outcome(id: &RequestId, reply: Result<Reply, FrontError>, cache: &str) -> Outcome {
    match reply {
        Ok(Reply::Complete(raw)) => Outcome::plain(
            OutcomeLabel::Complete,
            respond::json(StatusCode::OK, respond::complete_bytes(id, &raw, cache)),
        ),
        Ok(Reply::InputRequired { requests, state, round }) => Outcome {
            label: OutcomeLabel::InputRequired,
            round: Some(round),
            response: respond::json(StatusCode::OK, respond::input_required_bytes(id, &requests, &state)),
            failure: None,
        },
        Err(e) => Outcome::error(Some(id), &e),
    }
}

pub(super) fn unknown_method(method: &str) -> FrontError {
    match method {
        methods::INITIALIZE => FrontError::MethodNotFound(format!(
            "initialize: this endpoint speaks MCP {} only (no initialize handshake)",
            FRONT_SUPPORTED_VERSIONS.join(", ")
        )),
        other => FrontError::MethodNotFound(other.chars().take(128).collect()),
    }
}

/// Reads the body; the stack has limited it to `limit` bytes.
async fn read_body<B>(body: B, limit: usize) -> Result<Bytes, FrontError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    match body.collect().await.map_err(Into::into) {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(FrontError::PayloadTooLarge { limit })
        }
        Err(e) => Err(FrontError::InvalidRequest(format!("reading the body: {e}"))),
    }
}

#[cfg(test)]
mod tests;
