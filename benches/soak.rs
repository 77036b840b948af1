//! A bounded soak of the gateway: many concurrent 2026-07-28 clients for a fixed time, mixing
//! plain `tools/call` with multi-round MRTR calls, while the gateway's memory is sampled.
//!
//! The gateway runs as its own process, and the memory sampled every second (`VmRSS` of that
//! process) is never the load generator's. Its upstream is chosen by `SOAK_UPSTREAM`:
//! - unset or `embedded`: the gateway as `mrtr-gateway` starts with no upstream configured,
//!   fronting its embedded demo legacy server, so the RSS is the gateway's and the demo's;
//! - `demo`: the same demo server, run by this bench in its own runtime, so the RSS is the
//!   gateway's alone;
//! - a `http://` URL: any Streamable HTTP legacy server started apart (`server-everything`, for
//!   one), with `SOAK_TOOLS=everything` for its tools.
//!
//! Each client holds one keep-alive connection and always has one call in flight. With the demo's
//! tools, two calls in three are `echo`; the third is `greet` (one `input_required` round) or
//! `confirm_twice` (two). With `server-everything`'s, two in three are `echo` and the third is
//! `trigger-elicitation-request` (one round). Rounds are answered with `inputResponses` and the
//! echoed `requestState`. Everything is on loopback.
//!
//! Every loop is bounded in count and time, and the run stops by itself. It prints the calls
//! done, the unexpected errors (any failed call: there must be none), RSS per second and
//! whether it stayed flat after the warm-up, where the gateway's memory is at the end
//! (`/proc/PID/smaps_rollup`), and the latency of requests and of whole calls.
//!
//! Before the load, it measures what an idle front connection costs: `SOAK_IDLE` connections
//! (default 1000) each make one `echo` call and stay open, idle, and the RSS they add is printed
//! per connection, beside the same measure taken on a bare hyper HTTP/1.1 server (this bench run
//! again as a process of its own, `SOAK_ROLE=bare-hyper`, answering every request with a small
//! JSON body): what hyper itself needs for an idle connection. Each is measured on a process
//! started for it, so the soak's RSS is not the held connections'. `SOAK_IDLE=0` skips both.
//!
//! Run: `cargo bench --bench soak` (env: SOAK_SECS, default 60; SOAK_CLIENTS, default 1000;
//! SOAK_UPSTREAM; SOAK_TOOLS, `demo` or `everything`; SOAK_GATEWAY, the gateway binary to run
//! instead of this build's; anything `MRTR_GATEWAY__*` reaches the gateway, `MALLOC_*` too).

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdListener};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use mrtr_gateway::app::Bound;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tokio::net::TcpStream;

/// Longest one request may take before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Most `input_required` rounds a call may go through.
const MAX_ROUNDS: usize = 4;
/// Most calls one client makes, whatever the duration.
const MAX_CALLS_PER_CLIENT: u64 = 10_000_000;
/// How long the gateway gets to print the address it bound.
const BIND_WAIT: Duration = Duration::from_secs(30);
/// How long the gateway gets to become ready, polled every 100 ms.
const READY_POLLS: usize = 300;
/// Error messages kept for the report.
const KEPT_ERRORS: usize = 8;
/// Sub-buckets per power of two in the latency histogram (about 3% resolution).
const SUB: usize = 32;
const BUCKETS: usize = SUB * 40;

fn main() {
    if std::env::var("SOAK_ROLE").as_deref() == Ok("bare-hyper") {
        return idle::serve_bare_hyper();
    }
    let secs = env_or("SOAK_SECS", 60);
    let clients = env_or("SOAK_CLIENTS", 1000) as usize;
    let tools = Tools::from_env();
    let upstream = Upstream::from_env();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let idle = env_or("SOAK_IDLE", 1000) as usize;
    if idle > 0 {
        // A gateway of its own: the memory the held connections free stays in the process's
        // RSS, which would otherwise be counted in the soak's.
        rt.block_on(idle::report(&GatewayProcess::spawn(upstream.url()), tools, idle));
    }
    let gateway = GatewayProcess::spawn(upstream.url());
    let report = rt.block_on(soak(&gateway, tools, clients, Duration::from_secs(secs)));
    let memory = smaps_rollup(gateway.pid());
    drop(gateway);
    report.print(clients, secs, &upstream);
    println!("gateway memory at the end (smaps_rollup): {memory}");
    if report.errors.load(Ordering::Relaxed) > 0 {
        std::process::exit(1);
    }
}

