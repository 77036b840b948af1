//! The three spans of a request: the front request (server kind), each MRTR round under it
//! (internal), and each upstream exchange under those (client kind), with attributes after the
//! OpenTelemetry semantic conventions for MCP. A task (`crate::tasks`) outlives its request: its
//! span (internal) starts under the request that created it and ends with the task, and the
//! task's own upstream exchanges are its children. Attributes name methods, ids, tools and outcomes;
//! never arguments, answers or error messages (an error is named by its code and fixed label).
//!
//! The front span's context is attached to the request's future, so the round and exchange
//! spans find their parent (and the tracer) in the current context: nothing is threaded through
//! the bridge or the pool, and a gateway with tracing off never looks.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use http::HeaderMap;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::Span;
use serde_json::Value;

use super::carrier::{Headers, Meta, Written};
use super::Tracing;
use crate::protocol::quote::truncate;
use crate::protocol::RequestId;

/// Attribute keys (MCP and JSON-RPC semantic conventions, and the gateway's own).
pub mod keys {
    pub const MCP_METHOD: &str = "mcp.method.name";
    pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
    pub const MCP_SESSION_ID: &str = "mcp.session.id";
    pub const MCP_RESOURCE_URI: &str = "mcp.resource.uri";
    pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
    pub const JSONRPC_VERSION: &str = "jsonrpc.protocol.version";
    pub const RPC_STATUS_CODE: &str = "rpc.response.status_code";
    pub const ERROR_TYPE: &str = "error.type";
    pub const TOOL_NAME: &str = "gen_ai.tool.name";
    pub const PROMPT_NAME: &str = "gen_ai.prompt.name";
    pub const OPERATION: &str = "gen_ai.operation.name";
    pub const NETWORK_TRANSPORT: &str = "network.transport";
    pub const SERVER_ADDRESS: &str = "server.address";
    pub const SERVER_PORT: &str = "server.port";
    pub const HTTP_STATUS: &str = "http.response.status_code";
    /// The gateway's outcome label (the `outcome` of the request metric and log line).
    pub const OUTCOME: &str = "mrtr_gateway.outcome";
    /// The round of the incoming `requestState` (0 on a first call).
    pub const ROUND: &str = "mrtr_gateway.round";
    /// The round the sealed state starts, when a round ends with `input_required`.
    pub const NEXT_ROUND: &str = "mrtr_gateway.next_round";
}

/// Longest client-given name (tool, prompt) put on a span.
const MAX_NAME: usize = 128;

/// Marks a context as belonging to a traced gateway, and carries its tracer.
#[derive(Clone)]
struct Active(Arc<Tracing>);

/// How a front request ended, in the terms its span records.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    pub outcome: &'static str,
    pub http_status: u16,
    /// The JSON-RPC error code, when the request failed.
    pub code: Option<i64>,
    pub round: Option<u32>,
}

/// The server span of one front request, from its first byte to its response.
pub struct FrontTrace {
    tracing: Arc<Tracing>,
    started: SystemTime,
    /// The context the request headers carry, when they carry a valid one.
    header_parent: Option<Context>,
    /// The started span, once the request is known.
    cx: Option<Context>,
}

/// What a front request is, for its span.
#[derive(Debug, Clone, Copy)]
pub struct FrontRequest<'a> {
    /// The method (a fixed name, never the client's string).
    pub method: &'static str,
    pub id: &'a str,
    pub params: Option<&'a Value>,
    pub protocol_version: Option<&'a str>,
    pub session_id: Option<&'a str>,
}

/// The span of one MRTR round.
pub struct RoundTrace {
    cx: Context,
}

/// The span of one task, from the request that created it to the task's end.
pub struct TaskTrace {
    cx: Context,
}

/// The client span of one upstream exchange, and the context it propagates.
pub struct ExchangeTrace {
    span: Span,
    written: Written,
}

/// The upstream an exchange goes to.
#[derive(Debug, Clone)]
pub struct Peer {
    /// `tcp` for HTTP upstreams, `pipe` for a child process.
    pub transport: &'static str,
    pub uri: Option<http::Uri>,
    /// The upstream's `Mcp-Session-Id`, when it gave one.
    pub session_id: Option<String>,
    pub protocol_version: String,
}

