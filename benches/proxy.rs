//! Added latency and throughput of the gateway, measured in one run on loopback.
//!
//! The legacy upstream is the crate's demo server. "direct" is a legacy client calling its
//! `echo` tool on an initialized session (what a client did before 2026-07-28); "gateway" is a
//! 2026-07-28 client calling the same tool through mrtr-gateway. Both use keep-alive HTTP/1.1
//! clients. Requests are interleaved so both paths see the same machine state. Every loop is
//! bounded in count and in time.
//!
//! By default the demo server, the gateway and the client share one 2-worker runtime, so the
//! gateway's work competes with the client's and the server's on the same threads. With
//! `PROXY_BENCH_GATEWAY_THREADS=N` the gateway runs on a runtime of its own with N workers
//! instead, as it would as a separate process; the demo and the client stay where they are,
//! and both paths are still measured in the same run.
//!
//! A third path, "relay", is the floor any reverse proxy pays on this machine: a bare HTTP/1.1
//! relay on the same crates (hyper's server, hyper-util's pooled client) that forwards the
//! legacy request as it is and sends the collected answer back, with no MCP work at all. It runs
//! on the gateway's runtime, so the gateway's own cost is what it adds over the relay. A runtime
//! of the gateway's own names its threads `gateway-worker`, so a profiler attached to the bench
//! (`perf record -t <tid>`) can follow them alone.
//!
//! A fourth path, "peer", is another MCP proxy in front of the same demo server, when
//! `PROXY_BENCH_PEER` names its binary: `mcp-proxy` 0.6.0, a tower-based MCP gateway of its own
//! making, which `benches/peer.sh` installs into `target/tools` and passes here. It runs as a
//! process of its own (see `peer`), and a legacy client calls `echo` through it on a session.
//!
//! Instructions and allocations per call are counted apart, under callgrind, by
//! `benches/callgrind.sh`, which runs each path alone (`PROXY_BENCH_ONLY`).
//!
//! `PROXY_BENCH_ONLY=direct|relay|gateway|peer` runs one path alone instead, for a profiler
//! (see `one_path`), sequentially or from `PROXY_BENCH_ONLY_CONCURRENCY` clients.
//!
//! Run: `cargo bench --bench proxy` (optional env: PROXY_BENCH_N, PROXY_BENCH_CONCURRENCY,
//! PROXY_BENCH_GATEWAY_THREADS, PROXY_BENCH_ONLY, PROXY_BENCH_ONLY_CONCURRENCY, PROXY_BENCH_PEER).

use std::sync::atomic::{AtomicU64, Ordering};
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
use serde_json::{json, Value};

type HttpClient = Client<HttpConnector, Full<Bytes>>;

const TIME_CAP: Duration = Duration::from_secs(60);
/// The paths measured, in the order of every per-path array (the peer's only when it runs).
const PATHS: [&str; 4] = ["direct", "relay", "gateway", "peer"];
/// With `PROXY_BENCH_ONLY`, the time given to attach a profiler before the calls start.
const ATTACH_PAUSE: Duration = Duration::from_secs(2);

