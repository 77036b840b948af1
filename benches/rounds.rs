//! Whole-call latency of `input_required` rounds, measured in one run against one legacy server
//! (and, if given, a native 2026-07-28 port of it).
//!
//! Six paths (seven with a native server) call the same tool, interleaved so that each sees the
//! same machine state:
//! - `in-band`: a legacy (2025-11-25) client on an initialized session, which answers each
//!   `elicitation/create` on the call's own stream, as clients did before 2026-07-28;
//! - `native` (only with `ROUNDS_BENCH_NATIVE`): a 2026-07-28 client calling a native
//!   2026-07-28 server directly, no gateway: the figure of the legacy server once ported;
//! - `adaptive`: a 2026-07-28 client through mrtr-gateway with its defaults (a round ends on the
//!   idle gap after the latest question, and waits for as many questions as the tool asked
//!   before);
//! - `fixed`: the same through a gateway whose rounds wait out the whole gather window (the
//!   behaviour before adaptive gathering: `gather_idle_ms = gather_window_ms`, no memory);
//! - `park`: through a gateway in park mode (the retry continues the parked call, nothing is
//!   replayed);
//! - `park via 2nd`: park mode across two replicas: the first request reaches the owner, every
//!   retry reaches a second replica, which forwards it to the owner over its internal listener;
//! - `task`: the tasks extension, through a gateway that runs the tools as long calls
//!   (`tasks.long_tools`): the call answers a `CreateTaskResult`, the client polls `tasks/get`
//!   back to back, answers each `input_required` with `tasks/update`, and stops at `completed`.
//!
//! Two tools: one elicitation, and two elicitations in sequence. Each answer fills every field
//! of the question's schema (strings with a fixed word, booleans with `true`). It prints the
//! median of N whole calls per path and the ratio of each gateway path to in-band; with a
//! native server, also the native median (and its ratio to in-band) and each gateway path's
//! ratio to native.
//!
//! The upstream is the crate's embedded demo server (`greet`, `confirm_twice`) unless
//! `ROUNDS_BENCH_UPSTREAM` names another legacy Streamable HTTP server, e.g. the interop
//! suite's FastMCP fixture with `ROUNDS_BENCH_TOOLS=test_input_required_result_elicitation,
//! test_input_required_result_multi_round`. `ROUNDS_BENCH_NATIVE` names a 2026-07-28 server
//! with tools of the same names, e.g. `benches/native_rounds_server.py` (the fixture's two tools
//! on the Python SDK 2.x); the bench checks its `tools/list` first. Every loop is bounded in
//! count and in time.
//!
//! `ROUNDS_BENCH_THINK_MS` (default 0) makes every path's client pause that long before each
//! answer, as a user or a model answering takes time, and leaves the pauses out of the figures:
//! work the gateway does between a round's reply and its retry (ending a replayed round's call
//! upstream) is then off the time the client waits, as it is in real use. With no pause the
//! retry arrives at once and waits for that work.
//!
//! Run: `cargo bench --bench rounds` (env: ROUNDS_BENCH_N, default 40).

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;
use mrtr_gateway::demo::{spawn_loopback, DemoOptions};
use serde_json::{json, Map, Value};

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// The whole run stops measuring after this long, whatever N is.
const TIME_CAP: Duration = Duration::from_secs(120);
/// One request (or one in-band call) longer than this fails the run.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Most rounds one call may take.
const MAX_ROUNDS: usize = 8;
const WARM_UP: usize = 5;
const LEGACY_VERSION: &str = "2025-11-25";

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let n = env_or("ROUNDS_BENCH_N", 40);
    let think = Duration::from_millis(env_or("ROUNDS_BENCH_THINK_MS", 0) as u64);
    let demo = match std::env::var("ROUNDS_BENCH_UPSTREAM") {
        Ok(_) => None,
        Err(_) => Some(spawn_loopback(DemoOptions::default()).expect("demo server")),
    };
    let upstream = match &demo {
        Some(d) => d.url(),
        None => std::env::var("ROUNDS_BENCH_UPSTREAM").unwrap_or_default(),
    };
    let tools = std::env::var("ROUNDS_BENCH_TOOLS").unwrap_or_else(|_| "greet,confirm_twice".to_owned());
    let tools: Vec<&str> = tools.split(',').map(str::trim).collect();
    let adaptive = Gateway::start(config(&upstream, "")).await.expect("adaptive gateway");
    let fixed = Gateway::start(config(&upstream, "gather_idle_ms = 50\ngather_memory_tools = 0\n"))
        .await
        .expect("fixed-window gateway");
    let park = Gateway::start(config(&upstream, "mode = \"park\"\n")).await.expect("park gateway");
    let (owner, second) = (park_replica(&upstream).await, park_replica(&upstream).await);
    let tasks = Gateway::start(tasks_config(&upstream, &tools)).await.expect("tasks gateway");
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: HttpClient = Client::builder(TokioExecutor::new()).build(connector);
    let legacy = LegacySession::open(&client, &upstream).await;
    let mut paths = vec![
        Path::InBand(&legacy),
        Path::Gateway(adaptive.url("/mcp")),
        Path::Gateway(fixed.url("/mcp")),
        Path::Gateway(park.url("/mcp")),
        Path::Replicas(owner.url("/mcp"), second.url("/mcp")),
        Path::Task(tasks.url("/mcp")),
    ];
    let native = std::env::var("ROUNDS_BENCH_NATIVE").ok().filter(|url| !url.is_empty());
    if let Some(url) = &native {
        check_native_tools(&client, url, &tools).await;
        // Last, so that the report's columns 1..6 stay the gateway paths and 6 is native.
        paths.push(Path::Native(url.clone()));
    }
    let started = Instant::now();
    let mut rows = Vec::new();
    for tool in &tools {
        let medians = measure(&client, &paths, tool, n, think, started).await;
        rows.push((*tool, medians));
    }
    report(&upstream, demo.is_some(), native.as_deref(), n, think, &rows);
    for gateway in [adaptive, fixed, park, owner, second, tasks] {
        gateway.shutdown().await;
    }
    if let Some(demo) = demo {
        let _ = demo.shutdown().await;
    }
}

