//! Park mode across replicas: a retry that reaches a replica other than the one holding its
//! parked call is forwarded to that owner over the internal listener, authenticated with the
//! replica MAC; when the owner is gone the retry is replayed from the journal its state carries.
//! The forwarding itself is tested on every upstream transport (Streamable HTTP, stdio,
//! HTTP+SSE); the internal listener's TLS and MAC, which no upstream touches, over HTTP.

use std::process::Stdio;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;
use mrtr_gateway::demo::{self, DemoOptions};
use mrtr_gateway::mrtr::{parse_key_lines, replica_auth, KeyRing};
use serde_json::json;

use super::form_only;
use crate::common::harness::{metric, test_key};
use crate::common::process::{address_in_use, on_free_port, GatewayProcess};
use crate::common::transports::{on_every_transport, Transport, Upstream};
use crate::common::{answer_all, bounded, eventually, Client, HarnessError, Setup, TestResult};

/// A park-mode replica's setup, its internal listener on `port` of loopback.
fn replica(port: u16) -> Setup {
    Setup::new()
        .set("mrtr", "mode = \"park\"")
        .set("cluster", &format!("listen = \"127.0.0.1:{port}\""))
        .set("cluster", &format!("advertise_url = \"http://127.0.0.1:{port}\""))
}

async fn start(setup: &Setup, upstream: &str) -> TestResult<(Gateway, Client)> {
    let gateway = Gateway::start(Config::from_toml(&setup.toml(upstream))?).await?;
    eventually("the gateway's upstream to answer initialize", || gateway.ready.is_ready()).await?;
    let client = Client::new(gateway.url("/mcp"));
    Ok((gateway, client))
}

/// A park-mode replica in this process, its internal listener on a free port (returned).
async fn start_replica(upstream: &str) -> TestResult<(Gateway, Client, u16)> {
    on_free_port(address_in_use, |port| async move {
        let (gateway, client) = start(&replica(port), upstream).await?;
        Ok((gateway, client, port))
    })
    .await
}

fn outcome(gateway: &Gateway, label: &str) -> f64 {
    metric(gateway, &format!("mrtr_gateway_park_outcomes_total{{outcome=\"{label}\"}}"))
}

fn order(client: &Client) -> crate::common::client::Call<'_> {
    client.call_tool("place_order", json!({})).caps(form_only())
}

on_every_transport!(
    a_forwarded_retry_relays_the_owners_progress_before_its_result,
    a_retry_on_another_replica_is_answered_by_the_owner,
    a_chain_whose_owner_was_killed_is_replayed_from_its_journal,
);

/// A park-mode replica in this process in front of `upstream`, its internal listener on a
/// free port (returned).
async fn replica_of(upstream: &Upstream) -> TestResult<(Gateway, Client, u16)> {
    on_free_port(address_in_use, |port| async move {
        let (gateway, client) = upstream.gateway(replica(port)).await?;
        Ok((gateway, client, port))
    })
    .await
}

async fn a_forwarded_retry_relays_the_owners_progress_before_its_result(t: Transport) -> TestResult {
    let upstream = Upstream::start(t).await?;
    let (a, client_a, _) = replica_of(&upstream).await?;
    let (b, client_b, _) = replica_of(&upstream).await?;
    let (q1, s1) = order(&client_a).progress(json!("first")).send().await?.input_required()?;
    let done = order(&client_b).state(&s1).responses(answer_all(&q1)).progress(json!("retry")).send().await?;
    assert!(done.text()?.starts_with("Order #1 placed"), "{:?}", done.body);
    assert_eq!(outcome(&b, "forwarded"), 1.0);
    let (last, notes) = done.events.split_last().unwrap_or((&serde_json::Value::Null, &[]));
    assert_eq!(last, &done.body, "the result comes last");
    assert_eq!(
        notes,
        [json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "retry", "progress": 1, "total": 1, "message": "step 1 of 1"}})],
        "the owner's progress, under this request's own token"
    );
    // Without a token the owner answers the reply alone, as before.
    let (q2, s2) = order(&client_a).send().await?.input_required()?;
    let plain = order(&client_b).state(&s2).responses(answer_all(&q2)).send().await?;
    assert!(plain.text()?.starts_with("Order #2 placed"), "{:?}", plain.body);
    assert_eq!(outcome(&b, "forwarded"), 2.0);
    assert_eq!(upstream.orders(), 2, "each call ran once, on its owner");
    bounded("replica a to drain", a.shutdown()).await?;
    bounded("replica b to drain", b.shutdown()).await?;
    upstream.stop().await
}

