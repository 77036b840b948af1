//! Header-carried parameters: a `tools/call` of a tool whose `inputSchema` annotates arguments
//! with `x-mcp-header` must mirror them in `Mcp-Param-*` headers (plain or `=?base64?…?=`), and
//! a tool whose annotations are invalid is left out of `tools/list`. The upstream here is a
//! scripted legacy server that lists its tools over two pages and counts its listings; its
//! `rename` tool renames the `sql` tool's header and says so with
//! `notifications/tools/list_changed` on the call's stream.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use mrtr_gateway::app::Gateway;
use mrtr_gateway::protocol::jsonrpc::Request as RpcRequest;
use mrtr_gateway::protocol::Envelope;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::common::{Client, Reply, Setup, TestResult};

/// What the scripted server saw.
#[derive(Default)]
struct Seen {
    /// `tools/list` requests without a cursor: whole listings begun.
    listings: AtomicUsize,
    /// Every `tools/list` request, pages included.
    pages: AtomicUsize,
    calls: AtomicUsize,
    /// `rename` was called: `sql` mirrors `region` as `Zone` from then on.
    renamed: AtomicBool,
}

/// A legacy server with an annotated tool, a plain one and one whose annotations are invalid.
struct Upstream {
    url: String,
    seen: Arc<Seen>,
    task: JoinHandle<()>,
}

impl Upstream {
    async fn spawn() -> TestResult<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let seen = Arc::new(Seen::default());
        let task = tokio::spawn(accept(listener, seen.clone()));
        Ok(Self { url, seen, task })
    }

    fn listings(&self) -> usize {
        self.seen.listings.load(Ordering::SeqCst)
    }

    fn calls(&self) -> usize {
        self.seen.calls.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, seen: Arc<Seen>) {
    while let Ok((stream, _)) = listener.accept().await {
        let seen = seen.clone();
        let service = service_fn(move |req| handle(req, seen.clone()));
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(req: Request<Incoming>, seen: Arc<Seen>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != Method::POST {
        return Ok(status(StatusCode::METHOD_NOT_ALLOWED));
    }
    let Ok(body) = req.into_body().collect().await else { return Ok(status(StatusCode::BAD_REQUEST)) };
    Ok(match Envelope::parse(&body.to_bytes()) {
        Ok(Envelope::Request(r)) => answer(&r, &seen),
        Ok(_) => status(StatusCode::ACCEPTED),
        Err(_) => status(StatusCode::BAD_REQUEST),
    })
}

fn answer(r: &RpcRequest, seen: &Seen) -> Response<Full<Bytes>> {
    let params = r.params.clone().unwrap_or(Value::Null);
    let result = match r.method.as_str() {
        "initialize" => json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "annotated-legacy", "version": "1.0.0"}}),
        "tools/list" => {
            seen.pages.fetch_add(1, Ordering::SeqCst);
            match params.get("cursor") {
                None => {
                    seen.listings.fetch_add(1, Ordering::SeqCst);
                    json!({"tools": [plain_tool(), invalid_tool()], "nextCursor": "page-2"})
                }
                Some(_) => json!({"tools": [sql_tool(seen.renamed.load(Ordering::SeqCst))]}),
            }
        }
        "tools/call" if params["name"] == "rename" => {
            seen.renamed.store(true, Ordering::SeqCst);
            return renamed(r);
        }
        "tools/call" => {
            seen.calls.fetch_add(1, Ordering::SeqCst);
            let text = params["arguments"].to_string();
            json!({"content": [{"type": "text", "text": text}]})
        }
        other => json!({"unexpected": other}),
    };
    let message = json!({"jsonrpc": "2.0", "id": r.id, "result": result});
    let mut response = Response::new(Full::new(Bytes::from(message.to_string())));
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    headers.insert("mcp-session-id", http::HeaderValue::from_static("annotated-session"));
    response
}

/// The `rename` call's answer: an SSE stream with the list change, then the result.
fn renamed(r: &RpcRequest) -> Response<Full<Bytes>> {
    let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    let done =
        json!({"jsonrpc": "2.0", "id": r.id, "result": {"content": [{"type": "text", "text": "renamed"}]}});
    let body = format!("event: message\ndata: {note}\n\nevent: message\ndata: {done}\n\n");
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    response
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = code;
    response
}

fn sql_tool(renamed: bool) -> Value {
    let region = if renamed { "Zone" } else { "Region" };
    json!({"name": "sql", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": region},
        "target": {"type": "object", "properties": {"shard": {"type": "integer", "x-mcp-header": "Shard"}}},
        "query": {"type": "string"}}, "required": ["region", "query"]}})
}

fn plain_tool() -> Value {
    json!({"name": "plain", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}})
}

/// Two annotations that differ only in case.
fn invalid_tool() -> Value {
    json!({"name": "twice", "inputSchema": {"type": "object", "properties": {
        "a": {"type": "string", "x-mcp-header": "Tenant"}, "b": {"type": "string", "x-mcp-header": "TENANT"}}}})
}

async fn start() -> TestResult<(Upstream, Gateway, Client)> {
    let upstream = Upstream::spawn().await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url).await?;
    Ok((upstream, gateway, client))
}