async fn soak(gateway: &GatewayProcess, tools: Tools, clients: usize, duration: Duration) -> Arc<Stats> {
    let stats = Arc::new(Stats::default());
    wait_ready(gateway.addr, tools).await;
    let started = Instant::now();
    let sampler = tokio::spawn(sample_rss(gateway.pid(), duration, stats.clone()));
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|i| tokio::spawn(client(gateway.addr, tools, i as u64, deadline, stats.clone())))
        .collect();
    for task in tasks {
        let _ = tokio::time::timeout(duration + REQUEST_TIMEOUT * 2, task).await;
    }
    let _ = sampler.await;
    *stats.elapsed.lock() = started.elapsed();
    stats
}

// === the upstream ===

/// Where the gateway's legacy server is.
enum Upstream {
    /// The gateway's own embedded demo.
    Embedded,
    /// The demo served by this bench, stopped when dropped.
    Demo { url: String, _stop: tokio::sync::oneshot::Sender<()> },
    /// A server started apart.
    External(String),
}

impl Upstream {
    fn from_env() -> Self {
        match std::env::var("SOAK_UPSTREAM").unwrap_or_default().as_str() {
            "" | "embedded" => Self::Embedded,
            "demo" => serve_demo(),
            url => Self::External(url.to_owned()),
        }
    }

    fn url(&self) -> Option<&str> {
        match self {
            Self::Embedded => None,
            Self::Demo { url, .. } | Self::External(url) => Some(url),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Embedded => "the gateway and its embedded demo upstream (one process)".to_owned(),
            Self::Demo { url, .. } => format!("the gateway alone, the demo upstream apart at {url}"),
            Self::External(url) => format!("the gateway alone, in front of {url}"),
        }
    }
}

/// Serves the demo legacy server on a runtime of its own, with the bounds the gateway gives its
/// embedded demo under the default pool.
fn serve_demo() -> Upstream {
    use mrtr_gateway::demo::{self, DemoOptions};
    let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the demo");
    listener.set_nonblocking(true).expect("non-blocking listener");
    let url = format!("http://{}{}", listener.local_addr().expect("address"), demo::MCP_PATH);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("demo runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("demo listener");
            let options = DemoOptions { max_sessions: 512, max_connections: 600, ..DemoOptions::default() };
            let _ = demo::serve(listener, options, async move { drop(stopped.await) }).await;
        });
    });
    Upstream::Demo { url, _stop: stop }
}

// === the gateway process ===

/// The gateway binary, killed when dropped.
struct GatewayProcess {
    child: Child,
    addr: SocketAddr,
}

impl GatewayProcess {
    /// Starts the gateway with its front on port 0, and reads the address it bound from the
    /// line it prints on stderr (the rest of its stderr is passed on), so no other process can
    /// take the port between a pick and the bind.
    fn spawn(upstream: Option<&str>) -> Self {
        // The bench's own build of the gateway, unless SOAK_GATEWAY names another binary (an
        // optimised build or the container's, say), so the load generator's profile does not
        // decide the gateway's.
        let binary =
            std::env::var("SOAK_GATEWAY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mrtr-gateway").to_owned());
        let mut command = Command::new(binary);
        if let Some(url) = upstream {
            command.env("MRTR_GATEWAY__UPSTREAM__URL", url);
        }
        let mut child = command
            .env("MRTR_GATEWAY__FRONT__LISTEN", "127.0.0.1:0")
            .env("MRTR_GATEWAY__ADMIN__ENABLED", "false")
            .env("MRTR_GATEWAY__STATE__KEYS", format!("soak:{}", "A".repeat(43)))
            .env("MRTR_GATEWAY__LOG__LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the gateway");
        let stderr = child.stderr.take().expect("the gateway's stderr is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || pass_stderr(stderr, &tx));
        let addr = rx.recv_timeout(BIND_WAIT).expect("the gateway to print the address it bound");
        Self { child, addr }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Passes the gateway's stderr on to ours, and sends the front address of its bound line.
fn pass_stderr(stderr: ChildStderr, tx: &std::sync::mpsc::Sender<SocketAddr>) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { return };
        if let Some(bound) = Bound::parse(&line) {
            let _ = tx.send(bound.front);
        }
        eprintln!("{line}");
    }
}