async fn a_retry_on_another_replica_is_answered_by_the_owner(t: Transport) -> TestResult {
    let upstream = Upstream::start(t).await?;
    let (a, client_a, _) = replica_of(&upstream).await?;
    let (b, client_b, _) = replica_of(&upstream).await?;

    let (q1, s1) = order(&client_a).send().await?.input_required()?;
    let done = order(&client_b).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #1 placed"), "{}", done.text()?);
    assert_eq!(upstream.orders(), 1, "the owner continued its call: the tool ran once");
    assert_eq!(upstream.tool_calls("place_order"), 1);
    assert_eq!((outcome(&b, "forwarded"), outcome(&a, "resumed")), (1.0, 1.0));
    assert_eq!(outcome(&b, "fallback"), 0.0);

    // The owner remembers the call: a second retry, wherever it lands, is refused there.
    let again = order(&client_b).state(&s1).responses(answer_all(&q1)).send().await?;
    let message = again.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert!(message.contains("already answered"), "{message}");
    assert_eq!(upstream.orders(), 1);
    bounded("replica a to drain", a.shutdown()).await?;
    bounded("replica b to drain", b.shutdown()).await?;
    upstream.stop().await
}

/// A park-mode replica whose internal listener serves TLS on `port` with `pki`'s `localhost`
/// certificate, trusting `ca` (a PEM file) when it forwards.
fn tls_replica(port: u16, dir: &std::path::Path, pki: &super::https::Pki, ca: &str) -> TestResult<Setup> {
    let (cert, key) = (dir.join("replica.pem"), dir.join("replica.key"));
    std::fs::write(&cert, &pki.leaf_pem)?;
    std::fs::write(&key, &pki.key_pem)?;
    Ok(Setup::new()
        .set("mrtr", "mode = \"park\"")
        .set("cluster", &format!("listen = \"127.0.0.1:{port}\""))
        .set("cluster", &format!("advertise_url = \"https://localhost:{port}\""))
        .set("cluster", &format!("tls_cert_file = \"{}\"", cert.display()))
        .set("cluster", &format!("tls_key_file = \"{}\"", key.display()))
        .set("cluster", &format!("tls_ca_file = \"{ca}\"")))
}

/// A [`tls_replica`] in this process on a free port (returned), in front of `upstream`.
async fn start_tls_replica(
    upstream: &str,
    dir: &std::path::Path,
    pki: &super::https::Pki,
    ca: &str,
) -> TestResult<(Gateway, Client, u16)> {
    on_free_port(address_in_use, |port| {
        let setup = tls_replica(port, dir, pki, ca);
        async move {
            let (gateway, client) = start(&setup?, upstream).await?;
            Ok((gateway, client, port))
        }
    })
    .await
}

#[tokio::test]
async fn a_retry_is_forwarded_over_tls_to_an_owner_whose_certificate_verifies() -> TestResult {
    let demo = demo::spawn_loopback(DemoOptions::default())?;
    let dir = tempfile::tempdir()?;
    let (pki, stranger) = (super::https::pki("replicas CA")?, super::https::pki("another CA")?);
    let (ca, wrong_ca) = (dir.path().join("ca.pem"), dir.path().join("wrong-ca.pem"));
    std::fs::write(&ca, &pki.ca_pem)?;
    std::fs::write(&wrong_ca, &stranger.ca_pem)?;
    let ca = ca.display().to_string();
    let (a, client_a, a_port) = start_tls_replica(&demo.url(), dir.path(), &pki, &ca).await?;
    let (b, client_b, _) = start_tls_replica(&demo.url(), dir.path(), &pki, &ca).await?;

    let (q1, s1) = order(&client_a).send().await?.input_required()?;
    let done = order(&client_b).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #1 placed"), "{}", done.text()?);
    assert_eq!((outcome(&b, "forwarded"), outcome(&a, "resumed")), (1.0, 1.0));
    assert_eq!(demo.stats.orders(), 1, "the owner continued its call over TLS");

    // The listener speaks only TLS: a plain request is accepted and closed unanswered.
    crate::common::plaintext::assert_tls_only(std::net::SocketAddr::from(([127, 0, 0, 1], a_port))).await?;

    // A replica that does not trust the replicas' CA cannot reach the owner: it replays.
    let wrong = wrong_ca.display().to_string();
    let (c, client_c, _) = start_tls_replica(&demo.url(), dir.path(), &pki, &wrong).await?;
    let (q2, s2) = order(&client_a).send().await?.input_required()?;
    let replayed = order(&client_c).state(&s2).responses(answer_all(&q2)).send().await?;
    assert!(replayed.text()?.contains("placed"), "{}", replayed.text()?);
    assert_eq!((outcome(&c, "forwarded"), outcome(&c, "fallback")), (0.0, 1.0));
    for (name, gateway) in [("a", a), ("b", b), ("c", c)] {
        bounded(name, gateway.shutdown()).await?;
    }
    bounded("the demo server to stop", demo.shutdown()).await??;
    Ok(())
}