fn tool_names(reply: &Reply) -> TestResult<Vec<String>> {
    let tools = reply.result()?["tools"].as_array().cloned().unwrap_or_default();
    Ok(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
}

fn sql_args() -> Value {
    json!({"region": "us-west1", "target": {"shard": 42}, "query": "SELECT 1"})
}

#[tokio::test]
async fn matching_headers_are_accepted_in_plain_and_base64_form() -> TestResult {
    let (upstream, gateway, client) = start().await?;
    let reply = client
        .call_tool("sql", sql_args())
        .header("mcp-param-region", "us-west1")
        .header("mcp-param-shard", "42")
        .send()
        .await?;
    assert_eq!(serde_json::from_str::<Value>(&reply.text()?)?, sql_args());
    let args = json!({"region": "Hello, 世界", "query": "q"});
    let reply = client
        .call_tool("sql", args.clone())
        .header("mcp-param-region", "=?base64?SGVsbG8sIOS4lueVjA==?=")
        .send()
        .await?;
    assert_eq!(serde_json::from_str::<Value>(&reply.text()?)?, args);
    // A value that only looks like the sentinel's start is literal.
    let args = json!({"region": "=?base64?SGVsbG8=", "query": "q"});
    let reply =
        client.call_tool("sql", args.clone()).header("mcp-param-region", "=?base64?SGVsbG8=").send().await?;
    assert_eq!(serde_json::from_str::<Value>(&reply.text()?)?, args);
    assert_eq!(upstream.calls(), 3);
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn missing_mismatched_and_malformed_headers_are_400_header_mismatch() -> TestResult {
    let (upstream, gateway, client) = start().await?;
    let cases: [(&str, Option<&'static str>, Option<&str>); 6] = [
        ("missing Region", None, Some("42")),
        ("other Region", Some("eu-west1"), Some("42")),
        ("other Shard", Some("us-west1"), Some("43")),
        ("Region in another case", Some("US-WEST1"), Some("42")),
        ("base64 without padding", Some("=?base64?dXMtd2VzdDE?="), Some("42")),
        ("base64 with foreign characters", Some("=?base64?dXMt!!!d2VzdDE=?="), Some("42")),
    ];
    for (what, region, shard) in cases {
        let mut call = client.call_tool("sql", sql_args());
        if let Some(region) = region {
            call = call.header("mcp-param-region", region);
        }
        if let Some(shard) = shard {
            call = call.header("mcp-param-shard", shard);
        }
        let reply = call.send().await?;
        let message = reply.expect_error(StatusCode::BAD_REQUEST, -32020).map_err(|e| format!("{what}: {e}"));
        assert!(message.is_ok(), "{message:?}");
    }
    // A header for an argument the body does not carry is a mismatch too.
    let no_shard = json!({"region": "us-west1", "query": "q"});
    let reply = client
        .call_tool("sql", no_shard)
        .header("mcp-param-region", "us-west1")
        .header("mcp-param-shard", "42")
        .send()
        .await?;
    reply.expect_error(StatusCode::BAD_REQUEST, -32020)?;
    assert_eq!(upstream.calls(), 0, "a refused call reached the upstream");
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn integers_compare_numerically() -> TestResult {
    let (_upstream, gateway, client) = start().await?;
    let args = json!({"region": "r", "target": {"shard": 7}, "query": "q"});
    let reply = client
        .call_tool("sql", args)
        .header("mcp-param-region", "r")
        .header("mcp-param-shard", "7.0")
        .send()
        .await?;
    reply.text()?;
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_tool_with_invalid_annotations_is_left_out_of_tools_list() -> TestResult {
    let (_upstream, gateway, client) = start().await?;
    let first = client.request("tools/list").send().await?;
    assert_eq!(tool_names(&first)?, ["plain"]);
    assert_eq!(first.result()?["nextCursor"], "page-2");
    let second = client.request("tools/list").param("cursor", json!("page-2")).send().await?;
    assert_eq!(tool_names(&second)?, ["sql"]);
    assert_eq!(second.result()?["tools"][0], sql_tool(false), "a valid annotated tool is relayed as it is");
    let refused = client.call_tool("twice", json!({"a": "x"})).send().await?;
    refused.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn an_unseen_tool_is_looked_up_once_for_concurrent_calls() -> TestResult {
    let (upstream, gateway, client) = start().await?;
    assert_eq!(upstream.listings(), 0);
    let calls =
        (0..8).map(|_| client.call_tool("sql", sql_args()).header("mcp-param-region", "us-west1").send());
    for reply in futures_util::future::join_all(calls).await {
        // The shard header is missing: each call is judged by the annotations listed upstream
        // (on the second page).
        reply?.expect_error(StatusCode::BAD_REQUEST, -32020)?;
    }
    assert_eq!(upstream.listings(), 1);
    assert_eq!(upstream.seen.pages.load(Ordering::SeqCst), 2);
    // The plain tool came with the same listing; a tool the upstream does not list does not
    // make the gateway list again right away, and reaches the upstream unchecked.
    client.call_tool("plain", json!({"q": "x"})).send().await?.text()?;
    client.call_tool("ghost", json!({})).send().await?.text()?;
    assert_eq!(upstream.listings(), 1);
    assert_eq!(upstream.calls(), 2);
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_tools_list_change_makes_the_gateway_list_again() -> TestResult {
    let (upstream, gateway, client) = start().await?;
    let call = |region: &'static str| {
        client.call_tool("sql", sql_args()).header(region, "us-west1").header("mcp-param-shard", "42").send()
    };
    call("mcp-param-region").await?.text()?;
    assert_eq!(upstream.listings(), 1);
    assert_eq!(client.call_tool("rename", json!({})).send().await?.text()?, "renamed");
    // The old header name is no longer the one the tool mirrors.
    call("mcp-param-region").await?.expect_error(StatusCode::BAD_REQUEST, -32020)?;
    assert_eq!(upstream.listings(), 2);
    call("mcp-param-zone").await?.text()?;
    assert_eq!(upstream.listings(), 2);
    gateway.shutdown().await;
    Ok(())
}