/// True when the current context is a traced request's.
pub(super) fn traced_now() -> bool {
    Context::map_current(|cx| cx.get::<Active>().is_some())
}

// === impl Tracing ===

impl Tracing {
    /// Starts timing a front request and reads the trace context of its headers.
    pub fn front(self: &Arc<Self>, headers: &HeaderMap) -> FrontTrace {
        let parent = self.propagator.extract(&Headers(headers));
        let header_parent = parent.span().span_context().is_valid().then_some(parent);
        FrontTrace { tracing: self.clone(), started: SystemTime::now(), header_parent, cx: None }
    }
}

// === impl FrontTrace ===

impl FrontTrace {
    /// Starts the span of a JSON-RPC request, parented by the headers' trace context or else
    /// by its `_meta` one, and returns the context to serve it in.
    pub fn request(&mut self, req: FrontRequest<'_>) -> Context {
        let parent = self.header_parent.take().unwrap_or_else(|| self.meta_parent(req.params));
        let (name, mut attrs) = describe(req.method, req.params);
        attrs.push(KeyValue::new(keys::JSONRPC_REQUEST_ID, req.id.to_owned()));
        attrs.push(KeyValue::new(keys::JSONRPC_VERSION, "2.0"));
        attrs.push(KeyValue::new(keys::NETWORK_TRANSPORT, "tcp"));
        if let Some(v) = req.protocol_version {
            attrs.push(KeyValue::new(keys::MCP_PROTOCOL_VERSION, v.to_owned()));
        }
        if let Some(s) = req.session_id {
            attrs.push(KeyValue::new(keys::MCP_SESSION_ID, crate::logging::fingerprint(s.as_bytes())));
        }
        let cx = self.start(name, attrs, &parent);
        self.cx = Some(cx.clone());
        cx
    }

    /// Records how the request ended and ends its span (starting it first when the request
    /// was refused before it was known).
    pub fn end(mut self, method: &'static str, ended: Ended) {
        let cx = match self.cx.take() {
            Some(cx) => cx,
            // Not a JSON-RPC request (refused before it parsed, a notification): the span is
            // named after its kind, and names no MCP method.
            None => {
                let parent = self.header_parent.take().unwrap_or_default();
                self.start(Cow::Borrowed(method), Vec::new(), &parent)
            }
        };
        let span = cx.span();
        span.set_attribute(KeyValue::new(keys::OUTCOME, ended.outcome));
        span.set_attribute(KeyValue::new(keys::HTTP_STATUS, i64::from(ended.http_status)));
        if let Some(round) = ended.round {
            span.set_attribute(KeyValue::new(keys::NEXT_ROUND, i64::from(round)));
        }
        if let Some(code) = ended.code {
            failed(&span, code, ended.outcome);
        }
        span.end();
    }

    fn meta_parent(&self, params: Option<&Value>) -> Context {
        let Some(meta) = Meta::of(params) else { return Context::new() };
        let cx = self.tracing.propagator.extract(&meta);
        if cx.span().span_context().is_valid() {
            cx
        } else {
            Context::new()
        }
    }

    fn start(&self, name: Cow<'static, str>, attrs: Vec<KeyValue>, parent: &Context) -> Context {
        let tracer = &self.tracing.tracer;
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_start_time(self.started)
            .with_attributes(attrs)
            .start_with_context(tracer, parent);
        parent.with_span(span).with_value(Active(self.tracing.clone()))
    }
}

// === impl RoundTrace ===

impl RoundTrace {
    /// A round span under the current context, when it is a traced request's.
    pub fn start(method: &'static str, target: &str, round: u32) -> Option<Self> {
        let cx = internal(|| {
            let mut attrs =
                vec![KeyValue::new(keys::MCP_METHOD, method), KeyValue::new(keys::ROUND, i64::from(round))];
            attrs.extend(target_attr(method, target));
            (format!("mrtr round {method}"), attrs)
        })?;
        Some(Self { cx })
    }

    /// The context the round runs in (its exchanges are its children).
    pub fn context(&self) -> Context {
        self.cx.clone()
    }