async fn a_chain_whose_owner_was_killed_is_replayed_from_its_journal(t: Transport) -> TestResult {
    let upstream = Upstream::start(t).await?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("owner.toml");
    let owner = on_free_port(address_in_use, |port| {
        let (config, toml) = (config.clone(), upstream.configure(replica(port)).render());
        async move {
            std::fs::write(&config, toml)?;
            GatewayProcess::spawn_args(&["--config", &config.display().to_string()], Stdio::null()).await
        }
    })
    .await?;
    let (b, client_b, _) = replica_of(&upstream).await?;

    let (q1, s1) = order(&owner.client).send().await?.input_required()?;
    drop(owner); // SIGKILL: the parked call dies with its owner.
    let done = order(&client_b).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #2 placed"), "{}", done.text()?);
    assert_eq!(upstream.orders(), 2, "replayed from the journal: the tool ran again");
    assert_eq!(outcome(&b, "fallback"), 1.0);
    assert_eq!(outcome(&b, "forwarded"), 0.0);
    bounded("replica b to drain", b.shutdown()).await?;
    upstream.stop().await
}

/// An owner that restarted (at the same address) no longer holds the call: it says so, and the
/// replica the retry reached replays it from the journal. The owner neither replays it nor
/// forwards it on: one replica serves a retry, and counts how.
#[tokio::test]
async fn an_owner_that_lost_the_call_leaves_the_replay_to_the_replica_the_retry_reached() -> TestResult {
    let upstream = Upstream::start(Transport::Http).await?;
    let (a, client_a, port) = replica_of(&upstream).await?;
    let (b, client_b, _) = replica_of(&upstream).await?;
    let (q1, s1) = order(&client_a).send().await?.input_required()?;
    bounded("the owner to shut down", a.shutdown()).await?;
    let (restarted, _) = upstream.gateway(replica(port)).await?;

    let done = order(&client_b).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #2 placed"), "{}", done.text()?);
    assert_eq!((outcome(&b, "fallback"), outcome(&b, "forwarded")), (1.0, 0.0));
    assert_eq!(
        (outcome(&restarted, "fallback"), outcome(&restarted, "forwarded")),
        (0.0, 0.0),
        "the owner only said it no longer holds the call"
    );
    bounded("the restarted owner to drain", restarted.shutdown()).await?;
    bounded("replica b to drain", b.shutdown()).await?;
    upstream.stop().await
}

/// POSTs `body` to the internal listener at `port` with the MAC header `mac`, if any.
async fn post_internal(port: u16, body: &[u8], mac: Option<String>) -> TestResult<(StatusCode, String)> {
    let http: HyperClient<HttpConnector, Full<Bytes>> =
        HyperClient::builder(TokioExecutor::new()).build_http();
    let mut request = Request::post(format!("http://127.0.0.1:{port}/internal/park/resume"));
    if let Some(mac) = mac {
        request = request.header(replica_auth::HEADER, mac);
    }
    let request = request.body(Full::new(Bytes::copy_from_slice(body)))?;
    bounded("the internal listener", async {
        let response = http.request(request).await?;
        let status = response.status();
        let bytes = response.into_body().collect().await?.to_bytes();
        Ok::<_, HarnessError>((status, String::from_utf8_lossy(&bytes).into_owned()))
    })
    .await?
}

#[tokio::test]
async fn forwarded_retries_without_a_valid_replica_mac_are_refused() -> TestResult {
    let demo = demo::spawn_loopback(DemoOptions::default())?;
    let (a, client_a, port) = start_replica(&demo.url()).await?;
    let (q1, s1) = order(&client_a).send().await?.input_required()?;
    let body = serde_json::to_vec(&json!({
        "principal": "anonymous", "caps": 1, "method": "tools/call", "target": "place_order",
        "params": {"name": "place_order", "arguments": {}}, "state": s1, "responses": answer_all(&q1),
    }))?;
    let ring = KeyRing::new(
        parse_key_lines(&test_key("k1", 0x11)).map_err(|e| HarnessError::Unexpected(e.to_string()))?,
    )
    .map_err(|e| HarnessError::Unexpected(e.to_string()))?;
    let stranger = KeyRing::new(
        parse_key_lines(&test_key("k9", 0x99)).map_err(|e| HarnessError::Unexpected(e.to_string()))?,
    )
    .map_err(|e| HarnessError::Unexpected(e.to_string()))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let refusals = [
        None,
        Some("v1.garbage".to_owned()),
        Some(replica_auth::sign(&ring, now - 3600, &body)),
        Some(replica_auth::sign(&ring, now, b"another body")),
        Some(replica_auth::sign(&stranger, now, &body)),
    ];
    for (i, mac) in refusals.into_iter().enumerate() {
        let (status, text) = post_internal(port, &body, mac).await?;
        assert_eq!((status, text.as_str()), (StatusCode::UNAUTHORIZED, "unauthenticated"), "case {i}");
    }
    assert_eq!(outcome(&a, "unauthenticated"), 5.0);
    assert_eq!(metric(&a, "mrtr_gateway_parked_calls"), 1.0, "a refused request touches no call");
    assert_eq!(demo.stats.orders(), 1);

    // The same body with a valid MAC is served: the owner continues its call.
    let (status, text) = post_internal(port, &body, Some(replica_auth::sign(&ring, now, &body))).await?;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(text.contains("Order #1 placed"), "{text}");
    bounded("replica a to drain", a.shutdown()).await?;
    bounded("the demo server to stop", demo.shutdown()).await??;
    Ok(())
}
