//! The error boundary seen from outside: what a failing legacy server says stays in the
//! gateway's log, the client gets a fixed message naming the cause, the failure is counted by
//! kind, upstream request durations are observed, and shutdown closes the pooled sessions.

use http::StatusCode;
use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::common::harness::metric;
use crate::common::{bounded, Client, Harness, Setup, TestResult};

const SECRET_BODY: &str = "Traceback (most recent call last): secret db password=hunter2";

/// A "legacy server" that answers every request with HTTP 500 and a stack trace.
async fn failing_upstream() -> TestResult<(String, JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0; 16 * 1024];
                let _ = socket.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{SECRET_BODY}",
                    SECRET_BODY.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            });
        }
    });
    Ok((url, task))
}

/// A gateway in front of `upstream`, not waiting for readiness (the upstream never gets ready).
async fn gateway_before(upstream: &str) -> TestResult<(Gateway, Client)> {
    let gateway = Gateway::start(Config::from_toml(&Setup::new().toml(upstream))?).await?;
    let client = Client::new(gateway.url("/mcp"));
    Ok((gateway, client))
}

#[tokio::test]
async fn an_upstream_500_body_never_reaches_the_client() -> TestResult {
    let (url, server) = failing_upstream().await?;
    let (gateway, client) = gateway_before(&url).await?;
    let reply = client.call_tool("echo", json!({"message": "hi"})).send().await?;
    let message = reply.expect_error(StatusCode::BAD_GATEWAY, -32603)?;
    assert_eq!(message, "upstream returned HTTP 500");
    let body = reply.error()?.to_string();
    assert!(!body.contains("Traceback") && !body.contains("hunter2"), "{body}");
    assert_eq!(metric(&gateway, r#"mrtr_gateway_upstream_errors_total{kind="http_status"}"#), 1.0);
    assert_eq!(
        metric(
            &gateway,
            r#"mrtr_gateway_requests_total{method="tools/call",outcome="upstream_unavailable"}"#
        ),
        1.0
    );
    bounded("the gateway to stop", gateway.shutdown()).await?;
    server.abort();
    Ok(())
}

#[tokio::test]
async fn a_refused_connection_is_named_and_counted() -> TestResult {
    let closed = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", closed.local_addr()?);
    drop(closed);
    let (gateway, client) = gateway_before(&url).await?;
    let reply = client.request("tools/list").send().await?;
    let message = reply.expect_error(StatusCode::BAD_GATEWAY, -32603)?;
    assert_eq!(message, "upstream server unavailable: connection refused");
    assert_eq!(metric(&gateway, r#"mrtr_gateway_upstream_errors_total{kind="connect"}"#), 1.0);
    bounded("the gateway to stop", gateway.shutdown()).await
}

#[tokio::test]
async fn upstream_request_durations_are_observed() -> TestResult {
    let h = Harness::start().await?;
    h.client.request("tools/list").send().await?.result()?;
    let echo = h.client.call_tool("echo", json!({"message": "timed"})).send().await?;
    assert_eq!(echo.text()?, "Echo: timed");
    let count = |method: &str| {
        h.metric(&format!(r#"mrtr_gateway_upstream_request_duration_seconds_count{{method="{method}"}}"#))
    };
    assert_eq!((count("tools/list"), count("tools/call")), (1.0, 1.0));
    h.stop().await
}

#[tokio::test]
async fn shutdown_closes_the_pooled_upstream_sessions() -> TestResult {
    let Harness { demo, gateway, client } = Harness::start().await?;
    let echo = client.call_tool("echo", json!({"message": "pooled"})).send().await?;
    assert_eq!(echo.text()?, "Echo: pooled");
    let open = demo.stats.sessions_alive();
    assert!(open >= 1, "the call left no pooled session");
    assert_eq!(demo.stats.deletes(), 0);
    bounded("the gateway to stop", gateway.shutdown()).await?;
    assert_eq!((demo.stats.deletes(), demo.stats.sessions_alive()), (open, 0));
    bounded("the demo server to stop", demo.shutdown()).await??;
    Ok(())
}
