//! Claims of the book (docs/src/how-it-works.md, front-checks.md, configuration.md) about the
//! front, each exercised through a running gateway: concurrent requests whose GET-stream questions
//! reach their own calls, load shedding at `front.max_in_flight`, the pool's 503s, a non-default
//! `front.path`, `allowed_origins` and cache hints, TLS on the front over HTTP/1.1 and HTTP/2, and
//! the HTTP status of a round on a request with a `progressToken`.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::join_all;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::form_only;
use crate::common::answers::NAME;
use crate::common::harness::metric;
use crate::common::legacy::ScriptedLegacy;
use crate::common::{answer_all, bounded, eventually, Client, Harness, HarnessError, Setup, TestResult};

/// Concurrent request chains of the attribution test.
const CHAINS: usize = 8;

/// The root chain `i` answers with, different for every chain.
fn root_of(chain: usize) -> String {
    format!("file:///workspace/chain-{chain}")
}

/// One `list_roots` chain: its `roots/list` arrives on the session's GET stream, and is answered
/// with this chain's own root.
async fn roots_chain(client: &Client, chain: usize) -> TestResult<String> {
    let call = || client.call_tool("list_roots", json!({})).caps(json!({"roots": {}}));
    let (requests, state) = call().send().await?.input_required()?;
    let answers: serde_json::Map<String, Value> =
        requests.keys().map(|k| (k.clone(), json!({"roots": [{"uri": root_of(chain)}]}))).collect();
    call().state(&state).responses(Value::Object(answers)).send().await?.text()
}

#[tokio::test]
async fn concurrent_chains_get_the_answers_to_their_own_get_stream_questions() -> TestResult {
    let h = Harness::start().await?;
    let chains = join_all((0..CHAINS).map(|chain| roots_chain(&h.client, chain)));
    let echoes =
        join_all((0..CHAINS).map(|i| h.client.call_tool("echo", json!({"message": i.to_string()})).send()));
    let (chains, echoes) = tokio::join!(chains, echoes);
    for (chain, text) in chains.into_iter().enumerate() {
        assert_eq!(text?, format!("Roots: {}", root_of(chain)), "chain {chain}");
    }
    for (i, echo) in echoes.into_iter().enumerate() {
        assert_eq!(echo?.text()?, format!("Echo: {i}"));
    }
    assert_eq!(h.demo.stats.answers(), CHAINS as u64, "each chain's answer reached the upstream once");
    h.stop().await
}

/// Writes a `hang` call on a raw connection and keeps it open; dropping the stream closes it.
async fn hanging_call(h: &Harness) -> TestResult<TcpStream> {
    let bytes = h.client.call_tool("hang", json!({})).http1_bytes()?;
    let mut tcp = TcpStream::connect(h.gateway.front_addr).await?;
    tcp.write_all(&bytes).await?;
    Ok(tcp)
}