async fn wait_ready(addr: SocketAddr, tools: Tools) {
    for _ in 0..READY_POLLS {
        if let Ok(mut conn) = Conn::open(addr, None).await {
            if conn.call(tools, Kind::Echo).await.is_ok() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the gateway did not become ready");
}

// === clients ===

/// Whose tools the clients call.
#[derive(Clone, Copy)]
enum Tools {
    /// The demo's `echo`, `greet` and `confirm_twice`.
    Demo,
    /// `server-everything`'s `echo` and `trigger-elicitation-request`.
    Everything,
}

impl Tools {
    fn from_env() -> Self {
        match std::env::var("SOAK_TOOLS").unwrap_or_default().as_str() {
            "everything" => Self::Everything,
            _ => Self::Demo,
        }
    }
}

/// What a call asks for.
#[derive(Clone, Copy)]
enum Kind {
    Echo,
    /// One `input_required` round.
    Ask,
    /// Two rounds (the demo only; `server-everything` asks once).
    AskTwice,
}

impl Kind {
    fn of(call: u64) -> Self {
        match call % 6 {
            2 => Self::Ask,
            5 => Self::AskTwice,
            _ => Self::Echo,
        }
    }

    fn tool(self, tools: Tools) -> &'static str {
        match (tools, self) {
            (_, Self::Echo) => "echo",
            (Tools::Demo, Self::Ask) => "greet",
            (Tools::Demo, Self::AskTwice) => "confirm_twice",
            (Tools::Everything, _) => "trigger-elicitation-request",
        }
    }

    /// The start of the text the call must end with.
    fn expected(self, tools: Tools) -> &'static str {
        match (tools, self) {
            (_, Self::Echo) => "Echo: soak",
            (Tools::Demo, Self::Ask) => "Hello, Ada!",
            (Tools::Demo, Self::AskTwice) => "Confirmed Ada: true",
            // server-everything 2026.8.31's own text, emoji included.
            (Tools::Everything, _) => "\u{2705} User provided the requested information!",
        }
    }
}

