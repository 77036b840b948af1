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
//! Run: `cargo bench --bench proxy` (optional env: PROXY_BENCH_N, PROXY_BENCH_CONCURRENCY,
//! PROXY_BENCH_GATEWAY_THREADS).

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
    let gateway = GatewayRun::start(cfg, env_or("PROXY_BENCH_GATEWAY_THREADS", 0)).await;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: HttpClient =
        Client::builder(TokioExecutor::new()).pool_max_idle_per_host(256).build(connector);
    let direct = legacy_target(&client, &demo.url()).await;
    let through = modern_target(&gateway.url());
    for _ in 0..200 {
        send(&client, &direct).await;
        send(&client, &through).await;
    }
    let (d, g) = latencies(&client, &direct, &through, n).await;
    let d_rps = throughput(&client, &direct, concurrency, n).await;
    let g_rps = throughput(&client, &through, concurrency, n).await;
    report(&d, &g, d_rps, g_rps, concurrency);
    gateway.shutdown().await;
}

/// The gateway, on the bench's runtime or on a runtime of its own.
enum GatewayRun {
    Shared(Box<Gateway>),
    Own { url: String, stop: tokio::sync::oneshot::Sender<()>, thread: std::thread::JoinHandle<()> },
}

impl GatewayRun {
    async fn start(cfg: Config, threads: usize) -> Self {
        if threads == 0 {
            return Self::Shared(Box::new(Gateway::start(cfg).await.expect("gateway")));
        }
        let (url_tx, url_rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .enable_all()
                .build()
                .expect("gateway runtime");
            rt.block_on(async move {
                let gateway = Gateway::start(cfg).await.expect("gateway");
                let _ = url_tx.send(gateway.url("/mcp"));
                let _ = tokio::time::timeout(TIME_CAP * 4, stopped).await;
                gateway.shutdown().await;
            });
        });
        let url = url_rx.await.expect("gateway started");
        Self::Own { url, stop, thread }
    }

    fn url(&self) -> String {
        match self {
            Self::Shared(g) => g.url("/mcp"),
            Self::Own { url, .. } => url.clone(),
        }
    }

    async fn shutdown(self) {
        match self {
            Self::Shared(g) => g.shutdown().await,
            Self::Own { stop, thread, .. } => {
                let _ = stop.send(());
                tokio::task::spawn_blocking(move || thread.join().expect("gateway thread"))
                    .await
                    .expect("join");
            }
        }
    }
}

async fn latencies(
    client: &HttpClient,
    direct: &Target,
    through: &Target,
    n: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut d, mut g) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let started = Instant::now();
    for _ in 0..n {
        if started.elapsed() > TIME_CAP {
            break;
        }
        d.push(timed(client, direct).await);
        g.push(timed(client, through).await);
    }
    d.sort();
    g.sort();
    (d, g)
}

async fn timed(client: &HttpClient, target: &Target) -> Duration {
    let t = Instant::now();
    send(client, target).await;
    t.elapsed()
}

async fn throughput(client: &HttpClient, target: &Target, concurrency: usize, n: usize) -> f64 {
    let per_task = (n / concurrency).max(1);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (client, target) = (client.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_task {
                if started.elapsed() > TIME_CAP {
                    break;
                }
                send(&client, &target).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    (per_task * concurrency) as f64 / started.elapsed().as_secs_f64()
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

/// Initializes a legacy session on the demo server and returns the `tools/call` target.
async fn legacy_target(client: &HttpClient, url: &str) -> Target {
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
    Target { url: url.to_owned(), headers, body: call_body(None) }
}

fn modern_target(url: &str) -> Target {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let headers = vec![
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", "tools/call".to_owned()),
        ("mcp-name", "echo".to_owned()),
    ];
    Target { url: url.to_owned(), headers, body: call_body(Some(meta)) }
}

/// The body split around its id (`"id":` is written last, so the split is unambiguous).
fn call_body(meta: Option<Value>) -> (Bytes, Bytes) {
    let mut params = json!({"name": "echo", "arguments": {"message": "ping"}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    let head = json!({"jsonrpc": "2.0", "method": "tools/call", "params": params}).to_string();
    let head = head.strip_suffix('}').unwrap_or(&head);
    (Bytes::from(format!("{head},\"id\":")), Bytes::from_static(b"}"))
}

fn report(d: &[Duration], g: &[Duration], d_rps: f64, g_rps: f64, concurrency: usize) {
    let pct = |v: &[Duration], p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)];
    let us = |x: Duration| x.as_secs_f64() * 1e6;
    let (dm, gm, d99, g99) = (pct(d, 0.5), pct(g, 0.5), pct(d, 0.99), pct(g, 0.99));
    println!("proxy benchmark: tools/call echo, {} sequential requests per path, loopback", d.len());
    println!("{:<10} {:>12} {:>12} {:>14}", "path", "median us", "p99 us", format!("req/s @{concurrency}"));
    println!("{:<10} {:>12.1} {:>12.1} {:>14.0}", "direct", us(dm), us(d99), d_rps);
    println!("{:<10} {:>12.1} {:>12.1} {:>14.0}", "gateway", us(gm), us(g99), g_rps);
    println!(
        "added median latency: {:.1} us; p99 ratio {:.2}; median ratio {:.2}; throughput ratio {:.2}",
        us(gm) - us(dm),
        us(g99) / us(d99),
        us(gm) / us(dm),
        g_rps / d_rps
    );
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
