//! Calls per second through the gateway's stdio pool of 1, 2 and 4 processes, against the
//! same server driven directly by a minimal legacy stdio client, and the cost of a cold
//! process start against a warm lease.
//!
//! The server is the interop suite's FastMCP fixture (`legacy_fixture_server.py --stdio`, in
//! the legacy venv that `tests/interop/install.sh` makes), called with its `test_simple_text`
//! tool; without that venv it falls back to the scripted `tests/fixtures/stdio_server.py`
//! under `python3` and its `echo` tool, and says so. The direct client is this file's own:
//! newline-delimited JSON-RPC, `initialize`, `notifications/initialized`, then one call at a
//! time. The pool runs as the gateway runs it: `Pool::lease` then `tools/call` on the lease,
//! `k` callers sharing one pool key over `k` processes.
//!
//! Every loop is bounded in time and count. Run: `cargo bench --bench stdio_pool`
//! (env: STDIO_BENCH_SECS per rate, default 3; STDIO_BENCH_SAMPLES per start cost, default 8).

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mrtr_gateway::protocol::jsonrpc::Outcome;
use mrtr_gateway::upstream::{Pool, PoolKey, StdioSettings, UpstreamSettings};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Most calls one rate measurement makes, whatever the duration.
const MAX_CALLS: u64 = 1_000_000;
/// Bound on any single step (a call, a start, waiting for a warm process).
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The program measured, and the tool called on it.
#[derive(Clone)]
struct Server {
    program: String,
    args: Vec<String>,
    tool: &'static str,
    name: &'static str,
}

/// A legacy stdio client that drives the server process itself.
struct Direct {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

fn server() -> Server {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = root.join("tests/interop/.venv-legacy/bin/python");
    if venv.exists() {
        let script = root.join("tests/interop/legacy_fixture_server.py");
        return Server {
            program: venv.to_string_lossy().into_owned(),
            args: vec![script.to_string_lossy().into_owned(), "--stdio".to_owned()],
            tool: "test_simple_text",
            name: "FastMCP fixture (legacy_fixture_server.py --stdio)",
        };
    }
    let script = root.join("tests/fixtures/stdio_server.py");
    Server {
        program: "python3".to_owned(),
        args: vec![script.to_string_lossy().into_owned()],
        tool: "echo",
        name: "scripted fixture (tests/fixtures/stdio_server.py; run tests/interop/install.sh for the FastMCP one)",
    }
}

fn secs() -> Duration {
    let s = std::env::var("STDIO_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3u64);
    Duration::from_secs(s.clamp(1, 600))
}

fn samples() -> usize {
    let n = std::env::var("STDIO_BENCH_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(8usize);
    n.clamp(1, 100)
}

fn call_params(server: &Server) -> Value {
    let arguments = if server.tool == "echo" { json!({"message": "bench"}) } else { json!({}) };
    json!({"name": server.tool, "arguments": arguments})
}

async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> BenchResult<T> {
    tokio::time::timeout(STEP_TIMEOUT, fut)
        .await
        .map_err(|_| format!("{what} took over {STEP_TIMEOUT:?}").into())
}

// === impl Direct ===

impl Direct {
    /// Starts the server and initialises it; also returns how long that took.
    async fn start(server: &Server) -> BenchResult<(Self, Duration)> {
        let started = Instant::now();
        let mut child = Command::new(&server.program)
            .args(&server.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the server's pipes are missing".into());
        };
        let mut direct = Self { child, stdin, lines: BufReader::new(stdout).lines(), next_id: 0 };
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "direct-bench", "version": "1"}});
        bounded("initialize", direct.request("initialize", init)).await??;
        direct.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
        Ok((direct, started.elapsed()))
    }

    async fn send(&mut self, message: &Value) -> BenchResult {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.stdin.write_all(&line).await?;
        Ok(())
    }