#[derive(Clone)]
struct Target {
    url: String,
    headers: Vec<(&'static str, String)>,
    /// The request body before and after its id: every request gets a fresh id, since a legacy
    /// session refuses an id that is still in use.
    body: (Bytes, Bytes),
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let n: usize = env_or("PROXY_BENCH_N", 3000);
    let concurrency: usize = env_or("PROXY_BENCH_CONCURRENCY", 16);
    let demo = spawn_loopback(DemoOptions::default()).expect("demo server");
    let cfg = Config::from_toml(&format!(
        "[front]\nlisten = \"127.0.0.1:0\"\n[admin]\nenabled = false\n[upstream]\nurl = \"{}\"\n\
         [state]\nkeys = [\"{}\"]\n",
        demo.url(),
        "A".repeat(43)
    ))
    .expect("config");
    let gateway = GatewayRun::start(cfg, demo.url(), env_or("PROXY_BENCH_GATEWAY_THREADS", 0)).await;
    let client = http_client();
    let direct = legacy_target(&client, &demo.url(), "echo").await;
    let relayed = Target { url: gateway.relay_url(), ..direct.clone() };
    let through = modern_target(&gateway.url());
    let mut paths = vec![direct, relayed, through];
    let peer = match std::env::var("PROXY_BENCH_PEER").ok().filter(|v| !v.is_empty()) {
        Some(bin) => {
            let peer = peer::Peer::start(&bin, &demo.url()).await;
            paths.push(legacy_target(&client, &peer.url, peer::TOOL).await);
            Some(peer)
        }
        None => None,
    };
    for _ in 0..200 {
        for target in &paths {
            send(&client, target).await;
        }
    }
    if let Some(only) = std::env::var("PROXY_BENCH_ONLY").ok().filter(|v| !v.is_empty()) {
        let i = PATHS[..paths.len()]
            .iter()
            .position(|p| *p == only)
            .expect("PROXY_BENCH_ONLY: direct, relay, gateway (or peer, with PROXY_BENCH_PEER)");
        one_path(&client, &paths[i], PATHS[i], n).await;
        gateway.shutdown().await;
        return;
    }
    let lat = latencies(&client, &paths, n).await;
    let mut rps = Vec::with_capacity(paths.len());
    for target in &paths {
        rps.push(throughput(&client, target, concurrency, n).await);
    }
    report(&lat, &rps, concurrency);
    gateway.shutdown().await;
    drop(peer);
}

/// The gateway and the bare relay, on the bench's runtime or on a runtime of their own.
enum GatewayRun {
    Shared(Box<Gateway>, String),
    Own {
        urls: (String, String),
        stop: tokio::sync::oneshot::Sender<()>,
        thread: std::thread::JoinHandle<()>,
    },
}

impl GatewayRun {
    async fn start(cfg: Config, upstream: String, threads: usize) -> Self {
        if threads == 0 {
            let relay = relay::spawn(upstream).await;
            return Self::Shared(Box::new(Gateway::start(cfg).await.expect("gateway")), relay);
        }
        let (url_tx, url_rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name("gateway-worker")
                .enable_all()
                .build()
                .expect("gateway runtime");
            rt.block_on(async move {
                let relay = relay::spawn(upstream).await;
                let gateway = Gateway::start(cfg).await.expect("gateway");
                let _ = url_tx.send((gateway.url("/mcp"), relay));
                let _ = tokio::time::timeout(TIME_CAP * 8, stopped).await;
                gateway.shutdown().await;
            });
        });
        let urls = url_rx.await.expect("gateway started");
        Self::Own { urls, stop, thread }
    }

    fn url(&self) -> String {
        match self {
            Self::Shared(g, _) => g.url("/mcp"),
            Self::Own { urls, .. } => urls.0.clone(),
        }
    }

    fn relay_url(&self) -> String {
        match self {
            Self::Shared(_, relay) => relay.clone(),
            Self::Own { urls, .. } => urls.1.clone(),
        }
    }

    async fn shutdown(self) {
        match self {
            Self::Shared(g, _) => g.shutdown().await,
            Self::Own { stop, thread, .. } => {
                let _ = stop.send(());
                tokio::task::spawn_blocking(move || thread.join().expect("gateway thread"))
                    .await
                    .expect("join");
            }
        }
    }
}