fn config(upstream: &str, mrtr: &str) -> Config {
    Config::from_toml(&toml(upstream, mrtr)).expect("config")
}

fn toml(upstream: &str, mrtr: &str) -> String {
    format!(
        "[front]\nlisten = \"127.0.0.1:0\"\n[admin]\nenabled = false\n[log]\nlevel = \"warn\"\n\
         [upstream]\nurl = \"{upstream}\"\n[state]\nkeys = [\"{}\"]\n[mrtr]\n{mrtr}",
        "A".repeat(43)
    )
}

/// A gateway that runs every call of `tools` as a task (a long call).
fn tasks_config(upstream: &str, tools: &[&str]) -> Config {
    let text = format!("{}\n[tasks]\nlong_tools = {tools:?}\n", toml(upstream, ""));
    Config::from_toml(&text).expect("config")
}

/// A park-mode replica with its internal listener on a free loopback port.
async fn park_replica(upstream: &str) -> Gateway {
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let cluster =
        format!("[cluster]\nlisten = \"127.0.0.1:{port}\"\nadvertise_url = \"http://127.0.0.1:{port}\"\n");
    let text = format!("{}\n{cluster}", toml(upstream, "mode = \"park\"\n"));
    Gateway::start(Config::from_toml(&text).expect("config")).await.expect("park replica")
}

enum Path<'a> {
    InBand(&'a LegacySession),
    Gateway(String),
    /// The first request to the first URL, every retry to the second.
    Replicas(String, String),
    /// A native 2026-07-28 server, called directly: the same rounds with no gateway.
    Native(String),
    /// A gateway that runs the tool as a task.
    Task(String),
}