/// Calls `echo` until it is served (the load that made the gateway refuse it is gone).
async fn served_again(client: &Client) -> TestResult {
    bounded("a call to be served again", async {
        loop {
            let reply = client.call_tool("echo", json!({"message": "again"})).send().await?;
            if reply.status == StatusCode::OK {
                return reply.text().map(drop);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await?
}

#[tokio::test]
async fn requests_past_max_in_flight_are_shed_with_503_and_a_null_id() -> TestResult {
    let h = Setup::new().set("front", "max_in_flight = 2").start().await?;
    let held = [hanging_call(&h).await?, hanging_call(&h).await?];
    let stats = h.demo.stats.clone();
    eventually("both calls to be running upstream", || stats.tool_calls("hang") == 2).await?;
    let reply = h.client.call_tool("echo", json!({"message": "third"})).send().await?;
    let message = reply.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
    assert_eq!(message, "gateway overloaded");
    assert_eq!(reply.body["id"], Value::Null, "refused before the body is read: {:?}", reply.body);
    assert_eq!(h.metric(r#"mrtr_gateway_requests_total{method="tools/call",outcome="overloaded"}"#), 1.0);
    assert_eq!(stats.tool_calls("echo"), 0, "a shed request never reaches the upstream");
    drop(held);
    served_again(&h.client).await?;
    h.stop().await
}

#[tokio::test]
async fn a_streamed_response_counts_against_max_in_flight_until_its_stream_ends() -> TestResult {
    let h = Setup::new().set("front", "max_in_flight = 1").start().await?;
    let call = h.client.call_tool("count_down", json!({"steps": 100, "delay_ms": 50})).progress(json!(1));
    let response = call.open().await?;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let first = bounded("the first progress event", body.frame()).await?;
    assert!(first.is_some_and(|frame| frame.is_ok()), "a first event arrived");
    // The head was sent long ago; the stream still holds the one slot.
    let reply = h.client.call_tool("echo", json!({"message": "second"})).send().await?;
    reply.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
    drop(body);
    served_again(&h.client).await?;
    h.stop().await
}

#[tokio::test]
async fn a_full_pool_queue_and_an_acquire_timeout_both_answer_503() -> TestResult {
    let setup = Setup::new()
        .set("upstream", "pool_max_sessions = 1")
        .set("upstream", "pool_max_queued = 1")
        .set("upstream", "pool_acquire_timeout_ms = 2000");
    let h = setup.start().await?;
    let held = hanging_call(&h).await?;
    let stats = h.demo.stats.clone();
    eventually("the call to hold the only session", || stats.tool_calls("hang") == 1).await?;
    let client = h.client.clone();
    let queued = tokio::spawn(async move { client.call_tool("echo", json!({"message": "q"})).send().await });
    let gateway = &h.gateway;
    eventually("a call to wait in the queue", || {
        metric(gateway, "mrtr_gateway_upstream_queued_calls") == 1.0
    })
    .await?;
    // The queue holds one call: the next is refused at once.
    let full = h.client.call_tool("echo", json!({"message": "full"})).send().await?;
    let message = full.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
    assert_eq!(message, "gateway overloaded: no upstream session is free");
    // The queued call gives up when the acquire timeout passes.
    let waited = bounded("the queued call", queued)
        .await?
        .map_err(|e| HarnessError::Unexpected(format!("the queued call failed: {e}")))??;
    let message = waited.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
    assert_eq!(message, "gateway overloaded: no upstream session is free");
    let rejected =
        |reason: &str| h.metric(&format!(r#"mrtr_gateway_upstream_rejections_total{{reason="{reason}"}}"#));
    assert_eq!((rejected("queue_full"), rejected("pool_exhausted")), (1.0, 1.0));
    assert_eq!(h.metric("mrtr_gateway_upstream_queued_calls"), 0.0);
    assert_eq!(stats.tool_calls("echo"), 0);
    drop(held);
    served_again(&h.client).await?;
    h.stop().await
}

#[tokio::test]
async fn a_configured_path_origins_and_cache_hints_are_what_the_front_serves() -> TestResult {
    let setup = Setup::new()
        .set("front", "path = \"/v2/rpc\"")
        .set("front", "allowed_origins = [\"https://app.example\"]")
        .set("front", "cache_ttl_ms = 30000")
        .set("front", "cache_scope = \"public\"");
    let h = setup.start().await?;
    let old = h.client.call_tool("echo", json!({"message": "m"})).send().await?;
    assert_eq!(old.status, StatusCode::NOT_FOUND, "the default path is not served: {old:?}");
    let client = Client::new(h.gateway.url("/v2/rpc"));
    let echo =
        |origin: &'static str| client.call_tool("echo", json!({"message": "o"})).header("origin", origin);
    assert_eq!(echo("https://app.example").send().await?.text()?, "Echo: o");
    assert_eq!(echo("http://localhost:3000").send().await?.text()?, "Echo: o");
    assert_eq!(echo("https://evil.example").send().await?.status, StatusCode::FORBIDDEN);
    for method in ["tools/list", "server/discover"] {
        let reply = client.request(method).send().await?;
        let result = reply.result()?;
        assert_eq!((&result["ttlMs"], &result["cacheScope"]), (&json!(30000), &json!("public")), "{method}");
    }
    h.stop().await
}

#[tokio::test]
async fn allowed_origins_star_accepts_any_origin() -> TestResult {
    let h = Setup::new().set("front", "allowed_origins = [\"*\"]").start().await?;
    let reply = h.client.call_tool("echo", json!({"message": "o"})).header("origin", "https://any.example");
    assert_eq!(reply.send().await?.text()?, "Echo: o");
    h.stop().await
}

/// A CA's certificate (DER) and a `localhost` certificate it signed with its key, as PEM.
struct FrontPki {
    ca: rustls::pki_types::CertificateDer<'static>,
    cert_pem: String,
    key_pem: String,
}

fn front_pki() -> Result<FrontPki, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate()?;
    let ca = params.self_signed(&ca_key)?.der().clone();
    let issuer = Issuer::new(params, ca_key);
    let key = KeyPair::generate()?;
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])?.signed_by(&key, &issuer)?;
    Ok(FrontPki { ca, cert_pem: leaf.pem(), key_pem: key.serialize_pem() })
}

/// A TLS connection to the front offering only `alpn`; returns the protocol it agreed.
async fn tls_to(
    front: std::net::SocketAddr,
    ca: &rustls::pki_types::CertificateDer<'static>,
    alpn: &[u8],
) -> TestResult<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).map_err(|e| HarnessError::Unexpected(format!("CA: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| HarnessError::Unexpected(format!("TLS client: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = rustls::pki_types::ServerName::try_from("localhost")
        .map_err(|e| HarnessError::Unexpected(format!("server name: {e}")))?;
    let tcp = TcpStream::connect(front).await?;
    let tls = bounded("the TLS handshake", connector.connect(name, tcp)).await??;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn), "the front agreed the offered protocol");
    Ok(tls)
}

/// An `echo` request as the client sends it, to `uri`.
fn echo_request(client: &Client, uri: &str, message: &str) -> TestResult<Request<Full<Bytes>>> {
    let body = client.call_tool("echo", json!({"message": message})).body();
    Ok(Request::post(uri)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", mrtr_gateway::protocol::MODERN_VERSION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .body(Full::new(Bytes::from(serde_json::to_vec(&body)?)))?)
}

async fn text_of(response: http::Response<hyper::body::Incoming>) -> TestResult<String> {
    let bytes = response.into_body().collect().await?.to_bytes();
    let body: Value = serde_json::from_slice(&bytes)?;
    Ok(body.pointer("/result/content/0/text").and_then(Value::as_str).unwrap_or_default().to_owned())
}

#[tokio::test]
async fn the_front_serves_tls_over_http1_and_h2() -> TestResult {
    let pki = front_pki().map_err(|e| HarnessError::Unexpected(format!("certificates: {e}")))?;
    let dir = tempfile::tempdir()?;
    let (cert, key) = (dir.path().join("front.pem"), dir.path().join("front.key"));
    std::fs::write(&cert, &pki.cert_pem)?;
    std::fs::write(&key, &pki.key_pem)?;
    let setup = Setup::new()
        .set("front", &format!("tls_cert_file = {:?}", cert.display().to_string()))
        .set("front", &format!("tls_key_file = {:?}", key.display().to_string()));
    let h = setup.start().await?;
    let front = h.gateway.front_addr;

    let tls = tls_to(front, &pki.ca, b"h2").await?;
    let (mut h2, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await?;
    let conn = tokio::spawn(conn);
    let uri = format!("https://localhost:{}/mcp", front.port());
    let response =
        bounded("an h2 reply", h2.send_request(echo_request(&h.client, &uri, "over h2")?)).await??;
    assert_eq!((response.status(), response.version()), (StatusCode::OK, http::Version::HTTP_2));
    assert_eq!(text_of(response).await?, "Echo: over h2");
    conn.abort();

    let tls = tls_to(front, &pki.ca, b"http/1.1").await?;
    let (mut h1, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    let conn = tokio::spawn(conn);
    let response =
        bounded("an HTTP/1.1 reply", h1.send_request(echo_request(&h.client, "/mcp", "over h1")?)).await??;
    assert_eq!((response.status(), response.version()), (StatusCode::OK, http::Version::HTTP_11));
    assert_eq!(text_of(response).await?, "Echo: over h1");
    conn.abort();

    // Plain HTTP to the TLS port is accepted and closed unanswered (at most a TLS alert).
    crate::common::plaintext::assert_tls_only(front).await?;
    h.stop().await
}

#[tokio::test]
async fn a_missing_capability_keeps_its_400_on_a_request_with_a_progress_token() -> TestResult {
    let upstream = ScriptedLegacy::spawn().await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let reply =
        client.call_tool("url_login", json!({})).caps(form_only()).progress(json!("p-1")).send().await?;
    assert_eq!(reply.content_type, "application/json", "{reply:?}");
    reply.expect_error(StatusCode::BAD_REQUEST, -32021)?;
    assert_eq!(reply.error()?["data"]["requiredCapabilities"], json!({"elicitation": {"url": {}}}));
    bounded("the gateway to stop", gateway.shutdown()).await
}

#[tokio::test]
async fn an_input_required_round_on_a_request_with_a_progress_token_is_plain_json() -> TestResult {
    let h = Harness::start().await?;
    let call = || h.client.call_tool("greet", json!({})).caps(form_only()).progress(json!(7));
    let first = call().send().await?;
    assert_eq!((first.status, first.content_type.as_str()), (StatusCode::OK, "application/json"));
    let (requests, state) = first.input_required()?;
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}!"));
    h.stop().await
}