/// One path alone, for a profiler: a pause to attach one (`perf stat -p`, `perf record -p`),
/// then `n` calls (bounded by the time cap), and their mean time. The calls are sequential, or
/// spread over `PROXY_BENCH_ONLY_CONCURRENCY` clients as in the throughput phase, so that phase
/// can be counted alone too (`perf stat` of two runs with different `n`). Under
/// `valgrind --tool=callgrind`, two runs with different `n` give the instructions per call.
async fn one_path(client: &HttpClient, target: &Target, name: &str, n: usize) {
    let clients: usize = env_or("PROXY_BENCH_ONLY_CONCURRENCY", 1).max(1);
    println!(
        "pid {}: {n} calls from {clients} clients on the {name} path in {ATTACH_PAUSE:?}",
        std::process::id()
    );
    tokio::time::sleep(ATTACH_PAUSE).await;
    let started = Instant::now();
    let done = if clients == 1 {
        let mut done = 0usize;
        while done < n && started.elapsed() < TIME_CAP {
            send(client, target).await;
            done += 1;
        }
        done
    } else {
        concurrent(client, target, clients, n).await.0
    };
    println!(
        "{name}: {done} calls, {:.1} us each",
        started.elapsed().as_secs_f64() * 1e6 / done.max(1) as f64
    );
}

/// Sequential latencies of each path, the paths taking turns request by request. Each turn
/// starts one path further, so every path follows every other equally often: a path whose
/// process still works after it answered (the peer's) slows whichever call comes next.
async fn latencies(client: &HttpClient, paths: &[Target], n: usize) -> Vec<Vec<Duration>> {
    let mut lat: Vec<Vec<Duration>> = paths.iter().map(|_| Vec::with_capacity(n)).collect();
    let started = Instant::now();
    for turn in 0..n {
        if started.elapsed() > TIME_CAP {
            break;
        }
        for k in 0..paths.len() {
            let i = (turn + k) % paths.len();
            lat[i].push(timed(client, &paths[i]).await);
        }
    }
    for l in &mut lat {
        l.sort();
    }
    lat
}

async fn timed(client: &HttpClient, target: &Target) -> Duration {
    let t = Instant::now();
    send(client, target).await;
    t.elapsed()
}

/// Requests per second of `concurrency` clients making about `n` calls in all, counting the
/// calls made (fewer when the time cap cuts the run short).
async fn throughput(client: &HttpClient, target: &Target, concurrency: usize, n: usize) -> f64 {
    let (done, elapsed) = concurrent(client, target, concurrency, n).await;
    done as f64 / elapsed.as_secs_f64()
}

/// `concurrency` clients making `n / concurrency` calls each (bounded by the time cap); the
/// calls made and the time they took.
async fn concurrent(client: &HttpClient, target: &Target, concurrency: usize, n: usize) -> (usize, Duration) {
    let per_task = (n / concurrency).max(1);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (client, target) = (client.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = 0usize;
            while done < per_task && started.elapsed() < TIME_CAP {
                send(&client, &target).await;
                done += 1;
            }
            done
        }));
    }
    let mut done = 0;
    for t in tasks {
        done += t.await.expect("task");
    }
    (done, started.elapsed())
}

async fn send(client: &HttpClient, target: &Target) -> Bytes {
    let mut req = Request::post(&target.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in &target.headers {
        req = req.header(*k, v);
    }
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed).to_string();
    let body = [&target.body.0[..], id.as_bytes(), &target.body.1[..]].concat();
    let resp = client.request(req.body(Full::new(Bytes::from(body))).expect("request")).await.expect("send");
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    assert!(status == StatusCode::OK, "{} answered {status}: {body:?}", target.url);
    assert!(body.windows(10).any(|w| w == b"Echo: ping"), "unexpected body {body:?}");
    body
}

/// Initializes a legacy session at `url` and returns the target of a `tools/call` of `tool`.
async fn legacy_target(client: &HttpClient, url: &str, tool: &str) -> Target {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}});
    let req = Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::from(init.to_string())))
        .expect("request");
    let resp = client.request(req).await.expect("initialize");
    let session =
        resp.headers().get("mcp-session-id").expect("session id").to_str().expect("ascii").to_owned();
    let _ = resp.into_body().collect().await;
    let headers = vec![("mcp-session-id", session), ("mcp-protocol-version", "2025-11-25".to_owned())];
    let body = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let mut req = Request::post(url).header("content-type", "application/json");
    for (k, v) in &headers {
        req = req.header(*k, v);
    }
    let _ =
        client.request(req.body(Full::new(Bytes::from(body))).expect("request")).await.expect("initialized");
    Target { url: url.to_owned(), headers, body: call_body(tool, None) }
}