    /// Sends a request and reads lines until its response, skipping anything else.
    async fn request(&mut self, method: &str, params: Value) -> BenchResult<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await?;
        while let Some(line) = self.lines.next_line().await? {
            let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return match message.get("result") {
                    Some(result) => Ok(result.clone()),
                    None => Err(format!("{method} failed: {line}").into()),
                };
            }
        }
        Err("the server closed its output".into())
    }

    async fn stop(mut self) {
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_secs(3), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

/// Calls per second of one direct client, one call at a time.
async fn direct_rate(server: &Server, limit: Duration) -> BenchResult<f64> {
    let (mut direct, _) = Direct::start(server).await?;
    let params = call_params(server);
    let started = Instant::now();
    let mut calls = 0u64;
    while started.elapsed() < limit && calls < MAX_CALLS {
        bounded("a direct call", direct.request("tools/call", params.clone())).await??;
        calls += 1;
    }
    let rate = calls as f64 / started.elapsed().as_secs_f64();
    direct.stop().await;
    Ok(rate)
}

fn pool_of(server: &Server, processes: usize, min_warm: usize) -> BenchResult<Pool> {
    let mut settings =
        UpstreamSettings::stdio(StdioSettings::new(server.program.clone(), server.args.clone()));
    settings.pool_max_sessions = processes;
    settings.pool_max_per_key = processes;
    settings.pool_min_warm = min_warm;
    settings.pool_acquire_timeout = STEP_TIMEOUT;
    Ok(Pool::new(settings)?)
}

fn key(name: &str) -> PoolKey {
    (Arc::from(name), 0)
}

/// One leased `tools/call`; a JSON-RPC error counts as a failure.
async fn pooled_call(pool: &Pool, params: &Value) -> BenchResult {
    let lease = pool.lease(key("bench"), &json!({})).await?;
    match lease.request("tools/call", Some(params.clone())).await? {
        Outcome::Result(_) => Ok(()),
        Outcome::Error(e) => Err(format!("tools/call failed: {}", e.message).into()),
    }
}

/// Calls per second of `processes` callers through a pool of as many processes.
async fn pool_rate(server: &Server, processes: usize, limit: Duration) -> BenchResult<f64> {
    let pool = pool_of(server, processes, 0)?;
    let params = call_params(server);
    // Start every process before the clock does: hold `processes` leases at once.
    let mut held = Vec::new();
    for _ in 0..processes {
        held.push(bounded("a process start", pool.lease(key("bench"), &json!({}))).await??);
    }
    drop(held);
    let calls = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..processes)
        .map(|_| {
            let (pool, params, calls) = (pool.clone(), params.clone(), calls.clone());
            tokio::spawn(async move {
                while started.elapsed() < limit && calls.load(Ordering::Relaxed) < MAX_CALLS {
                    bounded("a pooled call", pooled_call(&pool, &params)).await??;
                    calls.fetch_add(1, Ordering::Relaxed);
                }
                BenchResult::Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker.await??;
    }
    let rate = calls.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    pool.close_idle().await;
    Ok(rate)
}

/// Lease times for keys no session has: each pays a process start (cold), or takes a
/// process the pool started ahead (warm). Before each warm lease the waiting process is given
/// `settle` (twice the measured direct start) to finish its own start-up, as it would have
/// between calls; a lease sooner than that pays the rest of the start.
async fn lease_costs(server: &Server, warm: bool, n: usize, settle: Duration) -> BenchResult<Vec<Duration>> {
    let pool = pool_of(server, n + 2, usize::from(warm))?;
    let mut held = Vec::new();
    let mut costs = Vec::new();
    for i in 0..n {
        if warm {
            bounded("a warm process", async {
                while pool.stats().warm == 0 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await?;
            tokio::time::sleep(settle).await;
        }
        let started = Instant::now();
        held.push(bounded("a lease", pool.lease(key(&format!("k{i}")), &json!({}))).await??);
        costs.push(started.elapsed());
    }
    drop(held);
    pool.close_idle().await;
    Ok(costs)
}

async fn direct_starts(server: &Server, n: usize) -> BenchResult<Vec<Duration>> {
    let mut costs = Vec::new();
    for _ in 0..n {
        let (direct, cost) = Direct::start(server).await?;
        costs.push(cost);
        direct.stop().await;
    }
    Ok(costs)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median_and_min(mut costs: Vec<Duration>) -> (f64, f64) {
    costs.sort();
    (ms(costs[costs.len() / 2]), ms(costs[0]))
}

async fn run() -> BenchResult {
    let server = server();
    let (limit, n) = (secs(), samples());
    println!("stdio pool bench: {}, {limit:?} per rate, {n} samples per start cost", server.name);
    println!();
    println!("| client | processes | calls/s |");
    println!("|---|---|---|");
    println!("| direct legacy stdio client | 1 | {:.0} |", direct_rate(&server, limit).await?);
    for processes in [1, 2, 4] {
        println!("| gateway stdio pool | {processes} | {:.0} |", pool_rate(&server, processes, limit).await?);
    }
    println!();
    println!("| start | median ms | min ms |");
    println!("|---|---|---|");
    let (med, min) = median_and_min(direct_starts(&server, n).await?);
    println!("| direct: spawn + initialize | {med:.1} | {min:.1} |");
    let settle = Duration::from_secs_f64((2.0 * med / 1000.0).clamp(0.5, 30.0));
    let (med, min) = median_and_min(lease_costs(&server, false, n, settle).await?);
    println!("| pool, cold lease (spawn + initialize + ping) | {med:.1} | {min:.1} |");
    let (med, min) = median_and_min(lease_costs(&server, true, n, settle).await?);
    println!("| pool, warm lease (initialize + ping) | {med:.1} | {min:.1} |");
    Ok(())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("stdio pool bench failed: {e}");
        std::process::exit(1);
    }
}