/// One client: one connection, one call in flight, until `deadline`.
async fn client(addr: SocketAddr, tools: Tools, index: u64, deadline: Instant, stats: Arc<Stats>) {
    let mut conn = None;
    for n in 0..MAX_CALLS_PER_CLIENT {
        if Instant::now() >= deadline {
            return;
        }
        let c = match conn.take() {
            Some(c) => c,
            None => match Conn::open(addr, Some(stats.clone())).await {
                Ok(c) => c,
                Err(e) => {
                    stats.error(format!("connect: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        conn = run_call(c, tools, Kind::of(index + n), &stats).await;
    }
}

/// Runs one call; returns the connection if it is still usable.
async fn run_call(mut conn: Conn, tools: Tools, kind: Kind, stats: &Stats) -> Option<Conn> {
    let started = Instant::now();
    match conn.call(tools, kind).await {
        Ok(rounds) => {
            stats.calls.fetch_add(1, Ordering::Relaxed);
            stats.rounds.fetch_add(rounds as u64, Ordering::Relaxed);
            stats.call_latency.record(started.elapsed());
            Some(conn)
        }
        Err(e) => {
            stats.error(format!("{}: {e}", kind.tool(tools)));
            None
        }
    }
}

/// A keep-alive HTTP/1.1 connection to the gateway.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    next_id: u64,
    stats: Option<Arc<Stats>>,
}

impl Conn {
    /// Connects; `stats` (if any) gets the latency of every request.
    async fn open(addr: SocketAddr, stats: Option<Arc<Stats>>) -> Result<Self, String> {
        let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        Ok(Self { sender, next_id: 1, stats })
    }

    /// Runs `kind` to completion, answering every round; returns the rounds it took.
    async fn call(&mut self, tools: Tools, kind: Kind) -> Result<usize, String> {
        let mut retry: Option<(Value, String)> = None;
        for round in 1..=MAX_ROUNDS {
            let reply = self.send(tools, kind, retry.take()).await?;
            let result = reply.get("result").ok_or_else(|| format!("error reply: {reply}"))?;
            match result["resultType"].as_str() {
                Some("complete") => return check_text(result, tools, kind).map(|()| round),
                Some("input_required") => retry = Some(answers(result)?),
                _ => return Err(format!("unexpected result: {result}")),
            }
        }
        Err(format!("no result after {MAX_ROUNDS} rounds"))
    }

    async fn send(
        &mut self,
        tools: Tools,
        kind: Kind,
        retry: Option<(Value, String)>,
    ) -> Result<Value, String> {
        let request = self.request(kind.tool(tools), retry)?;
        let started = Instant::now();
        let exchange = async {
            self.sender.ready().await.map_err(|e| e.to_string())?;
            let response = self.sender.send_request(request).await.map_err(|e| e.to_string())?;
            let status = response.status();
            let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
            Ok::<_, String>((status, body))
        };
        let (status, body) =
            tokio::time::timeout(REQUEST_TIMEOUT, exchange).await.map_err(|_| "request timed out")??;
        if let Some(stats) = &self.stats {
            stats.request_latency.record(started.elapsed());
        }
        if status != StatusCode::OK {
            return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        parse_body(&body)
    }

    fn request(
        &mut self,
        tool: &str,
        retry: Option<(Value, String)>,
    ) -> Result<Request<Full<Bytes>>, String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut params = json!({"name": tool, "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}});
        if tool == "echo" {
            params["arguments"] = json!({"message": "soak"});
        }
        if let Some((responses, state)) = retry {
            params["inputResponses"] = responses;
            params["requestState"] = json!(state);
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        Request::post("/mcp")
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())
    }
}

/// The JSON-RPC message of a JSON reply, or the last one of an SSE reply.
fn parse_body(body: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(body).map_err(|_| "reply is not UTF-8".to_owned())?;
    let json = if text.trim_start().starts_with('{') {
        text
    } else {
        text.lines().rev().find_map(|l| l.strip_prefix("data:")).ok_or("empty SSE reply")?
    };
    serde_json::from_str(json.trim()).map_err(|e| format!("bad JSON reply: {e}"))
}

fn check_text(result: &Value, tools: Tools, kind: Kind) -> Result<(), String> {
    match result.pointer("/content/0/text").and_then(Value::as_str) {
        Some(text) if text.starts_with(kind.expected(tools)) => Ok(()),
        _ => Err(format!("unexpected result for {}: {result}", kind.tool(tools))),
    }
}

/// Answers every form question as a user named Ada who confirms and takes every default.
fn answers(result: &Value) -> Result<(Value, String), String> {
    let requests = result["inputRequests"].as_object().ok_or("no inputRequests")?;
    let state = result["requestState"].as_str().ok_or("no requestState")?.to_owned();
    let answers: Map<String, Value> = requests.iter().map(|(k, r)| (k.clone(), form_answer(r))).collect();
    Ok((Value::Object(answers), state))
}

fn form_answer(request: &Value) -> Value {
    let properties = request.pointer("/params/requestedSchema/properties").and_then(Value::as_object);
    let content: Map<String, Value> = properties
        .into_iter()
        .flatten()
        .filter_map(|(name, schema)| Some((name.clone(), field_answer(schema)?)))
        .collect();
    json!({"action": "accept", "content": content})
}

fn field_answer(schema: &Value) -> Option<Value> {
    if let Some(default) = schema.get("default") {
        return Some(default.clone());
    }
    Some(match (schema["type"].as_str()?, schema["format"].as_str()) {
        ("boolean", _) => json!(true),
        ("integer" | "number", _) => json!(1),
        ("string", Some("email")) => json!("ada@example.org"),
        ("string", Some("uri")) => json!("http://127.0.0.1/"),
        ("string", Some("date")) => json!("2000-01-01"),
        ("string", _) => json!(schema["enum"].get(0).cloned().unwrap_or_else(|| json!("Ada"))),
        _ => return None,
    })
}

// === measurements ===

#[derive(Default)]
struct Stats {
    calls: AtomicU64,
    rounds: AtomicU64,
    errors: AtomicU64,
    kept: Mutex<Vec<String>>,
    request_latency: Histogram,
    call_latency: Histogram,
    /// (second, RSS in KiB, open fds) of the gateway process.
    rss: Mutex<Vec<(u64, u64, usize)>>,
    elapsed: Mutex<Duration>,
}

impl Stats {
    fn error(&self, message: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.kept.lock();
        if kept.len() < KEPT_ERRORS {
            kept.push(message);
        }
    }
}

/// Samples the gateway's RSS and fds once a second for `duration`, printing each sample.
async fn sample_rss(pid: u32, duration: Duration, stats: Arc<Stats>) {
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    for second in 0..=duration.as_secs() {
        ticks.tick().await;
        let rss = vm_rss_kib(pid).unwrap_or(0);
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
        let calls = stats.calls.load(Ordering::Relaxed);
        let errors = stats.errors.load(Ordering::Relaxed);
        println!("t={second:>3}s rss={:>6.1} MB fds={fds:>5} calls={calls:>9} errors={errors}", mb(rss));
        stats.rss.lock().push((second, rss, fds));
    }
}

fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The gateway's resident memory by kind: what is heap (anonymous) and what is mapped files.
fn smaps_rollup(pid: u32) -> String {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) else {
        return "unavailable".to_owned();
    };
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    format!(
        "Rss {:.1} MB (Anonymous {:.1} MB, file-backed {:.1} MB)",
        mb(field("Rss:")),
        mb(field("Anonymous:")),
        mb(field("Rss:").saturating_sub(field("Anonymous:")))
    )
}

fn mb(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A fixed-size log-linear latency histogram in microseconds: no allocation while running.
struct Histogram {
    counts: Vec<AtomicU64>,
    max_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self { counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(), max_us: AtomicU64::new(0) }
    }
}

impl Histogram {
    fn record(&self, d: Duration) {
        let us = d.as_micros().min(u64::MAX as u128) as u64;
        self.counts[bucket(us).min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// The upper bound of the bucket holding the `p` quantile, in milliseconds.
    fn quantile_ms(&self, p: f64) -> f64 {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let rank = ((total as f64 * p).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return lower_bound(i + 1) as f64 / 1000.0;
            }
        }
        0.0
    }

    fn line(&self) -> String {
        let max = self.max_us.load(Ordering::Relaxed) as f64 / 1000.0;
        let q = |p| self.quantile_ms(p);
        format!("p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {max:.1} ms", q(0.5), q(0.9), q(0.99))
    }
}

fn bucket(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let shift = (63 - us.leading_zeros()) as usize - SUB.trailing_zeros() as usize;
    (shift + 1) * SUB + ((us >> shift) as usize - SUB)
}

fn lower_bound(index: usize) -> u64 {
    if index < SUB {
        return index as u64;
    }
    let shift = index / SUB - 1;
    ((index % SUB + SUB) as u64) << shift
}

// === the report ===

impl Stats {
    fn print(&self, clients: usize, secs: u64, upstream: &Upstream) {
        let elapsed = self.elapsed.lock().as_secs_f64();
        let calls = self.calls.load(Ordering::Relaxed);
        println!("soak: {clients} clients for {secs} s against {}", upstream.describe());
        println!(
            "calls done: {calls} ({:.0}/s), requests (rounds): {}",
            calls as f64 / elapsed,
            self.rounds.load(Ordering::Relaxed)
        );
        println!("unexpected errors: {}", self.errors.load(Ordering::Relaxed));
        for e in self.kept.lock().iter() {
            println!("  error: {e}");
        }
        println!("request latency: {}", self.request_latency.line());
        println!("call latency:    {}", self.call_latency.line());
        self.print_rss(secs);
    }

    fn print_rss(&self, secs: u64) {
        let samples = self.rss.lock();
        let warm = (secs / 5).max(5);
        let after: Vec<u64> = samples.iter().filter(|s| s.0 >= warm).map(|s| s.1).collect();
        let max_fds = samples.iter().map(|s| s.2).max().unwrap_or(0);
        if after.len() < 3 {
            println!("RSS: too few samples after the {warm} s warm-up to judge");
            return;
        }
        let third = after.len() / 3;
        let mean = |s: &[u64]| s.iter().sum::<u64>() as f64 / s.len() as f64;
        let (first, last) = (mean(&after[..third]), mean(&after[after.len() - third..]));
        let (min, max) = (after.iter().min().copied().unwrap_or(0), after.iter().max().copied().unwrap_or(0));
        let flat = last - first <= (first * 0.05).max(2048.0);
        println!(
            "RSS after the {warm} s warm-up: min {:.1} MB, max {:.1} MB, first third {:.1} MB, last third {:.1} MB: {}",
            mb(min),
            mb(max),
            first / 1024.0,
            last / 1024.0,
            if flat { "flat" } else { "GROWING" }
        );
        println!("gateway open fds: at most {max_fds}");
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// What an idle front connection costs, against what a bare hyper server needs for one.
mod idle {
    use std::io::{BufRead, BufReader, Write};
    use std::net::SocketAddr;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use bytes::Bytes;
    use http::{Response, StatusCode};
    use http_body_util::{BodyExt, Full};
    use hyper_util::rt::TokioIo;

    use super::{mb, vm_rss_kib, wait_ready, Conn, GatewayProcess, Kind, Tools, REQUEST_TIMEOUT};

    /// How long the held connections settle before the RSS is read.
    const SETTLE: Duration = Duration::from_secs(1);

    /// Prints the RSS an idle connection adds to the gateway and to a bare hyper server.
    pub(super) async fn report(gateway: &GatewayProcess, tools: Tools, n: usize) {
        wait_ready(gateway.addr, tools).await;
        let gateway_kib = held_cost(gateway.addr, gateway.pid(), tools, n).await;
        let bare = BareHyper::spawn();
        let bare_kib = held_cost(bare.addr, bare.child.id(), tools, n).await;
        println!(
            "idle front connections ({n}, one echo call each, then idle): the gateway {:.1} KB each \
             ({:.1} MB in all); a bare hyper HTTP/1.1 server {:.1} KB each; ratio {:.2}",
            gateway_kib,
            mb((gateway_kib * n as f64) as u64),
            bare_kib,
            gateway_kib / bare_kib.max(0.1)
        );
    }

    /// Opens `n` connections to `addr`, makes one `echo` call on each and holds them idle;
    /// returns the KiB of RSS each added to process `pid`.
    async fn held_cost(addr: SocketAddr, pid: u32, tools: Tools, n: usize) -> f64 {
        tokio::time::sleep(SETTLE).await;
        let before = vm_rss_kib(pid).expect("RSS before");
        let mut held = Vec::with_capacity(n);
        for _ in 0..n {
            let mut conn = Conn::open(addr, None).await.expect("connect");
            let request = conn.request(Kind::Echo.tool(tools), None).expect("request");
            let exchange = async {
                conn.sender.ready().await.map_err(|e| e.to_string())?;
                let response = conn.sender.send_request(request).await.map_err(|e| e.to_string())?;
                let status = response.status();
                response.into_body().collect().await.map_err(|e| e.to_string())?;
                Ok::<_, String>(status)
            };
            let status =
                tokio::time::timeout(REQUEST_TIMEOUT, exchange).await.expect("in time").expect("call");
            assert_eq!(status, StatusCode::OK, "the call on a held connection failed");
            held.push(conn);
        }
        tokio::time::sleep(SETTLE).await;
        let after = vm_rss_kib(pid).expect("RSS after");
        drop(held);
        after.saturating_sub(before) as f64 / n as f64
    }

    /// This bench run again as a bare hyper server, killed when dropped.
    struct BareHyper {
        child: std::process::Child,
        addr: SocketAddr,
    }

    impl BareHyper {
        fn spawn() -> Self {
            let mut child = Command::new(std::env::current_exe().expect("this bench's binary"))
                .env("SOAK_ROLE", "bare-hyper")
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start the bare hyper server");
            let stdout = child.stdout.take().expect("piped");
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).expect("its address");
            let addr = line.trim().parse().expect("an address");
            Self { child, addr }
        }
    }

    impl Drop for BareHyper {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// The bare server: hyper's HTTP/1.1 connection on a 2-worker runtime, every request
    /// answered with a small JSON body. Prints its address, then serves until killed.
    pub(super) fn serve_bare_hyper() {
        let rt =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{}", listener.local_addr().expect("address"));
            let _ = out.flush();
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let svc =
                    hyper::service::service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                        let _ = req.into_body().collect().await;
                        Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from_static(b"{}"))))
                    });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc),
                );
            }
        });
    }
}