    /// Ends the round with its outcome label; `next_round` when it asked for input, `code`
    /// when it failed.
    pub fn end(self, outcome: &'static str, next_round: Option<u32>, code: Option<i64>) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(keys::OUTCOME, outcome));
        if let Some(next) = next_round {
            span.set_attribute(KeyValue::new(keys::NEXT_ROUND, i64::from(next)));
        }
        if let Some(code) = code {
            failed(&span, code, outcome);
        }
        span.end();
    }
}

// === impl TaskTrace ===

impl TaskTrace {
    /// A task span for a call of `tool` under the current context, when it is a traced
    /// request's.
    pub fn start(tool: &str) -> Option<Self> {
        let cx = internal(|| {
            let mut attrs = vec![KeyValue::new(keys::MCP_METHOD, "tools/call")];
            attrs.extend(target_attr("tools/call", tool));
            ("mrtr task tools/call".to_owned(), attrs)
        })?;
        Some(Self { cx })
    }

    /// The context the task runs in (its upstream exchanges are its children).
    pub fn context(&self) -> Context {
        self.cx.clone()
    }

    /// Ends the span with how the task ended (`completed`, `failed`, ...); any end but
    /// `completed` or `cancelled` marks it failed.
    pub fn end(self, outcome: &'static str) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(keys::OUTCOME, outcome));
        if !matches!(outcome, "completed" | "cancelled") {
            span.set_status(Status::error(outcome));
        }
        span.end();
    }
}

// === impl ExchangeTrace ===

impl ExchangeTrace {
    /// A client span for `method` to `peer` under the current context, when it is a traced
    /// request's, with the context to send upstream.
    pub fn start(method: &str, params: Option<&Value>, peer: impl FnOnce() -> Peer) -> Option<Box<Self>> {
        if !super::on() {
            return None;
        }
        Context::map_current(|parent| {
            let tracing = &parent.get::<Active>()?.0;
            let method = truncate(method, MAX_NAME);
            let (name, mut attrs) = describe(method, params);
            attrs.extend(peer_attrs(peer()));
            let tracer = &tracing.tracer;
            let span = tracer
                .span_builder(name.into_owned())
                .with_kind(SpanKind::Client)
                .with_attributes(attrs)
                .start_with_context(tracer, parent);
            let mut written = Written::default();
            let cx = Context::new().with_remote_span_context(span.span_context().clone());
            tracing.propagator.inject_context(&cx, &mut written);
            Some(Box::new(Self { span, written }))
        })
    }

    /// The context to send upstream.
    pub(crate) fn written(&self) -> &Written {
        &self.written
    }

    /// The upstream id of the request.
    pub fn set_request_id(&mut self, id: String) {
        self.span.set_attribute(KeyValue::new(keys::JSONRPC_REQUEST_ID, id));
    }

    /// The upstream answered; `code` when with a JSON-RPC error. Ends the span.
    pub fn answered(&mut self, code: Option<i64>) {
        if let Some(code) = code {
            self.span.set_attribute(KeyValue::new(keys::RPC_STATUS_CODE, code.to_string()));
            self.span.set_attribute(KeyValue::new(keys::ERROR_TYPE, code.to_string()));
            self.span.set_status(Status::error("upstream_error"));
        }
        self.span.end();
    }

    /// The exchange failed without an answer (`label`: the upstream error's). Ends the span.
    pub fn failed(&mut self, label: &'static str) {
        self.span.set_attribute(KeyValue::new(keys::ERROR_TYPE, label));
        self.span.set_status(Status::error(label));
        self.span.end();
    }
}

/// An internal span under the current context, when it is a traced request's: its name and
/// attributes are made only then.
fn internal(describe: impl FnOnce() -> (String, Vec<KeyValue>)) -> Option<Context> {
    if !super::on() {
        return None;
    }
    Context::map_current(|parent| {
        let tracer = &parent.get::<Active>()?.0.tracer;
        let (name, attrs) = describe();
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_attributes(attrs)
            .start_with_context(tracer, parent);
        Some(parent.with_span(span))
    })
}