fn modern_target(url: &str) -> Target {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let headers = vec![
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", "tools/call".to_owned()),
        ("mcp-name", "echo".to_owned()),
    ];
    Target { url: url.to_owned(), headers, body: call_body("echo", Some(meta)) }
}

/// The body split around its id (`"id":` is written last, so the split is unambiguous).
fn call_body(tool: &str, meta: Option<Value>) -> (Bytes, Bytes) {
    let mut params = json!({"name": tool, "arguments": {"message": "ping"}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    let head = json!({"jsonrpc": "2.0", "method": "tools/call", "params": params}).to_string();
    let head = head.strip_suffix('}').unwrap_or(&head);
    (Bytes::from(format!("{head},\"id\":")), Bytes::from_static(b"}"))
}

fn report(lat: &[Vec<Duration>], rps: &[f64], concurrency: usize) {
    let pct = |v: &[Duration], p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)];
    let us = |x: Duration| x.as_secs_f64() * 1e6;
    let med: Vec<f64> = lat.iter().map(|l| us(pct(l, 0.5))).collect();
    let p99: Vec<f64> = lat.iter().map(|l| us(pct(l, 0.99))).collect();
    println!("proxy benchmark: tools/call echo, {} sequential requests per path, loopback", lat[0].len());
    println!("{:<10} {:>12} {:>12} {:>14}", "path", "median us", "p99 us", format!("req/s @{concurrency}"));
    for (i, path) in PATHS.iter().take(lat.len()).enumerate() {
        println!("{path:<10} {:>12.1} {:>12.1} {:>14.0}", med[i], p99[i], rps[i]);
    }
    println!(
        "added median latency: {:.1} us; p99 ratio {:.2}; median ratio {:.2}; throughput ratio {:.2}",
        med[2] - med[0],
        p99[2] / p99[0],
        med[2] / med[0],
        rps[2] / rps[0]
    );
    println!(
        "a bare relay adds {:.1} us at the median (throughput ratio {:.2}); the gateway adds {:.1} us over it \
         (target at most 15), throughput {:.2}x the relay's (target at least 0.80)",
        med[1] - med[0],
        rps[1] / rps[0],
        med[2] - med[1],
        rps[2] / rps[1]
    );
    if lat.len() > 3 {
        println!(
            "the peer (mcp-proxy) adds {:.1} us at the median, {:.2}x what the gateway adds; \
             throughput {:.2}x the gateway's",
            med[3] - med[0],
            (med[3] - med[0]) / (med[2] - med[0]),
            rps[3] / rps[2]
        );
    }
}

fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).pool_max_idle_per_host(256).build(connector)
}

/// The bare relay: no MCP, only the extra hop.
mod relay {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http::header::{CONTENT_LENGTH, HOST};
    use http::{Request, Response};
    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    use tokio::net::TcpListener;

    use super::HttpClient;

