//! Connection deadlines: a connection that sends nothing, or stops before its protocol is
//! known (a part of the HTTP/2 preface, a TLS connect with no ClientHello), or goes quiet
//! between requests (HTTP/1 keep-alive, HTTP/2 with no stream), is closed by the gateway
//! within `front.handshake_timeout_ms` / `front.idle_timeout_ms`, on the front, the admin and
//! the internal listener alike, so idle sockets cannot hold every slot; a request in flight,
//! however long, is never cut. A forwarded retry whose owner does not take it (its slots all
//! held, or an address that accepts TCP and never answers) is replayed within
//! `cluster.forward_accept_timeout_ms`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;
use mrtr_gateway::demo::{self, DemoOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::form_only;
use crate::common::client::admin_get;
use crate::common::faulty::tools;
use crate::common::harness::metric;
use crate::common::process::{address_in_use, on_free_port};
use crate::common::rig::Rig;
use crate::common::{answer_all, bounded, bounded_for, eventually, Client, HarnessError, Setup, TestResult};

/// The deadlines of the tests' gateways.
const DEADLINE_MS: u64 = 300;
/// How long a test waits for the gateway to close an idle connection: far past
/// [`DEADLINE_MS`] and the grace of a connection told to close, far below the front's
/// default read timeout (10 s), which closed an HTTP/1 connection idle after a request before.
const CLOSE_BOUND: Duration = Duration::from_secs(5);
/// How long a request is kept in flight in the tests that check it is not cut: several deadlines.
const LONG: Duration = Duration::from_millis(1500);
/// The client preface of HTTP/2.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame.
const SETTINGS: [u8; 9] = [0, 0, 0, 0x4, 0, 0, 0, 0, 0];

/// `setup` with short handshake and idle deadlines.
fn quick(setup: Setup) -> Setup {
    setup
        .set("front", &format!("handshake_timeout_ms = {DEADLINE_MS}"))
        .set("front", &format!("idle_timeout_ms = {DEADLINE_MS}"))
}

/// Waits for the gateway to close `io` (an orderly end or a reset alike), reading and dropping
/// whatever it sends first; what it sent is returned.
async fn closed(what: &str, mut io: impl AsyncRead + Unpin) -> TestResult<Vec<u8>> {
    let (mut sink, what) = (Vec::new(), format!("the gateway to close {what}"));
    // A reset counts as closed as much as an orderly end does.
    let _ = bounded_for(CLOSE_BOUND, &what, io.read_to_end(&mut sink)).await?;
    Ok(sink)
}

/// `n` connections to `addr` that send nothing.
async fn silent(addr: std::net::SocketAddr, n: usize) -> TestResult<Vec<TcpStream>> {
    let mut sockets = Vec::with_capacity(n);
    for _ in 0..n {
        sockets.push(TcpStream::connect(addr).await?);
    }
    Ok(sockets)
}

#[tokio::test]
async fn connections_that_send_nothing_or_go_quiet_are_closed_within_their_deadline() -> TestResult {
    let h = quick(Setup::new()).start().await?;
    let front = h.gateway.front_addr;
    let nothing = TcpStream::connect(front).await?;
    let mut partial = TcpStream::connect(front).await?;
    partial.write_all(&PREFACE[..10]).await?;
    let mut h2c = TcpStream::connect(front).await?;
    h2c.write_all(&[PREFACE, &SETTINGS].concat()).await?;
    let mut kept = TcpStream::connect(front).await?;
    kept.write_all(&h.client.call_tool("echo", json!({"message": "once"})).http1_bytes()?).await?;

    closed("a connection that sent nothing", nothing).await?;
    closed("a connection that sent a part of the HTTP/2 preface", partial).await?;
    closed("an h2c connection quiet after its SETTINGS", h2c).await?;
    let answer = String::from_utf8_lossy(&closed("an HTTP/1 connection quiet after a request", kept).await?)
        .to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 200") && answer.contains("echo: once"), "{answer}");
    assert!(!answer.contains("connection: close"), "the request was answered on a kept-alive connection");
    h.stop().await
}

/// A client configuration trusting `ca_pem`, offering HTTP/1.1.
fn tls_client(ca_pem: &str) -> TestResult<tokio_rustls::TlsConnector> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert?).map_err(|e| HarnessError::Unexpected(format!("CA: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| HarnessError::Unexpected(format!("TLS client: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[tokio::test]
async fn a_tls_connect_with_no_client_hello_is_closed_within_the_handshake_deadline() -> TestResult {
    let pki = super::https::pki("front CA")?;
    let dir = tempfile::tempdir()?;
    let (cert, key) = (dir.path().join("front.pem"), dir.path().join("front.key"));
    std::fs::write(&cert, &pki.leaf_pem)?;
    std::fs::write(&key, &pki.key_pem)?;
    let setup = quick(Setup::new())
        .set("front", &format!("tls_cert_file = {:?}", cert.display().to_string()))
        .set("front", &format!("tls_key_file = {:?}", key.display().to_string()));
    let h = setup.start().await?;
    let front = h.gateway.front_addr;
    let no_hello = TcpStream::connect(front).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost")
        .map_err(|e| HarnessError::Unexpected(format!("server name: {e}")))?;
    let tcp = TcpStream::connect(front).await?;
    let quiet = bounded("a TLS handshake", tls_client(&pki.ca_pem)?.connect(name, tcp)).await??;

    closed("a TLS connect that sent no ClientHello", no_hello).await?;
    closed("a TLS connection that sent nothing after its handshake", quiet).await?;
    h.stop().await
}

#[tokio::test]
async fn healthz_answers_while_a_hundred_idle_sockets_are_open_on_the_admin_port() -> TestResult {
    let h = quick(Setup::new()).start().await?;
    let admin = h.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin listener".into()))?;
    let idle = silent(admin, 100).await?;
    let (status, text) = admin_get(&h.client, admin, "/healthz").await?;
    assert_eq!(status, StatusCode::OK, "{text}");
    drop(idle);
    h.stop().await
}

#[tokio::test]
async fn the_front_serves_once_more_idle_sockets_than_its_slots_timed_out() -> TestResult {
    let h = quick(Setup::new().set("front", "max_connections = 4")).start().await?;
    let idle = silent(h.gateway.front_addr, 10).await?;
    let client = Client::unpooled(h.gateway.url("/mcp"));
    let reply = client.call_tool("echo", json!({"message": "still here"})).send().await?;
    assert_eq!(reply.text()?, "Echo: still here");
    for (i, socket) in idle.into_iter().enumerate() {
        closed(&format!("idle socket {i}"), socket).await?;
    }
    h.stop().await
}

/// A `tools/call` of `tool` as a client sends it, to `uri`.
fn call(client: &Client, uri: &str, tool: &str) -> TestResult<Request<Full<Bytes>>> {
    let body = client.call_tool(tool, json!({})).body();
    Ok(Request::post(uri)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", mrtr_gateway::protocol::MODERN_VERSION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(Full::new(Bytes::from(serde_json::to_vec(&body)?)))?)
}

#[tokio::test]
async fn a_request_in_flight_is_not_cut_by_the_idle_deadline_over_h2c_or_http1() -> TestResult {
    // Bounds of the call itself well past the time it is held.
    let setup = quick(Setup::faulty())
        .set("upstream", "request_timeout_ms = 20000")
        .set("mrtr", "round_timeout_ms = 20000")
        .set("mrtr", "total_timeout_ms = 20000");
    let rig = Rig::with(setup).await?;
    let front = rig.gateway.front_addr;

    // A slow call over plaintext HTTP/2 (prior knowledge): several idle deadlines long.
    let tcp = TcpStream::connect(front).await?;
    let (mut h2, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await?;
    let conn = tokio::spawn(conn);
    let uri = format!("http://127.0.0.1:{}/mcp", front.port());
    let slow = tokio::spawn(h2.send_request(call(&rig.client, &uri, tools::GATED)?));
    let stats = rig.upstream.stats();
    eventually("the call to wait upstream", || stats.gated() == 1).await?;
    tokio::time::sleep(LONG).await;
    rig.upstream.open_gate();
    let response = bounded("the slow call's reply", slow)
        .await?
        .map_err(|e| HarnessError::Unexpected(e.to_string()))??;
    assert_eq!((response.status(), response.version()), (StatusCode::OK, http::Version::HTTP_2));
    let bytes = response.into_body().collect().await?.to_bytes();
    let body: Value = serde_json::from_slice(&bytes)?;
    assert_eq!(body["result"]["content"][0]["text"], json!("released from s1"), "{body}");
    // Quiet once the call is answered: the h2c connection is closed in its turn.
    bounded_for(CLOSE_BOUND, "the gateway to close the quiet h2c connection", conn)
        .await?
        .map_err(|e| HarnessError::Unexpected(e.to_string()))??;

    // A progress stream over HTTP/1 that stays open for several idle deadlines.
    let response = rig.client.call_tool(tools::WAIT, json!({})).progress(json!("p-1")).open().await?;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let first = bounded("the first progress event", body.frame()).await?;
    assert!(first.is_some_and(|frame| frame.is_ok()), "a progress event arrived");
    tokio::time::sleep(LONG).await;
    match tokio::time::timeout(Duration::from_millis(100), body.frame()).await {
        Err(_) | Ok(Some(Ok(_))) => {}
        Ok(other) => panic!("the stream was cut while in flight: {other:?}"),
    }
    drop(body);
    eventually("the upstream call to be cancelled", || stats.cancellations() == 1).await?;
    rig.stop().await
}

/// A park-mode replica with its internal listener on `port`, advertised as `advertised`.
fn replica(port: u16, advertised: u16) -> Setup {
    Setup::new()
        .set("mrtr", "mode = \"park\"")
        .set("cluster", &format!("listen = \"127.0.0.1:{port}\""))
        .set("cluster", &format!("advertise_url = \"http://127.0.0.1:{advertised}\""))
        .set("cluster", "forward_accept_timeout_ms = 1000")
}

/// `setup(port)` started in front of `upstream`, its internal listener on a free port.
async fn start_replica(upstream: &str, setup: impl Fn(u16) -> Setup) -> TestResult<(Gateway, Client)> {
    on_free_port(address_in_use, |port| {
        let toml = setup(port).toml(upstream);
        async move {
            let gateway = Gateway::start(Config::from_toml(&toml)?).await?;
            eventually("the gateway's upstream to answer initialize", || gateway.ready.is_ready()).await?;
            let client = Client::new(gateway.url("/mcp"));
            Ok((gateway, client))
        }
    })
    .await
}

fn outcome(gateway: &Gateway, label: &str) -> f64 {
    metric(gateway, &format!("mrtr_gateway_park_outcomes_total{{outcome=\"{label}\"}}"))
}

fn order(client: &Client) -> crate::common::client::Call<'_> {
    client.call_tool("place_order", json!({})).caps(form_only())
}

/// Parks a call on `owner`, retries it on `other` and checks that the retry was replayed there,
/// well before the whole run's bound.
async fn retried_elsewhere_is_replayed(owner: &Client, other: (&Gateway, &Client)) -> TestResult {
    let (q1, s1) = order(owner).send().await?.input_required()?;
    let started = Instant::now();
    let done = order(other.1).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.contains("placed"), "{}", done.text()?);
    assert!(started.elapsed() < CLOSE_BOUND, "the fallback took {:?}", started.elapsed());
    assert_eq!((outcome(other.0, "fallback"), outcome(other.0, "forwarded")), (1.0, 0.0));
    Ok(())
}

#[tokio::test]
async fn a_retry_whose_owner_has_no_free_slot_is_replayed_within_the_accept_deadline() -> TestResult {
    let demo = demo::spawn_loopback(DemoOptions::default())?;
    // The owner keeps idle sockets for a minute: they hold both its internal listener's slots.
    let (a, client_a) = start_replica(&demo.url(), |port| {
        replica(port, port).set("front", "max_connections = 2").set("front", "handshake_timeout_ms = 60000")
    })
    .await?;
    let (b, client_b) = start_replica(&demo.url(), |port| replica(port, port)).await?;
    let internal = a.cluster_addr.ok_or_else(|| HarnessError::Unexpected("no internal listener".into()))?;
    // Connected first, so accepted first: the forwarded retry waits behind them.
    let held = silent(internal, 2).await?;
    retried_elsewhere_is_replayed(&client_a, (&b, &client_b)).await?;
    drop(held);
    bounded("replica a to drain", a.shutdown()).await?;
    bounded("replica b to drain", b.shutdown()).await?;
    bounded("the demo server to stop", demo.shutdown()).await??;
    Ok(())
}

#[tokio::test]
async fn a_retry_whose_owner_accepts_tcp_but_never_answers_is_replayed_within_the_accept_deadline(
) -> TestResult {
    let demo = demo::spawn_loopback(DemoOptions::default())?;
    // Connects complete in its backlog; nothing ever reads them.
    let black_hole = TcpListener::bind("127.0.0.1:0").await?;
    let hole = black_hole.local_addr()?.port();
    let (a, client_a) = start_replica(&demo.url(), |port| replica(port, hole)).await?;
    let (b, client_b) = start_replica(&demo.url(), |port| replica(port, port)).await?;
    retried_elsewhere_is_replayed(&client_a, (&b, &client_b)).await?;
    drop(black_hole);
    bounded("replica a to drain", a.shutdown()).await?;
    bounded("replica b to drain", b.shutdown()).await?;
    bounded("the demo server to stop", demo.shutdown()).await??;
    Ok(())
}

/// The internal listener sits behind the same stack layers as the front (request id, span,
/// recovery, shedding, timeout, body limit): every answer carries a request id.
#[tokio::test]
async fn the_internal_listener_answers_through_the_front_stack_layers() -> TestResult {
    let demo = demo::spawn_loopback(DemoOptions::default())?;
    let (a, _) = start_replica(&demo.url(), |port| replica(port, port)).await?;
    let internal = a.cluster_addr.ok_or_else(|| HarnessError::Unexpected("no internal listener".into()))?;
    let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let get = Request::get(format!("http://{internal}/elsewhere")).body(Full::new(Bytes::new()))?;
    let answer = bounded("the internal listener's answer", http.request(get)).await??;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    assert!(answer.headers().contains_key("x-request-id"), "{:?}", answer.headers());
    // An unsigned retry is refused with 401, through the stack as well.
    let post = Request::post(format!("http://{internal}{}", mrtr_gateway::cluster::wire::RESUME_PATH))
        .body(Full::new(Bytes::from("{}")))?;
    let refused = bounded("the internal listener's refusal", http.request(post)).await??;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert!(refused.headers().contains_key("x-request-id"), "{:?}", refused.headers());
    bounded("replica a to drain", a.shutdown()).await?;
    bounded("the demo server to stop", demo.shutdown()).await??;
    Ok(())
}