/// Median whole-call time per path, the clients' pauses left out, calls interleaved across the
/// paths.
async fn measure(
    client: &HttpClient,
    paths: &[Path<'_>],
    tool: &str,
    n: usize,
    think: Duration,
    started: Instant,
) -> Vec<Duration> {
    let mut samples: Vec<Vec<Duration>> = paths.iter().map(|_| Vec::with_capacity(n)).collect();
    for i in 0..(WARM_UP + n) {
        if started.elapsed() > TIME_CAP {
            break;
        }
        for (path, times) in paths.iter().zip(samples.iter_mut()) {
            let t = Instant::now();
            let paused = match path {
                Path::InBand(session) => session.call(client, tool, think).await,
                Path::Gateway(url) | Path::Native(url) => call_through(client, url, url, tool, think).await,
                Path::Replicas(first, retries) => call_through(client, first, retries, tool, think).await,
                Path::Task(url) => call_as_task(client, url, tool, think).await,
            };
            if i >= WARM_UP {
                times.push(t.elapsed().saturating_sub(paused));
            }
        }
    }
    samples.into_iter().map(median).collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// A 2026-07-28 call (through a gateway, or to a native server), answering each round until the
/// result after `think`; the first request goes to `first_url`, the retries to `retry_url`.
/// Returns the time spent thinking.
async fn call_through(
    client: &HttpClient,
    first_url: &str,
    retry_url: &str,
    tool: &str,
    think: Duration,
) -> Duration {
    let caps = json!({"elicitation": {"form": {}}});
    let mut paused = Duration::ZERO;
    let mut retry: Option<(Value, Option<String>)> = None;
    for _ in 0..MAX_ROUNDS {
        let mut params = json!({"name": tool, "arguments": {},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": caps}});
        let url = if retry.is_some() { retry_url } else { first_url };
        if let Some((answers, state)) = retry.take() {
            paused += pause(think).await;
            params["inputResponses"] = answers;
            // A round without a state is retried without one (an empty one is not a state).
            if let Some(state) = state {
                params["requestState"] = json!(state);
            }
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        let headers =
            [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", tool)];
        let reply = last_message(&post(client, url, &headers, &body).await);
        let result = &reply["result"];
        assert!(reply.get("error").is_none(), "{tool} via {url} failed: {reply}");
        if result["resultType"] != "input_required" {
            assert!(result["isError"] != true, "{tool} via {url} failed: {reply}");
            return paused;
        }
        let requests = result["inputRequests"].as_object().cloned().unwrap_or_default();
        let answers: Map<String, Value> = requests.iter().map(|(k, q)| (k.clone(), answer(q))).collect();
        let state = result["requestState"].as_str().map(str::to_owned);
        retry = Some((Value::Object(answers), state));
    }
    panic!("{tool} took more than {MAX_ROUNDS} rounds");
}

/// A call run as a task of the extension: started, its `tasks/get` polled back to back, each
/// `input_required` answered with `tasks/update` after `think`, until `completed`. Returns the
/// time spent thinking.
async fn call_as_task(client: &HttpClient, url: &str, tool: &str, think: Duration) -> Duration {
    const MAX_POLLS: usize = 100_000;
    let caps = json!({"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps});
    let send = |method: &'static str, name: String, params: Value| async move {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", method), ("mcp-name", &name)];
        let reply = last_message(&post(client, url, &headers, &body).await);
        assert!(reply.get("error").is_none(), "{method} of a {tool} task via {url} failed: {reply}");
        reply["result"].clone()
    };
    let created =
        send("tools/call", tool.to_owned(), json!({"name": tool, "arguments": {}, "_meta": meta})).await;
    if created["resultType"] != "task" {
        return Duration::ZERO;
    }
    let task_id = created["taskId"].as_str().unwrap_or_default().to_owned();
    let mut paused = Duration::ZERO;
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    for _ in 0..MAX_POLLS {
        assert!(Instant::now() < deadline, "a {tool} task via {url} took longer than {REQUEST_TIMEOUT:?}");
        let task = send("tasks/get", task_id.clone(), json!({"taskId": task_id, "_meta": meta})).await;
        match task["status"].as_str().unwrap_or_default() {
            "completed" => return paused,
            "input_required" => {
                let requests = task["inputRequests"].as_object().cloned().unwrap_or_default();
                let answers: Map<String, Value> =
                    requests.iter().map(|(k, q)| (k.clone(), answer(q))).collect();
                paused += pause(think).await;
                let params = json!({"taskId": task_id, "inputResponses": answers, "_meta": meta});
                send("tasks/update", task_id.clone(), params).await;
            }
            "working" => {}
            other => panic!("a {tool} task via {url} ended {other}: {task}"),
        }
    }
    panic!("a {tool} task via {url} was polled {MAX_POLLS} times without completing");
}

/// Fails the run unless the native server lists every tool of the run (so a missing tool is
/// said at once, not as a failed call); follows at most a few pages of `tools/list`.
async fn check_native_tools(client: &HttpClient, url: &str, tools: &[&str]) {
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..16 {
        let mut params = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}});
        if let Some(cursor) = cursor.take() {
            params["cursor"] = json!(cursor);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params});
        let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")];
        let reply = last_message(&post(client, url, &headers, &body).await);
        let result = &reply["result"];
        assert!(reply.get("error").is_none(), "tools/list of ROUNDS_BENCH_NATIVE {url} failed: {reply}");
        let names = result["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str());
        listed.extend(names.map(str::to_owned));
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    for tool in tools {
        assert!(
            listed.iter().any(|t| t == tool),
            "ROUNDS_BENCH_NATIVE {url} has no tool {tool} (it lists {listed:?}); set ROUNDS_BENCH_TOOLS \
             to tools both servers serve"
        );
    }
}

/// A legacy client's initialized session on the upstream.
struct LegacySession {
    url: String,
    session: String,
}

impl LegacySession {
    async fn open(client: &HttpClient, url: &str) -> Self {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY_VERSION, "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "rounds-bench", "version": "1"}}});
        let req = request(url, &[], &init);
        let resp = client.request(req).await.expect("initialize");
        let session =
            resp.headers().get("mcp-session-id").expect("session id").to_str().expect("ascii").to_owned();
        let _ = resp.into_body().collect().await;
        let me = Self { url: url.to_owned(), session };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let _ = post(client, &me.url, &me.headers(), &note).await;
        me
    }

    fn headers(&self) -> [(&'static str, &str); 2] {
        [("mcp-session-id", &self.session), ("mcp-protocol-version", LEGACY_VERSION)]
    }

    /// One call; each question on the call's stream is answered on the same session, after
    /// `think`. Returns the time spent thinking.
    async fn call(&self, client: &HttpClient, tool: &str, think: Duration) -> Duration {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}});
        let resp =
            tokio::time::timeout(REQUEST_TIMEOUT, client.request(request(&self.url, &self.headers(), &body)))
                .await
                .expect("in-band call timed out")
                .expect("in-band call");
        assert_eq!(resp.status(), StatusCode::OK, "in-band {tool}");
        let mut stream = resp.into_body();
        let mut buf = Vec::new();
        let mut paused = Duration::ZERO;
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        while Instant::now() < deadline {
            let frame =
                tokio::time::timeout(REQUEST_TIMEOUT, stream.frame()).await.expect("in-band stream stalled");
            let Some(frame) = frame else { panic!("in-band {tool}: the stream ended without a result") };
            let Ok(data) = frame.expect("in-band stream").into_data() else { continue };
            // SSE lines may end in CRLF (the Python SDK's server sends them so).
            buf.extend(data.iter().filter(|b| **b != b'\r'));
            while let Some(end) = find(&buf, b"\n\n") {
                let event: Vec<u8> = buf.drain(..end + 2).collect();
                let Some(msg) = sse_data(&event) else { continue };
                if msg.get("method").is_some() && msg.get("id").is_some() {
                    paused += pause(think).await;
                    let reply = json!({"jsonrpc": "2.0", "id": msg["id"], "result": answer(&msg)});
                    let _ = post(client, &self.url, &self.headers(), &reply).await;
                } else if msg.get("id") == Some(&json!(1)) {
                    assert!(
                        msg.get("error").is_none() && msg["result"]["isError"] != true,
                        "in-band {tool}: {msg}"
                    );
                    return paused;
                }
            }
        }
        panic!("in-band {tool} took longer than {REQUEST_TIMEOUT:?}");
    }
}

/// Waits `think` (nothing when zero) and returns how long that took.
async fn pause(think: Duration) -> Duration {
    if think.is_zero() {
        return Duration::ZERO;
    }
    let t = Instant::now();
    tokio::time::sleep(think).await;
    t.elapsed()
}

/// An accepted elicitation filling every field of the question's schema.
fn answer(question: &Value) -> Value {
    let props = question["params"]["requestedSchema"]["properties"].as_object().cloned().unwrap_or_default();
    let content: Map<String, Value> = props
        .iter()
        .map(|(k, p)| (k.clone(), if p["type"] == "boolean" { json!(true) } else { json!("Ada") }))
        .collect();
    json!({"action": "accept", "content": content})
}

fn request(url: &str, headers: &[(&str, &str)], body: &Value) -> Request<Full<Bytes>> {
    let mut req = Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(Full::new(Bytes::from(body.to_string()))).expect("request")
}

async fn post(client: &HttpClient, url: &str, headers: &[(&str, &str)], body: &Value) -> Bytes {
    let send = client.request(request(url, headers, body));
    let resp = tokio::time::timeout(REQUEST_TIMEOUT, send).await.expect("request timed out").expect("send");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    assert!(status.is_success(), "{url} answered {status}: {bytes:?}");
    bytes
}

/// The last JSON-RPC message of a JSON or SSE body.
fn last_message(body: &[u8]) -> Value {
    if body.first() == Some(&b'{') {
        return serde_json::from_slice(body).expect("json body");
    }
    body.split(|b| *b == b'\n')
        .filter_map(|line| line.strip_prefix(b"data:"))
        .filter_map(|data| serde_json::from_slice(data).ok())
        .next_back()
        .expect("an SSE body with a message")
}

fn sse_data(event: &[u8]) -> Option<Value> {
    let data: Vec<u8> = event
        .split(|b| *b == b'\n')
        .filter_map(|line| line.strip_prefix(b"data:"))
        .flat_map(|d| d.strip_prefix(b" ").unwrap_or(d).to_vec())
        .collect();
    serde_json::from_slice(&data).ok()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn report(
    upstream: &str,
    demo: bool,
    native: Option<&str>,
    n: usize,
    think: Duration,
    rows: &[(&str, Vec<Duration>)],
) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let ratio = |d: Duration, to: Duration| ms(d) / ms(to).max(f64::EPSILON);
    let server = if demo { "the embedded demo legacy server" } else { upstream };
    println!("rounds benchmark: whole-call median of up to {n} calls per path, loopback, against {server}");
    if !think.is_zero() {
        println!("each client pauses {think:?} before every answer; the pauses are left out of the figures");
    }
    if let Some(url) = native {
        println!("native: a 2026-07-28 client calling {url} directly");
    }
    let native_head = if native.is_some() { format!(" {:>16}", "native ms (x)") } else { String::new() };
    println!(
        "{:<44} {:>10}{native_head} {:>16} {:>16} {:>16} {:>16} {:>16}",
        "tool",
        "in-band ms",
        "adaptive ms (x)",
        "fixed 50 ms (x)",
        "park ms (x)",
        "park 2nd ms (x)",
        "task ms (x)"
    );
    for (tool, m) in rows {
        let inband = m[0];
        let cell = |d: Duration| format!("{:>9.2} ({:>4.1})", ms(d), ratio(d, inband));
        let native_cell = m.get(6).map(|d| format!(" {}", cell(*d))).unwrap_or_default();
        let cells: Vec<String> = m[1..6].iter().map(|d| cell(*d)).collect();
        println!("{:<44} {:>10.2}{native_cell} {}", tool, ms(inband), cells.join(" "));
    }
    if native.is_none() {
        return;
    }
    println!("each gateway path's median over native's");
    println!(
        "{:<44} {:>10} {:>16} {:>16} {:>16} {:>16} {:>16}",
        "tool", "native ms", "adaptive x", "fixed 50 ms x", "park x", "park 2nd x", "task x"
    );
    for (tool, m) in rows {
        let native = m[6];
        let cells: Vec<String> = m[1..6].iter().map(|d| format!("{:>16.2}", ratio(*d, native))).collect();
        println!("{:<44} {:>10.2} {}", tool, ms(native), cells.join(" "));
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