    /// Serves the relay on a loopback port of the current runtime and returns its URL.
    pub(super) async fn spawn(upstream: String) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("relay listener");
        let url = format!("http://{}/mcp", listener.local_addr().expect("relay address"));
        let client = super::http_client();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let (client, upstream) = (client.clone(), upstream.clone());
                let svc = service_fn(move |req| forward(client.clone(), upstream.clone(), req));
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc),
                );
            }
        });
        url
    }

    async fn forward(
        client: HttpClient,
        upstream: String,
        req: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        let (parts, body) = req.into_parts();
        let body = body.collect().await.expect("request body").to_bytes();
        let mut out = Request::post(upstream);
        for (k, v) in parts.headers.iter().filter(|(k, _)| *k != HOST && *k != CONTENT_LENGTH) {
            out = out.header(k, v);
        }
        let resp = client.request(out.body(Full::new(body)).expect("request")).await.expect("upstream");
        let (mut parts, body) = resp.into_parts();
        let body = body.collect().await.expect("upstream body").to_bytes();
        parts.headers.remove(http::header::TRANSFER_ENCODING);
        Ok(Response::from_parts(parts, Full::new(body)))
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The peer path: `mcp-proxy` run as a process of its own in front of the same demo server.
mod peer {
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// The backend's name in the peer's config; the peer namespaces its tools with it.
    const BACKEND: &str = "bench";
    /// The demo's `echo` as the peer lists it (its default separator is `/`).
    pub(super) const TOOL: &str = "bench/echo";
    const START_CAP: Duration = Duration::from_secs(30);
    /// Longest the peer gets to stop after SIGTERM (its own drain is set to 1 s).
    const STOP_CAP: Duration = Duration::from_secs(10);
    /// The version the peer's client negotiates with the demo. It does not send the
    /// `MCP-Protocol-Version` header the transport asks of a client after `initialize`, which
    /// the demo requires, so its config adds it to every request.
    const LEGACY_VERSION: &str = "2025-11-25";

    /// A running peer; killed when dropped.
    pub(super) struct Peer {
        pub(super) url: String,
        child: Child,
        config: std::path::PathBuf,
        log: std::path::PathBuf,
    }

    impl Peer {
        /// Writes the peer's config (one HTTP backend: the demo), starts `bin` on a free loopback
        /// port and waits, at most `START_CAP`, until it accepts a connection.
        pub(super) async fn start(bin: &str, upstream: &str) -> Self {
            let port = free_port();
            let config = std::env::temp_dir().join(format!("proxy-bench-peer-{}.toml", std::process::id()));
            let toml = format!(
                "[proxy]\nname = \"bench-peer\"\nshutdown_timeout_seconds = 1\n[proxy.listen]\nhost = \"127.0.0.1\"\nport = {port}\n\n\
                 [[backends]]\nname = \"{BACKEND}\"\ntransport = \"http\"\nurl = \"{upstream}\"\n\
                 headers = {{ \"MCP-Protocol-Version\" = \"{LEGACY_VERSION}\" }}\n"
            );
            std::fs::write(&config, toml).expect("peer config");
            let log = config.with_extension("log");
            let child = Command::new(bin)
                .arg("--config")
                .arg(&config)
                .env("RUST_LOG", "error")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("peer log"))
                .spawn()
                .unwrap_or_else(|e| panic!("PROXY_BENCH_PEER: cannot start {bin}: {e}"));
            // Its endpoint is the root path.
            let mut peer = Self { url: format!("http://127.0.0.1:{port}/"), child, config, log };
            let started = Instant::now();
            while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
                let exited = peer.child.try_wait().ok().flatten();
                if exited.is_some() || started.elapsed() > START_CAP {
                    let said = std::fs::read_to_string(&peer.log).unwrap_or_default();
                    let tail: Vec<&str> = said.lines().rev().take(10).collect();
                    panic!(
                        "the peer did not listen on {port} ({exited:?}); its log ends:\n{}",
                        tail.join("\n")
                    );
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            peer
        }
    }

    impl Drop for Peer {
        /// SIGTERM first, so that a profiler it runs under (callgrind) writes its counts; a kill
        /// after `STOP_CAP`.
        fn drop(&mut self) {
            let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
            let stopped = Instant::now();
            while matches!(self.child.try_wait(), Ok(None)) && stopped.elapsed() < STOP_CAP {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = std::fs::remove_file(&self.config);
            let _ = std::fs::remove_file(&self.log);
        }
    }

    fn free_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        l.local_addr().expect("address").port()
    }
}