fn peer_attrs(peer: Peer) -> Vec<KeyValue> {
    let mut attrs = vec![
        KeyValue::new(keys::NETWORK_TRANSPORT, peer.transport),
        KeyValue::new(keys::MCP_PROTOCOL_VERSION, peer.protocol_version),
        KeyValue::new(keys::JSONRPC_VERSION, "2.0"),
    ];
    if let Some(uri) = &peer.uri {
        if let Some(host) = uri.host() {
            attrs.push(KeyValue::new(keys::SERVER_ADDRESS, host.to_owned()));
        }
        let port =
            uri.port_u16().or_else(|| if uri.scheme_str() == Some("https") { Some(443) } else { Some(80) });
        attrs.extend(port.map(|p| KeyValue::new(keys::SERVER_PORT, i64::from(p))));
    }
    if let Some(id) = peer.session_id {
        attrs.push(KeyValue::new(keys::MCP_SESSION_ID, crate::logging::fingerprint(id.as_bytes())));
    }
    attrs
}

/// The span name and method attributes of a request: `{method} {target}` for the methods that
/// name a tool or prompt.
fn describe<'a>(method: &'a str, params: Option<&Value>) -> (Cow<'a, str>, Vec<KeyValue>) {
    let mut attrs = vec![KeyValue::new(keys::MCP_METHOD, method.to_owned())];
    let target = params.and_then(|p| p.get(target_field(method)?)).and_then(Value::as_str);
    let Some(target) = target else { return (Cow::Borrowed(method), attrs) };
    let target = truncate(target, MAX_NAME);
    attrs.extend(target_attr(method, target));
    match method {
        "tools/call" | "prompts/get" => (Cow::Owned(format!("{method} {target}")), attrs),
        _ => (Cow::Borrowed(method), attrs),
    }
}

fn target_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

fn target_attr(method: &str, target: &str) -> Vec<KeyValue> {
    match method {
        "tools/call" => vec![
            KeyValue::new(keys::TOOL_NAME, truncate(target, MAX_NAME).to_owned()),
            KeyValue::new(keys::OPERATION, "execute_tool"),
        ],
        "prompts/get" => vec![KeyValue::new(keys::PROMPT_NAME, truncate(target, MAX_NAME).to_owned())],
        "resources/read" => vec![KeyValue::new(keys::MCP_RESOURCE_URI, truncate(target, 1024).to_owned())],
        _ => Vec::new(),
    }
}

/// Marks a span failed with JSON-RPC error `code`; the description is the fixed outcome label.
fn failed(span: &opentelemetry::trace::SpanRef<'_>, code: i64, outcome: &'static str) {
    span.set_attribute(KeyValue::new(keys::RPC_STATUS_CODE, code.to_string()));
    span.set_attribute(KeyValue::new(keys::ERROR_TYPE, code.to_string()));
    span.set_status(Status::error(outcome));
}

/// A JSON-RPC id as the `jsonrpc.request.id` attribute: a number's digits, a string's text (at
/// most [`MAX_NAME`] bytes of it).
pub fn request_id(id: &RequestId) -> String {
    match id {
        RequestId::Number(n) => n.to_string(),
        RequestId::String(s) => truncate(s, MAX_NAME).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ids_are_recorded_unquoted_and_bounded() {
        assert_eq!(request_id(&RequestId::Number(7)), "7");
        assert_eq!(request_id(&RequestId::String("abc".into())), "abc");
        assert_eq!(request_id(&RequestId::String("é".repeat(100))).len(), MAX_NAME);
    }

    #[test]
    fn names_carry_the_tool_or_prompt_only() {
        let (name, attrs) =
            describe("tools/call", Some(&json!({"name": "weather", "arguments": {"city": "x"}})));
        assert_eq!(name, "tools/call weather");
        let keys: Vec<&str> = attrs.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, [keys::MCP_METHOD, keys::TOOL_NAME, keys::OPERATION]);
        let (name, attrs) = describe("resources/read", Some(&json!({"uri": "file:///a"})));
        assert_eq!(name, "resources/read");
        assert!(attrs.iter().any(|kv| kv.key.as_str() == keys::MCP_RESOURCE_URI));
        let (name, _) = describe("tools/list", None);
        assert_eq!(name, "tools/list");
    }
}
